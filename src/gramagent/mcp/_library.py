"""A ToolLibrary whose tools are the tools of an MCP server: :func:`mcp_library`.

Each tool of the server becomes a :class:`~gramagent.Tool` with the server's name,
description and ``inputSchema``, so binding an agent checks its gram specs against the
server's contracts exactly as it checks Python tools (every mismatch reported at once). The
tools are async: a call goes to the server through the library's :class:`MCPClient`.

What the model sees of a result: the text blocks of its content, joined by blank lines (other
blocks as a one-line note of what they are); with no content, the structured content as JSON.
A result the server marks ``isError`` and a failing server (timeout, crash, exit) become error
results (:class:`MCPToolError`, :class:`~gramagent.errors.MCPServerError`), never a hang.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import mcp_types as types

from gramagent._runtime.invoke import render_output
from gramagent._runtime.library import Tool, ToolLibrary
from gramagent._runtime.limits import INHERIT, Inherit
from gramagent.errors import ToolError
from gramagent.mcp._address import ServerAddress
from gramagent.mcp._client import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_TIMEOUT,
    MCPClient,
)

__all__ = ["MCPToolError", "MCPToolLibrary", "amcp_library", "mcp_library", "mcp_tool",
           "result_text"]


class MCPToolError(Exception):
    """The server ran the tool and reported an error (``isError``); the model sees the text."""


class MCPToolLibrary(ToolLibrary):
    """A :class:`~gramagent.ToolLibrary` of an MCP server's tools; holds its client.

    Close it (or use it as a context manager) to end the session; it is closed at exit
    otherwise.
    """

    def __init__(self, client: MCPClient, tools: Iterable[Tool] = ()) -> None:
        super().__init__(tools)
        self.client = client

    def close(self) -> None:
        """End the server session (stops a stdio server's process)."""
        self.client.close()

    def __enter__(self) -> MCPToolLibrary:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MCPToolLibrary({str(self.client.server)!r}, {list(self.names())!r})"


def mcp_library(
    server: str | ServerAddress | list[str], *,
    timeout: float = DEFAULT_TIMEOUT,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    tool_timeout: float | None | Inherit = INHERIT,
    only: Iterable[str] | None = None,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> MCPToolLibrary:
    """Connect to an MCP server and make a library of its tools.

    Example:
        >>> library = mcp_library("mcp:stdio:python -m mcp_server_time")  # doctest: +SKIP
        >>> bound = library.bind(load_agent("time.gram"))  # doctest: +SKIP

    Mix with Python tools: :func:`~gramagent.mcp.combine_libraries` (or
    ``ToolLibrary([*python_library, *library])``). In async code, ``await``
    :func:`amcp_library` instead: this function blocks until the tools are listed.

    Args:
        server: ``mcp:stdio:COMMAND ARGS...``, ``mcp:http://HOST:PORT/PATH`` (the ``mcp:``
            prefix is optional), a list of command words, or an address.
        timeout: seconds one MCP request may take.
        connect_timeout: seconds to launch or reach the server and shake hands.
        tool_timeout: the tools' :attr:`~gramagent.Tool.timeout` in a run (default: the
            run's ``tool_timeout``).
        only: keep only these tools (every name must exist on the server).
        max_message_bytes: the most bytes one reply of a server over HTTP may have; a longer
            one fails its call (see :class:`~gramagent.mcp.MCPClient`).

    Raises:
        MCPServerError: the server could not be launched or reached, or failed to list its
            tools in time.
        ToolError: ``only`` names a tool the server does not have, or the server lists two
            tools of one name.
    """
    client = MCPClient(server, timeout=timeout, connect_timeout=connect_timeout,
                       max_message_bytes=max_message_bytes)
    try:
        return _library(client, client.list_tools(), tool_timeout, only)
    except BaseException:
        client.close()
        raise


async def amcp_library(
    server: str | ServerAddress | list[str], *,
    timeout: float = DEFAULT_TIMEOUT,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    tool_timeout: float | None | Inherit = INHERIT,
    only: Iterable[str] | None = None,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> MCPToolLibrary:
    """:func:`mcp_library` for async code: the event loop runs on while the server starts."""
    client = MCPClient(server, timeout=timeout, connect_timeout=connect_timeout,
                       max_message_bytes=max_message_bytes)
    try:
        return _library(client, await client.alist_tools(), tool_timeout, only)
    except BaseException:
        await client.aclose()
        raise


def _library(client: MCPClient, listed: list[types.Tool],
             tool_timeout: float | None | Inherit, only: Iterable[str] | None
             ) -> MCPToolLibrary:
    counts = Counter(t.name for t in listed)
    twice = [f"MCP server {client.server} lists the tool {name!r} {n} times (a name must "
             "name one tool)" for name, n in counts.items() if n > 1]
    if twice:
        raise ToolError(twice)
    if only is not None:
        wanted = list(only)
        have = {t.name for t in listed}
        missing = [n for n in wanted if n not in have]
        if missing:
            raise ToolError([f"MCP server {client.server} has no tool {n!r} (it has: "
                             f"{', '.join(sorted(have)) or 'no tools'})" for n in missing])
        listed = [t for t in listed if t.name in set(wanted)]
    return MCPToolLibrary(client, [mcp_tool(client, t, timeout=tool_timeout) for t in listed])


def mcp_tool(client: MCPClient, listed: types.Tool, *,
             timeout: float | None | Inherit = INHERIT) -> Tool:
    """The :class:`~gramagent.Tool` calling one listed tool of ``client``'s server."""
    name = listed.name

    async def invoke(**arguments: object) -> str:
        result = await client.call_tool(name, arguments)
        text = result_text(result)
        if result.is_error:
            raise MCPToolError(text or "the tool failed without a message")
        return text

    invoke.__name__ = name
    return Tool(name, listed.description or "", dict(listed.input_schema), invoke,
                timeout=timeout)


def result_text(result: types.CallToolResult) -> str:
    """The text of a tool result, as the model sees it."""
    parts = [_block_text(block) for block in result.content]
    if not parts and result.structured_content is not None:
        # Any JSON value (orjson alone refused integers beyond 64 bits: a TypeError the model
        # read as the tool's failure).
        return render_output(result.structured_content, None)
    return "\n\n".join(parts)


def _block_text(block: object) -> str:
    if isinstance(block, types.TextContent):
        text: str = block.text
        return text
    if isinstance(block, types.ImageContent | types.AudioContent):
        return f"[{block.type}: {block.mime_type}, {len(block.data) * 3 // 4} bytes]"
    if isinstance(block, types.EmbeddedResource):
        contents = block.resource
        if isinstance(contents, types.TextResourceContents):
            resource_text: str = contents.text
            return resource_text
        return f"[resource {contents.uri}: {contents.mime_type or 'binary'}]"
    if isinstance(block, types.ResourceLink):
        return f"[resource link {block.uri}" + (f": {block.description}]" if block.description
                                                else "]")
    return f"[{getattr(block, 'type', type(block).__name__)} content]"
