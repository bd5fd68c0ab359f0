"""CLI commands of the spec language: ``check``, ``fmt``, ``schema``, ``signature``.

Results go to stdout; diagnostics go to stderr as ``file:line:col: message`` lines, one per
problem, and make the command exit with status 1.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

import typer

from gramagent._cli._app import app, handle_errors, read_stdin
from gramagent._spec.gram import format_file, load_file, to_gram
from gramagent._spec.model import ToolSpec
from gramagent._spec.signature import (
    format_signature,
    parse_signature,
    schema_to_signature,
    signature_to_schema,
)
from gramagent.errors import Diagnostic, SchemaError, SpecError

__all__ = ["check", "fmt", "schema", "signature"]


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _report(problems: list[Diagnostic]) -> None:
    """Print one file:line:col: message line per problem and a count; exit with status 1."""
    for problem in problems:
        typer.echo(str(problem), err=True)
    typer.echo(f"{_plural(len(problems), 'problem')} found", err=True)
    raise typer.Exit(1)


@app.command()
@handle_errors
def check(
    files: list[Path] = typer.Argument(..., help="Gram files to validate."),  # noqa: B008
) -> None:
    """Validate gram files; print every problem as file:line:col: message."""
    problems: list[Diagnostic] = []
    agents = tools = 0
    for file in files:
        try:
            document = load_file(file)
        except SpecError as exc:
            problems.extend(exc.diagnostics)
            continue
        agents += len(document.agents)
        specs = [*document.tools, *(t for a in document.agents for t in a.tools)]
        tools += len({id(t) for t in specs})  # a referenced tool is the stand-alone one
    if problems:
        _report(problems)
    typer.echo(f"OK: {_plural(len(files), 'file')}, {_plural(agents, 'agent')}, "
               f"{_plural(tools, 'tool')}")


@app.command()
@handle_errors
def fmt(
    file: Path = typer.Argument(..., help="The gram file to format."),  # noqa: B008
    write: bool = typer.Option(False, "--write", "-w",
                               help="Rewrite the file in place (atomically)."),
    check_only: bool = typer.Option(False, "--check",
                                    help="Print nothing; exit 1 if the file is not canonical."),
    force: bool = typer.Option(False, "--force",
                               help="With --write: rewrite even if a comment would be lost "
                                    "(fmt places every comment gram allows; this is a "
                                    "safeguard)."),
) -> None:
    """Print the canonical gram of a file (or rewrite it with --write).

    Every comment is kept next to the element it annotates: between patterns, between the
    elements of a pattern, between and inside the nodes of a signature, and inside records
    (written one entry a line). Should a comment find no place, it is named on stderr and
    --write refuses to rewrite the file unless --force is given.
    """
    try:
        formatted = format_file(file)
    except SpecError as exc:
        _report(list(exc.diagnostics))
    original = file.read_bytes()
    text = formatted.text
    if check_only:
        if text.encode() != original:
            typer.echo(f"{file}: not in canonical form", err=True)
            raise typer.Exit(1)
        return
    if write and text.encode() == original:
        typer.echo(f"{file}: already canonical", err=True)
        return
    if write and formatted.dropped and not force:
        for dropped in formatted.dropped:
            typer.echo(str(dropped), err=True)
        count = len(formatted.dropped)
        typer.echo(f"{file}: not rewritten: {_plural(count, 'comment')} would be lost; move "
                   f"{'it' if count == 1 else 'them'} next to a pattern or an element, or use "
                   f"--force to drop {'it' if count == 1 else 'them'}", err=True)
        raise typer.Exit(1)
    for dropped in formatted.dropped:
        typer.echo(f"warning: {dropped}", err=True)
    if not write:
        typer.echo(text, nl=False)
        return
    _replace(file, text.encode())
    typer.echo(f"{file}: formatted", err=True)


def _replace(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: a temporary file beside it, then a rename."""
    mode = stat.S_IMODE(path.stat().st_mode)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@app.command()
@handle_errors
def schema(
    signature: str = typer.Argument(..., help="A gram signature, e.g. "
                                              "'(name::String)==>(::String)'."),
    strict: bool = typer.Option(False, "--strict",
                                help="Compile for OpenAI strict mode; changes go to stderr."),
) -> None:
    """Print the JSON Schema of a gram type signature."""
    result: Any = signature_to_schema(parse_signature(signature, file="<signature>"))
    ok = True
    if strict:
        from gramagent._spec.strict import strict_schema  # only this option needs it

        compiled = strict_schema(result)
        for change in compiled.changes:
            typer.echo(f"strict: {change}", err=True)
        for problem in compiled.problems:
            typer.echo(f"strict: cannot express {problem}", err=True)
        result, ok = compiled.schema, compiled.ok
    typer.echo(json.dumps(result, indent=2, ensure_ascii=False))
    if not ok:
        raise typer.Exit(1)


@app.command()
@handle_errors
def signature(
    file: str = typer.Argument(..., help="A JSON file ('-' for stdin): an arguments schema, "
                                         "or a function/tool definition with 'parameters'."),
    tool: bool = typer.Option(False, "--tool",
                              help="Print a whole [name:Tool {...} | ...] pattern (needs a "
                                   "function definition with a name and description)."),
) -> None:
    """Print the gram signature of a JSON Schema."""
    name = "<stdin>" if file == "-" else file
    text = read_stdin() if file == "-" else _read(Path(file))
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecError([Diagnostic(f"invalid JSON: {exc.msg}", name, exc.lineno,
                                    exc.colno)]) from None
    except RecursionError:  # far deeper than any schema the notation takes (32 levels)
        raise SpecError([Diagnostic("the JSON is nested too deeply to read", name)]) from None
    function = _function(data)
    params: Any = function.get("parameters") if function is not None else data
    sig = schema_to_signature(params)
    if not tool:
        typer.echo(format_signature(sig))
        return
    if function is None or not isinstance(function.get("name"), str):
        raise SchemaError("--tool needs a function definition with a name, description and "
                          "parameters", keyword="name")
    spec = ToolSpec.create(function["name"], str(function.get("description") or ""), sig)
    typer.echo(to_gram(spec), nl=False)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError([Diagnostic(f"cannot read the file: {exc.strerror or exc}",
                                    str(path))]) from None
    except UnicodeDecodeError as exc:
        raise SpecError([Diagnostic(f"not valid UTF-8 (byte offset {exc.start})",
                                    str(path))]) from None


def _function(data: Any) -> dict[str, Any] | None:
    """The function definition in ``data`` (plain, or OpenAI's ``{"type": "function"}``)."""
    if not isinstance(data, dict):
        return None
    if data.get("type") == "function" and isinstance(data.get("function"), dict):
        function: dict[str, Any] = data["function"]
        return function
    if "parameters" in data and "properties" not in data:
        return data
    return None
