"""Tests of ``gramagent harmony parse`` and ``gramagent harmony render``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_support import run_gramagent
from typer.testing import CliRunner

from gramagent._cli import app
from gramagent._models.harmony_parse import parse_harmony

GRAM = """
[sayHello:Tool {description: "Returns a friendly greeting message for the given name"} |
  (personName::String {default: "world"})==>(::String)
]

[hello_world_agent:Agent {
  description: "A friendly agent",
  instruction: ```
  You are a friendly assistant. When the user greets you, use the sayHello tool.
  ```,
  model: "openai/gpt-oss-20b"
} |
  sayHello
]
"""

COMPLETION = (
    "<|channel|>analysis<|message|>Greet.<|end|>\n"
    "junk<|start|>assistant<|channel|>commentary to=functions.sayHello <|constrain|>json"
    '<|message|>{"personName": "Ada"<|call|>'
)


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def _lines(output: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in output.splitlines()]


def test_parse_file(runner: CliRunner, tmp_path: Path) -> None:
    """One JSON line per message, error items with their line and column."""
    path = tmp_path / "completion.txt"
    path.write_text(COMPLETION, encoding="utf-8")
    result = runner.invoke(app, ["harmony", "parse", str(path)])
    assert result.exit_code == 0, result.output
    records = _lines(result.stdout)
    assert [r["role"] for r in records] == ["assistant", None, "assistant"]
    assert records[0]["channel"] == "analysis" and records[0]["ended_by"] == "end"
    assert (records[1]["kind"], records[1]["error_type"], records[1]["line"],
            records[1]["column"]) == ("error", "unexpected_text", 2, 1)
    assert (records[2]["name"], records[2]["error_type"]) == (
        "sayHello", "tool_payload_parse_error")
    assert "arguments" not in records[2]
    assert [r["content"] for r in records] == [m.content for m in parse_harmony(COMPLETION)]


def test_parse_stdin_and_check(runner: CliRunner) -> None:
    """``-`` reads stdin; ``--check`` fails on malformed input and passes on good input."""
    good = '<|channel|>commentary to=functions.f<|message|>{"a": 1}<|call|>'
    result = runner.invoke(app, ["harmony", "parse", "-", "--check"], input=good)
    assert result.exit_code == 0
    (record,) = _lines(result.stdout)
    assert (record["name"], record["arguments"]) == ("f", '{"a": 1}')
    assert runner.invoke(app, ["harmony", "parse", "--check"], input=COMPLETION).exit_code == 1


def test_parse_transcript(runner: CliRunner) -> None:
    """``--transcript`` reads every message's role from its header."""
    text = "<|start|>user<|message|>hi<|end|><|start|>assistant<|channel|>final<|message|>yo<|end|>"
    result = runner.invoke(app, ["harmony", "parse", "--transcript"], input=text)
    assert [r["role"] for r in _lines(result.stdout)] == ["user", "assistant"]


def test_parse_missing_file(runner: CliRunner, tmp_path: Path) -> None:
    """A missing file is one error line on stderr and exit code 1."""
    result = runner.invoke(app, ["harmony", "parse", str(tmp_path / "nope.txt")])
    assert result.exit_code == 1 and "nope.txt" in result.stderr


def test_render(runner: CliRunner, tmp_path: Path) -> None:
    """The prompt for the agent and message, tools declared from the gram signatures."""
    path = tmp_path / "hello.gram"
    path.write_text(GRAM, encoding="utf-8")
    result = runner.invoke(app, ["harmony", "render", str(path), "Hi, I'm Ada",
                                 "--reasoning", "medium", "--current-date", "2025-06-28"])
    assert result.exit_code == 0, result.output
    prompt = result.stdout.rstrip("\n")
    assert prompt.startswith("<|start|>system<|message|>")
    assert "Current date: 2025-06-28\n\nReasoning: medium" in prompt
    assert "You are a friendly assistant. When the user greets you, use the sayHello tool." \
        in prompt
    assert (
        "// Returns a friendly greeting message for the given name\n"
        "type sayHello = (_: {\n"
        'personName?: string, // default: "world"\n'
        "}) => any;"
    ) in prompt
    assert prompt.endswith("<|start|>user<|message|>Hi, I'm Ada<|end|><|start|>assistant")


def test_render_errors(runner: CliRunner, tmp_path: Path) -> None:
    """A bad reasoning effort or a missing file is reported on stderr, exit code 1."""
    path = tmp_path / "hello.gram"
    path.write_text(GRAM, encoding="utf-8")
    bad = runner.invoke(app, ["harmony", "render", str(path), "Hi", "--reasoning", "max"])
    assert bad.exit_code == 1 and "reasoning" in bad.stderr
    missing = runner.invoke(app, ["harmony", "render", str(tmp_path / "x.gram"), "Hi"])
    assert missing.exit_code == 1 and "x.gram" in missing.stderr


@pytest.mark.slow
def test_parse_of_the_adr_stub_line_is_the_call_alone(tmp_path: Path) -> None:
    """``gramagent harmony parse`` of the ADR's marker line prints one message (the call),
    no empty assistant message with warnings before it; ``--check`` passes."""
    line = ('<|start|>assistant<|channel|>tool<|message|>'
            '{"tool":"sayHello","arguments":{"personName":"Alice"}}<|end|>\n')
    done = run_gramagent("harmony", "parse", "--check", cwd=tmp_path, stdin=line)
    assert done.returncode == 0, done.stderr
    records = [json.loads(x) for x in done.stdout.splitlines()]
    assert len(records) == 1
    assert records[0]["name"] == "sayHello"
    assert json.loads(records[0]["arguments"]) == {"personName": "Alice"}
    assert "warnings" not in records[0]
