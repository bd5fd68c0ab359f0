"""SIGTERM and SIGHUP end a command the way Ctrl-C does.

Python's default for both is to die at once: no ``finally``, no exit handlers, so a temporary
workspace and its sandbox files stayed behind when a service manager stopped the CLI or its
terminal closed. While a command runs (:func:`interrupt_on_termination`, applied by
``handle_errors``), the first of them becomes what Ctrl-C does at that moment
(``KeyboardInterrupt``, or the cancellation ``asyncio.Runner`` makes of it), so the command
unwinds and its cleanup runs; a later one is ignored, so that cleanup (and the exit handlers
after it) finish. A signal the CLI was started with ignored (``nohup``) stays ignored.
"""

from __future__ import annotations

import functools
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar

__all__ = ["interrupt_on_termination", "termination_signal"]

SIGNALS = (signal.SIGTERM, signal.SIGHUP)
F = TypeVar("F", bound=Callable[..., Any])

_received: list[int] = []
"""The termination signal of the running command, once one arrived."""


def termination_signal() -> int | None:
    """SIGTERM or SIGHUP if one stopped the running command, else None (Ctrl-C, or none)."""
    return _received[-1] if _received else None


def _on_termination(signum: int, frame: FrameType | None) -> None:
    if _received:
        return  # already stopping: let the cleanup run to its end
    _received.append(signum)
    on_interrupt = signal.getsignal(signal.SIGINT)
    if callable(on_interrupt):  # Python's default or asyncio.Runner's: as if Ctrl-C
        on_interrupt(signal.SIGINT, frame)
    else:
        raise KeyboardInterrupt


def interrupt_on_termination(func: F) -> F:
    """``func`` with SIGTERM and SIGHUP interrupting it like Ctrl-C (main thread only)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is not threading.main_thread():
            return func(*args, **kwargs)
        previous = {signum: signal.signal(signum, _on_termination) for signum in SIGNALS
                    if signal.getsignal(signum) is signal.SIG_DFL}
        _received.clear()
        try:
            return func(*args, **kwargs)
        finally:
            stopping = bool(_received)
            for signum, handler in previous.items():  # once stopping, exit handlers finish
                signal.signal(signum, signal.SIG_IGN if stopping else handler)

    return wrapper  # type: ignore[return-value]
