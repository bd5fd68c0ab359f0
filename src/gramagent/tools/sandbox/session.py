"""The parent side of the Python sandbox: one isolated worker process per session.

:class:`PythonSandbox` starts a worker (``python -I -S`` running ``_worker.py``) with an empty
environment, sends it its configuration, checks the isolation it reports, and then runs cells
in it over length-prefixed JSON frames. The wall-clock limit of a call is enforced here: a
worker that does not answer in time is killed (its whole process group), and the next call
starts a fresh one. Every worker output is untrusted: frames are size-capped and checked.

What is and is not isolated is documented in ``docs/sandbox.md``.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import selectors
import signal
import site
import subprocess
import sys
import sysconfig
import threading
import time
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from gramagent.errors import ConfigurationError, SandboxError, SandboxErrorKind
from gramagent.tools.sandbox._protocol import FrameDecoder, FrameError, write_frame
from gramagent.tools.sandbox._seccomp import binding_path

__all__ = [
    "Isolation",
    "PythonSandbox",
    "ReplResult",
    "SYSCALL_FILTER_ENV",
    "SandboxConfig",
    "SandboxError",
    "SandboxLimits",
    "SyscallFilterMode",
    "WEAK_ISOLATION_ENV",
]

WORKER = Path(__file__).with_name("_worker.py")
WEAK_ISOLATION_ENV = "GRAMAGENT_SANDBOX_ALLOW_WEAK"
"""Set to ``1`` to run workers even where namespaces are unavailable (limits only)."""
SYSCALL_FILTER_ENV = "GRAMAGENT_SANDBOX_SYSCALL_FILTER"
"""``on`` (default), ``required`` or ``off``: :attr:`SandboxConfig.syscall_filter`."""

_log = logging.getLogger(__name__)
_warned_no_filter = False

_SANDBOX_ID_BASE = 2_000_000_000
_SANDBOX_ID_SPAN = 1 << 28
REQUIRED_FEATURES = ("network", "filesystem", "limits", "privileges")
SYSCALL_FEATURE = "syscalls"
"""The isolation report's entry for the seccomp filter (required only when configured so)."""

SyscallFilterMode = Literal["on", "required", "off"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxLimits:
    """Resource limits of one sandbox session."""

    timeout: float = 30.0
    """Wall-clock seconds one call may take; the worker is killed after that."""
    cpu_seconds: int = 20
    """CPU seconds one call may use (``CPUTimeExceeded`` is raised inside the cell)."""
    session_cpu_seconds: int = 600
    """CPU seconds a worker may use in total (then the kernel kills it)."""
    memory_bytes: int = 1 << 30
    """Address space of the worker (``RLIMIT_AS``); allocations beyond it fail."""
    max_open_files: int = 64
    """Open file descriptors (``RLIMIT_NOFILE``)."""
    max_file_bytes: int = 64 << 20
    """Largest file the worker may write (``RLIMIT_FSIZE``)."""
    max_output_chars: int = 20_000
    """Printed output and result values returned per call, longer text is cut with a marker."""

    def to_dict(self) -> dict[str, int]:
        """The numbers the worker applies."""
        return {
            "cpu_seconds": int(self.cpu_seconds),
            "session_cpu_seconds": int(self.session_cpu_seconds),
            "memory_bytes": int(self.memory_bytes),
            "max_open_files": int(self.max_open_files),
            "max_file_bytes": int(self.max_file_bytes),
            "max_output_chars": int(self.max_output_chars),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxConfig:
    """How sandbox workers are started."""

    limits: SandboxLimits = field(default_factory=SandboxLimits)
    """Resource limits per session."""
    require_isolation: bool = True
    """Refuse to run code unless the network, filesystem and privilege isolation all took
    effect (see :data:`REQUIRED_FEATURES`). False runs with whatever could be applied."""
    python_paths: tuple[str, ...] | None = None
    """Import paths the worker gets besides the standard library; None: this interpreter's
    site-packages (so pyarrow, numpy, matplotlib are importable), ``()``: none."""
    startup_timeout: float = 30.0
    """Seconds a worker may take to start and report its isolation."""
    syscall_filter: SyscallFilterMode = "on"
    """The worker's seccomp filter (``docs/sandbox.md``): ``on`` installs it where pyseccomp
    and libseccomp are available and otherwise runs without it (reported in
    :attr:`PythonSandbox.isolation`, logged once); ``required`` refuses to run code without
    it; ``off`` does not install it."""

    def __post_init__(self) -> None:
        if self.syscall_filter not in get_args(SyscallFilterMode):
            raise ConfigurationError(
                f"SandboxConfig.syscall_filter must be one of "
                f"{', '.join(get_args(SyscallFilterMode))}, not {self.syscall_filter!r}")

    @classmethod
    def from_env(cls, **overrides: Any) -> SandboxConfig:
        """The defaults, with ``require_isolation`` off when ``GRAMAGENT_SANDBOX_ALLOW_WEAK=1``
        and ``syscall_filter`` from ``GRAMAGENT_SANDBOX_SYSCALL_FILTER`` when set.

        Raises:
            ConfigurationError: ``GRAMAGENT_SANDBOX_SYSCALL_FILTER`` holds another value.
        """
        if "require_isolation" not in overrides:
            overrides["require_isolation"] = os.environ.get(WEAK_ISOLATION_ENV, "") not in (
                "1", "true", "yes")
        mode = os.environ.get(SYSCALL_FILTER_ENV, "").strip().lower()
        if "syscall_filter" not in overrides and mode:
            if mode not in get_args(SyscallFilterMode):
                raise ConfigurationError(
                    f"{SYSCALL_FILTER_ENV}={mode!r}: expected one of "
                    f"{', '.join(get_args(SyscallFilterMode))}")
            overrides["syscall_filter"] = mode
        return cls(**overrides)

    def required_features(self) -> tuple[str, ...]:
        """The isolation features a worker must report before it may run code."""
        required = REQUIRED_FEATURES if self.require_isolation else ()
        if self.syscall_filter == "required":
            required = (*required, SYSCALL_FEATURE)
        return required

    def import_paths(self) -> tuple[str, ...]:
        """The worker's extra import paths."""
        if self.python_paths is not None:
            return self.python_paths
        paths = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"],
                 *site.getsitepackages()]
        out: list[str] = []
        for p in paths:
            if os.path.isdir(p) and p not in out:
                out.append(p)
        return tuple(out)


@dataclass(frozen=True, slots=True)
class Isolation:
    """What a worker reported about its isolation: per feature, whether it holds and how."""

    features: dict[str, tuple[bool, str]]

    @property
    def complete(self) -> bool:
        """Whether every required feature took effect."""
        return all(self.holds(f) for f in REQUIRED_FEATURES)

    def holds(self, feature: str) -> bool:
        """Whether ``feature`` (e.g. ``"syscalls"``) took effect."""
        return self.features.get(feature, (False, ""))[0]

    def missing(self, features: Iterable[str] = REQUIRED_FEATURES) -> list[str]:
        """``feature: detail`` for each of ``features`` that did not take effect."""
        return [f"{f}: {self.features.get(f, (False, 'not reported'))[1]}"
                for f in features if not self.holds(f)]

    def describe(self) -> str:
        """One line per feature."""
        return "\n".join(f"{name}: {'yes' if ok else 'NO'} ({detail})"
                         for name, (ok, detail) in self.features.items())


@dataclass(frozen=True, slots=True)
class ReplResult:
    """The outcome of one cell."""

    output: str
    """What the cell printed (stdout and stderr, interleaved), cut to the output limit."""
    value: str | None
    """``repr`` of the value of the cell's final expression, if it has one and it is not None."""
    error: str | None
    """Traceback text if the cell raised (the session keeps its state)."""
    truncated: bool = False
    """Whether ``output`` was cut."""
    restarted: bool = False
    """Whether this call ran in a fresh worker because the previous one was lost."""

    def to_text(self) -> str:
        """The text a model sees: notices, output, value, error."""
        parts: list[str] = []
        if self.restarted:
            parts.append("[note: this ran in a new Python session; variables and imports "
                         "from earlier calls were lost]")
        if self.output:
            parts.append(self.output.rstrip("\n"))
        if self.value is not None:
            parts.append(self.value)
        if self.error:
            parts.append(self.error.rstrip("\n"))
        return "\n".join(parts) if parts else "(no output)"


class PythonSandbox:
    """A persistent, isolated Python session.

    The worker starts on the first :meth:`run` (or :meth:`start`); variables persist between
    calls until a call times out or the worker dies, after which the next call starts a fresh
    worker and its result says the state was lost. Thread-safe: calls are serialized.

    Args:
        workdir: the worker's private, writable working directory (created if missing).
        data_dir: a directory the worker may read (parquet tables); ``DATA_DIR`` in the session.
        config: limits and isolation requirements.
    """

    def __init__(self, workdir: str | os.PathLike[str], *,
                 data_dir: str | os.PathLike[str] | None = None,
                 config: SandboxConfig | None = None) -> None:
        self.workdir = Path(workdir).resolve()
        self.data_dir = Path(data_dir).resolve() if data_dir is not None else None
        self.config = config or SandboxConfig.from_env()
        self.isolation: Isolation | None = None
        """The isolation the current (or last) worker reported."""
        self.restarts = 0
        """How many times a worker was lost and replaced."""
        self._proc: subprocess.Popen[bytes] | None = None
        self._decoder: FrameDecoder | None = None
        self._lock = threading.Lock()
        self._state_lost = False
        self._closed = False
        self._finalizer: weakref.finalize[[subprocess.Popen[bytes]], PythonSandbox] | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether a worker is alive."""
        return self._proc is not None and self._proc.poll() is None

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
        """Kill the worker; later calls raise ``SandboxError(kind="closed")``."""
        with self._lock:
            self._closed = True
            self._kill()

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
            SandboxError: the call timed out or the worker died (the state is lost; the next
                call starts a fresh worker), or the worker cannot start.
        """
        with self._lock:
            restarted = self._state_lost
            self._ensure_worker()
            assert self._proc is not None and self._proc.stdin is not None
            try:
                write_frame(self._proc.stdin.fileno(), {"op": "exec", "code": code})
                reply = self._read_reply(time.monotonic() + self.config.limits.timeout)
            except SandboxError:
                raise
            except (OSError, FrameError) as exc:
                raise self._lost("crashed", f"the worker failed: {exc}") from None
            self._state_lost = False
            return self._result(reply, restarted)

    def _result(self, reply: dict[str, Any], restarted: bool) -> ReplResult:
        limit = self.config.limits.max_output_chars
        output = _text(reply.get("output"))
        total = reply.get("output_bytes")
        truncated = False
        if len(output) > limit:
            output, truncated = output[:limit], True
        if truncated or (isinstance(total, int) and total > len(output.encode("utf-8"))):
            truncated = True
            size = f"{total} bytes" if isinstance(total, int) else "more"
            output += f"\n[... output truncated: {size} printed, limit {limit} characters]"
        value = reply.get("value")
        error = reply.get("error")
        return ReplResult(output=output,
                          value=_text(value)[:limit] if value is not None else None,
                          error=_text(error)[: limit] if error is not None else None,
                          truncated=truncated, restarted=restarted)

    # -- worker management --------------------------------------------------------------------

    def _ensure_worker(self) -> None:
        if self._closed:
            raise SandboxError("the sandbox session is closed", kind="closed")
        if self.running:
            return
        if self._proc is not None:  # died between calls
            self._kill()
            self._state_lost = True
            self.restarts += 1
        self._spawn()

    def _spawn(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        uid = gid = None
        if os.geteuid() == 0:
            uid = gid = _sandbox_id(self.workdir)
            _own_tree(self.workdir, uid, gid)
        os.chmod(self.workdir, 0o700)
        env = _minimal_env(self.workdir)
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-B", str(WORKER)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=env, cwd="/", close_fds=True, start_new_session=True,
        )
        self._proc = proc
        self._decoder = FrameDecoder(max_bytes=self._max_frame())
        self._finalizer = weakref.finalize(self, _kill_group, proc)
        limits = self.config.limits
        paths = self.config.import_paths()
        readable = _readable_paths(paths, self.data_dir)
        config = {
            "workdir": str(self.workdir),
            "data_dir": str(self.data_dir) if self.data_dir else None,
            "python_paths": list(paths),
            "readable": readable,
            "hide": [os.getcwd(), str(Path.home())],
            "limits": limits.to_dict(),
            "uid": uid, "gid": gid,
            "syscall_filter": {"mode": self.config.syscall_filter,
                               "binding": binding_path()},
        }
        assert proc.stdin is not None
        try:
            write_frame(proc.stdin.fileno(), config)
            ready = self._read_reply(time.monotonic() + self.config.startup_timeout,
                                     starting=True)
        except (OSError, FrameError) as exc:
            detail = self._stderr_tail()
            self._kill()
            raise SandboxError(f"the sandbox worker did not start: {exc}{detail}",
                               kind="unavailable") from None
        if not ready.get("ok"):
            self._kill()
            raise SandboxError(f"the sandbox worker could not isolate itself: "
                               f"{_text(ready.get('error'))}", kind="unavailable")
        self.isolation = _isolation(ready.get("isolation"))
        lacking = [f for f in self.config.required_features() if not self.isolation.holds(f)]
        if lacking:
            self._kill()
            raise SandboxError(_refusal(self.isolation, lacking), kind="unavailable")
        if self.config.syscall_filter == "on" and not self.isolation.holds(SYSCALL_FEATURE):
            _warn_no_filter(self.isolation.features.get(SYSCALL_FEATURE, (False, ""))[1])

    def _max_frame(self) -> int:
        return self.config.limits.max_output_chars * 12 + (1 << 16)

    def _read_reply(self, deadline: float, *, starting: bool = False) -> dict[str, Any]:
        proc, decoder = self._proc, self._decoder
        assert proc is not None and proc.stdout is not None and decoder is not None
        fd = proc.stdout.fileno()
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while True:
                try:
                    frame = decoder.next_frame()
                except FrameError as exc:
                    raise self._lost("protocol", f"the worker sent a malformed reply ({exc})"
                                     ) from None
                if frame is not None:
                    return frame
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    if starting:
                        raise OSError("no answer within the startup timeout")
                    raise self._lost("timeout", "the call did not finish within "
                                     f"{self.config.limits.timeout:g} s")
                if not selector.select(remaining):
                    continue
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    if starting:
                        raise OSError("the worker exited during startup")
                    raise self._lost("crashed", self._death_cause())
                decoder.feed(chunk)

    def _lost(self, kind: SandboxErrorKind, cause: str) -> SandboxError:
        """Kill the worker and describe the loss of its state."""
        self._kill()
        self._state_lost = True
        self.restarts += 1
        return SandboxError(
            f"{cause}; the Python worker was stopped and all session state (variables, "
            "imports, definitions) was lost. The next call starts a new session.",
            kind=kind, state_lost=True)

    def _death_cause(self) -> str:
        proc = self._proc
        assert proc is not None
        try:
            code = proc.wait(timeout=2)
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

    def _stderr_tail(self) -> str:
        proc = self._proc
        if proc is None or proc.stderr is None or proc.poll() is None:
            return ""
        text = proc.stderr.read(4000).decode("utf-8", "replace").strip()
        return f" (worker stderr: {text[-1000:]})" if text else ""

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if proc is not None:
            _kill_group(proc)


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------

def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the worker's process group, reap it, close its pipes."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


def _sandbox_id(workdir: Path) -> int:
    """An unprivileged uid/gid for the worker of ``workdir``, stable for that directory.

    Distinct sessions get distinct ids (from a range no account uses), so their workers cannot
    signal each other or read each other's work directories.
    """
    st = workdir.stat()
    digest = hashlib.sha256(f"{st.st_dev}:{st.st_ino}:{workdir}".encode()).digest()
    return _SANDBOX_ID_BASE + int.from_bytes(digest[:8], "big") % _SANDBOX_ID_SPAN


def _own_tree(root: Path, uid: int, gid: int) -> None:
    """Give ``root`` and everything in it to ``uid``/``gid`` (symlinks not followed)."""
    st = root.lstat()
    if st.st_uid == uid and st.st_gid == gid:
        return
    os.lchown(root, uid, gid)
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in (*dirnames, *filenames):
            os.lchown(os.path.join(dirpath, name), uid, gid)


def _minimal_env(workdir: Path) -> dict[str, str]:
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


def _readable_paths(import_paths: tuple[str, ...], data_dir: Path | None) -> list[str]:
    """What the worker needs to read: the interpreter, its import paths, the data directory."""
    stdlib = sysconfig.get_paths()
    candidates = [sys.base_prefix, sys.prefix, stdlib["stdlib"], stdlib["platstdlib"],
                  os.path.dirname(sys.executable), *import_paths]
    if data_dir is not None:
        data_dir.mkdir(parents=True, exist_ok=True)
        candidates.append(str(data_dir))
    out: list[str] = []
    for path in candidates:
        real = os.path.realpath(path)
        if os.path.isdir(real) and real not in out:
            out.append(real)
    # keep only the outermost of nested paths
    return [p for p in out if not any(p != o and p.startswith(o.rstrip("/") + "/") for o in out)]


def _refusal(isolation: Isolation, lacking: list[str]) -> str:
    """Why a worker may not run code (the ``lacking`` features), and what to change."""
    hints = []
    if any(f != SYSCALL_FEATURE for f in lacking):
        hints.append(f"Set {WEAK_ISOLATION_ENV}=1 (or SandboxConfig(require_isolation=False)) "
                     "to run with the isolation available.")
    if SYSCALL_FEATURE in lacking:
        hints.append("The syscall filter needs pyseccomp (gramagent[tools]) and libseccomp; "
                     f"{SYSCALL_FILTER_ENV}=on (or SandboxConfig(syscall_filter='on')) runs "
                     "without it.")
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


def _isolation(report: Any) -> Isolation:
    features: dict[str, tuple[bool, str]] = {}
    if isinstance(report, dict):
        for name, entry in report.items():
            if isinstance(entry, dict):
                features[str(name)] = (entry.get("ok") is True, _text(entry.get("detail")))
    return Isolation(features)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ("" if value is None else str(value))
