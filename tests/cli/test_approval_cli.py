"""Approval on the command line: on a terminal (a real pty) ``gramagent chat`` shows the call
and asks; ``--yes`` approves for scripts; with nobody to ask the turn stops with one error line
and, in a stored session, the call waits there until a later command decides on it."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_support import on_terminal, run_gramagent

from gramagent._runtime.sessions import SessionStore
from gramagent.testing import ScriptedServer, call, reply

pytestmark = pytest.mark.slow

AGENT = """
[mailer:Agent {instruction: "You send e-mail with sendMail.", model: "openai/scripted"} |
  [sendMail:Tool {description: "Sends an e-mail", requiresApproval: true} |
    (to::String)==>(::String)
  ]
]
"""
TOOLS = '''
from pathlib import Path

from gramagent import ToolLibrary

library = ToolLibrary()


@library.register
def sendMail(to: str) -> str:
    """Sends an e-mail"""
    with Path("sent.txt").open("a") as sent:
        sent.write(to + "\\n")
    return f"sent to {to}"
'''
MAIL = call("sendMail", {"to": "bob@example.com"}, id="call_7")


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "mail.gram").write_text(AGENT)
    (tmp_path / "mailtools.py").write_text(TOOLS)
    return tmp_path


@pytest.fixture
def env(workdir: Path) -> dict[str, str]:
    return {"GRAMAGENT_DATA_DIR": str(workdir / "data"), "OPENAI_API_KEY": "sk-test-key"}


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


def _args(command: str, server: ScriptedServer, *more: str) -> list[str]:
    return [command, "mail.gram", *more, "--tools", "mailtools:library", "--base-url",
            server.base_url]


def _sent(workdir: Path) -> list[str]:
    path = workdir / "sent.txt"
    return path.read_text().split() if path.exists() else []


def _results(body: dict[str, object]) -> list[str]:
    return [m["content"] for m in body["messages"]  # type: ignore[attr-defined]
            if m["role"] == "tool"]


def test_yes_approves_for_scripts(workdir: Path, env: dict[str, str],
                                  server: ScriptedServer) -> None:
    server.add(MAIL, reply("Sent."))
    done = run_gramagent(*_args("run", server, "Mail Bob", "--yes", "--json"), cwd=workdir,
                         env=env)
    assert done.returncode == 0, done.stderr
    response = json.loads(done.stdout)
    assert response["content"] == "Sent." and response["pending_approvals"] == []
    assert [i["name"] for i in response["tool_invocations"]] == ["sendMail"]
    assert "sendMail approved (--yes)" in done.stderr
    assert _sent(workdir) == ["bob@example.com"]


def test_nobody_to_ask_stops_the_turn_and_the_session_keeps_the_call(
        workdir: Path, env: dict[str, str], server: ScriptedServer) -> None:
    server.add(MAIL, reply("Sent after all."))
    paused = run_gramagent(*_args("run", server, "Mail Bob", "--json", "--session", "m"),
                           cwd=workdir, env=env)
    assert paused.returncode == 1
    assert "tool calls wait for approval: sendMail (call call_7)" in paused.stderr
    assert "stay waiting in session m" in paused.stderr
    assert "Traceback" not in paused.stderr
    response = json.loads(paused.stdout)
    assert response["finish_reason"] == "approval_required"
    assert response["pending_approvals"] == [
        {"call_id": "call_7", "tool": "sendMail", "arguments": {"to": "bob@example.com"}}]
    assert _sent(workdir) == []
    shown = run_gramagent("sessions", "show", "m", cwd=workdir, env=env)
    assert "sendMail waits for approval (call call_7)" in shown.stdout

    # A later command (here a script's, with --yes) decides before its own message.
    server.add(reply("And hello to you."))
    later = run_gramagent(*_args("run", server, "Hello", "--yes", "--session", "m"),
                          cwd=workdir, env=env)
    assert later.returncode == 0, later.stderr
    assert later.stdout.split("\n")[:2] == ["Sent after all.", "And hello to you."]
    assert _sent(workdir) == ["bob@example.com"]
    assert _results(server.requests[1].body) == ["sent to bob@example.com"]
    stored = SessionStore(workdir / "data" / "sessions.sqlite3").load("m")
    assert [m.kind for m in stored or ()] == [
        "user", "assistant", "tool_result", "assistant", "user", "assistant"]


@pytest.mark.parametrize(("answers", "ran"), [
    (b"y\n", True),
    (b"n\nBob is on holiday\n", False),
])
def test_terminal_shows_the_call_and_asks(answers: bytes, ran: bool, workdir: Path,
                                          env: dict[str, str], server: ScriptedServer) -> None:
    server.add(MAIL, reply("Done."))
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    out, err = on_terminal(_args("chat", server), {**environ, **env},
                           stdin=b"Mail Bob\n" + answers + b"\x04", cwd=workdir)
    assert "sendMail needs your approval to run with:" in err
    assert '"to": "bob@example.com"' in err and "Run it?" in err
    assert "Done." in out
    assert _sent(workdir) == (["bob@example.com"] if ran else [])
    (result,) = _results(server.requests[1].body)
    if ran:
        assert result == "sent to bob@example.com"
    else:
        assert "did not approve" in result and "Bob is on holiday" in result
    assert "Traceback" not in err


@pytest.mark.parametrize("stored", [(), ("--session", "s")])
def test_limits_hold_across_approvals(stored: tuple[str, ...], workdir: Path,
                                      env: dict[str, str], server: ScriptedServer) -> None:
    """Each approval resumes the same run: --max-iterations counts the requests of the whole
    turn, not of each part between two approvals (a model that keeps asking stops there),
    also when the turn is kept in a stored session."""
    server.add(*(call("sendMail", {"to": f"p{i}@example.com"}) for i in range(4)),
               reply("Sent them all."))
    done = run_gramagent(*_args("run", server, "Mail everyone", "--yes", "--max-iterations",
                                "2", *stored), cwd=workdir, env=env)
    assert done.returncode == 1
    assert "LimitExceeded" in done.stderr and "max_iterations=2" in done.stderr
    assert "Traceback" not in done.stderr
    # As with a person asked on the way: the second call runs, then no third request.
    assert len(server.requests) == 2
    assert _sent(workdir) == ["p0@example.com", "p1@example.com"]

    with ScriptedServer() as again:
        again.add(*(call("sendMail", {"to": f"q{i}@example.com"}) for i in range(2)),
                  reply("Sent both."))
        whole = run_gramagent(*_args("run", again, "Mail both", "--yes", "--json",
                                     *stored), cwd=workdir, env=env)
    assert whole.returncode == 0, whole.stderr
    response = json.loads(whole.stdout)
    assert response["content"] == "Sent both." and response["usage"]["requests"] == 3
    assert [i["arguments"]["to"] for i in response["tool_invocations"]] == [
        "q0@example.com", "q1@example.com"]


def test_a_call_decided_meanwhile_by_another_command(
        workdir: Path, env: dict[str, str], server: ScriptedServer) -> None:
    """While one command asks on its terminal, another (a script's, with --yes) decides on
    the same stored call and goes on: the first is then told so in one line, and nothing
    runs twice."""
    server.add(MAIL, reply("Sent."), reply("Hi."))
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    main, child = pty.openpty()
    asking = subprocess.Popen(
        [sys.executable, "-m", "gramagent", *_args("run", server, "Mail Bob", "--session", "m")],
        stdin=child, stdout=child, stderr=subprocess.PIPE, env={**environ, **env}, cwd=workdir)
    os.close(child)
    try:
        assert asking.stderr is not None
        err = _read_until(asking.stderr.fileno(), b"Run it?")
        other = run_gramagent(*_args("run", server, "Hello", "--yes", "--session", "m"),
                              cwd=workdir, env=env)
        assert other.returncode == 0, other.stderr
        assert other.stdout.split("\n")[:2] == ["Sent.", "Hi."]
        os.write(main, b"y\n")
        rest = asking.stderr.read()
        assert asking.wait(timeout=60) == 1
    finally:
        os.close(main)
        if asking.poll() is None:
            asking.kill()
            asking.wait()
        if asking.stderr is not None:
            asking.stderr.close()
    message = (err + rest).decode(errors="replace")
    assert "another process decided on them" in message and "call_7" in message
    assert "Traceback" not in message
    assert _sent(workdir) == ["bob@example.com"] and len(server.requests) == 3
    stored = SessionStore(workdir / "data" / "sessions.sqlite3").load("m")
    assert [m.kind for m in stored or ()] == [
        "user", "assistant", "tool_result", "assistant", "user", "assistant"]


def _read_until(fd: int, marker: bytes, timeout: float = 60) -> bytes:
    """What ``fd`` gives until ``marker`` (or its end, or ``timeout`` seconds of silence)."""
    seen = bytearray()
    while marker not in seen:
        ready, _, _ = select.select([fd], [], [], timeout)
        chunk = os.read(fd, 4096) if ready else b""
        if not chunk:
            break
        seen.extend(chunk)
    return bytes(seen)
