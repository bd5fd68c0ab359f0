"""A hand-written MCP server over streamable HTTP (aiohttp, no SDK), to send bodies of any size.

``python tests/gramagent_mcp/raw_http_server.py`` listens on a free port of 127.0.0.1, prints
its endpoint's URL on one line, and answers JSON-RPC posted to ``/mcp``: ``initialize``,
``tools/list`` (one tool, ``echo``, ``{"x": string}``) and ``tools/call``, as its ``x`` says:

- ``json:N``: a result whose text is N bytes, as one JSON body with its Content-Length;
- ``chunked:N``: the same, sent in pieces of 64 KiB without a Content-Length;
- ``sse:N``: the same as one event of an event stream;
- ``endless``: a JSON body that never ends (pieces of 64 KiB, as long as the client reads);
- anything else: the arguments back, as text, after the number of handshakes so far
  (``handshakes N:``), so a test sees whether the client kept its session.

Notifications get 202; the GET stream and DELETE get 405 (the server offers neither).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from aiohttp import web

HANDSHAKES = 0
PIECE = 64 * 1024
TOOL = {"name": "echo", "description": "Echo x",
        "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}}}


def _message(mid: Any, result: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}).encode()


def _text_result(mid: Any, size: int) -> bytes:
    """A result whose one text block is ``size`` bytes (the body a little longer)."""
    head = f"handshakes {HANDSHAKES}: "
    return _message(mid, {"content": [{"type": "text",
                                       "text": head + "x" * max(0, size - len(head))}]})


async def _pieces(request: web.Request, body: bytes, content_type: str) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": content_type})
    await response.prepare(request)
    for start in range(0, len(body), PIECE):
        await response.write(body[start:start + PIECE])
    await response.write_eof()
    return response


async def _endless(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    await response.prepare(request)
    await response.write(b'{"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": '
                         b'"text", "text": "')
    piece = b"x" * PIECE
    while True:  # until the client stops reading (the write then fails)
        await response.write(piece)
        await asyncio.sleep(0)


async def _call(request: web.Request, mid: Any, arguments: Any) -> web.StreamResponse:
    mode = str(arguments.get("x")) if isinstance(arguments, dict) else ""
    kind, _, size = mode.partition(":")
    if kind == "json":
        return web.Response(body=_text_result(mid, int(size)), content_type="application/json")
    if kind == "chunked":
        return await _pieces(request, _text_result(mid, int(size)), "application/json")
    if kind == "sse":
        event = b"event: message\ndata: " + _text_result(mid, int(size)) + b"\n\n"
        return await _pieces(request, event, "text/event-stream")
    if kind == "endless":
        return await _endless(request)
    text = f"handshakes {HANDSHAKES}: {json.dumps(arguments)}"
    return web.json_response({"jsonrpc": "2.0", "id": mid,
                              "result": {"content": [{"type": "text", "text": text}]}})


async def _post(request: web.Request) -> web.StreamResponse:
    message = await request.json()
    mid, method = message.get("id"), message.get("method")
    if mid is None:  # a notification
        return web.Response(status=202)
    if method == "initialize":
        global HANDSHAKES
        HANDSHAKES += 1
        result = {"protocolVersion": message["params"]["protocolVersion"],
                  "capabilities": {"tools": {}}, "serverInfo": {"name": "raw-http", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [TOOL]}
    elif method == "tools/call":
        return await _call(request, mid, message["params"].get("arguments"))
    else:
        result = {}
    return web.Response(body=_message(mid, result), content_type="application/json")


async def _not_offered(request: web.Request) -> web.Response:
    return web.Response(status=405)


async def main() -> None:
    app = web.Application()
    app.router.add_post("/mcp", _post)
    app.router.add_get("/mcp", _not_offered)
    app.router.add_delete("/mcp", _not_offered)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    print(f"http://127.0.0.1:{port}/mcp", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
