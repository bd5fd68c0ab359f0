"""A stdio MCP server that answers what the SDK never sends (tests/gramagent_mcp/raw_server.py,
a real process): error responses with any code, bytes that are not UTF-8, results of the
wrong shape. Each is a clear answer or error, at once, and the session (the server's process
and its state) is kept when the server did answer.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp_support import HERE, PYTHON

from gramagent.errors import MCPServerError, ToolError
from gramagent.mcp import MCPClient, import_specs, mcp_library, result_text

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

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


_TRACED_RUN = """
import asyncio, json, sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)  # as `gramagent run --otel` does

from gramagent import Agent, ToolSpec, run_agent
from gramagent.mcp import mcp_library
from gramagent.testing import ScriptedServer, call, reply

secret = sys.argv[2]
spec = ToolSpec.create("echo", "Echo x", "(x::String {required: false})==>(::String)")
agent = Agent(name="a", model="openai/scripted", instruction="x", tools=(spec,))

async def main():
    with mcp_library(sys.argv[1], connect_timeout=20) as library, ScriptedServer(
            [call("echo", {"x": "error:-32602 " + secret}), reply("done")]) as model:
        response = await run_agent(agent, "go", library=library, model="openai/scripted",
                                   base_url=model.base_url, api_key="sk-test")
    assert response.tool_invocations[0].error_type == "tool_exception"
    assert secret in response.tool_invocations[0].error  # the model is told, as it should

asyncio.run(main())
for span in exporter.get_finished_spans():
    print(json.dumps({"scope": span.instrumentation_scope.name, "text": " ".join([
        span.name, repr(dict(span.attributes or {})), repr(span.status.description),
        *(repr(e.attributes) for e in span.events)])}))
"""


def test_traces_carry_no_argument_a_server_quotes_in_its_error() -> None:
    """The MCP SDK traces each request it sends, through the process's tracer provider (set by
    `gramagent run --otel`), and a failed request's span status is the server's error message,
    which quotes the arguments here (as servers often do). gramagent's spans never carry
    arguments (docs/tracing.md): the SDK's spans of gramagent's MCP clients are not made.
    In a process of its own: a global tracer provider can be set once."""
    secret = "Alice-Secret-Argument-91c2"
    done = subprocess.run([sys.executable, "-c", _TRACED_RUN, RAW, secret],
                          capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    spans = [json.loads(line) for line in done.stdout.splitlines()]
    assert any(s["scope"] == "gramagent" and "execute_tool echo" in s["text"] for s in spans)
    assert not [s for s in spans if secret in s["text"]]


def test_mcp_import_prints_a_tool_name_as_written_never_as_markup() -> None:
    """The left-out lines quote the server's tool names; printed as rich markup, a name with a
    closing tag stopped `gramagent mcp import` with an internal error."""
    done = subprocess.run([sys.executable, "-m", "gramagent", "mcp", "import", f"{RAW} markup"],
                          capture_output=True, text=True, timeout=90)
    assert done.returncode == 1, done.stderr
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr
    assert "left out: tool '[/dim]echo'" in done.stderr
    assert "[echo:Tool" in done.stdout  # the good tool is written
