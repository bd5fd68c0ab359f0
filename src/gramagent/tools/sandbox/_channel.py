"""The parent's end of a worker's pipes: every read and write bounded by a deadline.

The worker is hostile: it may stop reading its request pipe, shrink it, or never answer. So
the request pipe is non-blocking and every write waits for room only until the call's
deadline; replies are read the same way, and each reply must answer the request it follows
(:func:`check_reply`).
"""

from __future__ import annotations

import os
import selectors
import time
from collections.abc import Mapping
from typing import Any

from gramagent.tools.sandbox._protocol import FrameDecoder, FrameError, encode_frame

__all__ = ["ChannelClosed", "ChannelTimeout", "WorkerChannel", "check_reply"]


class ChannelTimeout(Exception):
    """The deadline passed before the frame was written or read."""


class ChannelClosed(Exception):
    """The worker's end of a pipe is gone (it exited or closed it)."""


class WorkerChannel:
    """Frames to and from one worker over its stdin and stdout pipes.

    Args:
        request_fd: the write end of the worker's request pipe (made non-blocking here).
        reply_fd: the read end of its reply pipe.
        max_frame: the largest reply frame accepted.
    """

    def __init__(self, request_fd: int, reply_fd: int, *, max_frame: int) -> None:
        self.request_fd = request_fd
        self.reply_fd = reply_fd
        self.decoder = FrameDecoder(max_bytes=max_frame)
        os.set_blocking(request_fd, False)

    def send(self, message: Mapping[str, object], deadline: float) -> None:
        """Write one frame, waiting for pipe space no longer than ``deadline``.

        Args:
            message: the frame's object.
            deadline: when to give up (``time.monotonic()``).

        Raises:
            ChannelTimeout: the worker did not take the whole frame in time.
            ChannelClosed: the worker's end is closed.
        """
        view = memoryview(encode_frame(message))
        with selectors.DefaultSelector() as selector:
            selector.register(self.request_fd, selectors.EVENT_WRITE)
            while view:
                try:
                    view = view[os.write(self.request_fd, view):]
                    continue
                except BlockingIOError:
                    pass
                except (BrokenPipeError, ConnectionResetError):
                    raise ChannelClosed("the worker closed its request pipe") from None
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ChannelTimeout("the worker stopped reading its requests")
                selector.select(remaining)

    def pending(self) -> bool:
        """Whether bytes beyond the last frame read are buffered or waiting in the pipe."""
        if self.decoder.buffered():
            return True
        with selectors.DefaultSelector() as selector:
            selector.register(self.reply_fd, selectors.EVENT_READ)
            return bool(selector.select(0))

    def receive(self, deadline: float) -> dict[str, Any]:
        """Read one frame, waiting no longer than ``deadline``.

        Raises:
            ChannelTimeout: no whole frame in time.
            ChannelClosed: the worker's end closed first.
            FrameError: the frame is malformed (too large, not JSON, not an object...).
        """
        with selectors.DefaultSelector() as selector:
            selector.register(self.reply_fd, selectors.EVENT_READ)
            while (frame := self.decoder.next_frame()) is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ChannelTimeout("no answer in time")
                if not selector.select(remaining):
                    continue
                chunk = os.read(self.reply_fd, 1 << 16)
                if not chunk:
                    raise ChannelClosed("the worker closed its reply pipe")
                self.decoder.feed(chunk)
        return frame


_REPLY_TYPES: dict[str, tuple[type, ...]] = {
    "output": (str,), "output_bytes": (int,), "value": (str, type(None)),
    "error": (str, type(None)),
}


def check_reply(frame: dict[str, Any], request_id: str) -> dict[str, Any]:
    """``frame`` if it is the result of request ``request_id`` with fields of the right types.

    Raises:
        FrameError: it answers another request, or a field is missing or mistyped.
    """
    if frame.get("op") == "refused":
        raise FrameError(f"the supervisor refused the worker: {str(frame.get('reason'))[:200]}")
    if frame.get("op") != "result" or frame.get("id") != request_id:
        raise FrameError(f"a reply that does not answer this request (op {frame.get('op')!r}, "
                         f"id {str(frame.get('id'))[:40]!r})")
    for name, types in _REPLY_TYPES.items():
        value = frame.get(name)
        if not isinstance(value, types) or isinstance(value, bool):
            raise FrameError(f"reply field {name!r} is {type(value).__name__}")
    return frame
