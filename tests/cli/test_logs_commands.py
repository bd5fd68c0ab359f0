"""``gramagent logs`` (issue 33 item 8): the turns of runs kept with ``--session``, listed
newest first and shown one by one, made by real runs against the scripted server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_support import run_gramagent

from gramagent.testing import ScriptedServer, call, reply

pytestmark = pytest.mark.slow  # subprocess or pty runs of the CLI

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "examples" / "hello_world.gram"
SECRET = "sk-test-Logged-Secret-0123456789"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """Two runs of session ``demo`` and one of ``other``, stored under ``tmp_path``."""
    environ = {"GRAMAGENT_DATA_DIR": str(tmp_path / "data"), "OPENAI_API_KEY": SECRET}
    with ScriptedServer([call("sayHello", {"personName": "Ada"}), reply("Greeted Ada."),
                         reply(f"Fine, thanks; the key is {SECRET}."),
                         reply("Other answer.")]) as srv:
        for session, message in (("demo", "Hi, I'm Ada"), ("demo", "How are you?"),
                                 ("other", "Something else")):
            done = run_gramagent("run", str(HELLO), message, "--base-url", srv.base_url,
                                 "--session", session, cwd=tmp_path, env=environ)
            assert done.returncode == 0, done.stderr
    return environ


def test_logs_list_the_turns_newest_first(tmp_path: Path, env: dict[str, str]) -> None:
    done = run_gramagent("logs", "--json", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    assert [t["id"] for t in listed] == ["other:1", "demo:2", "demo:1"]
    first = listed[-1]
    assert first["message"] == "Hi, I'm Ada" and first["answer"] == "Greeted Ada."
    assert first["tool_calls"] == [{"tool": "sayHello", "arguments": '{"personName":"Ada"}',
                                    "result": "Hello, Ada! Nice to meet you.",
                                    "is_error": False}]
    assert SECRET not in done.stdout
    text = run_gramagent("logs", "-n", "2", cwd=tmp_path, env=env)
    rows = [line.split()[0] for line in text.stdout.splitlines()[1:]]
    assert rows == ["other:1", "demo:2"]


def test_logs_show_one_turn(tmp_path: Path, env: dict[str, str]) -> None:
    done = run_gramagent("logs", "show", "demo:1", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1:] == [
        "you> Hi, I'm Ada", '→ sayHello {"personName":"Ada"}',
        "← Hello, Ada! Nice to meet you.", "Greeted Ada."]
    missing = run_gramagent("logs", "show", "demo:9", cwd=tmp_path, env=env)
    assert missing.returncode == 1
    assert missing.stderr.startswith("ConfigurationError: session 'demo' has 2 turns")
    bad = run_gramagent("logs", "show", "demo", "--json", cwd=tmp_path, env=env)
    assert json.loads(bad.stdout)["error"]["message"].startswith("'demo': expected SESSION:N")


def test_no_logs_says_where_they_would_be(tmp_path: Path) -> None:
    done = run_gramagent("logs", cwd=tmp_path, env={"GRAMAGENT_DATA_DIR": str(tmp_path)})
    assert done.returncode == 0
    assert done.stdout == "" and "--session NAME keeps them" in done.stderr
