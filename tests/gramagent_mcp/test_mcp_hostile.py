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
from mcp_support import HERE, PYTHON

from gramagent.mcp import MCPClient, result_text

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


def test_bytes_that_are_not_utf8_are_replaced_not_a_dead_session(raw: MCPClient) -> None:
    """One bad byte on the server's stdout stopped the SDK's reader: every later request
    waited for its timeout."""
    text = _call(raw, "non_utf8")
    assert "bad \ufffd\ufffd bytes" in text
    assert _pid(text) == _pid(_call(raw, "ok"))


def test_structured_content_beyond_64_bits_is_text_for_the_model(raw: MCPClient) -> None:
    """orjson refuses integers beyond 64 bits: the model got 'TypeError: Integer exceeds
    64-bit range' as if the tool had failed."""
    result = raw.call_tool_sync("echo", {"x": "bigint"})
    assert result.structured_content is not None
    assert json.loads(result_text(result)) == {"n": 10**30,
                                               "pid": result.structured_content["pid"]}
