"""The wire between the parent and a sandbox worker: length-prefixed JSON frames.

A frame is a 4-byte big-endian length followed by that many bytes of UTF-8 JSON (one object).
Both sides use this module; it imports only the standard library, because the worker runs in
an isolated interpreter (``python -I -S``) that cannot import gramagent.

The parent treats every frame from the worker as untrusted input: the decoder refuses lengths
over ``max_bytes``, anything that is not a JSON object, nesting too deep for the
JSON parser, ``NaN`` and infinities, and strings holding lone surrogates (which cannot be
encoded again).
"""

from __future__ import annotations

import json
import os
import re
import struct
from collections.abc import Mapping
from typing import Any, NoReturn

__all__ = ["FrameDecoder", "FrameError", "encode_frame", "parse_body", "read_frame", "write_frame"]

_HEADER = struct.Struct(">I")
_SURROGATE = re.compile("[\ud800-\udfff]")


class FrameError(Exception):
    """A frame was truncated, too large or not a JSON object."""


def encode_frame(message: Mapping[str, object]) -> bytes:
    """The bytes of one frame holding ``message``."""
    body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return _HEADER.pack(len(body)) + body


def write_frame(fd: int, message: Mapping[str, object]) -> None:
    """Write one frame to file descriptor ``fd`` (all of it, retrying short writes)."""
    view = memoryview(encode_frame(message))
    while view:
        written = os.write(fd, view)
        view = view[written:]


class FrameDecoder:
    """Incremental decoder: feed bytes as they arrive, take whole frames out.

    Args:
        max_bytes: the largest frame body accepted.
    """

    def __init__(self, *, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._buffer = bytearray()

    def feed(self, data: bytes) -> None:
        """Append bytes read from the stream."""
        self._buffer += data

    def buffered(self) -> int:
        """How many bytes are held that no frame read so far has taken."""
        return len(self._buffer)

    def next_frame(self) -> dict[str, Any] | None:
        """The next complete frame, or None if more bytes are needed.

        Raises:
            FrameError: the frame announces more than ``max_bytes`` or is not a JSON object.
        """
        if len(self._buffer) < _HEADER.size:
            return None
        (size,) = _HEADER.unpack_from(self._buffer)
        if size > self.max_bytes:
            raise FrameError(f"frame of {size} bytes exceeds the limit of {self.max_bytes}")
        end = _HEADER.size + size
        if len(self._buffer) < end:
            return None
        body = bytes(self._buffer[_HEADER.size:end])
        del self._buffer[:end]
        return parse_body(body)


def _no_constant(name: str) -> NoReturn:
    raise FrameError(f"frame holds {name}, which is not JSON")


def parse_body(body: bytes) -> dict[str, Any]:
    """The JSON object of one frame body, checked as described in the module docstring.

    Raises:
        FrameError: the body is not a well-formed frame.
    """
    try:
        message = json.loads(body.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise FrameError(f"frame is not valid JSON: {type(exc).__name__}: {exc}"[:300]) from None
    if not isinstance(message, dict):
        raise FrameError(f"frame holds a {type(message).__name__}, expected an object")
    _check_strings(message)
    return message


def _check_strings(value: object) -> None:
    """Refuse lone surrogates anywhere (keys included), without recursion."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                raise FrameError("frame holds a string with a lone surrogate")
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def read_frame(fd: int, decoder: FrameDecoder) -> dict[str, Any]:
    """Read one frame from ``fd`` through ``decoder``, blocking until it is complete.

    Bytes of a following frame stay in ``decoder`` for the next call.

    Raises:
        FrameError: the stream ended first, the frame is too large or not a JSON object.
    """
    while (message := decoder.next_frame()) is None:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            raise FrameError("stream closed in the middle of a frame")
        decoder.feed(chunk)
    return message
