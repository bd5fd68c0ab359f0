"""Model prices and what runs cost: one job, for experiment reports and the ``run`` summary.

A price is US dollars per million tokens, input and output apart (how providers list them).
``--price MODEL=IN,OUT`` (:func:`parse_price`) and an experiment file's ``prices: {MODEL:
"IN,OUT"}`` (:func:`price_problem`, :func:`prices_from`) give them; :meth:`Price.cost` turns
a run's tokens into dollars. Only the standard library: the CLI's ``run`` may import it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gramagent.errors import ConfigurationError

__all__ = ["Price", "parse_price", "price_problem", "prices_from"]

PER_TOKENS = 1_000_000
"""Prices are per this many tokens."""


@dataclass(frozen=True, slots=True)
class Price:
    """US dollars per million input tokens and per million output tokens."""

    input: float
    output: float

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        """Dollars for that many tokens."""
        return (input_tokens * self.input + output_tokens * self.output) / PER_TOKENS


def _figures(value: Any) -> tuple[float, float] | None:
    """``[IN, OUT]`` or ``"IN,OUT"`` as two floats, or None when it is neither (or holds a
    negative or non-finite figure)."""
    if isinstance(value, str):
        try:
            value = [float(part) for part in value.split(",")]
        except ValueError:
            return None
    if not (isinstance(value, (list, tuple)) and len(value) == 2 and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)):
        return None
    low, high = float(value[0]), float(value[1])
    if not (math.isfinite(low) and math.isfinite(high) and low >= 0 and high >= 0):
        return None
    return low, high


def price_problem(value: Any) -> str | None:
    """What is wrong with ``value`` as a price (``"IN,OUT"`` in a gram file, ``[IN, OUT]``
    or ``(IN, OUT)`` in Python: two finite, non-negative numbers), or None."""
    if _figures(value) is not None:
        return None
    return ("a price is \"INPUT,OUTPUT\" in dollars per million tokens, two non-negative "
            f"numbers, e.g. \"0.15,0.6\" (got {value!r})")


def prices_from(mapping: Mapping[str, Any]) -> dict[str, Price]:
    """``{model: "IN,OUT" or [IN, OUT]}`` as :class:`Price` objects.

    Raises:
        ConfigurationError: a price is not two non-negative numbers (the message names the
            model).
    """
    out = {}
    for model, value in mapping.items():
        figures = _figures(value)
        if figures is None:
            raise ConfigurationError(f"price of {model!r}: {price_problem(value)}")
        out[str(model)] = Price(*figures)
    return out


def parse_price(text: str) -> tuple[str, Price]:
    """``MODEL=IN,OUT`` (``--price openai/gpt-4o-mini=0.15,0.6``) as ``(model, price)``.

    Raises:
        ConfigurationError: not of that form, or a price that is negative or not finite.
    """
    model, sep, value = text.rpartition("=")
    figures = _figures(value)
    if not sep or not model or figures is None:
        raise ConfigurationError(f"--price {text!r}: expected MODEL=IN,OUT in dollars per "
                                 "million tokens, e.g. openai/gpt-4o-mini=0.15,0.6")
    return model, Price(*figures)
