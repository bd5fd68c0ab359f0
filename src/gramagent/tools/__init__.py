"""Built-in tool implementations: ``sayHello``, ``python_repl``, data and chart tools.

:func:`builtin_library` returns a :class:`~gramagent._runtime.library.ToolLibrary` with every
built-in tool whose dependencies are installed: ``sayHello`` and ``sayGoodbye`` always;
``python_repl`` on Linux (it needs the OS isolation of :mod:`gramagent.tools.sandbox`);
``load_csv``, ``describe_table`` (pyarrow) and ``chart`` (pyarrow and matplotlib) with the
``tools`` extra.
The gram specs of these tools are in ``examples/tools.gram``.

The public surface is this module and :mod:`gramagent.tools.sandbox`; modules whose names
start with ``_`` are private.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from gramagent._install import needs_extra
from gramagent._runtime.library import ToolLibrary
from gramagent.tools._hello import say_goodbye, say_hello
from gramagent.tools._tables import DataError
from gramagent.tools._workspace import (
    DATA_DIR_ENV,
    DEFAULT_MAX_TABLE_BYTES,
    DEFAULT_MAX_UPLOAD_BYTES,
    ToolSettings,
    Workspace,
    WorkspaceError,
    WorkspaceProvider,
)
from gramagent.tools.sandbox import PythonSandbox, SandboxConfig, SandboxError

__all__ = [
    "DATA_DIR_ENV",
    "DataError",
    "PythonSandbox",
    "SandboxConfig",
    "SandboxError",
    "ToolSettings",
    "Workspace",
    "WorkspaceError",
    "available_tools",
    "builtin_library",
    "say_goodbye",
    "say_hello",
]


def _installed(*modules: str) -> bool:
    return all(importlib.util.find_spec(m) is not None for m in modules)


def available_tools() -> dict[str, bool]:
    """Per built-in tool name, whether its dependencies are present here."""
    data = _installed("pyarrow")
    return {
        "sayHello": True,
        "sayGoodbye": True,
        "python_repl": sys.platform.startswith("linux"),
        "load_csv": data,
        "describe_table": data,
        "chart": data and _installed("matplotlib"),
    }


def builtin_library(
    *,
    data_dir: str | os.PathLike[str] | None = None,
    session_dir: str | os.PathLike[str] | None = None,
    max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES,
    max_table_bytes: int = DEFAULT_MAX_TABLE_BYTES,
    sandbox: SandboxConfig | None = None,
) -> ToolLibrary:
    """A ToolLibrary with every built-in tool available here.

    Args:
        data_dir: a shared upload directory (CSV files, and parquet tables made elsewhere),
            only read: tables made from its CSV files go to each conversation's workspace;
            default: ``GRAMAGENT_DATA_DIR`` if set, else the ``data/`` folder of each
            conversation's workspace.
        session_dir: one workspace directory for every conversation, kept after use; default:
            a temporary workspace per conversation, removed when the library forgets it.
        max_upload_bytes: the largest CSV file ``load_csv`` converts.
        max_table_bytes: the largest table (decoded size, from its parquet footer) that
            ``describe_table`` and ``chart`` read in this process.
        sandbox: a :class:`~gramagent.tools.sandbox.SandboxConfig` for ``python_repl``
            (limits, isolation requirements); default: ``SandboxConfig.from_env()``.

    Returns:
        The library; tools whose dependencies are missing are left out (see
        :func:`available_tools`) and marked unavailable with the command that installs them,
        so binding an agent that needs them says what to install.
    """
    settings = ToolSettings(
        session_dir=Path(session_dir) if session_dir is not None else None,
        data_dir=Path(data_dir) if data_dir is not None else None,
        max_upload_bytes=max_upload_bytes,
        max_table_bytes=max_table_bytes,
        sandbox=sandbox,
    )
    workspaces = WorkspaceProvider(settings)
    available = available_tools()
    library = ToolLibrary([say_hello, say_goodbye])
    workspaces.attach(library)
    if available["python_repl"]:
        from gramagent.tools._repl import make_python_repl

        library.register(make_python_repl(workspaces))
    if available["load_csv"]:
        from gramagent.tools._data import make_data_tools

        for data_tool in make_data_tools(workspaces):
            library.register(data_tool)
    if available["chart"]:
        from gramagent.tools._chart import make_chart

        library.register(make_chart(workspaces))
    for name, present in available.items():
        if not present:
            library.mark_unavailable(name, _why_unavailable(name))
    return library


def _why_unavailable(name: str) -> str:
    if name == "python_repl":
        return "it needs Linux (its sandbox uses Linux namespaces)"
    return needs_extra("it", "tools")
