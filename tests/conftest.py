"""Shared test configuration."""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from gramagent._models.weights import KEEP_PARTS_ENV

# The installed weight parts are never emptied by a test. Tests join the real weights into
# caches that do not outlive them (``tmp_path``, the CLI fuzz's ``GRAMAGENT_CACHE``): with the
# parts emptied after such a join, every later test and command that needs the embedded model
# found neither the parts nor the joined file. Set here, before any test, so the commands the
# tests start inherit it too; the tests of the release itself unset it.
os.environ[KEEP_PARTS_ENV] = "1"

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
FIXTURES = ROOT / "tests" / "fixtures"


@pytest.fixture
def examples_dir() -> Path:
    """The repository's examples/ folder."""
    return EXAMPLES


@pytest.fixture
def chart_tool() -> dict[str, Any]:
    """The strict chart tool schema of seed 004 ("Strict tool schemas"), verbatim, from
    ``tests/fixtures/chart_tool.json``: a fresh copy for each test."""
    result: dict[str, Any] = json.loads((FIXTURES / "chart_tool.json").read_text())
    return result


@pytest.fixture(autouse=True)
def fresh_process_masker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with a new process-wide masker (``gramagent._logs.default_redactor``).

    A real command runs in a process of its own; the CLI tests run many in one, and a secret
    one of them registered (the fuzz's ``--api-key responses``, a key like ``https://``)
    would otherwise be masked in every later test's output."""
    from gramagent import _logs

    monkeypatch.setattr(_logs, "_default", None)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Name the threads a test left running (not daemons): the interpreter waits for them at
    exit, so a run that printed its closing line and then hangs says why."""
    left = [t.name for t in threading.enumerate()
            if not t.daemon and t is not threading.main_thread()]
    if left:
        print(f"threads left running by the tests: {', '.join(left)}", file=sys.stderr)
