"""Libraries built from real MCP servers: binding, calls, results, strict schemas, mixing.

Servers: mcp-server-time over stdio (nobody here wrote it) and the SDK-built clock server over
streamable HTTP on 127.0.0.1. Models: the scripted server over real HTTP.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from mcp_support import TIME_AGENT, TIME_SERVER

from gramagent import ToolLibrary, load_agent, load_gram, run_agent, tool
from gramagent.errors import ToolError
from gramagent.mcp import (
    MCPToolError,
    MCPToolLibrary,
    amcp_library,
    combine_libraries,
    mcp_library,
)
from gramagent.testing import ScriptedServer, ScriptTurn, call, reply

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


@pytest.fixture(scope="module")
def time_library() -> Iterator[MCPToolLibrary]:
    """mcp-server-time's tools, over stdio (one process for the module)."""
    with mcp_library(TIME_SERVER, timeout=20) as library:
        yield library


def quoting_model(path: str, body: dict[str, Any]) -> ScriptTurn:
    """Calls get_current_time for Tokyo, then quotes the tool result verbatim: the final text
    holds the time only if the tool really ran."""
    items = body.get("input") or body.get("messages") or []
    last = items[-1]
    if last.get("type") == "function_call_output":
        return reply(f"TOOL SAID: {last['output']}")
    if last.get("role") == "tool":
        return reply(f"TOOL SAID: {last['content']}")
    return call("get_current_time", {"timezone": "Asia/Tokyo"})


def test_the_library_lists_the_servers_tools(time_library: MCPToolLibrary) -> None:
    assert set(time_library.names()) == {"get_current_time", "convert_time"}
    t = time_library.lookup("get_current_time")
    assert t is not None and t.is_async
    assert t.schema["required"] == ["timezone"]
    assert t.description == "Get current time in a specific timezone"


async def test_a_call_returns_the_servers_text(time_library: MCPToolLibrary) -> None:
    t = time_library.lookup("get_current_time")
    assert t is not None
    data = json.loads(await t.invoke(timezone="Asia/Tokyo"))
    assert data["timezone"] == "Asia/Tokyo" and data["datetime"].endswith("+09:00")


async def test_an_error_result_raises_with_the_servers_message(
        time_library: MCPToolLibrary) -> None:
    t = time_library.lookup("get_current_time")
    assert t is not None
    with pytest.raises(MCPToolError, match="Nowhere/Atlantis"):
        await t.invoke(timezone="Nowhere/Atlantis")


def test_the_imported_spec_binds_and_compiles_a_strict_schema(
        time_library: MCPToolLibrary) -> None:
    bound = time_library.bind(load_agent(TIME_AGENT))
    (definition,) = bound.definitions
    # MCP schemas lack additionalProperties: false; binding compiles the strict form anyway.
    assert "additionalProperties" not in definition.parameters
    assert definition.strict_parameters is not None
    assert definition.strict_parameters["additionalProperties"] is False
    assert definition.strict_parameters["required"] == ["timezone"]


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_an_agent_runs_end_to_end_on_the_stdio_server(
        time_library: MCPToolLibrary, api: str) -> None:
    with ScriptedServer(quoting_model) as model:
        response = await run_agent(load_agent(TIME_AGENT), "What time is it in Tokyo?",
                                   library=time_library, model="openai/scripted", api=api,
                                   base_url=model.base_url, api_key="sk-test")
    (inv,) = response.tool_invocations
    assert inv.error_type is None
    assert response.content is not None and '"timezone": "Asia/Tokyo"' in response.content
    if api == "responses":
        (sent,) = model.requests[0].body["tools"]
        assert sent["strict"] is True
        assert sent["parameters"]["additionalProperties"] is False


async def test_an_agent_runs_end_to_end_on_the_http_server(clock_url: str) -> None:
    library = await amcp_library(f"mcp:{clock_url}", timeout=20)
    with library, ScriptedServer(quoting_model) as model:
        response = await run_agent(load_agent(TIME_AGENT), "What time is it in Tokyo?",
                                   library=library, model="openai/scripted",
                                   base_url=model.base_url, api_key="sk-test")
    assert response.tool_invocations[0].error_type is None
    assert response.content is not None and "+09:00" in response.content


async def test_the_model_sees_an_error_result_and_the_run_goes_on(
        time_library: MCPToolLibrary) -> None:
    script = [call("get_current_time", {"timezone": "Mars/Olympus"}), reply("sorry")]
    with ScriptedServer(script) as model:
        response = await run_agent(load_agent(TIME_AGENT), "time on Mars?",
                                   library=time_library, model="openai/scripted",
                                   base_url=model.base_url, api_key="sk-test")
        sent = model.requests[1].body["messages"][-1]["content"]
    (inv,) = response.tool_invocations
    assert inv.error_type == "tool_exception"
    assert "MCPToolError" in sent and "Mars/Olympus" in sent
    assert response.content == "sorry"


WRONG = """
[a:Agent {instruction: "x", model: "openai/x"} | get_current_time, convert_tim]
[get_current_time:Tool {description: "Get current time in a specific timezone"} |
  (timezone::Integer)==>(where::String)==>(::String)
]
[convert_tim:Tool {description: "d"} | (x::String)==>(::String)]
"""


def test_every_mismatch_is_reported_at_once(time_library: MCPToolLibrary) -> None:
    agent = load_gram(WRONG).agent()
    with pytest.raises(ToolError) as caught:
        time_library.bind(agent)
    problems = caught.value.problems
    assert len(problems) == 2
    assert "'convert_tim'" in problems[0] or "'convert_tim'" in problems[1]
    text = str(caught.value)
    assert "did you mean 'convert_time'" in text
    assert "schema differs" in text and "/properties/timezone" in text
    assert "/properties/where" in text


def test_mcp_tools_mix_with_python_tools(time_library: MCPToolLibrary) -> None:
    @tool
    def shout(text: str) -> str:
        """Say it louder.

        Args:
            text: what to say.
        """
        return text.upper()

    mixed = combine_libraries([ToolLibrary([shout]), time_library])
    assert set(mixed.names()) == {"shout", "get_current_time", "convert_time"}
    assert mixed.bind(load_agent(TIME_AGENT)).tools["get_current_time"] is \
        time_library.lookup("get_current_time")
    with pytest.raises(ToolError, match="'get_current_time' is in tool sources 1 and 2"):
        combine_libraries([time_library, ToolLibrary([time_library.lookup("get_current_time")])])


def test_only_keeps_the_named_tools_and_rejects_missing_ones() -> None:
    with mcp_library(TIME_SERVER, only=["convert_time"]) as library:
        assert library.names() == ("convert_time",)
    with pytest.raises(ToolError, match="has no tool 'get_time'"):
        mcp_library(TIME_SERVER, only=["get_time"])
