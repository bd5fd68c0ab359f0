"""The command line's help, version and start-up cost (issue 12, items 10 and 16).

Through the installed console script. Start-up is checked by what a command imports
(``PYTHONPROFILEIMPORTTIME``), not by timing it: the figures are in bench/RESULTS.md.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cli_support import run_gramagent
from extras import needs_tools

from gramagent import __version__

pytestmark = pytest.mark.slow

COMMANDS = ["run", "chat", "check", "fmt", "schema", "signature", "tool", "tools",
            "harmony parse", "harmony render", "mcp import", "mcp serve", "examples"]
TYPE_PLACEHOLDER = re.compile(r"<(?:bool|int|float|str|path|list\[[^>]*\]|[a-z]+ range)>")


def _imported(stderr: str) -> set[str]:
    """Module names from ``-X importtime`` lines."""
    return {line.rsplit("|", 1)[1].strip() for line in stderr.splitlines()
            if line.startswith("import time:") and "|" in line}


def test_version(tmp_path: Path) -> None:
    done = run_gramagent("--version", cwd=tmp_path)
    assert done.returncode == 0
    assert done.stdout == f"gramagent {__version__}\n"


@pytest.mark.parametrize("command", COMMANDS)
def test_options_show_what_they_take_not_python_types(command: str, tmp_path: Path) -> None:
    done = run_gramagent(*command.split(), "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    options = [line for line in done.stdout.splitlines() if line.lstrip().startswith("-")]
    assert options
    for line in options:
        assert not TYPE_PLACEHOLDER.search(line), line
    verbose = [line for line in options if "--verbose" in line]
    for line in verbose:  # a counted flag: -v, -vv; it takes no value
        assert "default: 0" not in line and "INTEGER" not in line, line


def test_help_text_in_brackets_is_shown_as_written(tmp_path: Path) -> None:
    done = run_gramagent("signature", "--help", cwd=tmp_path)
    assert "[name:Tool {...} | ...]" in done.stdout


def test_help_loads_no_library_module(tmp_path: Path) -> None:
    """``gramagent --help`` imports typer and the command declarations, nothing that runs."""
    done = run_gramagent("--help", cwd=tmp_path, env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert done.returncode == 0
    imported = _imported(done.stderr)
    assert "gramagent._cli.run_commands" in imported  # the measurement works
    heavy = {"gramagent._spec.gram.text", "gramagent._spec.signature", "gramagent._spec.model",
             "gramagent._models.base", "gramagent._logs", "gramagent._runtime.loop",
             "asyncio", "orjson", "pyarrow", "matplotlib", "tree_sitter"}
    assert not heavy & imported, sorted(heavy & imported)


@needs_tools  # where the extra is missing the data tools are not listed at all
def test_listing_tools_loads_neither_pyarrow_nor_matplotlib(tmp_path: Path) -> None:
    done = run_gramagent("tools", cwd=tmp_path, env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert done.returncode == 0
    assert "describe_table ::" in done.stdout and "chart ::" in done.stdout
    imported = _imported(done.stderr)
    assert "gramagent.tools._data" in imported
    assert not {"pyarrow", "matplotlib"} & imported
