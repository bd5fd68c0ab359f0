"""The one sanitizer of text from outside on its way to the user's terminal.

Everything the CLI prints that it did not write itself (a model's answer, a tool's result, a
cell's output, a CSV's column names, a session's name, a server's model ids, an error quoting
its input, a log record) can hold escape sequences that a terminal obeys: OSC 52 sets the
clipboard, OSC 0 retitles the window, CSI 2J clears the screen, OSC 8 hides a link behind text,
SGR 8 hides text; the C1 codes (U+0080-U+009F, CSI U+009B among them) do the same in one
character, BEL rings, and the bidirectional controls (U+202A-U+202E, U+2066-U+2069, U+200E,
U+200F, U+061C) reorder what is shown (the "Trojan Source" trick). And printed through rich,
``[red]``-style markup and ``:emoji:`` codes are interpreted.

- :func:`terminal_text` shows each such character instead of sending it: a C0 control (but
  newline, tab and the CR of a CRLF) as ``\\xNN``; DEL, a C1 code, a bidi control or a lone
  surrogate as ``\\uNNNN``. The ``\\u`` form keeps JSON text valid JSON with the same value,
  so JSON output goes through the same function (JSON encoders escape C0 themselves).
- :func:`markup_text` is that, escaped for rich markup, for outside text put into markup.
- :func:`terminal_console` makes every console of the CLI: emoji codes off, and a render hook
  that runs :func:`terminal_text` over every segment of text rendered (tables, Markdown,
  tracebacks), whatever path built it; :func:`echo` and :class:`TerminalStream` do the same
  for text written without rich (plain and JSON results, log records).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import IO, TYPE_CHECKING, Final

from rich.console import Console, RenderHook
from rich.segment import Segment

if TYPE_CHECKING:
    from rich.console import ConsoleOptions, ConsoleRenderable, RenderResult

__all__ = ["TerminalStream", "echo", "markup_text", "terminal_console", "terminal_text"]

_UNSAFE: Final = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f]|\r(?!\n)"
    "|[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
"""What a terminal obeys or reorders: C0 controls but newline, tab and the CR of a CRLF (ESC,
which opens every escape sequence, BEL, a lone CR); DEL and the C1 codes; the bidi controls;
lone surrogates (which cannot even be encoded)."""


def terminal_text(text: str) -> str:
    """``text`` as a terminal shows it, not obeys it: each character of :data:`_UNSAFE`
    written as an escape (``\\x1b``, ``\\u009b``, ``\\u202e``); newlines, tabs, CRLF and
    every other character (letters of any script, emoji) kept."""
    if text.isprintable():  # the usual text: no call (newlines and tabs are not printable)
        return text
    return _UNSAFE.sub(_shown, text)


def _shown(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x20 else f"\\u{code:04x}"


_BRACKET: Final = re.compile(r"(\\*)(\[(?:[a-z#/@][^[]*?\])?)")
"""A ``[`` and the backslashes before it: with what follows, if rich would read it as a tag."""


def markup_text(text: object) -> str:
    """``str(text)`` for a rich markup string: sanitized (:func:`terminal_text`) and escaped,
    so ``[red]`` or ``[link=...]`` in it is shown as written, not applied.

    Rich's own ``escape`` loses a backslash before a ``[`` that is not a tag (``\\[`` shows
    ``[``): here every backslash and bracket prints as written. Backslashes ending the text
    are doubled, so they cannot escape a closing tag that follows (at the very end of a
    markup string they then print doubled).
    """
    escaped = _BRACKET.sub(_escaped_bracket, terminal_text(str(text)))
    bare = escaped.rstrip("\\")
    return bare + "\\" * (2 * (len(escaped) - len(bare)))


def _escaped_bracket(match: re.Match[str]) -> str:
    backslashes, bracket = match.groups()
    if len(bracket) > 1:  # a tag: 2n + 1 backslashes print n and the tag as text
        return f"{backslashes}{backslashes}\\{bracket}"
    # not a tag: rich turns the last backslash and the bracket into a bracket
    return f"{backslashes}\\[" if backslashes else "["


class _Shown:
    """A renderable whose text segments are sanitized as they are rendered."""

    def __init__(self, inner: ConsoleRenderable) -> None:
        self.inner = inner

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for segment in console.render(self.inner, options):
            if segment.control or segment.text.isprintable():
                yield segment  # cursor moves of a live display; or nothing to show
            else:
                yield Segment(terminal_text(segment.text), segment.style)


class _ShowNotObey(RenderHook):
    """The render hook of :func:`terminal_console`."""

    def process_renderables(self, renderables: list[ConsoleRenderable]
                            ) -> list[ConsoleRenderable]:
        return [_Shown(r) for r in renderables]


_HOOK: Final = _ShowNotObey()


def terminal_console(**options: object) -> Console:
    """A rich console that shows outside text and never obeys it: emoji codes are not
    replaced, and every segment of text it renders goes through :func:`terminal_text` (rich
    markup in the strings given to it is still applied: outside text put into markup goes in
    through :func:`markup_text`). ``options`` are :class:`rich.console.Console`'s."""
    console = Console(emoji=False, **options)  # type: ignore[arg-type]
    console.push_render_hook(_HOOK)
    return console


def echo(text: str, *, err: bool = False, nl: bool = True) -> None:
    """Write ``text`` (outside text: a result, JSON) to stdout or stderr through
    :func:`terminal_text`."""
    import typer

    typer.echo(terminal_text(text), err=err, nl=nl)


class TerminalStream:
    """A text stream that writes through :func:`terminal_text` to ``inner`` (a log handler's
    stream: records quote tool arguments, server answers and errors)."""

    def __init__(self, inner: IO[str]) -> None:
        self.inner = inner

    def write(self, text: str) -> int:
        """Write ``text``, sanitized; returns the length of ``text``."""
        self.inner.write(terminal_text(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        """Write each line, sanitized."""
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        """Flush ``inner``."""
        self.inner.flush()

    def isatty(self) -> bool:
        """Whether ``inner`` is a terminal."""
        return bool(self.inner.isatty())
