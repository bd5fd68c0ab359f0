"""Every agent of every ``examples/*.gram`` runs against the scripted server.

For each agent the script is derived from its tools: one turn per tool calling it with
schema-valid example arguments, then a final text. The agent is bound to the built-in tools, so
an example that does not parse, names a tool gramagent does not ship, or whose gram contract
drifted from the implementation fails here.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from extras import needs_tools
from jsonschema import Draft202012Validator

from gramagent._cli.run_commands import load_library
from gramagent._models.registry import resolve_model
from gramagent._runtime.loop import run_agent
from gramagent._spec.gram.text import load_file
from gramagent._spec.model import Agent, ModelRef
from gramagent.testing import ScriptedServer, ScriptTurn, call, reply
from gramagent.tools import available_tools, builtin_library

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

REJECTED = frozenset({
    "tool_payload_too_large", "tool_payload_parse_error", "unknown_tool", "invalid_arguments",
})
"""Error types meaning the call itself was wrong: example arguments must never produce them."""

STRING_EXAMPLES = {"code": "print(1 + 1)", "personName": "Alice", "timezone": "Europe/Paris"}
"""Example strings for parameters where any text would not do."""


def example_value(schema: dict[str, Any], name: str = "") -> Any:
    """A value valid against ``schema``: its example, default, first choice, or a minimal
    value of its type (objects get every property)."""
    if "examples" in schema and schema["examples"]:
        return schema["examples"][0]
    if "default" in schema:
        return schema["default"]
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return example_value(schema[key][0], name)
    kind = schema.get("type", "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "string":
        text = STRING_EXAMPLES.get(name, "example")
        return text.ljust(schema.get("minLength", 0), "x")
    if kind == "integer":
        return int(schema.get("minimum", 1))
    if kind == "number":
        return float(schema.get("minimum", 1.0))
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    if kind == "array":
        items = schema.get("items", {})
        return [example_value(items, name) for _ in range(max(1, schema.get("minItems", 1)))]
    if kind == "object":
        return {key: example_value(sub, key)
                for key, sub in schema.get("properties", {}).items()}
    raise AssertionError(f"no example for schema {schema!r}")


MCP_EXAMPLES = {"time_agent": f"mcp:stdio:{shlex.quote(sys.executable)} -m mcp_server_time"}
"""Examples whose tools are an MCP server's (the ``--tools`` of their header comment)."""

KNOWN_BROKEN: dict[str, str] = {}
"""Examples known not to run, with why; strict, so a fixed one fails until it leaves here."""


def example_agents() -> list[Any]:
    """(file, agent) for every agent of every example file, with readable ids."""
    params = []
    for path in sorted(EXAMPLES.glob("*.gram")):
        for agent in load_file(path).agents:
            key = f"{path.stem}:{agent.name}"
            marks = []
            if key in KNOWN_BROKEN:
                marks.append(pytest.mark.xfail(reason=KNOWN_BROKEN[key], strict=True))
            if any(available_tools().get(spec.name) is False for spec in agent.tools):
                marks.append(needs_tools)
            params.append(pytest.param(path, agent.name, id=key, marks=marks))
    return params


def test_examples_exist() -> None:
    """The examples folder holds gram files, at least hello_world."""
    assert (EXAMPLES / "hello_world.gram").is_file()


@pytest.mark.parametrize(("path", "agent_name"), example_agents())
async def test_example_agent_runs(path: Path, agent_name: str, tmp_path: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent binds to the built-in tools, accepts a call of each tool with example
    arguments, and returns the scripted answer."""
    monkeypatch.chdir(tmp_path)
    agent: Agent = load_file(path).agent(agent_name)
    arguments = {}
    for spec in agent.tools:
        args = example_value(spec.schema)
        problems = [e.message for e in Draft202012Validator(spec.schema).iter_errors(args)]
        assert not problems, f"example arguments for {spec.name} are invalid: {problems}"
        arguments[spec.name] = args
    turns: list[ScriptTurn] = [call(name, args) for name, args in arguments.items()]
    turns.append(reply("example finished"))

    if path.stem in MCP_EXAMPLES:
        pytest.importorskip("mcp_server_time")
        library = load_library(MCP_EXAMPLES[path.stem])
    else:
        library = builtin_library()
    with ScriptedServer(turns) as server:
        model = resolve_model(ModelRef(provider="openai", name=agent.model.name),
                              base_url=server.base_url, api_key=None)
        try:
            response = await run_agent(agent, "Show me what you can do.",
                                       library=library, model=model)
        finally:
            await model.aclose()
            close = getattr(library, "close", None)
            if close is not None:
                close()
        assert server.remaining == 0

    assert response.content == "example finished"
    assert [i.name for i in response.tool_invocations] == list(arguments)
    for invocation in response.tool_invocations:
        assert invocation.error_type not in REJECTED, (
            f"{invocation.name} rejected its example arguments: {invocation.error}")
        assert invocation.error_type != "tool_timeout", invocation.error


def test_the_readme_shows_hello_world_as_it_is() -> None:
    """The README's "An agent is data" block is the file, as ``gramagent fmt`` writes it."""
    readme = (EXAMPLES.parent / "README.md").read_text()
    blocks = readme.split("```gram\n")[1:]
    shown = blocks[0].split("\n```\n")[0] + "\n"
    assert shown == (EXAMPLES / "hello_world.gram").read_text()
