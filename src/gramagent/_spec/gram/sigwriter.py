"""The signature writer: parameters and schemas -> gram path nodes and type patterns.

Used by :func:`gramagent._spec.signature.format_signature` for one signature and by
:mod:`gramagent._spec.gram.docwriter` for whole files (where file-level type patterns are shared
by several tools).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gramagent._spec.data import JSONSchema, NamedType, Param, TypeRefs
from gramagent._spec.gram.layout import ListNotes, render_elements
from gramagent._spec.gram.literals import format_key, format_name, format_value
from gramagent._spec.vocabulary import (
    CANONICAL_NAME,
    ITEMS,
    MEMBER_ANNOTATIONS,
    PROPERTIES,
    RANK,
    REQUIRED,
    SCHEMA,
    SCHEMA_LIST,
    SCHEMA_MAP,
    TYPE_NAMES,
    dump_json,
    is_canonical_required,
    keyword_kind,
    pointer,
    type_label,
)

__all__ = ["SignatureWriter", "TypePattern", "member_flag"]


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

    def nodes(self, params: Sequence[Param], returns: Mapping[str, Any],
              keywords: Mapping[str, Any], refs: TypeRefs) -> list[str]:
        """The path nodes of a signature: arguments node (if needed), parameters, result.

        ``keywords`` are those of the arguments object; ``refs`` say where the text named a
        type pattern (``Signature.type_refs``).
        """
        out = []
        explicit = "required" in keywords
        head = self.entries(keywords, ("Arguments",), refs, "")
        if head or not params:
            out.append("({" + ", ".join(head) + "})" if head else "()")
        for p in params:
            flag = None if explicit else member_flag(p.schema, p.required)
            out.append(self.member(p.name, p.schema, flag, (_camel(p.name),), refs,
                                   pointer("", "properties", p.name)))
        out.append(self.member(None, returns, None, ("Result",), refs, "returns"))
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
                kept = {k: schema[k] for k in MEMBER_ANNOTATIONS if k in schema}
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
                        else CANONICAL_NAME[TYPE_NAMES[label] or ""] for label in labels)
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
                                                  pointer(at, "properties", prop))))
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
            return CANONICAL_NAME[schema["type"]]
        return format_name(self.define(schema, hint, refs, at))

    def entries(self, schema: Mapping[str, Any], hint: Hint, refs: TypeRefs, at: str
                ) -> list[str]:
        """The record entries (``key: value``) of a schema's keywords, in canonical order."""
        keys = sorted((k for k in schema if k != "type"),
                      key=lambda k: RANK.get(k, len(RANK)))
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
                text = self.ref(value, _suffixed(hint, suffix), refs, pointer(at, key))
            elif kind in (SCHEMA_LIST, ITEMS):
                suffix = "Item" if key in ("items", "prefixItems") else "Option"
                text = "[" + ", ".join(
                    self.ref(v, _suffixed(hint, f"{suffix}{i + 1}"), refs, pointer(at, key, i))
                    for i, v in enumerate(value)) + "]"
            elif kind == SCHEMA_MAP:
                text = "{" + ", ".join(
                    f"{format_key(k)}: "
                    f"{self.ref(v, _suffixed(hint, _camel(k)), refs, pointer(at, key, k))}"
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
    return not is_canonical_required(schema["required"], list(schema.get("properties") or ()))


def _camel(text: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in re.split(r"[^0-9A-Za-z]+", text) if p)


