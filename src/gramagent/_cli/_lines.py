"""The lines ``gramagent chat`` reads: edited with the standard library's ``readline`` on a
terminal (arrow keys move in the line, Up and Down walk the history, Ctrl-R searches it), the
history kept in ``chat_history`` beside the session store (``$GRAMAGENT_DATA_DIR``, else
``~/.local/share/gramagent``); read plainly from piped stdin."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Final

from gramagent.errors import ConfigurationError

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["EXIT_COMMANDS", "HISTORY_LENGTH", "history_path", "read_lines"]

EXIT_COMMANDS: Final = frozenset({"/exit", "/quit"})
HISTORY_LENGTH: Final = 1000
"""Lines of chat history kept."""


def history_path() -> Path:
    """Where the chat history is kept: beside the session store."""
    from gramagent._runtime.sessions import default_store_path

    return default_store_path().parent / "chat_history"


def _readline() -> ModuleType | None:
    """The standard library's line editor, where this Python has one (not on Windows)."""
    try:
        import readline
    except ImportError:
        return None
    return readline


@contextlib.contextmanager
def _history(readline: ModuleType) -> Iterator[None]:
    """The chat history loaded into ``readline``, and saved when the chat ends."""
    path = history_path()
    with contextlib.suppress(OSError):
        readline.read_history_file(path)
    readline.set_history_length(HISTORY_LENGTH)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
            readline.write_history_file(path)


def _prompt() -> str:
    """``you> `` in bold green (``NO_COLOR`` aside), its escapes marked as taking no room so
    readline knows where the line starts."""
    if os.environ.get("NO_COLOR"):
        return "you> "
    return "\001\033[1;32m\002you>\001\033[0m\002 "


def read_lines(console: Console) -> Iterator[str]:
    """User lines, stripped, blank ones skipped, until end of input or ``/exit``: edited with
    readline where stdin and stdout are a terminal, prompted with rich where only stdin is,
    read plainly from piped stdin.

    Raises:
        ConfigurationError: piped input that is not UTF-8.
    """
    readline = _readline() if sys.stdin.isatty() and sys.stdout.isatty() else None
    with _history(readline) if readline is not None else contextlib.nullcontext():
        for raw in _edited() if readline is not None else _plain(console):
            line = raw.strip()
            if line in EXIT_COMMANDS:
                return
            if line:
                yield line


def _edited() -> Iterator[str]:
    """Lines typed at the terminal, edited with readline (``input`` uses it once imported)."""
    while True:
        try:
            yield input(_prompt())
        except EOFError:
            sys.stdout.write("\n")
            return


def _plain(console: Console) -> Iterator[str]:
    """Lines prompted with rich on a terminal, else read from piped stdin."""
    interactive = sys.stdin.isatty()
    while True:
        try:
            if interactive:
                yield console.input("[bold green]you>[/bold green] ")
                continue
            line = sys.stdin.readline()
        except EOFError:
            return
        except UnicodeDecodeError as exc:
            raise ConfigurationError(f"<stdin>: not valid UTF-8 ({exc.reason})") from None
        if not line:
            return
        yield line
