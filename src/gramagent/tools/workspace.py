"""Where the built-in tools keep their files: one workspace per conversation.

A workspace is a directory with three parts:

- ``data/``: uploaded CSV files and the parquet tables made from them (:mod:`.data`); the
  ``python_repl`` sandbox may read it. ``GRAMAGENT_DATA_DIR`` or ``data_dir=`` replace it with
  one shared directory.
- ``work/``: the private working directory of the conversation's ``python_repl`` session.
- ``charts/``: PNG files drawn by the ``chart`` tool.

By default each conversation gets a temporary workspace, removed when the library forgets the
conversation (:meth:`gramagent._runtime.library.ToolLibrary.forget`). With ``session_dir=`` every
conversation uses that directory, and it is kept.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gramagent.errors import ConfigurationError

if TYPE_CHECKING:
    from gramagent._runtime.library import ToolContext, ToolLibrary
    from gramagent.tools.sandbox import PythonSandbox, SandboxConfig

__all__ = ["DATA_DIR_ENV", "DEFAULT_MAX_UPLOAD_BYTES", "DIRECT_CONVERSATION", "ToolSettings",
           "Workspace", "WorkspaceProvider"]

DATA_DIR_ENV = "GRAMAGENT_DATA_DIR"
"""Environment variable naming a shared data directory (uploads and parquet tables)."""
DEFAULT_MAX_UPLOAD_BYTES = 50 * 1024 * 1024
STATE_KEY = "gramagent.tools.workspace"
DIRECT_CONVERSATION = "gramagent.direct"
"""The conversation id of tool calls made without a ToolContext."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSettings:
    """Options shared by the built-in tools of one library."""

    session_dir: Path | None = None
    """One workspace directory for every conversation (kept); None: a temporary one each."""
    data_dir: Path | None = None
    """A shared data directory; None: ``GRAMAGENT_DATA_DIR`` if set, else the workspace's."""
    max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES
    """Largest CSV file ``load_csv`` converts."""
    sandbox: SandboxConfig | None = None
    """Limits and isolation of ``python_repl``; None: the defaults (and the environment)."""

    def resolved_data_dir(self) -> Path | None:
        """The shared data directory, if one is configured (argument first, then env)."""
        if self.data_dir is not None:
            return Path(self.data_dir)
        env = os.environ.get(DATA_DIR_ENV, "").strip()
        return Path(env) if env else None


class Workspace:
    """The directories of one conversation, and its Python sandbox once used.

    Closing it stops the sandbox and, for a temporary workspace, removes its directory.
    """

    def __init__(self, root: Path, *, data_dir: Path | None, settings: ToolSettings,
                 temporary: bool) -> None:
        self.root = root
        self.data_dir = (data_dir or root / "data").resolve()
        self.work_dir = root / "work"
        self.charts_dir = root / "charts"
        self.settings = settings
        self.temporary = temporary
        self._sandbox: PythonSandbox | None = None
        self._lock = threading.Lock()
        for path in (self.data_dir, self.charts_dir):
            path.mkdir(parents=True, exist_ok=True)
        if data_dir is None:  # our own: readable by the sandbox's user (the root stays private)
            os.chmod(self.data_dir, 0o755)

    def sandbox(self) -> PythonSandbox:
        """This conversation's Python sandbox (created on first use)."""
        from gramagent.tools.sandbox import PythonSandbox, SandboxConfig

        with self._lock:
            if self._sandbox is None:
                self._sandbox = PythonSandbox(
                    self.work_dir, data_dir=self.data_dir,
                    config=self.settings.sandbox or SandboxConfig.from_env())
            return self._sandbox

    def close(self) -> None:
        """Stop the sandbox; remove the directory if it is temporary."""
        with self._lock:
            sandbox, self._sandbox = self._sandbox, None
        if sandbox is not None:
            sandbox.close()
        if self.temporary:
            shutil.rmtree(self.root, ignore_errors=True)

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r}, temporary={self.temporary})"


class WorkspaceProvider:
    """Finds the workspace of a call: from its conversation state, or a default one.

    Calls without a :class:`~gramagent._runtime.library.ToolContext` (a tool called directly)
    share the workspace of the conversation :data:`DIRECT_CONVERSATION` of the attached
    library (so ``library.forget()`` closes it too), or one default workspace closed by
    :meth:`close`.
    """

    def __init__(self, settings: ToolSettings) -> None:
        self.settings = settings
        self._default_state: dict[str, Any] = {}
        self._library: ToolLibrary | None = None
        self._lock = threading.Lock()

    def attach(self, library: ToolLibrary) -> None:
        """Keep the workspace of direct calls in ``library``'s conversation state."""
        self._library = library

    def get(self, ctx: ToolContext | None) -> Workspace:
        """The workspace of ``ctx``'s conversation (created on first use)."""
        if ctx is not None:
            state = ctx.state
        elif self._library is not None:
            state = self._library.conversation_state(DIRECT_CONVERSATION)
        else:
            state = self._default_state
        with self._lock:
            workspace = state.get(STATE_KEY)
            if workspace is None:
                workspace = state[STATE_KEY] = self._create()
        assert isinstance(workspace, Workspace)
        return workspace

    def close(self) -> None:
        """Close the default workspace, if one was made."""
        with self._lock:
            workspace = self._default_state.pop(STATE_KEY, None)
        if workspace is not None:
            workspace.close()

    def _create(self) -> Workspace:
        data_dir = self.settings.resolved_data_dir()
        if data_dir is not None and not data_dir.is_dir():
            raise ConfigurationError(f"data directory {str(data_dir)!r} does not exist "
                                     f"(from data_dir= or {DATA_DIR_ENV})")
        if self.settings.session_dir is not None:
            root = Path(self.settings.session_dir).resolve()
            root.mkdir(parents=True, exist_ok=True)
            return Workspace(root, data_dir=data_dir, settings=self.settings, temporary=False)
        root = Path(tempfile.mkdtemp(prefix="gramagent-session-")).resolve()
        return Workspace(root, data_dir=data_dir, settings=self.settings, temporary=True)
