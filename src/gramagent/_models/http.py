"""The one HTTP client every wire-format adapter posts through.

:class:`HTTPClient` owns one pooled :class:`aiohttp.ClientSession` (HTTP/1.1 keep-alive, created
lazily on first use, sized for a hundred concurrent runs), encodes bodies with orjson, and
retries what is worth retrying (:mod:`gramagent._models.http_retry`):

- error answers its retry rule accepts (by default HTTP 408, 409, 429 and 5xx; an adapter may
  give a rule of its own, ``retryable_answer``), waiting what the server's ``Retry-After``
  (seconds or an HTTP date) or ``retry-after-ms`` header asks for, else an exponential backoff
  with jitter;
- dropped connections and other transport errors (connect, read, write, protocol, timeouts);
- a 2xx answer whose body cannot be decoded (not JSON, empty, JSON that is not an object, a
  stream where JSON was asked, a body cut short): one rule for all, it is retried like a
  transport error, since a body cut short and a glitching server look alike.

Every answer is bounded (:mod:`gramagent._models.http_body`): its body may hold at most
``max_response_bytes`` (default 32 MiB), as received and again after gzip/deflate
decompression, counted while reading (a decompression bomb stops at the limit); each attempt,
the whole body read included, must end within ``request_timeout`` (default 900 s), beside
``timeout`` for each wait for data. A body over the limit is not retried.

Every failure that survives the retries becomes a :class:`~gramagent.errors.ModelAPIError`
built by :meth:`HTTPClient.error` (:func:`~gramagent._models.http_errors.request_error`): it
names the model, the URL, the HTTP status and the server's message, and carries an excerpt of
the body. A refusal that survives the retries (a 429 from a server rate limiting, say) is a
ModelAPIError with that ``status`` and, when the server named a wait, ``retry_after`` (seconds):
what a caller scheduling many runs reads to back off. The API key travels
only in the ``Authorization`` header of the pooled client; a server that echoes it back finds
it masked in the error (message and body), in log records and in what the
:data:`ExchangeHook` sees. The key is never sent over plain ``http`` to a host that is not this
machine unless the caller allows it (``allow_insecure_http``, or the environment variable
``GRAMAGENT_ALLOW_INSECURE_HTTP=1``).

aiohttp, not httpx: docs/performance.md ("Models and HTTP") has the measurement. Proxies
named by the environment (``HTTP(S)_PROXY``, ``NO_PROXY``) are honoured, looked up once per
pool.
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
import urllib.parse
import urllib.request
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine, Mapping
from functools import partial
from typing import Final, Protocol, TypedDict, TypeVar

import aiohttp
import orjson

from gramagent import _json as exact_json
from gramagent._limit_values import limit_problem, refuse_problems
from gramagent._logs import MODEL_LOGGER, Redactor, add_secret, log_model_attempt
from gramagent._models._wire import ReplyError
from gramagent._models.http_body import (
    CUT_SHORT,
    BodyTooLarge,
    UnreadableBody,
    body_text,
    decode_json,
    decode_sse,
    keep_open,
    one_payload,
    read_body,
    sse_payloads,
)
from gramagent._models.http_errors import (
    error_detail,
    error_detail_bytes,
    request_error,
    transport_detail,
)
from gramagent._models.http_retry import RetryRule, parse_retry_after, retry_delay, retryable_answer
from gramagent._models.registry import is_loopback
from gramagent._models.sse import SSEDecoder
from gramagent._models.wire_shapes import JSONObject
from gramagent.errors import ConfigurationError, ModelAPIError

__all__ = [
    "ALLOW_INSECURE_ENV",
    "MAX_RESPONSE_BYTES",
    "REQUEST_TIMEOUT",
    "ExchangeHook",
    "HTTPClient",
    "HTTPOptions",
    "body_model",
]

MAX_RESPONSE_BYTES: Final = 32 * 1024 * 1024
"""Default body limit of one answer, as received and decompressed (32 MiB)."""

REQUEST_TIMEOUT: Final = 900.0
"""Default seconds one attempt may take, the whole answer read included."""

ALLOW_INSECURE_ENV: Final = "GRAMAGENT_ALLOW_INSECURE_HTTP"
"""Set to ``1`` to allow sending an API key over plain http to a non-loopback host."""

_T = TypeVar("_T")
_D = TypeVar("_D")
_V = TypeVar("_V")

_USER_AGENT = "gramagent/0.1"

_model_log = logging.getLogger(MODEL_LOGGER)


class ExchangeHook(Protocol):
    """Called once per HTTP attempt, e.g. to print raw traffic for the CLI's ``-v``.

    ``request`` is the JSON body sent (never the headers, so never the API key); ``response`` the
    decoded JSON answer (a list of decoded events for a stream), or the body text of an error,
    or the transport error's text when no answer came; ``status`` is the HTTP status, None when
    the connection failed.
    """

    def __call__(self, request: Mapping[str, object], response: object,
                 status: int | None) -> None: ...


class HTTPOptions(TypedDict, total=False):
    """Transport options every adapter accepts (and passes to :class:`HTTPClient`)."""

    max_retries: int
    """Retries after the first attempt (default 2)."""
    timeout: float
    """Seconds allowed for each wait for the server's data: the answer's start (the model's
    whole generation, when not streamed) and each later chunk (default 600)."""
    connect_timeout: float
    """Seconds allowed to open a connection (default 10)."""
    headers: Mapping[str, str]
    """Extra request headers (e.g. ``OpenAI-Organization``)."""
    on_exchange: ExchangeHook | None
    """See :class:`ExchangeHook`."""
    backoff_base: float
    """First backoff wait in seconds; doubles with each retry (default 0.5)."""
    max_backoff: float
    """Longest single wait; a longer ``Retry-After`` ends the retries (default 60)."""
    max_total_backoff: float
    """Most seconds spent waiting over all retries of one request (default 120)."""
    max_connections: int
    """Size of the connection pool (default 256)."""
    request_timeout: float
    """Seconds one attempt may take in all, the whole answer read included (default 900);
    checked as the body arrives, so a server trickling its answer is cut off."""
    max_response_bytes: int
    """Most bytes of one answer's body, as received and after decompression (default 32 MiB)."""
    allow_insecure_http: bool
    """Send the API key over plain http to a host that is not this machine (default False)."""
    sleep: Callable[[float], Awaitable[None]]
    """The coroutine used to wait between attempts (default :func:`asyncio.sleep`)."""
    retryable_answer: RetryRule
    """Whether an error answer is worth another attempt, given its status and the server's
    message (default :func:`~gramagent._models.http_retry.retryable_answer`: 408, 409, 429
    and 5xx)."""


_WHOLE_OPTIONS: Final = frozenset({"max_connections", "max_response_bytes"})


def _check_options(max_retries: int, **values: float) -> None:
    """Refuse transport options no server could be talked to with: ``max_retries`` a whole
    number, 0 or more; the counts positive whole numbers; the seconds positive and finite.

    Raises:
        ConfigurationError: every bad option, named.
    """
    refuse_problems("invalid transport options", [
        limit_problem("max_retries", max_retries, whole=True, optional=False, zero=True),
        *(limit_problem(name, value, whole=name in _WHOLE_OPTIONS, optional=False)
          for name, value in values.items())])


class HTTPClient:
    """A pooled, retrying JSON-over-HTTP client for one model server.

    Args:
        base_url: The server's API root, e.g. ``https://api.openai.com/v1``.
        api_key: Sent as ``Authorization: Bearer ...``; None sends no such header.
        api: The wire-format label used in log records (``chat``, ``responses``, ...).
        **options: See :class:`HTTPOptions`.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        api: str = "chat",
        max_retries: int = 2,
        timeout: float = 600.0,
        connect_timeout: float = 10.0,
        headers: Mapping[str, str] | None = None,
        on_exchange: ExchangeHook | None = None,
        backoff_base: float = 0.5,
        max_backoff: float = 60.0,
        max_total_backoff: float = 120.0,
        max_connections: int = 256,
        request_timeout: float = REQUEST_TIMEOUT,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        allow_insecure_http: bool = False,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        retryable_answer: RetryRule = retryable_answer,
    ) -> None:
        _check_options(max_retries=max_retries, timeout=timeout, connect_timeout=connect_timeout,
                       request_timeout=request_timeout, backoff_base=backoff_base,
                       max_backoff=max_backoff, max_total_backoff=max_total_backoff,
                       max_connections=max_connections, max_response_bytes=max_response_bytes)
        if api_key:
            _check_key_transport(base_url, allow_insecure_http)
        self.base_url = base_url.rstrip("/")
        self.api = api
        self.max_retries = max_retries
        self.on_exchange = on_exchange
        self._backoff_base = backoff_base
        self._max_backoff = max_backoff
        self._max_total_backoff = max_total_backoff
        self._sleep = sleep
        self._retryable_answer = retryable_answer
        self._headers = {
            "User-Agent": _USER_AGENT,
            "Content-Type": "application/json",
            "Accept": "application/json",
            "Accept-Encoding": "gzip, deflate",  # decoded here, within the size limit
            **(headers or {}),
        }
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        # Per operation: connecting, then each wait for data. The attempt as a whole is
        # bounded by ``request_timeout``, checked as the body arrives.
        self._timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=min(connect_timeout, timeout), sock_read=timeout
        )
        self._max_connections = max_connections
        self._request_timeout = request_timeout
        self._max_response_bytes = max_response_bytes
        # A key of a few characters (a placeholder for a local server) would mask every
        # occurrence of those characters in an error: only real-looking keys are masked.
        self._redactor = Redactor([api_key]) if api_key and len(api_key) >= 8 else None
        if self._redactor is not None:
            # Known to every masker of the process too: whatever stores or logs what this
            # server sends (a session store, events, the CLI) masks the key it echoes.
            add_secret(api_key)
        self._client: aiohttp.ClientSession | None = None
        self._proxy: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closer: AsyncGenerator[None, None] | None = None

    def __repr__(self) -> str:
        return f"HTTPClient({self.base_url!r}, api={self.api!r})"

    # -- public API ---------------------------------------------------------------------------

    def post_json(self, path: str, body: Mapping[str, object]
                  ) -> Coroutine[object, None, JSONObject]:
        """POST ``body`` as JSON to ``base_url + path``; the returned coroutine, awaited,
        gives the decoded JSON object.

        Raises:
            ModelAPIError: after the retries, or at once for a non-retryable status or an
                answer over the size limit. A 2xx answer that is not a JSON object counts as a
                failed attempt and is retried.
        """
        return self._post(path, body, decode_json, _as_is)

    def post_read(self, path: str, body: Mapping[str, object],
                  read: Callable[[JSONObject], _T]) -> Coroutine[object, None, _T]:
        """:meth:`post_json`, the decoded object then read by ``read`` (an adapter's reply
        parser) within the request's own coroutine: awaited, it gives what ``read`` returns.

        Raises:
            ModelAPIError: as :meth:`post_json`; or ``read`` raised
                :class:`~gramagent._models._wire.ReplyError` (a reply the adapter cannot
                read, not retried: the error an adapter's ``reply_error`` makes). Anything
                else ``read`` raises passes through. The exchange hook sees the decoded
                object, as with :meth:`post_json`.
        """
        return self._post(path, body, decode_json, read)

    async def post_sse(self, path: str, body: Mapping[str, object], *,
                       ends: Callable[[Mapping[str, object]], bool] | None = None
                       ) -> list[JSONObject]:
        """POST ``body`` (with ``stream: true``) and return the stream's decoded JSON events.

        The whole stream is read before returning, so a connection dropped mid-stream is
        retried like any other transport error, and so is a stream holding an event that is
        not JSON. An event carrying an ``error`` object is a
        :class:`~gramagent.errors.ModelAPIError` at once. A server that answers with plain
        JSON instead of a stream gives a one-event list. With ``ends`` (an event that says
        the answer is over), a stream with neither such an event nor ``[DONE]`` was cut short
        (its connection's end is a legal end of its body): a failed attempt, like a JSON body
        cut short.
        """
        decode = decode_sse if ends is None else partial(decode_sse, ends=ends)
        events = await self._post(path, body, decode, _as_is, headers=_STREAM_HEADERS, sse=True)
        for event in events:
            if isinstance(event.get("error"), dict):
                raise self.error(
                    f"the stream reported an error: {error_detail(event) or 'no message'}",
                    url=self.base_url + path, status=200, body=orjson.dumps(event),
                    model=body_model(body),
                )
        return events

    async def stream_sse(self, path: str, body: Mapping[str, object], *,
                         ends: Callable[[Mapping[str, object]], bool] | None = None
                         ) -> AsyncGenerator[JSONObject, None]:
        """POST ``body`` (with ``stream: true``) and yield the stream's JSON events as they
        arrive.

        Failures before the answer starts (connect errors, retryable statuses) are retried like
        :meth:`post_json`'s; a stream that breaks off once started, carries an event that is
        not JSON or passes ``max_response_bytes`` is a :class:`~gramagent.errors.ModelAPIError`
        (its events were already handed out, so it is not replayed), as is an event carrying
        an ``error`` object. A server that answers with plain JSON gives one event. Closing
        the generator early closes the connection. The whole stream, from the request on,
        must end within ``request_timeout`` however steadily pieces come (deltas, single
        bytes, ``: ping`` comments): past it, a ModelAPIError saying so; the wait for each
        piece is bounded by ``timeout``. With ``ends``, as for :meth:`post_sse`: a stream cut
        short is a ModelAPIError.
        """
        deadline = time.perf_counter() + self._request_timeout
        reply = await self._post(path, body, keep_open, _as_is, headers=_STREAM_HEADERS,
                                 keep_open=True)
        url, status, model = self.base_url + path, reply.status, body_model(body)
        events: list[JSONObject] = []
        finished = False
        decoder = SSEDecoder()
        ended = ends is None  # whether the answer said it was over
        try:
            if reply.headers.get("content-type", "").startswith("application/json"):
                payloads: AsyncGenerator[str, None] = one_payload(
                    reply, self._max_response_bytes, deadline)
                ended = True  # a whole JSON answer
            else:
                payloads = sse_payloads(reply, self._max_response_bytes, decoder, deadline)
            async for payload in payloads:
                try:
                    event = orjson.loads(payload)
                except orjson.JSONDecodeError as exc:
                    raise self.error(f"the stream carried an event that is not JSON ({exc})",
                                     url=url, status=status, body=payload, model=model
                                     ) from exc
                if not isinstance(event, dict):
                    continue
                events.append(event)
                if isinstance(event.get("error"), dict):
                    raise self.error(
                        f"the stream reported an error: {error_detail(event) or 'no message'}",
                        url=url, status=status, body=orjson.dumps(event), model=model)
                if not ended and ends is not None:
                    ended = ends(event)
                yield event
            if not (ended or decoder.done):
                raise self.error(f"the stream broke off: {CUT_SHORT}", url=url,
                                 status=status, model=model)
            finished = True
        except (aiohttp.ClientError, TimeoutError) as exc:
            detail = transport_detail(exc, self._request_timeout)
            raise self.error(f"the stream broke off: {detail}", url=url, status=status,
                             model=model) from exc
        except BodyTooLarge as exc:
            raise self.error(str(exc), url=url, status=status, model=model) from None
        finally:
            if finished:
                reply.release()
            else:
                reply.close()
            if self.on_exchange is not None:
                self._notify(body, events, status)

    def error(
        self,
        message: str,
        *,
        url: str | None = None,
        status: int | None = None,
        body: bytes | str | Mapping[str, object] | None = None,
        model: str | None = None,
        attempts: int | None = None,
        retry_after: float | None = None,
    ) -> ModelAPIError:
        """Build the :class:`~gramagent.errors.ModelAPIError` for a failed request, this
        client's API key masked in it.

        This is the one place such errors are made, for transport failures, HTTP errors and
        replies an adapter cannot read alike. ``body`` is cut to an excerpt of about 500
        characters.
        """
        return request_error(message, mask=self._mask, url=url, status=status, body=body,
                             model=model, attempts=attempts, retry_after=retry_after)

    async def aclose(self) -> None:
        """Close the pooled connections; the next request opens a new pool.

        A pool opened under another event loop is left to that loop, which closes it when it
        shuts down (see :meth:`_pool`).
        """
        closer, loop = self._closer, self._loop
        self._client = self._loop = self._closer = None
        if closer is not None and loop is asyncio.get_running_loop():
            await closer.aclose()

    async def __aenter__(self) -> HTTPClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- internals ----------------------------------------------------------------------------

    async def _open_pool(self) -> aiohttp.ClientSession:
        """Open the pooled client of the running event loop (:meth:`_post` calls this when
        there is none yet, or the one there belongs to another loop).

        A pool's connections belong to the loop that opened them. So that an adapter reused
        under successive loops (``asyncio.run`` / ``run_agent_sync`` calls) leaks no socket,
        each pool is tied to its loop by a suspended async generator: the loop's
        ``shutdown_asyncgens()`` (run by ``asyncio.run`` and ``asyncio.Runner`` before the
        loop closes) finalizes it, which closes the pool while the loop still runs.
        """
        client = aiohttp.ClientSession(
            headers=self._headers,
            timeout=self._timeout,
            connector=aiohttp.TCPConnector(
                limit=self._max_connections, limit_per_host=0, keepalive_timeout=30.0
            ),
            cookie_jar=aiohttp.DummyCookieJar(),  # model APIs set no cookies worth keeping
            auto_decompress=False,  # done by read_body, within the size limit
        )
        closer = _close_at_shutdown(client)
        await closer.__anext__()  # runs to its yield: no suspension, no interleaving
        self._client, self._loop, self._closer = client, asyncio.get_running_loop(), closer
        self._proxy = _env_proxy(self.base_url)
        return client

    async def _post(self, path: str, body: Mapping[str, object],
                    decode: Callable[[bytes, aiohttp.ClientResponse], _D],
                    read: Callable[[_D], _T], *,
                    headers: Mapping[str, str] | None = None, keep_open: bool = False,
                    sse: bool = False) -> _T:
        """Send with retries; return the decoded body of a 2xx answer, read: ``read(decoded)``
        (a :class:`~gramagent._models._wire.ReplyError` it raises is a ModelAPIError, not
        retried). ``headers`` are added to the pool's (which ask for JSON);
        ``decode(body, reply)`` raises :class:`UnreadableBody` for a body it cannot use (an
        attempt that failed, like a dropped connection). With ``keep_open`` a 2xx answer is not
        read: ``decode`` gets it open (an empty body), the caller reads and releases it. With
        ``sse`` the body is an event stream, read to its ``[DONE]`` (see
        :func:`~gramagent._models.http_body.read_body`). A failed attempt's details (status,
        body, retry hint, cause) are worked out only when one fails.
        """
        url = self.base_url + path
        try:
            content = orjson.dumps(body)
        except TypeError:  # a big integer, deep nesting or a lone surrogate: the exact path
            content = exact_json.dumps(body).encode()
        limit = self._max_response_bytes
        waited = 0.0
        attempt = 0
        status: int | None
        while True:
            started = time.perf_counter()
            # What a failed attempt sets: failure, status, retryable, failed_body, cause, hint
            # (the usual attempt returns without them).
            failed_body: bytes | None
            cause: BaseException | None
            hint: float | None
            try:
                pool = self._client
                if pool is None or self._loop is not asyncio.get_running_loop():
                    pool = await self._open_pool()
                reply = await pool.post(url, data=content, headers=headers,
                                        allow_redirects=False, proxy=self._proxy)
                code = reply.status
                if keep_open and 200 <= code < 300:
                    data = b""
                else:
                    try:
                        stream = reply.content
                        # What came with the headers: the usual answer, whole (at its end,
                        # aiohttp has checked its Content-Length, or raised: a declared length
                        # cannot differ from what arrived).
                        data = stream.read_nowait(-1)
                        if not (stream.at_eof() and len(data) <= limit
                                and "Content-Encoding" not in reply.headers):
                            data = await read_body(reply, data, limit,
                                                    started + self._request_timeout, sse=sse)
                    finally:
                        reply.release()
            except (aiohttp.ClientError, TimeoutError, BodyTooLarge) as exc:
                status, failure, retryable, cause = self._broken(body, attempt, started, exc)
                failed_body = hint = None
            else:
                status = code
                if 200 <= code < 300:
                    try:
                        decoded = decode(data, reply)
                    except UnreadableBody as exc:
                        failure = (f"the server answered HTTP {status} with a body that cannot "
                                   f"be read: {exc}")
                        failed_body, retryable, cause, hint = data, True, None, None
                        self._log_attempt(body, attempt, started, status=status, error=failure)
                        self._notify(body, self._mask(body_text(data)), status)
                    else:
                        if _model_log.isEnabledFor(logging.INFO):
                            self._log_attempt(body, attempt, started, status=status)
                        if self.on_exchange is not None and not keep_open:
                            self._notify(body, decoded, status)
                        try:
                            return read(decoded)
                        except ReplyError as exc:
                            shown = decoded if isinstance(decoded, Mapping) else None
                            raise self.error(str(exc), url=url, status=200, body=shown,
                                             model=body_model(body)) from exc
                else:
                    failed_body, cause = data, None
                    failure, retryable, hint = self._refused(body, attempt, started, reply, data)
            delay, failure = self._retry(failure, retryable, attempt, hint, waited)
            if delay is not None:
                await self._sleep(delay)
                waited += delay
                attempt += 1
                continue
            raise self.error(
                failure, url=url, status=status, body=failed_body, model=body_model(body),
                attempts=attempt + 1, retry_after=hint,
            ) from cause

    def _retry(self, failure: str, retryable: bool, attempt: int, hint: float | None,
               waited: float) -> tuple[float | None, str]:
        """After a failed attempt: the wait before the next one (None: no retry), and the
        failure as the error will say it (why there is no retry, when the wait is too long)."""
        if not retryable or attempt >= self.max_retries:
            return None, failure
        delay = retry_delay(attempt, hint, base=self._backoff_base)
        if delay <= self._max_backoff and waited + delay <= self._max_total_backoff:
            return delay, failure
        return None, (f"{failure}; the next retry would wait {delay:.1f} s, beyond the "
                      f"{self._max_backoff:g} s / {self._max_total_backoff:g} s total allowed")

    def _broken(self, body: Mapping[str, object], attempt: int, started: float,
                exc: BaseException) -> tuple[int | None, str, bool, BaseException | None]:
        """An attempt without a usable answer (a transport failure, or a body over the size
        limit), logged and reported: its status (None without an answer), what failed,
        whether to retry (not a body over the limit), and the cause to chain."""
        if isinstance(exc, BodyTooLarge):
            self._log_attempt(body, attempt, started, status=exc.status, error=str(exc))
            self._notify(body, str(exc), exc.status)
            return exc.status, str(exc), False, None
        detail = transport_detail(exc, self._request_timeout)
        self._log_attempt(body, attempt, started, error=detail)
        self._notify(body, detail, None)
        return None, f"could not get an answer: {detail}", True, exc

    def _refused(self, body: Mapping[str, object], attempt: int, started: float,
                 reply: aiohttp.ClientResponse, data: bytes) -> tuple[str, bool, float | None]:
        """An answer with an error status, logged and reported: what failed, whether to retry,
        and the wait the server asks for."""
        status = reply.status
        detail = error_detail_bytes(data)
        failure = f"HTTP {status}" + (f": {detail}" if detail else "")
        self._log_attempt(body, attempt, started, status=status, error=failure)
        self._notify(body, self._mask(body_text(data)), status)
        retryable = self._retryable_answer(status, detail)
        return failure, retryable, parse_retry_after(reply.headers) if retryable else None

    def _mask(self, text: str) -> str:
        """``text`` with this client's API key masked (a server may echo it back)."""
        return text if self._redactor is None else self._redactor.redact_text(text)

    def _log_attempt(self, body: Mapping[str, object], attempt: int, started: float, *,
                     status: int | None = None, error: str | None = None) -> None:
        log_model_attempt(
            model=body_model(body) or "", api=self.api, attempt=attempt + 1,
            elapsed_ms=(time.perf_counter() - started) * 1000, status=status,
            error=None if error is None else self._mask(error),
        )

    def _notify(self, request: Mapping[str, object], response: object, status: int | None) -> None:
        hook = self.on_exchange
        if hook is not None:
            hook(request, response, status)


def _as_is(value: _V) -> _V:
    """The ``read`` of a decoded body used as it is."""
    return value


def body_model(body: Mapping[str, object]) -> str | None:
    """The model a request body names (for error messages and logs), else None."""
    model = body.get("model")
    return model if isinstance(model, str) else None



_STREAM_HEADERS = {"Accept": "text/event-stream"}
"""The headers of a streamed request, on top of the pool's (read-only)."""


def _env_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url`` (``HTTP(S)_PROXY``, ``NO_PROXY``), if any."""
    parts = urllib.parse.urlsplit(url)
    if parts.hostname and urllib.request.proxy_bypass(parts.hostname):
        return None
    return urllib.request.getproxies().get(parts.scheme)


async def _close_at_shutdown(client: aiohttp.ClientSession) -> AsyncGenerator[None, None]:
    """Suspended for the life of ``client``; closing the generator closes the client."""
    try:
        yield
    finally:
        await client.close()


def _check_key_transport(base_url: str, allowed: bool) -> None:
    """Refuse to send an API key in clear text over the network, unless allowed."""
    if urllib.parse.urlsplit(base_url).scheme != "http" or is_loopback(base_url):
        return
    if allowed or os.environ.get(ALLOW_INSECURE_ENV, "") in ("1", "true", "yes"):
        return
    raise ConfigurationError(
        f"refusing to send the API key over plain http to {base_url}: anyone on the way can "
        f"read it. Use https, or allow it explicitly (allow_insecure_http=True, or "
        f"{ALLOW_INSECURE_ENV}=1)"
    )
