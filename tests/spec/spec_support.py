"""Helpers for the spec tests: the installed ``gramagent`` console script, run as a user runs it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from console_script import gramagent_command

SRC = Path(__file__).resolve().parent.parent.parent / "src"


def gramagent(*args: str, stdin: str | bytes | None = None) -> subprocess.CompletedProcess[str]:
    """Run the ``gramagent`` console script (``python -m gramagent`` where it is missing)."""
    command = gramagent_command()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(SRC), *filter(None, [os.environ.get("PYTHONPATH")])]), "NO_COLOR": "1",
        "COLUMNS": "200"}
    data = stdin.encode() if isinstance(stdin, str) else stdin
    done = subprocess.run([*command, *args], input=data, capture_output=True, env=env,
                          timeout=120, check=False)
    return subprocess.CompletedProcess(done.args, done.returncode,
                                       done.stdout.decode("utf-8", "replace"),
                                       done.stderr.decode("utf-8", "replace"))


def bad_input(result: subprocess.CompletedProcess[str]) -> str:
    """The one-line error of a refused input (exit status 1, no traceback)."""
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout
    return result.stderr
