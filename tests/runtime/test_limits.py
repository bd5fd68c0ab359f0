"""Tests of RunLimits validation and defaults."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gramagent import tool
from gramagent._runtime.limits import INHERIT, RunLimits
from gramagent.errors import ConfigurationError, ToolError

# Anything a config file, a command line or a caller may hand over as a limit.
_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-3, 10**12),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=3),
                    st.just([1]))


def _is_seconds(value: Any) -> bool:
    return value is None or (type(value) in (int, float) and math.isfinite(value) and value > 0)


def _is_count(value: Any) -> bool:
    return value is None or (type(value) is int and value > 0)


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


@settings(max_examples=150, deadline=None)
@given(value=_VALUES, field=st.sampled_from(["wall_time", "tool_timeout", "max_iterations",
                                             "max_tokens", "max_tool_calls",
                                             "max_tool_output_chars", "max_payload_bytes",
                                             "max_invalid_calls_per_tool", "max_turns",
                                             "max_context_bytes",
                                             "max_conversation_time"]))
def test_a_limit_is_none_or_a_positive_finite_number(field: str, value: Any) -> None:
    """Seconds take any positive finite number, counts a positive whole number; nan (which
    compares false with every time, so would lift the limit unseen), inf, bools, strings and
    non-positive numbers are refused with the field named, as one typed error."""
    seconds = ("wall_time", "tool_timeout", "max_conversation_time")
    good = _is_seconds(value) if field in seconds else _is_count(value)
    if good:
        assert getattr(RunLimits(**{field: value}), field) == value
    else:
        with pytest.raises(ConfigurationError, match=f"invalid RunLimits: {field} must be"):
            RunLimits(**{field: value})


def _echo(text: str) -> str:
    """Echo the text."""
    return text


@settings(max_examples=60, deadline=None)
@given(value=_VALUES)
def test_a_tools_timeout_is_checked_like_the_runs(value: Any) -> None:
    if _is_seconds(value):
        assert tool(_echo, timeout=value).timeout == value
    else:
        with pytest.raises(ToolError, match="tool '_echo': timeout must be"):
            tool(_echo, timeout=value)
    assert tool(_echo).timeout is INHERIT


def test_repeat_guard_takes_only_a_bool() -> None:
    with pytest.raises(ConfigurationError, match="repeat_guard must be True or False"):
        RunLimits(repeat_guard=1)  # type: ignore[arg-type]
