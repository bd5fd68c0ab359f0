"""The run's deadlines take back every cancellation they make, however the await they cut
short ends: a tool (or a model request) that swallows the cancellation, or turns it into an
error or a result, must not leave the caller's task counting a cancellation nobody handles
(an ``asyncio.timeout`` or ``TaskGroup`` around the run would then misread its own)."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gramagent._models.base import Model, ModelRequest, ModelTurn
from gramagent._models.registry import resolve_model
from gramagent._runtime.library import ToolLibrary
from gramagent._runtime.limits import RunLimits
from gramagent._runtime.loop import run_agent, run_agent_sync
from gramagent._spec.model import Agent, ModelRef
from gramagent.errors import LimitExceeded, ModelAPIError
from gramagent.testing import ScriptedServer, call, reply


async def _timeout_after(task: asyncio.Task[Any]) -> str:
    """After a run in ``task``: the task counts no cancellation, and an ``asyncio.timeout``
    around a wait cuts it short with TimeoutError ("timeout")."""
    assert task.cancelling() == 0
    try:
        async with asyncio.timeout(0):
            await asyncio.sleep(3600)
    except TimeoutError:
        return "timeout"
    return "not cut short"


def _library(ends: str) -> ToolLibrary:
    """``patient``: waits until cancelled, then ends as ``ends`` says: returns a result,
    raises an error of its own, or raises TimeoutError (never the CancelledError)."""
    library = ToolLibrary()

    async def waits() -> str:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            if ends == "result":
                return "partial result"
            if ends == "timeout":
                raise TimeoutError("the tool's own") from None
            raise RuntimeError("interrupted") from None
        return "unreachable"

    @library.register(timeout=0.05)
    async def patient() -> str:
        """Waits until cancelled."""
        return await waits()

    @library.register(name="patient_inline", blocking=False, timeout=0.05)
    def patient_inline() -> Any:
        """Waits until cancelled (a plain function returning an awaitable)."""
        return waits()

    return library


@settings(max_examples=12, deadline=None)
@given(st.sampled_from(["patient", "patient_inline"]),
       st.sampled_from(["result", "error", "timeout"]))
def test_a_tool_that_swallows_the_deadlines_cancellation_leaves_the_task_balanced(
        name: str, ends: str) -> None:
    """A tool call cut short by its timeout that does not end in CancelledError: the run goes
    on to its answer, the task counts no cancellation, and an ``asyncio.timeout`` around work
    after the run still raises TimeoutError (not a CancelledError nobody asked for)."""
    library = _library(ends)
    agent = Agent(name="a", model=ModelRef.parse("openai/scripted"), instruction="x",
                  tools=tuple(t.spec() for t in library))

    async def scenario(server: ScriptedServer) -> str:
        task = asyncio.current_task()
        assert task is not None
        response = await run_agent(agent, "Hi", library=library,
                                   base_url=server.base_url, limits=RunLimits(wall_time=60))
        assert response.content == "done"
        return await _timeout_after(task)

    with ScriptedServer() as server:
        server.add(call(name, {}), reply("done"))
        assert asyncio.run(scenario(server)) == "timeout"


class _Forgiving:
    """A model of the user's own over the real chat adapter, which does not let a
    cancellation through: it answers ``fallback`` in its place, or raises ModelAPIError."""

    def __init__(self, inner: Model, ends: str) -> None:
        self.inner, self.ends = inner, ends

    async def request(self, request: ModelRequest) -> ModelTurn:
        try:
            return await self.inner.request(request)
        except asyncio.CancelledError:
            if self.ends == "result":
                return ModelTurn(text="fallback")
            raise ModelAPIError("the request was interrupted") from None

    async def aclose(self) -> None:
        await self.inner.aclose()


@settings(max_examples=4, deadline=None)
@given(st.sampled_from(["result", "error"]))
def test_a_model_that_swallows_the_wall_times_cancellation_leaves_the_task_balanced(
        ends: str) -> None:
    """The run's wall time cuts a slow request short and the model turns the cancellation
    into an answer or its error: the run ends as that says, and the task counts no
    cancellation (an ``asyncio.timeout`` around work after the run raises TimeoutError)."""
    agent = Agent(name="a", model=ModelRef.parse("openai/scripted"), instruction="x")

    async def scenario(server: ScriptedServer) -> str:
        task = asyncio.current_task()
        assert task is not None
        model = _Forgiving(resolve_model("openai/scripted", base_url=server.base_url), ends)
        try:
            response = await run_agent(agent, "Hi", model=model,
                                       limits=RunLimits(wall_time=0.05))
            assert response.content == "fallback"
        except ModelAPIError:
            assert ends == "error"
        finally:
            await model.aclose()
        return await _timeout_after(task)

    with ScriptedServer() as server:
        server.add(reply("too late", delay=5))
        assert asyncio.run(scenario(server)) == "timeout"


async def _cancelled_elsewhere() -> str:
    """Awaits a future that something else cancelled: a CancelledError of the tool's own,
    while nobody cancels the call."""
    future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    future.cancel()
    return await future


def _failing_library() -> ToolLibrary:
    library = ToolLibrary()

    @library.register(name="async_tool", timeout=30)
    async def async_tool() -> str:
        """An async tool."""
        return await _cancelled_elsewhere()

    @library.register(name="inline_tool", blocking=False, timeout=30)
    def inline_tool() -> Any:
        """A plain function returning an awaitable, awaited in the run's task."""
        return _cancelled_elsewhere()

    @library.register(name="thread_tool", timeout=30)
    def thread_tool() -> Any:
        """A blocking function returning an awaitable, awaited on the event loop."""
        return _cancelled_elsewhere()

    @library.register(name="inline_sync_tool", blocking=False)
    def inline_sync_tool() -> str:
        """A plain function reading a future cancelled elsewhere, on the event loop."""
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        future.cancel()
        return future.result()

    @library.register(name="thread_sync_tool")
    def thread_sync_tool() -> str:
        """A blocking function reading a future cancelled elsewhere, in a worker thread."""
        loop = asyncio.new_event_loop()  # the worker thread's own
        try:
            future: asyncio.Future[str] = loop.create_future()
            future.cancel()
            return future.result()
        finally:
            loop.close()

    return library


@settings(max_examples=10, deadline=None)
@given(st.sampled_from(["async_tool", "inline_tool", "thread_tool", "inline_sync_tool",
                        "thread_sync_tool"]), st.booleans())
def test_a_tools_own_cancelled_error_is_its_failure_not_the_runs_cancellation(
        name: str, wall_time: bool) -> None:
    """A tool whose await raises CancelledError though nobody cancelled the call (a future it
    awaited was cancelled elsewhere) failed: the model gets its error result and the run
    goes on to its answer; it is not ended as cancelled (its conversation lost) nor left
    waiting."""
    library = _failing_library()
    agent = Agent(name="a", model=ModelRef.parse("openai/scripted"), instruction="x",
                  tools=tuple(t.spec() for t in library))

    async def scenario(server: ScriptedServer) -> str:
        task = asyncio.current_task()
        assert task is not None
        response = await run_agent(agent, "Hi", library=library, base_url=server.base_url,
                                   limits=RunLimits(wall_time=60 if wall_time else None))
        assert response.content == "done"
        (invocation,) = response.tool_invocations
        assert invocation.error_type == "tool_exception"
        assert invocation.error is not None and "CancelledError" in invocation.error
        return await _timeout_after(task)

    with ScriptedServer() as server:
        server.add(call(name, {}), reply("done"))
        assert asyncio.run(asyncio.wait_for(scenario(server), 20)) == "timeout"


@settings(max_examples=4, deadline=None)
@given(st.booleans())
def test_a_run_owning_its_model_raises_its_wall_time_error(handling: bool) -> None:
    """A run that made its own model (``base_url``: it closes the model as it ends) and whose
    wall time cuts the request short raises LimitExceeded, whether or not the caller is
    handling an exception of its own meanwhile (the compiled build returned None, or raised
    the caller's exception, losing the run's)."""
    agent = Agent(name="a", model=ModelRef.parse("openai/scripted"), instruction="x")

    async def scenario(server: ScriptedServer) -> str:
        try:
            await run_agent(agent, "Hi", base_url=server.base_url,
                            limits=RunLimits(wall_time=0.05))
        except LimitExceeded as exc:
            assert exc.context is not None and exc.context[-1].kind == "user"
            return exc.limit
        return "returned"

    with ScriptedServer() as server:
        server.add(reply("too late", delay=5))
        if not handling:
            assert asyncio.run(scenario(server)) == "wall_time"
            return
        try:
            raise KeyError("the caller's own")
        except KeyError:
            assert asyncio.run(scenario(server)) == "wall_time"


def test_run_agent_syncs_wall_time_error_has_the_cancellation_as_its_context() -> None:
    """run_agent_sync's wall-time error comes from the request it cut short (context: that
    CancelledError, suppressed as ``raise ... from None``), not from the check for a running
    loop that run_agent_sync made first (its RuntimeError was the context)."""
    agent = Agent(name="a", model=ModelRef.parse("openai/scripted"), instruction="x")
    with ScriptedServer() as server:
        server.add(reply("too late", delay=5))
        try:
            run_agent_sync(agent, "Hi", base_url=server.base_url,
                           limits=RunLimits(wall_time=0.05))
        except LimitExceeded as exc:
            assert exc.limit == "wall_time" and exc.__suppress_context__
            assert isinstance(exc.__context__, asyncio.CancelledError), repr(exc.__context__)
        else:
            raise AssertionError("the wall time did not stop the run")
