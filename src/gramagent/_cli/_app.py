"""The ``gramagent`` Typer application and what every command module shares: the stderr
console and the error edge (a GramagentError becomes one stderr line and exit code 1,
tracebacks only with ``--debug``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from gramagent.errors import GramagentError

__all__ = ["app", "err_console", "handle_errors", "main"]

app = typer.Typer(
    name="gramagent",
    help="LLM agents with late-bound tools, declared in gram notation.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: fast, and brackets in help text are shown as written
)

err_console = Console(stderr=True)
"""Diagnostics go to stderr; results go to stdout."""

_state = {"debug": False}

F = TypeVar("F", bound=Callable[..., Any])


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:  # the distribution's version, as pip reports it
            number = version("gramagent")
        except PackageNotFoundError:  # run from a source tree that was never installed
            number = "(not installed)"
        typer.echo(f"gramagent {number}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks on errors."),
    version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version,
                                 help="Print the version and exit."),
) -> None:
    _state["debug"] = debug


def handle_errors(func: F) -> F:
    """Turn a GramagentError into one stderr line and exit code 1."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except GramagentError as exc:
            if _state["debug"]:
                raise
            from gramagent._logs import redact  # logging's machinery, loaded only on an error

            err_console.print(f"[red]{type(exc).__name__}[/red]: {escape(redact(str(exc)))}",
                              markup=True,
                              highlight=False, soft_wrap=True)
            raise typer.Exit(1) from None

    return wrapper  # type: ignore[return-value]


def main() -> None:
    """Entry point for ``python -m gramagent``."""
    app(prog_name="gramagent")
