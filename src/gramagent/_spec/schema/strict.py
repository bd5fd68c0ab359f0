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
for what it wants to leave out: :func:`~gramagent._spec.schema.nulls.strip_strict_nulls` removes
those nulls (where the original schema does not accept null) before validating against the
original (:func:`~gramagent._spec.calls.validate.compile_validator`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from gramagent._spec.data import JSONSchema
from gramagent._spec.schema.nulls import admits_null, has_type
from gramagent._spec.vocabulary import pointer
from gramagent.errors import SchemaError

__all__ = [
    "OPENAI",
    "OPENAI_FINE_TUNED",
    "StrictChange",
    "StrictProfile",
    "StrictResult",
    "strict_schema",
]

StrictAction = Literal[
    "required", "nullable", "closed", "removed", "described", "rewritten", "unsupported"
]

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


def strict_schema(schema: Mapping[str, object], *, profile: StrictProfile = OPENAI) -> StrictResult:
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


def _is_object(node: object) -> bool:
    if not isinstance(node, dict):
        return False
    t = node.get("type")
    return t == "object" or (isinstance(t, list) and "object" in t) or (
        t is None and "properties" in node)


def _json(value: object) -> str:
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


def _describe(keyword: str, value: object) -> str | None:
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

    def __init__(self, profile: StrictProfile, root: Mapping[str, object]) -> None:
        self.profile = profile
        self.root = root
        self.changes: list[StrictChange] = []
        self.problems: list[StrictChange] = []

    def change(self, path: str, action: StrictAction, message: str) -> None:
        self.changes.append(StrictChange(path=path, action=action, message=message))

    def problem(self, path: str, message: str) -> None:
        self.problems.append(StrictChange(path=path, action="unsupported", message=message))

    # -- one node ------------------------------------------------------------------------------

    def node(self, node: object, path: str) -> Any:
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
                node[key] = {name: self.node(sub, pointer(path, key, name))
                             for name, sub in node[key].items()}
        if isinstance(node.get("anyOf"), list):
            node["anyOf"] = [self.node(sub, pointer(path, "anyOf", i))
                             for i, sub in enumerate(node["anyOf"])]
        if "items" in node:
            node["items"] = self.node(node["items"], pointer(path, "items"))
        elif has_type(node, "array"):
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
            props[name] = self.nullable(props[name], pointer(path, "properties", name))
        if props and required != list(props) + unknown:
            node["required"] = list(props) + unknown
        if missing:
            self.change(path, "required", "made required: " + ", ".join(missing))
        return node

    def nullable(self, node: object, path: str) -> Any:
        if not isinstance(node, dict) or admits_null(node, self.root):
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
        for found, allowed, what in (
                (stats.properties, p.max_properties, "object properties in total"),
                (stats.depth, p.max_depth, "levels of object nesting"),
                (stats.enum_values, p.max_enum_values, "enum values in total"),
                (stats.chars, p.max_string_chars, "characters of names and enum values")):
            if found > allowed:
                self.problem("", f"{found} {what}; {p.name} allows {allowed}")
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


class _Stats:
    """Sizes the strict-mode limits count."""

    def __init__(self) -> None:
        self.properties = 0
        self.depth = 0
        self.enum_values = 0
        self.chars = 0
        self.large_enums: list[tuple[str, list[Any]]] = []

    def visit(self, node: object, depth: int, path: str = "") -> None:
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
                self.visit(sub, depth, pointer(path, "properties", name))
        for key in ("$defs", "definitions"):
            if isinstance(node.get(key), dict):
                self.chars += sum(len(name) for name in node[key])
                for name, sub in node[key].items():
                    self.visit(sub, 0, pointer(path, key, name))
        if isinstance(node.get("enum"), list):
            values = node["enum"]
            self.enum_values += len(values)
            self.chars += sum(len(v) for v in values if isinstance(v, str))
            self.large_enums.append((path, values))
        if isinstance(node.get("const"), str):
            self.chars += len(node["const"])
        if isinstance(node.get("items"), dict):
            self.visit(node["items"], depth, pointer(path, "items"))
        for i, sub in enumerate(node.get("anyOf") or ()):
            self.visit(sub, depth, pointer(path, "anyOf", i))
