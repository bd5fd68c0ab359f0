"""The greeting tools of the hello-world examples: ``sayHello`` and ``sayGoodbye``.

Both are instant string formatting, so they run inline on the event loop
(``blocking=False``) instead of paying a worker-thread hop.
"""

from __future__ import annotations

from gramagent._runtime.library import Tool, tool

__all__ = ["say_goodbye", "say_hello"]


def _say_hello(personName: str = "world") -> str:  # noqa: N803 - the spec's parameter name
    """Returns a friendly greeting message for the given name"""
    return f"Hello, {personName}! Nice to meet you."


say_hello: Tool = tool(name="sayHello", blocking=False)(_say_hello)
"""``sayHello(personName="world")``: its schema is the one generated from
``(personName::String {default:"world"})==>(::String)``."""


def _say_goodbye(personName: str = "world") -> str:  # noqa: N803 - the spec's parameter name
    """Returns a warm farewell message for the given name"""
    return f"Goodbye, {personName}! It was lovely talking with you."


say_goodbye: Tool = tool(name="sayGoodbye", blocking=False)(_say_goodbye)
"""``sayGoodbye(personName="world")``, the second tool of ``examples/hello_goodbye.gram``."""
