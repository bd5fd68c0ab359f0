"""Tests of the start of the calls run alongside others (``invoke.start_task``): a call runs in
its own task (``asyncio.current_task()`` is that task from its first line) and its own copy
of the context variables. On Python 3.12 and later the task starts eagerly
(``asyncio.eager_task_factory``): a call runs at once until it first waits, and one that never
waits is done when it is started; the tests of that (``eager``) skip on 3.11, whose tasks
have no public way to start eagerly (its first step is scheduled on the event loop)."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import sys
import threading
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from runtime_support import ModelFactory, make_agent, script

from gramagent import ToolLibrary, run_agent
from gramagent._runtime.events import CaptureSink, ToolCallResult
from gramagent._runtime.invoke import CallSettings, Outcome, start_call, start_task
from gramagent._runtime.library import Tool, tool
from gramagent.testing import ScriptedServer, call, calls, reply

eager_var: contextvars.ContextVar[str] = contextvars.ContextVar("eager_var", default="unset")

eager = pytest.mark.skipif(sys.version_info < (3, 12), reason=(
    "eager task start is Python 3.12's (asyncio.eager_task_factory): a 3.11 task's first "
    "step waits for the event loop"))


def _started_task(tool: Tool, timeout: float, *, until: float | None = None,
                  done: Callable[[Outcome], object] | None = None) -> asyncio.Task[Outcome]:
    """An async tool's call, started as the loop starts it (in a task of its own)."""
    task = start_call(tool, {}, None, timeout=timeout, settings=CallSettings(until=until),
                      done=done)
    assert isinstance(task, asyncio.Task)
    return task


@eager
async def test_a_call_that_never_waits_is_done_when_started() -> None:
    """Its task is the current one while it runs, it sees the caller's context variables,
    and what it sets stays in its own copy; the caller's task is current again after."""
    seen: dict[str, Any] = {}

    async def quick() -> Outcome:
        seen["task"], seen["var"] = asyncio.current_task(), eager_var.get()
        eager_var.set("inside")
        return Outcome("r", "r")

    eager_var.set("caller")
    runner = asyncio.current_task()
    task = start_task(quick())
    assert task.done() and task.result().result == "r"
    assert seen == {"task": task, "var": "caller"}
    assert eager_var.get() == "caller" and asyncio.current_task() is runner


@eager
async def test_a_call_that_waits_runs_its_first_step_at_start_then_in_its_task() -> None:
    """Up to its first wait at once; the rest when what it waits for is done, in the same
    task and the same context."""
    log: list[tuple[Any, ...]] = []
    gate: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def waits() -> Outcome:
        log.append(("first", asyncio.current_task()))
        eager_var.set("mine")
        value = await gate
        log.append(("then", asyncio.current_task(), eager_var.get(), value))
        return Outcome(value, str(value))

    eager_var.set("caller")
    task = start_task(waits())
    assert not task.done() and log == [("first", task)]
    gate.set_result(7)
    assert (await task).result == 7
    assert log[1] == ("then", task, "mine", 7) and eager_var.get() == "caller"


@eager
async def test_what_a_first_step_raises_is_its_tasks() -> None:
    """An exception is the task's (a CancelledError of its own cancels it); KeyboardInterrupt
    goes on from the start, as from a 3.12 eager start, and leaves the caller's task the
    current one."""
    async def fails() -> Outcome:
        raise ValueError("boom")

    async def cancels_itself() -> Outcome:
        raise asyncio.CancelledError

    async def interrupts() -> Outcome:
        raise KeyboardInterrupt

    runner = asyncio.current_task()
    failed = start_task(fails())
    assert failed.done() and isinstance(failed.exception(), ValueError)
    assert start_task(cancels_itself()).cancelled()
    with pytest.raises(KeyboardInterrupt):
        start_task(interrupts())
    assert asyncio.current_task() is runner and runner is not None and runner.cancelling() == 0


@eager
async def test_a_first_step_keyboardinterrupt_leaves_no_unretrieved_task_exception() -> None:
    """The KeyboardInterrupt goes on from the start; the task that holds it as well is not
    reported when collected ("Task exception was never retrieved", with a traceback, after
    the interrupt was handled)."""
    async def interrupts() -> Outcome:
        raise KeyboardInterrupt

    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    try:
        with pytest.raises(KeyboardInterrupt):
            start_task(interrupts())
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(previous)
    assert reported == []


@eager
async def test_an_async_tool_that_fails_at_once_has_its_outcome_when_started() -> None:
    """Its outcome (and so its result event, from ``done``) comes before the next call of
    the turn is started."""
    @tool
    async def broken() -> str:
        """Fails before any await."""
        raise ValueError("bad")

    outcomes: list[Outcome] = []
    task = _started_task(broken, 5.0, done=outcomes.append)
    assert task.done() and outcomes == [task.result()]
    assert outcomes[0].error_type == "tool_exception" and "ValueError: bad" in outcomes[0].output


@tool
async def stuck() -> str:
    """Waits for a minute after its first step."""
    stuck_in.append(asyncio.current_task())
    await asyncio.sleep(60)
    return "late"


stuck_in: list[asyncio.Task[Any] | None] = []


@eager
async def test_a_call_timed_out_after_its_first_step_times_out_alone() -> None:
    """Its timeout cancels its own task (the one it started in), not the caller's."""
    stuck_in.clear()
    task = _started_task(stuck, 0.05)
    assert stuck_in == [task] and not task.done()
    outcome = await task
    assert outcome.error_type == "tool_timeout"
    runner = asyncio.current_task()
    assert runner is not None and runner.cancelling() == 0


@eager
async def test_a_call_cancelled_after_its_first_step_is_cancelled() -> None:
    stuck_in.clear()
    task = _started_task(stuck, 60.0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert stuck_in == [task] and task.cancelled()


async def test_a_timeout_the_tool_enters_before_its_first_wait_is_its_own() -> None:
    """``asyncio.timeout`` takes the current task as it is entered: the call's own, even in
    its first step (were it the caller's, the caller would be cancelled)."""
    @tool
    async def bounded() -> str:
        """Bounds its own wait."""
        try:
            async with asyncio.timeout(0.01):
                await asyncio.sleep(60)
        except TimeoutError:
            return "own timeout"
        return "no timeout"

    task = _started_task(bounded, 60.0)
    assert (await task).result == "own timeout"


@eager
async def test_a_call_started_after_the_runs_end_is_not_run() -> None:
    """``until`` in the past: the tool is not called, and the call is done when started."""
    called: list[int] = []

    @tool
    async def tracked() -> str:
        """Counts its calls."""
        called.append(1)
        return "ran"

    until = asyncio.get_running_loop().time() - 1.0
    task = _started_task(tracked, 60.0, until=until)
    assert task.done() and task.result().error_type == "tool_timeout" and called == []


async def _program(log: list[tuple[int, str, object]], index: int, ops: list[str]) -> int:
    """A call doing ``ops`` in order, logging what each saw."""
    own = asyncio.current_task()
    for op in ops:
        seen: object = None
        if op == "wait":
            await asyncio.sleep(0)
        elif op == "set":
            eager_var.set(f"call {index}")
        elif op == "read":
            seen = eager_var.get()
        elif op == "task":
            seen = asyncio.current_task() is own
        log.append((index, op, seen))
        if op == "raise":
            raise ValueError(index)
    return index


async def _outcome(index: int, work: Coroutine[Any, Any, int]) -> Outcome:
    return Outcome(await work, str(index))


def _started(log: list[tuple[int, str, object]], index: int, ops: list[str], as_tool: bool
             ) -> asyncio.Task[Outcome]:
    """The call of :func:`_program`: an async tool's (in its task, the whole call
    awaited under its timeout), or any coroutine's in a task of its own."""
    if not as_tool:
        return start_task(_outcome(index, _program(log, index, ops)))

    async def invoke() -> int:
        return await _program(log, index, ops)

    program = Tool(f"p{index}", "A program.", {"type": "object", "properties": {}}, invoke)
    return _started_task(program, 60.0)


def _expected(index: int, ops: list[str], *, first_step: bool) -> list[tuple[int, str, object]]:
    """What :func:`_program` logs: all of it, or only its first step."""
    steps: list[tuple[int, str, object]] = []
    value = "caller"
    for op in ops:
        if op == "wait" and first_step:
            break
        if op == "set":
            value = f"call {index}"
        steps.append((index, op, value if op == "read" else True if op == "task" else None))
        if op == "raise":
            break
    return steps


_OPS = st.lists(st.sampled_from(["wait", "set", "read", "task", "raise"]), max_size=6)


@eager
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(programs=st.lists(_OPS, min_size=1, max_size=5), as_tool=st.booleans())
async def test_calls_run_their_first_steps_at_start_in_their_own_tasks_and_contexts(
        programs: list[list[str]], as_tool: bool) -> None:
    """Calls that set and read a context variable, check their current task, wait and raise,
    started one after another: when each is started, every call so far has run exactly up
    to its first wait (or its end); in the end each ran all of its steps, in its own task
    throughout, seeing only its own settings over the caller's; the caller's task and
    context are as they were."""
    log: list[tuple[int, str, object]] = []
    eager_var.set("caller")
    runner = asyncio.current_task()
    tasks = []
    so_far: list[tuple[int, str, object]] = []
    for index, ops in enumerate(programs):
        tasks.append(_started(log, index, ops, as_tool))
        so_far += _expected(index, ops, first_step=True)
        assert log == so_far
        assert asyncio.current_task() is runner and eager_var.get() == "caller"
        assert tasks[-1].done() == ("wait" not in ops or "raise" in ops[:ops.index("wait")])
    results = await asyncio.gather(*tasks, return_exceptions=True)
    for index, (ops, result) in enumerate(zip(programs, results, strict=True)):
        assert [entry for entry in log if entry[0] == index] == _expected(
            index, ops, first_step=False)
        if "raise" in ops and as_tool:
            assert isinstance(result, Outcome) and result.error_type == "tool_exception"
        elif "raise" in ops:
            assert isinstance(result, ValueError) and result.args == (index,)
        else:
            assert isinstance(result, Outcome) and result.result == index
    assert eager_var.get() == "caller"


@eager
async def test_a_first_step_raising_keyboardinterrupt_abandons_the_calls_started_before_it(
        server: ScriptedServer, model_for: ModelFactory) -> None:
    """KeyboardInterrupt from an async call's first step ends the run from where the call
    was started: a thread call started before it is abandoned as when the run is cancelled
    (its result event says ``interrupted``, and its late result is dropped: one result per
    call), and the calls after it are never started."""
    library = ToolLibrary()
    release, ended = threading.Event(), threading.Event()
    after: list[int] = []

    @library.register
    def block(n: int) -> str:
        """Waits until released, in a worker thread."""
        release.wait(20)
        ended.set()
        return "block done"

    @library.register
    async def interrupt(n: int) -> str:
        """Raises KeyboardInterrupt before any await."""
        raise KeyboardInterrupt

    @library.register
    async def later(n: int) -> str:
        """Started after the interrupting call, if at all."""
        after.append(n)
        return "later"

    script(server, calls(call("block", {"n": 1}, id="c0"), call("interrupt", {"n": 2}, id="c1"),
                         call("later", {"n": 3}, id="c2")))
    sink = CaptureSink()
    with pytest.raises(KeyboardInterrupt):
        await run_agent(make_agent(library), "Go", library=library, events=sink,
                        model=model_for(server, "chat"))
    release.set()
    assert await asyncio.to_thread(ended.wait, 20)
    for _ in range(20):  # the worker's hand-off, had the call not been abandoned
        await asyncio.sleep(0.01)
    results = [(e.tool, e.error_type) for e in sink.events if isinstance(e, ToolCallResult)]
    assert sorted(results, key=str) == sorted(
        [("block", "interrupted"), ("interrupt", "interrupted"), ("later", "interrupted")],
        key=str)
    assert after == []


_SELF_CANCEL_KINDS = ("cancel, wait", "cancel, return", "wait, cancel, wait", "wait, cancel, raise",
                      "quick", "waits")


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kinds=st.lists(st.sampled_from(_SELF_CANCEL_KINDS), min_size=1, max_size=4))
async def test_a_tool_that_cancels_its_own_task_fails_alone(
        server: ScriptedServer, model_for: ModelFactory, kinds: list[str]) -> None:
    """A tool that cancels its own task (``asyncio.current_task().cancel()``, in its first
    step or later; then waiting, returning or raising) fails with its CancelledError, as one
    that raises CancelledError does: the run is not cancelled (it used to end in a
    CancelledError nobody asked for), the other calls keep their results, and every call has
    one result event."""
    library = ToolLibrary()

    @library.register
    async def act(kind: str, n: int) -> str:
        """Does what ``kind`` says (``n``: each call its own, not a repeat)."""
        for step in kind.split(", "):
            if step == "cancel":
                own = asyncio.current_task()
                assert own is not None
                own.cancel()
            elif step in ("wait", "waits"):
                await asyncio.sleep(0.001)
            elif step == "raise":
                raise ValueError(kind)
        return kind

    script(server, calls(*(call("act", {"kind": kind, "n": i}, id=f"c{i}")
                           for i, kind in enumerate(kinds))), reply("done"))
    sink = CaptureSink()
    response = await run_agent(make_agent(library), "Go", library=library, events=sink,
                               model=model_for(server, "chat"))
    assert response.content == "done"
    runner = asyncio.current_task()
    assert runner is not None and runner.cancelling() == 0
    got = [(i.call_id, i.error_type, i.result) for i in response.tool_invocations]
    assert got == [(f"c{i}", "tool_exception" if "cancel" in kind else None,
                    None if "cancel" in kind else kind) for i, kind in enumerate(kinds)]
    results = [e for e in sink.events if isinstance(e, ToolCallResult)]
    assert sorted(e.seq for e in results) == sorted(i.seq for i in response.tool_invocations)
