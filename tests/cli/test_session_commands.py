"""``gramagent chat --session NAME`` resumes a stored conversation; ``gramagent sessions
list|show|delete`` manage them. The store lives under GRAMAGENT_DATA_DIR (a temp folder)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gramagent._cli import app
from gramagent._runtime.sessions import SessionStore
from gramagent.testing import ScriptedServer, reply

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "examples" / "hello_world.gram"


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> CliRunner:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("GRAMAGENT_DATA_DIR", str(tmp_path / "data"))
    return CliRunner()


def test_chat_session_resumes_in_a_new_command(runner: CliRunner, tmp_path: Path) -> None:
    with ScriptedServer([reply("Noted: your name is Ada."), reply("You are Ada.")]) as srv:
        first = runner.invoke(app, ["chat", str(HELLO), "--base-url", srv.base_url,
                                    "--session", "ada"], input="My name is Ada.\n")
        assert first.exit_code == 0, first.stderr
        second = runner.invoke(app, ["chat", str(HELLO), "--base-url", srv.base_url,
                                     "--session", "ada"], input="Who am I?\n")
        assert second.exit_code == 0, second.stderr
        assert "You are Ada." in second.stdout
        sent = [m["content"] for m in srv.requests[1].body["messages"]
                if m["role"] in ("user", "assistant")]
        assert sent == ["My name is Ada.", "Noted: your name is Ada.", "Who am I?"]
    stored = SessionStore(tmp_path / "data" / "sessions.sqlite3").load("ada")
    assert [m.kind for m in stored or ()] == ["user", "assistant"] * 2

    listed = runner.invoke(app, ["sessions", "list", "--json"])
    assert listed.exit_code == 0
    (info,) = json.loads(listed.stdout)
    assert (info["name"], info["agent"], info["messages"]) == ("ada", "hello_world_agent", 4)
    shown = runner.invoke(app, ["sessions", "show", "ada"])
    assert shown.exit_code == 0 and "Who am I?" in shown.stdout and "You are Ada." in shown.stdout
    deleted = runner.invoke(app, ["sessions", "delete", "ada"])
    assert deleted.exit_code == 0
    gone = runner.invoke(app, ["sessions", "show", "ada"])
    assert gone.exit_code == 1 and "no session named 'ada'" in gone.stderr
    assert "Traceback" not in gone.stderr


@pytest.mark.parametrize("max_turns", [1, 3])
def test_a_session_stops_at_max_turns_and_keeps_every_message(
        runner: CliRunner, tmp_path: Path, max_turns: int) -> None:
    """--max-turns N: the session's turn N+1 ends with one LimitExceeded line (exit 1), no
    request sent; the stored session keeps every answered turn and the refused message."""
    with ScriptedServer([reply("Noted.")], loop=True) as srv:
        for turn in range(max_turns + 1):
            done = runner.invoke(app, ["run", str(HELLO), f"message {turn}", "--base-url",
                                       srv.base_url, "--session", "long", "--max-turns",
                                       str(max_turns)])
            if turn < max_turns:
                assert done.exit_code == 0, done.stderr
        sent = len(srv.requests)
    assert done.exit_code == 1
    assert f"the conversation has {max_turns + 1} user messages, more than {max_turns}" in (
        done.stderr)
    assert f"max_turns={max_turns}" in done.stderr and "Traceback" not in done.stderr
    assert sent == max_turns
    stored = SessionStore(tmp_path / "data" / "sessions.sqlite3").load("long")
    assert [m.kind for m in stored or ()] == ["user", "assistant"] * max_turns + ["user"]


def test_max_context_bytes_bounds_what_a_session_sends(runner: CliRunner) -> None:
    with ScriptedServer([reply("Noted.")], loop=True) as srv:
        first = runner.invoke(app, ["run", str(HELLO), "x" * 60, "--base-url", srv.base_url,
                                    "--session", "big", "--max-context-bytes", "100"])
        assert first.exit_code == 0, first.stderr
        second = runner.invoke(app, ["run", str(HELLO), "y" * 60, "--base-url",
                                     srv.base_url, "--session", "big",
                                     "--max-context-bytes", "100"])
        assert second.exit_code == 1
        assert "holds 126 bytes of messages, more than a request may carry (100)" in (
            second.stderr)
        assert len(srv.requests) == 1
