"""The parent side of the Python sandbox: one isolated worker process per session.

:class:`PythonSandbox` starts a worker (``python -I -S`` running ``_worker.py``) with an empty
environment, sends it its configuration, checks the isolation it reports, and then runs cells
in it over length-prefixed JSON frames. Every worker output is untrusted: frames are
size-capped and checked, each reply must answer its request, and every wait on the worker is
bounded by the call's deadline. A worker that misbehaves (no answer in time, a malformed or
out-of-turn reply, bytes after its reply) is killed with its process group; the next call
starts a fresh one and its result says that the state was lost. The process started here is
the worker's supervisor (``_supervisor.py``): it holds these pipes, and stops the worker
before it passes a reply on (a result is returned only once the kernel shows the worker
stopped), so no code of a cell runs after its result was returned.

What is and is not isolated is documented in ``docs/sandbox.md``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gramagent._install import install_command
from gramagent.tools.sandbox import _process
from gramagent.tools.sandbox._channel import (
    ChannelClosed,
    ChannelTimeout,
    WorkerChannel,
    check_reply,
)
from gramagent.tools.sandbox._config import (
    SYSCALL_FEATURE,
    SYSCALL_FILTER_ENV,
    WEAK_ISOLATION_ENV,
    SandboxConfig,
    SandboxError,
    SandboxErrorKind,
)
from gramagent.tools.sandbox._memory import MemoryLimit
from gramagent.tools.sandbox._protocol import FrameError
from gramagent.tools.sandbox._report import Isolation, ReplResult
from gramagent.tools.sandbox._seccomp import binding_path

__all__ = ["PythonSandbox"]

WORKER = Path(__file__).with_name("_worker.py")
_CLOSE_GRACE = 5.0
"""Seconds :meth:`PythonSandbox.close` waits for a running call before killing anyway."""

_log = logging.getLogger("gramagent.tools.sandbox")
_warned_no_filter = False


class _Worker:
    """One live worker: its supervisor process (the one started here), pipes, what it
    reported, and the pid of the worker process proper (the supervisor's child)."""

    def __init__(self, proc: subprocess.Popen[bytes], channel: WorkerChannel,
                 record: _process.WorkerRecord, memory: MemoryLimit) -> None:
        self.proc = proc
        self.channel = channel
        self.record = record
        self.memory = memory
        self.cell_pid = 0
        """The process that runs the cells (0 until its supervisor reported it)."""
        self.finalizer = weakref.finalize(self, _process.kill_group, proc)

    def alive(self) -> bool:
        """Whether the worker process proper is alive (the supervisor may outlive it briefly)."""
        return _process.alive(self.cell_pid, parent=self.proc.pid)

    def interrupt(self) -> None:
        """SIGKILL the worker (its supervisor then exits, which ends a call in progress), or
        the supervisor's group while the worker is not known yet."""
        if self.cell_pid and self.alive():
            with contextlib.suppress(OSError):
                os.kill(self.cell_pid, signal.SIGKILL)
        else:
            _process.signal_group(self.proc, signal.SIGKILL)

    def kill(self) -> None:
        """Kill the worker and let its supervisor reap it before it exits (so the worker's
        exit is over when this returns), then make sure the supervisor is gone."""
        self.finalizer.detach()
        self.interrupt()
        _process.end_supervisor(self.proc)
        _process.kill_group(self.proc)
        self.record.clear()
        self.memory.release()


class PythonSandbox:
    """A persistent, isolated Python session.

    The worker starts on the first :meth:`run` (or :meth:`start`); variables persist between
    calls until a call times out or the worker dies, after which the next call starts a fresh
    worker and its result says the state was lost. Thread-safe: calls are serialized, and
    every wait on the worker ends at the call's deadline, so the lock is always released.

    Args:
        workdir: the worker's private, writable working directory (created if missing).
        data_dir: a directory the worker may read (parquet tables); ``DATA_DIR`` in the session.
        more_data_dirs: further read-only directories searched by ``read_table()`` after
            ``data_dir`` (all of them are ``DATA_DIRS`` in the session).
        config: limits and isolation requirements.
    """

    def __init__(self, workdir: str | os.PathLike[str], *,
                 data_dir: str | os.PathLike[str] | None = None,
                 more_data_dirs: Sequence[str | os.PathLike[str]] = (),
                 config: SandboxConfig | None = None) -> None:
        self.workdir = Path(workdir).resolve()
        self.data_dir = Path(data_dir).resolve() if data_dir is not None else None
        self.data_dirs = [*([self.data_dir] if self.data_dir else []),
                          *(Path(d).resolve() for d in more_data_dirs)]
        self.config = config or SandboxConfig.from_env()
        self.isolation: Isolation | None = None
        """The isolation the current (or last) worker reported."""
        self.restarts = 0
        """How many times a worker was lost and replaced."""
        self._worker: _Worker | None = None
        self._lock = threading.Lock()
        self._state_lost = False
        self._closed = False

    # -- lifecycle ----------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether a worker is alive."""
        worker = self._worker
        return worker is not None and worker.proc.poll() is None

    @property
    def worker_pid(self) -> int | None:
        """The process id (as the host sees it) of the process that runs the cells, if one is
        alive."""
        worker = self._worker
        if worker is None or worker.proc.poll() is not None or not worker.cell_pid:
            return None
        return worker.cell_pid

    def start(self) -> Isolation:
        """Start the worker now (it starts on the first call otherwise).

        Raises:
            SandboxError: the worker could not start, or (with ``require_isolation``) is not
                fully isolated.
        """
        with self._lock:
            self._ensure_worker()
            assert self.isolation is not None
            return self.isolation

    def close(self) -> None:
        """Kill the worker; later calls raise ``SandboxError(kind="closed")``.

        Does not wait for a call in progress beyond a few seconds: the worker is killed, which
        ends that call too.
        """
        self._closed = True
        worker = self._worker
        if worker is not None:  # ends a call in progress (its pipes close), which frees the lock
            worker.interrupt()
        if self._lock.acquire(timeout=_CLOSE_GRACE):
            try:
                self._drop_worker()
            finally:
                self._lock.release()

    def __enter__(self) -> PythonSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- calls --------------------------------------------------------------------------------

    def run(self, code: str) -> ReplResult:
        """Run ``code`` as one cell.

        Errors of the code itself (exceptions, ``CPUTimeExceeded``, ``MemoryError``) are
        part of the result; the session keeps its state.

        Raises:
            SandboxError: the call timed out, the worker died or misbehaved (the state is
                lost; the next call starts a fresh worker), or the worker cannot start.
        """
        with self._lock:
            worker = self._ensure_worker()
            restarted, self._state_lost = self._state_lost, False
            deadline = time.monotonic() + self.config.limits.timeout
            request_id = secrets.token_hex(8)
            reply = self._exchange(worker, {"op": "exec", "id": request_id, "code": code},
                                   request_id, deadline)
            if not _process.settle(worker.cell_pid, worker.proc.pid, deadline):
                raise self._lost("protocol", "the worker was not stopped after it answered")
            if worker.channel.pending():
                raise self._lost("protocol", "the worker sent more than one reply")
            return self._result(reply, restarted)

    def _exchange(self, worker: _Worker, request: dict[str, Any], request_id: str,
                  deadline: float) -> dict[str, Any]:
        """Send ``request`` and read its reply, both within ``deadline``."""
        try:
            worker.channel.send(request, deadline)
            return check_reply(worker.channel.receive(deadline), request_id)
        except ChannelTimeout as exc:
            raise self._lost("timeout", f"the call did not finish within "
                             f"{self.config.limits.timeout:g} s ({exc})") from None
        except FrameError as exc:
            raise self._lost("protocol", f"the worker sent a malformed reply ({exc})") from None
        except (ChannelClosed, OSError) as exc:
            if self._closed:
                raise SandboxError("the sandbox session was closed during the call",
                                   kind="closed", state_lost=True) from None
            cause = self._death_cause(worker) if isinstance(exc, ChannelClosed) else str(exc)
            raise self._lost("crashed", cause) from None

    def _result(self, reply: dict[str, Any], restarted: bool) -> ReplResult:
        limit = self.config.limits.max_output_chars
        output: str = reply["output"]
        total: int = reply["output_bytes"]
        truncated = len(output) > limit
        if truncated:
            output = output[:limit]
        if truncated or total > len(output.encode("utf-8")):
            truncated = True
            output += f"\n[... output truncated: {total} bytes printed, limit {limit} characters]"
        value, error = reply["value"], reply["error"]
        return ReplResult(output=output, value=value[:limit] if value is not None else None,
                          error=error[:limit] if error is not None else None,
                          truncated=truncated, restarted=restarted)

    # -- worker management --------------------------------------------------------------------

    def _ensure_worker(self) -> _Worker:
        if self._closed:
            raise SandboxError("the sandbox session is closed", kind="closed")
        worker = self._worker
        if worker is not None and worker.proc.poll() is None and worker.alive():
            return worker
        if worker is not None:  # died between calls
            self._drop_worker()
            self._state_lost = True
            self.restarts += 1
        self._worker = self._spawn()
        return self._worker

    def _spawn(self) -> _Worker:
        self.workdir.mkdir(parents=True, exist_ok=True)
        record = _process.WorkerRecord(self.workdir)
        survivor = record.stop_survivor()
        if survivor is not None:
            _log.warning("python sandbox: stopped worker %d of an earlier host still running "
                         "in %s", survivor, self.workdir)
        uid = gid = None
        if os.geteuid() == 0:
            uid = gid = _process.sandbox_id(self.workdir)
            _process.own_tree(self.workdir, uid, gid)
        os.chmod(self.workdir, 0o700)
        proc = _process.spawn([sys.executable, "-I", "-S", "-B", str(WORKER)],
                              _process.minimal_env(self.workdir))
        assert proc.stdin is not None and proc.stdout is not None
        record.write(proc.pid)
        memory = MemoryLimit.apply(proc.pid, self.config.limits.memory_bytes)
        worker = _Worker(proc, WorkerChannel(proc.stdin.fileno(), proc.stdout.fileno(),
                                             max_frame=self._max_frame()), record, memory)
        try:
            self.isolation = self._handshake(worker, uid, gid)
        except BaseException:
            worker.kill()
            raise
        return worker

    def _handshake(self, worker: _Worker, uid: int | None, gid: int | None) -> Isolation:
        """Configure the worker, check its isolation report, learn the worker's pid."""
        deadline = time.monotonic() + self.config.startup_timeout
        paths = self.config.import_paths()
        config = {
            "workdir": str(self.workdir),
            "data_dirs": [str(d) for d in self.data_dirs],
            "python_paths": list(paths),
            "readable": _process.readable_paths(paths, self.data_dirs),
            "limits": self.config.limits.to_dict(),
            "uid": uid, "gid": gid, "parent_pid": os.getpid(),
            "syscall_filter": {"mode": self.config.syscall_filter, "binding": binding_path()},
            "max_reply_bytes": self._max_frame(),
        }
        try:
            worker.channel.send(config, deadline)
            ready = worker.channel.receive(deadline)
        except (OSError, FrameError, ChannelTimeout, ChannelClosed) as exc:
            raise SandboxError(f"the sandbox worker did not start: {exc}"
                               f"{_stderr_tail(worker.proc)}", kind="unavailable") from None
        if ready.get("op") != "ready" or ready.get("ok") is not True:
            raise SandboxError(f"the sandbox worker could not isolate itself: "
                               f"{_text(ready.get('error'))}", kind="unavailable")
        report = ready.get("isolation")
        if isinstance(report, dict):
            report["memory"] = worker.memory.report(report.get(SYSCALL_FEATURE),
                                                    report.pop("ipc", None), self.workdir)
        isolation = Isolation.from_report(report)
        lacking = [f for f in self.config.required_features() if not isolation.holds(f)]
        if lacking:
            raise SandboxError(_refusal(isolation, lacking), kind="unavailable")
        if self.config.syscall_filter == "on" and not isolation.holds(SYSCALL_FEATURE):
            _warn_no_filter(isolation.features.get(SYSCALL_FEATURE, (False, ""))[1])
        cell_pid = ready.get("pid")
        if not (isinstance(cell_pid, int) and not isinstance(cell_pid, bool) and cell_pid > 1
                and _process.settle(cell_pid, worker.proc.pid, deadline)):
            raise SandboxError(f"the sandbox worker did not start: its supervisor named no "
                               f"stopped worker process ({_text(cell_pid)[:40]})",
                               kind="unavailable")
        worker.cell_pid = cell_pid
        worker.record.write(worker.proc.pid, cell_pid)
        return isolation

    def _max_frame(self) -> int:
        return self.config.limits.max_output_chars * 12 + (1 << 16)

    def _lost(self, kind: SandboxErrorKind, cause: str) -> SandboxError:
        """Kill the worker and describe the loss of its state."""
        self._drop_worker()
        self._state_lost = True
        self.restarts += 1
        return SandboxError(
            f"{cause}; the Python worker was stopped and all session state (variables, "
            "imports, definitions) was lost. The next call starts a new session.",
            kind=kind, state_lost=True)

    def _drop_worker(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.kill()

    @staticmethod
    def _death_cause(worker: _Worker) -> str:
        try:
            code = worker.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return "the worker closed its pipe"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            hint = {"SIGXCPU": " (CPU time limit of the session)",
                    "SIGKILL": " (killed, e.g. out of memory or CPU hard limit)",
                    "SIGSEGV": " (segmentation fault)"}.get(name, "")
            return f"the worker died from {name}{hint}"
        return f"the worker exited with status {code}"


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------

def _stderr_tail(proc: subprocess.Popen[bytes]) -> str:
    """The end of what a dead worker wrote to stderr during startup (never blocks)."""
    if proc.stderr is None or proc.poll() is None:
        return ""
    fd = proc.stderr.fileno()
    os.set_blocking(fd, False)
    try:
        data = os.read(fd, 4000)
    except OSError:
        return ""
    text = data.decode("utf-8", "replace").strip()
    return f" (worker stderr: {text[-1000:]})" if text else ""


def _refusal(isolation: Isolation, lacking: list[str]) -> str:
    """Why a worker may not run code (the ``lacking`` features), and what to change."""
    hints = []
    if any(f != SYSCALL_FEATURE for f in lacking):
        hints.append(f"Set {WEAK_ISOLATION_ENV}=1 (or SandboxConfig(require_isolation=False)) "
                     "to run with the isolation available.")
    if SYSCALL_FEATURE in lacking:
        hints.append(f"The syscall filter needs pyseccomp and libseccomp "
                     f"({install_command('tools')}); {SYSCALL_FILTER_ENV}=on (or "
                     "SandboxConfig(syscall_filter='on')) runs without it.")
    return ("refusing to run code: the sandbox is not fully isolated on this machine ("
            + "; ".join(isolation.missing(lacking)) + "). " + " ".join(hints)
            + " See docs/sandbox.md.")


def _warn_no_filter(detail: str) -> None:
    """Log, once per process, that workers run without the seccomp filter."""
    global _warned_no_filter
    if not _warned_no_filter:
        _warned_no_filter = True
        _log.warning("python sandbox: running without the seccomp syscall filter (%s); "
                     "see docs/sandbox.md", detail)


def _text(value: object) -> str:
    return value if isinstance(value, str) else ("" if value is None else str(value))
