"""CLI commands of the spec language: check, fmt, schema, signature."""

from __future__ import annotations

from gramagent.cli import app  # noqa: F401  (commands are added by the spec work)
