"""The worker threads that run the calls of blocking tools (plain functions).

Not a :class:`concurrent.futures.ThreadPoolExecutor`: for every job its ``submit`` makes a
future (with a Python-level ``Condition``) and a work item and takes its idle-thread semaphore,
and its worker sets the future's state and releases the semaphore, all Python-level locking on
both sides of each call: about as much as the thread switch itself (bench/RESULTS.md, "Per
call and per message"). Here a job is a callable put on a ``SimpleQueue``; it hands its own
result back (:func:`gramagent._runtime.invoke.execute` settles an asyncio future).

Threads are made as jobs need them, up to a limit, and kept for the next jobs. They are daemon
threads: the process does not wait at exit for a call that was abandoned (timed out) and is
still running, as it would for an executor's. A forked child starts with no threads.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
from collections.abc import Callable
from typing import Final

__all__ = ["MAX_TOOL_THREADS", "ToolThreads", "tool_threads"]

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
