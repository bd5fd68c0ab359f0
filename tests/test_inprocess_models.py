"""The in-process models of gramagent.testing: FunctionModel and ScriptedModel, run by the loop."""

from __future__ import annotations

import asyncio

import pytest

from gramagent import (
    Agent,
    AssistantMessage,
    ModelAPIError,
    ModelRequest,
    ModelTurn,
    StreamingModel,
    ToolLibrary,
    ToolResultMessage,
    UserMessage,
    run_agent,
)
from gramagent.testing import (
    FunctionModel,
    ScriptedModel,
    call,
    calls,
    completion,
    drop,
    error,
    http_response,
    reply,
)


def _hello() -> tuple[Agent, ToolLibrary]:
    library = ToolLibrary()

    @library.register
    def sayHello(personName: str = "world") -> str:
        """Returns a friendly greeting message for the given name."""
        return f"Hello, {personName}!"

    agent = Agent(name="greeter", model="openai/inprocess", instruction="Greet with sayHello.",
                  tools=tuple(t.spec() for t in library))
    return agent, library


async def test_a_scripted_model_drives_a_whole_run_and_keeps_what_it_was_asked() -> None:
    """A call turn makes the tool run; its result is in the next request; each request keeps
    the messages as they were when it was asked (not the conversation as it grew)."""
    agent, library = _hello()
    model = ScriptedModel([call("sayHello", {"personName": "Alice"}), reply("Hi Alice!", (7, 3))])
    response = await run_agent(agent, "I'm Alice", library=library, model=model)
    assert response.content == "Hi Alice!" and model.remaining == 0
    first, second = model.requests
    assert first.messages == (UserMessage(content="I'm Alice"),)
    assert [d.name for d in first.tools] == ["sayHello"] and first.model == "inprocess"
    assert first.instruction == "Greet with sayHello."
    assert isinstance(second.messages[1], AssistantMessage)
    assert second.messages[1].tool_calls[0].id == "call_1_0"
    assert second.messages[2] == ToolResultMessage(call_id="call_1_0", name="sayHello",
                                                   content="Hello, Alice!")
    assert response.usage.requests == 2 and response.usage.output_tokens > 3
    assert response.usage.input_tokens > 7


async def test_parallel_calls_keep_their_ids_and_order() -> None:
    agent, library = _hello()
    model = ScriptedModel([calls(call("sayHello", {"personName": "A"}, id="a"),
                                 call("sayHello", {"personName": "B"}, id="b")), reply("ok")])
    response = await run_agent(agent, "hi", library=library, model=model)
    assert [i.call_id for i in response.tool_invocations] == ["a", "b"]
    results = [m for m in model.requests[1].messages if isinstance(m, ToolResultMessage)]
    assert [(m.call_id, m.content) for m in results] == [("a", "Hello, A!"), ("b", "Hello, B!")]


@pytest.mark.parametrize("turn", [error(503, "overloaded"), drop()], ids=["error", "drop"])
async def test_error_and_drop_turns_fail_the_request_as_an_adapter_does(turn: object) -> None:
    """An error turn raises ModelAPIError with its status; the run's error keeps the context."""
    agent, library = _hello()
    model = ScriptedModel([turn])  # type: ignore[list-item]
    with pytest.raises(ModelAPIError) as info:
        await run_agent(agent, "hi", library=library, model=model)
    assert info.value.status == (503 if turn == error(503, "overloaded") else None)
    assert info.value.context is not None and len(info.value.context) == 1


async def test_an_exhausted_script_is_a_500_and_loop_replays() -> None:
    agent, library = _hello()
    with pytest.raises(ModelAPIError, match="script exhausted") as info:
        await run_agent(agent, "hi", library=library, model=ScriptedModel())
    assert info.value.status == 500
    looping = ScriptedModel([completion("again")], loop=True)
    for _ in range(3):
        assert (await run_agent(agent, "hi", library=library, model=looping)).content == "again"


def test_a_verbatim_http_answer_is_refused() -> None:
    model = ScriptedModel()
    with pytest.raises(ValueError, match="needs HTTP"):
        model.add(reply("fine"), http_response(b"{}"))
    assert model.remaining == 0


async def test_a_delay_is_awaited_and_can_be_cut_by_the_caller() -> None:
    agent, library = _hello()
    model = ScriptedModel([reply("late", delay=5.0)])
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(run_agent(agent, "hi", library=library, model=model), 0.05)


@pytest.mark.parametrize("flavour", ["sync", "async"])
async def test_a_function_model_answers_with_its_function_streamed_or_not(flavour: str) -> None:
    """Sync and async functions both answer; streamed, the text comes word by word."""
    def answer(request: ModelRequest) -> ModelTurn:
        last = request.messages[-1]
        assert isinstance(last, UserMessage)
        return ModelTurn(text=f" {last.content.upper()}  twice\n", finish_reason="stop")

    async def answer_async(request: ModelRequest) -> ModelTurn:
        await asyncio.sleep(0)
        return answer(request)

    agent, library = _hello()
    model = FunctionModel(answer if flavour == "sync" else answer_async)
    assert isinstance(model, StreamingModel)
    response = await run_agent(agent, "shout", library=library, model=model)
    assert response.content == " SHOUT  twice\n"
    pieces: list[str] = []
    turn = await model.stream_request(model.requests[0], pieces.append)
    assert pieces == [" ", "SHOUT  ", "twice\n"] and "".join(pieces) == turn.text
    assert len(model.requests) == 2
    assert not model.closed
    await model.aclose()
    assert model.closed
