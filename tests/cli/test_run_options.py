"""``run`` and ``chat`` take the same options, declared once."""

from __future__ import annotations

import typer.main

from gramagent._cli import app


def _params(name: str) -> dict[str, tuple[str, ...]]:
    command = typer.main.get_command(app)
    sub = command.commands[name]  # type: ignore[attr-defined]
    return {p.name: tuple(p.opts) for p in sub.params}


def test_run_and_chat_share_every_option() -> None:
    """The same names and flags; run adds only its messages."""
    run, chat = _params("run"), _params("chat")
    assert set(run) - set(chat) == {"messages"}
    assert {k: v for k, v in run.items() if k != "messages"} == chat
    assert chat["verbose"] == ("-v", "--verbose") and "agent_file" in chat
