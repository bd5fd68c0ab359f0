"""Type signatures: gram text <-> :class:`Signature` <-> JSON Schema, both ways.

A tool's type signature is a gram path in curried form whose nodes are typed parameters and
whose last node is the (unnamed) result::

    (city::String {description: "City name"})==>(days::Integer {default: 3})==>(::String)

The notation (documented with examples in ``docs/signatures.md``):

- **Types are labels.** ``String``/``Text``, ``Integer``/``Int``, ``Number``/``Double``/
  ``Float``, ``Boolean``/``Bool``, ``Array``, ``Object``, ``Null`` and ``Any`` (no type
  constraint). Several labels make a union: ``(x::String:Null)`` is ``["string", "null"]``.
  A label may instead name a *type pattern* (below).
- **Keywords are the record.** ``{description: "...", default: 3, minimum: 0}``: JSON Schema
  keywords with JSON values. Values gram cannot write natively (``null`` aside, which is the
  bare name ``null``) are JSON in a tagged string: ``default: json`[[1, 2], []]```.
- **Sub-schemas are type references.** Keywords whose value is a schema (``items``,
  ``additionalProperties``, ``anyOf``, ...) take a type name (``items: String``), a list of
  them (``anyOf: [Circle, Square]``) or ``true``/``false``.
- **Type patterns** define named types next to the signature:
  ``[Point:Object {additionalProperties: false} | (x::Number), (y::Number)]``; the member
  nodes of an ``Object`` type are its properties.
- **Required.** A parameter (or property) is required unless it has a ``default``; the flag
  ``required: false`` / ``required: true`` overrides that. An array ``required: [...]`` on an
  object (or on the leading unnamed node of a signature) is the schema's list verbatim.
- A leading unnamed node holds keywords of the arguments object itself:
  ``({additionalProperties: false})==>(a::String)==>(::String)``; ``()==>(::String)`` is a
  tool without parameters.

This module owns the type language's vocabulary and checks (shared by the gram reader in
:mod:`gramagent._spec.gram` and by :func:`schema_to_signature`), and the writer of signatures
and type patterns.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from gramagent._spec.model import JSONSchema, NamedType, Param, Signature, TypeRefs
from gramagent.errors import SchemaError, SpecError

__all__ = [
    "TYPE_NAMES",
    "format_signature",
    "format_value",
    "parse_signature",
    "schema_to_signature",
    "signature_to_schema",
]

# --------------------------------------------------------------------------------------------
# Vocabulary
# --------------------------------------------------------------------------------------------

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

_CANONICAL_NAME = {"string": "String", "integer": "Integer", "number": "Number",
                   "boolean": "Boolean", "array": "Array", "object": "Object", "null": "Null"}
JSON_TYPES = frozenset(_CANONICAL_NAME)

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
_RANK = {k: i for i, k in enumerate(_ORDER)}
_MEMBER_ANNOTATIONS = ("description", "title", "default", "examples", "deprecated")
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


def value_problem(key: str, value: Any) -> str | None:
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
    return f"{key} must be {expected}, not {_short(value)}"


def json_problem(value: Any) -> str | None:
    """Why ``value`` is not a JSON value (None when it is one)."""
    if value is None or isinstance(value, str | bool | int):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{value!r} is not a JSON number"
    if isinstance(value, list):
        for item in value:
            problem = json_problem(item)
            if problem:
                return problem
        return None
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                return f"object key {k!r} is not a string"
            problem = json_problem(v)
            if problem:
                return problem
        return None
    return f"{type(value).__name__} {value!r} is not a JSON value"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _has_type(value: Any, jtype: str) -> bool:
    if jtype == "string":
        return isinstance(value, str)
    if jtype == "integer":
        return _is_int(value) or (isinstance(value, float) and value.is_integer())
    if jtype == "number":
        return _is_number(value)
    if jtype == "boolean":
        return isinstance(value, bool)
    if jtype == "array":
        return isinstance(value, list)
    if jtype == "object":
        return isinstance(value, dict)
    return value is None  # "null"


def type_label(jtype: Any) -> str:
    """Gram labels for a JSON Schema ``type`` value: ``String`` or ``String:Null``."""
    if jtype is None:
        return "Any"
    if isinstance(jtype, str):
        return _CANONICAL_NAME[jtype]
    return ":".join(_CANONICAL_NAME[t] for t in jtype)


def default_problem(schema: Mapping[str, Any]) -> str | None:
    """Why the schema's ``default`` does not match its ``type`` (None when it does)."""
    if "default" not in schema or "type" not in schema:
        return None
    value, jtype = schema["default"], schema["type"]
    types = [jtype] if isinstance(jtype, str) else jtype
    if any(_has_type(value, t) for t in types):
        return None
    return f"default {_short(value)} does not match type {type_label(jtype)}"


def _short(value: Any, limit: int = 40) -> str:
    text = dump_json(value) if json_problem(value) is None else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --------------------------------------------------------------------------------------------
# Signature <-> JSON Schema
# --------------------------------------------------------------------------------------------

def canonical_required(params: Iterable[Param]) -> list[str]:
    """The names of the required parameters, in order (the canonical ``required`` list)."""
    return [p.name for p in params if p.required]


def signature_to_schema(sig: Signature) -> JSONSchema:
    """The JSON Schema (``type: object``) of a tool's arguments.

    ``properties`` is always present; ``required`` lists the required parameters in order and
    is left out when there are none (unless ``sig.keywords`` holds an explicit list). Param
    schemas are shared, not copied: treat the result as read-only.
    """
    out: JSONSchema = {"type": "object", "properties": {p.name: p.schema for p in sig.params}}
    keywords = sig.keywords
    if "required" in keywords:
        out["required"] = list(keywords["required"])
    else:
        required = canonical_required(sig.params)
        if required:
            out["required"] = required
    for key, value in keywords.items():
        if key != "required":
            out[key] = value
    return out


def schema_to_signature(schema: Mapping[str, Any]) -> Signature:
    """The signature whose :func:`signature_to_schema` is ``schema``.

    ``schema`` is the JSON Schema of a tool's arguments (``type: object``). The result has one
    :class:`Param` per property; everything else of the arguments object goes into
    ``Signature.keywords``. ``schema -> signature -> gram text -> signature -> schema`` gives
    back an equal schema (a missing top-level ``properties`` comes back as ``{}``).

    Raises:
        SchemaError: A keyword the notation cannot express, a value of the wrong kind, or a
            ``default`` that does not match its type; ``keyword`` and ``path`` (a JSON
            pointer) say which and where.
    """
    if not isinstance(schema, Mapping):
        raise SchemaError("the arguments schema must be a JSON object", keyword="type")
    if schema.get("type") != "object":
        raise SchemaError(f"the arguments schema must have type 'object', not "
                          f"{_short(schema.get('type'))}", keyword="type")
    checked = _check_schema(schema, "")
    props = checked.pop("properties", {})
    required = checked.get("required", [])
    params = [Param(name=name, schema=sub, required=name in required)
              for name, sub in props.items()]
    keywords = {k: v for k, v in checked.items() if k != "type"}
    if "required" in keywords and _canonical(keywords["required"], list(props)):
        del keywords["required"]
    return Signature(params=tuple(params), keywords=keywords)


def _canonical(required: Any, names: list[str]) -> bool:
    """Whether a ``required`` list is what the member flags would produce on their own."""
    if not isinstance(required, list) or not required:
        return False
    wanted = set(required)
    return required == [n for n in names if n in wanted]


def _pointer(path: str, *parts: str | int) -> str:
    for part in parts:
        path += "/" + str(part).replace("~", "~0").replace("/", "~1")
    return path


def _check_schema(node: Any, path: str) -> Any:
    """A checked copy of a (sub)schema; SchemaError for anything the notation cannot write."""
    if isinstance(node, bool):
        return node
    if not isinstance(node, Mapping):
        raise SchemaError(f"{path or '/'}: a schema must be an object or a boolean, not "
                          f"{_short(node)}", keyword=path.rsplit("/", 1)[-1] or None, path=path)
    out: JSONSchema = {}
    for key, value in node.items():
        kind = keyword_kind(key) if isinstance(key, str) and "\0" not in key else None
        if kind is None:
            raise SchemaError(f"{path or '/'}: unsupported keyword {key!r}", keyword=str(key),
                              path=path)
        here = _pointer(path, key)
        if kind == VALUE:
            problem = value_problem(key, value)
            if problem:
                raise SchemaError(f"{here}: {problem}", keyword=key, path=path)
            out[key] = copy.deepcopy(value)
        elif kind == TYPE:
            out[key] = _check_type(value, here)
        elif kind == SCHEMA:
            out[key] = _check_schema(value, here)
        elif kind == SCHEMA_LIST or (kind == ITEMS and isinstance(value, list)):
            if not isinstance(value, list) or not value:
                raise SchemaError(f"{here}: {key} must be a non-empty list of schemas",
                                  keyword=key, path=path)
            out[key] = [_check_schema(v, _pointer(here, i)) for i, v in enumerate(value)]
        elif kind == ITEMS:
            out[key] = _check_schema(value, here)
        elif kind in (SCHEMA_MAP, PROPERTIES):
            if not isinstance(value, Mapping):
                raise SchemaError(f"{here}: {key} must map names to schemas", keyword=key,
                                  path=path)
            for name in value:
                if not isinstance(name, str) or "\0" in name or (kind == PROPERTIES
                                                                 and not name):
                    raise SchemaError(f"{here}: the name {name!r} cannot be written in gram "
                                      "(names are non-empty text without NUL)", keyword=key,
                                      path=path)
            out[key] = {k: _check_schema(v, _pointer(here, k)) for k, v in value.items()}
        else:  # REQUIRED
            if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
                raise SchemaError(f"{here}: required must be a list of names", keyword=key,
                                  path=path)
            out[key] = list(value)
    props = out.get("properties") or {}
    for name, sub in props.items():
        if not isinstance(sub, dict):
            where = _pointer(path, "properties", name)
            raise SchemaError(f"{where}: a property schema must be an object, not {sub!r}",
                              keyword="properties", path=where)
    jtype = out.get("type", "object")
    if props and "object" not in (jtype if isinstance(jtype, list) else [jtype]):
        raise SchemaError(f"{path or '/'}: properties on a schema of type {_short(jtype)} "
                          "(properties need type object)", keyword="properties", path=path)
    problem = default_problem(out)
    if problem:
        raise SchemaError(f"{_pointer(path, 'default')}: {problem}", keyword="default",
                          path=path)
    return out


def _check_type(value: Any, here: str) -> Any:
    if isinstance(value, str) and value in JSON_TYPES:
        return value
    if (isinstance(value, list) and value and all(isinstance(t, str) and t in JSON_TYPES
                                                  for t in value)
            and len(set(value)) == len(value)):
        return list(value)
    raise SchemaError(f"{here}: type must be one of {', '.join(sorted(JSON_TYPES))} or a list "
                      f"of them, not {_short(value)}", keyword="type", path=here[:-5])


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------

def parse_signature(text: str, *, file: str | None = None) -> Signature:
    """Parse signature text: one gram path, optionally followed by type patterns.

    Example: ``(name::String {default:"x"})==>(::String)``.

    Raises:
        SpecError: Syntax or type errors, each with its 1-based ``line:column``.
    """
    from gramagent._spec.gram import read_signature  # the tree-sitter reader

    return read_signature(text, file=file)


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------

_SYMBOL = re.compile(r"[a-zA-Z_][0-9a-zA-Z_.\-@]*\Z")
_DECIMAL = re.compile(r"-?(0|[1-9]\d*)\.\d+\Z")
_RESERVED_WORDS = frozenset({"true", "false", "null"})
_DQ_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r",
                             "\t": "\\t", "\b": "\\b", "\f": "\\f"})
_BT_ESCAPES = str.maketrans({"\\": "\\\\", "`": "\\`", "\n": "\\n", "\r": "\\r",
                             "\t": "\\t", "\b": "\\b", "\f": "\\f"})


def quote_string(text: str) -> str:
    """A gram string literal for ``text``: ``"..."``, or ``json`"..."``` if it holds NUL."""
    if "\0" in text:
        return json_literal(text)
    return '"' + text.translate(_DQ_ESCAPES) + '"'


def json_literal(value: Any) -> str:
    """Any JSON value as a gram tagged string: ``json`[1, [2]]```."""
    return "json`" + dump_json(value).translate(_BT_ESCAPES) + "`"


def dump_json(value: Any, *, sort_keys: bool = False) -> str:
    """Compact JSON text (any size of integer; no NaN or infinity)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False,
                      sort_keys=sort_keys)


def format_name(name: str) -> str:
    """An identifier as gram: bare when it is a gram symbol, else in backticks.

    Raises:
        SpecError: The name holds a NUL character, which gram cannot write.
    """
    if _SYMBOL.match(name) and name not in _RESERVED_WORDS:
        return name
    if "\0" in name:
        raise SpecError(f"the name {name!r} holds a NUL character, which gram cannot write")
    return "`" + name.translate(_BT_ESCAPES) + "`"


def format_key(key: str) -> str:
    """A record or map key: bare when it is a symbol, else double-quoted."""
    if _SYMBOL.match(key) and key not in _RESERVED_WORDS:
        return key
    if "\0" in key:
        raise SpecError(f"the key {key!r} holds a NUL character, which gram cannot write")
    return '"' + key.translate(_DQ_ESCAPES) + '"'


def _scalar(value: Any) -> str | None:
    """A gram scalar literal, or None when the value needs the json`...` form."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return None if "\0" in value else '"' + value.translate(_DQ_ESCAPES) + '"'
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = repr(value)
        return text if _DECIMAL.match(text) else None
    return None


def format_value(value: Any) -> str:
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


class Notes(NamedTuple):
    """Comments a writer places around one element of a list (see ``gramagent fmt``)."""

    before: tuple[str, ...] = ()
    """Whole comment lines before the element (``""``: a blank line)."""
    after: str | None = None
    """A comment at the end of the element's last line."""
    offset: int = 0
    """Byte offset of the first of these comments in the text they came from."""


ListNotes = dict[Hashable, Notes]
"""The notes of one list, by element key; the key None holds the lines after the last element.
Writers pop what they place, so whatever is left was not placed."""


def render_elements(items: Sequence[tuple[Hashable, str]], indent: str,
                    notes: ListNotes | None = None) -> str:
    """The elements of a pattern, one per line (each text already indented), comma-separated,
    with the comments of ``notes`` placed around them."""
    lines: list[str] = []
    last = len(items) - 1
    for i, (key, text) in enumerate(items):
        note = notes.pop(key, None) if notes else None
        if i < last:
            text += ","
        if note is not None:
            lines.extend(indent + c if c else "" for c in note.before)
            if note.after is not None:
                text += "  " + note.after
        lines.append(text)
    end = notes.pop(None, None) if notes else None
    if end is not None:
        lines.extend(indent + c if c else "" for c in end.before)
    return "\n".join(lines)


@dataclass
class TypePattern:
    """A named type pattern the writer emits: ``[Name:Labels {record} | members]``."""

    name: str
    labels: str
    record: list[str]
    members: list[tuple[str, str]] = field(default_factory=list)
    """The member nodes: (property name, node text)."""

    def render(self, indent: str = "", notes: ListNotes | None = None) -> str:
        """The pattern's text; ``notes`` are comments keyed ``("member", name)``."""
        head = f"[{format_name(self.name)}:{self.labels}"
        if self.record:
            head += " {" + ", ".join(self.record) + "}"
        if not self.members:
            return indent + head + "]"
        inner = indent + "  "
        body = render_elements([(("member", n), inner + m) for n, m in self.members], inner,
                               notes)
        return f"{indent}{head} |\n{body}\n{indent}]"


Hint = tuple[str, ...]
"""Candidate names for a generated type pattern, best first."""


class SignatureWriter:
    """Writes signatures as path nodes plus the type patterns their nested schemas need.

    Type patterns the text was written with (:class:`NamedType`) keep their names: wherever
    a signature's ``type_refs`` say the text named one, the name is written again, provided
    it still reads back as the same schema. ``own`` types are written by this writer (all of
    them, in order, used or not); ``external`` ones are written elsewhere (at file level) and
    only referenced. Every other sub-schema that is not a bare built-in type gets a pattern
    named after where it sits (``series`` -> ``Series``, its items -> ``SeriesItem``, a
    member ``days`` -> ``Days``, or ``ForecastDays`` if that name is taken), unique within
    the writer; equal schemas share one pattern.
    """

    def __init__(self, own: Iterable[NamedType] = (),
                 external: Iterable[NamedType] = ()) -> None:
        first: dict[str, NamedType] = {}
        for named in own:
            first.setdefault(named.name, named)  # a tool's own type before a file-level one
        self._own = list(first.values())
        self._table: dict[str, NamedType] = {t.name: t for t in external}
        self._table.update((t.name, t) for t in self._own)  # own names shadow external ones
        self.patterns: list[TypePattern | None] = [None] * len(self._own)
        self._names: set[str] = {*TYPE_NAMES, *self._table}
        self._by_shape: dict[str, str] | None = None
        """Pattern names by schema (compact JSON), filled on the first generated pattern."""
        self._finished = not self._own

    @property
    def definitions(self) -> list[TypePattern]:
        """The type patterns to write: the own named types first, in order, then the
        generated ones, parents before children."""
        if not self._finished:
            self._finished = True
            for slot, named in enumerate(self._own):
                self.patterns[slot] = self._named_pattern(named)
        return [p for p in self.patterns if p is not None]

    def nodes(self, sig: Signature) -> list[str]:
        """The path nodes of ``sig``: arguments node (if needed), parameters, result."""
        refs = sig.type_refs
        out = []
        explicit = "required" in sig.keywords
        head = self.entries(sig.keywords, ("Arguments",), refs, "")
        if head or not sig.params:
            out.append("({" + ", ".join(head) + "})" if head else "()")
        for p in sig.params:
            flag = None if explicit else member_flag(p.schema, p.required)
            out.append(self.member(p.name, p.schema, flag, (_camel(p.name),), refs,
                                   _pointer("", "properties", p.name)))
        out.append(self.member(None, sig.returns, None, ("Result",), refs, "returns"))
        return out

    def member(self, name: str | None, schema: Mapping[str, Any], flag: bool | None,
               hint: Hint, refs: TypeRefs, at: str) -> str:
        """A node ``(name::Type {keywords})``; ``name`` None for the result node. ``at`` is
        the schema's JSON pointer in ``refs``."""
        written = refs.get(at)
        named = self._named_use(written, schema) if written else None
        if named is not None and not (flag is not None and "required" in named[1]):
            labels, extras = named
            entries = self.entries(extras, hint, refs, at)
        else:
            props = schema.get("properties")
            needs_pattern = (isinstance(props, dict) and bool(props)) or (
                flag is not None and "required" in schema)
            if needs_pattern:
                kept = {k: schema[k] for k in _MEMBER_ANNOTATIONS if k in schema}
                rest = {k: v for k, v in schema.items() if k not in kept}
                labels = format_name(self.define(rest, hint, refs, at))
                entries = self.entries(kept, hint, refs, at)
            else:
                labels = type_label(schema.get("type"))
                entries = self.entries(schema, hint, refs, at)
        if flag is not None:
            entries.append("required: " + ("true" if flag else "false"))
        record = " {" + ", ".join(entries) + "}" if entries else ""
        ident = format_name(name) if name is not None else ""
        return f"({ident}::{labels}{record})"

    def _named_use(self, labels: tuple[str, ...], schema: Mapping[str, Any]
                   ) -> tuple[str, JSONSchema] | None:
        """The labels to write for ``schema`` where the text wrote ``labels`` (one of them a
        type pattern's name), and the keywords the node adds; None when that no longer
        reads back as ``schema``."""
        name = next((label for label in labels if label not in TYPE_NAMES), None)
        named = self._table.get(name) if name is not None else None
        if named is None:
            return None
        base = named.schema
        jtype = base.get("type")
        if len(labels) > 1:
            types: list[str] = []
            for label in labels:
                own = jtype if label == name else TYPE_NAMES[label]
                if own is None:
                    return None
                types.extend([own] if isinstance(own, str) else own)
            if len(set(types)) != len(types):
                return None
            jtype = types
        if schema.get("type") != jtype or ("type" in schema) != (jtype is not None):
            return None
        if any(k not in schema for k in base):
            return None
        extras = {k: v for k, v in schema.items()
                  if k != "type" and (k not in base or base[k] != v)}
        if "properties" in extras:
            return None
        text = ":".join(format_name(label) if label == name
                        else _CANONICAL_NAME[TYPE_NAMES[label] or ""] for label in labels)
        return text, extras

    def _named_pattern(self, named: NamedType) -> TypePattern:
        """The pattern of a named type, written with the names its own text used."""
        refs = named.refs
        written = refs.get("")
        head = self._named_use(written, named.schema) if written else None
        if head is not None:
            return TypePattern(named.name, head[0],
                               self.entries(head[1], (named.name,), refs, ""))
        return self._pattern(named.name, named.schema, refs, "")

    def _pattern(self, name: str, schema: Mapping[str, Any], refs: TypeRefs, at: str
                 ) -> TypePattern:
        record = self.entries(schema, (name,), refs, at)
        members = []
        props = schema.get("properties")
        if isinstance(props, dict) and props:
            explicit = _explicit_required(schema)
            required = set(schema.get("required") or ())
            for prop, sub in props.items():
                flag = None if explicit else member_flag(sub, prop in required)
                hint = (_camel(prop), name + _camel(prop))
                members.append((prop, self.member(prop, sub, flag, hint, refs,
                                                  _pointer(at, "properties", prop))))
        return TypePattern(name, type_label(schema.get("type")), record, members)

    def define(self, schema: Mapping[str, Any], hint: Hint, refs: TypeRefs, at: str) -> str:
        """Emit a type pattern for ``schema`` (or reuse an equal one); return its name."""
        shape = dump_json(schema, sort_keys=True)
        if self._by_shape is None:  # an equal named type is reused under its name
            self._by_shape = {dump_json(t.schema, sort_keys=True): t.name
                              for t in self._table.values()}
        known = self._by_shape.get(shape)
        if known is not None:
            return known
        name = self._unique(hint)
        self._by_shape[shape] = name
        slot = len(self.patterns)
        self.patterns.append(None)
        self.patterns[slot] = self._pattern(name, schema, refs, at)
        return name

    def ref(self, schema: Any, hint: Hint, refs: TypeRefs, at: str) -> str:
        """A sub-schema as a type reference: ``true``/``false``, a built-in name, a pattern."""
        if isinstance(schema, bool):
            return "true" if schema else "false"
        written = refs.get(at)
        if written is not None and len(written) == 1:
            named = self._table.get(written[0])
            if named is not None and named.schema == schema:
                return format_name(written[0])
        if not schema:
            return "Any"
        if len(schema) == 1 and isinstance(schema.get("type"), str):
            return _CANONICAL_NAME[schema["type"]]
        return format_name(self.define(schema, hint, refs, at))

    def entries(self, schema: Mapping[str, Any], hint: Hint, refs: TypeRefs, at: str
                ) -> list[str]:
        """The record entries (``key: value``) of a schema's keywords, in canonical order."""
        keys = sorted((k for k in schema if k != "type"),
                      key=lambda k: _RANK.get(k, len(_RANK)))
        out = []
        props = schema.get("properties")
        for key in keys:
            value = schema[key]
            kind = keyword_kind(key)
            if kind == PROPERTIES:
                if props:
                    continue  # members of the type pattern
                text = "{}"
            elif kind == REQUIRED:
                if not isinstance(props, dict) or not props or _explicit_required(schema):
                    text = format_value(value)
                else:
                    continue  # member flags say it
            elif kind == SCHEMA or (kind == ITEMS and not isinstance(value, list)):
                suffix = "Item" if key == "items" else _camel(key)
                text = self.ref(value, _suffixed(hint, suffix), refs, _pointer(at, key))
            elif kind in (SCHEMA_LIST, ITEMS):
                suffix = "Item" if key in ("items", "prefixItems") else "Option"
                text = "[" + ", ".join(
                    self.ref(v, _suffixed(hint, f"{suffix}{i + 1}"), refs, _pointer(at, key, i))
                    for i, v in enumerate(value)) + "]"
            elif kind == SCHEMA_MAP:
                text = "{" + ", ".join(
                    f"{format_key(k)}: "
                    f"{self.ref(v, _suffixed(hint, _camel(k)), refs, _pointer(at, key, k))}"
                    for k, v in value.items()) + "}"
            else:
                text = format_value(value)
            out.append(f"{format_key(key)}: {text}")
        return out

    def _unique(self, hint: Hint) -> str:
        """The first free candidate of ``hint``, else the first one numbered."""
        bases = [b if b[:1].isalpha() else "T" + b for b in hint if b] or ["Type"]
        for base in bases:
            if base not in self._names:
                self._names.add(base)
                return base
        name, n = bases[0], 1
        while name in self._names:
            n += 1
            name = f"{bases[0]}{n}"
        self._names.add(name)
        return name


def _suffixed(hint: Hint, suffix: str) -> Hint:
    return tuple(h + suffix for h in hint)


def member_flag(schema: Mapping[str, Any], required: bool) -> bool | None:
    """The ``required:`` flag a member needs: only where the default rule says otherwise."""
    has_default = "default" in schema
    if required and has_default:
        return True
    if not required and not has_default:
        return False
    return None


def _explicit_required(schema: Mapping[str, Any]) -> bool:
    """Whether an object's ``required`` must be written as a list (not as member flags)."""
    if "required" not in schema:
        return False
    return not _canonical(schema["required"], list(schema.get("properties") or ()))


def _camel(text: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in re.split(r"[^0-9A-Za-z]+", text) if p)


def format_signature(sig: Signature) -> str:
    """The canonical gram text of a signature: its path, then one type pattern per line.

    Type patterns keep the names the signature was read with (``sig.named_types``); others
    are named after where they sit. A path longer than 80 characters is broken before each
    arrow.
    """
    writer = SignatureWriter(sig.named_types)
    nodes = writer.nodes(sig)
    path = "==>".join(nodes)
    if len(path) > 80:
        path = "\n==>".join(nodes)
    return "\n".join([path, *(p.render() for p in writer.definitions)])
