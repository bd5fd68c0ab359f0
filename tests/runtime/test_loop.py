"""The agent loop over real HTTP: ScriptedServer + the real adapters, for every wire format."""

from __future__ import annotations

import asyncio
import contextvars
import json
import threading
from typing import Any
from unittest import mock

import pytest
from runtime_support import (
    APIS,
    HELLO,
    LOOP_APIS,
    LOOP_PARALLEL_APIS,
    PARALLEL_APIS,
    Barrier,
    ModelFactory,
    Tools,
    hello_library,
    make_agent,
    script,
    sent_calls,
    sent_choice,
    sent_results,
    sent_tools,
    user_texts,
)

from gramagent._messages import AssistantMessage, Conversation, ToolResultMessage, UserMessage
from gramagent._models.base import NamedToolChoice
from gramagent._runtime.events import CaptureSink, Event
from gramagent._runtime.library import ToolLibrary
from gramagent._runtime.limits import RunLimits
from gramagent._runtime.loop import AgentResponse, run_agent, run_agent_sync
from gramagent._spec.model import Agent
from gramagent.errors import ConfigurationError, ModelAPIError, ToolError, ValidationError
from gramagent.testing import ScriptedServer, call, calls, drop, error, reply

REQUEST: contextvars.ContextVar[str] = contextvars.ContextVar("REQUEST", default="none")


@pytest.mark.parametrize("api", LOOP_APIS)
async def test_say_hello_conversation(api: str, tools: Tools, agent: Agent,
                                      server: ScriptedServer, model_for: ModelFactory) -> None:
    """User message -> one sayHello call -> the tool runs -> its result reaches the model."""
    script(server, call("sayHello", {"personName": "Alice"}), reply("Hi Alice, welcome!"))
    response = await run_agent(agent, "Hi, I'm Alice", library=tools.library,
                               model=model_for(server, api))
    assert response.content == "Hi Alice, welcome!"
    (invocation,) = response.tool_invocations
    assert invocation.name == "sayHello" and invocation.ok
    assert invocation.arguments == {"personName": "Alice"} and invocation.result == HELLO
    assert tools.runs["sayHello"] == 1
    assert [m.kind for m in response.context] == ["user", "assistant", "tool_result",
                                                  "assistant"]
    assert response.usage.requests == 2 and response.usage.total_tokens > 0
    first, second = (r.body for r in server.requests)
    assert "sayHello" in sent_tools(first)
    assert sent_results(first) == []
    assert [content for _, content in sent_results(second)] == [HELLO]
    assert user_texts(second) == ["Hi, I'm Alice"]
    assert response.to_dict()["tool_invocations"][0]["result"] == HELLO


@pytest.mark.parametrize("api", APIS)
async def test_resolves_and_closes_its_own_model(api: str, tools: Tools, agent: Agent,
                                                 server: ScriptedServer) -> None:
    """With model=None the agent's ModelRef is resolved against base_url/api."""
    script(server, reply("plain answer"))
    response = await run_agent(agent, "Hi", library=tools.library, api=api,
                               base_url=server.base_url)
    assert response.content == "plain answer"
    assert server.requests[0].body["model"] == "scripted"


@pytest.mark.parametrize("api", LOOP_PARALLEL_APIS)
@pytest.mark.parametrize("flavour", ["async", "sync"])
async def test_parallel_calls_run_concurrently(api: str, flavour: str, server: ScriptedServer,
                                               model_for: ModelFactory) -> None:
    """Eight calls of one turn all start before any finishes; results keep call order."""
    barrier = Barrier(8)
    library = ToolLibrary()
    if flavour == "async":
        @library.register
        async def work(i: int) -> str:
            """Works."""
            await barrier.wait_async(i)
            return f"done {i}"
    else:
        @library.register
        def work(i: int) -> str:
            """Works."""
            barrier.wait_sync(i)
            return f"done {i}"

    ids = [f"call_{i}" for i in range(8)]
    script(server, calls(*(call("work", {"i": i}, id=ids[i]) for i in range(8))), reply("all done"))
    sink = CaptureSink()
    response = await run_agent(make_agent(library), "go", library=library,
                               model=model_for(server, api), events=sink)
    assert response.content == "all done"
    assert [i.result for i in response.tool_invocations] == [f"done {i}" for i in range(8)]
    starts = [n for n, (what, _) in enumerate(barrier.log) if what == "start"]
    ends = [n for n, (what, _) in enumerate(barrier.log) if what == "end"]
    assert len(starts) == len(ends) == 8 and max(starts) < min(ends)
    assert sent_results(server.requests[1].body) == [(ids[i], f"done {i}") for i in range(8)]
    kinds = [e.kind for e in sink.events]
    assert kinds == ["tool_call_planned"] * 8 + ["tool_call_result"] * 8


async def test_cancelling_a_run_cancels_each_call_still_running(
        server: ScriptedServer, model_for: ModelFactory) -> None:
    """A run cancelled while its calls run leaves none of them running: each async call is
    cancelled, whether a quick inline call ran beside them or not."""
    library = ToolLibrary()
    started: list[int] = []
    cancelled: list[int] = []
    all_started = asyncio.Event()

    @library.register
    async def wait(i: int) -> str:
        """Waits forever."""
        started.append(i)
        if len(started) == 3:
            all_started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(i)
            raise
        return "unreachable"

    @library.register(blocking=False)
    def quick() -> str:
        """Answers at once."""
        return "quick"

    script(server, calls(call("quick", {}), *(call("wait", {"i": i}) for i in range(3))),
           reply("never sent"))
    run = asyncio.create_task(run_agent(make_agent(library), "go", library=library,
                                        model=model_for(server, "chat")))
    await asyncio.wait_for(all_started.wait(), 10)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    for _ in range(3):  # let the cancelled calls' tasks finish
        await asyncio.sleep(0)
    assert sorted(cancelled) == [0, 1, 2]
    assert len(server.requests) == 1


@pytest.mark.parametrize("n", [1, 3])
async def test_an_inline_function_returning_a_coroutine_is_awaited_with_its_event(
        n: int, server: ScriptedServer, model_for: ModelFactory) -> None:
    """A ``blocking=False`` function may return a coroutine: awaited, its value the result,
    one result event per call, alone in its turn or among others."""
    library = ToolLibrary()

    async def later(i: int) -> str:
        await asyncio.sleep(0)
        return f"later {i}"

    @library.register(blocking=False)
    def deferred(i: int) -> Any:
        """Answers later."""
        return later(i)

    script(server, calls(*(call("deferred", {"i": i}) for i in range(n))), reply("done"))
    sink = CaptureSink()
    response = await run_agent(make_agent(library), "go", library=library,
                               model=model_for(server, "chat"), events=sink)
    assert [i.result for i in response.tool_invocations] == [f"later {i}" for i in range(n)]
    assert sorted(e.seq for e in sink.of_kind("tool_call_result")) == list(range(1, n + 1))


async def test_thread_calls_each_report_their_result_when_they_finish(
        server: ScriptedServer, model_for: ModelFactory) -> None:
    """The calls of blocking tools in one turn are awaited in call order, yet each one's
    result event comes when it finishes: the first call here waits until the second's
    result has been reported (it would time out if events waited for earlier calls)."""
    reported = threading.Event()
    library = ToolLibrary()

    @library.register
    def first() -> str:
        """Waits for the second call's result event."""
        return "after the second" if reported.wait(10) else "the second was not reported"

    @library.register
    def second() -> str:
        """Answers at once."""
        return "second"

    def sink(event: Event) -> None:
        if event.kind == "tool_call_result" and event.seq == 2:
            reported.set()

    script(server, calls(call("first", {}, id="call_1"), call("second", {}, id="call_2")),
           reply("done"))
    response = await run_agent(make_agent(library), "go", library=library,
                               model=model_for(server, "chat"), events=sink)
    assert [i.result for i in response.tool_invocations] == ["after the second", "second"]
    assert sent_results(server.requests[1].body) == [("call_1", "after the second"),
                                                     ("call_2", "second")]


async def test_a_thread_call_times_out_alone_among_others(
        server: ScriptedServer, model_for: ModelFactory) -> None:
    """A blocking call past its timeout gets ``tool_timeout`` (and its event) while the others
    of its turn keep their results; its thread's late result is dropped."""
    release = threading.Event()
    library = ToolLibrary()

    @library.register
    def stuck() -> str:
        """Blocks until released."""
        release.wait(10)
        return "too late"

    @library.register
    def fine(i: int) -> str:
        """Answers at once."""
        return f"fine {i}"

    script(server, calls(call("fine", {"i": 1}), call("stuck", {}), call("fine", {"i": 2})),
           reply("done"))
    sink = CaptureSink()
    try:
        response = await run_agent(make_agent(library), "go", library=library,
                                   model=model_for(server, "chat"), events=sink,
                                   limits=RunLimits(tool_timeout=0.2))
    finally:
        release.set()
    assert [i.error_type for i in response.tool_invocations] == [None, "tool_timeout", None]
    assert [i.result for i in response.tool_invocations] == ["fine 1", None, "fine 2"]
    results = {e.seq: e for e in sink.of_kind("tool_call_result")}
    assert sorted(results) == [1, 2, 3] and results[2].error_type == "tool_timeout"
    await asyncio.sleep(0.05)  # the stuck thread's result arrives: dropped without a trace


async def test_event_sinks_see_the_runs_context_variables_for_every_kind_of_call(
        server: ScriptedServer, model_for: ModelFactory) -> None:
    """A call's result event is emitted in the run's context (a sink may read context
    variables, e.g. a request id): for inline, async and thread calls, and a timed-out one."""
    release = threading.Event()
    library = ToolLibrary()

    @library.register(blocking=False)
    def inline() -> str:
        """Inline."""
        return "inline"

    @library.register
    async def awaited() -> str:
        """Async."""
        return "async"

    @library.register
    def threaded() -> str:
        """In a thread."""
        return "thread"

    @library.register
    def stuck() -> str:
        """Blocks until released."""
        release.wait(10)
        return "too late"

    seen: list[tuple[int, str]] = []

    def sink(event: Event) -> None:
        if event.kind == "tool_call_result":
            seen.append((event.seq, REQUEST.get()))

    names = ["inline", "awaited", "threaded", "stuck"]
    script(server, calls(*(call(n, {}) for n in names)), reply("done"))
    token = REQUEST.set("run-7")
    try:
        response = await run_agent(make_agent(library), "go", library=library,
                                   model=model_for(server, "chat"), events=sink,
                                   limits=RunLimits(tool_timeout=0.2))
    finally:
        REQUEST.reset(token)
        release.set()
    assert response.tool_invocations[3].error_type == "tool_timeout"
    assert sorted(seen) == [(1, "run-7"), (2, "run-7"), (3, "run-7"), (4, "run-7")]


async def test_cancelling_a_run_abandons_its_thread_calls(
        server: ScriptedServer, model_for: ModelFactory) -> None:
    """A run cancelled while blocking calls run ends at once; their late results are dropped:
    the result reported for each is ``interrupted``, at the cancellation, and nothing later."""
    release = threading.Event()
    started = threading.Semaphore(0)
    library = ToolLibrary()

    @library.register
    def blocks(i: int) -> str:
        """Blocks until released."""
        started.release()
        release.wait(10)
        return f"late {i}"

    script(server, calls(*(call("blocks", {"i": i}) for i in range(3))), reply("never sent"))
    sink = CaptureSink()
    run = asyncio.create_task(run_agent(make_agent(library), "go", library=library,
                                        model=model_for(server, "chat"), events=sink))
    for _ in range(3):
        assert await asyncio.to_thread(started.acquire, True, 10)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    release.set()
    await asyncio.sleep(0.05)  # the threads hand their results over: dropped
    results = sink.of_kind("tool_call_result")
    assert [(r.status, r.error_type) for r in results] == [("error", "interrupted")] * 3
    assert sorted(r.seq for r in results) == [1, 2, 3] and len(server.requests) == 1


@pytest.mark.parametrize("api", APIS)
async def test_multi_turn_context_continues_the_conversation(
        api: str, tools: Tools, agent: Agent, server: ScriptedServer,
        model_for: ModelFactory) -> None:
    """Passing response.context back sends the whole history; the caller's copy is kept."""
    model = model_for(server, api)
    script(server, call("sayHello", {"personName": "Alice"}), reply("Hello Alice!"),
           reply("You are Alice."))
    first = await run_agent(agent, "Hi, I'm Alice", library=tools.library, model=model)
    second = await run_agent(agent, "Who am I?", library=tools.library, model=model,
                             context=first.context)
    assert second.content == "You are Alice."
    assert len(first.context) == 4 and len(second.context) == 6
    assert second.context.id == first.context.id
    assert second.tool_invocations == ()
    body = server.requests[2].body
    assert user_texts(body) == ["Hi, I'm Alice", "Who am I?"]
    assert [c for _, c in sent_results(body)] == [HELLO]
    assert "Hello Alice!" in json.dumps(body)


async def test_tool_context_state_lives_per_conversation(tools: Tools, agent: Agent,
                                                         server: ScriptedServer,
                                                         model_for: ModelFactory) -> None:
    """A ToolContext tool sees the same state across runs of one conversation only."""
    model = model_for(server, "chat")
    script(server, call("visits"), reply("1"), call("visits"), reply("2"), call("visits"),
           reply("fresh"))
    first = await run_agent(agent, "a", library=tools.library, model=model)
    second = await run_agent(agent, "b", library=tools.library, model=model,
                             context=first.context)
    fresh = await run_agent(agent, "c", library=tools.library, model=model)
    results = [r.tool_invocations[0].result for r in (first, second, fresh)]
    assert results == [1, 2, 1]


ERROR_CASES: dict[str, tuple[Any, str, str, list[str]]] = {
    # name: (call, error_type, text expected in the model's error result, ...)
    "invalid_json": (call("sayHello", '{"personName": "Al'), "tool_payload_parse_error",
                     "not valid JSON", []),
    "non_object": (call("sayHello", '["Alice"]'), "tool_payload_parse_error",
                   "must be a JSON object, got an array", []),
    "oversized": (call("sayHello", {"personName": "x" * 9000}), "tool_payload_too_large",
                  "the limit is 8192 bytes", []),
    "unknown_tool": (call("sayHelo", {"personName": "Alice"}), "unknown_tool",
                     "Did you mean 'sayHello'?", []),
    "schema_violation": (call("sayHello", {"personName": 42}), "invalid_arguments",
                         "personName: 42 is not of type 'string'", ['"personName"']),
    "unexpected_argument": (call("sayHello", {"personName": "A", "mood": 1}),
                            "invalid_arguments", "unexpected arguments: 'mood'", []),
    "tool_exception": (call("fail", {"reason": "disk full"}), "tool_exception",
                       "ValueError: boom: disk full", []),
    "tool_timeout": (call("stall", {}), "tool_timeout", "did not finish within 0.2 s", []),
}


@pytest.mark.parametrize("api", LOOP_APIS)
@pytest.mark.parametrize("case", list(ERROR_CASES))
async def test_bad_calls_become_error_results_the_model_sees(
        case: str, api: str, tools: Tools, agent: Agent, server: ScriptedServer,
        model_for: ModelFactory) -> None:
    """Each failure is an error result in the next request; a sibling's result is kept."""
    bad, error_type, expected, more = ERROR_CASES[case]
    bad = call(bad.name, bad.arguments, id="call_bad")
    good = call("sayHello", {"personName": "Alice"}, id="call_good")
    if api in PARALLEL_APIS:
        script(server, calls(bad, good), reply("recovered"))
    else:
        script(server, bad, good, reply("recovered"))
    sink = CaptureSink()
    response = await run_agent(agent, "Hi", library=tools.library,
                               model=model_for(server, api), events=sink)
    assert response.content == "recovered"
    failed, ok = response.tool_invocations
    assert failed.error_type == error_type and failed.error is not None
    assert expected in failed.error and all(m in failed.error for m in more)
    assert ok.ok and ok.result == HELLO and tools.runs["sayHello"] == 1
    results = sent_results(server.requests[-1].body)
    assert [c for _, c in results] == [failed.error, HELLO]
    if api in PARALLEL_APIS:
        assert [i for i, _ in results] == ["call_bad", "call_good"]
    errors = [e for e in sink.of_kind("tool_call_result") if e.status == "error"]
    assert [e.error_type for e in errors] == [error_type]


async def test_schema_error_result_quotes_the_expected_schema(
        tools: Tools, agent: Agent, server: ScriptedServer, model_for: ModelFactory) -> None:
    """invalid_arguments tells the model the schema it should have followed."""
    script(server, call("lookup", {"key": 1, "extra": True}), reply("ok"))
    response = await run_agent(agent, "Hi", library=tools.library,
                               model=model_for(server, "chat"))
    error_text = response.tool_invocations[0].error or ""
    assert "Expected arguments (JSON Schema)" in error_text
    assert '"required":["key"]' in error_text and tools.runs["lookup"] == 0


@pytest.mark.parametrize("api", APIS)
async def test_retries_do_not_run_a_tool_twice(api: str, tools: Tools, agent: Agent,
                                               server: ScriptedServer,
                                               model_for: ModelFactory) -> None:
    """429, 500 and dropped connections are retried by the adapter; the tool runs once."""
    script(server, error(429, "slow down", retry_after=0), call("sayHello", {"personName": "A"}),
           error(500, "oops"), drop(), reply("done"))
    response = await run_agent(agent, "Hi", library=tools.library, model=model_for(server, api))
    assert response.content == "done"
    assert tools.runs["sayHello"] == 1 and len(response.tool_invocations) == 1
    assert len(server.requests) == 5
    assert [len(sent_results(r.body)) for r in server.requests] == [0, 0, 1, 1, 1]


@pytest.mark.parametrize("api", LOOP_APIS)
async def test_model_api_error_carries_the_conversation(api: str, tools: Tools, agent: Agent,
                                                        server: ScriptedServer,
                                                        model_for: ModelFactory) -> None:
    """A failure after a tool turn keeps the user message and the tool result in .context."""
    script(server, call("sayHello", {"personName": "Alice"}), error(400, "bad request"))
    with pytest.raises(ModelAPIError) as info:
        await run_agent(agent, "Hi, I'm Alice", library=tools.library,
                        model=model_for(server, api))
    exc = info.value
    assert exc.status == 400
    context = exc.context
    assert isinstance(context, Conversation)
    assert context[0] == UserMessage(content="Hi, I'm Alice")
    assert isinstance(context[1], AssistantMessage) and context[1].tool_calls[0].name == "sayHello"
    assert isinstance(context[2], ToolResultMessage) and context[2].content == HELLO
    assert exc.usage.requests == 1


async def test_empty_input_is_refused_before_any_request(tools: Tools, agent: Agent,
                                                         server: ScriptedServer,
                                                         model_for: ModelFactory) -> None:
    """ValidationError, and the server never hears of it."""
    with pytest.raises(ValidationError):
        await run_agent(agent, "   ", library=tools.library, model=model_for(server, "chat"))
    assert server.requests == []


async def test_binding_errors_come_before_any_request(server: ScriptedServer,
                                                      model_for: ModelFactory) -> None:
    """An agent whose tools the library lacks fails with ToolError, no request sent."""
    agent = make_agent(hello_library())
    with pytest.raises(ToolError, match="no implementation"):
        await run_agent(agent, "Hi", library=ToolLibrary(), model=model_for(server, "chat"))
    with pytest.raises(ToolError, match="no library was given"):
        await run_agent(agent, "Hi", model=model_for(server, "chat"))
    assert server.requests == []


@pytest.mark.parametrize("api", LOOP_APIS)
async def test_ab_two_libraries_run_the_same_agent(api: str, server: ScriptedServer,
                                                   model_for: ModelFactory) -> None:
    """The same agent spec runs with library A and library B; the model sees each result."""
    library_a, library_b = hello_library("Hello"), hello_library("Howdy")
    agent = make_agent(library_a)
    model = model_for(server, api)
    outputs = []
    for library in (library_a, library_b):
        script(server, call("sayHello", {"personName": "Al"}), reply("ok"))
        response = await run_agent(agent, "Hi", library=library, model=model)
        outputs.append(response.tool_invocations[0].result)
    assert outputs == ["Hello, Al!", "Howdy, Al!"]
    assert [c for _, c in sent_results(server.requests[1].body)] == ["Hello, Al!"]
    assert [c for _, c in sent_results(server.requests[3].body)] == ["Howdy, Al!"]


async def test_structured_results_are_sent_as_compact_json(tools: Tools, agent: Agent,
                                                           server: ScriptedServer,
                                                           model_for: ModelFactory) -> None:
    """A dict result reaches the model as compact JSON; the invocation keeps the value."""
    script(server, call("lookup", {"key": "k"}), reply("ok"))
    response = await run_agent(agent, "Hi", library=tools.library,
                               model=model_for(server, "chat"))
    assert response.tool_invocations[0].result == {"key": "k", "values": [1, 2], "ok": True}
    assert sent_results(server.requests[1].body)[0][1] == '{"key":"k","values":[1,2],"ok":true}'


async def test_long_tool_output_is_truncated_with_a_marker(server: ScriptedServer,
                                                           model_for: ModelFactory) -> None:
    """Output over max_tool_output_chars is cut; the marker says how much."""
    library = ToolLibrary()

    @library.register
    def big() -> str:
        """Big output."""
        return "x" * 100

    script(server, call("big"), reply("ok"))
    await run_agent(make_agent(library), "Hi", library=library, model=model_for(server, "chat"),
                    limits=RunLimits(max_tool_output_chars=10))
    sent = sent_results(server.requests[1].body)[0][1]
    assert sent.startswith("x" * 10 + "\n[") and "90 of 100 characters cut" in sent


@pytest.mark.parametrize("api", LOOP_APIS)
async def test_required_tool_choice_applies_to_the_first_request_only(
        api: str, tools: Tools, agent: Agent, server: ScriptedServer,
        model_for: ModelFactory) -> None:
    """A forced choice is sent first, then "auto" so the model can answer."""
    script(server, call("sayHello", {}), reply("ok"))
    await run_agent(agent, "Hi", library=tools.library, model=model_for(server, api),
                    tool_choice=NamedToolChoice("sayHello"))
    first, second = (sent_choice(r.body) for r in server.requests)
    assert "sayHello" in json.dumps(first)
    assert second == "auto"


def test_run_agent_sync_runs_and_refuses_to_nest(tools: Tools, agent: Agent,
                                                 server: ScriptedServer) -> None:
    """The sync wrapper runs a whole conversation; inside a loop it points at run_agent."""
    script(server, call("sayHello", {"personName": "Alice"}), reply("Hi!"))
    response = run_agent_sync(agent, "Hi", library=tools.library, base_url=server.base_url)
    assert isinstance(response, AgentResponse) and response.content == "Hi!"

    async def nested() -> None:
        run_agent_sync(agent, "Hi", library=tools.library, base_url=server.base_url)

    import asyncio

    with pytest.raises(ConfigurationError, match="await run_agent"):
        asyncio.run(nested())


async def test_to_dict_is_json_ready(tools: Tools, agent: Agent, server: ScriptedServer,
                                     model_for: ModelFactory) -> None:
    """AgentResponse.to_dict() encodes to JSON and rebuilds the conversation."""
    script(server, call("sayHello", {"personName": "Alice"}), reply("Hi!"))
    response = await run_agent(agent, "Hi", library=tools.library,
                               model=model_for(server, "chat"))
    data = json.loads(json.dumps(response.to_dict()))
    assert data["content"] == "Hi!" and data["usage"]["requests"] == 2
    assert Conversation.from_list(data["context"]) == response.context
    assert data["run_id"] == response.run_id and len(response.run_id) == 32
    assert sent_calls(server.requests[1].body) == ["sayHello"]


async def test_event_messages_never_quote_exception_text_or_arguments(
        tools: Tools, agent: Agent, server: ScriptedServer, model_for: ModelFactory) -> None:
    """A tool exception quoting a secret, and a schema violation, reach sinks as bare types.

    Events are written to files and metrics backends: their ``message`` names what went wrong,
    never the exception text or argument values (so no sink needs to mask anything).
    """
    secret = "sk-test" + "A1b2C3d4E5f6G7h8I9j0"
    script(server, calls(call("fail", {"reason": f"key {secret} rejected"}),
                         call("sayHello", {"personName": 4242424242})), reply("ok"))
    sink = CaptureSink()
    response = await run_agent(agent, "Hi", library=tools.library,
                               model=model_for(server, "chat"), events=sink)
    assert [i.error_type for i in response.tool_invocations] == ["tool_exception",
                                                                 "invalid_arguments"]
    assert secret in (response.tool_invocations[0].error or "")  # the model does see it
    results = sorted(sink.of_kind("tool_call_result"), key=lambda e: e.seq)
    messages = [e.message for e in results]
    assert messages == ["raised an exception: ValueError",
                        "arguments do not match the schema (1 problem)"]
    assert secret not in repr(sink.events) and "4242424242" not in repr(sink.events)


@pytest.mark.parametrize("api", LOOP_PARALLEL_APIS)
async def test_a_turn_mixing_inline_async_and_thread_tools(
        api: str, server: ScriptedServer, model_for: ModelFactory) -> None:
    """Inline calls (``blocking=False``) run without a task of their own: the async calls of
    the same turn still run together, and every call gets one result, in call order, with its
    events."""
    barrier = Barrier(2)
    library = ToolLibrary()
    tasks: list[asyncio.Task[Any] | None] = []

    @library.register(blocking=False)
    def quick(i: int) -> str:
        """Answers at once."""
        tasks.append(asyncio.current_task())
        return f"quick {i}"

    @library.register
    async def waits(i: int) -> str:
        """Waits for the other async call."""
        await barrier.wait_async(i)
        return f"waited {i}"

    @library.register
    def threaded(i: int) -> str:
        """Runs in a worker thread."""
        return f"thread {i}"

    order = ["quick", "waits", "threaded", "quick", "waits", "quick"]
    ids = [f"call_{n}" for n in range(len(order))]
    script(server, calls(*(call(name, {"i": n}, id=ids[n]) for n, name in enumerate(order))),
           reply("all done"))
    sink = CaptureSink()
    response = await run_agent(make_agent(library), "go", library=library,
                               model=model_for(server, api), events=sink)
    expected = [f"{'waited' if name == 'waits' else 'thread' if name == 'threaded' else name}"
                f" {n}" for n, name in enumerate(order)]
    assert response.content == "all done"
    assert [i.call_id for i in response.tool_invocations] == ids
    assert [i.result for i in response.tool_invocations] == expected
    assert sent_results(server.requests[1].body) == list(zip(ids, expected, strict=True))
    kinds = [e.kind for e in sink.events]
    assert kinds.count("tool_call_result") == len(order) and kinds[:len(order)] == [
        "tool_call_planned"] * len(order)
    assert sorted(e.seq for e in sink.events if e.kind == "tool_call_result") == [
        1, 2, 3, 4, 5, 6]
    assert tasks == [asyncio.current_task()] * 3  # the run's own task: none created for them


@pytest.mark.parametrize("api", APIS)
@mock.patch("gramagent._models._wire.REMEMBERED_FROM", 1)  # these histories are short
async def test_history_renders_the_same_on_every_request(
        api: str, tools: Tools, agent: Agent, server: ScriptedServer,
        model_for: ModelFactory) -> None:
    """A conversation remembers its rendering for the next request (and the next run): the
    bodies are what a fresh rendering gives, and the memo is no part of its value."""
    model = model_for(server, api)
    script(server, call("sayHello", {"personName": "Alice"}), reply("Hello Alice!"),
           call("sayHello", {"personName": "Bob"}), reply("Hello Bob!"))
    first = await run_agent(agent, "Hi, I'm Alice", library=tools.library, model=model)
    second = await run_agent(agent, "And Bob?", library=tools.library, model=model,
                             context=first.context)
    fresh = Conversation.from_list(second.context.to_list())
    assert fresh == second.context and fresh.to_list() == second.context.to_list()
    assert not fresh.rendered  # the memo is no part of the conversation's value
    if api in ("chat", "responses"):  # the formats that remember their rendering
        assert second.context.rendered
    # The next request renders the history afresh (no memo yet): the same as with memos.
    script(server, reply("again"))
    await run_agent(agent, "Once more", library=tools.library, model=model, context=fresh)
    with_memo, afresh = server.requests[-2].body, server.requests[-1].body
    key = next((k for k in ("messages", "input") if k in afresh), None)
    if key is not None:  # harmony sends a rendered prompt instead
        # afresh: the history, then the answer "Hello Bob!" and the new user message.
        assert afresh[key][:-2] == with_memo[key]
