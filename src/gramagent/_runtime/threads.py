"""The worker threads that run the calls of blocking tools (plain functions).

Not a :class:`concurrent.futures.ThreadPoolExecutor`: for every job its ``submit`` makes a
future (with a Python-level ``Condition``) and a work item and takes its idle-thread semaphore,
and its worker sets the future's state and releases the semaphore: Python-level locking on
both sides of each call (docs/performance.md, "The loop"). Here a job is a callable put on a
``SimpleQueue``; it hands its own result back (a
:class:`~gramagent._runtime.invoke.ThreadCall` settles an asyncio future).

Threads are made as jobs need them, up to a limit, and kept for the next jobs. They are daemon
threads: the process does not wait at exit for a call that was abandoned (timed out) and is
still running, as it would for an executor's. A forked child starts with no threads.

Results go back to their event loop through its :class:`HandOff`: one wake-up of the loop for
all the results that arrive while one is pending, instead of one per result.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import queue
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Final

from gramagent._runtime.per_loop import PerLoop

__all__ = ["MAX_TOOL_THREADS", "HandOff", "ToolThreads", "hand_off", "tool_threads"]

# Their own threads: asyncio.to_thread's default executor has only min(32, cores + 4), too few
# for wide parallel turns on small machines.
MAX_TOOL_THREADS: Final = 64
"""Worker threads for sync tools (shared by all runs of the process)."""


class ToolThreads:
    """Up to ``limit`` worker threads taking jobs in order, each job by one thread."""

    __slots__ = ("_idle", "_jobs", "_limit", "_lock", "_name", "_started")

    def __init__(self, limit: int, name: str) -> None:
        self._limit = limit
        self._name = name
        self._jobs: queue.SimpleQueue[Callable[[], object]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._started = 0
        self._idle = 0
        """Threads waiting for a job that no submitted job has claimed yet."""

    def submit(self, job: Callable[[], object]) -> None:
        """Run ``job()`` in a worker thread: an idle one, a new one while there are fewer
        than the limit, else the first to finish its job. ``job`` should not raise: what it
        raises goes to :func:`threading.excepthook`, and the thread carries on."""
        with self._lock:
            if self._idle:
                self._idle -= 1  # that thread takes this job (or one put before it)
            elif self._started < self._limit:
                self._started += 1
                threading.Thread(target=self._work, name=f"{self._name}_{self._started}",
                                 daemon=True).start()
        self._jobs.put(job)

    def _work(self) -> None:
        jobs, lock = self._jobs, self._lock
        while True:
            job = jobs.get()
            try:
                job()
            except BaseException:  # a job's own failure: report it, keep the thread
                threading.excepthook(threading.ExceptHookArgs(
                    (*sys.exc_info(), threading.current_thread())))
            del job
            with lock:
                self._idle += 1


class HandOff:
    """Worker threads' results on their way to one event loop.

    :meth:`put` (any thread) queues a delivery; the first while none is pending wakes the loop
    (``call_soon_threadsafe``: a handle and a write to the loop's self-pipe, which the loop
    then reads), and the loop runs every delivery queued by then. The calls of a turn finish
    close together: a turn of eight took eight wake-ups, now usually one or two.
    """

    __slots__ = ("_deliveries", "_lock", "_loop", "_pending")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        # Weakly: held strongly, the loop could never leave the per-loop table (whose keys
        # are weak), and every event loop a program ran would be kept.
        self._loop = weakref.ref(loop)
        self._lock = threading.Lock()
        self._deliveries: list[tuple[contextvars.Context,
                                     Callable[[object, BaseException | None], object], object,
                                     BaseException | None]] = []
        self._pending = False

    def put(self, context: contextvars.Context,
            deliver: Callable[[object, BaseException | None], object], result: object,
            error: BaseException | None) -> None:
        """Have the event loop call ``deliver(result, error)`` soon, in ``context`` (from any
        thread). A closed loop drops it: its runs are long gone."""
        with self._lock:
            self._deliveries.append((context, deliver, result, error))
            if self._pending:
                return
            self._pending = True
        loop = self._loop()
        if loop is None:  # closed and gone
            return
        with contextlib.suppress(RuntimeError):  # the loop is closed
            loop.call_soon_threadsafe(self._deliver)

    def _deliver(self) -> None:
        with self._lock:
            deliveries, self._deliveries = self._deliveries, []
            self._pending = False
        for context, deliver, result, error in deliveries:
            try:
                context.run(deliver, result, error)
            except Exception as exc:  # reported like a failing callback; the others go on
                asyncio.get_running_loop().call_exception_handler({
                    "message": "a tool call's hand-off failed", "exception": exc})


hand_off: Callable[[asyncio.AbstractEventLoop], HandOff] = PerLoop(HandOff).get
"""The hand-off of a loop (made by its first thread call)."""


_threads: ToolThreads | None = None
_threads_lock = threading.Lock()


def tool_threads() -> ToolThreads:
    """The worker threads of this process (made on first use)."""
    global _threads
    threads = _threads
    if threads is None:
        with _threads_lock:
            threads = _threads
            if threads is None:
                threads = _threads = ToolThreads(MAX_TOOL_THREADS, "gramagent-tool")
    return threads


def _forget_after_fork() -> None:
    """A forked child has none of its parent's threads: it makes its own."""
    global _threads, _threads_lock
    _threads, _threads_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)
