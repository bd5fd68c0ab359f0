"""The opt-in compiled build's module list (README, "Compiled hot path"): nothing is compiled
here; the tests check that the list names real modules, that setup.py reads that list, and
that each listed module stays clear of what mypyc refuses or what breaks the compiled build in
ways a quick read of the source can tell (each was met compiling them: mypyc 2.4)."""

from __future__ import annotations

import ast
import importlib
import importlib.machinery
import importlib.metadata
import runpy
from pathlib import Path

import pytest

from gramagent._compiled import MODULES, compiled_modules

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"


def _path(name: str) -> Path:
    return SRC / (name.replace(".", "/") + ".py")


def test_the_list_names_modules_of_the_package_once() -> None:
    assert MODULES and len(set(MODULES)) == len(MODULES)
    for name in MODULES:
        assert name.startswith("gramagent.") and _path(name).is_file(), name


def test_setup_py_compiles_the_list_and_nothing_by_default(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GRAMAGENT_COMPILE", raising=False)
    setup = runpy.run_path(str(ROOT / "setup.py"), run_name="gramagent_setup")
    assert setup["_modules"]() == list(MODULES)
    assert setup["_extensions"]() == []


def _refusals(tree: ast.Module) -> list[str]:
    """What in a module mypyc refuses, or compiles into something the package breaks on."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.AsyncFunctionDef) and any(
                isinstance(n, ast.Yield | ast.YieldFrom) for n in ast.walk(node)):
            found.append(f"line {node.lineno}: an async generator (mypyc: unimplemented)")
        elif isinstance(node, ast.Raise) and node.cause is not None:
            found.append(f"line {node.lineno}: raise ... from (mypyc drops the cause: set "
                         "__cause__ or __suppress_context__ on the error)")
        elif (isinstance(node, ast.Try) and not _catches_everything(node)
              and any(isinstance(n, ast.Await) for n in ast.walk(ast.Module(node.finalbody,
                                                                          [])))):
            found.append(f"line {node.lineno}: an await in a finally an exception can pass "
                         "through (mypyc loses the exception: end in an 'except "
                         "BaseException' handler and raise it by name)")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and any(
                "\ud800" <= c <= "\udfff" for c in node.value):
            found.append(f"line {node.lineno}: a surrogate in a string literal")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "__new__" and isinstance(node.func.value, ast.Name)
              and node.func.value.id == "object"):
            found.append(f"line {node.lineno}: object.__new__ (refused for a native class)")
        elif isinstance(node, ast.ClassDef | ast.FunctionDef):
            found += [f"line {d.lineno}: a frozen builder (_frozen.builds needs the class "
                      "interpreted)" for d in node.decorator_list
                      if isinstance(d, ast.Call) and isinstance(d.func, ast.Name)
                      and d.func.id == "builds"]
    return found


def _catches_everything(node: ast.Try) -> bool:
    """Whether a handler of ``node`` takes every exception (bare, or BaseException)."""
    return any(h.type is None or (isinstance(h.type, ast.Name) and h.type.id == "BaseException")
               for h in node.handlers)


@pytest.mark.parametrize("name", MODULES)
def test_each_listed_module_avoids_what_mypyc_refuses(name: str) -> None:
    assert _refusals(ast.parse(_path(name).read_text(encoding="utf-8"))) == []


def test_the_check_finds_each_refusal() -> None:
    source = '''
async def stream():
    yield 1
TEXT = "\\ud800"
def make(cls):
    return object.__new__(cls)
@builds(Thing)
def new_thing(x): ...
try:
    pass
except KeyError as exc:
    raise ValueError() from exc
async def run(model):
    try:
        pass
    finally:
        await model.aclose()
async def run_closing_in_the_handler(model):
    try:
        pass
    except BaseException as exc:
        await model.aclose()
        raise exc
    finally:
        await model.aclose()
'''
    assert sorted(r.split(":")[0] for r in _refusals(ast.parse(source))) == [
        "line 12", "line 14", "line 2", "line 4", "line 6", "line 7"]


def test_compiled_modules_are_the_ones_loaded_from_extensions() -> None:
    """Empty for a default install; the whole list for a compiled one."""
    compiled = compiled_modules()
    assert set(compiled) <= set(MODULES)
    for name in MODULES:
        module_file = str(importlib.import_module(name).__file__)
        is_extension = module_file.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))
        assert is_extension == (name in compiled), module_file


def test_a_build_without_what_mypyc_needs_stops_naming_the_commands(
        monkeypatch: pytest.MonkeyPatch) -> None:
    setup = runpy.run_path(str(ROOT / "setup.py"), run_name="gramagent_setup")
    real = importlib.metadata.distribution

    def lacking(name: str) -> importlib.metadata.Distribution:
        if name in ("orjson", "types-jsonschema"):
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "distribution", lacking)
    monkeypatch.setenv("GRAMAGENT_COMPILE", "1")
    monkeypatch.setattr("sys.argv", ["setup.py", "bdist_wheel"])
    with pytest.raises(SystemExit) as stopped:
        setup["_extensions"]()
    message = str(stopped.value)
    assert "lacks orjson, types-jsonschema" in message
    assert 'python3 -m pip install ".[compile]"' in message
    assert "GRAMAGENT_COMPILE=1 python3 -m pip install --no-build-isolation" in message
