"""Fixtures of the MCP tests: real servers over stdio and over streamable HTTP on 127.0.0.1.

Without the ``mcp`` extra or mcp-server-time (both in the ``dev`` extra), the MCP tests are
not collected.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import pytest

MISSING = [name for name in ("mcp", "mcp_server_time") if importlib.util.find_spec(name) is None]
if MISSING:
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture(scope="module")
def clock_url() -> Iterator[str]:
    """The SDK-built clock server over streamable HTTP on a free port of 127.0.0.1."""
    from mcp_servers import clock_server

    from gramagent.mcp import running_http

    with running_http(clock_server()) as url:
        yield url
