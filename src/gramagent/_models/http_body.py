"""An answer's body, read within its size and time limits and decoded.

:func:`read_body` reads a body piece by piece through a :class:`BoundedBody`, which inflates
gzip or deflate on the way and stops at ``max_response_bytes`` as received and as inflated (a
decompression bomb stops there: :class:`BodyTooLarge`, never retried). :func:`decode_json` and
:func:`decode_sse` turn a whole body into a JSON object or a stream's JSON events, raising
:class:`UnreadableBody` (a failed attempt, retried like a dropped connection) for one they
cannot use; :func:`sse_payloads` hands out a live stream's payloads as they arrive.
"""

from __future__ import annotations

import codecs
import time
import zlib
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Final

import aiohttp
import orjson

from gramagent._models.sse import SSEDecoder
from gramagent._models.wire_shapes import JSONObject

__all__ = [
    "CUT_SHORT",
    "BodyTooLarge",
    "BoundedBody",
    "UnreadableBody",
    "body_reader",
    "body_text",
    "decode_json",
    "decode_sse",
    "keep_open",
    "one_payload",
    "read_body",
    "sse_payloads",
]


class UnreadableBody(Exception):
    """A 2xx body that cannot be decoded: the attempt failed (and may be retried)."""


class BodyTooLarge(Exception):
    """An answer whose body passes the size limit (never retried)."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        super().__init__(message)


_GZIP_WBITS = 16 + zlib.MAX_WBITS
_ZLIB_WBITS = zlib.MAX_WBITS
_RAW_DEFLATE_WBITS = -zlib.MAX_WBITS


async def read_body(reply: aiohttp.ClientResponse, chunk: bytes, limit: int, deadline: float,
                     *, sse: bool = False) -> bytes:
    """The body of ``reply`` (``chunk``: what was read of it already), decompressed, or
    :class:`BodyTooLarge` as soon as it passes ``limit`` bytes as received or as decompressed (a
    gzip bomb stops there). Past ``deadline`` (``time.perf_counter``), checked as each piece
    arrives, a TimeoutError: a server that trickles its answer is cut off without a timer per
    request. With ``sse``, an event stream's body ends at ``data: [DONE]`` as a live reading
    of it does (what a server sends after it, or holding the connection open, is not
    waited for)."""
    stream = reply.content
    body = body_reader(reply, limit)
    events = SSEDecoder() if sse else None
    text = codecs.getincrementaldecoder("utf-8")(errors="replace") if sse else None
    read = 0  # the body's parts the decoder has seen
    while True:
        if chunk:
            body.feed(chunk)
            if events is not None and text is not None:
                for part in body.parts[read:]:
                    events.feed(text.decode(part))
                read = len(body.parts)
                if events.done:
                    return body.finish()
        if stream.at_eof():
            return body.finish()
        if time.perf_counter() > deadline:
            raise TimeoutError
        chunk = await stream.readany()


def body_reader(reply: aiohttp.ClientResponse, limit: int) -> BoundedBody:
    """The reader of ``reply``'s body, or :class:`BodyTooLarge` when its ``Content-Length`` is
    over ``limit`` or it uses an encoding that was not asked for."""
    status = reply.status
    length = reply.content_length
    if length is not None and length > limit:
        raise BodyTooLarge(status, f"the answer's body is {length} bytes (Content-Length), over "
                                f"the limit of {limit} bytes (max_response_bytes)")
    encoding = reply.headers.get("Content-Encoding", "").strip().lower()
    identity = not encoding or encoding == "identity"
    if not identity and encoding not in ("gzip", "x-gzip", "deflate"):
        raise BodyTooLarge(status, f"the answer uses Content-Encoding {encoding[:40]!r}, which "
                                "was not asked for (gzip and deflate were)")
    return BoundedBody(status, limit, None if identity else encoding)


class BoundedBody:
    """A body read piece by piece within the size limit, inflated on the way if compressed."""

    __slots__ = ("_inflate", "encoding", "limit", "parts", "received", "size", "status")

    def __init__(self, status: int, limit: int, encoding: str | None) -> None:
        self.status, self.limit, self.encoding = status, limit, encoding
        self.parts: list[bytes] = []
        self.received = self.size = 0
        self._inflate: zlib._Decompress | None = None

    def feed(self, chunk: bytes) -> None:
        """Take the next piece as received (inflating it when compressed).

        Raises:
            BodyTooLarge: the body passed the limit, as received or inflated.
            aiohttp.ClientPayloadError: a compressed body is corrupt.
        """
        self.received += len(chunk)
        if self.received > self.limit:
            raise BodyTooLarge(self.status, f"the answer's body passed the limit of {self.limit} "
                                         "bytes (max_response_bytes)")
        if self.encoding is None:
            self.parts.append(chunk)
            return
        if self._inflate is None:
            self._inflate = zlib.decompressobj(_GZIP_WBITS if "gzip" in self.encoding
                                               else _deflate_wbits(chunk))
        try:
            data = chunk
            while data:
                self._keep(self._inflate.decompress(data, self.limit - self.size + 1))
                data = self._inflate.unconsumed_tail
        except zlib.error as exc:
            raise aiohttp.ClientPayloadError(
                f"the {self.encoding} body is corrupt ({exc})") from exc

    def finish(self) -> bytes:
        """The whole body (what is left of a compressed one inflated)."""
        if self._inflate is not None:
            self._keep(self._inflate.flush())
        return b"".join(self.parts)

    def _keep(self, out: bytes) -> None:
        self.size += len(out)
        if self.size > self.limit:
            raise BodyTooLarge(self.status, f"the answer's body inflates past the limit of "
                                         f"{self.limit} bytes (max_response_bytes)")
        self.parts.append(out)


def _deflate_wbits(first: bytes) -> int:
    """``deflate`` is zlib-wrapped by the RFC, raw by some servers: tell them apart."""
    if len(first) >= 2 and first[0] & 0x0F == 8 and (first[0] << 8 | first[1]) % 31 == 0:
        return _ZLIB_WBITS
    return _RAW_DEFLATE_WBITS



def keep_open(data: bytes, reply: aiohttp.ClientResponse) -> aiohttp.ClientResponse:
    """The ``decode`` of a stream: the answer as it is, still open (its body unread)."""
    return reply


async def sse_payloads(reply: aiohttp.ClientResponse, limit: int, decoder: SSEDecoder,
                       deadline: float) -> AsyncGenerator[str, None]:
    """The SSE payloads of ``reply``'s body as its bytes arrive (decompressed, UTF-8 split
    anywhere), within ``limit`` bytes, through ``decoder`` (whose ``done`` then says whether
    the stream ended with ``[DONE]``). Past ``deadline`` (``time.perf_counter``), checked as
    each piece arrives (an event, a byte, a ``: ping`` comment), a TimeoutError."""
    body = body_reader(reply, limit)
    text = codecs.getincrementaldecoder("utf-8")(errors="replace")
    stream = reply.content
    while not stream.at_eof():
        chunk = await stream.readany()
        if time.perf_counter() > deadline:
            raise TimeoutError
        if not chunk:
            continue
        body.feed(chunk)
        data, body.parts = b"".join(body.parts), []
        for payload in decoder.feed(text.decode(data)):
            yield payload
        if decoder.done:
            return
    for payload in decoder.feed(text.decode(body.finish(), final=True)) + decoder.close():
        yield payload


async def one_payload(reply: aiohttp.ClientResponse, limit: int, deadline: float
                      ) -> AsyncGenerator[str, None]:
    """A plain JSON answer to a streamed request, as a stream of one payload (past
    ``deadline``, as for :func:`sse_payloads`, a TimeoutError)."""
    body = body_reader(reply, limit)
    stream = reply.content
    while not stream.at_eof():
        body.feed(await stream.readany())
        if time.perf_counter() > deadline:
            raise TimeoutError
    yield body_text(body.finish())



def decode_json(content: bytes, reply: aiohttp.ClientResponse) -> JSONObject:
    """A 2xx body as the JSON object it must be.

    Raises:
        UnreadableBody: the body is empty, not JSON, or JSON that is not an object.
    """
    try:
        data = orjson.loads(content)
    except orjson.JSONDecodeError as exc:
        if not content.strip():
            raise UnreadableBody("the body is empty") from None
        raise UnreadableBody(f"it is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise UnreadableBody(f"it is JSON {_kind(data)}, expected an object")
    return data


CUT_SHORT: Final = ("it ended before the answer did (no [DONE], no event saying the answer "
                     "was over)")


def decode_sse(content: bytes, reply: aiohttp.ClientResponse,
                ends: Callable[[Mapping[str, object]], bool] | None = None
                ) -> list[JSONObject]:
    """A whole event stream's JSON events (one event for a plain JSON answer).

    Raises:
        UnreadableBody: an event is not JSON, there is none, or (with ``ends``) the stream
            was cut short: neither ``[DONE]`` nor an event ``ends`` accepts.
    """
    text = body_text(content)
    content_type = reply.headers.get("content-type", "")
    whole = content_type.startswith("application/json")
    decoder = SSEDecoder()
    payloads = [text] if whole else [*decoder.feed(text), *decoder.close()]
    events: list[JSONObject] = []
    for payload in payloads:
        try:
            event = orjson.loads(payload)
        except orjson.JSONDecodeError as exc:
            raise UnreadableBody(f"the stream carried an event that is not JSON ({exc})") from None
        if isinstance(event, dict):
            events.append(event)
    if not events:
        raise UnreadableBody("the stream carried no JSON event")
    if ends is not None and not (whole or decoder.done or any(ends(e) for e in events)):
        raise UnreadableBody(f"the stream was cut short: {CUT_SHORT}")
    return events


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def body_text(content: bytes) -> str:
    """``content`` as text (UTF-8, bad bytes replaced)."""
    return content.decode("utf-8", errors="replace")

