"""``gramagent mcp serve`` and :func:`build_server`, checked with the SDK's own client."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any

import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_support import ROOT

from gramagent import ToolLibrary, load_agent
from gramagent._models.registry import resolve_model
from gramagent.mcp import build_server, mcp_library
from gramagent.mcp._serve import SESSION_META, running_http
from gramagent.testing import ScriptedServer, ScriptTurn, call, reply
from gramagent.tools import builtin_library

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

HELLO = ROOT / "examples" / "hello_world.gram"


def _text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


@pytest.fixture(scope="module")
def library() -> Iterator[ToolLibrary]:
    lib = builtin_library()
    yield lib
    lib.forget()


@pytest.fixture(scope="module")
def served(library: ToolLibrary) -> Iterator[str]:
    """The built-in tools over streamable HTTP on 127.0.0.1."""
    with running_http(build_server(library)) as url:
        yield url


async def test_the_library_is_listed_with_its_python_schemas(
        served: str, library: ToolLibrary) -> None:
    async with Client(served) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
    assert set(listed) == set(library.names())
    for t in library:
        assert listed[t.name].input_schema == t.schema
        assert listed[t.name].description == t.description


async def test_calls_run_and_bad_calls_are_error_results(served: str) -> None:
    async with Client(served) as client:
        ok = await client.call_tool("sayHello", {"personName": "Ada"})
        bad = await client.call_tool("sayHello", {"personName": 7})
        unknown = await client.call_tool("sayHelo", {})
    assert not ok.is_error and _text(ok) == "Hello, Ada! Nice to meet you."
    assert bad.is_error and "personName: 7 is not of type 'string'" in _text(bad)
    assert unknown.is_error and "unknown tool 'sayHelo'" in _text(unknown)


async def test_python_repl_keeps_one_sandbox_per_session(
        served: str, library: ToolLibrary) -> None:
    if "python_repl" not in library:
        pytest.skip("the sandboxed python_repl is not available on this machine")
    async with Client(served, mode="legacy") as a, Client(served, mode="legacy") as b:
        await a.call_tool("python_repl", {"code": "secret = 41"})
        await b.call_tool("python_repl", {"code": "secret = 1"})
        in_a = _text(await a.call_tool("python_repl", {"code": "secret + 1"}))
        in_b = _text(await b.call_tool("python_repl", {"code": "secret + 1"}))
    assert (in_a, in_b) == ("42", "2")
    # Sessionless (2026-07-28) requests: a named session keeps state, none gets a fresh one.
    async with Client(served) as c:
        await c.call_tool("python_repl", {"code": "n = 5"}, meta={SESSION_META: "s1"})
        named = _text(await c.call_tool("python_repl", {"code": "n * 2"},
                                        meta={SESSION_META: "s1"}))
        other = _text(await c.call_tool("python_repl", {"code": "n * 2"},
                                        meta={SESSION_META: "s2"}))
        fresh = _text(await c.call_tool("python_repl", {"code": "n * 2"}))
    assert named == "10"
    assert "NameError" in other and "NameError" in fresh


async def test_served_tools_bind_back_through_an_mcp_library(served: str) -> None:
    with mcp_library(f"mcp:{served}") as remote:
        bound = remote.bind(load_agent(ROOT / "examples" / "hello_goodbye.gram"))
        result = await bound.tools["sayHello"].invoke(personName="Bo")
    assert result == "Hello, Bo! Nice to meet you."


async def test_the_cli_serves_an_agents_specs_over_stdio() -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "gramagent", "mcp", "serve", str(HELLO)],
        env={"PYTHONPATH": os.environ.get("PYTHONPATH", "")}, cwd=str(ROOT))
    async with Client(stdio_client(params), read_timeout_seconds=60) as client:
        (listed,) = (await client.list_tools()).tools
        result = await client.call_tool("sayHello", {})
    spec = load_agent(HELLO).tools[0]
    assert listed.name == "sayHello" and listed.input_schema == spec.schema
    assert listed.input_schema["properties"]["personName"]["default"] == "world"
    assert _text(result) == "Hello, world! Nice to meet you."


def greeter(path: str, body: dict[str, Any]) -> ScriptTurn:
    """Calls sayHello with the name the user gives, then quotes the tool's answer."""
    messages = body["messages"]
    if messages[-1]["role"] == "tool":
        return reply(f"The tool said: {messages[-1]['content']}")
    user = next(m for m in reversed(messages) if m["role"] == "user")
    match = re.search(r"I'm (\w+)", str(user["content"]))
    return call("sayHello", {"personName": match.group(1) if match else "nobody"})


async def _ask_served_agent(library: ToolLibrary, *inputs: str,
                            model_turns: Callable[[str, dict[str, Any]], ScriptTurn] = greeter,
                            ) -> tuple[list[str], list[types.CallToolResult], list[Any]]:
    """Serve the hello agent over HTTP (its model ``model_turns``, the scripted greeter by
    default) and send it ``inputs`` in one MCP session: the listed tools, the answers, the
    last model request's messages."""
    agent = load_agent(HELLO)
    with ScriptedServer(model_turns) as model_server:
        model = resolve_model("openai/scripted", base_url=model_server.base_url,
                              api_key="sk-test")
        server = build_server(library, agent, agent_tool=True, model=model)
        with running_http(server) as url:
            async with Client(url, mode="legacy") as client:
                names = [t.name for t in (await client.list_tools()).tools]
                answers = [await client.call_tool(agent.name, {"input": text})
                           for text in inputs]
        await model.aclose()
        return names, answers, model_server.requests[-1].body["messages"]


async def test_the_agent_itself_is_served_as_a_tool(library: ToolLibrary) -> None:
    names, (answer, again), last_request = await _ask_served_agent(
        library, "Hi, I'm Grace", "And I'm Lin")
    assert names == ["sayHello", "hello_world_agent"]
    assert not answer.is_error
    assert _text(answer) == "The tool said: Hello, Grace! Nice to meet you."
    assert _text(again) == "The tool said: Hello, Lin! Nice to meet you."
    # One MCP session is one conversation: the second turn carries the first.
    assert any(m["role"] == "user" and "Grace" in str(m["content"]) for m in last_request)


async def test_a_served_agent_hears_that_nobody_can_approve() -> None:
    """The agent's tool needs approval; over MCP nobody can give it: the call is refused
    (not run), the agent is told why and answers."""
    guarded = ToolLibrary()
    ran: list[str] = []

    @guarded.register(requires_approval=True)
    def sayHello(personName: str = "world") -> str:
        """Returns a friendly greeting message for the given name"""
        ran.append(personName)
        return f"Hello, {personName}!"

    _, (answer,), _ = await _ask_served_agent(guarded, "Hi, I'm Grace")
    assert not answer.is_error and ran == []
    assert "nobody can approve tool calls through this MCP server" in _text(answer)


async def test_a_served_agent_that_keeps_asking_stops_at_its_limits() -> None:
    """Each refusal resumes the same run: a model that asks for another call after every
    refusal is stopped by max_iterations (10 requests), not served forever."""
    guarded = ToolLibrary()

    @guarded.register(requires_approval=True)
    def sayHello(personName: str = "world") -> str:
        """Returns a friendly greeting message for the given name"""
        return f"Hello, {personName}!"

    requests: list[int] = []

    def insistent(path: str, body: dict[str, Any]) -> ScriptTurn:
        requests.append(len(body["messages"]))
        if len(requests) > 30:  # only so that the test ends if the limit does not hold
            return reply("gave up")
        return call("sayHello", {"personName": f"p{len(requests)}"})

    _, (answer,), _ = await _ask_served_agent(guarded, "Hi", model_turns=insistent)
    assert answer.is_error and "LimitExceeded" in _text(answer)
    assert "max_iterations" in _text(answer) and len(requests) == 10
