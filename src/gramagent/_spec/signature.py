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

This module holds :class:`Signature` and the ways between it, its gram text and its JSON
Schema. The pieces below it: the vocabulary and its checks (:mod:`~gramagent._spec.vocabulary`),
the reader (:mod:`~gramagent._spec.gram.sigreader`), the writer
(:mod:`~gramagent._spec.gram.sigwriter`) and the check of schemas that come as JSON
(:mod:`~gramagent._spec.schema.check`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gramagent._spec.data import (
    JSONSchema,
    NamedType,
    Param,
    SignatureParts,
    TypeRefs,
    canonical_required,
)
from gramagent._spec.gram.sigwriter import SignatureWriter
from gramagent._spec.schema.check import check_schema
from gramagent._spec.vocabulary import is_canonical_required, short
from gramagent.errors import SchemaError

__all__ = [
    "Signature",
    "format_signature",
    "parse_signature",
    "schema_to_signature",
    "signature_to_schema",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Signature:
    """A curried tool type signature: ``(a::T1)==>(b::T2)==>(::R)``."""

    params: tuple[Param, ...] = ()
    """The parameters, in order."""
    returns: JSONSchema = field(default_factory=lambda: {"type": "string"})
    """JSON Schema of the result (the last, unnamed node)."""
    keywords: JSONSchema = field(default_factory=dict)
    """Extra JSON Schema keywords of the arguments object itself (e.g.
    ``additionalProperties: false``), written on a leading unnamed node:
    ``({additionalProperties: false})==>(a::String)==>(::String)``. Holds ``required`` only
    when the schema's list is not the canonical one (the required params, in order, present
    when non-empty)."""
    named_types: tuple[NamedType, ...] = field(default=(), compare=False, repr=False)
    """Formatting metadata, not part of equality or of the schema: the type patterns the
    signature was written with, its own (in declaration order) and the file-level ones it
    uses. Empty for signatures made from JSON Schema."""
    type_refs: TypeRefs = field(default_factory=dict, compare=False, repr=False)
    """Formatting metadata: where the text named a type pattern, by JSON pointer into the
    arguments schema (``/properties/city``) or, prefixed ``returns``, into the result
    schema (``returns/items``)."""

    @classmethod
    def parse(cls, text: str) -> Signature:
        """Parse gram signature text such as ``(name::String {default:"x"})==>(::String)``."""
        return parse_signature(text)

    def to_gram(self) -> str:
        """The canonical gram text of this signature."""
        return format_signature(self)

    def to_schema(self) -> JSONSchema:
        """The JSON Schema (``type: object``) of the tool's arguments."""
        return signature_to_schema(self)

    @classmethod
    def from_parts(cls, parts: SignatureParts) -> Signature:
        """The signature of the parts a gram reader found."""
        return cls(params=parts.params, returns=parts.returns, keywords=parts.keywords,
                   named_types=parts.named_types, type_refs=parts.type_refs)


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


def schema_to_signature(schema: Mapping[str, object]) -> Signature:
    """The signature whose :func:`signature_to_schema` is ``schema``.

    ``schema`` is the JSON Schema of a tool's arguments (``type: object``). The result has one
    :class:`Param` per property; everything else of the arguments object goes into
    ``Signature.keywords``. ``schema -> signature -> gram text -> signature -> schema`` gives
    back an equal schema (a missing top-level ``properties`` comes back as ``{}``).

    Raises:
        SchemaError: A keyword the notation cannot express, or a value of the wrong kind;
            ``keyword`` and ``path`` (a JSON pointer) say which and where. A ``default`` is
            an annotation, as in JSON Schema: kept as it is, whether or not it matches the
            type (``"type": "string", "default": null`` is common in real tool schemas).
    """
    if not isinstance(schema, Mapping):
        raise SchemaError("the arguments schema must be a JSON object", keyword="type")
    if schema.get("type") != "object":
        raise SchemaError(f"the arguments schema must have type 'object', not "
                          f"{short(schema.get('type'))}", keyword="type")
    checked = check_schema(schema, "")
    props = checked.pop("properties", {})
    required = checked.get("required", [])
    params = [Param(name=name, schema=sub, required=name in required)
              for name, sub in props.items()]
    keywords = {k: v for k, v in checked.items() if k != "type"}
    if "required" in keywords and is_canonical_required(keywords["required"], list(props)):
        del keywords["required"]
    return Signature(params=tuple(params), keywords=keywords)



def parse_signature(text: str, *, file: str | None = None) -> Signature:
    """Parse signature text: one gram path, optionally followed by type patterns.

    Example: ``(name::String {default:"x"})==>(::String)``.

    Raises:
        SpecError: Syntax or type errors, each with its 1-based ``line:column``.
    """
    # Imported here for import cost, not for a cycle: the model adapters and the runtime use
    # the spec objects without ever parsing text, so they need not load tree-sitter
    # (measured in docs/performance.md, under "Gram parsing").
    from gramagent._spec.gram.sigreader import read_signature

    return Signature.from_parts(read_signature(text, file=file))


def format_signature(sig: Signature) -> str:
    """The canonical gram text of a signature: its path, then one type pattern per line.

    Type patterns keep the names the signature was read with (``sig.named_types``); others
    are named after where they sit. A path longer than 80 characters is broken before each
    arrow.
    """
    writer = SignatureWriter(sig.named_types)
    nodes = writer.nodes(sig.params, sig.returns, sig.keywords, sig.type_refs)
    path = "==>".join(nodes)
    if len(path) > 80:
        path = "\n==>".join(nodes)
    return "\n".join([path, *(p.render() for p in writer.definitions)])
