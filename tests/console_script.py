"""The installed ``gramagent`` console script, for tests that run it as a user does."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def gramagent_command() -> list[str]:
    """The console script installed with this interpreter (a venv's, even when the venv is
    not activated), else the one on PATH, else ``python -m gramagent``."""
    beside = Path(sys.executable).with_name("gramagent")
    if beside.is_file():
        return [str(beside)]
    exe = shutil.which("gramagent")
    return [exe] if exe else [sys.executable, "-m", "gramagent"]
