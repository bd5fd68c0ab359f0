"""The vocabulary of the signature notation: type names, JSON Schema keywords and their checks.

Shared by the gram reader (:mod:`gramagent._spec.gram.typereader`), the check of schemas coming
from JSON (:mod:`gramagent._spec.schema.check`) and the writer
(:mod:`gramagent._spec.gram.sigwriter`). The notation itself is described in
:mod:`gramagent._spec.signature` and ``docs/signatures.md``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import TypeGuard

__all__ = [
    "CANONICAL_NAME", "JSON_TYPES", "KEYWORDS", "MAX_DEPTH", "MEMBER_ANNOTATIONS", "RANK",
    "TOO_DEEP", "TYPE_NAMES",
    "dump_json", "is_canonical_required", "json_problem", "keyword_kind",
    "pointer", "short", "type_label", "value_problem",
]

MAX_DEPTH = 32
"""How deep a value (lists and maps in lists and maps), a schema (sub-schemas in sub-schemas)
or a chain of type patterns (types naming types) may nest. Far beyond what tool schemas use
(OpenAI's strict mode allows 10 levels of objects), and low enough that reading and writing,
which recurse once or a few times a level, stay far from Python's recursion limit."""

TOO_DEEP = f"nested more than {MAX_DEPTH} levels deep"
"""The message for what exceeds :data:`MAX_DEPTH`."""

TYPE_NAMES: Mapping[str, str | None] = {
    "String": "string", "Text": "string",
    "Integer": "integer", "Int": "integer",
    "Number": "number", "Double": "number", "Float": "number",
    "Boolean": "boolean", "Bool": "boolean",
    "Array": "array",
    "Object": "object",
    "Null": "null",
    "Any": None,
}
"""Built-in gram type names and the JSON Schema ``type`` each stands for (None: any value)."""

CANONICAL_NAME = {"string": "String", "integer": "Integer", "number": "Number",
                  "boolean": "Boolean", "array": "Array", "object": "Object", "null": "Null"}
JSON_TYPES = frozenset(CANONICAL_NAME)

# Keyword kinds. VALUE keywords hold a JSON value (checked by _VALUE_CHECKS); SCHEMA keywords
# a sub-schema; LIST ones a list of sub-schemas; MAP ones a mapping of names to sub-schemas.
VALUE, SCHEMA, SCHEMA_LIST, SCHEMA_MAP, ITEMS, PROPERTIES, REQUIRED, TYPE = range(8)

_VALUE_CHECKS: dict[str, str] = {
    "description": "string", "title": "string", "$comment": "string",
    "default": "any", "const": "any", "examples": "array", "enum": "array",
    "format": "string", "pattern": "pattern",
    "minLength": "count", "maxLength": "count",
    "minimum": "number", "maximum": "number",
    "exclusiveMinimum": "number", "exclusiveMaximum": "number", "multipleOf": "positive",
    "minItems": "count", "maxItems": "count", "uniqueItems": "bool",
    "minContains": "count", "maxContains": "count",
    "minProperties": "count", "maxProperties": "count",
    "dependentRequired": "name_lists",
    "contentEncoding": "string", "contentMediaType": "string",
    "deprecated": "bool", "readOnly": "bool", "writeOnly": "bool",
}
_SCHEMA_KEYWORDS = frozenset({
    "additionalProperties", "additionalItems", "contains", "not", "propertyNames",
    "if", "then", "else", "unevaluatedItems", "unevaluatedProperties",
})
_LIST_KEYWORDS = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
_MAP_KEYWORDS = frozenset({"patternProperties", "dependentSchemas"})

KEYWORDS: frozenset[str] = frozenset(
    {*_VALUE_CHECKS, *_SCHEMA_KEYWORDS, *_LIST_KEYWORDS, *_MAP_KEYWORDS,
     "items", "properties", "required", "type"})
"""Every JSON Schema keyword the notation expresses (plus extension keywords ``x-...``)."""

_ORDER = (
    "description", "title", "default", "examples", "const", "enum", "format", "pattern",
    "minLength", "maxLength", "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum",
    "multipleOf", "items", "prefixItems", "additionalItems", "contains", "minContains",
    "maxContains", "minItems", "maxItems", "uniqueItems", "unevaluatedItems", "properties",
    "required", "additionalProperties", "patternProperties", "propertyNames",
    "dependentRequired", "dependentSchemas", "minProperties", "maxProperties",
    "unevaluatedProperties", "anyOf", "oneOf", "allOf", "not", "if", "then", "else",
    "contentEncoding", "contentMediaType", "deprecated", "readOnly", "writeOnly", "$comment",
)
RANK = {k: i for i, k in enumerate(_ORDER)}
MEMBER_ANNOTATIONS = ("description", "title", "default", "examples", "deprecated")
"""Keywords kept on a member node when its structure moves into a type pattern."""


def keyword_kind(key: str) -> int | None:
    """The kind of a schema keyword (VALUE, SCHEMA, ...), or None when unsupported."""
    if key in _VALUE_CHECKS or key.startswith("x-"):
        return VALUE
    if key in _SCHEMA_KEYWORDS:
        return SCHEMA
    if key in _LIST_KEYWORDS:
        return SCHEMA_LIST
    if key in _MAP_KEYWORDS:
        return SCHEMA_MAP
    return {"items": ITEMS, "properties": PROPERTIES, "required": REQUIRED,
            "type": TYPE}.get(key)


def value_problem(key: str, value: object) -> str | None:
    """What is wrong with ``value`` for the JSON-valued keyword ``key`` (None: nothing)."""
    check = _VALUE_CHECKS.get(key, "any")
    if check == "string" and isinstance(value, str):
        return None  # the common case, decided without walking the value
    if not isinstance(value, str | bool | int):
        problem = json_problem(value)
        if problem:
            return f"{key}: {problem}"
    ok = True
    if check == "string":
        ok = isinstance(value, str)
    elif check == "pattern":
        if not isinstance(value, str):
            ok = False
        else:
            try:
                re.compile(value)
            except re.error as exc:
                return f"pattern {value!r} is not a valid regular expression ({exc})"
    elif check == "count":
        ok = _is_int(value) and value >= 0
    elif check == "number":
        ok = _is_number(value)
    elif check == "positive":
        ok = _is_number(value) and value > 0
    elif check == "bool":
        ok = isinstance(value, bool)
    elif check == "array":
        ok = isinstance(value, list)
    elif check == "name_lists":
        ok = isinstance(value, dict) and all(
            isinstance(v, list) and all(isinstance(n, str) for n in v) for v in value.values())
    if ok:
        return None
    expected = {"string": "a string", "pattern": "a string", "count": "a non-negative integer",
                "number": "a number", "positive": "a number greater than 0",
                "bool": "true or false", "array": "a list",
                "name_lists": "a map of names to lists of names"}[check]
    return f"{key} must be {expected}, not {short(value)}"


def json_problem(value: object, depth: int = 0, *, limit: int | None = MAX_DEPTH) -> str | None:
    """Why ``value`` is not a JSON value the notation takes (None when it is one): not JSON,
    or nested more than ``limit`` levels deep (``depth`` is its own level; None: no limit
    but the interpreter's, a RecursionError)."""
    if value is None or isinstance(value, str | bool | int):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{value!r} is not a JSON number"
    if limit is not None and depth >= limit and isinstance(value, list | dict):
        return TOO_DEEP
    if isinstance(value, list):
        for item in value:
            problem = json_problem(item, depth + 1, limit=limit)
            if problem:
                return problem
        return None
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                return f"object key {k!r} is not a string"
            problem = json_problem(v, depth + 1, limit=limit)
            if problem:
                return problem
        return None
    return f"{type(value).__name__} {value!r} is not a JSON value"


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def type_label(jtype: str | Sequence[str] | None) -> str:
    """Gram labels for a JSON Schema ``type`` value: ``String`` or ``String:Null``."""
    if jtype is None:
        return "Any"
    if isinstance(jtype, str):
        return CANONICAL_NAME[jtype]
    return ":".join(CANONICAL_NAME[t] for t in jtype)


def short(value: object, limit: int = 40) -> str:
    """``value`` as short text for a message: compact JSON, cut at ``limit`` characters."""
    text = dump_json(value) if json_problem(value) is None else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_canonical_required(required: object, names: list[str]) -> bool:
    """Whether a ``required`` list is what the member flags would produce on their own."""
    if not isinstance(required, list) or not required:
        return False
    wanted = set(required)
    return required == [n for n in names if n in wanted]


def pointer(path: str, *parts: str | int) -> str:
    """The JSON pointer ``path`` extended by ``parts`` (``~`` and ``/`` escaped)."""
    for part in parts:
        path += "/" + str(part).replace("~", "~0").replace("/", "~1")
    return path


def dump_json(value: object, *, sort_keys: bool = False) -> str:
    """Compact JSON text (any size of integer; no NaN or infinity)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False,
                      sort_keys=sort_keys)
