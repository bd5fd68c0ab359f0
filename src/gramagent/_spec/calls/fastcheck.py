"""The fast path of the validators: a schema compiled into nested closures.

:func:`fast_check` gives a predicate equivalent to jsonschema's ``is_valid`` when the schema
keeps to the keywords tool schemas use, or None, and then jsonschema decides (see
:mod:`gramagent._spec.calls.validate`; docs/performance.md, "Validators compiled at bind time",
compares the two).
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Callable
from typing import Any, TypeGuard

from jsonschema import Draft202012Validator, FormatChecker

from gramagent._spec.data import JSONSchema
from gramagent._spec.schema.nulls import resolve_local

__all__ = ["Check", "FORMAT_CHECKER", "fast_check"]

_CHEAP_FORMATS = ("date", "date-time", "time", "email", "idn-email", "ipv4", "ipv6", "uuid",
                  "regex")
"""Formats checked locally: those that need no network and no slow parsing. The date-time and
time checkers exist only where jsonschema's optional ``rfc3339-validator`` is installed."""

FORMAT_CHECKER = FormatChecker(
    [f for f in _CHEAP_FORMATS if f in Draft202012Validator.FORMAT_CHECKER.checkers])

Check = Callable[[object], bool]
"""A predicate on a JSON value: whether it is valid."""


class _Unsupported(Exception):
    """The schema uses something the fast path does not compile; jsonschema decides."""


_IGNORED = frozenset({"description", "title", "default", "examples", "$comment", "deprecated",
                      "readOnly", "writeOnly", "$defs", "definitions"})
"""Keywords that never affect validity (definitions are reached through ``$ref``)."""

_OBJECT_KEYWORDS = _IGNORED | {"type", "properties", "required", "additionalProperties"}
"""The keywords of a schema :meth:`_FastCompiler.flat_object` compiles as one predicate."""


def _is_number(x: object) -> TypeGuard[float]:
    return isinstance(x, numbers.Number) and not isinstance(x, bool)


_TYPE_TESTS: dict[str, Check] = {
    "string": lambda x: isinstance(x, str),
    "integer": lambda x: (isinstance(x, int) and not isinstance(x, bool))
    or (isinstance(x, float) and x.is_integer()),
    "number": _is_number,
    "boolean": lambda x: isinstance(x, bool),
    "null": lambda x: x is None,
    "array": lambda x: isinstance(x, list),
    "object": lambda x: isinstance(x, dict),
}


_INSTANCE_TESTS: dict[Check, type] = {
    _TYPE_TESTS["string"]: str, _TYPE_TESTS["boolean"]: bool, _TYPE_TESTS["array"]: list,
    _TYPE_TESTS["object"]: dict}
"""The type tests that are ``isinstance`` with one class (not ``integer`` or ``number``: a
bool is not one, and a float may be an integer)."""


def _test_of(check: Check) -> Check | type | None:
    """How :meth:`_FastCompiler.flat_object` tests a property: None for anything, the class for a
    plain ``isinstance`` test, else the predicate."""
    if check is _always:
        return None
    return _INSTANCE_TESTS.get(check, check)


def _always(_: object) -> bool:
    return True


def _never(_: object) -> bool:
    return False


def _equal(a: object, b: object) -> bool:
    """JSON equality as JSON Schema means it: ``1 == 1.0`` but ``true != 1``."""
    if a is b:
        return True
    if isinstance(a, str) or isinstance(b, str):
        return bool(a == b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return bool(a == b)


def fast_check(schema: JSONSchema) -> Check | None:
    """A predicate equivalent to jsonschema's ``is_valid`` for ``schema``, or None when the
    schema uses a keyword this compiler does not handle."""
    try:
        return _FastCompiler(schema).compile(schema)
    except (_Unsupported, re.error, RecursionError):
        return None


class _FastCompiler:
    """Compiles a schema into nested closures. Only local ``$ref`` (``#...``) are followed."""

    def __init__(self, root: JSONSchema) -> None:
        self.root = root
        self.refs: dict[str, list[Check]] = {}

    def compile(self, node: object) -> Check:
        if node is True:
            return _always
        if node is False:
            return _never
        if not isinstance(node, dict):
            raise _Unsupported(node)
        if node.keys() <= _OBJECT_KEYWORDS and node.get("type", "object") == "object":
            return self.flat_object(node)
        checks: list[Check] = []
        for key, value in node.items():
            if key in _IGNORED:
                continue
            if key in _BOUNDS:
                checks.append(_bound(key, value))
                continue
            build = _KEYWORDS.get(key)  # by exact name: "$type" or "ref" is no keyword
            if build is None:
                raise _Unsupported(key)
            check = build(self, value, node)
            if check is not None:
                checks.append(check)
        return _all(checks)

    def flat_object(self, node: JSONSchema) -> Check:
        """An object schema of ``properties``, ``required`` and ``additionalProperties``
        alone (the usual arguments schema) as one predicate: what the keywords' own
        predicates decide together, in one pass over the instance's keys. A property whose
        schema is a type test alone (``{"type": "string"}`` and the like) is tested with
        ``isinstance`` there, without a call of its predicate."""
        typed = "type" in node
        props: dict[str, Check | type | None] = {}
        for name, sub in (node.get("properties") or {}).items():
            props[name] = _test_of(self.compile(sub))
        required = tuple(node.get("required") or ())
        extra: Check | type | None = None  # for keys not in properties; None: anything
        if "additionalProperties" in node:
            extra = _test_of(self.compile(node["additionalProperties"]))
        get = props.get

        def check_object(x: object) -> bool:
            if not isinstance(x, dict):
                return not typed
            for name in required:
                if name not in x:
                    return False
            for key, value in x.items():
                sub = get(key, extra)
                if sub is None:
                    continue
                if type(sub) is type:
                    if not isinstance(value, sub):
                        return False
                elif not sub(value):
                    return False
            return True
        return check_object

    # One method per keyword: k_<keyword>(value, node) -> Check | None, found in _KEYWORDS.

    def k_type(self, value: object, node: JSONSchema) -> Check:
        listed = value if isinstance(value, list) else [value]
        names = [n for n in listed if isinstance(n, str) and n in _TYPE_TESTS]
        if not names or len(names) != len(listed):
            raise _Unsupported("type")
        tests = [_TYPE_TESTS[n] for n in names]
        if len(tests) == 1:
            return tests[0]
        return lambda x: any(t(x) for t in tests)

    def k_enum(self, value: object, node: JSONSchema) -> Check:
        if not isinstance(value, list):
            raise _Unsupported("enum")
        if all(isinstance(v, str) for v in value):
            strings = frozenset(value)
            return lambda x: isinstance(x, str) and x in strings
        return lambda x: any(_equal(v, x) for v in value)

    def k_const(self, value: object, node: JSONSchema) -> Check:
        return lambda x: _equal(value, x)

    def k_properties(self, value: object, node: JSONSchema) -> Check:
        if not isinstance(value, dict):
            raise _Unsupported("properties")
        props = [(name, self.compile(sub)) for name, sub in value.items()]

        def check(x: object) -> bool:
            if isinstance(x, dict):
                for name, sub in props:
                    if name in x and not sub(x[name]):
                        return False
            return True
        return check

    def k_required(self, value: object, node: JSONSchema) -> Check:
        names = tuple(_listed(value, "required"))
        return lambda x: not isinstance(x, dict) or all(n in x for n in names)

    def k_additionalProperties(self, value: object, node: JSONSchema) -> Check:
        known = frozenset(node.get("properties") or ())
        if "patternProperties" in node:
            raise _Unsupported("patternProperties")
        if value is False:
            return lambda x: not isinstance(x, dict) or x.keys() <= known
        sub = self.compile(value)
        return lambda x: not isinstance(x, dict) or all(
            sub(v) for k, v in x.items() if k not in known)

    def k_items(self, value: object, node: JSONSchema) -> Check:
        start = len(node.get("prefixItems") or ())
        sub = self.compile(value)
        if sub is _never:
            return lambda x: not isinstance(x, list) or len(x) <= start
        return lambda x: not isinstance(x, list) or all(sub(v) for v in x[start:])

    def k_prefixItems(self, value: object, node: JSONSchema) -> Check:
        subs = [self.compile(v) for v in _listed(value, "prefixItems")]
        return lambda x: not isinstance(x, list) or all(
            sub(v) for sub, v in zip(subs, x, strict=False))

    def k_anyOf(self, value: object, node: JSONSchema) -> Check:
        subs = [self.compile(v) for v in _listed(value, "anyOf")]
        return lambda x: any(sub(x) for sub in subs)

    def k_oneOf(self, value: object, node: JSONSchema) -> Check:
        subs = [self.compile(v) for v in _listed(value, "oneOf")]
        return lambda x: sum(1 for sub in subs if sub(x)) == 1

    def k_allOf(self, value: object, node: JSONSchema) -> Check:
        return _all([self.compile(v) for v in _listed(value, "allOf")])

    def k_not(self, value: object, node: JSONSchema) -> Check:
        sub = self.compile(value)
        return lambda x: not sub(x)

    def k_ref(self, value: object, node: JSONSchema) -> Check:
        if not isinstance(value, str) or not value.startswith("#"):
            raise _Unsupported("$ref")
        cell = self.refs.get(value)
        if cell is None:
            target = resolve_local(self.root, value)
            if target is None:
                raise _Unsupported("$ref")
            cell = self.refs[value] = []
            cell.append(self.compile(target))
        return lambda x: cell[0](x)

    def k_format(self, value: object, node: JSONSchema) -> Check:
        if not isinstance(value, str):
            raise _Unsupported("format")
        return lambda x: FORMAT_CHECKER.conforms(x, value)

    def k_pattern(self, value: object, node: JSONSchema) -> Check:
        if not isinstance(value, str):
            raise _Unsupported("pattern")
        search = re.compile(value).search
        return lambda x: not isinstance(x, str) or search(x) is not None


_KEYWORDS: dict[str, Callable[[_FastCompiler, object, JSONSchema], Check]] = {
    "type": _FastCompiler.k_type, "enum": _FastCompiler.k_enum, "const": _FastCompiler.k_const,
    "properties": _FastCompiler.k_properties, "required": _FastCompiler.k_required,
    "additionalProperties": _FastCompiler.k_additionalProperties,
    "items": _FastCompiler.k_items, "prefixItems": _FastCompiler.k_prefixItems,
    "anyOf": _FastCompiler.k_anyOf, "oneOf": _FastCompiler.k_oneOf,
    "allOf": _FastCompiler.k_allOf, "not": _FastCompiler.k_not, "$ref": _FastCompiler.k_ref,
    "format": _FastCompiler.k_format, "pattern": _FastCompiler.k_pattern,
}
"""The keywords compiled (besides the bounds), by their exact names: a name that only looks
like one (``$type``, ``ref``) is an annotation to jsonschema, and is left to it."""


def _same(x: float) -> float:
    return x


def _at_least(x: float, bound: float) -> bool:
    return x >= bound


def _at_most(x: float, bound: float) -> bool:
    return x <= bound


def _above(x: float, bound: float) -> bool:
    return x > bound


def _below(x: float, bound: float) -> bool:
    return x < bound


_BOUNDS: dict[str, tuple[Callable[[float, float], bool], Check, Callable[[Any], float]]] = {
    "minimum": (_at_least, _is_number, _same),
    "maximum": (_at_most, _is_number, _same),
    "exclusiveMinimum": (_above, _is_number, _same),
    "exclusiveMaximum": (_below, _is_number, _same),
    "minLength": (_at_least, _TYPE_TESTS["string"], len),
    "maxLength": (_at_most, _TYPE_TESTS["string"], len),
    "minItems": (_at_least, _TYPE_TESTS["array"], len),
    "maxItems": (_at_most, _TYPE_TESTS["array"], len),
    "minProperties": (_at_least, _TYPE_TESTS["object"], len),
    "maxProperties": (_at_most, _TYPE_TESTS["object"], len),
}
"""Bound keywords: (comparison, the instances it applies to, what is measured: the number, or
the length of an instance the second test passed)."""


def _bound(keyword: str, value: object) -> Check:
    if not _is_number(value):
        raise _Unsupported(keyword)
    test, applies, measure = _BOUNDS[keyword]
    return lambda x: not applies(x) or test(measure(x), value)


def _listed(value: object, keyword: str) -> list[object]:
    """The list a keyword holds (of schemas, or of names), or the keyword is not compiled."""
    if not isinstance(value, list):
        raise _Unsupported(keyword)
    return value


def _all(checks: list[Check]) -> Check:
    if not checks:
        return _always
    if len(checks) == 1:
        return checks[0]

    def check(x: object) -> bool:
        for sub in checks:  # noqa: SIM110 - a loop reads as plainly as all() of a generator
            if not sub(x):
                return False
        return True
    return check
