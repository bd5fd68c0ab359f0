"""Gram literals for the writers: names, keys, strings and JSON values as gram text."""

from __future__ import annotations

import re

from gramagent._spec.vocabulary import dump_json
from gramagent.errors import SpecError

__all__ = ["format_key", "format_name", "format_value", "json_literal", "quote_string"]

_SYMBOL = re.compile(r"[a-zA-Z_][0-9a-zA-Z_.\-@]*\Z")
_DECIMAL = re.compile(r"-?(0|[1-9]\d*)\.\d+\Z")
_RESERVED_WORDS = frozenset({"true", "false", "null"})
_DQ_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r",
                             "\t": "\\t", "\b": "\\b", "\f": "\\f"})
_BT_ESCAPES = str.maketrans({"\\": "\\\\", "`": "\\`", "\n": "\\n", "\r": "\\r",
                             "\t": "\\t", "\b": "\\b", "\f": "\\f"})
# tree-sitter-gram (0.3.11) reads a quoted text that opens with "//" (after blanks) as a
# comment, and the quote as never closed; "\/" is the same character and reads back.
_OPENING_COMMENT = re.compile(r"\A([ \t\n\r\f\v]*)/(?=/)")


def _quoted(text: str, quote: str, escapes: dict[int, str]) -> str:
    """``text`` between ``quote`` characters, escaped so that it reads back as itself."""
    body = _OPENING_COMMENT.sub(lambda m: m.group(1) + "\\/", text.translate(escapes))
    return quote + body + quote


def quote_string(text: str) -> str:
    """A gram string literal for ``text``: ``"..."``, or ``json`"..."``` if it holds NUL."""
    if "\0" in text:
        return json_literal(text)
    return _quoted(text, '"', _DQ_ESCAPES)


def json_literal(value: object) -> str:
    """Any JSON value as a gram tagged string: ``json`[1, [2]]```."""
    return "json`" + dump_json(value).translate(_BT_ESCAPES) + "`"



def format_name(name: str) -> str:
    """An identifier as gram: bare when it is a gram symbol, else in backticks.

    Raises:
        SpecError: The name holds a NUL character, which gram cannot write.
    """
    if _SYMBOL.match(name) and name not in _RESERVED_WORDS:
        return name
    if "\0" in name:
        raise SpecError(f"the name {name!r} holds a NUL character, which gram cannot write")
    return _quoted(name, "`", _BT_ESCAPES)


def format_key(key: str) -> str:
    """A record or map key: bare when it is a symbol, else double-quoted."""
    if _SYMBOL.match(key) and key not in _RESERVED_WORDS:
        return key
    if "\0" in key:
        raise SpecError(f"the key {key!r} holds a NUL character, which gram cannot write")
    return _quoted(key, '"', _DQ_ESCAPES)


def _scalar(value: object) -> str | None:
    """A gram scalar literal, or None when the value needs the json`...` form."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return None if "\0" in value else _quoted(value, '"', _DQ_ESCAPES)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = repr(value)
        return text if _DECIMAL.match(text) else None
    return None


def format_value(value: object) -> str:
    """A JSON value as a gram value: scalar, list of scalars, map of scalars, ``null``, or
    (anything else) ``json`...```."""
    if value is None:
        return "null"
    if isinstance(value, list):
        if value:
            items = [_scalar(v) for v in value]
            if None not in items:
                return "[" + ", ".join(items) + "]"  # type: ignore[arg-type]
        return json_literal(value)
    if isinstance(value, dict):
        if all("\0" not in k for k in value):
            entries = [(format_key(k), _scalar(v)) for k, v in value.items()]
            if all(v is not None for _, v in entries):
                return "{" + ", ".join(f"{k}: {v}" for k, v in entries) + "}"
        return json_literal(value)
    text = _scalar(value)
    return text if text is not None else json_literal(value)
