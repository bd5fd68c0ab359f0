"""MCP (Model Context Protocol): tools of MCP servers in a ToolLibrary, and the reverse.

- :func:`mcp_library` connects to a server (``mcp:stdio:python -m mcp_server_time``,
  ``mcp:http://127.0.0.1:8000/mcp``) and makes a :class:`~gramagent.ToolLibrary` of its
  tools: an agent's gram specs bind to them like to Python tools.
- :func:`import_specs` writes gram tool specs for a server's tools (``gramagent mcp import``).
- :func:`build_server` exposes a ToolLibrary (and optionally an agent) as an MCP server;
  :func:`serve_stdio` and :func:`serve_http` run it (``gramagent mcp serve``).

Needs the ``mcp`` extra (``pip install 'gramagent[mcp]'``); without it, using any of these
raises :class:`~gramagent.errors.ConfigurationError` naming that command. See docs/mcp.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gramagent._lazy import lazy_exports
from gramagent.mcp._address import HttpServer, ServerAddress, StdioServer, parse_server
from gramagent.mcp._sdk import INSTALL, require_sdk

if TYPE_CHECKING:
    from gramagent.mcp._client import MCPClient
    from gramagent.mcp._import import ImportedSpecs, import_specs
    from gramagent.mcp._library import (
        MCPToolError,
        MCPToolLibrary,
        amcp_library,
        mcp_library,
        result_text,
    )
    from gramagent.mcp._serve import build_server, running_http, serve_http, serve_stdio
    from gramagent.mcp._sources import combine_libraries

__all__ = [
    "HttpServer",
    "INSTALL",
    "ImportedSpecs",
    "MCPClient",
    "MCPToolError",
    "MCPToolLibrary",
    "ServerAddress",
    "StdioServer",
    "amcp_library",
    "build_server",
    "combine_libraries",
    "import_specs",
    "mcp_library",
    "parse_server",
    "require_sdk",
    "result_text",
    "running_http",
    "serve_http",
    "serve_stdio",
]

_NO_SDK = frozenset({"combine_libraries"})
"""Names usable without the SDK."""
_HOMES = {
    "MCPClient": "_client",
    "ImportedSpecs": "_import", "import_specs": "_import",
    "MCPToolError": "_library", "MCPToolLibrary": "_library", "combine_libraries": "_sources",
    "amcp_library": "_library", "mcp_library": "_library", "result_text": "_library",
    "build_server": "_serve", "running_http": "_serve", "serve_http": "_serve",
    "serve_stdio": "_serve",
}

_load, __dir__ = lazy_exports(globals(), _HOMES)


def __getattr__(name: str) -> Any:
    if name in _HOMES and name not in _NO_SDK:
        require_sdk()
    return _load(name)
