"""CLI commands of the spec language: ``check``, ``fmt``, ``schema``, ``signature``.

Results go to stdout; diagnostics go to stderr as ``file:line:col: message`` lines, one per
problem, and make the command exit with status 1.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import typer

from gramagent._cli._app import app, handle_errors, read_stdin, require_file
from gramagent._cli._terminal import echo
from gramagent._files import read_bounded
from gramagent.errors import ConfigurationError, Diagnostic, SchemaError, SpecError

__all__ = ["check", "examples", "fmt", "schema", "signature"]


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _report(problems: list[Diagnostic]) -> NoReturn:
    """Print one file:line:col: message line per problem and a count; exit with status 1."""
    for problem in problems:
        echo(str(problem), err=True)
    echo(f"{_plural(len(problems), 'problem')} found", err=True)
    raise typer.Exit(1)


@app.command()
@handle_errors
def check(
    files: list[Path] = typer.Argument(  # noqa: B008
        ..., help="Gram files to validate.", metavar="FILE", show_default=False),
) -> None:
    """Validate gram files; print every problem as file:line:col: message."""
    from gramagent._spec.gram.text import load_file

    problems: list[Diagnostic] = []
    agents = tools = experiments = 0
    for file in files:
        try:
            document = _agent_file(file, load_file)
        except SpecError as exc:
            problems.extend(exc.diagnostics)
            continue
        if document is None:  # an experiment file: checked as one
            found = _experiment_problems(file)
            problems.extend(found)
            experiments += not found
            continue
        agents += len(document.agents)
        specs = [*document.tools, *(t for a in document.agents for t in a.tools)]
        tools += len({id(t) for t in specs})  # a referenced tool is the stand-alone one
    if problems:
        _report(problems)
    ran = f", {_plural(experiments, 'experiment')}" if experiments else ""
    echo(f"OK: {_plural(len(files), 'file')}, {_plural(agents, 'agent')}, "
               f"{_plural(tools, 'tool')}{ran}")


def _regular(path: Path) -> bool:
    """Whether ``path`` is a regular file (not a pipe, a device, a directory, or nothing)."""
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except (OSError, ValueError):
        return False


_Read = TypeVar("_Read")


def _agent_file(file: Path, read: Callable[[Path], _Read]) -> _Read | None:
    """``read(file)`` of an agent or tool file, None for an experiment file: one whose
    top-level pattern is ``[name:Experiment ...]``, which the agent reader refuses. ``check``
    and ``fmt`` both ask here, so they agree on what a file is.

    Raises:
        SpecError: The agent reader's problems, for a file that is not an experiment file.
    """
    try:
        return read(file)
    except SpecError:
        if not _is_experiment(file):
            raise
        return None


def _is_experiment(file: Path) -> bool:
    if not _regular(file):  # a pipe is read once: by the agent reader
        return False
    try:
        from gramagent.experiments._gramfile import is_experiment_file
    except ImportError:  # without the experiments' modules: read as agent files are
        return False
    return is_experiment_file(file)


def _experiment_problems(file: Path) -> list[Diagnostic]:
    """The problems of an experiment file (``[name:Experiment ...]``, read by
    ``gramagent.experiments``: its agent, dataset, variants and evaluators)."""
    from gramagent.experiments._gramfile import load_experiment

    try:
        load_experiment(file)
    except SpecError as exc:  # ExperimentError is one
        return list(exc.diagnostics)
    return []


@app.command()
@handle_errors
def fmt(
    file: Path = typer.Argument(  # noqa: B008
        ..., help="The gram file to format: an agent or tool file, or an experiment file.",
        metavar="FILE", show_default=False),
    write: bool = typer.Option(False, "--write", "-w",
                               help="Rewrite the file in place (atomically)."),
    check_only: bool = typer.Option(False, "--check",
                                    help="Print nothing if the file is canonical; else name it on "
                                         "stderr and exit 1."),
    force: bool = typer.Option(False, "--force",
                               help="With --write: rewrite even if a comment would be lost "
                                    "(fmt places every comment gram allows; this is a "
                                    "safeguard)."),
) -> None:
    """Print the canonical gram of a file (or rewrite it with --write).

    Formats agent and tool files, and experiment files ([name:Experiment {...} | variants,
    evaluators], keys in the documented order; only the file itself is read: `gramagent
    check` also reads the agent and cases it names). Every comment is kept next to the
    element it annotates: between patterns, between the elements of a pattern, between and
    inside the nodes of a signature, and inside records (written one entry a line). Should a
    comment find no place, it is named on stderr and --write refuses to rewrite the file
    unless --force is given.
    """
    from gramagent._spec.gram.text import format_file

    require_file(file, "a .gram file to format")  # read twice, and maybe rewritten
    try:
        formatted = _agent_file(file, format_file)
        if formatted is None:
            from gramagent.experiments._gramformat import format_experiment_file

            formatted = format_experiment_file(file)
    except SpecError as exc:  # ExperimentError is one
        _report(list(exc.diagnostics))
    original = file.read_bytes()
    text = formatted.text
    if check_only:
        if text.encode() != original:
            echo(f"{file}: not in canonical form", err=True)
            raise typer.Exit(1)
        return
    if write and text.encode() == original:
        echo(f"{file}: already canonical", err=True)
        return
    if write and formatted.dropped and not force:
        for dropped in formatted.dropped:
            echo(str(dropped), err=True)
        count = len(formatted.dropped)
        echo(f"{file}: not rewritten: {_plural(count, 'comment')} would be lost; move "
                   f"{'it' if count == 1 else 'them'} next to a pattern or an element, or use "
                   f"--force to drop {'it' if count == 1 else 'them'}", err=True)
        raise typer.Exit(1)
    for dropped in formatted.dropped:
        echo(f"warning: {dropped}", err=True)
    if not write:
        echo(text, nl=False)
        return
    _replace(file, text.encode())
    echo(f"{file}: formatted", err=True)


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
    source: str = typer.Argument(..., help="A gram signature, e.g. "
                                           "'(name::String)==>(::String)' (type patterns may "
                                           "follow it, separated by commas or spaces), or a "
                                           "gram file whose tools' schemas to print.",
                                 metavar="SIGNATURE|FILE", show_default=False),
    tool: str | None = typer.Option(None, "--tool", metavar="NAME",
                                    help="With a FILE: print this tool's schema only."),
    strict: bool = typer.Option(False, "--strict",
                                help="Compile for OpenAI strict mode; changes go to stderr."),
) -> None:
    """Print the JSON Schema of a gram type signature, or of the tools of a gram file.

    For a file, the result is one JSON object: tool name -> schema (or, with --tool, that
    tool's schema alone).
    """
    from gramagent._spec.signature import parse_signature, signature_to_schema

    if source.lstrip().startswith(("(", "[")):
        if tool is not None:
            raise ConfigurationError("--tool NAME picks a tool of a gram FILE; the argument "
                                     "is a signature")
        schemas = {"": signature_to_schema(parse_signature(source, file="<signature>"))}
    else:
        schemas = _file_schemas(Path(source), tool)
    ok = True
    if strict:
        from gramagent._spec.schema.strict import strict_schema  # only this option needs it

        for name, plain in schemas.items():
            compiled = strict_schema(plain)
            where = f"{name}: " if name else ""
            for change in compiled.changes:
                echo(f"strict: {where}{change}", err=True)
            for problem in compiled.problems:
                echo(f"strict: {where}cannot express {problem}", err=True)
            schemas[name] = compiled.schema
            ok = ok and compiled.ok
    single = "" in schemas or tool is not None  # a signature, or the one tool asked for
    result: Any = next(iter(schemas.values())) if single else schemas
    echo(json.dumps(result, indent=2, ensure_ascii=False))
    if not ok:
        raise typer.Exit(1)


def _file_schemas(path: Path, tool: str | None) -> dict[str, Any]:
    """The schemas of the tools of a gram file (stand-alone and agents'), by name."""
    from gramagent._spec.gram.text import load_file

    require_file(path, "a gram file or a signature such as '(x::String)==>(::String)'")
    document = load_file(path)
    specs = {t.name: t for t in [*document.tools, *(t for a in document.agents
                                                    for t in a.tools)]}
    if tool is None:
        return {name: spec.schema for name, spec in specs.items()}
    if tool not in specs:
        from gramagent._spec.calls.check import near_names

        near = near_names(tool, specs)
        hint = f"; did you mean {', '.join(map(repr, near))}?" if near else ""
        raise ConfigurationError(f"{path} has no tool {tool!r} (it has: "
                                 f"{', '.join(specs) or 'no tools'}){hint}")
    return {tool: specs[tool].schema}


@app.command()
@handle_errors
def signature(
    file: str = typer.Argument(..., help="A JSON file ('-' for stdin): an arguments schema, "
                                         "or a function/tool definition with 'parameters'.",
                               metavar="SCHEMA.json", show_default=False),
    tool: bool = typer.Option(False, "--tool",
                              help="Print a whole [name:Tool {...} | ...] pattern (needs a "
                                   "function definition with a name and description)."),
) -> None:
    """Print the gram signature of a JSON Schema."""
    from gramagent._spec.gram.text import to_gram
    from gramagent._spec.model import ToolSpec
    from gramagent._spec.signature import format_signature, schema_to_signature

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
        echo(format_signature(sig))
        return
    if function is None or not isinstance(function.get("name"), str):
        raise SchemaError("--tool needs a function definition with a name, description and "
                          "parameters", keyword="name")
    spec = ToolSpec.create(function["name"], str(function.get("description") or ""), sig)
    echo(to_gram(spec), nl=False)


def _read(path: Path) -> str:
    try:
        return read_bounded(path).decode("utf-8")
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


@app.command()
@handle_errors
def examples() -> None:
    """Print the directory of the example agents (installed with gramagent), e.g.
    gramagent run "$(gramagent examples)/hello_world.gram" "Hi, I'm Alice"."""
    from gramagent._install import examples_dir

    echo(str(examples_dir()))
