"""Tests of ``gramagent run`` and ``gramagent chat`` against the scripted server over real HTTP."""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from console_script import gramagent_command
from typer.testing import CliRunner

from gramagent._cli import app
from gramagent.testing import ScriptedServer, ScriptTurn, call, reply

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "examples" / "hello_world.gram"

FAKE_KEY = "sk-test-DoNotLeak-0123456789abcdefXYZ"
FAKE_TOKEN = "tok-Plaintext-Service-Token-9876"


def _text(content: Any) -> str:
    """The text of a message content (a string, or a list of text parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def greeter(path: str, body: dict[str, Any]) -> ScriptTurn:
    """A model that calls sayHello with the name in the user's last message, then quotes the
    tool's result: the final text can only hold the greeting if the tool really ran."""
    if path.endswith("/responses"):
        items = body["input"]
        last = items[-1]
        if last.get("type") == "function_call_output":
            return reply(f"The tool said: {last['output']}")
        user = next(i for i in reversed(items) if i.get("role") == "user")
    else:
        messages = body["messages"]
        last = messages[-1]
        if last["role"] in ("tool", "function"):
            return reply(f"The tool said: {last['content']}")
        user = next(m for m in reversed(messages) if m["role"] == "user")
    match = re.search(r"I'm (\w+)", _text(user["content"]))
    return call("sayHello", {"personName": match.group(1) if match else "nobody"})


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    """The greeter on a free port of 127.0.0.1."""
    with ScriptedServer(greeter) as srv:
        yield srv


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    """A CliRunner with no OpenAI settings leaking in from the environment."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    return CliRunner()


def run(runner: CliRunner, *args: str, input: str | None = None) -> Any:
    return runner.invoke(app, list(args), input=input, catch_exceptions=False)


def test_run_greets_alice(runner: CliRunner, server: ScriptedServer) -> None:
    """The issue's acceptance run: the tool's greeting for Alice reaches stdout."""
    result = run(runner, "run", str(HELLO), "Hi, I'm Alice", "--base-url", server.base_url)
    assert result.exit_code == 0, result.stderr
    assert "Hello, Alice! Nice to meet you." in result.stdout
    assert [r.path for r in server.requests] == ["/v1/chat/completions"] * 2
    tool_message = server.requests[1].body["messages"][-1]
    assert tool_message["role"] == "tool"
    assert "Alice" in tool_message["content"]


def test_several_messages_are_one_conversation(runner: CliRunner,
                                               server: ScriptedServer) -> None:
    """Each message is a turn of the same conversation, replies printed in order."""
    result = run(runner, "run", str(HELLO), "Hi, I'm Alice", "Now I'm Bob",
                 "--base-url", server.base_url)
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert out.index("Hello, Alice!") < out.index("Hello, Bob!")
    assert len(server.requests) == 4
    third = server.requests[2].body["messages"]
    contents = [_text(m.get("content")) for m in third]
    assert "Hi, I'm Alice" in contents, "the second turn carries the first turn's history"
    assert any("Hello, Alice!" in c for c in contents)


def test_json_output(runner: CliRunner, server: ScriptedServer) -> None:
    """--json prints AgentResponse.to_dict() as one JSON line per turn, without rich."""
    result = run(runner, "run", str(HELLO), "Hi, I'm Alice", "I'm Carol",
                 "--base-url", server.base_url, "--json")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 2
    first, second = (json.loads(line) for line in lines)
    assert "Hello, Alice!" in first["content"]
    [invocation] = first["tool_invocations"]
    assert invocation["name"] == "sayHello"
    assert invocation["arguments"] == {"personName": "Alice"}
    assert "Hello, Alice!" in str(invocation["result"])
    assert first["usage"]["requests"] == 2
    assert "Hello, Carol!" in second["content"]
    assert len(second["context"]) > len(first["context"])
    assert second["conversation_id"] == first["conversation_id"]


@pytest.mark.parametrize(
    ("api", "path", "marker"),
    [("responses", "/v1/responses", "input"), ("functions", "/v1/chat/completions", "functions")],
    ids=["responses", "functions"],
)
def test_other_wire_formats(runner: CliRunner, server: ScriptedServer, api: str, path: str,
                            marker: str) -> None:
    """--api selects the wire format; the conversation works the same."""
    result = run(runner, "run", str(HELLO), "Hi, I'm Alice", "--base-url", server.base_url,
                 "--api", api)
    assert result.exit_code == 0, result.stderr
    assert "Hello, Alice! Nice to meet you." in result.stdout
    assert [r.path for r in server.requests] == [path, path]
    assert marker in server.requests[0].body


def test_verbose_prints_raw_exchanges(runner: CliRunner, server: ScriptedServer) -> None:
    """-v shows each request body and response on stderr, and INFO log records."""
    result = run(runner, "run", str(HELLO), "Hi, I'm Alice", "--base-url", server.base_url,
                 "-v")
    assert result.exit_code == 0, result.stderr
    err = result.stderr
    assert err.count("── request ──") == 2
    assert "HTTP 200" in err
    assert '"tool_calls"' in err and '"sayHello"' in err
    assert "gramagent.model" in err and "gramagent.tool" in err
    assert "Hello, Alice!" in result.stdout
    assert "── request" not in result.stdout, "diagnostics stay off stdout"


def test_events_file(runner: CliRunner, server: ScriptedServer, tmp_path: Path) -> None:
    """--events appends the planned and result events of every call as JSON lines."""
    events = tmp_path / "events.jsonl"
    result = run(runner, "run", str(HELLO), "Hi, I'm Alice", "--base-url", server.base_url,
                 "--events", str(events))
    assert result.exit_code == 0, result.stderr
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    assert [e["kind"] for e in lines] == ["tool_call_planned", "tool_call_result"]
    assert {e["tool"] for e in lines} == {"sayHello"}
    assert lines[1]["status"] == "ok"
    assert "Alice" not in events.read_text(), "events carry a hash, never the arguments"


def test_dry_run_runs_no_tool(runner: CliRunner, server: ScriptedServer) -> None:
    """--dry-run talks to the model but answers each call with {"ok": true}."""
    result = run(runner, "run", str(HELLO), "Hi, I'm Alice", "--base-url", server.base_url,
                 "--dry-run")
    assert result.exit_code == 0, result.stderr
    assert "Hello, Alice!" not in result.stdout
    assert '"ok"' in result.stdout or "ok" in result.stdout
    assert len(server.requests) == 2


def test_max_iterations_limit(runner: CliRunner, server: ScriptedServer) -> None:
    """--max-iterations 1 stops the run before the second request: one line, exit 1."""
    result = run(runner, "run", str(HELLO), "Hi, I'm Alice", "--base-url", server.base_url,
                 "--max-iterations", "1")
    assert result.exit_code == 1
    assert "LimitExceeded" in result.stderr
    assert len(server.requests) == 1


def test_chat_reads_piped_stdin(runner: CliRunner, server: ScriptedServer) -> None:
    """chat: each stdin line is a turn of one conversation; /exit ends the session."""
    result = run(runner, "chat", str(HELLO), "--base-url", server.base_url,
                 input="Hi, I'm Alice\n\nI'm Bob\n/exit\nI'm Never Read\n")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.index("Hello, Alice!") < result.stdout.index("Hello, Bob!")
    assert "Never" not in result.stdout
    assert len(server.requests) == 4
    assert len(server.requests[3].body["messages"]) > len(server.requests[1].body["messages"])


def test_chat_ends_at_end_of_input(runner: CliRunner, server: ScriptedServer) -> None:
    """chat: end of input (Ctrl-D) ends the session like /exit."""
    result = run(runner, "chat", str(HELLO), "--base-url", server.base_url, "--json",
                 input="Hi, I'm Dora\n")
    assert result.exit_code == 0, result.stderr
    [line] = result.stdout.splitlines()
    assert "Hello, Dora!" in json.loads(line)["content"]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("extra", "error"),
    [
        (["--agent", "no_such_agent"], "Error"),
        (["--tools", "gramagent.no_such_module:lib"], "ConfigurationError"),
        (["--tools", "json:dumps"], "ConfigurationError"),
        (["--model", "nowhere/some-model"], "ConfigurationError"),
    ],
    ids=["unknown-agent", "tools-module", "tools-not-a-library", "unknown-provider"],
)
def test_configuration_errors(runner: CliRunner, server: ScriptedServer, extra: list[str],
                              error: str) -> None:
    """Problems found before any request: one red line on stderr, exit 1, nothing sent."""
    result = run(runner, "run", str(HELLO), "Hi, I'm Alice", "--base-url", server.base_url,
                 *extra)
    assert result.exit_code == 1
    assert error in result.stderr
    assert len(result.stderr.strip().splitlines()) >= 1
    assert result.stdout == ""
    assert server.requests == []


def test_unreachable_server(runner: CliRunner) -> None:
    """A server that cannot be reached is a ModelAPIError line and exit 1."""
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    result = run(runner, "run", str(HELLO), "Hi, I'm Alice", "--base-url", url)
    assert result.exit_code == 1
    assert "ModelAPIError" in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_gram_file(runner: CliRunner, server: ScriptedServer, tmp_path: Path) -> None:
    """A gram file that does not parse is a SpecError naming the file, exit 1."""
    bad = tmp_path / "bad.gram"
    bad.write_text("(broken:Agent {name: \n")
    result = run(runner, "run", str(bad), "Hi", "--base-url", server.base_url)
    assert result.exit_code == 1
    assert "SpecError" in result.stderr
    assert "bad.gram" in result.stderr
    missing = run(runner, "run", str(tmp_path / "missing.gram"), "Hi")
    assert missing.exit_code == 1
    assert "missing.gram" in missing.stderr


def test_secrets_appear_nowhere(runner: CliRunner, tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A run with a known key and a secret-named variable, at full verbosity with events and
    log records captured: neither secret is in any output, though both were really used."""
    monkeypatch.setenv("MY_SERVICE_TOKEN", FAKE_TOKEN)
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(self.format(record) + repr(record.__dict__))

    keep = Keep()
    logger = logging.getLogger("gramagent")
    logger.addHandler(keep)
    events = tmp_path / "events.jsonl"

    def leaky(path: str, body: dict[str, Any]) -> ScriptTurn:
        # A server that echoes what it was sent, secrets included, in every answer.
        turn = greeter(path, body)
        if hasattr(turn, "text"):
            return reply(f"{turn.text} (you sent {json.dumps(body)[-400:]})")
        return turn

    try:
        with ScriptedServer(leaky) as srv:
            result = run(runner, "run", str(HELLO), f"Hi, I'm Alice, my token is {FAKE_TOKEN}",
                         "--base-url", srv.base_url, "--api-key", FAKE_KEY, "-vv", "--json",
                         "--events", str(events))
            failing = run(runner, "run", str(HELLO), "Hi", "--base-url",
                          f"http://127.0.0.1:{_closed_port()}/v1?key={FAKE_KEY}",
                          "--api-key", FAKE_KEY, "-v")
    finally:
        logger.removeHandler(keep)
    assert result.exit_code == 0, result.stderr
    assert srv.requests[0].headers.get("authorization") == f"Bearer {FAKE_KEY}", (
        "the key was really sent to the server")
    assert FAKE_TOKEN in srv.requests[0].body["messages"][-1]["content"]
    assert "Hello, Alice!" in result.stdout
    assert failing.exit_code == 1
    outputs = {
        "stdout": result.stdout,
        "stderr": result.stderr,
        "failing stdout": failing.stdout,
        "failing stderr": failing.stderr,
        "events": events.read_text(),
        "log records": "\n".join(records),
    }
    assert records, "log records were captured"
    assert "── request ──" in result.stderr, "the -v output was produced"
    for where, text in outputs.items():
        assert FAKE_KEY not in text, f"the API key leaked into {where}"
        assert FAKE_TOKEN not in text, f"the MY_SERVICE_TOKEN value leaked into {where}"


@pytest.mark.slow
def test_installed_console_script(server: ScriptedServer, tmp_path: Path) -> None:
    """The installed ``gramagent`` command runs the hello-world agent in a fresh process."""
    cmd = gramagent_command()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    done = subprocess.run(
        [*cmd, "run", str(HELLO), "Hi, I'm Alice", "--base-url", server.base_url],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Hello, Alice! Nice to meet you." in done.stdout
    bad = subprocess.run([*cmd, "run", str(tmp_path / "nope.gram"), "Hi"], capture_output=True,
                         text=True, env=env, cwd=tmp_path, timeout=120, check=False)
    assert bad.returncode == 1
    assert bad.stdout == ""
    assert "nope.gram" in bad.stderr
