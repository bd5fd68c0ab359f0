"""Two implementations of the example's sayHello tool: the A/B experiment compares them.

``formal`` greets with "Hello, NAME! Nice to meet you."; ``casual`` says "Hey NAME :)" and
documents itself differently (it still binds: names and schemas match the spec, and the
different docstring is reported as a warning).
"""

from __future__ import annotations

from gramagent import ToolLibrary


def formal() -> ToolLibrary:
    """Variant A."""
    library = ToolLibrary()

    @library.register
    def sayHello(personName: str = "world") -> str:
        """Returns a friendly greeting message for the given name"""
        return f"Hello, {personName}! Nice to meet you."

    return library


def casual() -> ToolLibrary:
    """Variant B."""
    library = ToolLibrary()

    @library.register
    def sayHello(personName: str = "world") -> str:
        """Greets someone informally."""
        return f"Hey {personName} :)"

    return library
