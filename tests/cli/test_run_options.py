"""``run`` and ``chat`` take the same options, declared once."""

from __future__ import annotations

from pathlib import Path

import typer.main
from typer.testing import CliRunner

from gramagent._cli import app
from gramagent.testing import ScriptedServer, reply


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


def test_tool_call_mode_reaches_the_model() -> None:
    """``--tool-call-mode constrained`` sends the grammar (a JSON schema response format) to
    an OpenAI-compatible server; a format without modes says so, an unknown mode is a usage
    error."""
    hello = str(Path(__file__).resolve().parents[2] / "examples" / "hello_world.gram")
    formats = []
    for mode in ([], ["--tool-call-mode", "CONSTRAINED"]):
        with ScriptedServer([reply("Hello there")]) as server:
            done = CliRunner().invoke(app, ["run", hello, "Hi", "--base-url", server.base_url,
                                            *mode])
            assert done.exit_code == 0 and done.stdout.strip() == "Hello there"
            formats.append(server.requests[0].body.get("response_format", {}).get("type"))
    assert formats == [None, "json_schema"]
    wrong = CliRunner().invoke(app, ["run", hello, "Hi", "--tool-call-mode", "hybrid",
                                     "--api", "responses", "--base-url", "http://127.0.0.1:9/v1"])
    assert wrong.exit_code == 1 and "not --api responses" in wrong.stderr
    bogus = CliRunner().invoke(app, ["run", hello, "Hi", "--tool-call-mode", "bogus"])
    assert bogus.exit_code == 2 and "is not one of" in bogus.stderr
