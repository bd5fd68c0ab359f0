"""Tests of a run cancelled while a tool call catches the cancellation: the run ends
cancelled all the same (it does not go on to its next model request), and each call has one
result event, also when an abandoned call ends after the run."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from runtime_support import ModelFactory, make_agent, script

from gramagent import ToolLibrary, run_agent
from gramagent._runtime.events import CaptureSink, ToolCallResult
from gramagent.testing import ScriptedServer, call, calls, error

_CATCHES = ("returns", "fails", "waits, returns", "re-raises")
"""What a call does with the CancelledError it gets while it waits."""


async def _waiting(how: str, started: asyncio.Event) -> str:
    started.set()
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        if how == "fails":
            raise ValueError("cleanup failed") from None
        if how == "waits, returns":
            await asyncio.sleep(0.001)
        if how == "re-raises":
            raise
        return "cleaned up"
    return "not cancelled"


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(catches=st.lists(st.tuples(st.sampled_from(_CATCHES), st.booleans()), min_size=1,
                        max_size=3))
async def test_a_run_cancelled_while_a_tool_catches_the_cancellation_ends_cancelled(
        model_for: ModelFactory, catches: list[tuple[str, bool]]) -> None:
    """Calls of an async tool (each in its task) or of a plain function returning a
    coroutine (``blocking=False``: awaited in the run's task), each catching the
    cancellation and returning, failing, waiting then returning, or not catching it. The run
    is cancelled once the first call waits: it ends in CancelledError without asking the
    model again (it used to go on when a tool caught it), and every call has exactly one
    result event, also after the abandoned calls ended."""
    library = ToolLibrary()
    started = asyncio.Event()

    @library.register
    async def stubborn(how: str, n: int) -> str:
        """Waits; does ``how`` when cancelled."""
        return await _waiting(how, started)

    @library.register(blocking=False)
    def handsOver(how: str, n: int) -> Coroutine[Any, Any, str]:
        """Returns the coroutine that waits."""
        return _waiting(how, started)

    turn = calls(*(call("stubborn" if in_task else "handsOver", {"how": how, "n": i},
                        id=f"c{i}") for i, (how, in_task) in enumerate(catches)))
    with ScriptedServer() as server:
        script(server, turn, error(400, "the run went on after it was cancelled"))
        sink = CaptureSink()
        run = asyncio.ensure_future(run_agent(make_agent(library), "Go", library=library,
                                              events=sink, model=model_for(server, "chat")))
        await started.wait()
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        for _ in range(5):  # the abandoned calls end (caught, cleaned up) after the run
            await asyncio.sleep(0.01)
        assert server.remaining == 1
    results = sorted(e.seq for e in sink.events if isinstance(e, ToolCallResult))
    assert results == list(range(1, len(catches) + 1))
