"""What an MCP server over HTTP may send is bounded (tests/gramagent_mcp/raw_http_server.py, a
real server process on 127.0.0.1): a reply past ``max_message_bytes`` fails its request at
once, without being read to its end, whatever its shape (a JSON body with or without its
length, an event of an event stream, a body that never ends), and the session is kept.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp_support import HERE

from gramagent.errors import ConfigurationError, MCPServerError
from gramagent.mcp import MCPClient

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

LIMIT = 200_000
ENVELOPE = 200
"""More than the bytes a reply adds around its text (the JSON-RPC message, the event's
fields): a text this much under the limit passes in every shape."""


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    server = subprocess.Popen([sys.executable, str(HERE / "raw_http_server.py")],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        yield server.stdout.readline().strip()
    finally:
        server.kill()
        server.wait()
        if server.stdout is not None:
            server.stdout.close()


@pytest.fixture(scope="module")
def bounded(url: str) -> Iterator[MCPClient]:
    with MCPClient(f"mcp:{url}", timeout=60, max_message_bytes=LIMIT) as client:
        yield client


def _text(client: MCPClient, x: str) -> str:
    result = client.call_tool_sync("echo", {"x": x})
    return " ".join(getattr(block, "text", "") for block in result.content)


def _handshakes(client: MCPClient) -> int:
    found = re.match(r"handshakes (\d+):", _text(client, "hello"))
    assert found is not None
    return int(found.group(1))


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=st.sampled_from(["json", "chunked", "sse"]),
       size=st.one_of(st.integers(0, LIMIT - ENVELOPE), st.integers(LIMIT + 1, 4 * LIMIT)))
def test_a_reply_is_read_if_within_the_limit_and_refused_past_it(bounded: MCPClient,
                                                                 shape: str, size: int) -> None:
    before = _handshakes(bounded)
    if size <= LIMIT - ENVELOPE:
        assert len(_text(bounded, f"{shape}:{size}")) == max(size, len("handshakes 1: "))
    else:
        with pytest.raises(MCPServerError) as caught:
            bounded.call_tool_sync("echo", {"x": f"{shape}:{size}"})
        assert caught.value.kind == "protocol"
        assert f"sent a reply of more than {LIMIT} bytes (max_message_bytes)" in str(caught.value)
    assert _handshakes(bounded) == before  # the session was kept


def test_a_body_that_never_ends_fails_at_the_limit_not_at_the_timeout(bounded: MCPClient
                                                                      ) -> None:
    """Read to its end, it would fill the memory until the request's timeout (60 s here): the
    error's kind says which of the two stopped it."""
    with pytest.raises(MCPServerError) as caught:
        bounded.call_tool_sync("echo", {"x": "endless"})
    assert caught.value.kind == "protocol", caught.value
    assert "max_message_bytes" in str(caught.value)


def test_the_default_limit_reads_a_long_reply_the_sdk_refused_as_an_event(url: str) -> None:
    """The SDK's own limit on an event was 1 MiB, while a JSON body had none: both shapes now
    have the one limit, 32 MiB by default."""
    with MCPClient(f"mcp:{url}", timeout=60) as client:
        assert client.max_message_bytes == 32 * 1024 * 1024
        assert len(_text(client, "sse:2000000")) == 2_000_000
        with pytest.raises(MCPServerError, match="max_message_bytes"):
            client.call_tool_sync("echo", {"x": "chunked:40000000"})


@pytest.mark.parametrize("value", [0, -1, 1.5, True, None, "10"])
def test_a_limit_that_is_not_a_positive_whole_number_is_refused(value: object) -> None:
    with pytest.raises(ConfigurationError, match="max_message_bytes must be"):
        MCPClient("mcp:http://127.0.0.1:1/mcp", max_message_bytes=value)  # type: ignore[arg-type]
