"""``gramagent sessions list|show|delete``: the stored conversations of ``--session``."""

from __future__ import annotations

import sys
from datetime import datetime

import orjson
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gramagent._cli._app import app, handle_errors
from gramagent._logs import redact
from gramagent._messages import AssistantMessage, ToolResultMessage, UserMessage
from gramagent._runtime.sessions import SessionStore
from gramagent.errors import ConfigurationError

__all__ = ["delete", "list_sessions", "sessions_app", "show"]

sessions_app = typer.Typer(
    name="sessions",
    help="Stored conversations (gramagent chat AGENT.gram --session NAME).",
    no_args_is_help=True,
)
app.add_typer(sessions_app)

_JSON = typer.Option(False, "--json", help="Print JSON instead of text.")


def _when(seconds: float) -> str:
    return datetime.fromtimestamp(seconds).strftime("%Y-%m-%d %H:%M")


@sessions_app.command("list")
@handle_errors
def list_sessions(json: bool = _JSON) -> None:
    """The stored sessions, most recently used first."""
    store = SessionStore()
    sessions = store.list()
    if json:
        sys.stdout.write(orjson.dumps([{
            "name": s.name, "agent": s.agent, "messages": s.messages, "created": s.created,
            "updated": s.updated} for s in sessions]).decode() + "\n")
        return
    if not sessions:
        Console(stderr=True).print(f"[dim]no sessions in {store.path}[/dim]", highlight=False)
        return
    table = Table("name", "agent", "messages", "updated", box=None, pad_edge=False)
    for s in sessions:
        table.add_row(s.name, s.agent or "", str(s.messages), _when(s.updated))
    Console(highlight=False).print(table)


@sessions_app.command()
@handle_errors
def show(name: str = typer.Argument(..., help="The session."), json: bool = _JSON) -> None:
    """A session's conversation, message by message (secrets masked)."""
    conversation = SessionStore().load(name)
    if conversation is None:
        raise ConfigurationError(f"no session named {name!r} (see gramagent sessions list)")
    if json:
        sys.stdout.write(orjson.dumps(redact(conversation.to_list())).decode() + "\n")
        return
    console = Console(highlight=False, soft_wrap=True)
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


def _plain(text: str) -> str:
    return escape(str(redact(text)))


@sessions_app.command()
@handle_errors
def delete(name: str = typer.Argument(..., help="The session.")) -> None:
    """Delete a session and its conversation."""
    if not SessionStore().delete(name):
        raise ConfigurationError(f"no session named {name!r} (see gramagent sessions list)")
    Console(stderr=True).print(f"[dim]deleted session {name}[/dim]", highlight=False)
