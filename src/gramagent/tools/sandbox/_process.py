"""The host side of a worker process: starting it, watching it, freezing it, killing it.

Everything here treats the worker as hostile: its state is read from ``/proc`` (what the
kernel says), never from the worker's own words.

- Workers are started from one thread that lives as long as the host process
  (:func:`spawn`), so the worker's parent-death signal (``PR_SET_PDEATHSIG``, set by the
  worker before any user code and locked by the syscall filter) fires when the host process
  dies, not when some pool thread ends.
- Each work directory has a record of its current worker next to it (:class:`WorkerRecord`);
  a session does not start while the worker of an earlier host is still alive.
- Between calls the worker is stopped: the supervisor (the process the host started, which
  runs no user code) stops it before it passes a reply on, and the parent returns a result
  only once the kernel shows it stopped (:func:`settle`), so no code of a cell runs after its
  result was returned.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import os
import queue
import signal
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "WorkerRecord",
    "alive",
    "end_supervisor",
    "kill_group",
    "minimal_env",
    "own_tree",
    "readable_paths",
    "sandbox_id",
    "settle",
    "signal_group",
    "spawn",
]

_SANDBOX_ID_BASE = 2_000_000_000
_SANDBOX_ID_SPAN = 1 << 28
_POLL = 0.00005
"""Seconds between two looks at a worker's state in /proc, after the first few: short, so that
a warm call returns soon after the worker is done, but a sleep, so that on a busy machine the
worker gets the CPU it needs (spinning, or yielding a whole time slice to another process,
delays it; docs/performance.md, "Sandbox")."""
_SPINS = 3
"""Looks at a worker's state with nothing between them, before sleeping."""



# ---------------------------------------------------------------------------------------------
# Starting workers
# ---------------------------------------------------------------------------------------------

_Job = tuple[Callable[[], "subprocess.Popen[bytes]"],
             "concurrent.futures.Future[subprocess.Popen[bytes]]"]


class _Spawner:
    """One daemon thread that starts every worker of this process.

    ``PR_SET_PDEATHSIG`` fires when the *thread* that forked the worker ends; tools run in
    pool threads that come and go, so workers are forked from a thread that lives as long as
    the process.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def run(self, start: Callable[[], subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, daemon=True,
                                                name="gramagent-sandbox-spawner")
                self._thread.start()
        future: concurrent.futures.Future[subprocess.Popen[bytes]] = concurrent.futures.Future()
        self._jobs.put((start, future))
        return future.result()

    def _serve(self) -> None:
        while True:
            start, future = self._jobs.get()
            try:
                future.set_result(start())
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                future.set_exception(exc)


_spawner = _Spawner()


def spawn(argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Start a worker (pipes on fds 0-2, its own session) from the process-lifetime thread."""
    return _spawner.run(lambda: subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        cwd="/", close_fds=True, start_new_session=True))


def signal_group(proc: subprocess.Popen[bytes], signum: int) -> None:
    """Send ``signum`` to the worker's process group (or the worker alone, if it left it)."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signum)
        except (ProcessLookupError, PermissionError):
            with contextlib.suppress(OSError):
                os.kill(proc.pid, signum)


def end_supervisor(proc: subprocess.Popen[bytes], grace: float = 2.0) -> None:
    """Close the supervisor's request pipe and wait up to ``grace`` seconds for it to exit
    (it kills and reaps its worker first)."""
    if proc.stdin is not None:
        with contextlib.suppress(OSError):
            proc.stdin.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the worker's process group, reap it, close its pipes (bounded waits only)."""
    signal_group(proc, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


# ---------------------------------------------------------------------------------------------
# /proc
# ---------------------------------------------------------------------------------------------

def _stat_fields(pid: int) -> list[str]:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        text = f.read().decode("ascii", "replace")
    return text[text.rindex(")") + 2:].split()


def state_of(pid: int) -> str:
    """The kernel's one-letter state of ``pid`` (``R``, ``S``, ``D``, ``T``, ``Z``...)."""
    return _stat_fields(pid)[0]


def alive(pid: int, *, parent: int) -> bool:
    """Whether ``pid`` exists, is not a zombie and is a child of ``parent`` (so not a process
    that reused the pid)."""
    try:
        fields = _stat_fields(pid)
        return fields[0] != "Z" and int(fields[1]) == parent
    except (OSError, ValueError, IndexError):
        return False


def start_time(pid: int) -> int:
    """When ``pid`` started, in clock ticks since boot (tells a pid from a reused one)."""
    return int(_stat_fields(pid)[19])


def _pause(attempt: int) -> None:
    if attempt >= _SPINS:  # before that, each look at /proc is pause enough
        time.sleep(_POLL)


def settle(pid: int, parent: int, deadline: float) -> bool:
    """Whether the worker ``pid`` (a child of the supervisor ``parent``) is stopped, as the
    supervisor makes it before it passes a reply on; waits for it until ``deadline``.

    A worker that is not stopped by then, or is not the supervisor's child, counts as not
    settled. /proc that cannot be read counts as False.
    """
    attempt = 0
    while True:
        try:
            fields = _stat_fields(pid)
            if int(fields[1]) != parent:
                return False
            if fields[0] in "Tt":
                return True
        except (OSError, ValueError, IndexError):
            return False
        if time.monotonic() >= deadline:
            return False
        _pause(attempt)
        attempt += 1


# ---------------------------------------------------------------------------------------------
# The record of a work directory's worker
# ---------------------------------------------------------------------------------------------

class WorkerRecord:
    """``.<workdir name>.worker`` next to the work directory: the pid and start time of its
    worker, so a new host can tell whether an old worker of the session is still alive.

    It sits outside the work directory, where the worker cannot change it.
    """

    def __init__(self, workdir: Path) -> None:
        self.path = workdir.with_name(f".{workdir.name}.worker")

    def write(self, *pids: int) -> None:
        """Record ``pids`` (the supervisor, then the worker) as the current ones (best effort:
        an unwritable parent folder leaves only the parent-death signals)."""
        with contextlib.suppress(OSError, ValueError, IndexError):
            text = "".join(f"{pid} {start_time(pid)}\n" for pid in pids)
            partial = self.path.with_name(self.path.name + ".partial")
            fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            try:
                os.write(fd, text.encode())
            finally:
                os.close(fd)
            os.replace(partial, self.path)

    def clear(self) -> None:
        """Forget the worker (it was stopped)."""
        with contextlib.suppress(OSError):
            self.path.unlink()

    def stop_survivor(self) -> int | None:
        """Kill the recorded processes that are still alive; returns the pid of the last of
        them that was (None if none was)."""
        try:
            entries = [line.split() for line in self.path.read_text().splitlines()]
            recorded = [(int(pid), int(started)) for pid, started in entries]
        except (OSError, ValueError):
            return None
        survivor = None
        for pid, started in recorded:
            if pid > 1 and _alive_as(pid, started):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                survivor = pid
        deadline = time.monotonic() + 5
        for pid, started in recorded:
            while time.monotonic() < deadline and _alive_as(pid, started):
                time.sleep(0.01)
        return survivor


def _alive_as(pid: int, started: int) -> bool:
    """Whether ``pid`` is alive and is the process that started at ``started``."""
    try:
        return start_time(pid) == started and state_of(pid) != "Z"
    except (OSError, ValueError, IndexError):
        return False


# ---------------------------------------------------------------------------------------------
# What the worker is given
# ---------------------------------------------------------------------------------------------

def sandbox_id(workdir: Path) -> int:
    """An unprivileged uid/gid for the worker of ``workdir``, stable for that directory.

    Distinct sessions get distinct ids (from a range no account uses), so their workers cannot
    signal each other or read each other's work directories.
    """
    st = workdir.stat()
    digest = hashlib.sha256(f"{st.st_dev}:{st.st_ino}:{workdir}".encode()).digest()
    return _SANDBOX_ID_BASE + int.from_bytes(digest[:8], "big") % _SANDBOX_ID_SPAN


def own_tree(root: Path, uid: int, gid: int) -> None:
    """Give ``root`` and everything in it to ``uid``/``gid`` (symlinks not followed)."""
    st = root.lstat()
    if st.st_uid == uid and st.st_gid == gid:
        return
    os.lchown(root, uid, gid)
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in (*dirnames, *filenames):
            os.lchown(os.path.join(dirpath, name), uid, gid)


def minimal_env(workdir: Path) -> dict[str, str]:
    """The worker's whole environment: nothing inherited from the parent."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(workdir),
        "TMPDIR": str(workdir),
        "LANG": "C.UTF-8",
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": str(workdir / ".matplotlib"),
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "NUMEXPR_NUM_THREADS": "1",
        "ARROW_DEFAULT_MEMORY_POOL": "system",
        "JE_ARROW_MALLOC_CONF": "background_thread:false",
    }


def readable_paths(import_paths: tuple[str, ...], data_dirs: list[Path]) -> list[str]:
    """What the worker needs to read: the interpreter, its import paths, the data folders."""
    stdlib = sysconfig.get_paths()
    candidates = [sys.base_prefix, sys.prefix, stdlib["stdlib"], stdlib["platstdlib"],
                  os.path.dirname(sys.executable), *import_paths]
    for data_dir in data_dirs:
        data_dir.mkdir(parents=True, exist_ok=True)
        candidates.append(str(data_dir))
    out: list[str] = []
    for path in candidates:
        real = os.path.realpath(path)
        if os.path.isdir(real) and real not in out:
            out.append(real)
    # keep only the outermost of nested paths
    return [p for p in out if not any(p != o and p.startswith(o.rstrip("/") + "/") for o in out)]
