"""The ``sayHello`` tool of the hello-world agent."""

from __future__ import annotations

from gramagent.runtime.library import Tool, tool

__all__ = ["say_hello"]


def _say_hello(personName: str = "world") -> str:  # noqa: N803 - the spec's parameter name
    """Returns a friendly greeting message for the given name"""
    return f"Hello, {personName}! Nice to meet you."


say_hello: Tool = tool(name="sayHello")(_say_hello)
"""``sayHello(personName="world")``: its schema is the one generated from
``(personName::String {default:"world"})==>(::String)``."""
