"""The import graph runs one way: leaves <- spec <- models <- runtime <- tools, testing,
experiments, mcp <- cli <- the package root (docs/architecture.md draws it).

Every ``import`` of a gramagent module counts, at module level, inside functions and under
``TYPE_CHECKING`` alike: a local import may save start-up time, but not hide an upward edge.
The imports that run (all but ``TYPE_CHECKING`` ones) must also form no cycle, so a local
import cannot be used to dodge one: every module can be read after the ones it names.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

import gramagent

PACKAGE = Path(gramagent.__file__).resolve().parent

LAYERS: tuple[tuple[str, ...], ...] = (
    ("gramagent.errors", "gramagent._json", "gramagent._lazy", "gramagent._messages",
     "gramagent._frozen", "gramagent._logs", "gramagent._install", "gramagent._limit_values",
     "gramagent._prices", "gramagent._files"),
    ("gramagent._spec",),
    ("gramagent._models",),
    ("gramagent._runtime",),
    ("gramagent.tools", "gramagent.testing", "gramagent.experiments", "gramagent.mcp",
     "gramagent._agent_session"),
    ("gramagent._cli",),
    ("gramagent", "gramagent.__main__"),
)
"""Bottom first. A module may import its own layer and the layers below it."""

RUNTIME_VIEW_OF_MODELS = ("gramagent._models.base", "gramagent._models.registry")
"""The runtime knows the adapters only through the protocol and the registry (by name)."""


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def layer_of(name: str) -> int:
    best, depth = -1, -1
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (name == prefix or name.startswith(prefix + ".")) and len(prefix) > depth:
                best, depth = index, len(prefix)
    assert best >= 0, f"{name} is in no layer: add it to LAYERS (and docs/architecture.md)"
    return best


def _type_checking_only(tree: ast.Module) -> set[int]:
    """Ids of the import nodes inside ``if TYPE_CHECKING:`` blocks."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            inside.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return inside


@functools.cache
def imports(name: str, path: Path) -> tuple[tuple[str, int, bool], ...]:
    """(imported gramagent module, line, whether the import runs: not under TYPE_CHECKING)."""
    return tuple(_imports(name, path))


def _imports(name: str, path: Path) -> Iterator[tuple[str, int, bool]]:
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    typing_only = _type_checking_only(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1]
                                + ([base] if base else []))
            # `from gramagent import _json` names a module; `from x import Name` a name in x
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in ALL else base
                       for a in node.names]
        else:
            continue
        for target in targets:
            if target == "gramagent" or target.startswith("gramagent."):
                yield target, node.lineno, id(node) not in typing_only


ALL = modules()


FEATURES = layer_of("gramagent.experiments")
"""The features on top (tools, testing, experiments, mcp, the CLI) may also use the public
facade, ``gramagent`` itself, as a user would: it imports nothing of theirs, lazily or not."""


@pytest.mark.parametrize("name", sorted(ALL))
def test_imports_run_downward(name: str) -> None:
    """No module imports a layer above its own."""
    mine = layer_of(name)
    upward = [f"{ALL[name].name}:{line} imports {target}"
              for target, line, _ in imports(name, ALL[name])
              if layer_of(target) > mine and not (target == "gramagent" and mine >= FEATURES)]
    assert not upward, "\n".join(upward)


@pytest.mark.parametrize("name", sorted(n for n in ALL if n.startswith("gramagent._runtime")))
def test_runtime_sees_models_only_through_the_protocol_and_the_registry(name: str) -> None:
    """Concrete adapters are resolved by name through the registry, never imported."""
    direct = [f"line {line}: {target}" for target, line, _ in imports(name, ALL[name])
              if target.startswith("gramagent._models")
              and not target.startswith(RUNTIME_VIEW_OF_MODELS)]
    assert not direct, "\n".join(direct)


def test_imports_that_run_form_no_cycle() -> None:
    """The imports that run, at module level or inside functions, have no cycle."""
    graph = {name: {t for t, _, runs in imports(name, path) if runs and t in ALL and t != name}
             for name, path in ALL.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)


@pytest.mark.parametrize("name", sorted(n for n in ALL if n.startswith("gramagent._spec")))
def test_local_imports_in_the_spec_layer_say_why(name: str) -> None:
    """A function-level import inside _spec is there for import cost, and the comment above it
    says so and names where that cost is measured (docs/performance.md): the language is
    imported by every command."""
    path = ALL[name]
    lines = path.read_text().splitlines()
    tree = ast.parse("\n".join(lines))
    top = {id(node) for node in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in top:
            above = "\n".join(lines[max(0, node.lineno - 6): node.lineno - 1])
            assert "import cost" in above and "docs/performance.md" in above, \
                f"{path.name}:{node.lineno}"


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    """The reader above finds imports in functions and under TYPE_CHECKING too."""
    source = tmp_path / "probe.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "from gramagent import _json\n"
        "if TYPE_CHECKING:\n    from gramagent._runtime.library import Tool\n"
        "def f():\n    from gramagent._cli import app\n"
    )
    found = [(t, top) for t, _, top in imports("gramagent._spec.probe", source)]
    assert sorted(found) == [("gramagent._cli", True), ("gramagent._json", True),
                             ("gramagent._runtime.library", False)]
    assert [layer_of(t) for t, _ in found] == [0, 3, 5]
