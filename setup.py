"""The opt-in compiled build; everything else about the package is in pyproject.toml.

A default install (``pip install .``, ``pip install -e ".[dev]"``) builds pure Python: this file
adds nothing then. With ``GRAMAGENT_COMPILE=1`` the modules listed in
``src/gramagent/_compiled.py`` are compiled with mypyc into C extensions that load in place of
their sources (README, "Compiled hot path")::

    python3 -m pip install ".[compile]"
    GRAMAGENT_COMPILE=1 python3 -m pip install --no-build-isolation --no-deps --force-reinstall .

The first command installs the package's dependencies, mypy and the type stubs: mypyc
type-checks what it compiles, so they must be there before the build (``--no-build-isolation``:
the build uses this environment, not a fresh one without them). Not for an editable install:
the extensions would shadow the sources being edited.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import shutil
import sys
import sysconfig
import tomllib
from importlib import metadata
from pathlib import Path

from setuptools import setup

ROOT = Path(__file__).resolve().parent
PREPARE = 'python3 -m pip install ".[compile]"'
INSTALL = ("GRAMAGENT_COMPILE=1 python3 -m pip install --no-build-isolation --no-deps "
           "--force-reinstall .")


def _modules() -> list[str]:
    """``MODULES`` of src/gramagent/_compiled.py, read without importing the package."""
    tree = ast.parse((ROOT / "src/gramagent/_compiled.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and node.target.id == "MODULES" and node.value is not None):
            return list(ast.literal_eval(node.value))
    raise SystemExit("setup.py: no MODULES in src/gramagent/_compiled.py")


def _missing_for_build() -> list[str]:
    """The distributions mypyc's type check needs that this environment lacks: the package's
    own dependencies and its ``compile`` extra (pyproject.toml)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    wanted = project["dependencies"] + project["optional-dependencies"]["compile"]
    names = [re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0] for requirement in wanted]
    missing = []
    for name in names:
        try:
            metadata.distribution(name)
        except metadata.PackageNotFoundError:
            missing.append(name)
    return missing


def _compiled() -> list[object]:
    """The mypyc extensions of the listed modules; a clear stop when a tool is missing."""
    missing = _missing_for_build()
    if missing:
        raise SystemExit(
            f"GRAMAGENT_COMPILE=1: the build environment lacks {', '.join(missing)} (mypyc "
            f"type-checks what it compiles): run `{PREPARE}`, then `{INSTALL}`")
    from mypyc.build import mypycify
    compiler = shlex.split(sysconfig.get_config_var("CC") or "cc")[0]
    if shutil.which(compiler) is None:
        raise SystemExit(f"GRAMAGENT_COMPILE=1 needs a C compiler ({compiler!r} not found); "
                         "install one (e.g. `apt-get install gcc`) or build without it")
    paths = [f"src/{name.replace('.', '/')}.py" for name in _modules()]
    extensions: list[object] = mypycify(paths, opt_level="3")
    return extensions


def _extensions() -> list[object]:
    """The compiled build's extensions when ``GRAMAGENT_COMPILE=1`` asks for them, else none.
    The metadata steps (egg_info, dist_info) get none either: mypyc runs once, for the build."""
    if os.environ.get("GRAMAGENT_COMPILE") != "1" or sys.argv[1:2] in (["egg_info"],
                                                                        ["dist_info"]):
        return []
    return _compiled()


if __name__ == "__main__":  # as setuptools runs it; tests read the functions above
    setup(ext_modules=_extensions())
