"""Where the built-in tools keep their files: one workspace per conversation.

A workspace is a directory with three parts:

- ``data/``: the parquet tables made from uploaded CSV files (:mod:`._data`), and the uploads
  themselves unless ``GRAMAGENT_DATA_DIR`` or ``data_dir=`` name a shared upload directory.
  A shared directory is only read: tables derived from it are written here, never next to
  the uploads (so a checkout's ``examples/data`` stays clean). The ``python_repl`` sandbox
  may read both.
- ``work/``: the private working directory of the conversation's ``python_repl`` session
  (with ``session_dir=``, shared by every conversation, ``work/<conversation>/``: each
  conversation's worker has its own directory and, as root, its own uid).
- ``charts/``: PNG files drawn by the ``chart`` tool (made when the first chart is drawn).

By default each conversation gets a temporary workspace, removed when the library forgets the
conversation (:meth:`gramagent._runtime.library.ToolLibrary.forget`) or, at the latest, when
the process exits; one left by a host killed with ``SIGKILL`` is removed by the next process
that makes a temporary workspace beside it (:mod:`._leftovers`). It is made in the system's
temporary directory, unless that directory keeps its files in memory (tmpfs, ramfs: bytes the
sandbox's memory limit does not count) and ``TMPDIR`` does not name it: then in the first of
:data:`DISK_TEMP_DIRS` on disk (:func:`temporary_parent`). With ``session_dir=`` every
conversation uses that directory, and it is kept. :func:`workspaces_of` finds the provider
of a built-in library, so a caller (the CLI's ``--outputs DIR``) can point it at a directory
to keep before the first call, and can list the files the tools wrote
(:meth:`Workspace.files`) to say where they went. Removal walks the tree iteratively through
directory descriptors (no recursion limit, no path length limit, symlinks never followed);
what cannot be removed is reported.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import tempfile
import threading
import weakref
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gramagent.errors import ConfigurationError, GramagentError
from gramagent.tools._leftovers import OWNER_FILE, SESSION_PREFIX, remove_abandoned, write_owner

if TYPE_CHECKING:
    from gramagent._runtime.library import ToolContext, ToolLibrary
    from gramagent.tools.sandbox import PythonSandbox, SandboxConfig

__all__ = ["DATA_DIR_ENV", "DEFAULT_MAX_TABLE_BYTES", "DEFAULT_MAX_UPLOAD_BYTES",
           "DIRECT_CONVERSATION", "DISK_TEMP_DIRS", "ToolSettings", "Workspace", "WorkspaceError",
           "WorkspaceProvider", "remove_tree", "temporary_parent", "workspaces_of"]

_log = logging.getLogger(__name__)

DATA_DIR_ENV = "GRAMAGENT_DATA_DIR"
"""Environment variable naming a shared data directory (uploads and parquet tables)."""
DEFAULT_MAX_UPLOAD_BYTES = 50 * 1024 * 1024
DEFAULT_MAX_TABLE_BYTES = 512 * 1024 * 1024
STATE_KEY = "gramagent.tools._workspace"
DIRECT_CONVERSATION = "gramagent.direct"
"""The conversation id of tool calls made without a ToolContext."""
DISK_TEMP_DIRS = ("/var/tmp",)
"""Where temporary workspaces go when the system's temporary directory is in memory."""


def temporary_parent() -> str | None:
    """The directory for temporary workspaces: None (the system's temporary directory) unless
    that directory keeps files in memory and ``TMPDIR`` does not name it (an explicit choice
    stays, and the sandbox's report says ``memory: NO``); then the first of
    :data:`DISK_TEMP_DIRS` that is on disk and writable, if any."""
    from gramagent.tools.sandbox._memory import in_memory

    if os.environ.get("TMPDIR") or not in_memory(tempfile.gettempdir()):
        return None
    return next((d for d in DISK_TEMP_DIRS if os.path.isdir(d) and not in_memory(d)
                 and os.access(d, os.W_OK | os.X_OK)), None)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSettings:
    """Options shared by the built-in tools of one library."""

    session_dir: Path | None = None
    """One workspace directory for every conversation (kept); None: a temporary one each."""
    data_dir: Path | None = None
    """A shared data directory; None: ``GRAMAGENT_DATA_DIR`` if set, else the workspace's."""
    max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES
    """Largest CSV file ``load_csv`` converts."""
    max_table_bytes: int = DEFAULT_MAX_TABLE_BYTES
    """Largest decoded size (read from the parquet footer) of a table the host-side tools
    (``describe_table``, ``chart``) read."""
    sandbox: SandboxConfig | None = None
    """Limits and isolation of ``python_repl``; None: the defaults (and the environment)."""

    def resolved_data_dir(self) -> Path | None:
        """The shared data directory, if one is configured (argument first, then env)."""
        if self.data_dir is not None:
            return Path(self.data_dir)
        env = os.environ.get(DATA_DIR_ENV, "").strip()
        return Path(env) if env else None


class WorkspaceError(GramagentError):
    """A workspace could not be cleaned up (what was left, and why)."""


class Workspace:
    """The directories of one conversation, and its Python sandbox once used.

    Closing it stops the sandbox and, for a temporary workspace, removes its directory.

    Attributes:
        data_dir: where uploaded CSV files are read (the shared upload directory, if any).
        tables_dir: where tables are written (always this workspace's ``data/``).
    """

    def __init__(self, root: Path, *, data_dir: Path | None, settings: ToolSettings,
                 temporary: bool, conversation: str | None = None) -> None:
        self.root = root
        self.tables_dir = (root / "data").resolve()
        self.data_dir = (data_dir or self.tables_dir).resolve()
        self.work_dir = root / "work"
        if conversation is not None:  # a directory shared by conversations: one work dir each
            self.work_dir = self.work_dir / _dir_name(conversation)
        self.charts_dir = root / "charts"
        self.settings = settings
        self.temporary = temporary
        self._sandbox: PythonSandbox | None = None
        self._lock = threading.Lock()
        self.tables_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.tables_dir, 0o755)  # readable by the sandbox's user (root stays private)
        self._cleanup = (weakref.finalize(self, _remove_at_exit, root) if temporary
                         else None)

    def sandbox(self) -> PythonSandbox:
        """This conversation's Python sandbox (created on first use)."""
        from gramagent.tools.sandbox import PythonSandbox, SandboxConfig

        with self._lock:
            if self._sandbox is None:
                shared = [self.data_dir] if self.data_dir != self.tables_dir else []
                self._sandbox = PythonSandbox(
                    self.work_dir, data_dir=self.tables_dir, more_data_dirs=shared,
                    config=self.settings.sandbox or SandboxConfig.from_env())
            return self._sandbox

    def close(self) -> None:
        """Stop the sandbox; remove the directory if it is temporary.

        Raises:
            WorkspaceError: part of a temporary workspace could not be removed.
        """
        with self._lock:
            sandbox, self._sandbox = self._sandbox, None
        if sandbox is not None:
            sandbox.close()
        if self._cleanup is not None:
            self._cleanup.detach()
            self._cleanup = None
            remove_tree(self.root)

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r}, temporary={self.temporary})"

    def files(self) -> list[Path]:
        """The regular files in this workspace now (tables, charts, what the sandbox's code
        wrote), relative to :attr:`root`, sorted; symlinks are not followed. The sandbox's
        record of its worker (``.<work dir>.worker`` beside a work directory) is not one, nor
        is a temporary workspace's owner record."""
        found: list[Path] = []
        for folder, dirs, names in os.walk(self.root):
            dirs.sort()
            here = Path(folder)
            found.extend((here / name).relative_to(self.root) for name in names
                         if (here / name).is_file() and not (here / name).is_symlink()
                         and not _worker_record(name, dirs)
                         and not (self.temporary and here == self.root and name == OWNER_FILE))
        return sorted(found)


def _worker_record(name: str, siblings: list[str]) -> bool:
    """Whether ``name`` is the worker record of a work directory among ``siblings``."""
    return (name.startswith(".") and name.endswith(".worker")
            and name[1:-len(".worker")] in siblings)


def _dir_name(conversation: str) -> str:
    """A directory name for a conversation id: readable, safe, distinct per id."""
    digest = hashlib.sha256(conversation.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "_", conversation).strip("._")[:48]
    return f"{readable}-{digest}" if readable else digest


def _remove_at_exit(root: Path) -> None:
    """Remove a temporary workspace nobody closed (at the latest when the process exits)."""
    try:
        remove_tree(root)
    except WorkspaceError as exc:
        _log.warning("%s", exc)


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _clear_files(fd: int) -> list[str]:
    """Unlink every non-directory entry of the directory ``fd`` and remove its empty
    subdirectories; the names of the others (each entry is read once).

    An empty subdirectory is removed without being opened: on a disk file system, removing
    a directory that was just read costs far more than removing one that was not.
    """
    with os.scandir(fd) as entries:
        names = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
    subdirectories = []
    for name, is_dir in names:
        try:
            if not is_dir:
                os.unlink(name, dir_fd=fd)
                continue
            os.rmdir(name, dir_fd=fd)
        except FileNotFoundError:
            pass  # gone meanwhile (a worker's record cleared by its session as it stops)
        except OSError:
            if not is_dir:
                raise
            subdirectories.append(name)  # not empty (or not removable: named from inside)
    return subdirectories


def remove_tree(root: Path) -> None:
    """Remove ``root`` and everything under it, iteratively (any depth, any path length).

    It descends one directory at a time through descriptors opened without following
    symlinks, holding at most two open. Each directory is listed once (the names of its
    subdirectories are kept until they are removed), so the cost is linear in the number of
    entries, however they are arranged: 10,000 sibling directories cost 10,000 removals,
    not 10,000 listings of their parent.

    Raises:
        WorkspaceError: something could not be removed (the tree is left partly in place).
    """
    try:
        fd = os.open(root, _DIR_FLAGS)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise WorkspaceError(f"cannot remove workspace {str(root)!r}: {exc}") from None
    path: list[str] = []
    try:
        pending = [_clear_files(fd)]  # per level of ``path``: subdirectories still to remove
        while True:
            if pending[-1]:
                child = pending[-1].pop()
                try:
                    new = os.open(child, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    continue
                os.close(fd)
                fd = new
                path.append(child)
                pending.append(_clear_files(fd))
                continue
            pending.pop()
            if not path:
                break
            parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = parent
            with contextlib.suppress(FileNotFoundError):
                os.rmdir(path.pop(), dir_fd=fd)
    except OSError as exc:
        where = os.path.join(str(root), *path[:8]) + ("/..." if len(path) > 8 else "")
        raise WorkspaceError(f"cannot remove workspace {str(root)!r} (at {where!r}, depth "
                             f"{len(path)}): {exc}") from None
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
    try:
        os.rmdir(root)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise WorkspaceError(f"cannot remove workspace {str(root)!r}: {exc}") from None


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
        self._library: weakref.ref[ToolLibrary] | None = None
        self._lock = threading.Lock()
        self._made: weakref.WeakSet[Workspace] = weakref.WeakSet()

    def attach(self, library: ToolLibrary) -> None:
        """Keep the workspace of direct calls in ``library``'s conversation state, and let
        :func:`workspaces_of` find this provider from ``library``."""
        self._library = weakref.ref(library)  # weak: the registry must not keep it alive
        _providers[library] = self

    def keep_in(self, directory: str | os.PathLike[str]) -> None:
        """Keep every conversation's files in ``directory`` from now on (as ``session_dir=``).

        Raises:
            ConfigurationError: a workspace was made already (the tools have run), or
                ``directory`` exists and is not a directory.
        """
        path = Path(directory)
        if path.exists() and not path.is_dir():
            raise ConfigurationError(f"{str(path)!r} is not a directory")
        with self._lock:
            if len(self._made):
                raise ConfigurationError(
                    "the tools have made a workspace already; name the directory to keep "
                    "before the first call")
            self.settings = replace(self.settings, session_dir=path)

    def workspaces(self) -> list[Workspace]:
        """The workspaces this provider made that are still on disk, temporary or kept."""
        with self._lock:
            made = list(self._made)
        return sorted((w for w in made if w.root.is_dir()), key=lambda w: str(w.root))

    def get(self, ctx: ToolContext | None) -> Workspace:
        """The workspace of ``ctx``'s conversation (created on first use)."""
        library = self._library() if self._library is not None else None
        if ctx is not None:
            state = ctx.state
        elif library is not None:
            state = library.conversation_state(DIRECT_CONVERSATION)
        else:
            state = self._default_state
        with self._lock:
            workspace = state.get(STATE_KEY)
            if workspace is None:
                conversation = ctx.conversation_id if ctx is not None else DIRECT_CONVERSATION
                workspace = state[STATE_KEY] = self._create(conversation)
                self._made.add(workspace)
        assert isinstance(workspace, Workspace)
        return workspace

    def close(self) -> None:
        """Close the default workspace, if one was made."""
        with self._lock:
            workspace = self._default_state.pop(STATE_KEY, None)
        if workspace is not None:
            workspace.close()

    def _create(self, conversation: str) -> Workspace:
        data_dir = self.settings.resolved_data_dir()
        if data_dir is not None and not data_dir.is_dir():
            raise ConfigurationError(f"data directory {str(data_dir)!r} does not exist "
                                     f"(from data_dir= or {DATA_DIR_ENV})")
        if self.settings.session_dir is not None:
            root = Path(self.settings.session_dir).resolve()
            root.mkdir(parents=True, exist_ok=True)
            return Workspace(root, data_dir=data_dir, settings=self.settings, temporary=False,
                             conversation=conversation)
        root = Path(tempfile.mkdtemp(prefix=SESSION_PREFIX, dir=temporary_parent())).resolve()
        write_owner(root)
        _reclaim_once(root.parent)
        return Workspace(root, data_dir=data_dir, settings=self.settings, temporary=True)


_reclaimed: set[Path] = set()
_reclaim_lock = threading.Lock()


def _reclaim_once(parent: Path) -> None:
    """Remove the workspaces abandoned in ``parent`` by dead hosts, once per process."""
    with _reclaim_lock:
        if parent in _reclaimed:
            return
        _reclaimed.add(parent)
    remove_abandoned(parent, remove_tree)


_providers: weakref.WeakKeyDictionary[ToolLibrary, WorkspaceProvider] = (
    weakref.WeakKeyDictionary())
"""The provider attached to each live built-in library (an entry goes with its library)."""


def workspaces_of(library: ToolLibrary) -> WorkspaceProvider | None:
    """The workspace provider of ``library`` (one :func:`gramagent.tools.builtin_library`
    made), or None for a library without the built-in tools' workspaces."""
    return _providers.get(library)
