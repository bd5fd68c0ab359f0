"""Tests of RunLimits validation and defaults."""

from __future__ import annotations

import pytest

from gramagent._runtime.limits import INHERIT, RunLimits
from gramagent.errors import ConfigurationError


def test_defaults_follow_the_seeds() -> None:
    """Ten iterations, 8 KB payloads, a retry budget of three, the repeat guard on."""
    limits = RunLimits()
    assert limits.max_iterations == 10
    assert limits.max_payload_bytes == 8192
    assert limits.max_invalid_calls_per_tool == 3
    assert limits.repeat_guard is True


def test_non_positive_values_are_rejected_all_at_once() -> None:
    """Every bad value is named in one ConfigurationError."""
    with pytest.raises(ConfigurationError) as info:
        RunLimits(max_iterations=0, tool_timeout=-1.0)
    assert "max_iterations" in str(info.value) and "tool_timeout" in str(info.value)


def test_none_disables_a_limit_and_inherit_is_distinct() -> None:
    """None means no limit; INHERIT is a separate sentinel with a readable repr."""
    limits = RunLimits(max_tokens=None, wall_time=None)
    assert limits.wall_time is None
    assert INHERIT is not None and repr(INHERIT) == "INHERIT"
