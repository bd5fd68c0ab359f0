"""A run that ends in the middle of a turn (a closed stream, an approve callback that fails)
leaves no half-recorded call in the events: every call whose planned event was emitted gets
exactly one result event, after it, and a call that did not finish says ``interrupted``.

Against the scripted server, with real tools (inline, async, in a thread) and a call that never
finishes.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from runtime_support import ModelFactory, interrupt_tools, make_agent, script

from gramagent import ToolCallRequested, ToolLibrary, run_agent, run_agent_stream
from gramagent._runtime.events import CaptureSink, ToolCallPlanned, ToolCallResult, ToolMetrics
from gramagent.errors import ApprovalError
from gramagent.testing import ScriptedServer, call, calls

pytestmark = pytest.mark.timeout(120)


def _library(started: asyncio.Event) -> ToolLibrary:
    library = interrupt_tools(started)

    @library.register(requires_approval=True)
    def guarded(n: int) -> str:
        """Needs a person's yes."""
        return "guarded done"

    return library


def _check_pairs(events: list[Any]) -> dict[int, ToolCallResult]:
    """Each planned seq has exactly one result, after it; the results by seq."""
    planned = [e.seq for e in events if isinstance(e, ToolCallPlanned)]
    results = {e.seq: e for e in events if isinstance(e, ToolCallResult)}
    assert Counter(e.seq for e in events if isinstance(e, ToolCallResult)) == Counter(planned)
    for seq in planned:
        first_planned = next(i for i, e in enumerate(events)
                             if isinstance(e, ToolCallPlanned) and e.seq == seq)
        assert events.index(results[seq]) > first_planned
    return results


_CALLS = st.sampled_from([("send", {"n": 1}), ("quick", {"n": 1}), ("block", {"n": 1}),
                          ("nosuch", {"n": 1}), ("quick", {"n": "not an int"})])


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(before=st.lists(_CALLS, max_size=3), after=st.lists(_CALLS, max_size=3))
async def test_a_stream_closed_mid_turn_leaves_one_result_per_planned_call(
        before: list[tuple[str, dict[str, Any]]], after: list[tuple[str, dict[str, Any]]],
        server: ScriptedServer, model_for: ModelFactory) -> None:
    started = asyncio.Event()
    library = _library(started)
    agent = make_agent(library)
    turn = [*before, ("wait", {"n": 1}), *after]
    script(server, calls(*(call(name, args, id=f"c{i}") for i, (name, args)
                           in enumerate(turn))))
    sink = CaptureSink()
    async with run_agent_stream(agent, "Go", library=library, events=sink,
                                model=model_for(server, "chat")) as stream:
        async for event in stream:
            if isinstance(event, ToolCallRequested):
                async with asyncio.timeout(20):  # a guard against a hang
                    await started.wait()
                break
    results = _check_pairs(sink.events)
    assert len(results) == len(turn)
    waited = results[len(before) + 1]
    assert waited.tool == "wait" and waited.status == "error"
    assert waited.error_type == "interrupted"
    assert waited.message is not None and "interrupted" in waited.message


async def test_an_approve_callback_that_fails_leaves_one_result_per_planned_call(
        server: ScriptedServer, model_for: ModelFactory) -> None:
    library = _library(asyncio.Event())
    agent = make_agent(library)
    script(server, calls(call("nosuch", {"n": 0}), call("send", {"n": 1}),
                         call("guarded", {"n": 2}), call("guarded", {"n": 3})))
    sink = CaptureSink()

    def approve(request: Any) -> bool:
        raise RuntimeError("the approval service is down")

    with pytest.raises(ApprovalError):
        await run_agent(agent, "Go", library=library, events=sink, approve=approve,
                        model=model_for(server, "chat"))
    results = _check_pairs(sink.events)
    # Rejected at its check, the unknown tool has its result; the others were waiting for
    # the approvals (asked before a call of the turn runs) and never ran.
    assert [results[s].error_type for s in sorted(results)] == [
        "unknown_tool", "interrupted", "interrupted", "interrupted"]


async def test_metrics_count_an_interrupted_call(server: ScriptedServer,
                                                model_for: ModelFactory) -> None:
    from prometheus_client import CollectorRegistry

    metrics = ToolMetrics(CollectorRegistry())
    started = asyncio.Event()
    library = _library(started)
    script(server, call("wait", {"n": 1}))
    async with run_agent_stream(make_agent(library), "Go", library=library, events=metrics,
                                model=model_for(server, "chat")) as stream:
        async for event in stream:
            if isinstance(event, ToolCallRequested):
                async with asyncio.timeout(20):
                    await started.wait()
                break
    counted = metrics.registry.get_sample_value(
        "tool_calls_total", {"tool": "wait", "status": "error"})
    assert counted == 1.0
