"""What a wheel carries (issue 12, item 5): every package under src/ and the examples.

Building a wheel needs the build backend from the network, so the test reads the setuptools
configuration instead; the built wheel was checked by hand (``python3 -m pip wheel --no-deps
-w /tmp/whl .``, then ``gramagent examples`` in a venv with it installed).
"""

from __future__ import annotations

import fnmatch
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from setuptools import find_packages

from gramagent._install import examples_dir

ROOT = Path(__file__).resolve().parent.parent
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_the_package_list_is_the_source_tree_and_the_examples() -> None:
    assert sorted(SETUPTOOLS["packages"]) == sorted(
        [*find_packages(str(ROOT / "src")), "gramagent.examples"])
    assert SETUPTOOLS["package-dir"] == {"": "src", "gramagent.examples": "examples"}


def test_every_example_file_is_package_data() -> None:
    """Each file of examples/ (agents and their data) matches a package-data pattern, so a
    wheel has what ``gramagent run "$(gramagent examples)/analyst.gram"`` reads."""
    patterns = SETUPTOOLS["package-data"]["gramagent.examples"]
    files = _tracked("examples")
    assert any(f.endswith(".gram") for f in files) and "data/sales.csv" in files
    for name in files:
        assert any(fnmatch.fnmatch(name, pattern) for pattern in patterns), name


def _tracked(folder: str) -> list[str]:
    """The files git tracks under ``folder`` (not what runs left there), relative to it."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        return [p.relative_to(ROOT / folder).as_posix()
                for p in (ROOT / folder).rglob("*") if p.is_file()]
    listed = subprocess.run(["git", "ls-files", folder], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout.split()
    return [name.removeprefix(folder + "/") for name in listed]


def test_the_examples_command_finds_them_in_a_checkout() -> None:
    assert examples_dir() == ROOT / "examples"
    assert (examples_dir() / "hello_world.gram").is_file()


@pytest.mark.slow
def test_the_dev_install_leaves_pip_check_clean() -> None:
    """Issue 33, item 5: the README's test command installs the BFCL corpus outside the
    environment (``--target .bfcl``), so its pins and unmet requirements do not break the
    environment's consistency. A corpus installed into the environment fails here."""
    done = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
