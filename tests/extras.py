"""Tests that need an optional extra skip, naming its install command, where it is missing.

A module that imports an extra's package at the top calls :func:`require` before those imports
(``pyproject.toml`` lets such modules import after it); a test or module that only uses the
extra through gramagent takes a marker (``pytestmark = needs_tools``).
"""

from __future__ import annotations

import importlib.util

import pytest

EXTRAS = {
    "tools": ("pyarrow", "matplotlib", "numpy"),
    "local": ("xllamacpp",),
    "harmony": ("openai_harmony",),
    "mcp": ("mcp",),
    "experiments": ("scipy", "numpy", "pyarrow", "matplotlib", "aiolimiter"),
    "ray": ("ray",),
}
"""Each extra and the packages whose absence means it is not installed."""


def _reason(extra: str, missing: list[str]) -> str:
    return (f"needs the {extra} extra ({', '.join(missing)} not installed): "
            f"python3 -m pip install -e \".[{extra}]\"")


def _missing(extra: str) -> list[str]:
    return [m for m in EXTRAS[extra] if importlib.util.find_spec(m) is None]


def needs(*extras: str) -> pytest.MarkDecorator:
    """A marker that skips where one of ``extras`` is not installed (naming each missing one)."""
    reasons = [_reason(extra, missing) for extra in extras if (missing := _missing(extra))]
    return pytest.mark.skipif(bool(reasons), reason="; ".join(reasons))


def require(extra: str) -> None:
    """Skip the whole calling module (at import time) where ``extra`` is not installed."""
    missing = _missing(extra)
    if missing:
        pytest.skip(_reason(extra, missing), allow_module_level=True)


needs_tools = needs("tools")
needs_bfcl = pytest.mark.skipif(
    importlib.util.find_spec("bfcl_eval") is None,
    reason="needs the BFCL corpus: python3 -m pip install --no-deps --upgrade --target .bfcl "
           "bfcl-eval==2026.3.23",
)
