"""Server-Sent Events: the ``data`` payloads of a stream, decoded as its text arrives.

:class:`SSEDecoder` takes a stream's text in pieces split anywhere and releases each event's
payload at the blank line ending it, up to ``data: [DONE]``; :func:`parse_sse` decodes a
whole stream at once. Encoding events (for the scripted server) is :func:`encode_sse`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from gramagent import _json as exact_json

__all__ = ["SSEDecoder", "encode_sse", "parse_sse"]


def parse_sse(text: str) -> list[str]:
    """The ``data`` payloads of a Server-Sent Events stream, in order, up to ``[DONE]``.

    Multi-line ``data`` fields are joined with newlines (the SSE rule); comments, ``event``,
    ``id`` and ``retry`` fields are skipped.
    """
    decoder = SSEDecoder()
    payloads = decoder.feed(text)
    payloads.extend(decoder.close())
    return payloads


_SSE_LINE_END = re.compile(r"\r\n|\r|\n")


class SSEDecoder:
    """An incremental Server-Sent Events decoder: feed text as it arrives, get whole payloads.

    Text may be split anywhere (inside a line or a ``\\r\\n`` pair). A payload is released at
    the blank line ending its event; ``data: [DONE]`` ends the stream (:attr:`done`; later text
    is ignored). :meth:`close` releases an event the stream ended without a blank line.

    Time is linear in the stream's length, however a long line is split: each piece is
    scanned once, and the unfinished line is kept as its pieces, joined when it ends
    (docs/performance.md, "Models and HTTP", has the hostile case this guards against).
    """

    __slots__ = ("_after_cr", "_data", "_pending", "done")

    def __init__(self) -> None:
        self._pending: list[str] = []
        """The pieces of the line not ended yet."""
        self._after_cr = False
        """Whether the last piece ended with a CR that ended a line: a LF next is its CRLF's."""
        self._data: list[str] = []
        self.done = False
        """Whether ``[DONE]`` was seen."""

    def feed(self, text: str) -> list[str]:
        """Take a piece of the stream; return the payloads it completed, in order."""
        if self.done or not text:
            return []
        out: list[str] = []
        start = 0
        if self._after_cr:
            self._after_cr = False
            if text[0] == "\n":
                start = 1
        # Only CR, LF and CRLF end lines (not the other line breaks str.splitlines knows).
        for match in _SSE_LINE_END.finditer(text, start):
            piece = text[start:match.start()]
            if self._pending:
                self._pending.append(piece)
                piece = "".join(self._pending)
                self._pending = []
            self._line(piece, out)
            start = match.end()
            if self.done:
                return out
        if start < len(text):
            self._pending.append(text[start:])
        elif text[-1] == "\r":
            self._after_cr = True  # half of a CRLF, perhaps: a LF at the next piece's start
        return out

    def close(self) -> list[str]:
        """The end of the stream: release what is still pending."""
        out: list[str] = []
        if not self.done:
            if self._pending:
                self._line("".join(self._pending), out)
                self._pending = []
            if not self.done:
                self._line("", out)
        return out

    def _line(self, line: str, out: list[str]) -> None:
        if not line:
            if self._data:
                payload = "\n".join(self._data)
                self._data = []
                if payload == "[DONE]":
                    self.done = True
                else:
                    out.append(payload)
        elif line.startswith("data:"):
            value = line[5:]
            self._data.append(value[1:] if value.startswith(" ") else value)


def encode_sse(events: Iterable[Mapping[str, object]], *, named: bool = False,
               done: bool = True) -> bytes:
    """Server-sent events: one ``data:`` line per event (after an ``event:`` line naming its
    ``type`` when ``named``, as the Responses API sends), then ``data: [DONE]`` when
    ``done`` (Chat Completions ends so; the Responses API does not)."""
    parts = [(b"event: " + str(e.get("type")).encode() + b"\n" if named else b"")
             + b"data: " + exact_json.dumps(e).encode() + b"\n\n" for e in events]
    if done:
        parts.append(b"data: [DONE]\n\n")
    return b"".join(parts)
