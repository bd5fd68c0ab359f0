"""Answers are rendered as Markdown on a terminal (rich), and printed as written when piped or
with ``--json`` (issue 33 item 8): a real pty, the scripted server streaming SSE."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import on_terminal

from gramagent.testing import ScriptedServer, call, reply

pytestmark = pytest.mark.slow  # subprocess or pty runs of the CLI

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "examples" / "hello_world.gram"
ANSWER = "# Plan\n\nFirst the **bold** step, then `code`.\n\n- one item\n- two items\n"


def _env() -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")},
            "NO_COLOR": "1", "OPENAI_API_KEY": "sk-test-key"}


def test_an_answer_on_a_terminal_is_rendered_as_markdown() -> None:
    with ScriptedServer([call("sayHello", {"personName": "Ada"}), reply(ANSWER)]) as srv:
        out, err = on_terminal(["run", str(HELLO), "Hi", "--base-url", srv.base_url], _env())
    assert "Plan" in out and "bold" in out and "code" in out, err
    assert "**bold**" not in out and "# Plan" not in out and "`code`" not in out
    assert "•" in out and "one item" in out and "- one item" not in out  # a rendered list
    assert "→ sayHello" in err


def test_piped_or_json_the_answer_is_as_written() -> None:
    with ScriptedServer([reply(ANSWER), reply(ANSWER)]) as srv:
        args = [sys.executable, "-m", "gramagent", "run", str(HELLO), "Hi", "--base-url",
                srv.base_url]
        piped = subprocess.run(args, capture_output=True, text=True, env=_env(), timeout=60,
                               check=False)
        as_json = subprocess.run([*args, "--json"], capture_output=True, text=True,
                                 env=_env(), timeout=60, check=False)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == ANSWER + "\n"
    assert json.loads(as_json.stdout)["content"] == ANSWER
