"""``gramagent logs``: the turns of past runs kept in the session store (``run`` and ``chat``
with ``--session``), newest first; ``logs show SESSION:N`` prints one turn whole: the message,
each tool call with its arguments and result, the answer (secrets masked)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import typer

from gramagent._cli._app import app, handle_errors, out_console
from gramagent._cli._conventions import Group
from gramagent._cli._terminal import echo, markup_text, terminal_text
from gramagent.errors import ConfigurationError

if TYPE_CHECKING:
    from gramagent._messages import Conversation

__all__ = ["Turn", "list_logs", "logs_app", "show_log", "turns"]

logs_app = typer.Typer(cls=Group, name="logs", invoke_without_command=True,
                       help="The turns of past runs kept with --session, newest first "
                            "(gramagent logs show SESSION:N for one).")
app.add_typer(logs_app)

_JSON = typer.Option(False, "--json", help="Print JSON instead of text.")
_WIDE = 60
"""Characters of a message or an answer the list shows (``logs show`` shows them whole)."""


@dataclass
class Turn:
    """One user message and what the run did with it."""

    session: str
    number: int
    """From 1, in the session's order."""
    agent: str | None
    updated: float
    """When the session was last saved (seconds since the epoch)."""
    message: str
    calls: list[dict[str, Any]] = field(default_factory=list)
    """``{"tool", "arguments", "result", "is_error"}`` of each call, in order."""
    answer: str = ""
    interrupted: bool = False

    @property
    def id(self) -> str:
        """``SESSION:N``, as ``logs show`` takes it."""
        return f"{self.session}:{self.number}"

    def to_dict(self) -> dict[str, Any]:
        """The turn as JSON data (secrets masked)."""
        from gramagent._logs import redact

        data = redact({
            "id": self.id, "session": self.session, "turn": self.number, "agent": self.agent,
            "updated": datetime.fromtimestamp(self.updated).isoformat(timespec="seconds"),
            "message": self.message, "tool_calls": self.calls, "answer": self.answer,
            "interrupted": self.interrupted})
        assert isinstance(data, dict)  # redact copies a mapping as a dict
        return data


def turns(session: str, agent: str | None, updated: float,
          conversation: Conversation) -> list[Turn]:
    """The turns of a stored conversation: each user message opens one."""
    from gramagent._messages import AssistantMessage, ToolResultMessage, UserMessage

    out: list[Turn] = []
    calls: dict[str, dict[str, Any]] = {}
    for message in conversation:
        if isinstance(message, UserMessage):
            out.append(Turn(session=session, number=len(out) + 1, agent=agent,
                            updated=updated, message=message.content))
        elif not out:
            continue
        elif isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                calls[call.id] = {"tool": call.name, "arguments": call.arguments,
                                  "result": None, "is_error": False}
                out[-1].calls.append(calls[call.id])
            if message.content:
                out[-1].answer = message.content
                out[-1].interrupted = message.interrupted
        elif isinstance(message, ToolResultMessage) and message.call_id in calls:
            calls[message.call_id].update(result=message.content, is_error=message.is_error)
    return out


def _all_turns() -> list[Turn]:
    from gramagent._runtime.sessions import SessionStore

    store = SessionStore()
    found: list[Turn] = []
    for info in store.list():
        conversation = store.load(info.name)
        if conversation is not None:
            found.extend(reversed(turns(info.name, info.agent, info.updated, conversation)))
    return found


def _line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _WIDE else flat[: _WIDE - 1] + "…"


@logs_app.callback()
@handle_errors
def list_logs(
    ctx: typer.Context,
    count: int = typer.Option(20, "-n", "--count", min=1, metavar="N",
                              help="How many turns, newest first."),
    json: bool = _JSON,
) -> None:
    """The turns of past runs kept with --session, newest first."""
    if ctx.invoked_subcommand is not None:
        return
    from gramagent import _json as exact_json
    from gramagent._logs import redact

    shown = _all_turns()[:count]
    if json:
        sys.stdout.write(terminal_text(exact_json.dumps([t.to_dict() for t in shown])) + "\n")
        return
    if not shown:
        from gramagent._runtime.sessions import default_store_path

        echo(f"no turns in {default_store_path()} (run or chat with --session NAME "
             "keeps them)", err=True)
        return
    from rich.table import Table

    table = Table("turn", "agent", "saved", "message", "tools", "answer", box=None,
                  pad_edge=False)
    for turn in shown:
        tools = ", ".join(dict.fromkeys(c["tool"] for c in turn.calls))
        table.add_row(*(terminal_text(str(redact(v))) for v in (
            turn.id, turn.agent or "", datetime.fromtimestamp(turn.updated)
            .strftime("%Y-%m-%d %H:%M"), _line(turn.message), tools, _line(turn.answer))))
    out_console().print(table, markup=False)


@logs_app.command("show")
@handle_errors
def show_log(
    turn_id: str = typer.Argument(..., metavar="SESSION:N",
                                  help="The turn (as gramagent logs lists it)."),
    json: bool = _JSON,
) -> None:
    """One turn whole: the message, each tool call and its result, the answer."""
    from gramagent import _json as exact_json
    from gramagent._logs import redact
    from gramagent._runtime.sessions import SessionStore

    session, sep, number = turn_id.rpartition(":")
    if not sep or not session or not number.isdigit():
        raise ConfigurationError(f"{turn_id!r}: expected SESSION:N, e.g. mychat:1 (see "
                                 "gramagent logs)")
    store = SessionStore()
    info = next((s for s in store.list() if s.name == session), None)
    conversation = store.load(session)
    if info is None or conversation is None:
        raise ConfigurationError(f"no session named {session!r} (see gramagent logs)")
    found = turns(session, info.agent, info.updated, conversation)
    if not 1 <= int(number) <= len(found):
        raise ConfigurationError(f"session {session!r} has {len(found)} turns, not a turn "
                                 f"{number}")
    turn = found[int(number) - 1]
    if json:
        sys.stdout.write(terminal_text(exact_json.dumps(turn.to_dict())) + "\n")
        return

    def plain(text: object) -> str:
        return markup_text(redact(text))

    console = out_console(soft_wrap=True)
    console.print(f"[dim]{plain(turn.id)} · {plain(turn.agent or '')}[/dim]")
    console.print("[bold green]you>[/bold green] " + plain(turn.message))
    for call in turn.calls:
        console.print(f"[dim]→ {plain(call['tool'])} {plain(call['arguments'])}[/dim]")
        mark = "[red]✗[/red]" if call["is_error"] else "←"
        console.print(f"[dim]{mark} {plain(call['result'])}[/dim]")
    if turn.answer:
        console.print(plain(turn.answer)
                      + (" [dim](interrupted)[/dim]" if turn.interrupted else ""))
