"""The check of a JSON Schema coming from outside (a tool's ``parameters``, ``gramagent
signature``): every keyword must be one the signature notation can write, with a value of the
right kind. Gives a checked copy, ready to become a :class:`~gramagent._spec.signature.Signature`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from gramagent._spec.data import JSONSchema
from gramagent._spec.vocabulary import (
    ITEMS,
    JSON_TYPES,
    MAX_DEPTH,
    PROPERTIES,
    SCHEMA,
    SCHEMA_LIST,
    SCHEMA_MAP,
    TOO_DEEP,
    TYPE,
    VALUE,
    keyword_kind,
    pointer,
    short,
    value_problem,
)
from gramagent.errors import SchemaError

__all__ = ["check_schema"]


def check_schema(node: object, path: str, depth: int = 0) -> Any:
    """A checked copy of a (sub)schema at the JSON pointer ``path``, itself ``depth`` schemas
    deep.

    Raises:
        SchemaError: Anything the notation cannot write, including schemas nested more than
            :data:`~gramagent._spec.vocabulary.MAX_DEPTH` deep; ``keyword`` and ``path`` say
            which and where.
    """
    if isinstance(node, bool):
        return node
    if not isinstance(node, Mapping):
        raise SchemaError(f"{path or '/'}: a schema must be an object or a boolean, not "
                          f"{short(node)}", keyword=path.rsplit("/", 1)[-1] or None, path=path)
    if depth >= MAX_DEPTH:
        raise SchemaError(f"{path or '/'}: the schema is {TOO_DEEP}",
                          keyword=path.rsplit("/", 1)[-1] or None, path=path)
    out: JSONSchema = {}
    for key, value in node.items():
        kind = keyword_kind(key) if isinstance(key, str) and "\0" not in key else None
        if kind is None:
            raise SchemaError(f"{path or '/'}: unsupported keyword {key!r}", keyword=str(key),
                              path=path)
        out[key] = _check_keyword(key, kind, value, path, depth + 1)
    _check_properties(out, path)
    return out


def _check_keyword(key: str, kind: int, value: object, path: str, depth: int) -> Any:
    """The checked value of one keyword of the schema at ``path``."""
    here = pointer(path, key)
    if kind == VALUE:
        problem = value_problem(key, value)
        if problem:
            raise SchemaError(f"{here}: {problem}", keyword=key, path=path)
        return copy.deepcopy(value)
    if kind == TYPE:
        return _check_type(value, here)
    if kind == SCHEMA or (kind == ITEMS and not isinstance(value, list)):
        return check_schema(value, here, depth)
    if kind in (SCHEMA_LIST, ITEMS):
        if not isinstance(value, list) or not value:
            raise SchemaError(f"{here}: {key} must be a non-empty list of schemas",
                              keyword=key, path=path)
        return [check_schema(v, pointer(here, i), depth) for i, v in enumerate(value)]
    if kind in (SCHEMA_MAP, PROPERTIES):
        return _check_map(key, kind, value, path, depth)
    # REQUIRED
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        raise SchemaError(f"{here}: required must be a list of names", keyword=key, path=path)
    return list(value)


def _check_map(key: str, kind: int, value: object, path: str, depth: int) -> dict[str, Any]:
    """A checked map of names to schemas (``properties``, ``patternProperties``, ...)."""
    here = pointer(path, key)
    if not isinstance(value, Mapping):
        raise SchemaError(f"{here}: {key} must map names to schemas", keyword=key, path=path)
    for name in value:
        if not isinstance(name, str) or "\0" in name or (kind == PROPERTIES and not name):
            raise SchemaError(f"{here}: the name {name!r} cannot be written in gram "
                              "(names are non-empty text without NUL)", keyword=key, path=path)
    return {k: check_schema(v, pointer(here, k), depth) for k, v in value.items()}


def _check_properties(out: JSONSchema, path: str) -> None:
    """Properties must be object schemas, on a schema that may be an object."""
    props = out.get("properties") or {}
    for name, sub in props.items():
        if not isinstance(sub, dict):
            where = pointer(path, "properties", name)
            raise SchemaError(f"{where}: a property schema must be an object, not {sub!r}",
                              keyword="properties", path=where)
    jtype = out.get("type", "object")
    if props and "object" not in (jtype if isinstance(jtype, list) else [jtype]):
        raise SchemaError(f"{path or '/'}: properties on a schema of type {short(jtype)} "
                          "(properties need type object)", keyword="properties", path=path)


def _check_type(value: object, here: str) -> Any:
    if isinstance(value, str) and value in JSON_TYPES:
        return value
    if (isinstance(value, list) and value and all(isinstance(t, str) and t in JSON_TYPES
                                                  for t in value)
            and len(set(value)) == len(value)):
        return list(value)
    raise SchemaError(f"{here}: type must be one of {', '.join(sorted(JSON_TYPES))} or a list "
                      f"of them, not {short(value)}", keyword="type", path=here[:-5])
