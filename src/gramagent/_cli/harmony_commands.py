"""CLI commands for the Harmony format: ``gramagent harmony parse`` and ``harmony render``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from gramagent._cli._app import app, err_console, handle_errors, read_stdin, require_file
from gramagent._cli._conventions import Group
from gramagent._cli._terminal import terminal_text
from gramagent._files import read_bounded
from gramagent.errors import ConfigurationError

__all__ = ["harmony_app", "parse", "render"]

harmony_app = typer.Typer(cls=Group,
    name="harmony",
    help="The Harmony format of gpt-oss models: parse completions, render prompts.",
    no_args_is_help=True,
)
app.add_typer(harmony_app)


@harmony_app.command()
@handle_errors
def parse(
    file: Annotated[str, typer.Argument(help="Harmony text to parse; '-' reads stdin.",
                                            metavar="FILE")] = "-",
    transcript: Annotated[bool, typer.Option(
        "--transcript",
        help="The text is a whole conversation (every message has its <|start|>), "
             "not a completion after '<|start|>assistant'.",
    )] = False,
    check: Annotated[bool, typer.Option(
        "--check", help="Exit with code 1 when a message is malformed or a call rejected."
    )] = False,
) -> None:
    """Print each parsed message as one JSON line.

    Fields: role, channel, recipient, content_type, content, ended_by; for a tool call name
    and arguments (or error_type and error); for an error item kind, error_type, error, line
    and column.
    """
    import orjson

    from gramagent._models.harmony_parse import parse_harmony

    text = _read(file)
    failed = False
    out = sys.stdout
    for message in parse_harmony(text, role=None if transcript else "assistant"):
        record: dict[str, Any] = message.to_dict()
        if message.error_type is not None:
            failed = True
            line, column = _position(text, message.offset)
            record.update(line=line, column=column)
        out.write(terminal_text(orjson.dumps(record).decode()) + "\n")
    out.flush()
    if check and failed:
        raise typer.Exit(1)


@harmony_app.command()
@handle_errors
def render(
    agent_file: Annotated[Path, typer.Argument(help="The agent's gram file.", metavar="AGENT.gram",
                                              show_default=False)],
    message: Annotated[str, typer.Argument(help="The user message.", metavar="MESSAGE",
                                          show_default=False)],
    agent: Annotated[str | None, typer.Option(
        "--agent", metavar="NAME", help="Agent name, when the file has several."
    )] = None,
    reasoning: Annotated[str, typer.Option(
        "--reasoning", metavar="EFFORT", help="Reasoning effort: low, medium or high."
    )] = "low",
    current_date: Annotated[str | None, typer.Option(
        "--current-date", metavar="DATE", help="'Current date:' for the system message (ISO date)."
    )] = None,
) -> None:
    """Print the prompt the Harmony adapter would send for one user message."""
    from gramagent._messages import UserMessage
    from gramagent._models.base import ModelRequest
    from gramagent._models.harmony import build_prompt
    from gramagent._spec.definition import ToolDefinition
    from gramagent._spec.gram.text import load_agent

    if reasoning not in ("low", "medium", "high"):
        raise ConfigurationError(
            f"unknown reasoning effort {reasoning!r}; expected low, medium or high"
        )
    require_file(agent_file, "an agent's .gram file")
    spec = load_agent(agent_file, agent)
    request = ModelRequest(
        model=spec.model.name,
        instruction=spec.instruction,
        messages=[UserMessage(content=message)],
        tools=[
            ToolDefinition(name=t.name, description=t.description, parameters=t.schema)
            for t in spec.tools
        ],
    )
    sys.stdout.write(terminal_text(
        build_prompt(request, reasoning=reasoning, current_date=current_date)  # type: ignore[arg-type]
    ) + "\n")


def _read(file: str) -> str:
    if file == "-":
        if sys.stdin.isatty():  # nothing piped in: say what it waits for
            err_console.print("[dim]reading Harmony text from stdin (end it with Ctrl-D; or "
                              "pass a FILE: gramagent harmony parse FILE)[/dim]",
                              highlight=False)
        return read_stdin()
    path = Path(file)
    try:
        return read_bounded(path).decode("utf-8")
    except FileNotFoundError:
        raise ConfigurationError(f"{file}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"{file}: cannot read it ({exc})") from None


def _position(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of a character offset."""
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, column
