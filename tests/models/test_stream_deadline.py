"""A streamed answer ends within ``request_timeout`` however steadily its pieces come: SSE
deltas, single bytes, ``: ping`` comments or a plain JSON body, each too often for the read
timeout to fire. Against the raw-socket server of test_hostile_server on 127.0.0.1; the
limits make each case end, the tests assert what it ended with (no timing assertions)."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_hostile_server import KEY, Behaviour, HostileServer, Writer, head, reader_gone

from gramagent import Agent, ToolLibrary
from gramagent._models.http import HTTPClient
from gramagent._models.registry import resolve_model
from gramagent._runtime.stream import run_agent_stream
from gramagent.errors import ModelAPIError

_DELTA = orjson.dumps({"choices": [{"index": 0, "delta": {"content": "a"}}]})
_PIECES = {
    "delta": b"data: " + _DELTA + b"\n\n",
    "byte": b" ",
    "ping": b": ping\n\n",
}


def endless(piece: str, every: float) -> Behaviour:
    """An event stream (or, for ``json``, a JSON body) that never ends: a piece every
    ``every`` seconds, at most 2,000, until the client hangs up."""
    async def behave(_: bytes, writer: Writer) -> None:
        if piece == "json":
            writer.write(head(length=10_000_000) + b'{"choices": [')
        else:
            writer.write(head(length=None, content_type="text/event-stream"))
        for _ in range(2000):
            if writer.transport.is_closing() or reader_gone(writer):
                return
            writer.write(_PIECES.get(piece, b" "))
            await writer.drain()
            await asyncio.sleep(every)
    return behave


@settings(max_examples=8, deadline=None)
@given(piece=st.sampled_from(["delta", "byte", "ping", "json"]),
       every=st.sampled_from([0.01, 0.05, 0.1]))
@pytest.mark.slow
def test_a_stream_that_never_ends_stops_at_request_timeout(piece: str, every: float) -> None:
    async def scenario() -> None:
        async with HostileServer([endless(piece, every)]) as server, \
                HTTPClient(server.base_url, KEY, timeout=5.0, request_timeout=0.5,
                           max_retries=0) as http:
            with pytest.raises(ModelAPIError, match="request_timeout"):
                async for _ in http.stream_sse("/chat/completions", {"stream": True}):
                    pass
            assert len(server.requests) == 1

    asyncio.run(scenario())


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_streamed_run_that_never_ends_stops_at_request_timeout(api: str) -> None:
    """run_agent_stream over an endless trickle of deltas: the run fails with a
    ModelAPIError naming request_timeout (no wall_time set), its conversation kept."""
    agent = Agent(name="a", model="openai/m", instruction="hi")
    async with HostileServer([endless("delta" if api == "chat" else "ping", 0.02)]) as server:
        model = resolve_model("openai/m", api=api, base_url=server.base_url,
                              timeout=5.0, request_timeout=0.5, max_retries=0)
        try:
            with pytest.raises(ModelAPIError, match="request_timeout") as info:
                async with run_agent_stream(agent, "hello", library=ToolLibrary(),
                                            model=model) as stream:
                    async for _ in stream:
                        pass
        finally:
            await model.aclose()
    context: Any = info.value.context
    assert context is not None and context[0].content == "hello"
