"""The settings of the Python sandbox: its limits and how workers start.

``SandboxError`` lives in :mod:`gramagent.errors`; it is re-exported here for the sandbox's
modules.
"""

from __future__ import annotations

import os
import site
import sysconfig
from dataclasses import dataclass, field, fields
from typing import Any, Literal, get_args

from gramagent._limit_values import limit_problem, refuse_problems
from gramagent.errors import ConfigurationError, SandboxError, SandboxErrorKind

__all__ = [
    "REQUIRED_FEATURES",
    "SYSCALL_FEATURE",
    "SYSCALL_FILTER_ENV",
    "WEAK_ISOLATION_ENV",
    "SandboxConfig",
    "SandboxError",
    "SandboxErrorKind",
    "SandboxLimits",
    "SyscallFilterMode",
]

WEAK_ISOLATION_ENV = "GRAMAGENT_SANDBOX_ALLOW_WEAK"
"""Set to ``1`` to run workers even where namespaces are unavailable (limits only)."""
SYSCALL_FILTER_ENV = "GRAMAGENT_SANDBOX_SYSCALL_FILTER"
"""``on`` (default), ``required`` or ``off``: :attr:`SandboxConfig.syscall_filter`."""

REQUIRED_FEATURES = ("network", "filesystem", "limits", "privileges", "processes")
"""The isolation features a worker must report before it may run code (by default)."""
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

    def __post_init__(self) -> None:
        # A limit that is not a positive number must not reach the worker: -1 is RLIM_INFINITY
        # to setrlimit (no limit at all), a nan timeout never fires.
        refuse_problems("invalid SandboxLimits", (
            limit_problem(f.name, getattr(self, f.name), whole=f.name != "timeout",
                          optional=False) for f in fields(self)))

    def to_dict(self) -> dict[str, int]:
        """The numbers the worker applies (whole numbers: checked when the limits are made)."""
        return {
            "cpu_seconds": self.cpu_seconds,
            "session_cpu_seconds": self.session_cpu_seconds,
            "memory_bytes": self.memory_bytes,
            "max_open_files": self.max_open_files,
            "max_file_bytes": self.max_file_bytes,
            "max_output_chars": self.max_output_chars,
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
        problem = limit_problem("startup_timeout", self.startup_timeout, optional=False)
        if problem is not None:
            raise ConfigurationError(f"SandboxConfig.{problem}")
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
