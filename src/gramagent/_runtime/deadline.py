"""A run's wall-time deadline: it cuts short the model request in flight when it passes.

An await under a deadline works like one inside ``async with asyncio.timeout_at(when):``: at
``when`` it is cancelled, and the code around it puts its timeout in place of the
cancellation (``expired`` then says the deadline did it); any other cancellation passes
through. Not a ``with`` statement but three calls (docs/performance.md, "The loop"):
:meth:`RunDeadline.start` right before the await,
:meth:`RunDeadline.cut_short` (the rule, in one place) on :class:`asyncio.CancelledError`, and
:meth:`RunDeadline.settle` after it, however it ends (an await that swallowed the deadline's
cancellation, or turned it into a result or another error, still counts it in its task until
then; ``asyncio.timeout`` takes it back the same way)::

    deadline.start()
    try:
        result = await work
    except asyncio.CancelledError:
        if not deadline.cut_short():
            raise  # another's cancellation
        ...  # the deadline's: its timeout in place of the cancellation
    finally:
        deadline.settle()

Tool calls are not awaited under the run's deadline: each gets one of its own (its timeout,
bounded by the time that remains of the run), on the same one timer per event loop.
"""

from __future__ import annotations

import asyncio
import math
import weakref
from collections.abc import Callable
from typing import Protocol

from gramagent._runtime.per_loop import PerLoop

__all__ = ["Expiring", "RunDeadline", "Watcher", "watcher"]


class Expiring(Protocol):
    """What the event loop's one timer watches: a time, and what to do when it comes."""

    when: float | None
    """On the event loop's clock; set (not None) while watched."""

    def expire(self) -> None:
        """The clock reached :attr:`when` (called once, on the event loop's thread)."""


# Not asyncio.timeout_at, which schedules a timer per request (docs/performance.md, "The
# loop"): each event loop has one timer, set for the earliest deadline of its runs; a run joins
# and leaves a set (arm, disarm), and a request only flips a flag.
class RunDeadline:
    """The wall-time deadline of one run, or the timeout of one tool call (``when`` on the
    event loop's clock; None: none).

    Call :meth:`arm` before the first :meth:`start` and :meth:`disarm` when the run ends.
    """

    __slots__ = ("_task", "_watcher", "expired", "waiting", "when")

    def __init__(self, when: float | None) -> None:
        # Budget (a RunDeadline) sets these fields itself: keep the two alike.
        self.when = when
        self.expired = False
        """Whether the deadline cancelled an await (which then raised TimeoutError)."""
        self._task: asyncio.Task[object] | None = None
        self._watcher: Watcher | None = None
        self.waiting: int | None = None
        """While an await is under the deadline (armed): its task's count of cancellation
        requests when the await began (what :meth:`cut_short` compares with); else None."""

    def arm(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Start watching the clock (once per run, before its first request), on ``loop``
        (the running event loop: None, or given by a caller that holds it)."""
        when = self.when
        if when is not None:
            if loop is None:
                loop = asyncio.get_running_loop()
            self._task = asyncio.current_task(loop)
            self._watcher = loop_watcher = watcher(loop)
            loop_watcher.deadlines.add(self)
            if when < loop_watcher.timer_when:  # else the timer is set for an earlier deadline
                loop_watcher.add(self)

    def watch(self, loop: asyncio.AbstractEventLoop, loop_watcher: Watcher | None = None
              ) -> None:
        """:meth:`arm` and :meth:`start` at once, for one await of the current task (a tool
        call's); :meth:`release` ends it. ``loop_watcher``: ``loop``'s watcher, when the
        caller has it (found once for the calls of a run)."""
        when = self.when
        if when is None:
            return
        self._task = task = asyncio.current_task(loop)
        if loop_watcher is None:
            loop_watcher = watcher(loop)
        self._watcher = loop_watcher
        loop_watcher.deadlines.add(self)
        if when < loop_watcher.timer_when:  # else the timer is set for an earlier deadline
            loop_watcher.add(self)
        if task is not None:
            self.waiting = task.cancelling()

    def release(self) -> None:
        """The await :meth:`watch` put under the deadline is over: no longer watched, and
        if the deadline cut it short, its cancellation taken back."""
        if self._watcher is not None:
            self._watcher.discard(self)
        if self.expired:
            self.settle()

    def disarm(self) -> None:
        """Stop watching (at the end of the run, however it ends)."""
        if self._watcher is not None:
            self._watcher.discard(self)

    def postpone(self, seconds: float) -> None:
        """Move the deadline ``seconds`` later (time the run spent waiting for a person)."""
        if self.when is None or seconds <= 0:
            return
        self.when += seconds
        if self._watcher is not None:  # armed: the timer may have passed the old deadline
            self._watcher.discard(self)
            self._watcher.add(self)

    def start(self) -> None:
        """Put the await that follows under the deadline (armed; until ``waiting`` is set
        back to None)."""
        task = self._task
        if task is not None:
            self.waiting = task.cancelling()

    def cut_short(self) -> bool:
        """The await under the deadline raised CancelledError: end it, and say whether the
        deadline cancelled it (then the caller puts its timeout in place of the
        cancellation; otherwise the cancellation passes through)."""
        waiting, self.waiting = self.waiting, None
        task = self._task
        # Ours only if we cancelled and no other cancellation is pending (asyncio.timeout's rule).
        return (self.expired and waiting is not None and task is not None
                and task.uncancel() <= waiting)

    def settle(self) -> None:
        """The await under the deadline is over, however it ended: not under it any more.
        If the deadline cancelled it and it did not end in CancelledError (:meth:`cut_short`
        takes that one), it swallowed the cancellation, or turned it into a result or an error
        of its own: the deadline's request is taken back from the task all the same (as
        ``asyncio.timeout`` does), or the task would count a cancellation nobody handles, and
        an ``asyncio.timeout`` or ``TaskGroup`` around it would take its own for another's."""
        waiting, self.waiting = self.waiting, None
        task = self._task
        if self.expired and waiting is not None and task is not None:
            task.uncancel()

    def expire(self) -> None:
        """The clock reached ``when``: cancel the await in flight, if any (called by the
        event loop's watcher)."""
        if self.waiting is not None and self._task is not None:
            self.expired = True
            self._task.cancel()


class Watcher:
    """The deadlines of the runs and tool calls on one event loop, behind a single timer for
    the earliest (:func:`watcher`)."""

    __slots__ = ("_timer", "deadlines", "discard", "timer_when")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        # Neither ``loop`` nor the timer (which holds it) is held strongly (the watcher works
        # on the running loop when it does): held, the loop could never leave the per-loop
        # table (whose keys are weak), and every event loop a program ran would be kept.
        del loop
        self.deadlines: set[Expiring] = set()
        """The deadlines watched (:meth:`add` puts one in)."""
        self._timer: weakref.ref[asyncio.TimerHandle] | None = None
        """The timer, while the loop holds it (scheduled)."""
        self.timer_when = math.inf
        """When the timer is set for (inf: not set); a deadline put in :attr:`deadlines`
        before it needs no :meth:`add`."""
        self.discard: Callable[[Expiring], None] = self.deadlines.discard
        """Stop watching a deadline (nothing if it is not watched): the set's own method,
        called without a Python frame (every run and timed call ends with it)."""

    def add(self, deadline: Expiring) -> None:
        """Watch ``deadline`` (its :attr:`~Expiring.when` set) until it expires or is
        discarded."""
        assert deadline.when is not None
        self.deadlines.add(deadline)
        if deadline.when < self.timer_when:
            timer = None if self._timer is None else self._timer()
            if timer is not None:
                timer.cancel()
            self.timer_when = deadline.when
            self._timer = weakref.ref(
                asyncio.get_running_loop().call_at(deadline.when, self._fire))

    def _fire(self) -> None:
        loop = asyncio.get_running_loop()  # the watcher's: its timer called this
        self._timer, self.timer_when = None, math.inf
        now = loop.time()
        deadlines = self.deadlines
        try:
            for deadline in list(deadlines):
                when = deadline.when
                assert when is not None
                if when <= now:
                    deadlines.discard(deadline)
                    deadline.expire()
                elif when < self.timer_when:
                    self.timer_when = when
        except BaseException:
            # One expire raised (the loop's exception handler reports it): the deadlines not
            # looked at yet are still watched, the timer set for the earliest of them (those
            # due fire at once), or a deadline armed later could join a set no timer serves.
            self.timer_when = min((d.when for d in deadlines if d.when is not None),
                                  default=math.inf)
            raise
        finally:
            if deadlines:
                self._timer = weakref.ref(loop.call_at(self.timer_when, self._fire))


watcher: Callable[[asyncio.AbstractEventLoop], Watcher] = PerLoop(Watcher).get
"""The watcher of a loop (made by its first run or call with a time limit)."""
