"""Tool libraries of the experiment tests, named by import path (``ab_libs:polite`` ...).

``polite`` greets everyone with "Hello, NAME!"; ``planted`` answers "Hi NAME." instead for the
names in :data:`PLANTED` (a difference of known size); ``reworded`` is ``polite`` with another
docstring (binds with a warning); ``guarded`` is ``polite`` asking for approval of each call
(nobody can give it in an experiment; a call that ran would log as ``polite``). Each call is
appended to the file named by the ``AB_CALL_LOG`` environment variable, when set (to count
runs across processes)."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import threading

from gramagent import ToolLibrary

PLANTED = frozenset({f"person{i}" for i in range(0, 40, 2)})
"""Names ``planted`` greets without "Hello" (even numbers below 40)."""


def _log(variant: str, name: str) -> None:
    path = os.environ.get("AB_CALL_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(f"{variant}\t{name}\n")


def polite() -> ToolLibrary:
    library = ToolLibrary()

    @library.register
    def sayHello(personName: str = "world") -> str:
        """Returns a friendly greeting message for the given name."""
        _log("polite", personName)
        return f"Hello, {personName}!"

    return library


def planted() -> ToolLibrary:
    library = ToolLibrary()

    @library.register
    def sayHello(personName: str = "world") -> str:
        """Returns a friendly greeting message for the given name."""
        _log("planted", personName)
        return f"Hi {personName}." if personName in PLANTED else f"Hello, {personName}!"

    return library


def reworded() -> ToolLibrary:
    library = ToolLibrary()

    @library.register
    def sayHello(personName: str = "world") -> str:
        """Greets a person by name, warmly."""
        _log("reworded", personName)
        return f"Hello, {personName}!"

    return library


def wrong_schema() -> ToolLibrary:
    library = ToolLibrary()

    @library.register
    def sayHello(personName: int = 0) -> str:
        """Returns a friendly greeting message for the given name."""
        return f"Hello, {personName}!"

    return library


def greets_politely(case: object, record: object) -> tuple[bool, str]:
    """A custom evaluator: the answer starts with "Hello"."""
    answer = getattr(record, "answer", None) or ""
    return answer.startswith("Hello"), "starts with Hello" if answer.startswith(
        "Hello") else "does not start with Hello"


def guarded() -> ToolLibrary:
    greet = polite().lookup("sayHello")
    assert greet is not None
    return ToolLibrary([dataclasses.replace(greet, requires_approval=True)])


RETURNED: list[object] = [True]
"""What :func:`returns_what_it_is_told` gives (an exception in it is raised instead)."""


def returns_what_it_is_told(case: object, record: object) -> object:
    """A custom evaluator returning (or raising) ``RETURNED[0]``, for hostile-value tests."""
    value = RETURNED[0]
    if isinstance(value, BaseException):
        raise value
    return value


def bracketed() -> ToolLibrary:
    """``polite`` with a description rich would read as markup (it binds with a warning)."""
    greet = polite().lookup("sayHello")
    assert greet is not None
    return ToolLibrary([dataclasses.replace(
        greet, description="Greets [bold]one[/bold] person [a, b] or [/path].")])


RELEASED = threading.Event()
"""Set by a coroutine of the test's event loop; :func:`waits_for_the_loop` waits for it."""


def waits_for_the_loop(case: object, record: object) -> tuple[bool, str]:
    """A plain (blocking) custom evaluator: passes when the event loop could set
    :data:`RELEASED` while it waited (it cannot, if the evaluator blocks the loop)."""
    released = RELEASED.wait(timeout=10)
    return released, "the loop ran meanwhile" if released else "the loop was blocked"


def never_returns(case: object, record: object) -> bool:
    """A plain custom evaluator that blocks for good (its thread is abandoned)."""
    threading.Event().wait()
    return True


async def never_answers(case: object, record: object) -> bool:
    """An async custom evaluator that never returns."""
    await asyncio.Event().wait()
    return True
