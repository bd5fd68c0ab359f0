"""Misbehaving MCP servers end in a clear message within the configured timeout, never a hang.

The servers are real processes (tests/gramagent_mcp/mcp_servers.py over stdio) or real closed ports;
pytest-timeout stops any test that would hang, which would be a failure of what is tested.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import subprocess
import sys

import pytest
from mcp_servers import clock_server
from mcp_support import TIME_AGENT, fault_server

from gramagent import Agent, ToolSpec, load_agent, run_agent
from gramagent.errors import ConfigurationError, MCPServerError
from gramagent.mcp import MCPClient, mcp_library, running_http
from gramagent.testing import ScriptedServer, call, reply

pytestmark = [pytest.mark.timeout(90), pytest.mark.slow]

FAULTY = fault_server("faulty")


def test_a_server_that_never_answers_initialize_times_out() -> None:
    with pytest.raises(MCPServerError) as caught:
        mcp_library(fault_server("silent"), connect_timeout=2)
    assert caught.value.kind == "timeout"
    assert "did not complete the MCP handshake within 2 s" in str(caught.value)


def test_a_command_that_does_not_exist_cannot_start() -> None:
    with pytest.raises(MCPServerError) as caught:
        mcp_library("mcp:stdio:gramagent-no-such-mcp-server --x")
    assert caught.value.kind == "start"
    assert "could not be launched" in str(caught.value)


def test_a_server_that_exits_at_once_is_a_closed_connection() -> None:
    with pytest.raises(MCPServerError) as caught:
        mcp_library(f"mcp:stdio:{sys.executable} -c pass", connect_timeout=10)
    assert caught.value.kind in ("closed", "timeout")


def test_an_http_port_nobody_listens_on_cannot_be_reached() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(MCPServerError) as caught:
        mcp_library(f"mcp:http://127.0.0.1:{port}/mcp", connect_timeout=5)
    assert caught.value.kind in ("start", "closed")


@pytest.mark.parametrize("name, kind, message", [
    ("crash", "closed", "closed the connection (it exited or crashed)"),  # dies mid-call
    ("hang", "timeout", "did not answer within 1.5 s"),  # stops answering
])
async def test_a_failing_server_is_an_error_and_restarts_on_the_next_call(
        name: str, kind: str, message: str) -> None:
    with MCPClient(FAULTY, timeout=1.5, connect_timeout=15) as client:
        first_pid = (await client.call_tool("pid", {})).content[0].text  # type: ignore[union-attr]
        with pytest.raises(MCPServerError) as caught:
            await client.call_tool(name, {})
        assert caught.value.kind == kind
        assert message in str(caught.value)
        second_pid = (await client.call_tool("pid", {})).content[0].text  # type: ignore[union-attr]
    assert second_pid != first_pid  # a new process


async def test_a_call_cut_short_by_another_calls_timeout_says_so() -> None:
    """Two calls in flight; one times out and the session is dropped (the server may be stuck):
    the other call fails too, and says why: it was told the server 'exited or crashed',
    which it had not (gramagent stopped it)."""
    with MCPClient(FAULTY, timeout=20, connect_timeout=15) as client:
        await client.call_tool("pid", {})
        slow = asyncio.ensure_future(client.call_tool("slow", {}))
        with pytest.raises(MCPServerError) as hung:
            await client.call_tool("hang", {}, timeout=1)
        assert hung.value.kind == "timeout"
        with pytest.raises(MCPServerError) as caught:
            await slow
    assert caught.value.kind == "closed"
    message = str(caught.value)
    assert "exited or crashed" not in message
    assert "another request to it did not answer within 1 s" in message


async def test_a_stdio_server_that_died_while_idle_is_restarted_before_the_next_call() -> None:
    with MCPClient(FAULTY, timeout=10, connect_timeout=15) as client:
        first_pid = int((await client.call_tool("pid", {})).content[0].text)  # type: ignore[union-attr]
        os.kill(first_pid, signal.SIGKILL)
        for _ in range(100):  # the kill lands asynchronously
            try:
                os.kill(first_pid, 0)
            except ProcessLookupError:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.2)  # and the stderr pipe's reader sees its end of file
        result = await client.call_tool("pid", {})
    assert not result.is_error
    assert int(result.content[0].text) != first_pid  # type: ignore[union-attr]


async def test_an_http_server_that_went_away_is_an_error_not_a_hang() -> None:
    with running_http(clock_server()) as url:
        library = mcp_library(f"mcp:{url}", timeout=5, connect_timeout=5)
    t = library.lookup("get_current_time")
    assert t is not None
    with library, pytest.raises(MCPServerError) as caught:
        await t.invoke(timezone="UTC")
    assert caught.value.kind in ("start", "closed", "timeout")
    assert url in str(caught.value)


async def test_in_a_run_the_model_sees_each_failure_and_the_run_ends() -> None:
    agent = load_agent(TIME_AGENT)
    # The faulty server's tools under the names the model calls: same contract, no checks.
    with mcp_library(FAULTY, timeout=1.5, connect_timeout=15) as library:
        script = [call("crash"), call("hang"), call("fail"), call("pid"), reply("done")]
        with ScriptedServer(script) as model:
            specs = tuple(ToolSpec.create(n, f"The {n} tool", "()==>(::String)")
                          for n in ("crash", "hang", "fail", "pid"))
            faulty_agent = Agent(name="f", model=agent.model, instruction="x", tools=specs)
            response = await run_agent(faulty_agent, "go", library=library,
                                       model="openai/scripted", base_url=model.base_url,
                                       api_key="sk-test")
            sent = [m["content"] for m in model.requests[-1].body["messages"]
                    if m["role"] == "tool"]
    assert response.content == "done"
    kinds = [inv.error_type for inv in response.tool_invocations]
    assert kinds == ["tool_exception", "tool_exception", "tool_exception", None]
    assert "closed the connection" in sent[0]
    assert "did not answer within 1.5 s" in sent[1]
    assert "the fail tool failed on purpose" in sent[2]
    assert sent[3].isdigit()  # the server was restarted and answered


async def test_the_servers_stderr_goes_to_the_log_not_the_terminal(
        caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]) -> None:
    caplog.set_level(logging.INFO, logger="gramagent.mcp.server")
    with MCPClient(FAULTY, timeout=10, connect_timeout=15) as client:
        await client.call_tool("noisy", {})
    capfd.readouterr()  # nothing of the server reaches our stderr
    assert any("faulty server: a line on stderr" in r.getMessage() for r in caplog.records)
    out = capfd.readouterr()
    assert "faulty server" not in out.err and "faulty server" not in out.out


def test_the_cli_exits_with_one_line_when_the_server_never_answers() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gramagent", "run", str(TIME_AGENT), "hi",
         "--tools", fault_server("silent"), "--base-url", "http://127.0.0.1:9/v1",
         "--api-key", "sk-test"],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "GRAMAGENT_MCP_CONNECT_TIMEOUT": "2"})
    assert done.returncode == 1
    assert done.stderr.startswith("MCPServerError: MCP server")
    assert "within 2 s" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


@pytest.mark.parametrize(("option", "value"), [("timeout", float("nan")), ("timeout", 0),
                                               ("connect_timeout", float("inf")),
                                               ("connect_timeout", -1.0)])
def test_a_timeout_that_could_never_fire_or_never_wait_is_refused(option: str,
                                                                   value: float) -> None:
    """A nan timeout compares false with every time (it would never fire), inf never fires,
    0 or less never waits: refused when the client is made, the option named."""
    with pytest.raises(ConfigurationError, match=f"^MCPClient: {option} must be"):
        MCPClient("mcp:http://127.0.0.1:9/mcp", **{option: value})
