"""The ``python_repl`` tool: a persistent, sandboxed Python session per conversation.

Each conversation gets its own :class:`~gramagent.tools.sandbox.PythonSandbox` (a separate,
isolated worker process) working in the conversation's workspace; see ``docs/sandbox.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gramagent._runtime.library import Tool, ToolContext, tool

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
        return workspaces.get(ctx).sandbox().run(code).to_text()

    return tool(python_repl)
