"""A hostile OpenAI-compatible server (issue 14): each defect class pinned against a real
raw-socket asyncio server on 127.0.0.1 written here, bounded in time and bytes.

Classes: transport faults, malformed 2xx bodies (one rule: a failed attempt, retried), a
trickling server (``request_timeout``), gzip bombs and oversized bodies
(``max_response_bytes``), an API key echoed back (masked everywhere), plain http to a remote
host (refused), impossible usage (not believed), and a run over all of it that keeps its
conversation. No timing assertions: the limits make the runs end, the tests count attempts.
"""

from __future__ import annotations

import asyncio
import gzip
import logging
import pickle
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson
import pytest

from gramagent import Agent, ToolLibrary, run_agent
from gramagent._messages import UserMessage
from gramagent._models.chat import ChatCompletionsModel
from gramagent._models.http import HTTPClient
from gramagent._models.registry import resolve_model
from gramagent._runtime.limits import RunLimits
from gramagent.errors import ConfigurationError, LimitExceeded, ModelAPIError
from gramagent.testing import ScriptedServer, call, calls, reply

KEY = "sk-hostile-0123456789abcdef"
BODY = {"model": "m1", "messages": [{"role": "user", "content": "hi"}]}

Writer = asyncio.StreamWriter
Behaviour = Callable[[bytes, Writer], Awaitable[None]]
"""What the server does with one request (its raw head and body) on one connection."""


class HostileServer:
    """A raw HTTP/1.1 server: each connection answers one request with the next behaviour
    (the last one repeats), then closes. Records every request it read."""

    def __init__(self, behaviours: list[Behaviour]) -> None:
        self.behaviours = behaviours
        self.requests: list[bytes] = []
        self._server: asyncio.Server | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    async def __aenter__(self) -> HostileServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: Writer) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip())
            request = head + await reader.readexactly(length)
            self.requests.append(request)
            index = min(len(self.requests) - 1, len(self.behaviours) - 1)
            await self.behaviours[index](request, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


def head(status: int = 200, *, length: int | None, extra: str = "",
         content_type: str = "application/json") -> bytes:
    size = f"Content-Length: {length}\r\n" if length is not None else ""
    return (f"HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\n{size}{extra}"
            "Connection: close\r\n\r\n").encode()


def answer(body: bytes, status: int = 200, **options: Any) -> Behaviour:
    async def behave(_: bytes, writer: Writer) -> None:
        writer.write(head(status, length=len(body), **options) + body)
        await writer.drain()
    return behave


def close_at_once() -> Behaviour:
    async def behave(_: bytes, writer: Writer) -> None:
        writer.transport.abort()
    return behave


def cut_short(body: bytes, *, announce: bool) -> Behaviour:
    """Send half the body and close; with or without announcing the whole length."""
    async def behave(_: bytes, writer: Writer) -> None:
        writer.write(head(length=len(body) if announce else None) + body[: len(body) // 2])
        await writer.drain()
    return behave


def trickle(every: float) -> Behaviour:
    """Headers at once, then one byte of a 10 MB body every ``every`` seconds (at most 400
    bytes, until the client hangs up)."""
    async def behave(_: bytes, writer: Writer) -> None:
        writer.write(head(length=10_000_000))
        for _ in range(400):
            if writer.transport.is_closing() or reader_gone(writer):
                return
            writer.write(b" ")
            await writer.drain()
            await asyncio.sleep(every)
    return behave


def reader_gone(writer: Writer) -> bool:
    """Whether the client closed its side (seen as EOF on our reader)."""
    protocol: Any = writer.transport.get_protocol()
    reader = getattr(protocol, "_stream_reader", None)
    return reader is not None and reader.at_eof()


def echo_key(status: int) -> Behaviour:
    """Answer with the request's Authorization header in the body."""
    async def behave(request: bytes, writer: Writer) -> None:
        auth = next(line for line in request.split(b"\r\n")
                    if line.lower().startswith(b"authorization:"))
        body = orjson.dumps({"error": {"message": f"bad key: {auth.decode()}"}})
        writer.write(head(status, length=len(body)) + body)
        await writer.drain()
    return behave


def chat_reply(text: str = "ok", usage: Any = None) -> bytes:
    completion: dict[str, Any] = {
        "id": "x", "object": "chat.completion", "model": "m1",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": text}}]}
    if usage is not None:
        completion["usage"] = usage
    return orjson.dumps(completion)


class NoSleep:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.fixture
async def hostile() -> AsyncIterator[Callable[..., HostileServer]]:
    servers: list[HostileServer] = []

    def make(*behaviours: Behaviour) -> HostileServer:
        server = HostileServer(list(behaviours))
        servers.append(server)
        return server

    yield make
    for server in servers:
        if server._server is not None:
            server._server.close()


async def post(server: HostileServer, **options: Any) -> dict[str, Any]:
    options.setdefault("sleep", NoSleep())
    async with HTTPClient(server.base_url, KEY, **options) as http:
        return await http.post_json("/chat/completions", BODY)


# -- transport faults ---------------------------------------------------------------------------

async def test_connection_closed_without_answer_is_retried_then_typed(hostile: Any) -> None:
    async with hostile(close_at_once()) as server:
        with pytest.raises(ModelAPIError) as info:
            await post(server, max_retries=2)
    assert info.value.status is None
    assert len(server.requests) == 3


async def test_transport_fault_then_recovery(hostile: Any) -> None:
    async with hostile(close_at_once(), cut_short(chat_reply(), announce=True),
                       answer(chat_reply("fine"))) as server:
        data = await post(server, max_retries=2)
    assert data["choices"][0]["message"]["content"] == "fine"
    assert len(server.requests) == 3


# -- malformed 2xx bodies: one rule ---------------------------------------------------------------

MALFORMED = {
    "empty": answer(b""),
    "not JSON": answer(b"<html>oops</html>", content_type="text/html"),
    "JSON null": answer(b"null"),
    "JSON array": answer(b"[1, 2]"),
    "SSE where JSON was asked": answer(b'data: {"choices": []}\n\ndata: [DONE]\n\n',
                                       content_type="text/event-stream"),
    "cut short, no length": cut_short(chat_reply(), announce=False),
    "cut short, with length": cut_short(chat_reply(), announce=True),
}


@pytest.mark.parametrize("kind", list(MALFORMED))
async def test_every_malformed_2xx_body_is_a_failed_attempt(hostile: Any, kind: str) -> None:
    """Each kind is retried like a dropped connection, then a ModelAPIError."""
    async with hostile(MALFORMED[kind]) as server:
        with pytest.raises(ModelAPIError):
            await post(server, max_retries=1)
    assert len(server.requests) == 2


@pytest.mark.parametrize("kind", list(MALFORMED))
async def test_a_malformed_body_then_a_good_one_succeeds(hostile: Any, kind: str) -> None:
    async with hostile(MALFORMED[kind], answer(chat_reply("recovered"))) as server:
        data = await post(server, max_retries=1)
    assert data["choices"][0]["message"]["content"] == "recovered"


# -- trickle ----------------------------------------------------------------------------------

async def test_trickling_server_is_cut_off_by_request_timeout(hostile: Any) -> None:
    """One byte every 0.05 s never trips the read timeout; the attempt deadline does."""
    async with hostile(trickle(0.05)) as server:
        with pytest.raises(ModelAPIError, match="request_timeout") as info:
            await post(server, max_retries=1, timeout=5.0, request_timeout=0.4)
    assert len(server.requests) == 2
    assert info.value.status is None


# -- bombs and oversized bodies -----------------------------------------------------------------

def gzip_bomb(inflated: int) -> bytes:
    squeezer = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(1 << 20)
    parts = [squeezer.compress(block) for _ in range(inflated >> 20)]
    return b"".join(parts) + squeezer.flush()


async def test_gzip_bomb_stops_at_the_limit_without_the_memory(hostile: Any) -> None:
    """64 MiB of zeros in ~64 KB of gzip, limit 1 MiB: refused, not retried, and the client
    never holds more than a few MiB (measured with tracemalloc, not time)."""
    bomb = gzip_bomb(64 << 20)
    assert len(bomb) < 200_000
    async with hostile(answer(bomb, extra="Content-Encoding: gzip\r\n")) as server:
        tracemalloc.start()
        try:
            with pytest.raises(ModelAPIError, match="max_response_bytes") as info:
                await post(server, max_retries=2, max_response_bytes=1 << 20)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < 16 << 20
    assert len(server.requests) == 1  # over the limit: not retried
    assert info.value.status == 200


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "raw deflate"])
async def test_compressed_answers_are_decoded(hostile: Any, encoding: str) -> None:
    body = chat_reply("squeezed")
    if encoding == "gzip":
        data = gzip.compress(body)
    elif encoding == "deflate":
        data = zlib.compress(body)
    else:
        squeezer = zlib.compressobj(6, zlib.DEFLATED, -15)
        data = squeezer.compress(body) + squeezer.flush()
    name = encoding.split()[-1]
    async with hostile(answer(data, extra=f"Content-Encoding: {name}\r\n")) as server:
        reply_ = await post(server)
    assert reply_["choices"][0]["message"]["content"] == "squeezed"


@pytest.mark.parametrize("announce", [True, False])
async def test_oversized_plain_body_is_refused_while_reading(hostile: Any, announce: bool
                                                             ) -> None:
    big = b'{"pad": "' + b"x" * (3 << 20) + b'"}'

    async def behave(_: bytes, writer: Writer) -> None:
        writer.write(head(length=len(big) if announce else None))
        for start in range(0, len(big), 1 << 16):
            writer.write(big[start:start + (1 << 16)])
            await writer.drain()

    async with hostile(behave) as server:
        with pytest.raises(ModelAPIError, match="max_response_bytes"):
            await post(server, max_retries=2, max_response_bytes=1 << 20)
    assert len(server.requests) == 1


async def test_a_whole_json_body_short_of_its_announced_length_is_never_a_reply(
        hostile: Any) -> None:
    """A body that parses as a reply but is shorter than its Content-Length (over the limit)
    fails: the usual answer is taken whole only when it ended where its length said."""
    body = chat_reply("too short")

    async def behave(_: bytes, writer: Writer) -> None:
        writer.write(head(length=1 << 20) + body)
        await writer.drain()

    async with hostile(behave) as server:
        with pytest.raises(ModelAPIError):
            await post(server, max_retries=1, max_response_bytes=1 << 10)


async def test_unasked_content_encoding_is_refused(hostile: Any) -> None:
    async with hostile(answer(b"\x00\x01", extra="Content-Encoding: br\r\n")) as server:
        with pytest.raises(ModelAPIError, match="Content-Encoding"):
            await post(server)


# -- echoed secrets ---------------------------------------------------------------------------

@pytest.mark.parametrize("status", [401, 500, 200])
async def test_echoed_key_is_masked_everywhere(hostile: Any, status: int,
                                               caplog: pytest.LogCaptureFixture) -> None:
    """In str(exc), exc.body, the pickled exception, log records and the exchange hook."""
    seen: list[Any] = []
    behaviour = (echo_key(status) if status != 200 else
                 _echo_in_non_json())
    caplog.set_level(logging.DEBUG)
    async with hostile(behaviour) as server:
        with pytest.raises(ModelAPIError) as info:
            await post(server, max_retries=1,
                       on_exchange=lambda req, resp, st: seen.append(resp))
    exc = info.value
    assert len(server.requests) >= 1 and KEY.encode() in server.requests[0]  # it was sent
    for text in (str(exc), exc.body or "", repr(pickle.loads(pickle.dumps(exc)).__dict__),
                 caplog.text, repr(seen), repr([r.__dict__ for r in caplog.records])):
        assert KEY not in text
    assert "bad key" in (exc.body or "") + str(exc)


def _echo_in_non_json() -> Behaviour:
    async def behave(request: bytes, writer: Writer) -> None:
        auth = next(line for line in request.split(b"\r\n")
                    if line.lower().startswith(b"authorization:"))
        body = b"bad key: " + auth
        writer.write(head(200, length=len(body), content_type="text/plain") + body)
        await writer.drain()
    return behave


@pytest.mark.parametrize("url", ["http://example.com/v1", "http://10.1.2.3:8000/v1"])
def test_key_over_plain_http_to_a_remote_host_is_refused(url: str,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    monkeypatch.delenv("GRAMAGENT_ALLOW_INSECURE_HTTP", raising=False)
    with pytest.raises(ConfigurationError, match="plain http"):
        HTTPClient(url, KEY)
    with pytest.raises(ConfigurationError, match="plain http"):
        resolve_model("openai/m", base_url=url, api_key=KEY)
    HTTPClient(url, KEY, allow_insecure_http=True)  # explicitly allowed
    resolve_model("openai/m", base_url=url, api_key=KEY, allow_insecure_http=True)
    monkeypatch.setenv("GRAMAGENT_ALLOW_INSECURE_HTTP", "1")
    HTTPClient(url, KEY)


@pytest.mark.parametrize("url", ["https://example.com/v1", "http://127.0.0.1:9/v1",
                                 "http://localhost:9/v1", "http://[::1]:9/v1"])
def test_key_over_https_or_to_loopback_is_fine(url: str) -> None:
    HTTPClient(url, KEY)
    HTTPClient("http://example.com/v1", None)  # no key, nothing to leak


# -- the loop over a hostile server: typed errors, the conversation kept --------------------------

def echo_library() -> ToolLibrary:
    library = ToolLibrary()

    @library.register
    def echo(text: str) -> str:
        """Echo the text back."""
        return text

    return library


LIBRARY = echo_library()
AGENT = Agent(name="probe", model="openai/m1", instruction="Use echo.",
              tools=tuple(t.spec() for t in LIBRARY))


@pytest.mark.parametrize("kind", ["empty", "JSON array", "cut short, no length"])
async def test_run_over_a_failing_server_keeps_the_conversation(hostile: Any, kind: str) -> None:
    async with hostile(MALFORMED[kind]) as server:
        model = ChatCompletionsModel(server.base_url, KEY, max_retries=1, sleep=NoSleep())
        async with model:
            with pytest.raises(ModelAPIError) as info:
                await run_agent(AGENT, "hello there", library=LIBRARY, model=model)
    context = info.value.context
    assert context is not None and context.messages[0] == UserMessage(content="hello there")


async def test_impossible_usage_does_not_disable_the_token_budget() -> None:
    """A server reporting -1e9 tokens per turn: the budget still stops the run."""
    lying = {"input_tokens": -1_000_000_000, "output_tokens": 1}
    script = [calls(call("echo", {"text": f"t{i}"}), usage=lying) for i in range(6)]
    with ScriptedServer([*script, reply("done")]) as server, \
            pytest.raises(LimitExceeded) as info:
        await run_agent(AGENT, "go", library=LIBRARY, model="openai/m1",
                        base_url=server.base_url, api_key="k",
                        limits=RunLimits(max_tokens=60, repeat_guard=False))
    assert info.value.limit == "max_tokens"
    assert info.value.usage.input_tokens > 0


async def test_any_request_body_is_encodable(hostile: Any) -> None:
    """Settings with big integers and text with lone surrogates (from the caller) are sent."""
    async with hostile(answer(chat_reply("sent"))) as server, \
            HTTPClient(server.base_url, KEY) as http:
        body = {**BODY, "seed": 2**70, "messages": [{"role": "user", "content": "a\ud800"}]}
        data = await http.post_json("/chat/completions", body)
    assert data["choices"][0]["message"]["content"] == "sent"
    assert b'"seed":1180591620717411303424' in server.requests[0]
    assert b'"a\\ud800"' in server.requests[0]


# -- a stream that ends before the answer -------------------------------------------------------

def stream_answer(api: str, text: str, *, finished: bool) -> Behaviour:
    """An SSE answer framed by the connection's end (no length, no chunks: legal HTTP/1.1),
    in two pieces; ``finished``: with its finish_reason and [DONE], else cut after the
    first piece (a server that died, a proxy that gave up)."""
    half = len(text) // 2
    if api == "chat":
        pieces = [{"id": "x", "choices": [{"index": 0, "delta": {"content": part}}]}
                  for part in (text[:half], text[half:])]
        pieces.append({"id": "x", "choices": [{"index": 0, "delta": {},
                                               "finish_reason": "stop"}]})
    else:
        pieces = [{"choices": [{"index": 0, "text": part}]}
                  for part in (text[:half], text[half:])]
        pieces.append({"choices": [{"index": 0, "text": "", "finish_reason": "stop"}]})
    if not finished:
        pieces = pieces[:1]
    body = b"".join(b"data: " + orjson.dumps(p) + b"\n\n" for p in pieces)
    if finished:
        body += b"data: [DONE]\n\n"

    async def behave(_: bytes, writer: Writer) -> None:
        writer.write(head(length=None, content_type="text/event-stream") + body)
        await writer.drain()
    return behave


def _streaming_model(api: str, url: str) -> Any:
    from gramagent._models.harmony import HarmonyModel

    if api == "chat":
        return ChatCompletionsModel(url, stream=True, backoff_base=0.001)
    return HarmonyModel(url, stream=True, backoff_base=0.001)


@pytest.mark.parametrize("api", ["chat", "harmony"])
async def test_a_stream_that_ends_before_the_answer_is_cut_short_not_an_answer(
        hostile: Any, api: str) -> None:
    """Ended with neither [DONE] nor a finish_reason, a stream is cut short, as a JSON body
    cut short is: read whole, a failed attempt, retried; passed on live (its pieces already
    handed out), a ModelAPIError. It was the answer: half of it, as if the model had
    finished ('The answer is' for 'The answer is 4')."""
    from gramagent._models.base import new_request

    text = "<|channel|>final<|message|>The answer is 4" if api == "harmony" else "The answer is 4"
    request = new_request(model="m1", instruction="sys", messages=[UserMessage(content="2+2?")],
                          tools=(), tool_choice="auto", settings={}, rendered=None)
    cut, whole = (stream_answer(api, text, finished=f) for f in (False, True))
    async with hostile(cut, whole, cut) as server:
        model = _streaming_model(api, server.base_url)
        try:
            turn = await model.request(request)
            assert turn.text == "The answer is 4" and len(server.requests) == 2
            with pytest.raises(ModelAPIError, match="ended before the answer did"):
                await model.stream_request(request, lambda piece: None)
            assert len(server.requests) == 3  # live: not retried
        finally:
            await model.aclose()


def done_then_hold() -> Behaviour:
    """A whole answer and [DONE], then the connection held open with comments (at most 200,
    until the client hangs up)."""
    async def behave(_: bytes, writer: Writer) -> None:
        chunk = {"id": "x", "choices": [{"index": 0, "delta": {"content": "4"},
                                         "finish_reason": "stop"}]}
        writer.write(head(length=None, content_type="text/event-stream")
                     + b"data: " + orjson.dumps(chunk) + b"\n\ndata: [DONE]\n\n")
        await writer.drain()
        for _ in range(200):
            if writer.transport.is_closing() or reader_gone(writer):
                return
            writer.write(b": still here\n\n")
            await writer.drain()
            await asyncio.sleep(0.1)
    return behave


async def test_a_stream_read_whole_ends_at_done_like_a_live_one(hostile: Any) -> None:
    """After [DONE] the answer is over: read whole (stream=True), the request read on to the
    connection's end, so a server holding it open failed a complete answer with
    request_timeout, each retry asking the model again; read live, it ended at [DONE]."""
    from gramagent._models.base import new_request

    request = new_request(model="m1", instruction="sys", messages=[UserMessage(content="2+2?")],
                          tools=(), tool_choice="auto", settings={}, rendered=None)
    async with hostile(done_then_hold()) as server:
        model = ChatCompletionsModel(server.base_url, stream=True, max_retries=2,
                                     backoff_base=0.001, request_timeout=3)
        try:
            turn = await model.request(request)
        finally:
            await model.aclose()
    assert turn.text == "4" and len(server.requests) == 1
