"""An isolated, persistent Python session (the engine behind the ``python_repl`` tool).

See :class:`PythonSandbox` and ``docs/sandbox.md`` for what is and is not isolated.
"""

from gramagent.tools.sandbox.session import (
    SYSCALL_FILTER_ENV,
    WEAK_ISOLATION_ENV,
    Isolation,
    PythonSandbox,
    ReplResult,
    SandboxConfig,
    SandboxError,
    SandboxLimits,
    SyscallFilterMode,
)

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
