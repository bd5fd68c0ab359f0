"""Reported usage is believed only when it can be true (issue 14 item 8)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gramagent._messages import Usage
from gramagent._models._wire import MAX_REPORTED_TOKENS, usage_from


@pytest.mark.parametrize("data", [
    {"prompt_tokens": -5, "completion_tokens": 3},
    {"prompt_tokens": 5, "completion_tokens": -1_000_000},
    {"prompt_tokens": MAX_REPORTED_TOKENS + 1, "completion_tokens": 3},
    {"prompt_tokens": 5, "completion_tokens": 2.5},
    {"prompt_tokens": True, "completion_tokens": 3},
    {"prompt_tokens": "5", "completion_tokens": 3},
    {"prompt_tokens": 10**30},
    {"completion_tokens": -1},
])
def test_impossible_counts_are_not_believed(data: dict[str, Any]) -> None:
    assert usage_from(data, "prompt_tokens", "completion_tokens") is None


@pytest.mark.parametrize(("data", "expected"), [
    ({"prompt_tokens": 5, "completion_tokens": 3}, (5, 3)),
    ({"prompt_tokens": 0, "completion_tokens": 0}, (0, 0)),
    ({"prompt_tokens": 7}, (7, 0)),
    ({"completion_tokens": MAX_REPORTED_TOKENS}, (0, MAX_REPORTED_TOKENS)),
])
def test_plausible_counts_are_kept(data: dict[str, Any], expected: tuple[int, int]) -> None:
    assert usage_from(data, "prompt_tokens", "completion_tokens") == Usage(
        input_tokens=expected[0], output_tokens=expected[1], requests=1)


def test_no_usage() -> None:
    assert usage_from(None, "a", "b") is None
    assert usage_from({}, "a", "b") is None


_count = st.none() | st.integers(min_value=-(2**70), max_value=2**70) | st.sampled_from(
    [0, MAX_REPORTED_TOKENS, MAX_REPORTED_TOKENS + 1, -1])


@settings(max_examples=200, deadline=None)
@given(_count, _count)
def test_counts_are_believed_exactly_when_plausible(inp: int | None, out: int | None) -> None:
    """Whatever two counts a server reports: kept when neither is negative nor beyond the bound
    (a missing one counts 0), no usage at all when both are missing, else not believed."""
    usage = usage_from({"prompt_tokens": inp, "completion_tokens": out},
                       "prompt_tokens", "completion_tokens")
    if inp is None and out is None:
        assert usage is None
    elif all(v is None or 0 <= v <= MAX_REPORTED_TOKENS for v in (inp, out)):
        assert usage == Usage(input_tokens=inp or 0, output_tokens=out or 0, requests=1)
    else:
        assert usage is None


def _reference(data: Any) -> Usage | None:
    """The rule, read plainly: an object whose counts are each missing/null or plausible."""
    if not isinstance(data, dict):
        return None
    inp, out = data.get("prompt_tokens"), data.get("completion_tokens")
    if inp is None and out is None:
        return None
    if not all(v is None or (type(v) is int and 0 <= v <= MAX_REPORTED_TOKENS)
               for v in (inp, out)):
        return None
    return Usage(input_tokens=inp or 0, output_tokens=out or 0, requests=1)


_json_leaf = (st.none() | st.booleans() | st.floats(allow_nan=False) | st.text(max_size=3)
              | _count)
_usage_object = st.dictionaries(
    st.sampled_from(["prompt_tokens", "completion_tokens", "total_tokens"]), _json_leaf)


@settings(max_examples=200, deadline=None)
@given(_usage_object | st.lists(_json_leaf, max_size=2) | _json_leaf)
def test_any_usage_value_reads_as_the_plain_rule(data: Any) -> None:
    """Whatever JSON value a server sends as ``usage`` (an object with counts present or not,
    of any type, or no object at all), it reads as the plain rule says."""
    assert usage_from(data, "prompt_tokens", "completion_tokens") == _reference(data)
