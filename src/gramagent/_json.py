"""Exact JSON for values a model sent or a tool returned: one set of rules, orjson's speed.

Decoding (:func:`loads`) follows one set of rules whichever parser runs underneath: no lone
surrogates (escaped or literal), no ``NaN``/``Infinity`` and no number that overflows a double
(``1e999``), at most :data:`MAX_DEPTH` levels of nesting; integers of any size stay exact.
orjson decodes an integer beyond 64 bits as a float (losing digits), so text holding such a
number goes through the standard library, held to the same rules.

Encoding (:func:`dumps`) takes any JSON value a Python program can build: integers beyond 64
bits, nesting deeper than orjson's 255 levels (up to the interpreter's recursion limit), and
strings holding lone surrogates (escaped as ``\\udXXX``, so the text always encodes as UTF-8).
A leaf module: it imports nothing else of gramagent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Final, NoReturn

import orjson

__all__ = ["MAX_DEPTH", "clean_text", "dumps", "loads"]

MAX_DEPTH: Final = 64
"""Most levels of array/object nesting :func:`loads` accepts (``[[1]]`` is 2 levels)."""

_LONG_INTEGER: Final = re.compile(r"\d{19}")
"""19 digits in a row: a number orjson may not hold exactly."""

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
"""An escaped surrogate (half of a pair, or a lone one) in JSON text."""

_SURROGATE = re.compile(r"[\ud800-\udfff]")
"""A surrogate code point in a Python string (never valid in UTF-8), spelt as escapes for re to
read."""

_NESTING_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)
"""A string (skipped whole) or a bracket, for counting nesting without parsing."""


def loads(text: str) -> Any:
    """Decode JSON text under the module's rules; integers of any size stay exact.

    Raises:
        ValueError: The text is not valid JSON or breaks a rule (``orjson.JSONDecodeError``
            and ``json.JSONDecodeError`` are both ValueErrors).
    """
    # Nesting deeper than the limit takes twice as many brackets: short text skips the count.
    if len(text) > 2 * MAX_DEPTH and text.count("[") + text.count("{") > MAX_DEPTH:
        depth = _nesting(text)
        if depth > MAX_DEPTH:
            raise ValueError(f"JSON nested {depth} levels deep; the limit is {MAX_DEPTH}")
    if not _LONG_INTEGER.search(text):
        return orjson.loads(text)  # refuses surrogates, NaN, Infinity and 1e999 itself
    text.encode("utf-8")  # a literal lone surrogate: UnicodeEncodeError, a ValueError
    value = json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)
    if _SURROGATE_ESCAPE.search(text) and _has_surrogate(value):
        raise ValueError("JSON text holds a lone surrogate (\\ud800-\\udfff) in a string")
    return value


def dumps(value: object, *, sort_keys: bool = False, indent: bool = False,
          default: Callable[[Any], object] | None = None) -> str:
    """Compact (or 2-space indented) JSON text, non-ASCII kept as is, always valid UTF-8.

    Integers beyond 64 bits are encoded exactly, nesting deeper than orjson allows goes
    through the standard library, and lone surrogates in strings are written as ``\\u``
    escapes. ``default`` converts objects JSON cannot encode (as in :func:`json.dumps`).

    Raises:
        TypeError: ``value`` holds something JSON cannot encode (and ``default`` did not
            convert it).
        ValueError: ``value`` holds NaN or an infinity, or is nested beyond the interpreter's
            recursion limit.
    """
    option = (orjson.OPT_SORT_KEYS if sort_keys else 0) | (orjson.OPT_INDENT_2 if indent else 0)
    try:
        return orjson.dumps(value, option=option, default=default).decode()
    except TypeError:  # a big integer, deep nesting or a surrogate; anything else fails below
        pass
    try:
        text = json.dumps(value, sort_keys=sort_keys, indent=2 if indent else None,
                          separators=(",", ": ") if indent else (",", ":"),
                          ensure_ascii=False, allow_nan=False, default=default)
    except RecursionError:
        raise ValueError("the value is nested too deeply to encode as JSON") from None
    # A surrogate can only stand inside a string here: escape it as ensure_ascii would.
    return _SURROGATE.sub(_escape, text)


def clean_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD, so it encodes as UTF-8."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def _nesting(text: str) -> int:
    depth = deepest = 0
    for match in _NESTING_TOKEN.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif token in "]}":
            depth -= 1
    return deepest


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"number {text[:40]} is out of range for a double")
    return value


def _has_surrogate(value: object) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"
