"""The worker threads of blocking tools: concurrency, the limit, reuse, failures, fork."""

from __future__ import annotations

import asyncio
import contextvars
import os
import sys
import threading
from typing import Any

import pytest

from gramagent._runtime.threads import HandOff, ToolThreads, tool_threads


def run_all(threads: ToolThreads, jobs: int, job: object) -> None:
    done = threading.Semaphore(0)

    def wrapped() -> None:
        try:
            job()  # type: ignore[operator]
        finally:
            done.release()

    for _ in range(jobs):
        threads.submit(wrapped)
    for _ in range(jobs):
        assert done.acquire(timeout=10), "a job never ran"


def test_jobs_run_concurrently_each_in_its_own_thread() -> None:
    """Jobs that wait for each other all finish: each has a thread of its own."""
    barrier = threading.Barrier(5, timeout=10)
    names: set[str] = set()

    def job() -> None:
        names.add(threading.current_thread().name)
        barrier.wait()

    run_all(ToolThreads(8, "t"), 5, job)
    assert len(names) == 5 and all(n.startswith("t_") for n in names)


def test_no_more_threads_than_the_limit_and_queued_jobs_still_run() -> None:
    threads = ToolThreads(2, "limited")
    running = 0
    most = 0
    lock = threading.Lock()
    names: set[str] = set()

    def job() -> None:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        names.add(threading.current_thread().name)
        threading.Event().wait(0.01)
        with lock:
            running -= 1

    run_all(threads, 7, job)
    assert most <= 2 and len(names) <= 2


def test_threads_are_reused() -> None:
    threads = ToolThreads(8, "reused")
    names: list[str] = []
    for _ in range(5):  # one after another: one thread does them all
        run_all(threads, 1, lambda: names.append(threading.current_thread().name))
        for _ in range(10_000):  # until the thread is back waiting (it counts itself idle)
            if threads._idle:
                break
            threading.Event().wait(0.001)
    assert len(set(names)) == 1


def test_a_failing_job_is_reported_and_the_thread_goes_on(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    reported: list[type[BaseException] | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: reported.append(args.exc_type))
    threads = ToolThreads(1, "failing")
    done = threading.Event()

    def fails() -> None:
        raise ValueError("job failed")

    threads.submit(fails)
    threads.submit(done.set)
    assert done.wait(10)
    assert reported == [ValueError]


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "darwin",
                    reason="needs fork")
def test_a_forked_child_makes_its_own_threads() -> None:
    """The parent's threads do not exist in a forked child: its jobs still run."""
    run_all(tool_threads(), 1, lambda: None)  # the parent has a thread now
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only if a job runs
        ran = threading.Event()
        tool_threads().submit(ran.set)
        os._exit(0 if ran.wait(10) else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


async def test_results_arriving_together_take_one_wake_up_of_the_loop() -> None:
    """Deliveries put while one is pending reach the loop in one wake-up, in order; a failing
    delivery is reported and the others still happen."""
    loop = asyncio.get_running_loop()
    handoff = HandOff(loop)
    wake_ups = 0
    original = loop.call_soon_threadsafe

    def counting(callback: Any, *args: Any) -> Any:
        nonlocal wake_ups
        wake_ups += 1
        return original(callback, *args)

    got: list[tuple[Any, BaseException | None]] = []
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context))

    def deliver(result: Any, error: BaseException | None) -> None:
        got.append((result, error))

    def fails(result: Any, error: BaseException | None) -> None:
        raise ValueError("delivery failed")

    context = contextvars.copy_context()

    def worker() -> None:  # the loop is blocked meanwhile: nothing is delivered yet
        handoff.put(context, deliver, 1, None)
        handoff.put(context, fails, 2, None)
        handoff.put(context, deliver, 3, None)
        handoff.put(context, deliver, None, KeyError("k"))

    loop.call_soon_threadsafe = counting  # type: ignore[method-assign]
    try:
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
        for _ in range(3):
            await asyncio.sleep(0)
        handoff.put(context, deliver, 5, None)  # after the first wake-up: a second one
        for _ in range(3):
            await asyncio.sleep(0)
    finally:
        del loop.call_soon_threadsafe
        loop.set_exception_handler(None)
    assert [r for r, _ in got] == [1, 3, None, 5] and isinstance(got[2][1], KeyError)
    assert wake_ups == 2
    assert [type(c["exception"]) for c in reported] == [ValueError]
