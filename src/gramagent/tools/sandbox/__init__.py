"""An isolated, persistent Python session (the engine behind the ``python_repl`` tool).

The public surface: :class:`PythonSandbox`, its :class:`SandboxConfig` and
:class:`SandboxLimits`, what it returns (:class:`ReplResult`, :class:`Isolation`) and
:class:`SandboxError`. See ``docs/sandbox.md`` for what is and is not isolated.
"""

from gramagent.tools.sandbox._config import (
    SYSCALL_FILTER_ENV,
    WEAK_ISOLATION_ENV,
    SandboxConfig,
    SandboxError,
    SandboxLimits,
    SyscallFilterMode,
)
from gramagent.tools.sandbox._memory import CGROUP_ENV
from gramagent.tools.sandbox._report import Isolation, ReplResult
from gramagent.tools.sandbox._session import PythonSandbox

__all__ = [
    "CGROUP_ENV",
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
