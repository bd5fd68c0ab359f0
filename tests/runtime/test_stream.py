"""run_agent_stream against the scripted server streaming real SSE, in every wire format:
the events come in order, the text deltas join to the answer, and stopping early leaves a
conversation that can be continued."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest
from runtime_support import (
    APIS,
    HELLO,
    LOOP_APIS,
    ModelFactory,
    Tools,
    interrupt_tools,
    make_agent,
    script,
)

from gramagent import (
    AssistantMessage,
    FinalResponse,
    RunHooks,
    TextDelta,
    ToolCallAnswered,
    ToolCallRequested,
    ToolLibrary,
    ToolResultMessage,
    run_agent,
    run_agent_stream,
)
from gramagent._runtime.events import CaptureSink, ToolCallResult
from gramagent._runtime.stream import INTERRUPTED_RESULT, settle_interrupted
from gramagent._spec.model import Agent
from gramagent.errors import ModelAPIError
from gramagent.testing import ScriptedServer, call, calls, error, reply

ANSWER = "Hi Alice, welcome! I greeted you with the sayHello tool; anything else?"


@pytest.mark.parametrize("api", APIS)
async def test_stream_yields_calls_results_text_and_the_response(
        api: str, tools: Tools, agent: Agent, server: ScriptedServer,
        model_for: ModelFactory) -> None:
    script(server, call("sayHello", {"personName": "Alice"}), reply(ANSWER))
    events: list[Any] = []
    async with run_agent_stream(agent, "Hi, I'm Alice", library=tools.library,
                                model=model_for(server, api)) as stream:
        async for event in stream:
            events.append(event)
    kinds = [e.kind for e in events]
    assert kinds[:2] == ["tool_call", "tool_result"] and kinds[-1] == "final"
    assert set(kinds[2:-1]) == {"text_delta"} and len(kinds[2:-1]) > 1
    requested, answered = events[0], events[1]
    assert isinstance(requested, ToolCallRequested) and requested.call.name == "sayHello"
    assert isinstance(answered, ToolCallAnswered) and answered.invocation.result == HELLO
    assert answered.invocation.call_id == requested.call.id
    final = events[-1]
    assert isinstance(final, FinalResponse)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == final.response.content
    assert final.response.content == ANSWER
    assert stream.response is final.response and stream.context == final.response.context
    assert not stream.interrupted
    assert all(r.body.get("stream") is True for r in server.requests)


@pytest.mark.parametrize("api", LOOP_APIS)
async def test_run_agent_with_hooks_streams_and_returns_the_same_answer(
        api: str, tools: Tools, agent: Agent, server: ScriptedServer,
        model_for: ModelFactory) -> None:
    script(server, reply(ANSWER))

    class Collect(RunHooks):
        def __init__(self) -> None:
            self.pieces: list[str] = []

        def on_text(self, text: str) -> None:
            self.pieces.append(text)

    hooks = Collect()
    response = await run_agent(agent, "Hi", library=tools.library,
                               model=model_for(server, api), hooks=hooks)
    assert "".join(hooks.pieces) == response.content == ANSWER


async def test_errors_are_raised_from_the_iteration(tools: Tools, agent: Agent,
                                                    server: ScriptedServer,
                                                    model_for: ModelFactory) -> None:
    script(server, error(400, "bad request body"))
    stream = run_agent_stream(agent, "Hi", library=tools.library, model=model_for(server, "chat"))
    with pytest.raises(ModelAPIError, match="bad request body") as caught:
        async for _ in stream:
            pass
    assert [m.kind for m in caught.value.context or ()] == ["user"]


async def test_closing_mid_answer_keeps_the_partial_text_marked(
        tools: Tools, agent: Agent, model_for: ModelFactory) -> None:
    """The server sends its events slowly: the consumer stops after the first piece of text;
    the run is cancelled and the partial answer is kept, marked."""
    # The role chunk comes first, the first text a pause later; the answer takes 6 pauses.
    with ScriptedServer([reply(ANSWER)], event_pause=1.5) as slow:
        async with run_agent_stream(agent, "Hi", library=tools.library,
                                    model=model_for(slow, "chat")) as stream:
            async for event in stream:
                if isinstance(event, TextDelta):
                    first = event.text
                    break
        assert stream.interrupted and stream.response is None
        *_, last = stream.context
        assert isinstance(last, AssistantMessage) and last.interrupted
        # What the run received before it was stopped: the first piece, at most a few more.
        assert last.content and last.content.startswith(first)
        assert ANSWER.startswith(last.content) and last.content != ANSWER
        assert stream.context.to_list()[-1]["interrupted"] is True


async def test_closing_while_a_tool_runs_leaves_no_dangling_call(
        server: ScriptedServer, model_for: ModelFactory) -> None:
    """Stopped while its tool runs, the call gets an error result; the conversation goes on."""
    library = ToolLibrary()
    started = asyncio.Event()

    @library.register
    async def sayHello(personName: str = "world") -> str:
        """Returns a friendly greeting message for the given name."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    agent = make_agent(library, ["sayHello"])

    script(server, call("sayHello", {"personName": "Alice"}), reply("Hello again."))
    async with run_agent_stream(agent, "Hi", library=library,
                                model=model_for(server, "chat")) as stream:
        async for event in stream:
            if isinstance(event, ToolCallRequested):
                await started.wait()
                break
    kinds = [m.kind for m in stream.context]
    assert kinds == ["user", "assistant", "tool_result", "assistant"]
    result = stream.context[2]
    assert isinstance(result, ToolResultMessage) and result.is_error
    assert result.content == INTERRUPTED_RESULT and result.call_id == event.call.id
    # The settled conversation is a valid context for the next run.
    response = await run_agent(agent, "Still there?", library=library,
                               model=model_for(server, "chat"), context=stream.context)
    assert response.content == "Hello again."


def test_settle_interrupted_answers_only_the_missing_calls() -> None:
    from gramagent import Conversation, ToolCall, UserMessage

    calls = (ToolCall(id="a", name="t", arguments="{}"), ToolCall(id="b", name="t",
                                                                  arguments="{}"))
    conversation = Conversation([
        UserMessage(content="go"), AssistantMessage(content=None, tool_calls=calls),
        ToolResultMessage(call_id="b", name="t", content="done"),
    ])
    settled = settle_interrupted(conversation, "")
    assert [(m.kind, getattr(m, "call_id", None)) for m in settled] == [
        ("user", None), ("assistant", None), ("tool_result", "b"), ("tool_result", "a"),
        ("assistant", None)]
    assert len(conversation) == 3  # not modified
    answered = Conversation([UserMessage(content="go"), AssistantMessage(content="done")])
    assert settle_interrupted(answered, "") == answered


@pytest.mark.slow
def test_the_streaming_example_runs() -> None:
    """examples/streaming.py runs offline and its deltas join to its final answer."""
    import ast
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "examples/streaming.py"], cwd=root,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    deltas = [ast.literal_eval(line[8:]) for line in lines if line.startswith("[delta] ")]
    final = next(line for line in lines if line.startswith("[final] "))
    assert len(deltas) > 1 and repr("".join(deltas)) in final
    assert lines[0].startswith("[call] sayHello")


@pytest.mark.parametrize("order", [("send", "wait"), ("quick", "wait"), ("wait", "block"),
                                   ("send", "quick", "block", "wait")])
async def test_an_interrupted_turn_keeps_the_results_of_the_calls_that_finished(
        order: tuple[str, ...], server: ScriptedServer, model_for: ModelFactory) -> None:
    """Interrupted while a call of the turn still runs: the calls that finished before (an
    inline one, an async one awaited already, a thread that finished while an earlier call
    was awaited) keep their results in the settled conversation; only the unfinished call
    is answered as not run (the model was told a call that ran was not run, and would make
    it again: a mail sent twice)."""
    ran: list[str] = []
    started = asyncio.Event()
    library = interrupt_tools(started, ran)

    agent = make_agent(library)
    script(server, calls(*(call(name, {"n": 1}, id=name) for name in order)))
    sink = CaptureSink()
    async with run_agent_stream(agent, "Go", library=library, events=sink,
                                model=model_for(server, "chat")) as stream:
        async for event in stream:
            if isinstance(event, ToolCallRequested):
                await started.wait()
                async with asyncio.timeout(20):  # a guard against a hang, not a measurement
                    # Each call but "wait" finishes (its result event: its outcome is there).
                    while len(ran) < len(order) - 1 or sum(
                            isinstance(e, ToolCallResult) for e in sink.events) < len(ran):
                        await asyncio.sleep(0.01)
                break
    results = {m.call_id: m.content for m in stream.context if isinstance(m, ToolResultMessage)}
    expected = {"send": "sent", "quick": "quick done", "block": "block done",
                "wait": INTERRUPTED_RESULT}
    assert results == {name: expected[name] for name in order}


async def test_aclose_cancelled_while_the_run_winds_down_is_cancelled_still(
        server: ScriptedServer, model_for: ModelFactory) -> None:
    """The task closing the stream is cancelled while the run it cancelled still cleans up
    (here: an approve callback that takes its time): its own cancellation reaches it (it was
    swallowed with the run's, so the closing task went on as if never cancelled), and the
    conversation is settled all the same."""
    library = ToolLibrary()

    @library.register(requires_approval=True)
    def sayHello(personName: str = "world") -> str:
        """Returns a friendly greeting message for the given name."""
        return f"Hello, {personName}!"

    agent = make_agent(library, ["sayHello"])
    asked, cleaning = asyncio.Event(), asyncio.Event()

    async def approve(request: Any) -> bool:
        asked.set()
        try:
            await asyncio.Event().wait()
        finally:
            cleaning.set()
            await asyncio.sleep(30)  # a slow clean-up, cut short by the second cancellation
        return True

    script(server, call("sayHello", {"personName": "Alice"}))
    stream = run_agent_stream(agent, "Hi", library=library, approve=approve,
                              model=model_for(server, "chat"))
    async for event in stream:
        if isinstance(event, ToolCallRequested):
            break
    async with asyncio.timeout(20):  # a guard against a hang, not a measurement
        await asked.wait()
        closer = asyncio.create_task(stream.aclose())
        await cleaning.wait()
        closer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await closer
    assert stream.interrupted
    kinds = [m.kind for m in stream.context]
    assert kinds == ["user", "assistant", "tool_result", "assistant"]


async def test_a_stream_left_without_closing_stops_its_run(
        server: ScriptedServer, model_for: ModelFactory) -> None:
    """`break` out of `async for` without `async with` or `aclose()`: nothing can close the
    stream, and its run went on in the background, calling tools nobody listened to (a task
    of the stream held the stream alive). Dropped, the stream cancels its run."""
    library = ToolLibrary()
    started, cancelled = asyncio.Event(), asyncio.Event()

    @library.register
    async def sayHello(personName: str = "world") -> str:
        """Returns a friendly greeting message for the given name."""
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    agent = make_agent(library, ["sayHello"])
    script(server, call("sayHello", {"personName": "Alice"}), reply("never asked"))

    async def consume() -> None:
        async for event in run_agent_stream(agent, "Hi", library=library,
                                            model=model_for(server, "chat")):
            if isinstance(event, ToolCallRequested):
                await started.wait()
                break

    await consume()
    gc.collect()
    async with asyncio.timeout(20):  # a guard against a hang, not a measurement
        await cancelled.wait()
    assert len(server.requests) == 1
