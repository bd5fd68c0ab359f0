"""A stdio MCP server that answers what the SDK never sends (tests/gramagent_mcp/raw_server.py,
a real process): error responses with any code, bytes that are not UTF-8, results of the
wrong shape. Each is a clear answer or error, at once, and the session (the server's process
and its state) is kept when the server did answer.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp_support import HERE, PYTHON

from gramagent.errors import MCPServerError, ToolError
from gramagent.mcp import MCPClient, import_specs, mcp_library, result_text

pytestmark = pytest.mark.timeout(120)

RAW = f"mcp:stdio:{PYTHON} {shlex.quote(str(HERE / 'raw_server.py'))}"


def _pid(text: str) -> int:
    found = re.search(r"(?:pid|by) (\d+)", text)
    assert found is not None, text
    return int(found.group(1))


@pytest.fixture(scope="module")
def raw() -> Iterator[MCPClient]:
    with MCPClient(RAW, timeout=20, connect_timeout=20) as client:
        yield client


def _call(client: MCPClient, x: str) -> str:
    result = client.call_tool_sync("echo", {"x": x})
    return " ".join(getattr(block, "text", "") for block in result.content)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(code=st.one_of(st.sampled_from([-32000, -32001, -32600, -32601, -32602, -32603]),
                      st.integers(-(2**31), 2**31 - 1)))
def test_an_error_response_of_any_code_is_the_servers_answer(raw: MCPClient,
                                                             code: int) -> None:
    """-32000 and -32001 are the SDK's own codes for a closed connection and a timeout; a
    server may send them too (they are in JSON-RPC's range for servers' errors). Its answer is
    a rejection, never taken for a crash or a timeout: the session and the process stay."""
    before = _pid(_call(raw, "ok"))
    with pytest.raises(MCPServerError) as caught:
        raw.call_tool_sync("echo", {"x": f"error:{code}"})
    assert caught.value.kind == "protocol"
    assert f"rejected the request: refused by {before}" in str(caught.value)
    assert _pid(_call(raw, "ok")) == before  # the same process: the session was kept


def test_bytes_that_are_not_utf8_are_replaced_not_a_dead_session(raw: MCPClient) -> None:
    """One bad byte on the server's stdout stopped the SDK's reader: every later request
    waited for its timeout."""
    text = _call(raw, "non_utf8")
    assert "bad \ufffd\ufffd bytes" in text
    assert _pid(text) == _pid(_call(raw, "ok"))


def test_a_result_of_the_wrong_shape_is_one_line_and_keeps_the_session(raw: MCPClient) -> None:
    before = _pid(_call(raw, "ok"))
    with pytest.raises(MCPServerError) as caught:
        raw.call_tool_sync("echo", {"x": "bad_shape"})
    message = str(caught.value)
    assert caught.value.kind == "protocol"
    assert "\n" not in message and "answered a result that is not MCP" in message
    assert "content" in message  # what was wrong with it
    assert _pid(_call(raw, "ok")) == before


def test_structured_content_beyond_64_bits_is_text_for_the_model(raw: MCPClient) -> None:
    """orjson refuses integers beyond 64 bits: the model got 'TypeError: Integer exceeds
    64-bit range' as if the tool had failed."""
    result = raw.call_tool_sync("echo", {"x": "bigint"})
    assert result.structured_content is not None
    assert json.loads(result_text(result)) == {"n": 10**30,
                                               "pid": result.structured_content["pid"]}


def test_a_tool_listed_twice_is_named_in_one_clear_error() -> None:
    """The library's own message ("registered already, pass replace=True") told the user to
    pass an option no MCP function has; ``mcp import`` wrote two specs of one name."""
    with pytest.raises(ToolError) as caught:
        mcp_library(f"{RAW} twice", connect_timeout=20)
    message = str(caught.value)
    assert "lists the tool 'echo' 2 times" in message and "replace=True" not in message
    imported = import_specs(f"{RAW} twice", connect_timeout=20)
    assert imported.specs == ()
    assert imported.problems == ("tool 'echo': the server lists 2 tools of this name",)
