"""The library uses asyncio through its public API only: no private asyncio name imported or
read (``asyncio.tasks._enter_task``, ``loop._ready``...), and no coroutine stepped by hand
(``coro.send(None)``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "gramagent"

_PRIVATE_ASYNCIO_ATTRIBUTES = frozenset({
    "_ready", "_scheduled", "_enter_task", "_leave_task", "_register_task",
    "_unregister_task", "_current_tasks", "_all_tasks", "_fut_waiter", "_callbacks",
    "_asyncio_future_blocking", "_must_cancel", "_step", "_wakeup", "_run_once",
    "_get_running_loop", "_set_running_loop", "_swap_current_task", "_PyTask", "_CTask",
})
"""Names of asyncio's internals that code reaching into them reads on loops, tasks and
handles (whatever the object is called where it is read; a class's own attribute of the same
name, ``self._ready``, is its own)."""


def problems(source: str) -> list[str]:
    """What in ``source`` uses asyncio privately or steps a coroutine by hand: one entry
    each, in line order."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.ImportFrom) and node.module is not None and (
                node.module.split(".")[0] in ("asyncio", "_asyncio")):
            found += [f"{line}: from {node.module} import {a.name}" for a in node.names
                      if a.name.startswith("_") or node.module.startswith("_")]
        elif isinstance(node, ast.Import):
            found += [f"{line}: import {a.name}" for a in node.names
                      if a.name.split(".")[0] == "_asyncio"
                      or (a.name.startswith("asyncio.") and "._" in a.name)]
        elif isinstance(node, ast.Attribute):
            own = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            if (node.attr in _PRIVATE_ASYNCIO_ATTRIBUTES and not own) or (
                    node.attr.startswith("_") and not node.attr.startswith("__")
                    and _rooted_at_asyncio(node.value)):
                found.append(f"{line}: .{node.attr}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "send" and len(node.args) == 1
              and isinstance(node.args[0], ast.Constant) and node.args[0].value is None):
            found.append(f"{line}: .send(None)")
    return sorted(found, key=lambda entry: int(entry.split(":")[0]))


def _rooted_at_asyncio(node: ast.expr) -> bool:
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id == "asyncio"


def test_the_check_finds_each_kind_of_private_use() -> None:
    """Each form the check is for is found (so that a clean result means something)."""
    sample = """
import asyncio
from asyncio.tasks import _enter_task, _leave_task
from asyncio import events
loop = asyncio.get_running_loop()
handle = loop._ready[-1]
task = asyncio.tasks._PyTask
asyncio._get_running_loop()
coro.send(None)
coro.send(value)
"""
    assert problems(sample) == [
        "3: from asyncio.tasks import _enter_task", "3: from asyncio.tasks import _leave_task",
        "6: ._ready", "7: ._PyTask", "8: ._get_running_loop", "9: .send(None)"]


@pytest.mark.parametrize("path", sorted(SRC.rglob("*.py")), ids=lambda p: str(p.relative_to(SRC)))
def test_no_private_asyncio_and_no_hand_stepped_coroutine(path: Path) -> None:
    assert problems(path.read_text(encoding="utf-8")) == []
