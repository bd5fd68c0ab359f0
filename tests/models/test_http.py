"""The pooled HTTP client: retries (429 with Retry-After, 5xx, dropped connections), the one
ModelAPIError, bad JSON, the exchange hook; against the scripted server over real HTTP.

Waits go through an injected recording ``sleep``, so tests assert the waits the client chose
and the requests the server saw, never elapsed time."""

from __future__ import annotations

import asyncio
import gc
import math
import pickle
import socket
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gramagent._models.chat import ChatCompletionsModel
from gramagent._models.harmony import HarmonyModel
from gramagent._models.http import HTTPClient
from gramagent._models.http_adapter import HTTPAdapter
from gramagent._models.http_retry import parse_retry_after, retry_delay
from gramagent._models.responses import ResponsesModel
from gramagent._models.sse import parse_sse
from gramagent.errors import AuthenticationError, ConfigurationError, ModelAPIError
from gramagent.testing import drop, error, http_response, reply

BODY = {"model": "m1", "messages": [{"role": "user", "content": "hi"}]}


class RecordingSleep:
    """An async sleep that records the waits and returns at once."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def client(srv: Any, **options: Any) -> tuple[HTTPClient, RecordingSleep]:
    sleep = RecordingSleep()
    return HTTPClient(srv.base_url, "sk-secret-123456", sleep=sleep, **options), sleep


async def test_429_retry_after_is_honoured(serve):
    """A 429 with Retry-After: 7 is retried after exactly 7 s, then succeeds."""
    srv = serve([error(429, "slow down", retry_after=7), reply("ok")])
    http, sleep = client(srv)
    async with http:
        data = await http.post_json("/chat/completions", BODY)
    assert data["choices"][0]["message"]["content"] == "ok"
    assert len(srv.requests) == 2
    assert sleep.waits == [7.0]


async def test_a_429_that_survives_the_retries_says_how_long_to_wait(serve):
    """The last refusal's status and the wait it asked for are on the error (what a caller
    scheduling many runs backs off by), and survive pickling; an answer naming no wait has
    ``retry_after`` None."""
    srv = serve([error(429, "slow down", retry_after=3), error(429, "slow down", retry_after=7),
                 error(503), error(503)])
    http, sleep = client(srv, max_retries=1)
    async with http:
        with pytest.raises(ModelAPIError) as caught:
            await http.post_json("/chat/completions", BODY)
        assert (caught.value.status, caught.value.retry_after) == (429, 7.0)
        assert sleep.waits == [3.0]
        copy = pickle.loads(pickle.dumps(caught.value))
        assert (type(copy), copy.status, copy.retry_after) == (ModelAPIError, 429, 7.0)
        with pytest.raises(ModelAPIError) as plain:
            await http.post_json("/chat/completions", BODY)
    assert (plain.value.status, plain.value.retry_after) == (503, None)


async def test_500_is_retried_with_jittered_backoff(serve):
    """5xx answers are retried; without Retry-After the waits back off exponentially."""
    srv = serve([error(500), error(502), reply("ok")])
    http, sleep = client(srv, backoff_base=1.0)
    async with http:
        await http.post_json("/chat/completions", BODY)
    assert len(srv.requests) == 3
    assert 0.5 <= sleep.waits[0] <= 1.0
    assert 1.0 <= sleep.waits[1] <= 2.0


async def test_dropped_connection_is_retried(serve):
    """A connection closed without an answer is retried on a fresh connection."""
    srv = serve([drop(), reply("after the drop")])
    http, sleep = client(srv)
    async with http:
        data = await http.post_json("/chat/completions", BODY)
    assert data["choices"][0]["message"]["content"] == "after the drop"
    assert len(srv.requests) == 2
    assert len(sleep.waits) == 1


async def test_retries_exhausted_raise_one_error_with_status_and_body(serve):
    """After max_retries the last failure is raised as a ModelAPIError with the status, the
    server's message, the model and an excerpt of the body; the key never appears."""
    srv = serve([error(503, "overloaded, try later")] * 3)
    http, sleep = client(srv, max_retries=2)
    async with http:
        with pytest.raises(ModelAPIError) as info:
            await http.post_json("/chat/completions", BODY)
    err = info.value
    assert len(srv.requests) == 3
    assert len(sleep.waits) == 2
    assert err.status == 503
    assert err.model == "m1"
    assert "overloaded, try later" in str(err)
    assert "after 3 attempts" in str(err)
    assert "overloaded, try later" in err.body
    assert "sk-secret" not in str(err) and "sk-secret" not in err.body


async def test_client_errors_are_not_retried(serve):
    """A 400 is raised at once: retrying would not help."""
    srv = serve([error(400, "bad field 'x'"), reply("never")])
    http, sleep = client(srv)
    async with http:
        with pytest.raises(ModelAPIError, match="bad field") as info:
            await http.post_json("/chat/completions", BODY)
    assert info.value.status == 400
    assert len(srv.requests) == 1
    assert sleep.waits == []


@pytest.mark.parametrize("status", [401, 403])
async def test_a_refused_key_is_a_configuration_error_and_not_retried(serve, status):
    """The API contract: an invalid key is a ConfigurationError (it was a ModelAPIError
    only); no retry, even with Retry-After; it is also a ModelAPIError, so a run attaches
    the conversation; the message says where the key comes from, never the key."""
    srv = serve([error(status, "Incorrect API key provided", retry_after=1), reply("never")])
    http, sleep = client(srv, max_retries=5)
    async with http:
        with pytest.raises(ConfigurationError) as info:
            await http.post_json("/chat/completions", BODY)
    assert isinstance(info.value, AuthenticationError)
    assert isinstance(info.value, ModelAPIError)
    assert info.value.status == status
    assert "OPENAI_API_KEY" in str(info.value)
    assert "sk-secret-123456" not in str(info.value)
    assert len(srv.requests) == 1
    assert sleep.waits == []


async def test_retry_after_beyond_the_cap_gives_up_at_once(serve):
    """A server asking for a wait longer than max_backoff ends the retries, saying why."""
    srv = serve([error(429, retry_after=3600), reply("never")])
    http, sleep = client(srv, max_backoff=30)
    async with http:
        with pytest.raises(ModelAPIError, match="3600") as info:
            await http.post_json("/chat/completions", BODY)
    assert info.value.status == 429
    assert len(srv.requests) == 1
    assert sleep.waits == []


async def test_total_backoff_is_capped(serve):
    """Waits stop once their sum would pass max_total_backoff."""
    srv = serve([error(429, retry_after=4)] * 5)
    http, sleep = client(srv, max_retries=4, max_total_backoff=10)
    async with http:
        with pytest.raises(ModelAPIError):
            await http.post_json("/chat/completions", BODY)
    assert sleep.waits == [4.0, 4.0]
    assert len(srv.requests) == 3


async def test_bad_json_in_a_200_is_model_api_error(serve):
    """A 200 whose body is not JSON is retried like a dropped connection, then a
    ModelAPIError with status 200 and the body excerpt."""
    page = http_response("<html>proxy error</html>", content_type="text/html")
    srv = serve([page, page])
    http, sleep = client(srv, max_retries=1)
    async with http:
        with pytest.raises(ModelAPIError, match="not JSON") as info:
            await http.post_json("/chat/completions", BODY)
    assert info.value.status == 200
    assert info.value.body == "<html>proxy error</html>"
    assert len(srv.requests) == 2 and len(sleep.waits) == 1


async def test_error_body_excerpt_is_short(serve):
    """Long error bodies are cut to about 500 characters."""
    srv = serve([http_response("x" * 5000, status=400, content_type="text/plain")])
    http, _ = client(srv)
    async with http:
        with pytest.raises(ModelAPIError) as info:
            await http.post_json("/chat/completions", BODY)
    assert 500 <= len(info.value.body) <= 501
    assert len(str(info.value)) < 1000


async def test_unreachable_server_is_model_api_error():
    """A refused connection is retried and then raised with no status."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    sleep = RecordingSleep()
    async with HTTPClient(f"http://127.0.0.1:{port}/v1", None, sleep=sleep) as http:
        with pytest.raises(ModelAPIError, match="could not get an answer") as info:
            await http.post_json("/chat/completions", BODY)
    assert info.value.status is None
    assert len(sleep.waits) == 2


async def test_exchange_hook_sees_bodies_never_the_key(serve):
    """on_exchange gets each attempt's request body, answer and status, and never the key."""
    seen: list[tuple[Any, Any, int | None]] = []
    srv = serve([error(500, "oops"), reply("fine")])
    http, _ = client(srv, on_exchange=lambda req, resp, status: seen.append((req, resp, status)))
    async with http:
        await http.post_json("/chat/completions", BODY)
    assert [s[2] for s in seen] == [500, 200]
    assert seen[0][0] == BODY
    assert "oops" in seen[0][1]
    assert seen[1][1]["choices"][0]["message"]["content"] == "fine"
    assert "sk-secret" not in repr(seen)
    assert srv.requests[0].headers["authorization"] == "Bearer sk-secret-123456"


async def test_sse_stream_and_error_event(serve):
    """post_sse returns the decoded events; an error event in a stream is a ModelAPIError."""
    good = (b'data: {"a": 1}\n\n: comment\n\ndata: {"b": 2}\n\ndata: [DONE]\n\n')
    bad = b'data: {"error": {"message": "stream broke"}}\n\n'
    srv = serve([http_response(good, content_type="text/event-stream"),
                 http_response(bad, content_type="text/event-stream")])
    http, _ = client(srv)
    async with http:
        assert await http.post_sse("/chat/completions", BODY) == [{"a": 1}, {"b": 2}]
        with pytest.raises(ModelAPIError, match="stream broke"):
            await http.post_sse("/chat/completions", BODY)


async def test_connections_are_reused(serve):
    """Sequential requests share one keep-alive connection."""
    srv = serve([reply("a"), reply("b"), reply("c")])
    http, _ = client(srv)
    async with http:
        for _ in range(3):
            await http.post_json("/chat/completions", BODY)
    assert len(srv.requests) == 3
    assert srv.connections == 1


def test_one_client_across_event_loops(serve):
    """A client reused by successive asyncio.run calls opens a pool per loop and each loop
    closes its own at shutdown: no socket leaks (a ResourceWarning would fail this test) and
    aclose from yet another loop is harmless."""
    srv = serve([reply("first"), reply("second")])
    http, _ = client(srv)
    answers = [asyncio.run(http.post_json("/chat/completions", BODY)) for _ in range(2)]
    gc.collect()
    asyncio.run(http.aclose())
    assert [a["choices"][0]["message"]["content"] for a in answers] == ["first", "second"]
    assert srv.connections == 2


async def test_proxy_from_the_environment(monkeypatch):
    """HTTP_PROXY routes requests through that proxy (absolute URI in the request line);
    NO_PROXY exempts a host."""
    seen: list[bytes] = []
    answer = b'{"ok": true}'

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length")))
        await reader.readexactly(length)
        seen.append(head.split(b"\r\n")[0])
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(answer), answer))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(proxy, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{port}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    async with server:
        async with HTTPClient("http://model.invalid/v1", None) as http:
            assert await http.post_json("/chat/completions", BODY) == {"ok": True}
        with socket.socket() as sock:  # a port nothing listens on
            sock.bind(("127.0.0.1", 0))
            closed = sock.getsockname()[1]
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        async with HTTPClient(f"http://127.0.0.1:{closed}/v1", None, max_retries=0) as http:
            with pytest.raises(ModelAPIError, match="could not get an answer"):
                await http.post_json("/chat/completions", BODY)  # direct: refused
    assert seen == [b"POST http://model.invalid/v1/chat/completions HTTP/1.1"]


# -- the adapters' shared plumbing --------------------------------------------------------------

ADAPTERS: dict[str, type[HTTPAdapter]] = {
    "chat": ChatCompletionsModel,
    "responses": ResponsesModel,
    "harmony": HarmonyModel,
}


@pytest.mark.parametrize("adapter", ADAPTERS.values(), ids=ADAPTERS.keys())
def test_adapters_refuse_transport_options_with_a_shared_client(adapter):
    """Transport options belong to a shared HTTPClient: giving both is a ConfigurationError."""
    shared = HTTPClient("http://127.0.0.1:9/v1")
    with pytest.raises(ConfigurationError, match="shared HTTPClient"):
        adapter("http://127.0.0.1:9/v1", http=shared, max_retries=0)


@pytest.mark.parametrize("adapter", ADAPTERS.values(), ids=ADAPTERS.keys())
async def test_adapters_post_through_a_shared_client_and_close_it(adapter, serve):
    """An adapter given http= uses that client (its base URL wins); leaving ``async with``
    closes the pool it opened."""
    srv = serve([reply("ok")])
    shared, _ = client(srv)
    async with adapter("http://127.0.0.1:9/unused", http=shared) as model:
        assert isinstance(model, adapter)
        assert model.http is shared
        await model.http.post_json("/chat/completions", BODY)
        assert shared._client is not None
    assert shared._client is None
    assert len(srv.requests) == 1


@pytest.mark.parametrize("adapter", ADAPTERS.values(), ids=ADAPTERS.keys())
async def test_adapters_raise_an_unreadable_reply_as_model_api_error(adapter, make_request,
                                                                      serve):
    """A 200 whose JSON the adapter cannot read is a ModelAPIError with status 200, naming
    the model and the URL, with the reply in its body excerpt."""
    srv = serve([http_response({"unexpected": True})])
    async with adapter(srv.base_url, max_retries=0) as model:
        with pytest.raises(ModelAPIError) as info:
            await model.request(make_request())
    err = info.value
    assert err.status == 200
    assert err.model == "test-model"
    assert f"({srv.base_url}/" in str(err)
    assert "unexpected" in (err.body or "")


# -- pure helpers -----------------------------------------------------------------------------


def test_parse_retry_after_forms():
    """Seconds, fractional seconds, an HTTP date, retry-after-ms; garbage is ignored."""
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    date = (now + timedelta(seconds=30)).strftime("%a, %d %b %Y %H:%M:%S GMT")
    assert parse_retry_after({"retry-after": "12"}) == 12.0
    assert parse_retry_after({"retry-after": "0.25"}) == 0.25
    assert parse_retry_after({"retry-after": date}, now=now) == 30.0
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({"retry-after": "-3"}) == 0.0
    assert parse_retry_after({}) is None


def test_retry_delay_bounds():
    """Backoff doubles per attempt with jitter in [step/2, step]; a server hint wins."""
    assert retry_delay(0, None, base=1.0, rand=lambda: 0.0) == 0.5
    assert retry_delay(0, None, base=1.0, rand=lambda: 1.0) == 1.0
    assert retry_delay(3, None, base=1.0, rand=lambda: 1.0) == 8.0
    assert retry_delay(3, 2.5, base=1.0) == 2.5


def test_parse_sse():
    """Multi-line data is joined, other fields skipped, [DONE] ends the stream."""
    text = 'event: x\ndata: {"a":\ndata: 1}\n\nid: 3\ndata: [DONE]\n\ndata: {"late": 1}\n\n'
    assert parse_sse(text) == ['{"a":\n1}']
    assert parse_sse('data:{"no-space":1}') == ['{"no-space":1}']


_SECONDS_OPTIONS = ("timeout", "connect_timeout", "request_timeout", "backoff_base",
                    "max_backoff", "max_total_backoff")
_COUNT_OPTIONS = ("max_connections", "max_response_bytes")


@settings(max_examples=120, deadline=None)
@given(name=st.sampled_from(("max_retries", *_SECONDS_OPTIONS, *_COUNT_OPTIONS)),
       value=st.one_of(st.none(), st.booleans(), st.integers(-2, 10**9),
                       st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=2)))
def test_transport_options_are_checked_when_the_client_is_made(name: str, value: Any) -> None:
    """A timeout of nan or inf, a pool of 0 connections, a negative retry count, ... are
    refused at once, the option named, as a ConfigurationError (max_retries was a bare
    ValueError, the rest unchecked: nan compares false with every time, so a nan timeout
    never fired)."""
    number = type(value) in (int, float) and math.isfinite(value)
    if name == "max_retries":
        good = type(value) is int and value >= 0
    elif name in _COUNT_OPTIONS:
        good = type(value) is int and value > 0
    else:
        good = number and value > 0
    if good:
        assert HTTPClient("http://127.0.0.1:9/v1", **{name: value}).base_url
    else:
        with pytest.raises(ConfigurationError,
                           match=f"^invalid transport options: {name} must be"):
            HTTPClient("http://127.0.0.1:9/v1", **{name: value})
