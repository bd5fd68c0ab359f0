"""The ``gramagent`` Typer application and what every command module shares: the stderr
console, reading stdin, and the error edge (:func:`handle_errors`): no Python traceback ever
reaches the user (only with ``--debug``, secrets masked). Exit codes:

- 0: success;
- 1: the input or the run failed (a gramagent error: bad spec, bad arguments, the model server
  failed, a run limit was hit), one line on stderr naming the error;
- 2: the command line itself is wrong (unknown option, missing argument);
- 70: an internal error, a bug in gramagent (one line saying so; ``--debug`` for details);
- 130: interrupted (Ctrl-C);
- 143, 129: stopped by SIGTERM or SIGHUP, which end a command as Ctrl-C does (its cleanup
  runs: :mod:`gramagent._cli._signals`).
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
import traceback
import warnings
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, NoReturn, TypeVar

import typer
from rich.console import Console

from gramagent._agent_session import require_file
from gramagent._cli._conventions import CONTEXT, Group
from gramagent._cli._signals import interrupt_on_termination, termination_signal
from gramagent._cli._terminal import markup_text, terminal_console, terminal_text
from gramagent.errors import ConfigurationError, GramagentError

if TYPE_CHECKING:
    from gramagent._runtime.events import ToolMetrics

__all__ = [
    "answered_in_json",
    "EXIT_ERROR",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_USAGE",
    "app",
    "err_console",
    "handle_errors",
    "main",
    "markup_text",
    "out_console",
    "print_error",
    "read_stdin",
    "require_file",
    "terminal_text",
]

EXIT_ERROR: Final = 1
"""The input or the run failed: a :class:`~gramagent.errors.GramagentError`."""
EXIT_USAGE: Final = 2
"""The command line is wrong (click's usage errors)."""
EXIT_INTERNAL: Final = 70
"""An internal error: a bug in gramagent, not in the user's input (``EX_SOFTWARE``)."""
EXIT_INTERRUPTED: Final = 130
"""Interrupted by Ctrl-C."""

app = typer.Typer(
    name="gramagent",
    help="LLM agents with late-bound tools, declared in gram notation.",
    cls=Group,
    context_settings=CONTEXT,
    no_args_is_help=True,
    add_completion=True,  # typer's --install-completion / --show-completion (README)
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: fast, and brackets in help text are shown as written
)

err_console = terminal_console(stderr=True)
"""Diagnostics go to stderr; results go to stdout (:func:`out_console`). Both show outside
text, never obey it (:mod:`gramagent._cli._terminal`)."""

PIPED_WIDTH: Final = 10_000
"""The width of results written to a pipe or a file: a line as long as its content."""


def out_console(*, soft_wrap: bool = False) -> Console:
    """A console for results on stdout: a terminal's width on a terminal; piped (and with no
    ``COLUMNS``), lines as long as their content, not wrapped at 80 columns."""
    piped = not sys.stdout.isatty() and "COLUMNS" not in os.environ
    return terminal_console(highlight=False, soft_wrap=soft_wrap,
                            width=PIPED_WIDTH if piped else None)

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
    warnings.showwarning = _show_warning


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: Any = None, line: str | None = None) -> None:
    """Python's warnings (a library's, quoting what it was given) as the CLI prints any outside
    text: sanitized (:func:`terminal_text`), on stderr."""
    text = warnings.formatwarning(message, category, filename, lineno, line)
    (file or sys.stderr).write(terminal_text(text))


def handle_errors(func: F) -> F:
    """Catch every error at the command's edge: no traceback reaches the user.

    A :class:`~gramagent.errors.GramagentError` is one stderr line and exit code 1, and so is
    an ``OSError`` that names a file (a name too long, a device that refuses to be read: the
    file and the cause); any other exception is an internal error, one line saying so and
    exit code 70; Ctrl-C exits with 130.
    With ``--debug`` the traceback is printed instead of the line, secrets masked.
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        as_json = kwargs.get("json") is True  # the command's --json: errors as JSON too
        try:
            return func(*args, **kwargs)
        except (typer.Exit, typer.Abort, typer.exceptions.TyperException, SystemExit):
            raise  # typer's own: an exit code, a usage error (2), an abort
        except KeyboardInterrupt:
            stopped = termination_signal()  # SIGTERM, SIGHUP: the terminal may be gone
            with contextlib.suppress(OSError):
                err_console.print("interrupted" if stopped is None
                                  else f"stopped by {signal.Signals(stopped).name}",
                                  highlight=False)
            raise typer.Exit(EXIT_INTERRUPTED if stopped is None else 128 + stopped) from None
        except GramagentError as exc:
            if not _debug_traceback(exc):
                print_error(exc, as_json=as_json)
            raise typer.Exit(EXIT_ERROR) from None
        except OSError as exc:
            if exc.filename is None:  # not about a file: a bug, as below
                _internal_error(exc, as_json)
            if not _debug_traceback(exc):  # a file named by the user or the system
                print_error(_file_error(exc), as_json=as_json)
            raise typer.Exit(EXIT_ERROR) from None
        except Exception as exc:  # a bug: say so in one line, never a traceback
            _internal_error(exc, as_json)

    return interrupt_on_termination(wrapper)  # type: ignore[return-value]


def _internal_error(exc: Exception, as_json: bool) -> NoReturn:
    """Say that ``exc`` is a bug, in one line (the traceback with ``--debug``); exit 70."""
    if not _debug_traceback(exc):
        if as_json:
            _json_error("InternalError", _describe(exc))
        err_console.print(
            f"[red]internal error[/red] (a bug in gramagent, not in your input): "
            f"{markup_text(_masked(_describe(exc)))}; run with --debug for the traceback",
            markup=True, highlight=False, soft_wrap=True)
    raise typer.Exit(EXIT_INTERNAL) from None


def _file_error(exc: OSError) -> ConfigurationError:
    """The error of an operating-system failure on a file (a name too long, a file that
    cannot be read or written, a device that refuses): the file and the cause, as the
    user's input, not a bug."""
    names = [str(n) for n in (exc.filename, exc.filename2) if n is not None]
    where = " -> ".join(_short_name(n) for n in names)
    return ConfigurationError(f"{where}: {exc.strerror or exc}")


def _short_name(name: str, limit: int = 120) -> str:
    return name if len(name) <= limit else f"{name[:limit]}… ({len(name)} characters)"


def print_error(exc: BaseException, *, as_json: bool = False) -> None:
    """One stderr line for an error: its type and its message, secrets masked; with
    ``as_json`` also one JSON object on stdout, ``{"error": {"type": ..., "message": ...}}``
    (where ``--json`` output is read)."""
    if as_json and exc not in _ANSWERED_IN_JSON:
        _json_error(type(exc).__name__, _describe(exc))
    err_console.print(f"[red]{type(exc).__name__}[/red]: {markup_text(_masked(_describe(exc)))}",
                      markup=True, highlight=False, soft_wrap=True)


_ANSWERED_IN_JSON: weakref.WeakSet[BaseException] = weakref.WeakSet()


def answered_in_json(exc: GramagentError) -> GramagentError:
    """Mark ``exc`` as one whose ``--json`` output was printed already (a turn paused with
    nobody to approve: its response says why): no JSON error object follows it."""
    _ANSWERED_IN_JSON.add(exc)
    return exc


def _json_error(kind: str, message: str) -> None:
    import json

    sys.stdout.write(terminal_text(json.dumps(
        {"error": {"type": kind, "message": _masked(message)}}, ensure_ascii=False)) + "\n")
    sys.stdout.flush()


def serve_metrics_on(port: int) -> ToolMetrics:
    """Serve Prometheus metrics on 127.0.0.1:``port`` for ``--metrics-port`` (imported where a
    command runs, so ``--help`` stays fast).

    Raises:
        ConfigurationError: the port cannot be bound (in use, not allowed, not a port): the
            user's input, not a bug.
    """
    from gramagent._runtime.events import serve_metrics

    return serve_metrics(port)


def read_stdin() -> str:
    """Standard input as text.

    Raises:
        ConfigurationError: the input is not valid UTF-8 (with the offending byte's offset).
    """
    data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read()
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigurationError(
            f"<stdin>: not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None


def _describe(exc: BaseException) -> str:
    text = str(exc)
    if not isinstance(exc, GramagentError):
        text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return text.encode("utf-8", "replace").decode("utf-8")  # a lone surrogate cannot print


def _debug_traceback(exc: BaseException) -> bool:
    """With ``--debug``, print the traceback (secrets masked) and return True."""
    if not _state["debug"]:
        return False
    text = "".join(traceback.format_exception(exc))
    sys.stderr.write(terminal_text(_masked(text)))
    sys.stderr.flush()
    return True


def main() -> None:
    """Entry point for ``python -m gramagent``."""
    app(prog_name="gramagent")


def _masked(text: str) -> str:
    """``text`` with secrets masked. Logging's machinery (gramagent._logs) is imported here,
    when an error is printed, not when the CLI starts (start-up time, issue 12 item 16)."""
    from gramagent._logs import redact

    masked: str = redact(text)
    return masked
