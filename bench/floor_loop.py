"""The floor of ``bench/loop_overhead.py``: a minimal hand-written tool loop on bare aiohttp.

The same HTTP client gramagent uses, configured and called the way ``gramagent._models.http``
calls it (one pooled ``aiohttp.ClientSession``: the same default headers, timeouts, connector
and cookie jar; bodies encoded with orjson; ``post`` without redirects, the body read, the
connection released), and the same requests, with nothing else: no validation, no events, no
limits, no retries. Whatever gramagent spends above this is the price of its loop.

``--client httpx`` runs the same loop on one pooled ``httpx.AsyncClient`` instead (the client
gramagent used before), to compare the two clients.

``tools="async"`` / ``tools="thread"`` (``bench/peers/callgrind_rows.py``'s ``floor-async`` and
``floor-thread`` columns) run one turn's tool calls concurrently, the way gramagent must run
such tools: each call of an ``async def`` tool in a task of ``asyncio.gather``, each call of a
plain function in a thread pool (``run_in_executor``, gathered). The default, ``sequential``,
calls the plain function in turn: the floor the targets are judged on.

Run alone: ``python bench/floor_loop.py --base-url http://127.0.0.1:PORT/v1 --api chat``.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

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
    "User-Agent": "gramagent/0.1",
    "Content-Type": "application/json",
    "Accept": "application/json",
    "Authorization": "Bearer sk-bench-floor",
}

Post = Callable[[str, dict[str, Any]], Awaitable[Any]]
Outputs = Callable[[list[dict[str, Any]]], Awaitable[list[str]]]
"""Runs one turn's tool calls concurrently: their outputs, from their parsed arguments."""


async def _say_hello_async(personName: str = "world") -> str:  # noqa: N803
    return say_hello(personName)


async def gathered(arguments: list[dict[str, Any]]) -> list[str]:
    """The ``async`` floor: each call of an ``async def`` tool in a task of ``gather``."""
    return list(await asyncio.gather(*(_say_hello_async(**a) for a in arguments)))


def pooled(pool: ThreadPoolExecutor) -> Outputs:
    """The ``thread`` floor: each call of the plain function in ``pool``, gathered."""
    async def outputs(arguments: list[dict[str, Any]]) -> list[str]:
        loop = asyncio.get_running_loop()
        return list(await asyncio.gather(*(loop.run_in_executor(pool, partial(say_hello, **a))
                                           for a in arguments)))
    return outputs


async def aiohttp_client(base_url: str) -> tuple[Post, Callable[[], Awaitable[None]], str]:
    """``post(path, body) -> decoded JSON`` on one pooled aiohttp session, as gramagent's."""
    import aiohttp

    session = aiohttp.ClientSession(
        headers=HEADERS,
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=10.0, sock_read=600.0),
        connector=aiohttp.TCPConnector(limit=256, limit_per_host=0, keepalive_timeout=30.0),
        cookie_jar=aiohttp.DummyCookieJar(),
    )

    async def post(path: str, body: dict[str, Any]) -> Any:
        reply = await session.post(base_url + path, data=orjson.dumps(body),
                                   allow_redirects=False)
        try:
            content = await reply.read()
        finally:
            reply.release()
        if reply.status != 200:
            raise RuntimeError(f"HTTP {reply.status}")
        return orjson.loads(content)

    return post, session.close, f"aiohttp {aiohttp.__version__}"


async def httpx_client(base_url: str) -> tuple[Post, Callable[[], Awaitable[None]], str]:
    """The same on one pooled ``httpx.AsyncClient`` (sized for the concurrent phase)."""
    import httpx

    client = httpx.AsyncClient(
        base_url=base_url,
        headers=HEADERS,
        timeout=httpx.Timeout(600.0, connect=10.0),
        limits=httpx.Limits(max_connections=256, max_keepalive_connections=256),
    )

    async def post(path: str, body: dict[str, Any]) -> Any:
        reply = await client.post(path, content=orjson.dumps(body))
        reply.raise_for_status()
        return orjson.loads(reply.content)

    return post, client.aclose, f"httpx {httpx.__version__}"


def _declared(extra_tools: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """sayHello, then ``extra_tools`` (``name``, ``description``, ``parameters``)."""
    return [{"name": TOOL_NAME, "description": TOOL_DESCRIPTION,
             "parameters": TOOL_PARAMETERS}, *extra_tools]


def run_chat(post: Post, *, extra_tools: Sequence[dict[str, Any]] = (),
             history: Sequence[dict[str, Any]] = (), outputs: Outputs | None = None
             ) -> Callable[[], Awaitable[str]]:
    """The chat loop; ``history``: wire messages sent between the system and user messages;
    ``outputs``: run each turn's calls concurrently (None: the plain function, in turn)."""
    tools = [{"type": "function", "function": t} for t in _declared(extra_tools)]

    async def run() -> str:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": INSTRUCTION},
            *history,
            {"role": "user", "content": USER_MESSAGE},
        ]
        while True:
            body = {"model": MODEL, "messages": messages, "tools": tools,
                    "tool_choice": "auto", "parallel_tool_calls": True}
            message = (await post("/chat/completions", body))["choices"][0]["message"]
            calls = message.get("tool_calls")
            if not calls:
                return message.get("content") or ""
            messages.append({"role": "assistant", "content": message.get("content"),
                             "tool_calls": calls})
            if outputs is None:  # the judged floor: the plain function, call after call
                for call in calls:
                    arguments = orjson.loads(call["function"]["arguments"] or "{}")
                    messages.append({"role": "tool", "tool_call_id": call["id"],
                                     "content": say_hello(**arguments)})
                continue
            texts = await outputs([orjson.loads(call["function"]["arguments"] or "{}")
                                   for call in calls])
            for call, text in zip(calls, texts, strict=True):
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": text})

    return run


def run_responses(post: Post, *, extra_tools: Sequence[dict[str, Any]] = (),
                  history: Sequence[dict[str, Any]] = (), outputs: Outputs | None = None
                  ) -> Callable[[], Awaitable[str]]:
    """The Responses loop; ``history``: wire items sent between the system and user items;
    ``outputs``: run each turn's calls concurrently (None: the plain function, in turn)."""
    tools = [{"type": "function", **t} for t in _declared(extra_tools)]

    async def run() -> str:
        items: list[dict[str, Any]] = [
            {"role": "system", "content": INSTRUCTION},
            *history,
            {"role": "user", "content": USER_MESSAGE},
        ]
        while True:
            body = {"model": MODEL, "input": items, "tools": tools, "tool_choice": "auto",
                    "parallel_tool_calls": True, "store": False}
            output = (await post("/responses", body))["output"]
            calls = [item for item in output if item["type"] == "function_call"]
            if not calls:
                return "".join(part["text"] for item in output if item["type"] == "message"
                               for part in item["content"] if part["type"] == "output_text")
            texts = (None if outputs is None  # the judged floor: the plain function, in turn
                     else await outputs([orjson.loads(call["arguments"] or "{}")
                                         for call in calls]))
            for n, call in enumerate(calls):
                items.append({"type": "function_call", "call_id": call["call_id"],
                              "name": call["name"], "arguments": call["arguments"]})
                items.append({"type": "function_call_output", "call_id": call["call_id"],
                              "output": (say_hello(**orjson.loads(call["arguments"] or "{}"))
                                         if texts is None else texts[n])})

    return run


CLIENTS = {"aiohttp": aiohttp_client, "httpx": httpx_client}
TOOLS = ("sequential", "async", "thread")
"""How the floor runs one turn's calls (see the module docs)."""


async def setup(base_url: str, api: str, client: str | None = None, *,
                extra_tools: Sequence[dict[str, Any]] = (),
                history: Sequence[dict[str, Any]] = (), tools: str = "sequential"
                ) -> Contender:
    """The floor on ``client`` (``aiohttp`` by default, or ``$GRAMAGENT_BENCH_CLIENT``);
    ``extra_tools`` are declared after sayHello, ``history`` (wire form) precedes the user;
    ``tools``: how one turn's calls run, from :data:`TOOLS`."""
    name = client or os.environ.get("GRAMAGENT_BENCH_CLIENT", "aiohttp")
    post, close, version = await CLIENTS[name](base_url)
    outputs: Outputs | None = None
    if tools == "async":
        outputs = gathered
    elif tools == "thread":
        pool = ThreadPoolExecutor()
        outputs = pooled(pool)

        close_session = close

        async def close() -> None:
            await close_session()
            pool.shutdown()
    loop = run_chat if api == "chat" else run_responses
    run = loop(post, extra_tools=extra_tools, history=history, outputs=outputs)
    return Contender(run=run, close=close,
                     version=version + ("" if tools == "sequential" else f", {tools} tools"))


if __name__ == "__main__":
    main(setup)
