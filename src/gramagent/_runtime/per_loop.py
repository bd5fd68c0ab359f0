"""One object per running event loop (the deadline watcher, the worker threads' hand-off).

Every run and tool call asks for its loop's object; there is usually one event loop, and a
weak dictionary's lookup makes a weak reference each time, so the loop asked for last and its
object are kept at hand.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["PerLoop"]

_T = TypeVar("_T")


class PerLoop(Generic[_T]):
    """``make(loop)`` once per event loop, kept while the loop lives.

    The objects must not hold their loop strongly (nor anything that does, such as a timer
    handle): the table's keys are weak, and a loop its own object holds would be kept for
    good, with every loop after it (``run_agent_sync`` in a script makes one per call).
    """

    __slots__ = ("_last", "_make", "_objects")

    def __init__(self, make: Callable[[asyncio.AbstractEventLoop], _T]) -> None:
        self._make = make
        self._objects: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _T] = (
            weakref.WeakKeyDictionary())
        self._last: tuple[weakref.ref[asyncio.AbstractEventLoop], _T] | None = None

    def get(self, loop: asyncio.AbstractEventLoop) -> _T:
        """The object of ``loop`` (made on first use)."""
        last = self._last  # one tuple: a thread of another event loop never sees a torn pair
        if last is not None and last[0]() is loop:
            return last[1]
        found = self._objects.get(loop)
        if found is None:
            found = self._objects[loop] = self._make(loop)
        self._last = (weakref.ref(loop), found)
        return found
