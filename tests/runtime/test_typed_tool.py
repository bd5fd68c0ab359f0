"""Static types of @tool and ToolLibrary.register (checked by mypy/pyright; also run by pytest).

Every decorator form must type as a Tool, and the called forms as decorators returning Tool.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, assert_type

from gramagent.runtime.library import Tool, ToolLibrary, tool

library = ToolLibrary()


@tool
def bare(x: int) -> int:
    """Bare form."""
    return x


@tool(name="called", timeout=1.0)
async def called(x: int) -> int:
    """Called form."""
    return x


@library.register
def registered(x: int) -> int:
    """Registered bare."""
    return x


@library.register(name="registered_called")
def registered_called(x: int) -> int:
    """Registered called."""
    return x


def test_decorated_functions_are_tools() -> None:
    """Both decorator forms of @tool and register give Tool objects, typed as such."""
    assert_type(bare, Tool)
    assert_type(called, Tool)
    assert_type(registered, Tool)
    assert_type(registered_called, Tool)
    assert_type(tool(name="x"), Callable[[Callable[..., Any]], Tool])
    assert_type(library.register(bare, replace=True), Tool)
    for item in (bare, called, registered, registered_called):
        assert isinstance(item, Tool)
    assert library.names() == ("registered", "registered_called", "bare")
