"""Running one checked tool call: thread or inline, timeout, exceptions, output text.

:func:`execute` never raises for a failing tool (cancellation of the run aside): exceptions and
timeouts become an :class:`Outcome` with an error the model sees. :func:`render_output` turns a
tool's return value into the text sent back, cut to the output limit with a marker.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import inspect
import sys
import time
from asyncio.tasks import _enter_task, _leave_task
from collections.abc import Callable, Coroutine, Generator
from contextvars import copy_context
from dataclasses import dataclass
from functools import partial
from time import perf_counter
from types import CoroutineType
from typing import Any, Final

import orjson

from gramagent import _json as exact_json
from gramagent._json import clean_text
from gramagent._runtime.deadline import RunDeadline, Watcher, watcher
from gramagent._runtime.library import Tool, ToolContext
from gramagent._runtime.loops import PerLoop
from gramagent._runtime.threads import hand_off, tool_threads
from gramagent._spec.calls.check import ToolErrorType, error_text

__all__ = ["DRY_RUN_RESULT", "Outcome", "ThreadCall", "cancelled_itself", "execute", "finished",
           "render_output", "run_inline", "start_async", "start_task", "start_thread"]

DRY_RUN_RESULT: Final = {"ok": True}
"""What every call returns in dry-run mode (the no-op executor of the ADR)."""


# Not frozen: one is made per call, and a frozen dataclass sets each field through
# object.__setattr__ (bench/RESULTS.md, "Per call and per message"). Read-only by convention.
# Its own __init__ (init=False): the compiled build compiles a written one, while the one a
# dataclass makes at import time stays interpreted.
@dataclass(slots=True, init=False)
class Outcome:
    """How one call went (read-only by convention)."""

    result: Any
    """The tool's return value (None on error)."""
    output: str
    """The text sent back to the model (the rendered result, or the error message)."""
    error_type: ToolErrorType | None
    event_message: str | None
    """For events: the error without argument values."""
    latency: float
    """Seconds the tool ran."""
    executed: bool
    """Whether the tool actually ran (False in dry-run mode)."""

    def __init__(self, result: Any, output: str, error_type: ToolErrorType | None = None,
                 event_message: str | None = None, latency: float = 0.0,
                 executed: bool = True) -> None:
        self.result = result
        self.output = output
        self.error_type = error_type
        self.event_message = event_message
        self.latency = latency
        self.executed = executed


async def execute(
    tool: Tool,
    arguments: dict[str, Any],
    *,
    context: ToolContext | None,
    timeout: float | None,
    dry_run: bool = False,
    max_output_chars: int | None = None,
) -> Outcome:
    """Run ``tool`` with validated ``arguments``; never raises for a failure of the tool.

    Sync tools run in a worker thread (context variables copied), or inline when marked
    ``blocking=False`` (no timeout applies then: nothing can interrupt them); async tools are
    awaited on the running loop. A sync tool that times out keeps running in its thread until
    it returns (Python cannot stop a thread), but its result is discarded, and the process
    does not wait for it at exit (:mod:`~gramagent._runtime.threads`).

    Args:
        tool: the implementation.
        arguments: validated arguments, passed as keyword arguments.
        context: passed to the tool's context parameter, if it has one.
        timeout: seconds before the call is abandoned with ``tool_timeout``; None: no limit.
        dry_run: return :data:`DRY_RUN_RESULT` without running the tool.
        max_output_chars: cut the rendered output to this many characters.
    """
    if dry_run:
        return Outcome(DRY_RUN_RESULT, render_output(DRY_RUN_RESULT, None), executed=False)
    if not (tool.is_async or tool.blocking):
        ran = run_inline(tool, arguments, context=context, max_output_chars=max_output_chars)
        return ran if isinstance(ran, Outcome) else await ran(timeout)
    kwargs = _kwargs(tool, arguments, context)
    started = time.perf_counter()
    if not tool.is_async:  # a blocking function: in a worker thread, awaited here
        call = ThreadCall(tool, kwargs, timeout=timeout, max_output_chars=max_output_chars)
        try:
            return await call
        except BaseException:  # cancelled: the call is abandoned (its thread runs on)
            call.cancel()
            raise
    return await _awaited(tool, None, kwargs, started, timeout, max_output_chars)


def run_inline(tool: Tool, arguments: dict[str, Any], context: ToolContext | None,
               max_output_chars: int | None = None,
               done: Callable[[Outcome], object] | None = None
               ) -> Outcome | Callable[[float | None], Coroutine[Any, Any, Outcome]]:
    """Run a plain function declared ``blocking=False`` on the event loop's thread, in a copy
    of the context variables (no timeout: nothing could interrupt it); ``done`` gets the
    outcome. What :func:`execute` does for such a tool, without a coroutine: a turn of eight
    quick calls ran eight coroutines for nothing.

    Returns:
        The :class:`Outcome`; or, when the function returned an awaitable, a function of the
        call's timeout giving the coroutine that awaits it (``done`` is called from there).
    """
    # The usual call's arguments go as they are, without a call of _kwargs.
    kwargs = (arguments if not tool.converters and tool.context_param is None
              else _kwargs(tool, arguments, context))
    started = perf_counter()
    try:
        result = copy_context().run(tool.invoke, **kwargs)
    except (Exception, asyncio.CancelledError) as exc:  # raised without an await: the tool's
        outcome = _failure(tool, exc, perf_counter() - started)
    else:
        if type(result) not in _PLAIN_RESULTS and _maybe_awaitable(result):
            return partial(_awaited, tool, result, kwargs, started,
                           max_output_chars=max_output_chars, done=done)
        outcome = _finished(tool, result, perf_counter() - started, max_output_chars)
    if done is not None:
        done(outcome)
    return outcome


async def _awaited(tool: Tool, pending: Any, kwargs: dict[str, Any], started: float,
                   timeout: float | None, max_output_chars: int | None,
                   done: Callable[[Outcome], object] | None = None,
                   until: float | None = None) -> Outcome:
    """Await an async tool's call (``pending`` None: ``tool.invoke(**kwargs)``) or the
    awaitable a plain function returned, under the call's timeout, and never past ``until``
    (the end of the run, on the event loop's clock); ``done`` gets the outcome when there is
    one.

    Interpreted, the call's coroutine takes its first step before the timeout is armed:
    nothing can time it out before it first waits (the event loop does not run), and a call
    that never waits (a quick ``async def``, started eagerly) needs no deadline at all
    (bench/RESULTS.md, "Eighth pass").
    """
    loop = asyncio.get_running_loop()
    now = loop.time()
    when, timeout = _bounded(now, timeout, until)
    if pending is None and when is not None and when <= now:
        outcome = _not_started(tool)  # no time left: the tool is not called at all
        if done is not None:
            done(outcome)
        return outcome
    # Not asyncio.timeout: a timer per call (set, then cancelled) was a fifth of what an async
    # call cost. A RunDeadline shares its event loop's one timer with every run and call.
    deadline: RunDeadline | None = None
    try:
        if pending is None:
            pending = tool.invoke(**kwargs)
            pending = _first_step(pending) if _STEP_BY_HAND else pending
        if isinstance(pending, _Returned):
            result = pending.value
        else:
            deadline = _armed(loop, when)
            result = await pending
        if _maybe_awaitable(result):  # a sync function returning an awaitable
            if deadline is None:
                deadline = _armed(loop, when)
            result = await result
    except asyncio.CancelledError as exc:
        if deadline is not None and deadline.cut_short():
            outcome = _timed_out(tool, timeout, time.perf_counter() - started)
        elif _cancel_requested():
            raise  # the call (the run) was cancelled: that goes on
        else:  # the tool's own (a future it awaited was cancelled elsewhere): it failed
            outcome = _failure(tool, exc, time.perf_counter() - started)
    except TimeoutError as exc:  # the tool's own (or one it let through after the deadline)
        latency = time.perf_counter() - started
        outcome = (_timed_out(tool, timeout, latency) if deadline is not None and deadline.expired
                   else _failure(tool, exc, latency))
    except Exception as exc:
        outcome = _failure(tool, exc, time.perf_counter() - started)
    else:
        outcome = _finished(tool, result, time.perf_counter() - started, max_output_chars)
    finally:
        if deadline is not None:
            _released(deadline)
    if done is not None:
        done(outcome)
    return outcome


def _bounded(now: float, timeout: float | None, until: float | None
             ) -> tuple[float | None, float | None]:
    """When a call starting ``now`` ends at the latest, and its timeout: its own, or less if
    ``until`` (the end of the run) comes first."""
    when = None if timeout is None else now + timeout
    if until is not None and (when is None or until < when):
        # Started late (calls before it held the event loop): the run's end bounds it still.
        return until, (until - now if until > now else 0.0)
    return when, timeout


def _armed(loop: asyncio.AbstractEventLoop, when: float | None) -> RunDeadline:
    """A deadline at ``when`` for the current task's await that follows (armed, started)."""
    deadline = RunDeadline(when)
    deadline.arm(loop)
    deadline.start()
    return deadline


def _released(deadline: RunDeadline) -> None:
    """The await under ``deadline`` is over: no longer watched, and if the deadline cut it
    short, its cancellation taken back."""
    deadline.disarm()
    if deadline.expired:
        deadline.settle()


class _Returned:
    """What a coroutine returned in its first step (:func:`_first_step`)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


_STEP_BY_HAND: Final = __file__.endswith(".py")
"""Whether :func:`_awaited` takes an async tool's first step by hand: interpreted, the
deadline a call that never waits then goes without cost more than the StopIteration its
step raises; compiled (mypyc), arming the deadline is native code, and cheaper than that
StopIteration (~2k instructions per call either way; bench/RESULTS.md, "Eighth pass")."""


def _first_step(call: Any) -> Any:
    """Run the first step of an async tool's coroutine here, as awaiting it would: what it
    returned (:class:`_Returned`) if it did not wait, else an awaitable of the rest
    (:class:`_Rest`). Another awaitable (an ``invoke`` that is not a coroutine function but
    returns one) is left as it is. What the step raises goes on from here."""
    if type(call) is not CoroutineType:
        return call
    try:
        waiting = call.send(None)
    except StopIteration as returned:  # a coroutine's return (its own become RuntimeError)
        return _Returned(returned.value)
    return _Rest(call, waiting)


class _Rest:
    """The rest of a coroutine whose first step was run by hand and yielded ``waiting``:
    awaiting it does what awaiting the coroutine would have done from there on."""

    __slots__ = ("_coro", "_waiting")

    def __init__(self, coro: Coroutine[Any, Any, Any], waiting: Any) -> None:
        self._coro, self._waiting = coro, waiting

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, waiting = self._coro, self._waiting
        while True:
            try:
                sent = yield waiting  # to the task, as the coroutine's own await yielded it
            except BaseException as exc:  # thrown in (cancelled while waiting): to it
                try:
                    waiting = coro.throw(exc)
                except StopIteration as returned:
                    return returned.value
            else:
                if sent is None:  # as a task resumes it: the rest delegated, at C speed
                    return (yield from coro.__await__())
                try:
                    waiting = coro.send(sent)
                except StopIteration as returned:
                    return returned.value


def start_async(tool: Tool, arguments: dict[str, Any], context: ToolContext | None,
                timeout: float | None, max_output_chars: int | None = None,
                done: Callable[[Outcome], object] | None = None,
                until: float | None = None) -> asyncio.Task[Outcome]:
    """Start an async ``tool`` in a task of its own; ``done`` gets the outcome when the call
    finishes (what :func:`execute` does, without its coroutine around the call's). The task
    starts eagerly (:func:`start_task`), so the timeout counts from now, or from later when
    a task factory schedules it, and the calls started before it may have held the event
    loop: ``until``, on the event loop's clock, bounds it wherever it starts."""
    return start_task(_awaited(tool, None, _kwargs(tool, arguments, context),
                               time.perf_counter(), timeout, max_output_chars, done, until))


def start_thread(tool: Tool, arguments: dict[str, Any], context: ToolContext | None,
                 timeout: float | None, max_output_chars: int | None = None,
                 done: Callable[[Outcome], object] | None = None,
                 until: float | None = None) -> ThreadCall:
    """Start a blocking ``tool`` in a worker thread; await the returned call for its outcome.

    What :func:`execute` does for such a tool, without a coroutine or a task: a turn awaits
    its thread calls one after another, and each call's outcome (its ``done`` callback, e.g.
    its result event) still comes when that call finishes, not after the calls before it.
    ``until`` (the end of the run, on the event loop's clock) bounds the call however late it
    starts (after calls whose first steps held the event loop).
    """
    return ThreadCall(tool, _kwargs(tool, arguments, context), timeout=timeout,
                      max_output_chars=max_output_chars, done=done, until=until)


class ThreadCall:
    """One call of a blocking tool in a worker thread: awaitable, for its :class:`Outcome`.

    Not a coroutine awaiting a future under a :class:`RunDeadline` (which cancels a task): the
    outcome is made on the event loop's thread where the worker hands its result over, or
    where the call's timeout expires (on the event loop's one timer), whichever comes first;
    the other is dropped. Awaiting it needs no task of its own, so a turn's thread calls are
    awaited in sequence and still run alongside (a task per call was a fifth of what such a
    call cost; bench/RESULTS.md, "Per call and per message"). The worker copies the context
    variables of the code that made the call.
    """

    __slots__ = ("_context", "_done", "_future", "_hand_off", "_kwargs", "_max_chars",
                 "_started", "_timeout", "_tool", "_waiter", "_watcher", "when")

    def __init__(self, tool: Tool, kwargs: dict[str, Any], *, timeout: float | None,
                 max_output_chars: int | None,
                 done: Callable[[Outcome], object] | None = None,
                 until: float | None = None) -> None:
        loop = asyncio.get_running_loop()
        self._future: asyncio.Future[Outcome] = loop.create_future()
        parts = _thread_parts(loop)
        self._hand_off = parts.hand_off
        self._tool, self._kwargs = tool, kwargs
        self._max_chars, self._done = max_output_chars, done
        self._context = contextvars.copy_context()
        self._waiter: asyncio.Task[None] | None = None
        self._watcher: Watcher | None = None
        when = None
        if timeout is not None or until is not None:
            when, timeout = _bounded(loop.time(), timeout, until)
        self.when, self._timeout = when, timeout
        self._started = time.perf_counter()
        if timeout is not None and timeout <= 0:  # no time left: the tool is not called at all
            self._settle(_not_started(tool))
            return
        if when is not None:
            self._watcher = loop_watcher = parts.watcher
            # Watcher.add without its frame when the timer is set earlier already (as
            # RunDeadline.arm): the usual case, the run's own deadline being watched.
            loop_watcher.deadlines.add(self)
            if when < loop_watcher.timer_when:
                loop_watcher.add(self)
        tool_threads().submit(self)

    def __await__(self) -> Generator[Any, None, Outcome]:
        return self._future.__await__()

    def finished(self) -> Outcome | None:
        """The call's outcome if it has ended (None while it runs, or once abandoned)."""
        return _ended(self._future)

    def cancel(self) -> None:
        """Abandon the call (the run was cancelled): its outcome is dropped, its thread runs
        on to its end."""
        self._future.cancel()
        self._stop()

    def __call__(self) -> None:
        """The job, in a worker thread: run the tool, hand the result to the event loop."""
        result: Any = None
        error: BaseException | None = None
        try:
            result = self._context.run(self._tool.invoke, **self._kwargs)
        except StopIteration as exc:  # no future can hold one (it would end the coroutine)
            error = RuntimeError(f"tool raised StopIteration: {exc}")
        except BaseException as exc:  # handed to the awaiting call, as run_in_executor does
            error = exc
        self._hand_off.put(self._context, self._deliver, result, error)

    def _deliver(self, result: Any, error: BaseException | None) -> None:
        """The worker's result, on the event loop's thread, in the call's context (its
        result event is emitted there, as from a call's task)."""
        if self._future.done():  # abandoned: timed out or cancelled
            return
        latency = time.perf_counter() - self._started
        if error is None:
            if _maybe_awaitable(result):  # a function returning an awaitable: await it
                self._waiter = asyncio.ensure_future(self._await(result))
                return
            self._settle(_finished(self._tool, result, latency, self._max_chars))
        elif isinstance(error, (Exception, asyncio.CancelledError)):  # a thread's is its own
            self._settle(_failure(self._tool, error, latency))
        else:  # KeyboardInterrupt, SystemExit...: raised where the call is awaited
            self._stop()
            self._future.set_exception(error)

    async def _await(self, awaitable: Any) -> None:
        try:
            result = await awaitable
        except (Exception, asyncio.CancelledError) as exc:
            # A CancelledError too: this task's own cancellation comes only once the call is
            # settled (then nothing more happens), any other is the tool's failure; let
            # through, it left the call waiting until its timeout, or for good.
            outcome = _failure(self._tool, exc, time.perf_counter() - self._started)
        else:
            outcome = _finished(self._tool, result, time.perf_counter() - self._started,
                                self._max_chars)
        self._waiter = None  # done: not to be cancelled by _stop
        if not self._future.done():
            self._settle(outcome)

    def expire(self) -> None:
        """The call's timeout passed (called by the event loop's watcher)."""
        if self._future.done():
            return
        # In a copy of the call's context: the worker thread may still be in the context.
        self._context.copy().run(self._settle, _timed_out(
            self._tool, self._timeout, time.perf_counter() - self._started))

    def _settle(self, outcome: Outcome) -> None:
        self._stop()
        self._future.set_result(outcome)
        if self._done is not None:
            self._done(outcome)

    def _stop(self) -> None:
        if self._watcher is not None:
            self._watcher.discard(self)
            self._watcher = None
        if self._waiter is not None and not self._waiter.done():
            self._waiter.cancel()


class _ThreadParts:
    """What a thread call needs of its event loop, found with one lookup: the hand-off of
    results and the deadline watcher."""

    __slots__ = ("hand_off", "watcher")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        # Neither holds the loop (strongly): the per-loop table's rule.
        self.hand_off, self.watcher = hand_off(loop), watcher(loop)


_thread_parts: Callable[[asyncio.AbstractEventLoop], _ThreadParts] = PerLoop(_ThreadParts).get


def finished(call: asyncio.Task[Outcome] | ThreadCall) -> Outcome | None:
    """The outcome of a call started alongside others if it has ended (None while it runs,
    or if it was cancelled)."""
    return call.finished() if isinstance(call, ThreadCall) else _ended(call)


def cancelled_itself(tool: Tool, exc: asyncio.CancelledError) -> Outcome:
    """The outcome of a call whose task ended cancelled although nobody cancelled the code
    awaiting it: the tool cancelled its own task (``asyncio.current_task().cancel()``), its
    failure as a CancelledError it raises is, not the run's cancellation. ``exc`` is raised
    again when the awaiting task is being cancelled (then the cancellation is the run's)."""
    if _cancel_requested():
        raise exc
    return _failure(tool, exc, 0.0)


def _ended(future: asyncio.Future[Outcome]) -> Outcome | None:
    if future.done() and not future.cancelled() and future.exception() is None:
        return future.result()
    return None


def start_task(work: Coroutine[Any, Any, Outcome]) -> asyncio.Task[Outcome]:
    """A task running one call alongside the others (its own copy of the context variables).

    The task starts eagerly: the call runs at once until it first waits, and one that never
    waits (a quick ``async def``) is done without being scheduled at all (on 3.12, half of
    what such a call cost beyond an inline one in a turn of eight; bench/RESULTS.md, "Per
    call and per message"). Python 3.12 does it itself (``eager_start``); on 3.11 asyncio's
    own event loops get the same from :func:`_eager_task`. A loop with a task factory makes
    the task its own way (not eagerly before 3.12).
    """
    loop = asyncio.get_running_loop()
    if loop.get_task_factory() is not None:  # the loop's own way of making tasks
        return loop.create_task(work)
    # The task directly: asyncio.create_task goes through three Python functions to get here.
    if sys.version_info >= (3, 12):
        return asyncio.Task(work, loop=loop, eager_start=True)
    if isinstance(loop, asyncio.BaseEventLoop):
        return _eager_task(work, loop)
    return asyncio.Task(work, loop=loop)  # another loop (uvloop): its first step scheduled


def _eager_task(work: Coroutine[Any, Any, Outcome], loop: asyncio.BaseEventLoop
                ) -> asyncio.Task[Outcome]:
    """Python 3.12's eager start on 3.11: the task is made, and its first step run here and
    now, as the loop would run it (in the task's context, the task being the current one:
    ``asyncio.current_task()`` in the call is its own task throughout, as an
    ``asyncio.timeout`` entered before the first wait needs), instead of on the loop's next
    round.

    A 3.11 task schedules its first step as it is made (``loop.call_soon``: the last handle
    in the loop's ready queue), and offers no way not to: that handle is taken back out of
    the queue and run here. A call that finishes in that step is done, its result event
    emitted, without a round of the event loop (the handle run from the queue, and the run
    awaiting it suspended and woken). One that waits has its task waiting as after any first
    step; what it raises is the task's, as in any step (KeyboardInterrupt and SystemExit go
    on from here, as from a 3.12 eager start).
    """
    context = copy_context()
    task = asyncio.Task(work, loop=loop, context=context)
    ready: collections.deque[Any] = loop._ready  # type: ignore[attr-defined]
    step = ready[-1] if ready else None
    # Its own step (the handle in the task's context, with no arguments), or else not the
    # asyncio this was written for: then the step stays where it is.
    if step is None or step._context is not context or step._args:
        return task
    ready.pop()
    running = asyncio.current_task(loop)
    if running is not None:  # a step enters its task: the running one leaves for its time
        _leave_task(loop, running)
    try:
        context.run(step._callback)
    except BaseException:  # KeyboardInterrupt, SystemExit: on from here, to the caller
        # The task holds it too; it is the caller's now, so the task is not reported (when
        # collected) as one whose exception nobody retrieved.
        if task.done() and not task.cancelled():
            task.exception()
        raise
    finally:
        if running is not None:
            _enter_task(loop, running)
    return task


_PLAIN_RESULTS: Final = (str, dict, list, int, float, bool, type(None), tuple)
"""Types a tool returns that are never awaitable (checked before ``inspect.isawaitable``)."""


def _maybe_awaitable(result: Any) -> bool:
    """Whether ``result`` is awaitable (a sync function may return a coroutine)."""
    return type(result) not in _PLAIN_RESULTS and inspect.isawaitable(result)


_OUTPUT_OPTIONS: Final = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY


def render_output(value: Any, max_chars: int | None) -> str:
    """The text of a tool result: ``str`` as is, other values as compact JSON.

    Any JSON value is accepted (integers beyond 64 bits, deep nesting); lone surrogates, which
    no request could carry, become U+FFFD in text and ``\\u`` escapes in JSON.

    Longer than ``max_chars``, the text is cut and ends with a marker saying how much was cut.
    """
    if isinstance(value, str):
        text = value if value.isascii() else clean_text(value)  # ASCII: no call
    else:
        try:
            text = orjson.dumps(value, option=_OUTPUT_OPTIONS).decode("utf-8")
        except TypeError:  # a big integer, deep nesting, a lone surrogate: the exact path
            text = exact_json.dumps(value)
    if max_chars is None or len(text) <= max_chars:
        return text
    cut = len(text) - max_chars
    return (f"{text[:max_chars]}\n[... output truncated: {cut} of {len(text)} characters cut "
            f"(limit {max_chars})]")


def _finished(tool: Tool, result: Any, latency: float, max_output_chars: int | None
              ) -> Outcome:
    try:
        output = render_output(result, max_output_chars)
    except Exception as exc:  # an unserializable result is the tool's fault
        return _failure(tool, exc, latency, what="returned a value that is not JSON")
    return Outcome(result, output, None, None, latency)  # positional: one per call


def _kwargs(tool: Tool, arguments: dict[str, Any], context: ToolContext | None
            ) -> dict[str, Any]:
    """The keyword arguments of the call: the arguments converted, the context added."""
    if not tool.converters and tool.context_param is None:
        return arguments
    kwargs = arguments
    if tool.converters:
        kwargs = {k: (tool.converters[k](v) if k in tool.converters else v)
                  for k, v in arguments.items()}
    if tool.context_param is not None:
        kwargs = {**kwargs, tool.context_param: context}
    return kwargs


def _cancel_requested() -> bool:
    """Whether the running task counts a request to cancel it: a CancelledError raised in
    it is then that cancellation, else one of the awaited code's own (a future it awaited
    was cancelled elsewhere), which is not the task's to pass on."""
    task = asyncio.current_task()
    return task is None or task.cancelling() > 0


def _failure(tool: Tool, exc: BaseException, latency: float, *,
             what: str = "raised an exception") -> Outcome:
    kind = type(exc).__name__
    detail = str(exc).strip()
    if len(detail) > 2000:
        detail = detail[:2000] + "..."
    text = f"{kind}: {detail}" if detail else kind
    return Outcome(
        None,
        error_text("tool_exception", f"tool {tool.name!r} {what}: {text}"),
        "tool_exception", f"{what}: {kind}", latency)


def _timed_out(tool: Tool, timeout: float | None, latency: float) -> Outcome:
    return Outcome(
        None,
        error_text("tool_timeout", f"tool {tool.name!r} did not finish within "
                   f"{_seconds(timeout)}. Try simpler arguments, or answer without it."),
        "tool_timeout", f"did not finish within {_seconds(timeout)}", latency)


def _not_started(tool: Tool) -> Outcome:
    return Outcome(
        None,
        error_text("tool_timeout", f"tool {tool.name!r} was not run: the run's time was up "
                   "before it could start."),
        "tool_timeout", "not started: the run's time was up", 0.0, executed=False)


def _seconds(timeout: float | None) -> str:
    return f"{timeout:g} s" if timeout is not None else "its time limit"
