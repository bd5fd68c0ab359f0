"""The command line's conventions, in one place (issue 33 item 7): what every command's help
and parsing share.

- ``-h`` is ``--help`` (:data:`CONTEXT`, inherited by every subcommand);
- a command list shows each command's whole summary, never cut with "..." (:class:`Group`);
- help shows what an option takes by its metavar (``N``, ``SECONDS``, ``PATH``), never a
  Python type (``<list[str]>``, ``<int range>``): :func:`_shown_type`;
- ``--debug`` is accepted anywhere before ``--``, after the subcommand too;
- an argument that is not valid UTF-8 is a usage error naming it, not a "lone surrogate".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import typer
import typer.core

if TYPE_CHECKING:
    from typer import _click as click  # typer vendors click: the classes typer calls

__all__ = ["CONTEXT", "Group", "bad_utf8_argument"]

CONTEXT: Final[dict[str, Any]] = {"help_option_names": ["-h", "--help"]}
"""The root's context settings; a subcommand's context inherits them from its parent."""

DEBUG: Final = "--debug"

_LABELS: Final = {"int": "N", "float": "NUMBER", "str": "TEXT", "bool": "BOOLEAN"}


def _shown_type(self: typer.core.TyperOption | typer.core.TyperArgument,
                ctx: click.Context) -> str:
    """What help shows after a parameter's name: its metavar for an option (an argument's name
    is its metavar already: nothing), else a word a user reads (``N``, ``PATH``, ``a|b``)."""
    if isinstance(self, typer.core.TyperArgument):
        return ""
    if self.metavar is not None:
        return self.metavar
    desc = self.type_descriptor
    if desc.is_choice:
        return "|".join(str(c) for c in desc.choices or ())
    if desc.is_path:
        return "PATH"
    annotation = desc.annotation
    name = getattr(annotation, "__name__", "")
    return _LABELS.get(name, "VALUE")


# typer (>= 0.20) appends the Python type of every parameter to plain help (`<path>`,
# `<int range>`); click's convention, kept here, is the metavar.
typer.core.TyperOption.display_type = _shown_type  # type: ignore[method-assign,assignment]
typer.core.TyperArgument.display_type = _shown_type  # type: ignore[method-assign,assignment]


def bad_utf8_argument(args: list[str]) -> tuple[int, str] | None:
    """The position (from 1) of the first argument that is not valid UTF-8 (Python keeps its
    undecodable bytes as lone surrogates) and what is wrong with it, or None."""
    for position, arg in enumerate(args, 1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError as exc:
            raw = arg.encode("utf-8", "surrogateescape")
            shown = raw.decode("utf-8", "backslashreplace")
            return position, (f'"{shown}" is not valid UTF-8 (byte 0x{raw[exc.start]:02x} '
                              f"at offset {exc.start}); gramagent reads its arguments as "
                              "UTF-8 text")
    return None


def _summary(command: click.Command) -> str:
    """A command's summary: its short help, else its help's first paragraph, whole."""
    text = command.short_help or (command.help or "").split("\n\n")[0]
    return " ".join(text.split())


class Group(typer.core.TyperGroup):
    """A command group whose list shows each command's whole summary (wrapped, not cut), and
    whose root accepts ``--debug`` after the subcommand too."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands and their summaries (the help's first sentence, whole)."""
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, _summary(command)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """At the root: refuse an argument that is not UTF-8, and read ``--debug`` wherever it
        stands before ``--`` (moved in front, where the root's option is)."""
        if ctx.parent is None:
            problem = bad_utf8_argument(args)
            if problem is not None:
                position, what = problem
                raise typer.BadParameter(what, ctx=ctx, param_hint=f"argument {position}")
            end = args.index("--") if "--" in args else len(args)
            if DEBUG in args[:end]:
                args = [DEBUG, *(a for a in args[:end] if a != DEBUG), *args[end:]]
        return super().parse_args(ctx, args)
