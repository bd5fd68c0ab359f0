"""Exact JSON for values a model sent: orjson's speed, without its 64-bit integer limit.

orjson decodes an integer beyond 64 bits as a float (losing digits) and refuses to encode one.
Tool arguments may hold such numbers, so every place that decodes or re-encodes them goes
through :func:`loads` and :func:`dumps`, which fall back to the standard library exactly
there. A leaf module: it imports nothing else of gramagent.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

__all__ = ["dumps", "loads"]

_LONG_INTEGER = re.compile(r"\d{19}")
"""19 digits in a row: a number orjson may not hold exactly."""


def loads(text: str) -> Any:
    """Decode JSON text; integers of any size stay exact.

    Raises:
        ValueError: The text is not valid JSON (``orjson.JSONDecodeError`` and
            ``json.JSONDecodeError`` are both ValueErrors).
    """
    return json.loads(text) if _LONG_INTEGER.search(text) else orjson.loads(text)


def dumps(value: Any, *, sort_keys: bool = False) -> str:
    """Compact JSON text (non-ASCII kept as is); integers of any size are encoded exactly.

    Raises:
        TypeError: ``value`` holds something JSON cannot encode.
    """
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS if sort_keys else 0).decode()
    except TypeError:  # an integer beyond 64 bits; anything else fails again below
        return json.dumps(value, sort_keys=sort_keys, separators=(",", ":"),
                          ensure_ascii=False)
