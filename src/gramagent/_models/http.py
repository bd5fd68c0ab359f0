"""The one HTTP client every wire-format adapter posts through.

:class:`HTTPClient` owns one pooled :class:`aiohttp.ClientSession` (HTTP/1.1 keep-alive, created
lazily on first use, sized for a hundred concurrent runs), encodes bodies with orjson, and
retries what is worth retrying:

- HTTP 408, 409, 429 and 5xx answers, waiting what the server's ``Retry-After`` (seconds or an
  HTTP date) or ``retry-after-ms`` header asks for, else an exponential backoff with jitter;
- dropped connections and other transport errors (connect, read, write, protocol, timeouts).

Every failure that survives the retries becomes a :class:`~gramagent.errors.ModelAPIError`
built by :meth:`HTTPClient.error`, the one place such errors are made: it names the model, the
URL, the HTTP status and the server's message, and carries an excerpt of the body. The API key
travels only in the ``Authorization`` header of the pooled client; it is never part of an
error, a log record or what the :data:`ExchangeHook` sees.

Why aiohttp: the client's CPU per request is most of an agent loop's own cost, and aiohttp
(C-accelerated HTTP parsing, a connection pool that hands out an idle connection without
scanning the others) spends several times less per request than httpx, whose pool checks
every pooled connection on each request (``bench/RESULTS.md``, "Loop overhead"). Proxies named
by the environment (``HTTP(S)_PROXY``, ``NO_PROXY``) are honoured, looked up once per pool.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
import time
import urllib.parse
import urllib.request
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol, Self, TypedDict, Unpack

import aiohttp
import orjson

from gramagent._logs import MODEL_LOGGER, log_model_attempt
from gramagent.errors import AuthenticationError, ConfigurationError, ModelAPIError

__all__ = [
    "AUTH_STATUSES",
    "RETRY_STATUSES",
    "ExchangeHook",
    "HTTPAdapter",
    "HTTPClient",
    "HTTPOptions",
    "parse_retry_after",
    "parse_sse",
    "retry_delay",
]

RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
"""HTTP statuses answered by a retry (any other 5xx is retried too)."""
AUTH_STATUSES = frozenset({401, 403})
"""HTTP statuses that mean the API key was refused: an AuthenticationError, not retried."""

EXCERPT_CHARS = 500
"""How much of an error body a ModelAPIError keeps."""

_USER_AGENT = "gramagent/0.1"

_model_log = logging.getLogger(MODEL_LOGGER)


class ExchangeHook(Protocol):
    """Called once per HTTP attempt, e.g. to print raw traffic for the CLI's ``-v``.

    ``request`` is the JSON body sent (never the headers, so never the API key); ``response`` the
    decoded JSON answer (a list of decoded events for a stream), or the body text of an error,
    or the transport error's text when no answer came; ``status`` is the HTTP status, None when
    the connection failed.
    """

    def __call__(self, request: Mapping[str, Any], response: Any, status: int | None) -> None: ...


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
    sleep: Callable[[float], Awaitable[None]]
    """The coroutine used to wait between attempts (default :func:`asyncio.sleep`)."""


def retry_delay(
    attempt: int,
    retry_after: float | None,
    *,
    base: float = 0.5,
    rand: Callable[[], float] = random.random,
) -> float:
    """Seconds to wait before retry number ``attempt + 1`` (``attempt`` counts from 0).

    A server hint (``Retry-After``) wins; otherwise ``base * 2**attempt`` with "equal jitter":
    half of it fixed, the other half random, so that many clients backing off together spread
    out.
    """
    if retry_after is not None:
        return max(0.0, retry_after)
    step = base * 2.0**attempt
    return step / 2 + rand() * step / 2


def parse_retry_after(headers: Mapping[str, str], *, now: datetime | None = None) -> float | None:
    """The wait a server asks for, in seconds, or None when it asks for none.

    Reads ``retry-after-ms`` (milliseconds, sent by OpenAI) and ``Retry-After`` (delta-seconds
    or an HTTP date, RFC 9110 section 10.2.3). Unreadable values are ignored.
    """
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def parse_sse(text: str) -> list[str]:
    """The ``data`` payloads of a Server-Sent Events stream, in order, up to ``[DONE]``.

    Multi-line ``data`` fields are joined with newlines (the SSE rule); comments, ``event``,
    ``id`` and ``retry`` fields are skipped.
    """
    payloads: list[str] = []
    data: list[str] = []
    for line in text.splitlines():
        if not line:
            if data:
                payload = "\n".join(data)
                data = []
                if payload == "[DONE]":
                    return payloads
                payloads.append(payload)
            continue
        if line.startswith("data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(" ") else value)
    if data:
        payload = "\n".join(data)
        if payload != "[DONE]":
            payloads.append(payload)
    return payloads


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
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        self.base_url = base_url.rstrip("/")
        self.api = api
        self.max_retries = max_retries
        self.on_exchange = on_exchange
        self._backoff_base = backoff_base
        self._max_backoff = max_backoff
        self._max_total_backoff = max_total_backoff
        self._sleep = sleep
        self._headers = {
            "User-Agent": _USER_AGENT,
            "Content-Type": "application/json",
            "Accept": "application/json",
            **(headers or {}),
        }
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        # Per operation, as before: connecting, then each wait for data (not the whole body).
        self._timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=min(connect_timeout, timeout), sock_read=timeout
        )
        self._max_connections = max_connections
        self._client: aiohttp.ClientSession | None = None
        self._proxy: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closer: AsyncGenerator[None, None] | None = None

    def __repr__(self) -> str:
        return f"HTTPClient({self.base_url!r}, api={self.api!r})"

    # -- public API ---------------------------------------------------------------------------

    async def post_json(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """POST ``body`` as JSON to ``base_url + path`` and return the decoded JSON object.

        Raises:
            ModelAPIError: after the retries, or at once for a non-retryable status, or when
                a successful answer is not a JSON object.
        """
        response = await self._post(path, body)
        try:
            data = orjson.loads(response.content)
        except orjson.JSONDecodeError as exc:
            self._notify(body, _text(response.content), response.status_code)
            raise self._bad_answer(
                f"the server answered HTTP {response.status_code} with a body that is not JSON "
                f"({exc})",
                response, body, response.content,
            ) from exc
        self._notify(body, data, response.status_code)
        if not isinstance(data, dict):
            raise self._bad_answer(
                f"the server answered with JSON {type(data).__name__}, expected an object",
                response, body, response.content,
            )
        return data

    async def post_sse(self, path: str, body: Mapping[str, Any]) -> list[dict[str, Any]]:
        """POST ``body`` (with ``stream: true``) and return the stream's decoded JSON events.

        The whole stream is read before returning, so a connection dropped mid-stream is
        retried like any other transport error. An event carrying an ``error`` object, or one
        that is not JSON, is a :class:`~gramagent.errors.ModelAPIError`. A server that answers
        with plain JSON instead of a stream gives a one-event list.
        """
        response = await self._post(path, body, headers=_STREAM_HEADERS)
        content_type = response.headers.get("content-type", "")
        payloads = ([_text(response.content)] if content_type.startswith("application/json")
                    else parse_sse(_text(response.content)))
        events: list[dict[str, Any]] = []
        for payload in payloads:
            try:
                event = orjson.loads(payload)
            except orjson.JSONDecodeError as exc:
                self._notify(body, _text(response.content), response.status_code)
                raise self._bad_answer(
                    f"the stream carried an event that is not JSON ({exc})",
                    response, body, payload,
                ) from exc
            if isinstance(event, dict):
                events.append(event)
        self._notify(body, events, response.status_code)
        for event in events:
            if isinstance(event.get("error"), dict):
                raise self._bad_answer(
                    f"the stream reported an error: {_error_detail(event) or 'no message'}",
                    response, body, orjson.dumps(event),
                )
        return events

    def error(
        self,
        message: str,
        *,
        url: str | None = None,
        status: int | None = None,
        body: bytes | str | Mapping[str, Any] | None = None,
        model: str | None = None,
        attempts: int | None = None,
    ) -> ModelAPIError:
        """Build the :class:`~gramagent.errors.ModelAPIError` for a failed request.

        This is the one place such errors are made, for transport failures, HTTP errors and
        replies an adapter cannot read alike. ``body`` is cut to an excerpt of about 500
        characters.
        """
        where = f" ({url})" if url else ""
        tries = f" after {attempts} attempts" if attempts and attempts > 1 else ""
        who = f"model {model!r}" if model else "the model server"
        if status in AUTH_STATUSES:
            return AuthenticationError(
                f"request to {who} failed: {message}{where}; the server refused the API key: "
                "check --api-key / OPENAI_API_KEY (or api_key=)",
                status=status, body=_excerpt(body), model=model,
            )
        return ModelAPIError(
            f"request to {who} failed{tries}: {message}{where}",
            status=status,
            body=_excerpt(body),
            model=model,
        )

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
        )
        closer = _close_at_shutdown(client)
        await closer.__anext__()  # runs to its yield: no suspension, no interleaving
        self._client, self._loop, self._closer = client, asyncio.get_running_loop(), closer
        self._proxy = _env_proxy(self.base_url)
        return client

    def _bad_answer(
        self, message: str, response: _Answer, request: Mapping[str, Any],
        body: bytes | str,
    ) -> ModelAPIError:
        """The error for a 2xx ``response`` to ``request`` whose ``body`` cannot be used."""
        return self.error(
            message, url=str(response.url), status=response.status_code, body=body,
            model=_model_of(request),
        )

    async def _post(self, path: str, body: Mapping[str, Any], *,
                    headers: Mapping[str, str] | None = None) -> _Answer:
        """Send with retries; return a 2xx answer, its body read. ``headers`` are added to the
        pool's (which ask for JSON)."""
        url = self.base_url + path
        content = orjson.dumps(body)
        waited = 0.0
        attempt = 0
        while True:
            started = time.perf_counter()
            try:
                pool = self._client
                if pool is None or self._loop is not asyncio.get_running_loop():
                    pool = await self._open_pool()
                reply = await pool.post(url, data=content, headers=headers,
                                        allow_redirects=False, proxy=self._proxy)
                try:
                    response = _Answer(reply.status, await reply.read(), reply.headers, url)
                finally:
                    reply.release()
            except aiohttp.ClientError as exc:
                detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                self._log_attempt(body, attempt, started, error=detail)
                self._notify(body, detail, None)
                status: int | None = None
                retryable = True
                hint: float | None = None
                failure = f"could not get an answer: {detail}"
                failed_body: bytes | None = None
                cause: BaseException | None = exc
            else:
                status = response.status_code
                if 200 <= status < 300:
                    if _model_log.isEnabledFor(logging.INFO):
                        self._log_attempt(body, attempt, started, status=status)
                    return response
                failed_body = response.content
                detail = _error_detail_bytes(failed_body)
                failure = f"HTTP {status}" + (f": {detail}" if detail else "")
                self._log_attempt(body, attempt, started, status=status, error=failure)
                self._notify(body, _text(failed_body), status)
                cause = None
                retryable = status in RETRY_STATUSES or status >= 500
                hint = parse_retry_after(response.headers) if retryable else None
            if retryable and attempt < self.max_retries:
                delay = retry_delay(attempt, hint, base=self._backoff_base)
                if delay <= self._max_backoff and waited + delay <= self._max_total_backoff:
                    await self._sleep(delay)
                    waited += delay
                    attempt += 1
                    continue
                failure += (
                    f"; the next retry would wait {delay:.1f} s, beyond the "
                    f"{self._max_backoff:g} s / {self._max_total_backoff:g} s total allowed"
                )
            raise self.error(
                failure, url=url, status=status, body=failed_body, model=_model_of(body),
                attempts=attempt + 1,
            ) from cause

    def _log_attempt(self, body: Mapping[str, Any], attempt: int, started: float, *,
                     status: int | None = None, error: str | None = None) -> None:
        log_model_attempt(
            model=_model_of(body) or "", api=self.api, attempt=attempt + 1,
            elapsed_ms=(time.perf_counter() - started) * 1000, status=status, error=error,
        )

    def _notify(self, request: Mapping[str, Any], response: Any, status: int | None) -> None:
        hook = self.on_exchange
        if hook is not None:
            hook(request, response, status)


class HTTPAdapter:
    """What the HTTP adapters (chat, responses, harmony) share: the client, closing, errors.

    A subclass adds its ``request`` method; it owns an :class:`HTTPClient` made from
    ``base_url``, ``api_key`` and the transport ``options``, or uses the one passed as
    ``http`` (sharing its pool; transport options then belong to that client).

    Raises:
        ConfigurationError: ``http`` given together with transport options.
    """

    http: HTTPClient
    """The client every request of this adapter goes through."""
    model_name: str | None = None
    """The model this adapter was made for (:func:`~gramagent._models.registry.resolve_model`
    sets it from the model reference); a run given this adapter sends it as the model name.
    None: the agent's model name."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        *,
        api: str,
        http: HTTPClient | None = None,
        **options: Unpack[HTTPOptions],
    ) -> None:
        if http is not None and options:
            raise ConfigurationError(
                "pass transport options to the shared HTTPClient, not with http="
            )
        self.http = http or HTTPClient(base_url, api_key, api=api, **options)

    def reply_error(
        self, path: str, problem: Exception, *, body: bytes | Mapping[str, Any], model: str
    ) -> ModelAPIError:
        """The error for a successful answer at ``path`` that the adapter cannot read."""
        return self.http.error(
            str(problem), url=self.http.base_url + path, status=200, body=body, model=model
        )

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self.http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _model_of(body: Mapping[str, Any]) -> str | None:
    model = body.get("model")
    return model if isinstance(model, str) else None


class _Answer:
    """An answer whose body has been read (the connection is back in the pool)."""

    __slots__ = ("content", "headers", "status_code", "url")

    def __init__(self, status: int, content: bytes, headers: Mapping[str, str], url: str
                 ) -> None:
        self.status_code = status
        self.content = content
        self.headers = headers
        self.url = url


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


def _text(content: bytes) -> str:
    return content.decode("utf-8", errors="replace")


def _excerpt(body: bytes | str | Mapping[str, Any] | None) -> str | None:
    if body is None:
        return None
    if isinstance(body, bytes):
        text = _text(body[: EXCERPT_CHARS * 4])
    elif isinstance(body, str):
        text = body
    else:
        text = _text(orjson.dumps(body))
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS] + "…"


def _error_detail(data: Any) -> str | None:
    """The human message of an OpenAI-style error body (``{"error": {"message": ...}}``)."""
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict):
            message = err.get("message")
            if isinstance(message, str) and message:
                return message
        elif isinstance(err, str) and err:
            return err
        message = data.get("message") or data.get("detail")
        if isinstance(message, str) and message:
            return message
    return None


def _error_detail_bytes(content: bytes) -> str:
    try:
        detail = _error_detail(orjson.loads(content))
    except orjson.JSONDecodeError:
        detail = None
    if detail is None:
        detail = _text(content[:400]).strip()
    return detail if len(detail) <= 300 else detail[:300] + "…"
