"""A hand-written MCP server over stdio (no SDK), to send what the SDK never would.

``python tests/gramagent_mcp/raw_server.py`` speaks newline-delimited JSON-RPC on its stdin
and stdout: it answers ``initialize`` and lists one tool, ``echo`` (``{"x": string}``), and
answers each ``tools/call`` as its ``x`` says:

- anything else: the arguments back, as text;
- ``error:CODE``: a JSON-RPC error response with that code (the tool is fine; the server
  refuses the call), the process id and the arguments in its message (as servers often
  quote what they refuse);
- ``non_utf8``: a result whose text holds bytes that are not UTF-8 (``\\xff\\xfe``);
- ``bad_shape``: a result whose ``content`` is a string, not a list;
- ``bigint``: no content, structured content holding an integer beyond 64 bits.

Every answer that succeeds carries the process id, so a test sees whether the server was
restarted. ``raw_server.py twice`` lists ``echo`` twice; ``raw_server.py markup`` lists a
second tool, without a description, named ``[/dim]echo`` (rich markup's closing tag).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

PID = os.getpid()
TOOL = {"name": "echo", "description": "Echo x",
        "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}}}


def _send(data: bytes) -> None:
    sys.stdout.buffer.write(data + b"\n")
    sys.stdout.buffer.flush()


def _answer(mid: Any, result: Any) -> None:
    _send(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}).encode())


def _call(mid: Any, arguments: Any) -> None:
    mode = str(arguments.get("x")) if isinstance(arguments, dict) else ""
    if mode.startswith("error:"):
        code = int(mode.split(":", 1)[1].split()[0])
        _send(json.dumps({"jsonrpc": "2.0", "id": mid, "error": {
            "code": code, "message": f"refused by {PID}: {json.dumps(arguments)}"}}).encode())
    elif mode == "non_utf8":
        _send(b'{"jsonrpc": "2.0", "id": %s, "result": {"content": [{"type": "text", '
              b'"text": "pid %d: bad \xff\xfe bytes"}]}}' % (json.dumps(mid).encode(), PID))
    elif mode == "bad_shape":
        _answer(mid, {"content": f"pid {PID}"})
    elif mode == "bigint":
        _answer(mid, {"content": [], "structuredContent": {"n": 10**30, "pid": PID}})
    else:
        _answer(mid, {"content": [{"type": "text", "text": f"pid {PID}: {json.dumps(arguments)}"}]})


def main() -> None:
    for raw in sys.stdin.buffer:
        message = json.loads(raw)
        mid, method = message.get("id"), message.get("method")
        if mid is None:  # a notification
            continue
        if method == "initialize":
            _answer(mid, {"protocolVersion": message["params"]["protocolVersion"],
                          "capabilities": {"tools": {}},
                          "serverInfo": {"name": "raw", "version": "1"}})
        elif method == "tools/list":
            extra = {"twice": [TOOL], "markup": [{"name": "[/dim]echo",
                                                  "inputSchema": {"type": "object"}}]}
            _answer(mid, {"tools": [TOOL, *extra.get(" ".join(sys.argv[1:]), [])]})
        elif method == "tools/call":
            _call(mid, message["params"].get("arguments"))
        else:
            _answer(mid, {})


if __name__ == "__main__":
    main()
