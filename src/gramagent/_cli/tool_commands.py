"""CLI commands for trying tools without a model: ``gramagent tool`` and ``gramagent tools``.

``gramagent tool NAME 'JSON-ARGS'`` validates the arguments against the tool's schema and runs
it once, printing its result on stdout (an error goes to stderr, exit status 1).
``gramagent tools`` lists the tools of a library with their gram signatures.

Both use the built-in tools unless ``--tools module:library`` names another library. Files the
built-in tools make (parquet tables, charts, the Python session's work directory) live in the
workspace given by ``--session DIR``, or in a temporary one removed when the command ends.
Python variables do not outlive one command: each run starts a new session.
"""

from __future__ import annotations

import importlib
import inspect
import json as jsonlib
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from gramagent._cli._app import app, err_console, handle_errors
from gramagent._cli._terminal import echo
from gramagent.errors import ConfigurationError, ValidationError

if TYPE_CHECKING:
    from gramagent._runtime.library import Tool, ToolLibrary

__all__ = ["list_tools", "run_tool"]

CLI_CONVERSATION = "gramagent._cli"

_TOOLS = typer.Option(None, "--tools", metavar="MODULE:LIBRARY",
                      help="A ToolLibrary or a factory of one (default: the built-in tools).")
_JSON = typer.Option(False, "--json", help="Print JSON instead of text.")


def _library(reference: str | None, session: Path | None) -> ToolLibrary:
    """The library to use; ``session`` goes to factories that take ``session_dir``."""
    from gramagent._agent_session import DEFAULT_TOOLS, load_library

    if session is None:
        return load_library(reference)
    from gramagent._runtime.library import ToolLibrary

    reference = reference or DEFAULT_TOOLS
    load_library(reference)  # checks the reference and reports its problems
    module_name, _, attr = reference.partition(":")
    factory: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        factory = getattr(factory, part)
    try:
        accepts = callable(factory) and "session_dir" in inspect.signature(factory).parameters
    except (TypeError, ValueError):
        accepts = False
    if not accepts:
        raise ConfigurationError(f"--session: {reference!r} is not a factory taking "
                                 "session_dir=, so it cannot use a session directory")
    library = factory(session_dir=session)
    if not isinstance(library, ToolLibrary):
        raise ConfigurationError(f"--tools {reference!r} gave a {type(library).__name__}, "
                                 "expected a ToolLibrary")
    return library


def _lookup(library: ToolLibrary, name: str) -> Tool:
    from gramagent._spec.calls.check import near_names

    found = library.lookup(name)
    if found is None:
        if name in library.unavailable:
            raise ConfigurationError(f"tool {name!r} {library.missing_reason(name)}")
        near = near_names(name, library.names())
        hint = f"; did you mean {', '.join(map(repr, near))}?" if near else ""
        raise ConfigurationError(f"no tool named {name!r} in the library (it has: "
                                 f"{', '.join(library.names()) or 'no tools'}){hint}")
    return found


def _arguments(text: str, tool: Tool) -> dict[str, Any]:
    """Parse and validate ``text`` against ``tool``'s schema."""
    from gramagent import _json as exact_json
    from gramagent._spec.calls.validate import compile_validator

    try:
        arguments = exact_json.loads(text)  # the loop's rules: no NaN, surrogates, deep nesting
    except ValueError as exc:
        raise ValidationError(f"arguments of {tool.name!r} are not valid JSON: {exc}") from None
    if not isinstance(arguments, dict):
        raise ValidationError(f"arguments of {tool.name!r} must be a JSON object, got "
                              f"{type(arguments).__name__}")
    problems = compile_validator(tool.schema).errors(arguments)
    if problems:
        raise ValidationError(f"invalid arguments for {tool.name!r}: " + "; ".join(problems))
    return arguments


@app.command("tool")
@handle_errors
def run_tool(
    name: str = typer.Argument(..., help="The tool to run.", show_default=False,
                               metavar="NAME"),
    arguments: str = typer.Argument("{}", help="Its arguments, as a JSON object.",
                                    metavar="JSON"),
    session: Path | None = typer.Option(  # noqa: B008
        None, "--session", metavar="DIR",
        help="Workspace directory of the built-in tools (data/, work/, charts/), kept after "
             "the command; default: a temporary one."),
    tools: str | None = _TOOLS,
    json: bool = _JSON,
) -> None:
    """Run one tool directly, without a model, and print its result."""
    import asyncio

    from gramagent._runtime.invoke import execute
    from gramagent._runtime.library import ToolContext

    library = _library(tools, session)
    try:
        tool = _lookup(library, name)
        parsed = _arguments(arguments, tool)
        context = ToolContext(conversation_id=CLI_CONVERSATION, run_id=uuid.uuid4().hex,
                              call_id="cli-1", tool=tool.name,
                              state=library.conversation_state(CLI_CONVERSATION))
        outcome = asyncio.run(execute(tool, parsed, context=context, timeout=None))
    finally:
        library.forget()
    if json:
        echo(jsonlib.dumps({"tool": tool.name, "ok": outcome.error_type is None,
                            "output": outcome.output, "error_type": outcome.error_type},
                           ensure_ascii=False))
    elif outcome.error_type is None:
        echo(outcome.output)
    else:
        err_console.print(outcome.output, markup=False, highlight=False, soft_wrap=True)
    if outcome.error_type is not None:
        raise typer.Exit(1)


@app.command("tools")
@handle_errors
def list_tools(tools: str | None = _TOOLS, json: bool = _JSON) -> None:
    """List the tools of a library with their gram signatures and descriptions."""
    library = _library(tools, None)
    entries: list[dict[str, Any]] = []
    for tool in library:
        signature = tool.signature.to_gram() if tool.signature is not None else None
        entries.append({"name": tool.name, "description": tool.description,
                        "signature": signature, "schema": tool.schema})
    if json:
        echo(jsonlib.dumps(entries, ensure_ascii=False, indent=2))
        return
    for i, entry in enumerate(entries):
        if i:
            echo("")
        text = entry["signature"] or "(no gram signature: see --json for its schema)"
        echo(f"{entry['name']} :: " + str(text).replace("\n", "\n    "))
        echo("    " + " ".join(str(entry["description"]).split()))
    if library.unavailable:
        # Diagnostics, not results: the listing on stdout stays what is there.
        for name, reason in library.unavailable.items():
            err_console.print(f"not available: {name}: {reason}", markup=False,
                              highlight=False, soft_wrap=True)
