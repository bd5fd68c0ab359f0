"""The floor of ``bench/loop_overhead.py``: a minimal hand-written tool loop on bare httpx.

The same HTTP client gramagent uses (one pooled ``httpx.AsyncClient``, bodies encoded with
orjson) and the same requests, with nothing else: no validation, no events, no limits. Whatever
gramagent spends above this is the price of its loop.

Run alone: ``python bench/floor_loop.py --base-url http://127.0.0.1:PORT/v1 --api chat``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))

from _harness import (  # noqa: E402
    INSTRUCTION,
    TOOL_DESCRIPTION,
    TOOL_NAME,
    TOOL_PARAMETERS,
    USER_MESSAGE,
    Contender,
    main,
    say_hello,
)

MODEL = "gpt-4o-mini"
HEADERS = {
    "Authorization": "Bearer sk-bench-floor",
    "Content-Type": "application/json",
    "Accept": "application/json",
}


def client(base_url: str) -> httpx.AsyncClient:
    """One pooled client, sized for the concurrent phase."""
    return httpx.AsyncClient(
        base_url=base_url,
        headers=HEADERS,
        timeout=60.0,
        limits=httpx.Limits(max_connections=256, max_keepalive_connections=256),
    )


def run_chat(http: httpx.AsyncClient) -> Any:
    tools = [{"type": "function", "function": {
        "name": TOOL_NAME, "description": TOOL_DESCRIPTION, "parameters": TOOL_PARAMETERS}}]

    async def run() -> str:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": INSTRUCTION},
            {"role": "user", "content": USER_MESSAGE},
        ]
        while True:
            body = {"model": MODEL, "messages": messages, "tools": tools,
                    "tool_choice": "auto", "parallel_tool_calls": True}
            reply = await http.post("/chat/completions", content=orjson.dumps(body))
            reply.raise_for_status()
            message = orjson.loads(reply.content)["choices"][0]["message"]
            calls = message.get("tool_calls")
            if not calls:
                return message.get("content") or ""
            messages.append({"role": "assistant", "content": message.get("content"),
                             "tool_calls": calls})
            for call in calls:
                arguments = orjson.loads(call["function"]["arguments"] or "{}")
                messages.append({"role": "tool", "tool_call_id": call["id"],
                                 "content": say_hello(**arguments)})

    return run


def run_responses(http: httpx.AsyncClient) -> Any:
    tools = [{"type": "function", "name": TOOL_NAME, "description": TOOL_DESCRIPTION,
              "parameters": TOOL_PARAMETERS}]

    async def run() -> str:
        items: list[dict[str, Any]] = [
            {"role": "system", "content": INSTRUCTION},
            {"role": "user", "content": USER_MESSAGE},
        ]
        while True:
            body = {"model": MODEL, "input": items, "tools": tools, "tool_choice": "auto",
                    "parallel_tool_calls": True, "store": False}
            reply = await http.post("/responses", content=orjson.dumps(body))
            reply.raise_for_status()
            output = orjson.loads(reply.content)["output"]
            calls = [item for item in output if item["type"] == "function_call"]
            if not calls:
                return "".join(part["text"] for item in output if item["type"] == "message"
                               for part in item["content"] if part["type"] == "output_text")
            for call in calls:
                arguments = orjson.loads(call["arguments"] or "{}")
                items.append({"type": "function_call", "call_id": call["call_id"],
                              "name": call["name"], "arguments": call["arguments"]})
                items.append({"type": "function_call_output", "call_id": call["call_id"],
                              "output": say_hello(**arguments)})

    return run


async def setup(base_url: str, api: str) -> Contender:
    http = client(base_url)
    run = run_chat(http) if api == "chat" else run_responses(http)
    return Contender(run=run, close=http.aclose, version=f"httpx {httpx.__version__}")


if __name__ == "__main__":
    main(setup)
