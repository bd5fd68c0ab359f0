"""Fixtures of the experiment tests: the scripted greeter server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from experiments_support import greeter_script

from gramagent.testing import ScriptedServer


@pytest.fixture
def greeter_server() -> Iterator[ScriptedServer]:
    with ScriptedServer(greeter_script, record=False) as server:
        yield server


@pytest.fixture(autouse=True)
def in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test in its own working directory: a store named by a relative path is written
    there (as a command writes it), never into the checkout."""
    monkeypatch.chdir(tmp_path)
