"""Fixtures of the built-in tool tests: sandboxes with short limits, a data directory."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from tools_support import SALES_CSV, fast_config, start_or_skip

from gramagent.tools.sandbox import PythonSandbox


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A data directory holding a copy of the bundled sales.csv."""
    folder = tmp_path / "data"
    folder.mkdir()
    os.chmod(folder, 0o755)
    shutil.copy(SALES_CSV, folder / "sales.csv")
    return folder


@pytest.fixture
def sandbox(tmp_path: Path, data_dir: Path) -> Iterator[PythonSandbox]:
    """A started sandbox with short limits (work dir under tmp_path, data dir readable)."""
    box = PythonSandbox(tmp_path / "work", data_dir=data_dir, config=fast_config())
    try:
        yield start_or_skip(box)
    finally:
        box.close()
