"""Shared test configuration."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

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
