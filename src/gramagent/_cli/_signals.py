"""SIGTERM and SIGHUP end a command the way Ctrl-C does.

Python's default for both is to die at once: no ``finally``, no exit handlers, so a temporary
workspace and its sandbox files stayed behind when a service manager stopped the CLI or its
terminal closed. :func:`stop_as_interrupt` turns the first of them into what Ctrl-C does at
that moment (``KeyboardInterrupt``, or the cancellation ``asyncio.Runner`` makes of it), so
the command unwinds and its cleanup runs; a second one is ignored, so that cleanup finishes.
A signal the CLI was started with ignored (``nohup``) stays ignored.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

__all__ = ["Termination", "stop_as_interrupt"]

SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Termination:
    """Which termination signal arrived, if one did."""

    def __init__(self) -> None:
        self.signum: int | None = None

    @property
    def name(self) -> str | None:
        """``SIGTERM`` or ``SIGHUP`` once one arrived, else None."""
        return signal.Signals(self.signum).name if self.signum is not None else None

    def handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:
            return  # already stopping: let the cleanup run to its end
        self.signum = signum
        on_interrupt = signal.getsignal(signal.SIGINT)
        if callable(on_interrupt):  # Python's default or asyncio.Runner's: as if Ctrl-C
            on_interrupt(signal.SIGINT, frame)
        else:
            raise KeyboardInterrupt


@contextlib.contextmanager
def stop_as_interrupt() -> Iterator[Termination]:
    """Within the block, SIGTERM and SIGHUP interrupt like Ctrl-C (main thread only)."""
    termination = Termination()
    if threading.current_thread() is not threading.main_thread():
        yield termination
        return
    previous = {}
    for signum in SIGNALS:
        if signal.getsignal(signum) is signal.SIG_DFL:
            previous[signum] = signal.signal(signum, termination.handle)
    try:
        yield termination
    finally:
        for signum, handler in previous.items():  # once stopping, the exit handlers finish
            signal.signal(signum, handler if termination.signum is None else signal.SIG_IGN)
