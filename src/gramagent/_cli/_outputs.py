"""``--outputs DIR`` of ``run`` and ``chat``: keep the files the built-in tools write.

Without it, each conversation's workspace (charts, tables, the sandbox's files) is a
temporary directory removed when the command exits; :func:`keep_outputs` then returns a note
naming what was discarded, so an answer such as "Chart saved to /tmp/gramagent-session-.../
region.png" is not left pointing at nothing unexplained. With it, the workspace is ``DIR``
(kept, the answers' paths point there) and the note says what is in it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gramagent._cli._terminal import markup_text
from gramagent.errors import ConfigurationError

if TYPE_CHECKING:
    from gramagent._runtime.library import ToolLibrary
    from gramagent.tools._workspace import Workspace

__all__ = ["keep_outputs", "outputs_note"]

_SHOWN = 5
"""Files named in a note; the rest are counted."""


def keep_outputs(library: ToolLibrary | None, directory: Path | None
                 ) -> Callable[[], str | None]:
    """Point ``library``'s workspaces at ``directory`` (when given); return what tells, at
    the end, where the tools' files went (:func:`outputs_note`).

    Raises:
        ConfigurationError: ``directory`` is given but ``library`` has no built-in tools'
            workspace (a ``--tools`` library of another kind), or is not a directory.
    """
    from gramagent.tools._workspace import workspaces_of

    provider = workspaces_of(library) if library is not None else None
    if directory is not None:
        if provider is None:
            raise ConfigurationError(
                "--outputs keeps the files of the built-in tools (gramagent.tools:"
                "builtin_library); this --tools library writes none there")
        provider.keep_in(directory)
    if provider is None:
        return lambda: None
    return lambda: outputs_note(provider.workspaces(), kept=directory)


def outputs_note(workspaces: Sequence[Workspace], *, kept: Path | None) -> str | None:
    """One line saying where the files of ``workspaces`` are (``kept``) or that they were
    discarded with their temporary workspace; None when the tools wrote no file."""
    files = [f for w in workspaces for f in w.files()]
    if not files:
        return None
    shown = ", ".join(str(f) for f in files[:_SHOWN])
    more = f" and {len(files) - _SHOWN} more" if len(files) > _SHOWN else ""
    count = f"{len(files)} file{'s' if len(files) != 1 else ''}"
    if kept is not None:
        return f"outputs: {count} in {markup_text(kept)}: {markup_text(shown)}{more}"
    return (f"outputs: {count} in a temporary workspace, removed at exit "
            f"({markup_text(shown)}{more}); --outputs DIR keeps them")
