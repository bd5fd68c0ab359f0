"""The worker threads of blocking tools: concurrency, the limit, reuse, failures, fork."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from gramagent._runtime.threads import ToolThreads, tool_threads


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
