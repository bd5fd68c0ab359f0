"""Fixtures of the MCP tests: real servers over stdio and over streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="needs the mcp extra: pip install 'gramagent[mcp]'")
pytest.importorskip("mcp_server_time", reason="needs mcp-server-time (in the test extra)")

from mcp_servers import clock_server  # noqa: E402

from gramagent.mcp import running_http  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TIME_AGENT = ROOT / "examples" / "time_agent.gram"
PYTHON = shlex.quote(sys.executable)

TIME_SERVER = f"mcp:stdio:{PYTHON} -m mcp_server_time"
"""mcp-server-time over stdio: a real MCP server that nobody here wrote."""


def fault_server(mode: str) -> str:
    """A misbehaving stdio server of tests/mcp/mcp_servers.py."""
    return f"mcp:stdio:{PYTHON} {shlex.quote(str(HERE / 'mcp_servers.py'))} {mode}"


@pytest.fixture(scope="module")
def clock_url() -> Iterator[str]:
    """The SDK-built clock server over streamable HTTP on a free port of 127.0.0.1."""
    with running_http(clock_server()) as url:
        yield url
