"""Shared names of the MCP tests: the servers they talk to and the example agent."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TIME_AGENT = ROOT / "examples" / "time_agent.gram"
PYTHON = shlex.quote(sys.executable)

TIME_SERVER = f"mcp:stdio:{PYTHON} -m mcp_server_time"
"""mcp-server-time over stdio: a real MCP server that nobody here wrote."""


def fault_server(mode: str) -> str:
    """A misbehaving stdio server of tests/gramagent_mcp/mcp_servers.py."""
    return f"mcp:stdio:{PYTHON} {shlex.quote(str(HERE / 'mcp_servers.py'))} {mode}"
