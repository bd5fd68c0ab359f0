"""A size limit on what an MCP server sends over HTTP.

The SDK reads a JSON reply to the end into memory, however long it is: a server that sends an
endless body filled the client's memory until the request's timeout (1.4 GB in 10 s on
127.0.0.1). :class:`BoundedTransport` wraps the HTTP transport of the client's
``httpx2.AsyncClient``: a reply body that passes ``max_message_bytes`` stops being read, and the
request fails at once. Event streams are not counted here, as a whole: the SDK bounds each of
their events (``max_sse_event_size``, given the same limit), and one stream carries many
messages over a long session.

The SDK turns the read error into a JSON-RPC parse error of the request (its
``httpx2.StreamError`` handling), so the session stays usable: :func:`oversized_message` tells
that error from a server's own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Final

import httpx2

__all__ = ["DEFAULT_MAX_MESSAGE_BYTES", "BoundedTransport", "ReplyTooLarge", "oversized_message"]

DEFAULT_MAX_MESSAGE_BYTES: Final = 32 * 1024 * 1024
"""The most bytes one message from an MCP server may have (as a model's reply: 32 MiB)."""

_MARK: Final = "passed max_message_bytes"
"""In the message of :class:`ReplyTooLarge`, as the SDK passes it on."""


class ReplyTooLarge(httpx2.StreamError):
    """A reply body passed the limit (a ``StreamError``: the SDK fails the request with it)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the reply {_MARK} ({limit} bytes); not read further")


class _BoundedBody(httpx2.AsyncByteStream):
    """A response body that raises :class:`ReplyTooLarge` once more than ``limit`` bytes come."""

    def __init__(self, body: httpx2.AsyncByteStream, limit: int) -> None:
        self._body = body
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        left = self._limit
        async for piece in self._body:
            left -= len(piece)
            if left < 0:
                raise ReplyTooLarge(self._limit)
            yield piece

    async def aclose(self) -> None:
        await self._body.aclose()


class BoundedTransport(httpx2.AsyncBaseTransport):
    """An HTTP transport whose reply bodies (but event streams) hold at most ``limit`` bytes."""

    def __init__(self, limit: int, inner: httpx2.AsyncBaseTransport | None = None) -> None:
        self._limit = limit
        self._inner = inner if inner is not None else httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            return response
        body = response.stream
        assert isinstance(body, httpx2.AsyncByteStream)
        return httpx2.Response(response.status_code, headers=response.headers,
                               stream=_BoundedBody(body, self._limit),
                               extensions=response.extensions)

    async def aclose(self) -> None:
        await self._inner.aclose()


def oversized_message(message: str) -> bool:
    """Whether the SDK's error ``message`` for a request says its reply passed the limit: a
    body :class:`BoundedTransport` stopped, or an event over the SDK's ``max_sse_event_size``."""
    return _MARK in message or ("Server-sent event exceeded the" in message
                                and "byte limit" in message)
