"""MCP servers built with the SDK, for the tests: a clock over HTTP, and misbehaving servers.

``python tests/gramagent_mcp/mcp_servers.py MODE`` runs one over stdio:

- ``silent``: reads its stdin and never answers (not even ``initialize``);
- ``faulty``: a working server whose tools misbehave: ``pid`` (its process id), ``crash``
  (the process exits mid-call), ``hang`` (never answers), ``fail`` (an ``isError`` result),
  ``noisy`` (writes to its stderr, then answers), ``slow`` (answers its process id after 3 s).

:func:`clock_server` is the SDK server the HTTP tests use: ``get_current_time`` with the
schema of mcp-server-time's tool, and ``lookup``, whose schema uses ``$ref`` (which gram
cannot write).
"""

from __future__ import annotations

import os
import sys
import time
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server

TIMEZONE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"timezone": {
        "type": "string", "title": "Timezone",
        "description": "IANA timezone name (e.g., 'America/New_York', 'Europe/London'). Use "
                       "'Etc/UTC' as local timezone if no timezone provided by the user."}},
    "required": ["timezone"],
    "title": "get_current_timeArguments",
}
REF_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"where": {"$ref": "#/$defs/Place"}},
    "required": ["where"],
    "$defs": {"Place": {"type": "object", "properties": {"city": {"type": "string"}}}},
}


def _text(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                is_error=error)


def clock_server() -> Server[Any]:
    """An SDK server with ``get_current_time`` (real clock) and ``lookup`` (a $ref schema)."""

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[
            types.Tool(name="get_current_time",
                       description="Get current time in a specific timezone",
                       input_schema=TIMEZONE_SCHEMA),
            types.Tool(name="lookup", description="Look a place up", input_schema=REF_SCHEMA),
        ])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        args = params.arguments or {}
        if params.name == "get_current_time":
            try:
                now = datetime.now(ZoneInfo(str(args.get("timezone"))))
            except (ZoneInfoNotFoundError, ValueError) as exc:
                return _text(f"Invalid timezone: {exc}", error=True)
            return _text(f'{{"timezone": "{args["timezone"]}", '
                         f'"datetime": "{now.isoformat(timespec="seconds")}"}}')
        if params.name == "lookup":
            return _text(f"found {args}")
        return _text(f"unknown tool {params.name}", error=True)

    return Server("clock", on_list_tools=list_tools, on_call_tool=call_tool)


def faulty_server() -> Server[Any]:
    """A server whose tools crash, hang, fail or talk on stderr."""
    names = ("pid", "crash", "hang", "fail", "noisy", "slow")

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        schema = {"type": "object", "properties": {}}
        return types.ListToolsResult(tools=[
            types.Tool(name=n, description=f"The {n} tool", input_schema=schema)
            for n in names])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name == "crash":
            sys.stderr.write("faulty server: crashing now\n")
            sys.stderr.flush()
            os._exit(3)
        if params.name == "hang":
            await anyio.sleep_forever()
        if params.name == "slow":
            await anyio.sleep(3)
        if params.name == "fail":
            return _text("the fail tool failed on purpose", error=True)
        if params.name == "noisy":
            sys.stderr.write("faulty server: a line on stderr\n")
            sys.stderr.flush()
        return _text(str(os.getpid()))

    return Server("faulty", on_list_tools=list_tools, on_call_tool=call_tool)


async def _serve(server: Server[Any]) -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main(mode: str) -> None:
    if mode == "silent":
        for _ in sys.stdin:
            pass
        time.sleep(3600)
    elif mode == "faulty":
        anyio.run(_serve, faulty_server())
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1])
