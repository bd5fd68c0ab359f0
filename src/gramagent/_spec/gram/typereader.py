"""The gram reader's base: positioned problems, values, and the types of typed nodes.

:class:`TypeReader` holds one parse of one text (see :mod:`gramagent._spec.gram.syntax`) and turns
typed nodes (``(x::String {minLength: 1})``) and type patterns (``[Point:Object | (x::Number),
(y::Number)]``) into JSON Schemas, collecting every problem with its byte offset.
:mod:`gramagent._spec.gram.sigreader` reads signature paths on top of it, and
:mod:`gramagent._spec.gram.docreader` whole files.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator
from typing import Any

from tree_sitter import Node

from gramagent._spec.data import JSONSchema, NamedType, TypeRefs
from gramagent._spec.gram.seedhints import with_seed_hints
from gramagent._spec.gram.syntax import (
    K_COMMENT,
    K_ELEMENTS,
    K_NODE,
    V_BAD,
    V_JSON,
    V_LIST,
    V_MAP,
    V_SCALAR,
    V_SYMBOL,
    Decoder,
    NodeInfo,
    Val,
    parse,
)
from gramagent._spec.gram.syntaxerrors import syntax_problems
from gramagent._spec.vocabulary import (
    ITEMS,
    KEYWORDS,
    MAX_DEPTH,
    PROPERTIES,
    REQUIRED,
    SCHEMA,
    SCHEMA_LIST,
    TOO_DEEP,
    TYPE,
    TYPE_NAMES,
    VALUE,
    keyword_kind,
    pointer,
    value_problem,
)
from gramagent.errors import Diagnostic, SpecError

__all__ = ["INVALID", "MAX_EXPANDED", "TypeReader", "TypeScope", "did_you_mean", "elements",
           "property_pointer", "used_types"]

MAX_EXPANDED = 200_000
"""Schema nodes (objects and lists) the named types of one text may expand to, counting a
copy for every use. A type used twice in a type used twice ... doubles at every level: without
a budget, a few lines would expand to gigabytes. Real agent files stay in the thousands."""

INVALID: object = object()
"""Marks a value that could not be read (its problem is already recorded)."""
_KNOWN_KEYWORDS = sorted(KEYWORDS - {"type"})


class TypeScope:
    """A scope of named type patterns (a tool's own, or the file's), resolved on demand."""

    def __init__(self, parent: TypeScope | None = None, *, shared: bool = False) -> None:
        self.parent = parent
        self.shared = shared
        self.patterns: dict[str, tuple[NodeInfo, Node | None]] = {}
        self.resolved: dict[str, JSONSchema | None] = {}
        self.named: dict[str, NamedType] = {}
        self.sizes: dict[str, int] = {}
        """Schema nodes (objects and lists) of each resolved type."""
        self.resolving: set[str] = set()

    def chain(self) -> Iterator[TypeScope]:
        scope: TypeScope | None = self
        while scope is not None:
            yield scope
            scope = scope.parent

    def find(self, name: str) -> TypeScope | None:
        return next((s for s in self.chain() if name in s.patterns), None)


def used_types(refs: TypeRefs, scope: TypeScope, out: dict[str, NamedType]) -> None:
    """Add the file-level types ``refs`` name (and those they use) to ``out``."""
    for labels in refs.values():
        for label in labels:
            if label in TYPE_NAMES:
                continue
            where = scope.find(label)
            if where is None or not where.shared or label in out or label not in where.named:
                continue
            named = where.named[label]
            out[label] = named
            used_types(named.refs, where, out)


def property_pointer(at: str, name: str) -> str:
    """The JSON pointer of the property ``name`` of the schema at ``at``."""
    if "~" in name or "/" in name:
        return pointer(at, "properties", name)
    return f"{at}/properties/{name}"


def elements(node: Node) -> list[Node]:
    """The element nodes after ``|`` in a subject pattern (comments left out)."""
    for child in node.named_children:
        if child.kind_id == K_ELEMENTS:
            return [c for c in child.named_children if c.kind_id != K_COMMENT]
    return []


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """``; did you mean 'x'?`` for the candidate closest to ``word`` (``""`` if none is)."""
    close = difflib.get_close_matches(word, list(candidates), n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


class TypeReader:
    """One parse of one text; reads its types and collects every problem, positioned."""

    def __init__(self, src: bytes, file: str | None, *, fast: bool = True) -> None:
        self.decoder = Decoder(src, fast=fast)
        self.file = file
        self.tree = parse(src)
        self.problems: list[tuple[int, str]] = []
        self.refs: dict[str, tuple[str, ...]] = {}
        """Where the signature or type being read names a type pattern (see TypeRefs)."""
        self.depth = 0
        """How many type patterns are being resolved, each inside the one before."""
        self.too_deep = False
        """Whether a chain of type patterns nested too deeply was reported."""
        self.expanded = 0
        """Schema nodes copied from named types so far (see MAX_EXPANDED)."""
        self.too_big = False
        """Whether the text's named types expanding too far was reported."""
        if self.tree.root_node.has_error:
            self.problems.extend(syntax_problems(self.tree, self.decoder))

    # ---- problems ---------------------------------------------------------------------------

    def error(self, offset: int, message: str) -> None:
        self.problems.append((offset, message))

    def where(self, offset: int) -> str:
        return self.decoder.where(offset)

    def raise_problems(self) -> None:
        if not self.problems:
            return
        seen = set()
        diagnostics = []
        problems = with_seed_hints(self.decoder.src, self.problems)
        for offset, message in sorted(problems, key=lambda p: p[0]):
            if (offset, message) not in seen:
                seen.add((offset, message))
                line, column = self.decoder.position(offset)
                diagnostics.append(Diagnostic(message, self.file, line, column))
        raise SpecError(diagnostics)


    # ---- values -----------------------------------------------------------------------------

    def json(self, val: Val) -> Any:
        """A JSON value; INVALID after reporting what is wrong."""
        kind, payload, offset = val
        if kind in (V_SCALAR, V_JSON):
            return payload
        if kind == V_SYMBOL:
            if payload == "null":
                return None
            self.error(offset, f"unexpected name '{payload}': write a string as \"{payload}\"")
            return INVALID
        if kind == V_LIST:
            items = [self.json(v) for v in payload]
            return INVALID if any(i is INVALID for i in items) else items
        if kind == V_MAP:
            out = {}
            for key, _, v in payload:
                item = self.json(v)
                if item is INVALID:
                    return INVALID
                out[key] = item
            return out
        self.error(offset, payload)  # V_BAD
        return INVALID

    def string(self, val: Val) -> str | None:
        """A string value, or None when ``val`` is not one (nothing reported)."""
        kind, payload, _ = val
        if kind in (V_SCALAR, V_JSON) and isinstance(payload, str):
            return payload
        if kind == V_BAD:
            self.error(val[2], payload)
        return None


    # ---- types ------------------------------------------------------------------------------

    def collect_type(self, scope: TypeScope, node: Node) -> None:
        """Register a type pattern ``[Name:Type {...} | members]`` in ``scope``."""
        info = self.decoder.info(node)
        members = elements(node)
        name = info.ident
        if name is None:
            self.error(info.offset, "a type pattern needs a name: [Name:Object | ...]")
        elif not name:
            self.error(info.ident_offset, "type name must not be empty")
        elif name in TYPE_NAMES:
            self.error(info.ident_offset, f"'{name}' is a built-in type; choose another name")
        elif name in scope.patterns:
            first = scope.patterns[name][0]
            self.error(info.ident_offset, f"duplicate type '{name}' (first defined at "
                                          f"{self.where(first.offset)})")
        else:
            scope.patterns[name] = (info, node if members else None)

    def resolve_all(self, scope: TypeScope) -> None:
        """Check every type pattern of a scope, used or not."""
        for name, (info, _) in scope.patterns.items():
            if name not in scope.resolved:
                self.resolve(name, info.ident_offset, scope, f"type '{name}'")

    def resolve(self, name: str, offset: int, scope: TypeScope, what: str) -> JSONSchema | None:
        """The schema of a named type (a fresh copy), or None after reporting a problem."""
        where = scope.find(name)
        if where is None:
            known = [*TYPE_NAMES, *(n for s in scope.chain() for n in s.patterns)]
            hint = did_you_mean(name, known)
            self.error(offset, f"{what}: unknown type '{name}'" + (hint or (
                " (expected a built-in type: String, Integer, Number, Boolean, Array, Object, "
                f"Null or Any; or a type pattern's name: define [{name}:Object | ...])")))
            return None
        if name not in where.resolved:
            if name in where.resolving:
                self.error(offset, f"{what}: type '{name}' refers to itself; recursive types "
                                   "cannot be written as JSON Schema without $ref")
                return None
            if self.depth >= MAX_DEPTH:
                if not self.too_deep:  # once: the rest of the chain says nothing new
                    self.too_deep = True
                    self.error(offset, f"{what}: type '{name}' is the start of type patterns "
                                       f"{TOO_DEEP} (each naming the next)")
                return None
            where.resolving.add(name)
            info, node = where.patterns[name]
            members = elements(node) if node is not None else None
            outer, self.refs = self.refs, {}
            self.depth += 1
            result = self.typed(info, where, "", member=False, members=members,
                                what=f"type '{name}'")
            self.depth -= 1
            refs, self.refs = self.refs, outer
            where.resolving.discard(name)
            where.resolved[name] = None if result is None else result[0]
            if result is not None:
                where.sizes[name] = _size(result[0])
                where.named[name] = NamedType(name=name, schema=result[0], refs=refs,
                                              shared=where.shared)
        schema = where.resolved[name]
        if schema is None:
            return None
        self.expanded += where.sizes[name]
        if self.expanded > MAX_EXPANDED:
            if not self.too_big:  # once: every later use is over the budget too
                self.too_big = True
                self.error(offset, f"{what}: type '{name}' makes the named types of the text "
                                   f"expand to more than {MAX_EXPANDED:,} schema nodes (each "
                                   "use of a type is a copy of it)")
            return None
        return _copy(schema)

    def base_type(self, info: NodeInfo, scope: TypeScope, at: str, what: str
                  ) -> JSONSchema | None:
        """The schema the labels of a node stand for.

        One label: a built-in type or a type pattern's name. Several: a union of built-in
        types (``String:Null``), which may include one type pattern whose own type joins the
        union (``Address:Null``).
        """
        labels = info.labels
        if not labels:
            self.error(info.offset, f"{what} needs a type, e.g. ::String")
            return None
        if len(labels) == 1:
            jtype = TYPE_NAMES.get(labels[0], "")
            if jtype == "":
                self.refs[at] = labels
                return self.resolve(labels[0], info.label_offsets[0], scope, what)
            return {} if jtype is None else {"type": jtype}
        types: list[str] = []
        named: JSONSchema | None = None
        for name, offset in zip(labels, info.label_offsets, strict=True):
            jtype = TYPE_NAMES.get(name, "")
            if jtype == "":
                if named is not None:
                    self.error(offset, f"{what}: '{name}': a union holds at most one type "
                                       "pattern")
                    return None
                named = self.resolve(name, offset, scope, what)
                if named is None:
                    return None
                own = named.get("type")
                if own is None:
                    self.error(offset, f"{what}: '{name}' has no type (Any), so it cannot "
                                       "be part of a union")
                    return None
                new = [own] if isinstance(own, str) else own
            elif jtype is None:
                self.error(offset, f"{what}: 'Any' cannot be part of a union (it already "
                                   "allows every value)")
                return None
            else:
                new = [jtype]
            for t in new:
                if t in types:
                    self.error(offset, f"{what}: type '{name}' is listed twice")
                    return None
                types.append(t)
        if named is None:
            return {"type": types}
        named["type"] = types
        self.refs[at] = labels
        return named

    def typed(self, info: NodeInfo, scope: TypeScope, at: str, *, member: bool,
              members: list[Node] | None = None, what: str = "type"
              ) -> tuple[JSONSchema, bool | None] | None:
        """The schema of a typed node or type pattern, and its ``required:`` flag (if any).

        ``at`` is the JSON pointer of the schema, where type names it uses are recorded.
        """
        count = len(self.problems)
        schema = self.base_type(info, scope, at, what)
        if schema is None:
            return None
        flag: bool | None = None
        seen: set[str] = set()
        for key, key_offset, val in info.entries or ():
            if key in seen:
                self.error(key_offset, f"{what}: duplicate key '{key}'")
                continue
            seen.add(key)
            kind = keyword_kind(key)
            if kind == REQUIRED and val[0] == V_SCALAR and isinstance(val[1], bool):
                if member:
                    flag = val[1]
                else:
                    self.error(key_offset, f"{what}: a required flag applies to parameters and "
                                           "members only")
                continue
            if kind == VALUE and val[0] == V_SCALAR:  # the common case, inline
                value = val[1]
                problem = value_problem(key, value)
                if problem:
                    self.error(val[2], f"{what}: {problem}")
                    continue
            else:
                value = self.keyword(key, kind, key_offset, val, scope, at, what)
                if value is INVALID:
                    continue
            schema[key] = value
        if members is not None:
            self.members(schema, members, scope, info, at, what)
        if len(self.problems) > count:
            return None
        return schema, flag

    def keyword(self, key: str, kind: int | None, key_offset: int, val: Val, scope: TypeScope,
                at: str, what: str) -> Any:
        """The value of one schema keyword in a record; INVALID after reporting."""
        if kind == VALUE:
            value = self.json(val)
            if value is INVALID:
                return INVALID
            problem = value_problem(key, value)
            if problem:
                self.error(val[2], f"{what}: {problem}")
                return INVALID
            return value
        if kind is None:
            self.error(key_offset, f"{what}: unknown keyword '{key}'"
                                   f"{did_you_mean(key, _KNOWN_KEYWORDS)}")
            return INVALID
        if kind == TYPE:
            self.error(key_offset, f"{what}: write the type as a label, e.g. (x::String)")
            return INVALID
        if kind == PROPERTIES:
            if val[0] != V_MAP or val[1]:
                self.error(val[2], f"{what}: properties are the member nodes of a type "
                                   "pattern; only 'properties: {}' (explicitly none) is written "
                                   "as a keyword")
                return INVALID
            return {}
        if kind == REQUIRED:
            value = self.json(val)  # a list of names
            if value is INVALID:
                return INVALID
            if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
                self.error(val[2], f"{what}: required is true, false or a list of names")
                return INVALID
            return value
        return self.subschemas(key, kind, val, scope, at, what)

    def subschemas(self, key: str, kind: int, val: Val, scope: TypeScope, at: str, what: str
                   ) -> Any:
        """The value of a keyword that holds schemas: one (``items: String``), a list of
        them (``anyOf: [A, B]``) or a map of names to them; INVALID after reporting."""
        if kind == SCHEMA or (kind == ITEMS and val[0] != V_LIST):
            return self.ref(val, scope, what, at, key)
        if kind in (SCHEMA_LIST, ITEMS):
            if val[0] != V_LIST:
                self.error(val[2], f"{what}: {key} takes a list of types, e.g. [A, B]")
                return INVALID
            refs = [self.ref(v, scope, what, at, key, i) for i, v in enumerate(val[1])]
            return INVALID if any(r is INVALID for r in refs) else refs
        # SCHEMA_MAP
        if val[0] != V_MAP:
            self.error(val[2], f"{what}: {key} takes a map of types, e.g. "
                               "{\"^x-\": String}")
            return INVALID
        out = {}
        for name, _, v in val[1]:
            ref = self.ref(v, scope, what, at, key, name)
            if ref is INVALID:
                return INVALID
            out[name] = ref
        return out

    def ref(self, val: Val, scope: TypeScope, what: str, at: str, *parts: str | int) -> Any:
        """A sub-schema written as a type name or ``true``/``false``, at the JSON pointer
        ``at`` + ``parts``."""
        kind, payload, offset = val
        if kind == V_SCALAR and isinstance(payload, bool):
            return payload
        if kind == V_SYMBOL:
            if payload in TYPE_NAMES:
                jtype = TYPE_NAMES[payload]
                return {} if jtype is None else {"type": jtype}
            self.refs[pointer(at, *parts)] = (payload,)
            schema = self.resolve(payload, offset, scope, what)
            return INVALID if schema is None else schema
        self.error(offset, f"{what}: expected a type name (String, Integer, ... or a type "
                           "pattern's name) or true/false")
        return INVALID

    def members(self, schema: JSONSchema, nodes: list[Node], scope: TypeScope,
                info: NodeInfo, at: str, what: str) -> None:
        """Fill ``properties``/``required`` of an object type from its member nodes."""
        jtype = schema.get("type", "object")
        if "object" not in (jtype if isinstance(jtype, list) else [jtype]):
            self.error(info.offset, f"{what}: members (properties) need an Object type: "
                                    "[Name:Object | (field::String)]")
            return
        if "properties" in schema:
            self.error(info.offset, f"{what}: 'properties: {{}}' says there are none, but "
                                    "members follow")
            return
        explicit = "required" in schema
        props: dict[str, JSONSchema] = {}
        required: list[str] = []
        for child in nodes:
            if child.kind_id != K_NODE:
                self.error(child.start_byte, f"{what}: expected a member node (name::Type)")
                continue
            member = self.decoder.info(child)
            name = member.ident
            if name is None:
                self.error(member.offset, f"{what}: a member needs a name: (name::Type)")
                continue
            if name in props:
                self.error(member.ident_offset, f"{what}: duplicate member '{name}'")
                continue
            result = self.typed(member, scope, property_pointer(at, name), member=True,
                                what=f"member '{name}'")
            if result is None:
                continue
            sub, flag = result
            if explicit and flag is not None:
                self.error(member.offset, f"member '{name}': a required flag conflicts with "
                                          "the type's required list")
            props[name] = sub
            if flag if flag is not None else "default" not in sub:
                required.append(name)
        schema["properties"] = props
        if not explicit and required:
            schema["required"] = required


def _size(schema: JSONSchema) -> int:
    """The objects and lists in a schema."""
    count = 0
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            count += 1
            stack.extend(node.values())
        elif isinstance(node, list):
            count += 1
            stack.extend(node)
    return count


def _copy(schema: JSONSchema) -> JSONSchema:
    """A deep copy of a JSON schema (named types are copied into every use)."""
    return {k: _copy_value(v) for k, v in schema.items()}


def _copy_value(value: object) -> Any:
    if isinstance(value, dict):
        return {k: _copy_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_value(v) for v in value]
    return value

