"""The spec layer's imports: only the leaves and itself, in one direction, and no local import
that hides a cycle (issue 11)."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import gramagent._spec

SPEC = Path(gramagent._spec.__file__).parent
LEAVES = {"gramagent.errors", "gramagent._messages", "gramagent._json", "gramagent._lazy",
          "gramagent._logs"}


def imports(path: Path) -> list[tuple[str, bool, int]]:
    """The gramagent modules a file imports: (module, at module level, line)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = {id(node) for node in tree.body}
    out = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "gramagent":  # from gramagent import _json
                names = [f"gramagent.{a.name}" for a in node.names]
            elif node.module.startswith("gramagent."):
                names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names if a.name.startswith("gramagent.")]
        out.extend((name, id(node) in top, node.lineno) for name in names)
    return out


def modules() -> dict[str, list[tuple[str, bool, int]]]:
    return {f"gramagent._spec.{p.stem}": imports(p) for p in sorted(SPEC.glob("*.py"))}


def test_spec_imports_only_the_leaves_and_itself() -> None:
    upward = [(module, name) for module, found in modules().items()
              for name, _, _ in found
              if name not in LEAVES and not name.startswith("gramagent._spec")]
    assert upward == []


def test_spec_modules_import_each_other_in_one_direction() -> None:
    graph = {module: {name for name, _, _ in found if name.startswith("gramagent._spec.")}
             for module, found in modules().items()}
    try:
        order = list(TopologicalSorter(graph).static_order())
    except CycleError as exc:  # pragma: no cover - the failure message
        raise AssertionError(f"import cycle: {exc.args[1]}") from None
    assert order.index("gramagent._spec.data") < order.index("gramagent._spec.signature") \
        < order.index("gramagent._spec.model") < order.index("gramagent._spec.gram")


def test_local_imports_say_why() -> None:
    """A function-level import inside _spec is there for import cost, and says so (with the
    cost measured) in the comment above it."""
    for module, found in modules().items():
        path = SPEC / f"{module.rsplit('.', 1)[1]}.py"
        lines = path.read_text(encoding="utf-8").splitlines()
        for name, top, line in found:
            if top or not name.startswith("gramagent"):
                continue
            above = "\n".join(lines[max(0, line - 6): line - 1])
            assert "import cost" in above and " ms" in above, f"{path.name}:{line}: {name}"
