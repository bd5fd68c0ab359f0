"""Run limits, the repeated-call guard, dry runs, events and metrics of the loop.

Most tests go over real HTTP (ScriptedServer + the real adapters); a few use a hand-written
Model where the scripted server cannot produce the situation (no usage reported, a model that
never answers).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from runtime_support import (
    HELLO,
    LOOP_APIS,
    LOOP_PARALLEL_APIS,
    ModelFactory,
    Tools,
    make_agent,
    make_tools,
    reference_hash,
    script,
    sent_choice,
    sent_results,
)

from gramagent._messages import Conversation, ToolCall, ToolResultMessage, Usage
from gramagent._models.base import ModelRequest, ModelTurn
from gramagent._models.registry import resolve_model
from gramagent._runtime.events import CaptureSink, ToolCallPlanned, ToolCallResult, ToolMetrics
from gramagent._runtime.library import ToolLibrary
from gramagent._runtime.limits import RunLimits
from gramagent._runtime.loop import run_agent, run_agent_sync
from gramagent._spec.model import Agent
from gramagent.errors import LimitExceeded
from gramagent.testing import ScriptedServer, call, calls, reply

# -- limits -----------------------------------------------------------------------------------

@pytest.mark.parametrize("api", LOOP_APIS)
async def test_iteration_limit_stops_with_the_conversation(api: str, tools: Tools, agent: Agent,
                                                           server: ScriptedServer,
                                                           model_for: ModelFactory) -> None:
    """A model that keeps calling tools stops at max_iterations; nothing is lost."""
    script(server, *(call("sayHello", {"personName": f"P{i}"}) for i in range(5)))
    with pytest.raises(LimitExceeded) as info:
        await run_agent(agent, "Hi", library=tools.library, model=model_for(server, api),
                        limits=RunLimits(max_iterations=3))
    exc = info.value
    assert (exc.limit, exc.value, exc.observed) == ("max_iterations", 3, 3)
    assert "max_iterations=3" in str(exc)
    assert len(server.requests) == 3 and tools.runs["sayHello"] == 3
    assert [m.kind for m in exc.context] == ["user"] + ["assistant", "tool_result"] * 3
    assert exc.usage.requests == 3


def test_default_iteration_limit_is_ten(tools: Tools, agent: Agent,
                                        server: ScriptedServer) -> None:
    """Without limits the seeds' ten iterations apply."""
    script(server, *(call("sayHello", {"personName": f"P{i}"}) for i in range(12)))
    with pytest.raises(LimitExceeded) as info:
        run_agent_sync(agent, "Hi", library=tools.library, base_url=server.base_url)
    assert info.value.observed == 10 and len(server.requests) == 10


@pytest.mark.parametrize("api", LOOP_APIS)
async def test_token_budget_from_reported_usage(api: str, tools: Tools, agent: Agent,
                                                server: ScriptedServer,
                                                model_for: ModelFactory) -> None:
    """Once reported usage reaches max_tokens, the next request is not sent."""
    hello = call("sayHello", {"personName": "A"})
    script(server, calls(hello, usage=(100, 50)), calls(hello, usage=(100, 50)),
           reply("never sent", usage=(1, 1)))
    with pytest.raises(LimitExceeded) as info:
        await run_agent(agent, "Hi", library=tools.library, model=model_for(server, api),
                        limits=RunLimits(max_tokens=200))
    exc = info.value
    assert (exc.limit, exc.value, exc.observed) == ("max_tokens", 200, 300)
    assert exc.usage == Usage(input_tokens=200, output_tokens=100, requests=2)
    assert "token budget of 200" in str(exc) and server.remaining == 1
    assert sum(isinstance(m, ToolResultMessage) for m in exc.context) == 2


@pytest.mark.parametrize("api", LOOP_APIS)
async def test_retry_budget_stops_a_tool_called_wrongly_again_and_again(
        api: str, tools: Tools, agent: Agent, server: ScriptedServer,
        model_for: ModelFactory) -> None:
    """Three invalid calls to one tool stop the run; every error result is in .context."""
    script(server, *(call("sayHello", {"personName": i}) for i in range(3)), reply("never"))
    with pytest.raises(LimitExceeded) as info:
        await run_agent(agent, "Hi", library=tools.library, model=model_for(server, api))
    exc = info.value
    assert (exc.limit, exc.value, exc.observed) == ("max_invalid_calls_per_tool", 3, 3)
    assert "'sayHello'" in str(exc) and "invalid_arguments" in str(exc)
    results = [m for m in exc.context if isinstance(m, ToolResultMessage)]
    assert len(results) == 3 and all(r.is_error for r in results)
    assert tools.runs["sayHello"] == 0 and server.remaining == 1


async def test_retry_budget_is_per_tool(tools: Tools, agent: Agent, server: ScriptedServer,
                                        model_for: ModelFactory) -> None:
    """Invalid calls spread over tools stay under each tool's budget."""
    script(server, call("sayHello", {"personName": 1}), call("lookup", {"key": 1}),
           call("sayHello", {"personName": 2}), call("lookup", {"key": 2}), reply("fine"))
    response = await run_agent(agent, "Hi", library=tools.library,
                               model=model_for(server, "chat"))
    assert response.content == "fine"
    assert [i.error_type for i in response.tool_invocations] == ["invalid_arguments"] * 4


@pytest.mark.parametrize("api", LOOP_PARALLEL_APIS)
async def test_max_tool_calls_closes_the_turn_and_stops(api: str, tools: Tools, agent: Agent,
                                                        server: ScriptedServer,
                                                        model_for: ModelFactory) -> None:
    """A turn going over max_tool_calls is not run; every call id still gets a result."""
    script(server, calls(*(call("sayHello", {"personName": str(i)}, id=f"c{i}")
                           for i in range(3))), reply("never"))
    with pytest.raises(LimitExceeded) as info:
        await run_agent(agent, "Hi", library=tools.library, model=model_for(server, api),
                        limits=RunLimits(max_tool_calls=2))
    exc = info.value
    assert (exc.limit, exc.observed) == ("max_tool_calls", 3)
    results = [m for m in exc.context if isinstance(m, ToolResultMessage)]
    assert [r.call_id for r in results] == ["c0", "c1", "c2"]
    assert all("limit of 2 tool calls" in r.content for r in results)
    assert tools.runs["sayHello"] == 0


class StuckModel:
    """A model that answers the first request with a call, then never answers."""

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    async def request(self, request: ModelRequest) -> ModelTurn:
        self.requests.append(request)
        if len(self.requests) == 1:
            return ModelTurn(tool_calls=(ToolCall(id="c1", name="sayHello", arguments="{}"),))
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        pass


async def test_wall_time_cuts_a_hanging_model_request(tools: Tools, agent: Agent) -> None:
    """The run's wall-clock limit ends a request that never returns; the tool turn is kept."""
    model = StuckModel()
    with pytest.raises(LimitExceeded) as info:
        await run_agent(agent, "Hi", library=tools.library, model=model,
                        limits=RunLimits(wall_time=0.3))
    exc = info.value
    assert exc.limit == "wall_time" and "waiting for the model" in str(exc)
    assert [m.kind for m in exc.context] == ["user", "assistant", "tool_result"]
    assert len(model.requests) == 2


def _hanging_tools() -> ToolLibrary:
    """``later``: an inline tool returning an awaitable that never ends; ``stuck``: an async
    tool that never ends."""
    library = ToolLibrary()

    @library.register(blocking=False)
    def later(n: int) -> Any:
        """Returns an awaitable that never ends."""
        return asyncio.Event().wait()

    @library.register
    async def stuck(n: int) -> str:
        """Never ends."""
        await asyncio.Event().wait()
        return "unreachable"

    return library


def _stated_timeout(text: str) -> float:
    """The seconds a tool_timeout result says the call was given."""
    return float(text.split("did not finish within ")[1].split(" s")[0])


@pytest.mark.slow
@settings(max_examples=6, deadline=None)
@given(st.lists(st.sampled_from(["later", "stuck"]), min_size=1, max_size=4).filter(
    lambda names: "later" in names))
async def test_inline_awaitables_one_after_another_share_the_wall_time(
        names: list[str]) -> None:
    """Inline calls whose functions return awaitables are awaited one after another: each is
    bounded by the time left in the run when it starts, not when the turn started (three of
    them took three times the wall time), so their stated timeouts add up to no more than the
    wall time, and the run stops at it."""
    library = _hanging_tools()
    agent = Agent(name="hanging", model="openai/scripted", instruction="x",
                  tools=tuple(t.spec() for t in library))
    wall = 0.3
    with ScriptedServer() as srv:
        srv.add(calls(*(call(name, {"n": i}, id=f"c{i}") for i, name in enumerate(names))),
                reply("done"))
        model = resolve_model("openai/scripted", api="chat", base_url=srv.base_url)
        try:
            with pytest.raises(LimitExceeded) as info:
                await run_agent(agent, "Go", library=library, model=model,
                                limits=RunLimits(wall_time=wall, tool_timeout=60))
        finally:
            await model.aclose()
    assert info.value.limit == "wall_time"
    results = [m for m in info.value.context if isinstance(m, ToolResultMessage)]
    assert [r.call_id for r in results] == [f"c{i}" for i in range(len(names))]
    inline = [_stated_timeout(r.content) for r, name in zip(results, names, strict=True)
              if name == "later"]
    assert sum(inline) <= wall
    # The async calls (started before the inline ones, in _run) are bounded by the time left
    # in the run when they start, not by the tool timeout of 60 s.
    assert all(_stated_timeout(r.content) <= wall
               for r, name in zip(results, names, strict=True) if name == "stuck")


def _late_start_tools() -> ToolLibrary:
    """``slow``: an inline function, and ``hog``: an async tool that blocks before its first
    await, each holding the event loop past a wall time of a second; ``quick``: an async
    tool that would finish at once if it were allowed to start."""
    library = ToolLibrary()

    @library.register(blocking=False)
    def slow(n: int) -> str:
        """Holds the event loop."""
        time.sleep(1.3)
        return "slow"

    @library.register
    async def hog(n: int) -> str:
        """Holds the event loop before its first await."""
        time.sleep(1.3)
        return "hog"

    @library.register
    async def quick(n: int) -> str:
        """Called only once the run's time is up: it must not run."""
        raise AssertionError("called after the run's time was up")  # its result says so

    @library.register
    async def early(n: int) -> str:
        """Done at once: in time, if it starts before the run's time is up."""
        return "early"

    @library.register
    def pause(n: int) -> str:
        """Done after one short wait, in a worker thread."""
        time.sleep(0.05)
        return "pause"

    return library


async def late_start_run(before: str, after: str) -> tuple[str, ToolResultMessage]:
    """A run whose one turn calls ``before`` (holding the event loop past the wall time),
    then ``after``: the wall time's stop, and ``before``'s and ``after``'s results."""
    library = _late_start_tools()
    agent = Agent(name="late", model="openai/scripted", instruction="x",
                  tools=tuple(t.spec() for t in library))
    with ScriptedServer() as srv:
        srv.add(calls(call(before, {"n": 0}, id="c0"), call(after, {"n": 1}, id="c1")),
                reply("done"))
        model = resolve_model("openai/scripted", api="chat", base_url=srv.base_url)
        try:
            with pytest.raises(LimitExceeded) as info:
                await run_agent(agent, "Go", library=library, model=model,
                                limits=RunLimits(wall_time=1.0, tool_timeout=60))
        finally:
            await model.aclose()
    assert info.value.limit == "wall_time"
    results = {m.call_id: m for m in info.value.context if isinstance(m, ToolResultMessage)}
    return results["c0"].content, results["c1"]


@pytest.mark.slow
async def test_an_async_call_that_starts_late_is_bounded_by_the_end_of_the_run() -> None:
    """An async call that can only start once another call of its turn let go of the event
    loop (an async tool that blocks before its first await: the calls start in call order,
    each running until it first waits) is bounded by the end of the run's wall time, not by
    the time that was left when the turn's calls were started: its run is over by then, so it
    times out instead of running on. (A call in a worker thread is bounded the same way.)"""
    ran, late = await late_start_run("hog", "quick")
    assert ran == "hog"  # it ran to its end: nothing could interrupt it
    assert late.is_error and "'quick' was not run: the run's time was up" in late.content
    ran, late = await late_start_run("hog", "pause")
    assert ran == "hog"
    assert late.is_error and "'pause' was not run: the run's time was up" in late.content


@pytest.mark.slow
async def test_async_calls_start_before_the_inline_calls_of_their_turn() -> None:
    """A turn's async calls run until they first wait before its inline calls run (started
    eagerly on 3.12; on 3.11 the turn lets the event loop run their first steps first): one
    that never waits is done in time even when an inline call after it holds the event loop
    past the wall time (started only then, it would not be run at all). A call in a worker
    thread starts at once too, alongside."""
    ran, early = await late_start_run("slow", "early")
    assert ran == "slow" and not early.is_error and early.content == "early"
    ran, alongside = await late_start_run("slow", "pause")
    assert ran == "slow" and not alongside.is_error and alongside.content == "pause"


async def test_a_callers_own_timeout_is_not_the_wall_time(tools: Tools, agent: Agent) -> None:
    """Cancellation from outside the run (here the caller's shorter timeout) passes through
    as the caller's, not as a wall_time LimitExceeded; a finished run leaves no timer behind
    that could cancel the caller later."""
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.2):
            await run_agent(agent, "Hi", library=tools.library, model=StuckModel(),
                            limits=RunLimits(wall_time=30))
    quick = SilentModel([ModelTurn(text="done")])
    response = await run_agent(agent, "Hi", library=tools.library, model=quick,
                               limits=RunLimits(wall_time=0.05))
    assert response.content == "done"
    await asyncio.sleep(0.1)  # past that run's deadline: nothing cancels this task


async def test_concurrent_runs_each_get_their_own_wall_time(tools: Tools, agent: Agent) -> None:
    """Runs on one event loop share a deadline watcher: a run with a short wall time started
    after one with a long wall time is still cut at its own deadline, and a run that ends
    leaves the others' deadlines in force."""
    long_run = asyncio.create_task(run_agent(agent, "Hi", library=tools.library,
                                             model=StuckModel(),
                                             limits=RunLimits(wall_time=60)))
    await asyncio.sleep(0)
    done = await run_agent(agent, "Hi", library=tools.library,
                           model=SilentModel([ModelTurn(text="done")]),
                           limits=RunLimits(wall_time=30))
    assert done.content == "done"
    async with asyncio.timeout(20):  # a guard against a hang, not a measurement
        short = [run_agent(agent, "Hi", library=tools.library, model=StuckModel(),
                           limits=RunLimits(wall_time=wall)) for wall in (0.2, 0.1)]
        outcomes = await asyncio.gather(*short, return_exceptions=True)
    assert [type(o) for o in outcomes] == [LimitExceeded, LimitExceeded]
    assert all(o.limit == "wall_time" for o in outcomes if isinstance(o, LimitExceeded))
    assert not long_run.done()
    long_run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await long_run


class SilentModel:
    """Answers with a scripted list of turns and never reports usage."""

    def __init__(self, turns: list[ModelTurn]) -> None:
        self.turns = turns

    async def request(self, request: ModelRequest) -> ModelTurn:
        return self.turns.pop(0)

    async def aclose(self) -> None:
        pass


async def test_token_usage_is_estimated_when_not_reported(tools: Tools, agent: Agent) -> None:
    """About four characters a token, for input and output, when a server reports nothing."""
    model = SilentModel([ModelTurn(text="x" * 400)])
    response = await run_agent(agent, "y" * 4000, library=tools.library, model=model)
    assert response.usage.output_tokens == 100
    assert 1000 < response.usage.input_tokens < 1400  # the message plus instruction and tools
    model = SilentModel([ModelTurn(tool_calls=(ToolCall(id="c", name="sayHello",
                                                        arguments="{}"),)), ModelTurn(text="z")])
    with pytest.raises(LimitExceeded) as info:
        await run_agent(agent, "y" * 4000, library=tools.library, model=model,
                        limits=RunLimits(max_tokens=500))
    assert info.value.limit == "max_tokens"


# -- repeated-call guard ----------------------------------------------------------------------

@pytest.mark.parametrize("api", LOOP_APIS)
async def test_repeated_call_is_answered_without_running_it(api: str, tools: Tools,
                                                            agent: Agent,
                                                            server: ScriptedServer,
                                                            model_for: ModelFactory) -> None:
    """The same call again is not run: it gets the earlier output, is recorded as
    repeated_call, and the next request forbids tools."""
    same = {"personName": "Alice"}
    script(server, call("sayHello", same), call("sayHello", dict(reversed(same.items()))),
           reply("Hello Alice!"))
    sink = CaptureSink()
    response = await run_agent(agent, "Hi", library=tools.library,
                               model=model_for(server, api), events=sink)
    assert response.content == "Hello Alice!" and response.stopped_by == "repeated_call"
    assert tools.runs["sayHello"] == 1
    first, second = response.tool_invocations
    assert first.ok and second.error_type == "repeated_call" and not second.ok
    assert second.error is None and second.result == first.result
    assert [sent_choice(r.body) for r in server.requests] == ["auto", "auto", "none"]
    assert [c for _, c in sent_results(server.requests[2].body)] == [HELLO, HELLO]
    result_types = [e.error_type for e in sink.of_kind("tool_call_result")]
    assert result_types == [None, "repeated_call"]


async def test_repeat_guard_ends_a_text_mode_model_that_keeps_writing_its_call(
        tools: Tools, agent: Agent, server: ScriptedServer) -> None:
    """In ``text`` tool-call mode a model that writes the same call as JSON at every step
    (small local models do) is stopped by the guard: the request that forbids tools reads the
    JSON as the answer, instead of running the call again until max_iterations."""
    from gramagent._models.chat import ChatCompletionsModel

    written = '{"name": "sayHello", "arguments": {"personName": "Alice"}}'
    script(server, reply(written), reply(written), reply(written))
    async with ChatCompletionsModel(server.base_url, None, tool_call_mode="text") as model:
        response = await run_agent(agent, "Hi", library=tools.library, model=model)
    assert response.stopped_by == "repeated_call" and response.content == written
    assert tools.runs["sayHello"] == 1 and len(server.requests) == 3
    assert [sent_choice(r.body) for r in server.requests] == ["auto", "auto", "none"]


@pytest.mark.parametrize("api", LOOP_PARALLEL_APIS)
async def test_copies_of_a_call_in_one_turn_run_once(api: str, tools: Tools, agent: Agent,
                                                     server: ScriptedServer,
                                                     model_for: ModelFactory) -> None:
    """The same call written several times in one reply runs once; the copies get its output
    as repeated calls (each still answered, in order) and the next request asks for the
    answer. A different call of the same turn runs as usual."""
    alice = {"personName": "Alice"}
    script(server, calls(call("sayHello", alice), call("sayHello", {"personName": "Bob"}),
                         call("sayHello", dict(alice)), call("sayHello", dict(alice))),
           reply("Hello Alice and Bob!"))
    sink = CaptureSink()
    response = await run_agent(agent, "Hi", library=tools.library,
                               model=model_for(server, api), events=sink)
    assert response.content == "Hello Alice and Bob!"
    assert response.stopped_by == "repeated_call" and tools.runs["sayHello"] == 2
    kinds = [i.error_type for i in response.tool_invocations]
    assert kinds == [None, None, "repeated_call", "repeated_call"]
    first, bob, *copies = response.tool_invocations
    assert all(c.result == first.result and c.error is None for c in copies)
    assert [sent_choice(r.body) for r in server.requests] == ["auto", "none"]
    sent = [c for _, c in sent_results(server.requests[1].body)]
    assert sent == [HELLO, sent[1], HELLO, HELLO] and "Bob" in sent[1]
    assert sorted(str(e.error_type) for e in sink.of_kind("tool_call_result")) == [
        "None", "None", "repeated_call", "repeated_call"]


async def test_copies_of_a_failing_call_share_its_failure(tools: Tools, agent: Agent,
                                                          server: ScriptedServer,
                                                          model_for: ModelFactory) -> None:
    """Copies of a call that fails are not run either: each gets the same error, and the
    model may still retry later (no forced answer)."""
    script(server, calls(call("fail", {"reason": "x"}), call("fail", {"reason": "x"})),
           reply("gave up"))
    response = await run_agent(agent, "Hi", library=tools.library,
                               model=model_for(server, "chat"))
    assert tools.runs["fail"] == 1 and response.stopped_by is None
    assert [i.error_type for i in response.tool_invocations] == ["tool_exception"] * 2
    first, copy = response.tool_invocations
    assert copy.error == first.error and copy.error
    assert [sent_choice(r.body) for r in server.requests] == ["auto", "auto"]


async def test_repeat_guard_ignores_different_arguments_and_can_be_off(
        tools: Tools, agent: Agent, server: ScriptedServer, model_for: ModelFactory) -> None:
    """Different arguments are a new call; repeat_guard=False runs repeats again."""
    model = model_for(server, "chat")
    script(server, call("sayHello", {"personName": "A"}), call("sayHello", {"personName": "B"}),
           reply("ok"))
    response = await run_agent(agent, "Hi", library=tools.library, model=model)
    assert response.stopped_by is None and tools.runs["sayHello"] == 2
    script(server, call("sayHello", {"personName": "A"}), call("sayHello", {"personName": "A"}),
           reply("ok"))
    response = await run_agent(agent, "Hi", library=tools.library, model=model,
                               limits=RunLimits(repeat_guard=False))
    assert all(i.ok for i in response.tool_invocations) and tools.runs["sayHello"] == 4


async def test_failed_calls_may_be_retried_with_the_same_arguments(
        tools: Tools, agent: Agent, server: ScriptedServer, model_for: ModelFactory) -> None:
    """Only successful calls are guarded: a failed tool may be called again as is."""
    script(server, call("fail", {"reason": "x"}), call("fail", {"reason": "x"}), reply("ok"))
    response = await run_agent(agent, "Hi", library=tools.library,
                               model=model_for(server, "chat"))
    assert [i.error_type for i in response.tool_invocations] == ["tool_exception"] * 2
    assert tools.runs["fail"] == 2 and response.stopped_by is None


# -- dry run ----------------------------------------------------------------------------------

@pytest.mark.parametrize("api", LOOP_APIS)
async def test_dry_run_runs_no_tool_but_reports_everything(api: str, tools: Tools,
                                                           agent: Agent,
                                                           server: ScriptedServer,
                                                           model_for: ModelFactory) -> None:
    """Every valid call returns {"ok": true}; invalid calls still fail; events are emitted."""
    script(server, call("fail", {"reason": "x"}), call("sayHello", {"personName": 3}),
           reply("observed"))
    sink, registry = CaptureSink(), CollectorRegistry()
    response = await run_agent(agent, "Hi", library=tools.library, dry_run=True,
                               model=model_for(server, api),
                               events=[sink, ToolMetrics(registry)])
    assert response.content == "observed"
    assert sum(tools.runs.values()) == 0
    dry, invalid = response.tool_invocations
    assert dry.ok and dry.result == {"ok": True}
    assert invalid.error_type == "invalid_arguments"
    assert [c for _, c in sent_results(server.requests[1].body)] == ['{"ok":true}']
    assert [e.status for e in sink.of_kind("tool_call_result")] == ["ok", "error"]
    assert 'tool_calls_total{status="ok",tool="fail"} 1.0' in generate_latest(registry).decode()


async def test_dry_run_needs_no_library(server: ScriptedServer,
                                        model_for: ModelFactory) -> None:
    """An agent's specs alone are enough for a dry run (calls are checked against them)."""
    agent = make_agent(make_tools().library)
    script(server, call("sayHello", {"personName": "A"}), call("nope", {}), reply("done"))
    response = await run_agent(agent, "Hi", dry_run=True, model=model_for(server, "chat"))
    assert [i.error_type for i in response.tool_invocations] == [None, "unknown_tool"]


# -- events and metrics -----------------------------------------------------------------------

SECRET = "hunter2-Sup3rS3cret"


@pytest.mark.parametrize("api", LOOP_PARALLEL_APIS)
async def test_events_order_hashes_and_privacy(api: str, tools: Tools, agent: Agent,
                                               server: ScriptedServer,
                                               model_for: ModelFactory) -> None:
    """Planned precedes result per seq, no duplicates, hashes as the ADR defines, no raw args."""
    good = {"personName": SECRET}
    raw_bad = '{"personName": "' + SECRET
    script(server,
           calls(call("sayHello", good), call("sayHello", raw_bad), call("nope", {"x": SECRET}),
                 call("sayHello", {"personName": 7, "note": SECRET}),
                 call("fail", {"reason": SECRET})),
           call("sayHello", {"personName": SECRET + "x" * 9000}),
           reply("done"))
    sink = CaptureSink()
    response = await run_agent(agent, "Hi", library=tools.library,
                               model=model_for(server, api), events=sink,
                               limits=RunLimits(max_invalid_calls_per_tool=None))
    events = sink.events
    assert len(events) == 12
    run_ids = {e.request_id for e in events}
    assert run_ids == {response.run_id}
    for seq in range(1, 7):
        kinds = [(e.kind, i) for i, e in enumerate(events) if e.seq == seq]
        assert [k for k, _ in kinds] == ["tool_call_planned", "tool_call_result"]
    planned = [e for e in events if isinstance(e, ToolCallPlanned)]
    assert [e.seq for e in planned] == list(range(1, 7))
    assert planned[0].args_preview_hash == reference_hash(good)
    assert planned[1].args_preview_hash == reference_hash(raw_bad)
    assert planned[2].tool == "<unknown>"
    results = sorted((e for e in events if isinstance(e, ToolCallResult)), key=lambda e: e.seq)
    assert [(e.status, e.error_type) for e in results] == [
        ("ok", None), ("error", "tool_payload_parse_error"), ("error", "unknown_tool"),
        ("error", "invalid_arguments"), ("error", "tool_exception"),
        ("error", "tool_payload_too_large")]
    assert all(e.latency_ms >= 0 for e in results)
    # a rejected call's result is emitted when it is rejected, before the turn's tools run
    order = [(e.kind, e.seq) for e in events]
    assert order.index(("tool_call_result", 2)) < order.index(("tool_call_planned", 3))
    assert order.index(("tool_call_result", 5)) > order.index(("tool_call_planned", 5))
    dumped = json.dumps([e.to_dict() for e in events])
    assert SECRET not in dumped and "hunter2" not in dumped
    assert len(response.tool_invocations) == 6


async def test_metrics_contract_over_a_run(tools: Tools, agent: Agent, server: ScriptedServer,
                                           model_for: ModelFactory) -> None:
    """Counters by tool and status and the latency histogram appear; labels stay bounded."""
    registry = CollectorRegistry()
    script(server, calls(call("sayHello", {"personName": "A"}), call("random-name-1", {}),
                         call("random-name-2", {}), call("stall", {})), reply("ok"))
    await run_agent(agent, "Hi", library=tools.library, model=model_for(server, "chat"),
                    events=ToolMetrics(registry))
    text = generate_latest(registry).decode()
    assert 'tool_calls_total{status="ok",tool="sayHello"} 1.0' in text
    assert 'tool_calls_total{status="error",tool="<unknown>"} 2.0' in text
    assert 'tool_calls_total{status="error",tool="stall"} 1.0' in text
    assert 'tool_call_latency_ms_count{tool="sayHello"} 1.0' in text
    assert 'tool_call_latency_ms_count{tool="stall"} 1.0' in text
    assert "random-name" not in text


async def test_no_sinks_builds_no_event_objects(tools: Tools, agent: Agent,
                                                server: ScriptedServer,
                                                model_for: ModelFactory,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Disabled means free: without sinks the loop never constructs an event."""
    import gramagent._runtime.tool_calls as tool_calls_module

    built: list[str] = []

    def spy(kind: type) -> Callable[..., Any]:
        def make(**fields: Any) -> Any:
            built.append(kind.__name__)
            return kind(**fields)
        return make

    monkeypatch.setattr(tool_calls_module, "ToolCallPlanned", spy(ToolCallPlanned))
    monkeypatch.setattr(tool_calls_module, "ToolCallResult", spy(ToolCallResult))
    script(server, call("sayHello", {"personName": "A"}), reply("ok"),
           call("sayHello", {"personName": "B"}), reply("ok"))
    model = model_for(server, "chat")
    await run_agent(agent, "Hi", library=tools.library, model=model)
    assert built == []
    await run_agent(agent, "Hi", library=tools.library, model=model, events=CaptureSink())
    assert built == ["ToolCallPlanned", "ToolCallResult"]


# -- fuzzing end to end -----------------------------------------------------------------------

@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(arguments=st.one_of(
    st.text(max_size=60),
    st.builds(lambda v, n: json.dumps(v)[:n],
              st.dictionaries(st.sampled_from(["personName", "x"]),
                              st.one_of(st.text(max_size=10), st.integers(), st.none()),
                              max_size=3),
              st.integers(min_value=0, max_value=40)),
))
def test_fuzzed_arguments_never_crash_the_loop(arguments: str) -> None:
    """Random and truncated argument text over real HTTP: always an answer, every call answered.
    """
    tools = make_tools()
    agent = make_agent(tools.library, names=["sayHello"])
    with ScriptedServer([call("sayHello", arguments, id="c1"), reply("fine")]) as server:
        response = run_agent_sync(agent, "Hi", library=tools.library, base_url=server.base_url)
    assert response.content == "fine"
    (invocation,) = response.tool_invocations
    assert invocation.ok or invocation.error_type in {
        "tool_payload_parse_error", "invalid_arguments"}
    (result,) = sent_results(server.requests[1].body)
    assert result[0] == "c1" and result[1]


def test_conversation_survives_pickling_in_limit_errors(tools: Tools, agent: Agent,
                                                        server: ScriptedServer) -> None:
    """LimitExceeded pickles with its context (for process pools and Ray)."""
    import pickle

    script(server, call("sayHello", {"personName": "A"}))
    with pytest.raises(LimitExceeded) as info:
        run_agent_sync(agent, "Hi", library=tools.library, base_url=server.base_url,
                       limits=RunLimits(max_iterations=1))
    copy = pickle.loads(pickle.dumps(info.value))
    assert isinstance(copy.context, Conversation) and copy.context == info.value.context
    assert copy.limit == "max_iterations"


def test_library_factory_library_is_reusable_across_loops() -> None:
    """A ToolLibrary has no loop affinity: two asyncio.run calls reuse it."""
    library = ToolLibrary()

    @library.register
    async def ping() -> str:
        """Ping."""
        return "pong"

    agent = make_agent(library)
    for _ in range(2):
        with ScriptedServer([call("ping"), reply("ok")]) as server:
            response = run_agent_sync(agent, "Hi", library=library, base_url=server.base_url)
        assert response.tool_invocations[0].result == "pong"
