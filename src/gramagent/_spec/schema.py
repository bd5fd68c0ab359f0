"""JSON Schema helpers: strict-mode compilation and compiled validators.

Two jobs, one per half of this module:

**Strict mode.** :func:`strict_schema` compiles a tool's argument schema for OpenAI
``strict: true`` (Structured Outputs, used by function calling in both the Chat Completions and
Responses APIs). The rules, from OpenAI's "Supported schemas" guide:

- every object lists *all* its properties in ``required``; an optional property is emulated by
  a union with ``null`` (``"type": ["string", "null"]``, or ``anyOf: [..., {"type": "null"}]``
  where the schema has no ``type``; an ``enum`` also gets ``null`` as a value);
- every object has ``additionalProperties: false``;
- only a subset of keywords is supported: ``type``, ``properties``, ``required``,
  ``additionalProperties``, ``items``, ``enum``, ``const``, ``anyOf``, ``$ref``, ``$defs`` /
  ``definitions``, ``description``, ``title``; for strings ``pattern`` and ``format`` (only
  ``date-time``, ``time``, ``date``, ``duration``, ``email``, ``hostname``, ``ipv4``, ``ipv6``,
  ``uuid``); for numbers ``multipleOf``, ``maximum``, ``exclusiveMaximum``, ``minimum``,
  ``exclusiveMinimum``; for arrays ``minItems``, ``maxItems``. Fine-tuned models support none of
  the string, number and array constraints (:data:`OPENAI_FINE_TUNED`);
- ``allOf``, ``not``, ``if``/``then``/``else``, ``dependentRequired``, ``dependentSchemas``
  are not supported, nor is ``oneOf`` (not in the list; compiled to ``anyOf``);
- the root is an object, not an ``anyOf``;
- limits: 5,000 object properties in total, 10 levels of object nesting (older versions of the
  guide said 5 levels: set :attr:`StrictProfile.max_depth`), 1,000 enum values in total,
  120,000 characters of property names, definition names, enum and const values, and 15,000
  characters for one string enum of more than 250 values.

``default`` is *not* kept: it is not in OpenAI's list of supported keywords, Azure OpenAI
rejects it (``'default' is not permitted``), and it is meaningless under strict mode, where the
model must send every property. Like every other constraint the profile does not support, it
is folded into the ``description`` (``"Temperature unit (default: \\"C\\")"``) so the model
still sees it, and the change is reported.

What cannot be expressed at all (a schema with no type, a free-form object or map, an array
without ``items``, a ``required`` name with no property, a limit exceeded) is reported in
:attr:`StrictResult.problems`; a caller should then send the original schema with
``strict: false``.

**Local validation always uses the original schema**, never the strict one: the strict schema
is for the model. Because optional properties became nullable, a strict model sends ``null``
for what it wants to leave out: :func:`strip_strict_nulls` removes those nulls (where the
original schema does not accept null) before validating against the original.

**Validators.** :func:`compile_validator` builds a Draft 2020-12 validator once per schema
(cached by canonical JSON) and returns a :class:`SchemaValidator` whose :meth:`errors
<SchemaValidator.errors>` gives short messages with the JSON path of each problem, e.g.
``personName: 3 is not of type 'string'``.
"""

from __future__ import annotations

import copy
import numbers
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import orjson
from jsonschema import Draft202012Validator, FormatChecker
from jsonschema import exceptions as js_exceptions

from gramagent.errors import SchemaError

__all__ = [
    "OPENAI",
    "OPENAI_FINE_TUNED",
    "SchemaValidator",
    "StrictChange",
    "StrictProfile",
    "StrictResult",
    "compile_validator",
    "strict_schema",
    "strip_strict_nulls",
]

JSONSchema = dict[str, Any]

StrictAction = Literal[
    "required", "nullable", "closed", "removed", "described", "rewritten", "unsupported"
]

# --------------------------------------------------------------------------------------------
# Strict mode
# --------------------------------------------------------------------------------------------

_CORE_KEYWORDS = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "enum", "const",
    "anyOf", "$ref", "$defs", "definitions", "description", "title",
})
_CONSTRAINTS = frozenset({
    "pattern", "format",
    "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
    "minItems", "maxItems",
})
_OPENAI_FORMATS = frozenset({
    "date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid",
})


@dataclass(frozen=True, slots=True, kw_only=True)
class StrictProfile:
    """What a strict-mode backend accepts. :data:`OPENAI` is the default."""

    name: str
    """A label for messages, e.g. ``openai``."""
    keywords: frozenset[str]
    """Every keyword the backend accepts in a schema node."""
    formats: frozenset[str] = frozenset()
    """Values of ``format`` the backend accepts (when ``format`` is in :attr:`keywords`)."""
    max_properties: int = 5000
    """Object properties allowed in the whole schema."""
    max_depth: int = 10
    """Levels of object nesting allowed (the root object is level 1)."""
    max_enum_values: int = 1000
    """Enum values allowed in the whole schema."""
    max_string_chars: int = 120_000
    """Total characters of property names, definition names, enum and const values."""
    large_enum_values: int = 250
    """An enum with more string values than this is limited to :attr:`large_enum_chars`."""
    large_enum_chars: int = 15_000
    """Total characters of one large string enum."""


OPENAI = StrictProfile(name="openai", keywords=_CORE_KEYWORDS | _CONSTRAINTS,
                       formats=_OPENAI_FORMATS)
"""OpenAI ``strict: true`` (Structured Outputs) as documented for current models."""

OPENAI_FINE_TUNED = StrictProfile(name="openai-fine-tuned", keywords=_CORE_KEYWORDS)
"""OpenAI ``strict: true`` for fine-tuned models: no string, number or array constraints."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StrictChange:
    """One thing :func:`strict_schema` changed, or could not express."""

    path: str
    """JSON pointer of the schema node, e.g. ``/properties/series/items``; ``""`` is the root."""
    action: StrictAction
    """``required``, ``nullable``, ``closed``, ``removed``, ``described``, ``rewritten`` (a
    change), or ``unsupported`` (a problem: the node cannot be expressed)."""
    message: str
    """What happened, for humans."""

    def __str__(self) -> str:
        return f"{self.path or '/'}: {self.message}"


@dataclass(frozen=True, slots=True, kw_only=True)
class StrictResult:
    """The output of :func:`strict_schema`."""

    schema: JSONSchema
    """The compiled schema (a new dict; the input is left untouched)."""
    changes: tuple[StrictChange, ...] = ()
    """Everything that was changed, in the order it was done (children before parents)."""
    problems: tuple[StrictChange, ...] = ()
    """What strict mode cannot express (action ``unsupported``); empty when :attr:`ok`."""

    @property
    def ok(self) -> bool:
        """True when the compiled schema is fit for ``strict: true``."""
        return not self.problems


def strict_schema(schema: Mapping[str, Any], *, profile: StrictProfile = OPENAI) -> StrictResult:
    """Compile a tool's argument schema for OpenAI ``strict: true``.

    The rules and the choices made are described in the module documentation: every property
    becomes required (optional ones nullable), every object closed, unsupported keywords are
    folded into the ``description`` when they are constraints the model should know about
    (``default``, ``minLength``, an unsupported ``format``...) or removed otherwise
    (``allOf`` of several schemas, ``not``, ``if``...), ``oneOf`` becomes ``anyOf``.

    The compiled schema is for the model only: **local validation always uses the original
    schema**. Compiling a compiled schema changes nothing (``changes`` is empty).

    Args:
        schema: The JSON Schema of the arguments object. Not modified.
        profile: The backend's rules; :data:`OPENAI` by default.

    Returns:
        The new schema, every change made, and every problem left (see :attr:`StrictResult.ok`).

    Raises:
        SchemaError: ``schema`` is malformed (a keyword whose value has the wrong shape, such
            as ``required`` that is not a list of names); ``keyword`` and ``path`` say where.
    """
    compiler = _StrictCompiler(profile, root=schema)
    out = compiler.node(copy.deepcopy(dict(schema)), "")
    if not _is_object(out) or "anyOf" in out:
        compiler.problem("", "the root must be an object schema (not anyOf or another type)")
    compiler.check_limits(out)
    return StrictResult(schema=out, changes=tuple(compiler.changes),
                        problems=tuple(compiler.problems))


def _pointer(path: str, *parts: str | int) -> str:
    for part in parts:
        path += "/" + str(part).replace("~", "~0").replace("/", "~1")
    return path


def _is_object(node: Any) -> bool:
    if not isinstance(node, dict):
        return False
    t = node.get("type")
    return t == "object" or (isinstance(t, list) and "object" in t) or (
        t is None and "properties" in node)


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


_PHRASES = {
    "default": "default: {}",
    "minLength": "at least {} characters",
    "maxLength": "at most {} characters",
    "pattern": "matching the pattern {}",
    "minimum": "minimum {}",
    "maximum": "maximum {}",
    "exclusiveMinimum": "greater than {}",
    "exclusiveMaximum": "less than {}",
    "multipleOf": "a multiple of {}",
    "minItems": "at least {} items",
    "maxItems": "at most {} items",
    "minProperties": "at least {} properties",
    "maxProperties": "at most {} properties",
    "minContains": "at least {} matching items",
    "maxContains": "at most {} matching items",
}
"""Unsupported keywords worth telling the model about (with ``format``, ``uniqueItems`` and
``examples``); other unsupported keywords are only removed."""


def _describe(keyword: str, value: Any) -> str | None:
    """A short phrase telling the model about a constraint, or None if not worth telling."""
    if keyword == "format":
        return f"format: {value}"
    if keyword == "uniqueItems":
        return "items must be unique" if value is True else ""
    if keyword == "examples":
        values = value if isinstance(value, list) else [value]
        return "examples: " + ", ".join(_json(v) for v in values)
    phrase = _PHRASES.get(keyword)
    return phrase.format(_json(value)) if phrase else None


_SUBSCHEMA_MAPS = ("properties", "$defs", "definitions")
_ANNOTATIONS = ("description", "title")
_TYPED_BY = ("type", "anyOf", "$ref", "enum", "const")
"""Keywords that give a node a shape strict mode can express."""


class _StrictCompiler:
    """One compilation: walks the schema, rewriting nodes and recording what it did."""

    def __init__(self, profile: StrictProfile, root: Mapping[str, Any]) -> None:
        self.profile = profile
        self.root = root
        self.changes: list[StrictChange] = []
        self.problems: list[StrictChange] = []

    def change(self, path: str, action: StrictAction, message: str) -> None:
        self.changes.append(StrictChange(path=path, action=action, message=message))

    def problem(self, path: str, message: str) -> None:
        self.problems.append(StrictChange(path=path, action="unsupported", message=message))

    # -- one node ------------------------------------------------------------------------------

    def node(self, node: Any, path: str) -> Any:
        if isinstance(node, bool):
            self.problem(path, f"a boolean schema ({_json(node)}) cannot be expressed")
            return node
        if not isinstance(node, dict):
            raise SchemaError(f"{path or '/'}: a schema must be an object, not {_json(node)}",
                              path=path)
        _check_shape(node, path)
        node = self.rewrite_composition(node, path)
        node = self.drop_unsupported(node, path)
        if "$ref" in node and len(node) > 1 and not node.keys() - {"$ref", *_ANNOTATIONS}:
            annotations = {k: node.pop(k) for k in _ANNOTATIONS if k in node}
            node = {"anyOf": [node], **annotations}
            self.change(path, "rewritten", "$ref with annotations wrapped in anyOf")
        for key in _SUBSCHEMA_MAPS:
            if isinstance(node.get(key), dict):
                node[key] = {name: self.node(sub, _pointer(path, key, name))
                             for name, sub in node[key].items()}
        if isinstance(node.get("anyOf"), list):
            node["anyOf"] = [self.node(sub, _pointer(path, "anyOf", i))
                             for i, sub in enumerate(node["anyOf"])]
        if "items" in node:
            node["items"] = self.node(node["items"], _pointer(path, "items"))
        elif _has_type(node, "array"):
            self.problem(path, "an array without items cannot be expressed")
        if _is_object(node):
            node = self.close_object(node, path)
        elif not any(k in node for k in _TYPED_BY):
            self.problem(path, "a schema without a type (any value) cannot be expressed")
        return node

    def rewrite_composition(self, node: JSONSchema, path: str) -> JSONSchema:
        if "oneOf" in node and "anyOf" not in node:
            node["anyOf"] = node.pop("oneOf")
            self.change(path, "rewritten", "oneOf rewritten as anyOf")
        all_of = node.get("allOf")
        if (isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], dict)
                and not all_of[0].keys() & (node.keys() - {"allOf", *_ANNOTATIONS})):
            del node["allOf"]
            node = {**all_of[0], **node}
            self.change(path, "rewritten", "allOf of one schema merged into its parent")
        return node

    def drop_unsupported(self, node: JSONSchema, path: str) -> JSONSchema:
        notes: list[str] = []
        for key in list(node):
            value = node[key]
            if key in self.profile.keywords and (
                    key != "format" or value in self.profile.formats):
                continue
            del node[key]
            phrase = _describe(key, value)
            if phrase is None:
                self.change(path, "removed", f"{key} is not supported; removed")
                continue
            if phrase:
                notes.append(phrase)
            self.change(path, "described", f"{key} is not supported; moved into the description")
        if notes:
            text = "; ".join(notes)
            desc = node.get("description")
            node["description"] = f"{desc} ({text})" if desc else text[:1].upper() + text[1:]
        return node

    def close_object(self, node: JSONSchema, path: str) -> JSONSchema:
        if "type" not in node:
            node = {"type": "object", **node}
            self.change(path, "rewritten", "properties without a type: typed as object")
        props: dict[str, Any] = node.get("properties", {})
        extra = node.get("additionalProperties")
        if not props and extra is not False:
            self.problem(path, "a free-form object (no properties) cannot be expressed")
        elif isinstance(extra, dict) and extra:
            self.problem(path, "additionalProperties with a schema cannot be expressed")
        if extra is not False:
            node["additionalProperties"] = False
            self.change(path, "closed", "additionalProperties set to false")
        required = list(node.get("required", []))
        unknown = [name for name in required if name not in props]
        if unknown:
            self.problem(path, "required names without a property: " + ", ".join(unknown))
        missing = [name for name in props if name not in required]
        for name in missing:
            props[name] = self.nullable(props[name], _pointer(path, "properties", name))
        if props and required != list(props) + unknown:
            node["required"] = list(props) + unknown
        if missing:
            self.change(path, "required", "made required: " + ", ".join(missing))
        return node

    def nullable(self, node: Any, path: str) -> Any:
        if not isinstance(node, dict) or _admits_null(node, self.root):
            return node
        node = dict(node)
        t = node.get("type")
        if isinstance(node.get("anyOf"), list):
            node["anyOf"] = [*node["anyOf"], {"type": "null"}]
        elif t is not None or "enum" in node or "const" in node:
            if t is not None:
                node["type"] = [*t, "null"] if isinstance(t, list) else [t, "null"]
            if "const" in node:
                node["enum"] = [node.pop("const")]
            if "enum" in node and None not in node["enum"]:
                node["enum"] = [*node["enum"], None]
        else:
            annotations = {k: node.pop(k) for k in _ANNOTATIONS if k in node}
            node = {"anyOf": [node, {"type": "null"}], **annotations}
        self.change(path, "nullable", "optional: null allowed (the model sends null to omit it)")
        return node

    # -- whole-schema limits -------------------------------------------------------------------

    def check_limits(self, schema: JSONSchema) -> None:
        stats = _Stats()
        stats.visit(schema, depth=0)
        p = self.profile
        if stats.properties > p.max_properties:
            self.problem("", f"{stats.properties} object properties in total; "
                             f"{p.name} allows {p.max_properties}")
        if stats.depth > p.max_depth:
            self.problem("", f"{stats.depth} levels of object nesting; "
                             f"{p.name} allows {p.max_depth}")
        if stats.enum_values > p.max_enum_values:
            self.problem("", f"{stats.enum_values} enum values in total; "
                             f"{p.name} allows {p.max_enum_values}")
        if stats.chars > p.max_string_chars:
            self.problem("", f"{stats.chars} characters of names and enum values; "
                             f"{p.name} allows {p.max_string_chars}")
        for path, values in stats.large_enums:
            chars = sum(len(v) for v in values if isinstance(v, str))
            if len(values) > p.large_enum_values and chars > p.large_enum_chars:
                self.problem(path, f"an enum of {len(values)} values has {chars} characters; "
                                   f"{p.name} allows {p.large_enum_chars} above "
                                   f"{p.large_enum_values} values")


_SHAPES: dict[str, tuple[type | tuple[type, ...], str]] = {
    "type": ((str, list), "a type name or a list of them"),
    "properties": (dict, "an object of schemas"),
    "$defs": (dict, "an object of schemas"),
    "definitions": (dict, "an object of schemas"),
    "required": (list, "a list of property names"),
    "enum": (list, "a list of values"),
    "anyOf": (list, "a list of schemas"),
    "oneOf": (list, "a list of schemas"),
    "allOf": (list, "a list of schemas"),
    "items": ((dict, bool), "a schema"),
    "additionalProperties": ((dict, bool), "a schema"),
    "description": (str, "a string"),
    "title": (str, "a string"),
}
"""The value shape of the keywords the compiler reads."""


def _check_shape(node: JSONSchema, path: str) -> None:
    for key, (kind, what) in _SHAPES.items():
        if key in node and not isinstance(node[key], kind):
            raise SchemaError(f"{path or '/'}: {key} must be {what}, not {_json(node[key])}",
                              keyword=key, path=path)
    if "required" in node and not all(isinstance(n, str) for n in node["required"]):
        raise SchemaError(f"{path or '/'}: required must be a list of property names",
                          keyword="required", path=path)


def _has_type(node: Mapping[str, Any], name: str) -> bool:
    t = node.get("type")
    return t == name or (isinstance(t, list) and name in t)


class _Stats:
    """Sizes the strict-mode limits count."""

    def __init__(self) -> None:
        self.properties = 0
        self.depth = 0
        self.enum_values = 0
        self.chars = 0
        self.large_enums: list[tuple[str, list[Any]]] = []

    def visit(self, node: Any, depth: int, path: str = "") -> None:
        if not isinstance(node, dict):
            return
        if _is_object(node):
            depth += 1
            self.depth = max(self.depth, depth)
        props = node.get("properties")
        if isinstance(props, dict):
            self.properties += len(props)
            self.chars += sum(len(name) for name in props)
            for name, sub in props.items():
                self.visit(sub, depth, _pointer(path, "properties", name))
        for key in ("$defs", "definitions"):
            if isinstance(node.get(key), dict):
                self.chars += sum(len(name) for name in node[key])
                for name, sub in node[key].items():
                    self.visit(sub, 0, _pointer(path, key, name))
        if isinstance(node.get("enum"), list):
            values = node["enum"]
            self.enum_values += len(values)
            self.chars += sum(len(v) for v in values if isinstance(v, str))
            self.large_enums.append((path, values))
        if isinstance(node.get("const"), str):
            self.chars += len(node["const"])
        if isinstance(node.get("items"), dict):
            self.visit(node["items"], depth, _pointer(path, "items"))
        for i, sub in enumerate(node.get("anyOf") or ()):
            self.visit(sub, depth, _pointer(path, "anyOf", i))


def strip_strict_nulls(arguments: Any, schema: Mapping[str, Any]) -> Any:
    """Undo strict-mode nullability in a model's arguments, for the *original* schema.

    A strict model sends ``null`` for an optional property it wants to leave out. This returns
    a copy of ``arguments`` without those nulls: a ``null`` is dropped where the property is
    optional in ``schema`` and its schema does not itself accept ``null``. Nested objects and
    array items are handled; local ``$ref`` (``#/...``) are followed.

    Args:
        arguments: The decoded arguments (usually a dict).
        schema: The original schema (not the strict one).

    Returns:
        The arguments, ready for validation against ``schema``; other values are unchanged.
    """
    return _strip(arguments, schema, schema)


def _strip(value: Any, node: Any, root: Mapping[str, Any], hops: int = 0) -> Any:
    if not isinstance(node, Mapping) or hops > _MAX_REF_HOPS:
        return value
    ref = node.get("$ref")
    if isinstance(ref, str):
        target = _resolve_local(root, ref)
        if target is not None:
            return _strip(value, target, root, hops + 1)
    if isinstance(value, dict):
        props = node.get("properties")
        if not isinstance(props, Mapping):
            return value
        required = node.get("required", ())
        out = {}
        for key, item in value.items():
            sub = props.get(key)
            if sub is None:
                out[key] = item
            elif item is None and key not in required and not _admits_null(sub, root):
                continue
            else:
                out[key] = _strip(item, sub, root)
        return out
    if isinstance(value, list) and isinstance(node.get("items"), Mapping):
        return [_strip(item, node["items"], root) for item in value]
    return value


_MAX_REF_HOPS = 32


def _admits_null(node: Any, root: Mapping[str, Any] | None, hops: int = 0) -> bool:
    """Whether a schema admits ``null``, read from its structure (``not`` is ignored).

    ``$ref`` is followed inside ``root``; an unresolvable one counts as refusing null.
    """
    if isinstance(node, bool):
        return node
    if not isinstance(node, Mapping) or hops > _MAX_REF_HOPS:
        return True
    if "const" in node and node["const"] is not None:
        return False
    if isinstance(node.get("enum"), list) and None not in node["enum"]:
        return False
    if "type" in node and not _has_type(node, "null"):
        return False
    if "$ref" in node:
        target = _resolve_local(root, node["$ref"]) if root is not None else None
        if target is None or not _admits_null(target, root, hops + 1):
            return False
    for key in ("anyOf", "oneOf"):
        if isinstance(node.get(key), list) and not any(
                _admits_null(sub, root, hops) for sub in node[key]):
            return False
    return not (isinstance(node.get("allOf"), list)
                and not all(_admits_null(sub, root, hops) for sub in node["allOf"]))


def _resolve_local(root: Mapping[str, Any], ref: Any) -> Any:
    """The node a local reference (``#`` or ``#/$defs/name``) points to, or None."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        return None
    node: Any = root
    for part in ref[1:].split("/"):
        if not part:
            continue
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


# --------------------------------------------------------------------------------------------
# Validators
# --------------------------------------------------------------------------------------------

_CHEAP_FORMATS = ("date", "date-time", "time", "email", "idn-email", "ipv4", "ipv6", "uuid",
                  "regex")
"""Formats checked locally: those that need no network and no slow parsing. The date-time and
time checkers exist only where jsonschema's optional ``rfc3339-validator`` is installed."""

_FORMAT_CHECKER = FormatChecker(
    [f for f in _CHEAP_FORMATS if f in Draft202012Validator.FORMAT_CHECKER.checkers])

_MAX_MESSAGE = 300
_CACHE_SIZE = 4096
"""Validators kept (the oldest is dropped first); one takes a few KB."""


class SchemaValidator:
    """A compiled Draft 2020-12 validator for one schema. Build with :func:`compile_validator`.

    Validity is decided by a predicate compiled from the schema into nested closures when the
    schema keeps to the keywords tool schemas use (about ten times faster than jsonschema's
    interpreter); other schemas, and every error message, go through jsonschema itself.
    """

    __slots__ = ("_check", "_validator", "schema")

    def __init__(self, schema: JSONSchema) -> None:
        try:
            Draft202012Validator.check_schema(schema)
        except js_exceptions.SchemaError as exc:
            where = _pointer("", *exc.absolute_path)
            names = [p for p in exc.absolute_path if isinstance(p, str)]
            raise SchemaError(f"invalid JSON Schema at {where or '/'}: {_clip(exc.message)}",
                              keyword=names[-1] if names else str(exc.validator), path=where
                              ) from None
        for ref in _refs(schema):
            if _resolve_local(schema, ref) is None:
                raise SchemaError(f"$ref {ref!r} cannot be resolved: only references inside "
                                  "the schema ('#/$defs/...') are supported", keyword="$ref")
        self.schema = schema
        """The schema validated against (a private copy)."""
        self._validator = Draft202012Validator(schema, format_checker=_FORMAT_CHECKER)
        self._check = _fast_check(schema) or self._validator.is_valid

    @property
    def fast(self) -> bool:
        """Whether validity is decided by the compiled fast path (jsonschema otherwise)."""
        return self._check != self._validator.is_valid

    def is_valid(self, instance: Any) -> bool:
        """Whether ``instance`` satisfies the schema."""
        return bool(self._check(instance))

    def errors(self, instance: Any) -> list[str]:
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


def _refs(node: Any) -> Iterable[Any]:
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
            out += f"[{_json(str(part))}]"
    return out


# -- the fast path ----------------------------------------------------------------------------

Check = Callable[[Any], bool]


class _Unsupported(Exception):
    """The schema uses something the fast path does not compile; jsonschema decides."""


_IGNORED = frozenset({"description", "title", "default", "examples", "$comment", "deprecated",
                      "readOnly", "writeOnly", "$defs", "definitions"})
"""Keywords that never affect validity (definitions are reached through ``$ref``)."""


def _is_number(x: Any) -> bool:
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


def _always(_: Any) -> bool:
    return True


def _never(_: Any) -> bool:
    return False


def _equal(a: Any, b: Any) -> bool:
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


def _fast_check(schema: JSONSchema) -> Check | None:
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

    def compile(self, node: Any) -> Check:
        if node is True:
            return _always
        if node is False:
            return _never
        if not isinstance(node, dict):
            raise _Unsupported(node)
        checks: list[Check] = []
        for key, value in node.items():
            if key in _IGNORED:
                continue
            if key in _BOUNDS:
                checks.append(_bound(key, value))
                continue
            build = getattr(self, "k_" + key.lstrip("$"), None)
            if build is None:
                raise _Unsupported(key)
            check = build(value, node)
            if check is not None:
                checks.append(check)
        return _all(checks)

    # One method per keyword: k_<keyword>(value, node) -> Check | None.

    def k_type(self, value: Any, node: JSONSchema) -> Check:
        names = value if isinstance(value, list) else [value]
        if not names or any(n not in _TYPE_TESTS for n in names):
            raise _Unsupported("type")
        tests = [_TYPE_TESTS[n] for n in names]
        if len(tests) == 1:
            return tests[0]
        return lambda x: any(t(x) for t in tests)

    def k_enum(self, value: Any, node: JSONSchema) -> Check:
        if not isinstance(value, list):
            raise _Unsupported("enum")
        if all(isinstance(v, str) for v in value):
            strings = frozenset(value)
            return lambda x: isinstance(x, str) and x in strings
        return lambda x: any(_equal(v, x) for v in value)

    def k_const(self, value: Any, node: JSONSchema) -> Check:
        return lambda x: _equal(value, x)

    def k_properties(self, value: Any, node: JSONSchema) -> Check:
        props = [(name, self.compile(sub)) for name, sub in value.items()]

        def check(x: Any) -> bool:
            if isinstance(x, dict):
                for name, sub in props:
                    if name in x and not sub(x[name]):
                        return False
            return True
        return check

    def k_required(self, value: Any, node: JSONSchema) -> Check:
        names = tuple(value)
        return lambda x: not isinstance(x, dict) or all(n in x for n in names)

    def k_additionalProperties(self, value: Any, node: JSONSchema) -> Check:
        known = frozenset(node.get("properties") or ())
        if "patternProperties" in node:
            raise _Unsupported("patternProperties")
        if value is False:
            return lambda x: not isinstance(x, dict) or x.keys() <= known
        sub = self.compile(value)
        return lambda x: not isinstance(x, dict) or all(
            sub(v) for k, v in x.items() if k not in known)

    def k_items(self, value: Any, node: JSONSchema) -> Check:
        start = len(node.get("prefixItems") or ())
        sub = self.compile(value)
        if sub is _never:
            return lambda x: not isinstance(x, list) or len(x) <= start
        return lambda x: not isinstance(x, list) or all(sub(v) for v in x[start:])

    def k_prefixItems(self, value: Any, node: JSONSchema) -> Check:
        subs = [self.compile(v) for v in value]
        return lambda x: not isinstance(x, list) or all(
            sub(v) for sub, v in zip(subs, x, strict=False))

    def k_anyOf(self, value: Any, node: JSONSchema) -> Check:
        subs = [self.compile(v) for v in value]
        return lambda x: any(sub(x) for sub in subs)

    def k_oneOf(self, value: Any, node: JSONSchema) -> Check:
        subs = [self.compile(v) for v in value]
        return lambda x: sum(1 for sub in subs if sub(x)) == 1

    def k_allOf(self, value: Any, node: JSONSchema) -> Check:
        return _all([self.compile(v) for v in value])

    def k_not(self, value: Any, node: JSONSchema) -> Check:
        sub = self.compile(value)
        return lambda x: not sub(x)

    def k_ref(self, value: Any, node: JSONSchema) -> Check:
        if not isinstance(value, str) or not value.startswith("#"):
            raise _Unsupported("$ref")
        cell = self.refs.get(value)
        if cell is None:
            target = _resolve_local(self.root, value)
            if target is None:
                raise _Unsupported("$ref")
            cell = self.refs[value] = []
            cell.append(self.compile(target))
        return lambda x: cell[0](x)

    def k_format(self, value: Any, node: JSONSchema) -> Check:
        return lambda x: _FORMAT_CHECKER.conforms(x, value)

    def k_pattern(self, value: Any, node: JSONSchema) -> Check:
        search = re.compile(value).search
        return lambda x: not isinstance(x, str) or search(x) is not None


def _same(x: Any) -> Any:
    return x


def _at_least(x: Any, bound: Any) -> bool:
    return bool(x >= bound)


def _at_most(x: Any, bound: Any) -> bool:
    return bool(x <= bound)


def _above(x: Any, bound: Any) -> bool:
    return bool(x > bound)


def _below(x: Any, bound: Any) -> bool:
    return bool(x < bound)


_BOUNDS: dict[str, tuple[Callable[[Any, Any], bool], Check, Callable[[Any], Any]]] = {
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
"""Bound keywords: (comparison, the instances it applies to, what is measured)."""


def _bound(keyword: str, value: Any) -> Check:
    if not _is_number(value):
        raise _Unsupported(keyword)
    test, applies, measure = _BOUNDS[keyword]
    return lambda x: not applies(x) or test(measure(x), value)


def _all(checks: list[Check]) -> Check:
    if not checks:
        return _always
    if len(checks) == 1:
        return checks[0]

    def check(x: Any) -> bool:
        for sub in checks:  # noqa: SIM110 - a plain loop is faster than all() on the hot path
            if not sub(x):
                return False
        return True
    return check


_cache: OrderedDict[bytes, SchemaValidator] = OrderedDict()
_cache_lock = threading.Lock()


def compile_validator(schema: Mapping[str, Any]) -> SchemaValidator:
    """The validator of ``schema``, built once and cached by its canonical JSON.

    Equal schemas (whatever their key order) share one validator, so calling this on every
    tool call is cheap; still, bind-time code should keep the result. Formats are checked
    where that is cheap (``date``, ``email``, ``ipv4``, ``ipv6``, ``uuid``, ``regex``, and
    ``date-time``/``time`` when ``rfc3339-validator`` is installed).

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
