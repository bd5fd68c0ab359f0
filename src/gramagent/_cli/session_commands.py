"""``gramagent sessions list|show|delete``: the stored conversations of ``--session``."""

from __future__ import annotations

import sys
from datetime import datetime
from typing import TYPE_CHECKING

import typer

from gramagent._cli._app import app, err_console, handle_errors, out_console
from gramagent._cli._conventions import Group
from gramagent._cli._terminal import markup_text, terminal_text
from gramagent.errors import ConfigurationError

if TYPE_CHECKING:
    from gramagent._runtime.sessions import SessionStore

# The store, the messages and the masking are imported where a command runs, not when the CLI
# starts: `gramagent --help` stays fast (issue 12 item 16; tests/cli/test_help.py).

__all__ = ["delete", "list_sessions", "sessions_app", "show"]

sessions_app = typer.Typer(cls=Group,
    name="sessions",
    help="Stored conversations (gramagent chat AGENT.gram --session NAME).",
    no_args_is_help=True,
)
app.add_typer(sessions_app)

_JSON = typer.Option(False, "--json", help="Print JSON instead of text.")


def _store() -> SessionStore:
    from gramagent._runtime.sessions import SessionStore

    return SessionStore()


def _when(seconds: float) -> str:
    return datetime.fromtimestamp(seconds).strftime("%Y-%m-%d %H:%M")


@sessions_app.command("list")
@handle_errors
def list_sessions(json: bool = _JSON) -> None:
    """The stored sessions, most recently used first."""
    from gramagent import _json as exact_json

    store = _store()
    sessions = store.list()
    if json:
        sys.stdout.write(terminal_text(exact_json.dumps([{
            "name": s.name, "agent": s.agent, "messages": s.messages, "created": s.created,
            "updated": s.updated} for s in sessions])) + "\n")
        return
    if not sessions:
        err_console.print(f"[dim]no sessions in {markup_text(store.path)}[/dim]",
                          highlight=False)
        return
    from rich.table import Table

    table = Table("name", "agent", "messages", "updated", box=None, pad_edge=False)
    for s in sessions:
        # names come from whoever ran a turn: shown as text, never as markup or escapes
        table.add_row(_plain(s.name), _plain(s.agent or ""), str(s.messages), _when(s.updated))
    out_console().print(table)


@sessions_app.command()
@handle_errors
def show(name: str = typer.Argument(..., help="The session."), json: bool = _JSON) -> None:
    """A session's conversation, message by message (secrets masked)."""
    from gramagent import _json as exact_json
    from gramagent._logs import redact
    from gramagent._messages import AssistantMessage, ToolResultMessage, UserMessage

    conversation = _store().load(name)
    if conversation is None:
        raise ConfigurationError(f"no session named {name!r} (see gramagent sessions list)")
    if json:
        sys.stdout.write(terminal_text(exact_json.dumps(redact(conversation.to_list()))) + "\n")
        return
    console = out_console(soft_wrap=True)
    for message in conversation:
        if isinstance(message, UserMessage):
            console.print("[bold green]you>[/bold green] " + _plain(message.content))
        elif isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                console.print(f"[dim]→ {_plain(call.name)} {_plain(call.arguments)}[/dim]")
            if message.content:
                mark = " [dim](interrupted)[/dim]" if message.interrupted else ""
                console.print(_plain(message.content) + mark)
        elif isinstance(message, ToolResultMessage):
            console.print(f"[dim]← {_plain(message.name)}: {_plain(message.content)}[/dim]")
    info = next((s for s in _store().list() if s.name == name), None)
    agent = f" (the file of agent {info.agent})" if info is not None and info.agent else ""
    for call in conversation.unanswered_calls():
        console.print(f"[yellow]… {_plain(call.name)} waits for approval (call "
                      f"{_plain(call.id)}): continue with gramagent chat AGENT.gram --session "
                      f"{_plain(name)}{_plain(agent)}[/yellow]")


def _plain(text: str) -> str:
    from gramagent._logs import redact

    return markup_text(redact(text))


@sessions_app.command()
@handle_errors
def delete(name: str = typer.Argument(..., help="The session.")) -> None:
    """Delete a session and its conversation."""
    if not _store().delete(name):
        raise ConfigurationError(f"no session named {name!r} (see gramagent sessions list)")
    err_console.print(f"[dim]deleted session {_plain(name)}[/dim]", highlight=False)
