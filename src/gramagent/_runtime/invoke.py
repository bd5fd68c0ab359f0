"""Running one checked tool call: how it runs, its timeout, its exceptions, its output text.

How a call runs (:func:`start_call` for one call; for the calls of a turn, the caller runs
the first two kinds with :func:`run_inline` and starts the others with :func:`start_calls`):

============================================  ==============================================
the call                                      how it runs
============================================  ==============================================
a dry run                                     not at all: :data:`DRY_RUN_RESULT` at once
a plain function declared ``blocking=False``  inline, on the event loop's thread, when the
                                              caller runs it (:data:`InlineCall`)
an ``async def`` tool                         in a task of its own (:func:`start_task`)
a plain (blocking) function                   in a worker thread (:class:`ThreadCall`)
any of them, traced                           as above, inside its ``execute_tool`` span
============================================  ==============================================

Nothing here raises for a failing tool (cancellation of the run aside): exceptions and
timeouts become an :class:`Outcome` with an error the model sees. :func:`render_output` turns
a tool's return value into the text sent back, cut to the output limit with a marker.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Generator, Sequence
from contextvars import copy_context
from dataclasses import dataclass, replace
from functools import partial
from typing import Final, TypeAlias, TypeGuard, cast

import orjson

from gramagent import _json as exact_json
from gramagent._json import clean_text
from gramagent._runtime import tracing
from gramagent._runtime.deadline import RunDeadline, Watcher, watcher
from gramagent._runtime.library import Tool, ToolContext
from gramagent._runtime.per_loop import PerLoop
from gramagent._runtime.threads import HandOff, hand_off, tool_threads
from gramagent._spec.calls.check import ToolErrorType, error_text

__all__ = ["DRY_RUN_RESULT", "CallArgs", "CallSettings", "InlineCall", "Outcome", "Running",
           "Started", "ThreadCall", "cancelled_itself", "execute", "finished", "render_output",
           "run_inline", "settle", "start_call", "start_calls", "start_task"]

DRY_RUN_RESULT: Final = {"ok": True}
"""What every call returns in dry-run mode (the no-op executor of the ADR)."""


# Not frozen: one is made per call; read-only by convention.
@dataclass(slots=True)
class Outcome:
    """How one call went (read-only by convention)."""

    result: object
    """The tool's return value (None on error)."""
    output: str
    """The text sent back to the model (the rendered result, or the error message)."""
    error_type: ToolErrorType | None = None
    event_message: str | None = None
    """For events: the error without argument values."""
    latency: float = 0.0
    """Seconds the tool ran."""
    executed: bool = True
    """Whether the tool actually ran (False in dry-run mode)."""


# Not frozen: one is made per turn; read-only by convention.
@dataclass(slots=True, kw_only=True)
class CallSettings:
    """What every call of a turn runs with (read-only by convention)."""

    dry_run: bool = False
    """Run no tool: every call returns :data:`DRY_RUN_RESULT`."""
    max_output_chars: int | None = None
    """Cut each rendered output to this many characters."""
    until: float | None = None
    """The end of the run, on the event loop's clock: it bounds each call's timeout when the
    call starts, however late that is."""
    tracer: tracing.Tracer | None = None
    """With a tracer, each call runs inside its ``execute_tool`` span."""
    watcher: Watcher | None = None
    """The deadline watcher of the event loop the calls run on, when the caller found it
    (once for the calls of a run); None: each call with a timeout looks it up."""


DoneCallback: TypeAlias = Callable[["Outcome"], object]
"""Told of a call's outcome when the call ends (its result event)."""


CallArgs: TypeAlias = tuple[Tool, dict[str, object], "ToolContext | None", "float | None",
                            "DoneCallback | None", str]
"""One call to start: its tool, validated arguments, context, timeout (bounded by the end of
the run when it starts; None: no limit), the callback told of its outcome, and its id (for
its span)."""

InlineCall: TypeAlias = CallArgs
"""A call of a plain function declared ``blocking=False``, to run on the event loop's thread
with :func:`run_inline` when the caller is ready for it (after the calls of its turn that run
alongside have started)."""

Running: TypeAlias = "asyncio.Task[Outcome] | ThreadCall"
"""A call started alongside others: await it for its outcome, cancel it to abandon it."""

Started: TypeAlias = "Outcome | InlineCall | Running"
"""What :func:`start_calls` gives for a call: the outcome already, an inline call to run, or
a call running alongside."""


def start_calls(calls: Sequence[CallArgs], settings: CallSettings,
                running: list[tuple[int, Running]]) -> None:
    """Start calls that run alongside others (none of a dry run, nor of a tool that
    :attr:`~gramagent._runtime.library.Tool.runs_inline`: the caller runs those with
    :func:`run_inline`), in call order, each the way its tool runs (the table of the module
    docs): each goes into ``running`` with its index as soon as it starts (when a first step
    raises, those started before it are there to be abandoned).

    A call in a worker thread that comes after a call in a task is submitted on the event
    loop's next round, after that task's first step (which runs at once on Python 3.12 and
    later, or on the loop's next round before); its time left is read then. Traced, a call
    runs in a task of its own, its span the current one around it.
    """
    tracer = settings.tracer
    after_task = False
    for index, call in enumerate(calls):
        tool = call[0]
        one: Running
        if tracer is not None:
            one = start_task(_traced(tracer, tool, call[5], partial(_alongside, call, settings)))
        elif tool.is_async:
            kwargs = (call[1] if not tool.converters and tool.context_param is None
                      else _kwargs(tool, call[1], call[2]))
            one = start_task(_awaited(tool, None, kwargs, time.perf_counter(), call[3],
                                      settings, call[4]))
        else:
            # (tool, kwargs, timeout, max_output_chars, done, until, later): a class called
            # with keywords packs them into a dict first, per call.
            one = ThreadCall(tool, _kwargs(tool, call[1], call[2]), call[3],
                             settings.max_output_chars, call[4], settings.until, after_task)
        if isinstance(one, asyncio.Task):
            after_task = True
        running.append((index, one))


def start_call(tool: Tool, arguments: dict[str, object], context: ToolContext | None, *,
               timeout: float | None, settings: CallSettings,
               done: DoneCallback | None = None, call_id: str = "") -> Started:
    """Start one checked call, the way its tool runs (:func:`start_calls`).

    Args:
        tool: the implementation.
        arguments: validated arguments, passed as keyword arguments.
        context: passed to the tool's context parameter, if it has one.
        timeout: seconds before the call is abandoned with ``tool_timeout`` (bounded by
            ``settings.until`` when the call starts); None: no limit.
        settings: what the calls of the turn share.
        done: told of the outcome when the call ends.
        call_id: the call's id, for its span.

    Returns:
        The :class:`Outcome` (a dry run); an :data:`InlineCall` (the caller runs it when it
        is ready); or a call running alongside (:data:`Running`).
    """
    call: CallArgs = (tool, arguments, context, timeout, done, call_id)
    if settings.dry_run:
        return _dry_run(call)
    if tool.runs_inline:
        return call
    running: list[tuple[int, Running]] = []
    start_calls([call], settings, running)
    return running[0][1]


def _dry_run(call: CallArgs) -> Outcome:
    outcome = Outcome(DRY_RUN_RESULT, render_output(DRY_RUN_RESULT, None), executed=False)
    done = call[4]
    if done is not None:
        done(outcome)
    return outcome


def run_inline(call: InlineCall, settings: CallSettings
               ) -> Outcome | Coroutine[object, object, Outcome]:
    """Run an inline call now, in a copy of the context variables (no timeout: nothing could
    interrupt it): its :class:`Outcome`; or, for a function that returned an awaitable (and
    for any call when traced), the coroutine awaiting it under the call's timeout, which the
    caller awaits next, in its own task. In a dry run, the call's :data:`DRY_RUN_RESULT`."""
    if settings.dry_run:
        return _dry_run(call)
    if settings.tracer is not None:  # inside its span, run as untraced
        return _traced(settings.tracer, call[0], call[5],
                       partial(run_inline, call, replace(settings, tracer=None)))
    tool, arguments, context, timeout, done, _ = call
    kwargs = (arguments if not tool.converters and tool.context_param is None
              else _kwargs(tool, arguments, context))
    started = time.perf_counter()
    try:
        result = copy_context().run(tool.invoke, **kwargs)
    except (Exception, asyncio.CancelledError) as exc:  # raised without an await
        outcome = _failure(tool, exc, time.perf_counter() - started)
    else:
        if type(result) not in _PLAIN_RESULTS and inspect.isawaitable(result):
            return _awaited(tool, result, kwargs, started, timeout, settings, done)
        outcome = _finished(tool, result, time.perf_counter() - started,
                            settings.max_output_chars)
    if done is not None:
        done(outcome)
    return outcome


def _alongside(call: CallArgs, settings: CallSettings
               ) -> Coroutine[object, object, Outcome] | ThreadCall:
    """An async tool's call (the coroutine to run in a task), or a blocking function's,
    started in a worker thread."""
    tool, arguments, context, timeout, done, _ = call
    if tool.is_async:
        return _awaited(tool, None, _kwargs(tool, arguments, context), time.perf_counter(),
                        timeout, settings, done)
    return ThreadCall(tool, _kwargs(tool, arguments, context), timeout=timeout,
                      max_output_chars=settings.max_output_chars, done=done,
                      until=settings.until)


async def _traced(tracer: tracing.Tracer, tool: Tool, call_id: str,
                  start: Callable[[], Started | Coroutine[object, object, Outcome]]
                  ) -> Outcome:
    """The call ``start`` starts, awaited inside its ``execute_tool`` span."""
    with tracing.tool_span(tracer, tool=tool.name, call_id=call_id) as span:
        outcome = await settle(start())
        if outcome.error_type is not None:
            tracing.fail(span, outcome.error_type)
    return outcome


async def settle(started: Started | Coroutine[object, object, Outcome],
                 settings: CallSettings | None = None) -> Outcome:
    """The outcome of a started call, awaited here (an inline call is run here); a
    cancellation of the awaiting code abandons a call running alongside."""
    if isinstance(started, tuple):  # an inline call (the turn's settings given)
        assert settings is not None
        started = run_inline(started, settings)
    if isinstance(started, Outcome):
        return started
    if isinstance(started, (asyncio.Task, ThreadCall)):
        try:
            return await started
        except BaseException:  # cancelled: the call is abandoned (a thread runs on)
            started.cancel()
            raise
    return await started


async def execute(
    tool: Tool,
    arguments: dict[str, object],
    *,
    context: ToolContext | None,
    timeout: float | None,
    dry_run: bool = False,
    max_output_chars: int | None = None,
) -> Outcome:
    """Run ``tool`` with validated ``arguments`` to its outcome; never raises for a failure of
    the tool.

    Sync tools run in a worker thread (context variables copied), or inline when marked
    ``blocking=False`` (no timeout applies then: nothing can interrupt them); async tools run
    in a task of their own. A sync tool that times out keeps running in its thread until it
    returns (Python cannot stop a thread), but its result is discarded, and the process does
    not wait for it at exit (:mod:`~gramagent._runtime.threads`).

    Args:
        tool: the implementation.
        arguments: validated arguments, passed as keyword arguments.
        context: passed to the tool's context parameter, if it has one.
        timeout: seconds before the call is abandoned with ``tool_timeout``; None: no limit.
        dry_run: return :data:`DRY_RUN_RESULT` without running the tool.
        max_output_chars: cut the rendered output to this many characters.
    """
    settings = CallSettings(dry_run=dry_run, max_output_chars=max_output_chars)
    return await settle(start_call(tool, arguments, context, timeout=timeout,
                                   settings=settings), settings)


async def _awaited(tool: Tool, pending: Awaitable[object] | None, kwargs: dict[str, object],
                   started: float, timeout: float | None, settings: CallSettings,
                   done: DoneCallback | None) -> Outcome:
    """Await an async tool's call (``pending`` None: ``tool.invoke(**kwargs)``) or the
    awaitable a plain function returned, under the call's timeout, never past
    ``settings.until`` (the end of the run); ``done`` gets the outcome."""
    loop = asyncio.get_running_loop()
    now = loop.time()
    when, timeout = _bounded(now, timeout, settings.until)
    if pending is None and when is not None and when <= now:
        outcome = _not_started(tool)  # no time left: the tool is not called at all
        if done is not None:
            done(outcome)
        return outcome
    # Not asyncio.timeout: a RunDeadline shares its event loop's one timer with every run and
    # call (see deadline.py).
    deadline = None
    if when is not None:
        deadline = RunDeadline(when)
        deadline.watch(loop, settings.watcher)
    try:
        if pending is None:  # an async tool: its call is a coroutine
            pending = cast("Awaitable[object]", tool.invoke(**kwargs))
        result = await pending
        if _maybe_awaitable(result):  # a sync function returning an awaitable
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
        outcome = _finished(tool, result, time.perf_counter() - started,
                            settings.max_output_chars)
    finally:
        if deadline is not None:
            deadline.release()
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


class ThreadCall:
    """One call of a blocking tool in a worker thread: awaitable, for its :class:`Outcome`.

    Not a coroutine awaiting a future under a :class:`RunDeadline` (which cancels a task): the
    outcome is made on the event loop's thread where the worker hands its result over, or
    where the call's timeout expires (on the event loop's one timer), whichever comes first;
    the other is dropped. Awaiting it needs no task of its own, so a turn's thread calls are
    awaited in sequence and still run alongside. The worker copies the context variables of
    the code that made the call; ``until`` (the end of the run, on the event loop's clock)
    bounds the call however late it starts; ``later``: the call starts on the event loop's
    next round (after the first steps of the tasks started before it), not at once.
    """

    __slots__ = ("_context", "_done", "_future", "_hand_off", "_kwargs", "_max_chars",
                 "_started", "_timeout", "_tool", "_waiter", "_watcher", "when")

    def __init__(self, tool: Tool, kwargs: dict[str, object], timeout: float | None,
                 max_output_chars: int | None, done: DoneCallback | None = None,
                 until: float | None = None, later: bool = False) -> None:
        loop = asyncio.get_running_loop()
        self._future: asyncio.Future[Outcome] = loop.create_future()
        self._tool, self._kwargs = tool, kwargs
        self._max_chars, self._done = max_output_chars, done
        self._context = contextvars.copy_context()
        self._waiter: asyncio.Task[None] | None = None
        self._watcher: Watcher | None = None
        self._hand_off: HandOff | None = None
        self.when: float | None = None
        """When the call times out, on the event loop's clock (None: never, or not started)."""
        self._timeout, self._started = timeout, 0.0
        if later:
            loop.call_soon(self._start, loop, until)
        else:
            self._start(loop, until)

    def _start(self, loop: asyncio.AbstractEventLoop, until: float | None) -> None:
        """Submit the call to a worker thread, its timeout bounded by ``until`` from now (or
        not at all when no time is left, or when it was abandoned before it started)."""
        if self._future.done():
            return
        when, timeout = None, self._timeout
        if timeout is not None or until is not None:
            when, timeout = _bounded(loop.time(), timeout, until)
        self.when, self._timeout = when, timeout
        self._started = time.perf_counter()
        if timeout is not None and timeout <= 0:  # no time left: the tool is not called at all
            self._settle(_not_started(self._tool))
            return
        parts = _thread_parts(loop)
        self._hand_off = parts.hand_off
        if when is not None:
            self._watcher = loop_watcher = parts.watcher
            loop_watcher.deadlines.add(self)
            if when < loop_watcher.timer_when:  # else the timer is set for an earlier deadline
                loop_watcher.add(self)
        tool_threads().submit(self)

    def __await__(self) -> Generator[object, None, Outcome]:
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
        result: object = None
        error: BaseException | None = None
        try:
            result = self._context.run(self._tool.invoke, **self._kwargs)
        except StopIteration as exc:  # no future can hold one (it would end the coroutine)
            error = RuntimeError(f"tool raised StopIteration: {exc}")
        except BaseException as exc:  # handed to the awaiting call, as run_in_executor does
            error = exc
        assert self._hand_off is not None  # set before the call was submitted
        self._hand_off.put(self._context, self._deliver, result, error)

    def _deliver(self, result: object, error: BaseException | None) -> None:
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

    async def _await(self, awaitable: Awaitable[object]) -> None:
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


def finished(call: Running) -> Outcome | None:
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


def start_task(work: Coroutine[object, object, Outcome]) -> asyncio.Task[Outcome]:
    """A task running one call alongside the others (its own copy of the context variables).

    On Python 3.12 and later the task starts eagerly (:func:`asyncio.eager_task_factory`):
    the call runs at once until it first waits, and one that never waits is done when this
    returns. Before 3.12 the task's first step runs when the event loop next runs ready
    callbacks. A loop with a task factory of its own makes the task its way
    (:meth:`asyncio.loop.create_task`).
    """
    loop = asyncio.get_running_loop()
    if loop.get_task_factory() is not None:
        return loop.create_task(work)
    if sys.version_info >= (3, 12):
        first = _FirstStep()
        task = asyncio.eager_task_factory(loop, _guarded(work, first))
        first.running = False
        if first.interrupt is not None:  # the caller's, as a 3.12 eager start raises it
            raise first.interrupt
        return task
    return asyncio.Task(work, loop=loop)


class _FirstStep:
    """Whether a task is still in its eager first step, and what interrupted it there."""

    __slots__ = ("interrupt", "running")

    def __init__(self) -> None:
        self.running = True
        self.interrupt: BaseException | None = None


async def _guarded(work: Coroutine[object, object, Outcome], first: _FirstStep) -> Outcome:
    """``work``; a KeyboardInterrupt or SystemExit of its eager first step is kept for
    :func:`start_task` to raise (the task ends without it: it would be reported as never
    retrieved when collected, after the interrupt was handled)."""
    try:
        return await work
    except (KeyboardInterrupt, SystemExit) as exc:
        if not first.running:
            raise
        first.interrupt = exc
        return Outcome(None, "")  # never seen: start_task raises instead of returning the task


_PLAIN_RESULTS: Final = (str, dict, list, int, float, bool, type(None), tuple)
"""Types a tool returns that are never awaitable (checked before ``inspect.isawaitable``)."""


def _maybe_awaitable(result: object) -> TypeGuard[Awaitable[object]]:
    """Whether ``result`` is awaitable (a sync function may return a coroutine)."""
    return type(result) not in _PLAIN_RESULTS and inspect.isawaitable(result)


_OUTPUT_OPTIONS: Final = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY


def render_output(value: object, max_chars: int | None) -> str:
    """The text of a tool result: ``str`` as is, other values as compact JSON.

    Any JSON value is accepted (integers beyond 64 bits, deep nesting); lone surrogates, which
    no request could carry, become U+FFFD in text and ``\\u`` escapes in JSON.

    Longer than ``max_chars``, the text is cut and ends with a marker saying how much was cut.
    """
    if isinstance(value, str):
        text = value if value.isascii() else clean_text(value)
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


def _finished(tool: Tool, result: object, latency: float, max_output_chars: int | None
              ) -> Outcome:
    try:
        output = render_output(result, max_output_chars)
    except Exception as exc:  # an unserializable result is the tool's fault
        return _failure(tool, exc, latency, what="returned a value that is not JSON")
    return Outcome(result, output, None, None, latency)


def _kwargs(tool: Tool, arguments: dict[str, object], context: ToolContext | None
            ) -> dict[str, object]:
    """The keyword arguments of the call: the arguments converted, the context added."""
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
