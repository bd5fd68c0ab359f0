"""The ``python_repl`` tool: a persistent, sandboxed Python session per conversation.

Each conversation gets its own :class:`~gramagent.tools.sandbox.PythonSandbox` (a separate,
isolated worker process) working in the conversation's workspace; see ``docs/sandbox.md``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from gramagent._install import EXTRA_OF_MODULE, install_command
from gramagent._runtime.library import Tool, ToolContext, tool
from gramagent.errors import ConfigurationError

if TYPE_CHECKING:
    from gramagent.tools._workspace import WorkspaceProvider

__all__ = ["make_python_repl"]


def make_python_repl(workspaces: WorkspaceProvider) -> Tool:
    """The ``python_repl`` tool, running code in the sandboxes of ``workspaces``."""

    def python_repl(code: str, ctx: ToolContext = None) -> str:  # type: ignore[assignment]
        """Execute Python code in a persistent REPL.
        Variables persist between calls in this conversation. Returns what the code printed,
        the value of its last expression, or the error traceback. Sandboxed: no network, no
        subprocesses or threads, files can be written only in the working directory.
        read_table(name) returns a parquet table of the data directory as a pyarrow Table.

        Args:
            code: Python source to run.
        """
        result = workspaces.get(ctx).sandbox().run(code)
        _check_extras(result.error)
        return result.to_text()

    return tool(python_repl)


_MISSING_MODULE = re.compile(r"^ModuleNotFoundError: No module named '([\w.]+)'", re.MULTILINE)


def _check_extras(error: str | None) -> None:
    """Raise when the code failed for want of a module one of gramagent's extras installs.

    Such a failure is the installation's, not the code's: it is reported as an error (with
    the install command) rather than as the cell's output, so ``gramagent tool`` exits
    non-zero and the model sees an error result.

    Raises:
        ConfigurationError: ``error`` ends in ``ModuleNotFoundError`` for such a module.
    """
    if not error:
        return
    found = _MISSING_MODULE.findall(error)
    module = found[-1].partition(".")[0] if found else None
    extra = EXTRA_OF_MODULE.get(module or "")
    if module is not None and extra is not None:
        raise ConfigurationError(
            f"python_repl: the code needs {module}, which is not installed; it comes with "
            f"gramagent's {extra!r} extra: {install_command(extra)}")
