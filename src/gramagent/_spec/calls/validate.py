"""Compiled validators of tool arguments.

:func:`compile_validator` builds a Draft 2020-12 validator once per schema (cached by
canonical JSON) and returns a :class:`SchemaValidator` whose :meth:`errors
<SchemaValidator.errors>` gives short messages with the JSON path of each problem, e.g.
``personName: 3 is not of type 'string'``. Validity itself is decided by a predicate compiled
into closures (:mod:`gramagent._spec.calls.fastcheck`) where the schema allows it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

import orjson
from jsonschema import Draft202012Validator
from jsonschema import exceptions as js_exceptions

from gramagent._spec.calls.fastcheck import FORMAT_CHECKER, fast_check
from gramagent._spec.data import JSONSchema
from gramagent._spec.schema.nulls import resolve_local
from gramagent._spec.vocabulary import pointer
from gramagent.errors import SchemaError

__all__ = ["SchemaValidator", "compile_validator"]

_MAX_MESSAGE = 300
_CACHE_SIZE = 4096
"""Validators kept (the oldest is dropped first); one takes a few KB."""


class SchemaValidator:
    """A compiled Draft 2020-12 validator for one schema. Build with :func:`compile_validator`.

    Validity is decided by a predicate compiled from the schema into nested closures when the
    schema keeps to the keywords tool schemas use (:mod:`~gramagent._spec.calls.fastcheck`);
    other schemas, and every error message, go through jsonschema itself.
    """

    __slots__ = ("_check", "_validator", "schema")

    def __init__(self, schema: JSONSchema) -> None:
        try:
            Draft202012Validator.check_schema(schema)
        except js_exceptions.SchemaError as exc:
            where = pointer("", *exc.absolute_path)
            names = [p for p in exc.absolute_path if isinstance(p, str)]
            raise SchemaError(f"invalid JSON Schema at {where or '/'}: {_clip(exc.message)}",
                              keyword=names[-1] if names else str(exc.validator), path=where
                              ) from None
        for ref in _refs(schema):
            if resolve_local(schema, ref) is None:
                raise SchemaError(f"$ref {ref!r} cannot be resolved: only references inside "
                                  "the schema ('#/$defs/...') are supported", keyword="$ref")
        loop = _ref_loop(schema)
        if loop is not None:
            raise SchemaError(f"$ref {loop!r} leads back to itself without reaching a property "
                              "or an item: checking any value would never end", keyword="$ref")
        self.schema = schema
        """The schema validated against (a private copy)."""
        self._validator = Draft202012Validator(schema, format_checker=FORMAT_CHECKER)
        self._check = fast_check(schema) or self._validator.is_valid

    @property
    def fast(self) -> bool:
        """Whether validity is decided by the compiled fast path (jsonschema otherwise)."""
        return self._check != self._validator.is_valid

    def is_valid(self, instance: object) -> bool:
        """Whether ``instance`` satisfies the schema."""
        return bool(self._check(instance))

    def errors(self, instance: object) -> list[str]:
        """Every violation, one line each, as ``path: message``; empty when valid.

        The path is a JSON path relative to the instance (``series[0].name``); problems at the
        root (a missing required property, an unexpected one) have no prefix. Messages are
        sorted by path and clipped to a few hundred characters.
        """
        if self._check(instance):
            return []
        found = sorted(self._validator.iter_errors(instance),
                       key=lambda e: (tuple(map(str, e.absolute_path)), e.message))
        out: list[str] = []
        for error in found:
            line = _format_error(error)
            if line not in out:
                out.append(line)
        return out


def _refs(node: object) -> Iterable[Any]:
    """Every ``$ref`` value in a schema, at any depth."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            elif key not in ("enum", "const", "default", "examples"):
                yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def _ref_loop(schema: JSONSchema) -> str | None:
    """A ``$ref`` that leads back to itself through subschemas applied to the same instance
    (validation would recurse without end, whatever the instance), or None.

    A reference under ``properties``, ``items`` and the like applies to a part of the
    instance, which is smaller: recursion there ends (a tree's schema).
    """
    for ref in set(_refs(schema)):
        followed: set[str] = set()
        stack = [resolve_local(schema, ref)]
        while stack:
            node = stack.pop()
            if not isinstance(node, dict):
                continue
            target = node.get("$ref")
            if target == ref:
                return str(ref)
            if isinstance(target, str) and target not in followed:
                followed.add(target)
                stack.append(resolve_local(schema, target))
            stack.extend(_in_place(node))
    return None


def _in_place(node: dict[str, Any]) -> list[Any]:
    """The subschemas of ``node`` applied to the instance itself, not to a part of it."""
    subs: list[Any] = []
    for key in ("allOf", "anyOf", "oneOf"):
        subs.extend(node.get(key) or ())
    subs.extend(node[key] for key in ("not", "if", "then", "else") if key in node)
    subs.extend((node.get("dependentSchemas") or {}).values())
    return subs


def _format_error(error: js_exceptions.ValidationError) -> str:
    message = error.message
    if error.context:  # anyOf / oneOf: say why each alternative failed
        reasons: list[str] = []
        for sub in sorted(error.context, key=lambda e: e.message):
            if sub.message not in reasons:
                reasons.append(sub.message)
        message = f"{message} ({'; '.join(reasons)})"
    path = _json_path(error.absolute_path)
    message = _clip(message)
    return f"{path}: {message}" if path else message


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 1] + "…"


def _json_path(parts: Iterable[Any]) -> str:
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif str(part).isidentifier():
            out += f".{part}" if out else str(part)
        else:
            out += f"[{orjson.dumps(str(part)).decode()}]"
    return out


_cache: OrderedDict[bytes, SchemaValidator] = OrderedDict()
_cache_lock = threading.Lock()


def compile_validator(schema: Mapping[str, object]) -> SchemaValidator:
    """The validator of ``schema``, built once and cached by its canonical JSON.

    Equal schemas (whatever their key order) share one validator; bind-time code should
    still keep the result rather than call this per tool call. Formats are checked where
    that needs no network and no slow parsing (``date``, ``email``, ``ipv4``, ``ipv6``,
    ``uuid``, ``regex``, and ``date-time``/``time`` when ``rfc3339-validator`` is installed).

    Args:
        schema: A JSON Schema (Draft 2020-12).

    Returns:
        A :class:`SchemaValidator`.

    Raises:
        SchemaError: The schema is not valid JSON Schema, not JSON at all, or holds a
            ``$ref`` that does not point inside it.
    """
    try:
        key = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
    except TypeError as exc:
        raise SchemaError(f"the schema is not JSON: {exc}") from None
    validator = _cache.get(key)
    if validator is not None:
        return validator
    validator = SchemaValidator(orjson.loads(key))
    with _cache_lock:
        _cache[key] = validator
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return validator
