"""Helpers of the experiment tests: a scripted model that greets through sayHello, files."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import orjson

from gramagent.testing import ScriptTurn, call, reply

AGENT_GRAM = '''
[sayHello:Tool {description: "Returns a friendly greeting message for the given name."} |
  (personName::String {default: "world"})==>(::String)
]

[greeter:Agent {
  instruction: "Greet the person the user names, using sayHello.",
  model: "openai/scripted"
} |
  sayHello
]
'''


def greeter_script(path: str, body: Any) -> ScriptTurn:
    """Calls sayHello with the user's last word, then answers with the tool's output."""
    messages = body.get("messages") or body.get("input") or []
    last = messages[-1]
    role = last.get("role") or last.get("type")
    if role in ("tool", "function_call_output"):
        text = last.get("content") or last.get("output") or ""
        return reply(str(text), usage=(20, 5))
    content = last.get("content")
    if isinstance(content, list):
        content = " ".join(part.get("text", "") for part in content)
    name = str(content).split()[-1].strip(".!?")
    return call("sayHello", {"personName": name})


def write_cases(path: Path, names: list[str]) -> Path:
    lines = [orjson.dumps({"id": name, "input": f"Please greet {name}",
                           "expected": f"Hello, {name}!"}) for name in names]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def write_experiment(directory: Path, *, names: list[str], base_url: str,
                     variant_b: str = "ab_libs:planted", repeats: int = 1,
                     extra: str = "", evaluators: str | None = None) -> Path:
    (directory / "greeter.gram").write_text(AGENT_GRAM)
    write_cases(directory / "cases.jsonl", names)
    evaluators = evaluators if evaluators is not None else '''
  [exact:Evaluator {kind: "exact"}],
  [hello:Evaluator {kind: "contains", value: "hello"}],
  [called:Evaluator {kind: "tool_called", tool: "sayHello"}],
  [clean:Evaluator {kind: "no_tool_errors"}]'''
    text = f'''// greeting experiment of the tests
[greetings:Experiment {{
  agent: "greeter.gram",
  cases: "cases.jsonl",
  repeats: {repeats},
  store: "greetings.sqlite"{extra}
}} |
  [A:Variant {{library: "ab_libs:polite", base_url: "{base_url}"}}],
  [B:Variant {{library: "{variant_b}", base_url: "{base_url}"}}],{evaluators}
]
'''
    path = directory / "greetings.gram"
    path.write_text(text)
    return path


def stored_runs(store: Path) -> int:
    """The runs a store holds so far (0 before its table exists)."""
    try:
        with sqlite3.connect(store) as db:
            count: int = db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
            return count
    except sqlite3.OperationalError:
        return 0
