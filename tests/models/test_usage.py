"""Reported usage is believed only when it can be true (issue 14 item 8)."""

from __future__ import annotations

from typing import Any

import pytest

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
