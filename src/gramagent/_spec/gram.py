"""Gram text <-> spec objects, through the reference grammar (tree-sitter-gram).

A gram file holds agents, stand-alone tools that agents reference by name, and named type
patterns shared by its tools::

    [sayHello:Tool {description: "Returns a friendly greeting message for the given name"} |
      (personName::String {default: "world"})==>(::String)
    ]

    [hello_world_agent:Agent {
      description: "A friendly agent",
      instruction: ```
      You are a friendly assistant. When the user greets you, use the sayHello tool.
      ```,
      model: "openai/gpt-4o-mini"
    } |
      sayHello
    ]

Reading parses the text once with tree-sitter (see :mod:`gramagent._spec._gramsyntax` for the
syntax side) and gives it meaning here. Every problem (syntax errors, i.e. ERROR and MISSING
nodes, and semantic ones: unknown types or tools, duplicates, empty names, bad defaults,
missing fields) is collected with its 1-based ``line:column`` into one
:class:`~gramagent.errors.SpecError`. Writing (:func:`to_gram`, in
:mod:`gramagent._spec._gramwrite`) emits the canonical form; reading what it wrote gives
equal spec objects. Reading records, as formatting metadata, the names of the type patterns
a text used, so that writing keeps them; :func:`format_gram` (``gramagent fmt``) also keeps
the text's comments (``docs/format.md``). The signature notation itself is described in
:mod:`gramagent._spec.signature` and ``docs/signatures.md``.
"""

from __future__ import annotations

import codecs
import difflib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from tree_sitter import Node

from gramagent._spec._gramsyntax import (
    K_COMMENT,
    K_ELEMENTS,
    K_NODE,
    K_RECORD,
    K_REFERENCE,
    K_RELATIONSHIP,
    K_RIGHT,
    K_SUBJECT,
    LANGUAGE,
    V_BAD,
    V_JSON,
    V_LIST,
    V_MAP,
    V_SCALAR,
    V_SYMBOL,
    Decoder,
    NodeInfo,
    Val,
    descendants,
    missing_bar,
    parse,
    syntax_problems,
)
from gramagent._spec._gramwrite import collect_comments, write_gram
from gramagent._spec.model import (
    Agent,
    GramDocument,
    JSONSchema,
    ModelRef,
    NamedType,
    Param,
    Signature,
    ToolSpec,
    TypeRefs,
)
from gramagent._spec.signature import (
    ITEMS,
    KEYWORDS,
    PROPERTIES,
    REQUIRED,
    SCHEMA,
    SCHEMA_LIST,
    SCHEMA_MAP,
    TYPE,
    TYPE_NAMES,
    VALUE,
    _pointer,
    canonical_required,
    default_problem,
    format_name,
    keyword_kind,
    type_label,
    value_problem,
)
from gramagent.errors import Diagnostic, SpecError

__all__ = ["LANGUAGE", "Formatted", "format_file", "format_gram", "has_comments", "load_agent",
           "load_file", "load_gram", "read_signature", "to_gram"]

_INVALID: Any = object()
"""Marks a value that could not be read (its problem is already recorded)."""
_AGENT_KEYS = ("description", "instruction", "model")
_TOOL_KEYS = ("description",)
_KNOWN_KEYWORDS = sorted(KEYWORDS - {"type"})


class _Types:
    """A scope of named type patterns (a tool's own, or the file's), resolved on demand."""

    def __init__(self, parent: _Types | None = None, *, shared: bool = False) -> None:
        self.parent = parent
        self.shared = shared
        self.patterns: dict[str, tuple[NodeInfo, Node | None]] = {}
        self.resolved: dict[str, JSONSchema | None] = {}
        self.named: dict[str, NamedType] = {}
        self.resolving: set[str] = set()

    def chain(self) -> Iterator[_Types]:
        scope: _Types | None = self
        while scope is not None:
            yield scope
            scope = scope.parent

    def find(self, name: str) -> _Types | None:
        return next((s for s in self.chain() if name in s.patterns), None)


def _used_types(refs: TypeRefs, scope: _Types, out: dict[str, NamedType]) -> None:
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
            _used_types(named.refs, where, out)


def _previous(node: Node) -> Node | None:
    """The named sibling before ``node``, comments skipped."""
    before = node.prev_named_sibling
    while before is not None and before.kind_id == K_COMMENT:
        before = before.prev_named_sibling
    return before


def _property(at: str, name: str) -> str:
    """The JSON pointer of the property ``name`` of the schema at ``at``."""
    if "~" in name or "/" in name:
        return _pointer(at, "properties", name)
    return f"{at}/properties/{name}"


def _elements(node: Node) -> list[Node]:
    """The element nodes after ``|`` in a subject pattern (comments left out)."""
    for child in node.named_children:
        if child.kind_id == K_ELEMENTS:
            return [c for c in child.named_children if c.kind_id != K_COMMENT]
    return []


def _did_you_mean(word: str, candidates: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(candidates), n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


class _Reader:
    """One parse of one text; gives it meaning and collects every problem, positioned."""

    def __init__(self, src: bytes, file: str | None, *, fast: bool = True) -> None:
        self.decoder = Decoder(src, fast=fast)
        self.file = file
        self.tree = parse(src)
        self.problems: list[tuple[int, str]] = []
        self.refs: dict[str, tuple[str, ...]] = {}
        """Where the signature or type being read names a type pattern (see TypeRefs)."""
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
        for offset, message in sorted(self.problems, key=lambda p: p[0]):
            if (offset, message) not in seen:
                seen.add((offset, message))
                line, column = self.decoder.position(offset)
                diagnostics.append(Diagnostic(message, self.file, line, column))
        raise SpecError(diagnostics)

    # ---- values -----------------------------------------------------------------------------

    def json(self, val: Val) -> Any:
        """A JSON value; _INVALID after reporting what is wrong."""
        kind, payload, offset = val
        if kind in (V_SCALAR, V_JSON):
            return payload
        if kind == V_SYMBOL:
            if payload == "null":
                return None
            self.error(offset, f"unexpected name '{payload}': write a string as \"{payload}\"")
            return _INVALID
        if kind == V_LIST:
            items = [self.json(v) for v in payload]
            return _INVALID if any(i is _INVALID for i in items) else items
        if kind == V_MAP:
            out = {}
            for key, _, v in payload:
                item = self.json(v)
                if item is _INVALID:
                    return _INVALID
                out[key] = item
            return out
        self.error(offset, payload)  # V_BAD
        return _INVALID

    def string(self, val: Val) -> str | None:
        """A string value, or None when ``val`` is not one (nothing reported)."""
        kind, payload, _ = val
        if kind in (V_SCALAR, V_JSON) and isinstance(payload, str):
            return payload
        if kind == V_BAD:
            self.error(val[2], payload)
        return None

    def strings(self, info: NodeInfo, what: str, allowed: tuple[str, ...]
                ) -> tuple[dict[str, tuple[str, int]], set[str]]:
        """The string properties of an agent or tool record, and every key present (a
        misspelt key counts as the allowed one it is close to: it is reported once, as
        misspelt, not again as missing)."""
        out: dict[str, tuple[str, int]] = {}
        keys: set[str] = set()
        for key, key_offset, val in info.entries or ():
            if key in keys:
                self.error(key_offset, f"{what}: duplicate key '{key}'")
                continue
            keys.add(key)
            if key not in allowed:
                close = difflib.get_close_matches(key, allowed, n=1)
                self.error(key_offset, f"{what}: unknown property '{key}' (expected "
                                       f"{', '.join(allowed)}){_did_you_mean(key, allowed)}")
                keys.update(close)
                continue
            text = self.string(val)
            if text is None:
                if val[0] != V_BAD:
                    self.error(val[2], f"{what}: {key} must be a string")
                continue
            out[key] = (text, val[2])
        return out, keys

    def required_name(self, info: NodeInfo, what: str) -> str | None:
        """The identifier of a pattern that must have a non-empty one."""
        if info.ident is None:
            self.error(info.offset, f"{what} needs a name, e.g. [name:{what.capitalize()} ...]")
            return None
        if not info.ident.strip():
            self.error(info.ident_offset, f"{what} name must not be empty")
            return None
        return info.ident

    # ---- types ------------------------------------------------------------------------------

    def misspelt_kind(self, info: NodeInfo, type_names: set[str | None]) -> bool:
        """Report a top-level label that names no type but is close to Agent or Tool
        (``[a:Agnet ...]``)."""
        if len(info.labels) != 1 or info.labels[0] in TYPE_NAMES or info.labels[0] in type_names:
            return False
        label = info.labels[0]
        close = difflib.get_close_matches(label, ["Agent", "Tool", *TYPE_NAMES], n=1)
        if not close or close[0] not in ("Agent", "Tool"):
            return False
        self.error(info.label_offsets[0], f"unknown label '{label}'; did you mean "
                                          f"'{close[0]}'? (a top-level pattern is an agent "
                                          "[name:Agent ...], a tool [name:Tool ...] or a type "
                                          "pattern [Name:Object ...])")
        return True

    def collect_type(self, scope: _Types, node: Node) -> None:
        """Register a type pattern ``[Name:Type {...} | members]`` in ``scope``."""
        info = self.decoder.info(node)
        elements = _elements(node)
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
            scope.patterns[name] = (info, node if elements else None)

    def resolve_all(self, scope: _Types) -> None:
        """Check every type pattern of a scope, used or not."""
        for name, (info, _) in scope.patterns.items():
            if name not in scope.resolved:
                self.resolve(name, info.ident_offset, scope, f"type '{name}'")

    def resolve(self, name: str, offset: int, scope: _Types, what: str) -> JSONSchema | None:
        """The schema of a named type (a fresh copy), or None after reporting a problem."""
        where = scope.find(name)
        if where is None:
            known = [*TYPE_NAMES, *(n for s in scope.chain() for n in s.patterns)]
            hint = _did_you_mean(name, known)
            self.error(offset, f"{what}: unknown type '{name}'" + (hint or (
                " (expected a built-in type: String, Integer, Number, Boolean, Array, Object, "
                f"Null or Any; or a type pattern's name: define [{name}:Object | ...])")))
            return None
        if name not in where.resolved:
            if name in where.resolving:
                self.error(offset, f"{what}: type '{name}' refers to itself; recursive types "
                                   "cannot be written as JSON Schema without $ref")
                return None
            where.resolving.add(name)
            info, node = where.patterns[name]
            members = _elements(node) if node is not None else None
            outer, self.refs = self.refs, {}
            result = self.typed(info, where, "", member=False, members=members,
                                what=f"type '{name}'")
            refs, self.refs = self.refs, outer
            where.resolving.discard(name)
            where.resolved[name] = None if result is None else result[0]
            if result is not None:
                where.named[name] = NamedType(name=name, schema=result[0], refs=refs,
                                              shared=where.shared)
        schema = where.resolved[name]
        return None if schema is None else _copy(schema)

    def base_type(self, info: NodeInfo, scope: _Types, at: str, what: str
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

    def typed(self, info: NodeInfo, scope: _Types, at: str, *, member: bool,
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
        default_offset = info.offset
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
                if value is _INVALID:
                    continue
            schema[key] = value
            if key == "default":
                default_offset = val[2]
        if members is not None:
            self.members(schema, members, scope, info, at, what)
        if len(self.problems) > count:
            return None
        problem = default_problem(schema)
        if problem:
            if schema["default"] is None:
                problem += f" (to allow null, write the type as {type_label(schema['type'])}:Null)"
            self.error(default_offset, f"{what}: {problem}")
            return None
        return schema, flag

    def keyword(self, key: str, kind: int | None, key_offset: int, val: Val, scope: _Types,
                at: str, what: str) -> Any:
        """The value of one schema keyword in a record; _INVALID after reporting."""
        if kind == VALUE:
            value = self.json(val)
            if value is _INVALID:
                return _INVALID
            problem = value_problem(key, value)
            if problem:
                self.error(val[2], f"{what}: {problem}")
                return _INVALID
            return value
        if kind is None:
            self.error(key_offset, f"{what}: unknown keyword '{key}'"
                                   f"{_did_you_mean(key, _KNOWN_KEYWORDS)}")
            return _INVALID
        if kind == TYPE:
            self.error(key_offset, f"{what}: write the type as a label, e.g. (x::String)")
            return _INVALID
        if kind == SCHEMA or (kind == ITEMS and val[0] != V_LIST):
            return self.ref(val, scope, what, at, key)
        if kind in (SCHEMA_LIST, ITEMS):
            if val[0] != V_LIST:
                self.error(val[2], f"{what}: {key} takes a list of types, e.g. [A, B]")
                return _INVALID
            refs = [self.ref(v, scope, what, at, key, i) for i, v in enumerate(val[1])]
            return _INVALID if any(r is _INVALID for r in refs) else refs
        if kind == SCHEMA_MAP:
            if val[0] != V_MAP:
                self.error(val[2], f"{what}: {key} takes a map of types, e.g. "
                                   "{\"^x-\": String}")
                return _INVALID
            out = {}
            for name, _, v in val[1]:
                ref = self.ref(v, scope, what, at, key, name)
                if ref is _INVALID:
                    return _INVALID
                out[name] = ref
            return out
        if kind == PROPERTIES:
            if val[0] != V_MAP or val[1]:
                self.error(val[2], f"{what}: properties are the member nodes of a type "
                                   "pattern; only 'properties: {}' (explicitly none) is written "
                                   "as a keyword")
                return _INVALID
            return {}
        value = self.json(val)  # REQUIRED, as a list of names
        if value is _INVALID:
            return _INVALID
        if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
            self.error(val[2], f"{what}: required is true, false or a list of names")
            return _INVALID
        return value

    def ref(self, val: Val, scope: _Types, what: str, at: str, *parts: str | int) -> Any:
        """A sub-schema written as a type name or ``true``/``false``, at the JSON pointer
        ``at`` + ``parts``."""
        kind, payload, offset = val
        if kind == V_SCALAR and isinstance(payload, bool):
            return payload
        if kind == V_SYMBOL:
            if payload in TYPE_NAMES:
                jtype = TYPE_NAMES[payload]
                return {} if jtype is None else {"type": jtype}
            self.refs[_pointer(at, *parts)] = (payload,)
            schema = self.resolve(payload, offset, scope, what)
            return _INVALID if schema is None else schema
        self.error(offset, f"{what}: expected a type name (String, Integer, ... or a type "
                           "pattern's name) or true/false")
        return _INVALID

    def members(self, schema: JSONSchema, elements: list[Node], scope: _Types,
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
        for child in elements:
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
            result = self.typed(member, scope, _property(at, name), member=True,
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

    # ---- signatures -------------------------------------------------------------------------

    def signature(self, path: Node, scope: _Types) -> Signature | None:
        """A tool signature from a node or relationship pattern."""
        count = len(self.problems)
        decoded = self.decoder.path(path)
        if decoded is None:
            return None
        self.refs = {}
        infos, arrows = decoded
        for arrow in arrows:
            if isinstance(arrow, int):
                continue
            if arrow.kind_id != K_RIGHT:
                self.error(arrow.start_byte, "a signature reads left to right: expected -->, "
                                             f"==> or ~~>, not {self.decoder.text(arrow)}")
            elif arrow.named_child_count:
                self.error(arrow.start_byte, "an arrow in a signature carries no subject: "
                                             "write ==>")
        result = infos.pop()
        keywords: JSONSchema = {}
        if infos and infos[0].ident is None and not infos[0].labels:
            keywords = self.arguments(infos.pop(0), scope)
        params: list[Param] = []
        flagged: list[int] = []
        seen: dict[str, int] = {}
        for info in infos:
            name = info.ident
            if name is None:
                self.error(info.offset, "a parameter needs a name: (name::Type)")
                continue
            if not name:
                self.error(info.ident_offset, "parameter name must not be empty")
                continue
            if name in seen:
                self.error(info.ident_offset, f"duplicate parameter '{name}' (first at "
                                              f"{self.where(seen[name])})")
                continue
            seen[name] = info.ident_offset
            typed = self.typed(info, scope, _property("", name), member=True,
                               what=f"parameter '{name}'")
            if typed is None:
                continue
            sub, flag = typed
            if flag is not None:
                flagged.append(info.offset)
            required = flag if flag is not None else "default" not in sub
            params.append(Param(name=name, schema=sub, required=required))
        returns = self.result(result, scope, alone=not infos)
        if "required" in keywords:
            listed = keywords["required"]
            for offset in flagged:
                self.error(offset, "a required flag conflicts with the required list of the "
                                   "arguments node")
            params = [Param(name=p.name, schema=p.schema, required=p.name in listed)
                      for p in params]
            if listed and listed == canonical_required(params):
                del keywords["required"]
        refs = self.refs
        if not refs and not scope.patterns:  # the common case: no named types at all
            if len(self.problems) > count or returns is None:
                return None
            return Signature(params=tuple(params), returns=returns, keywords=keywords,
                             type_refs=refs)
        self.resolve_all(scope)
        if len(self.problems) > count or returns is None:
            return None
        named = {n: scope.named[n] for n in scope.patterns if n in scope.named}
        if any(s.shared and s.patterns for s in scope.chain()):
            for own in list(named.values()):
                _used_types(own.refs, scope, named)
            _used_types(refs, scope, named)
        return Signature(params=tuple(params), returns=returns, keywords=keywords,
                         named_types=tuple(named.values()), type_refs=refs)

    def arguments(self, info: NodeInfo, scope: _Types) -> JSONSchema:
        """Keywords of the arguments object, from the leading unnamed node's record."""
        out: JSONSchema = {}
        for key, key_offset, val in info.entries or ():
            if key in out:
                self.error(key_offset, f"arguments: duplicate key '{key}'")
                continue
            kind = keyword_kind(key)
            if kind == PROPERTIES:
                self.error(key_offset, "arguments: the parameters are the properties")
                continue
            if kind == REQUIRED and val[0] == V_SCALAR and isinstance(val[1], bool):
                self.error(key_offset, "arguments: required takes a list of parameter names")
                continue
            value = self.keyword(key, kind, key_offset, val, scope, "", "arguments")
            if value is not _INVALID:
                out[key] = value
        return out

    def result(self, info: NodeInfo, scope: _Types, *, alone: bool = False
               ) -> JSONSchema | None:
        if info.ident is not None:
            if alone:
                node = f"({format_name(info.ident)}::{':'.join(info.labels) or 'String'})"
                self.error(info.offset, "a signature ends with its result, an unnamed node: "
                                        f"write {node}==>(::String)")
            else:
                self.error(info.ident_offset, "the result node takes no name: write "
                                              "(::String)")
            return None
        typed = self.typed(info, scope, "returns", member=False, what="the result")
        return None if typed is None else typed[0]

    # ---- tools and agents -------------------------------------------------------------------

    def tool(self, node: Node, info: NodeInfo, file_types: _Types) -> ToolSpec | None:
        count = len(self.problems)
        name = self.required_name(info, "tool")
        what = f"tool '{name}'" if name else "tool"
        props, keys = self.strings(info, what, _TOOL_KEYS)
        description = props.get("description")
        if description is None:
            if "description" not in keys:
                self.error(info.offset, f"{what}: missing description")
        elif not description[0].strip():
            self.error(description[1], f"{what}: description must not be empty")
        scope = _Types(file_types)
        path: Node | None = None
        for child in _elements(node):
            kind = child.kind_id
            if kind in (K_NODE, K_RELATIONSHIP):
                if path is not None:
                    self.error(child.start_byte, f"{what}: a tool has one signature (found a "
                                                 "second path)")
                else:
                    path = child
            elif kind == K_SUBJECT:
                self.collect_type(scope, child)
            else:
                self.error(child.start_byte, f"{what}: expected a signature like "
                                             "(x::String)==>(::String) or a type pattern")
        if path is None:
            self.error(info.offset, f"{what}: missing signature, e.g. [{name or 'name'}:Tool "
                                    "{...} | ()==>(::String)]")
            return None
        sig = self.signature(path, scope)
        self.resolve_all(scope)
        if sig is None or len(self.problems) > count or name is None or description is None:
            return None
        return ToolSpec.create(name, description[0], sig)

    def agent(self, node: Node, info: NodeInfo, tools: dict[str, ToolSpec | None],
              file_types: _Types) -> Agent | None:
        count = len(self.problems)
        name = self.required_name(info, "agent")
        what = f"agent '{name}'" if name else "agent"
        props, keys = self.strings(info, what, _AGENT_KEYS)
        description = props.get("description")
        if description is not None and not description[0].strip():
            self.error(description[1], f"{what}: description must not be empty (leave it out "
                                       "instead)")
        instruction = props.get("instruction")
        if instruction is None:
            if "instruction" not in keys:
                self.error(info.offset, f"{what}: missing instruction")
        elif not instruction[0].strip():
            self.error(instruction[1], f"{what}: instruction must not be empty")
        model: ModelRef | None = None
        if "model" in props:
            try:
                model = ModelRef.parse(props["model"][0])
            except SpecError as exc:
                self.error(props["model"][1], f"{what}: {exc.diagnostics[0].message}")
        elif "model" not in keys:
            self.error(info.offset, f"{what}: missing model, e.g. model: \"openai/gpt-4o-mini\"")
        specs: list[ToolSpec] = []
        seen: dict[str, int] = {}
        for child in _elements(node):
            kind = child.kind_id
            if kind == K_REFERENCE:
                tool_name = self.decoder.name(child)
                offset = child.start_byte
                if tool_name not in tools:
                    self.error(offset, f"{what}: unknown tool '{tool_name}'" + (
                        _did_you_mean(tool_name, tools) or " (define it as a top-level "
                        f"[{format_name(tool_name)}:Tool {{...}} | ...] pattern)"))
                    continue
                spec = tools[tool_name]
            elif kind == K_SUBJECT:
                tool_info = self.decoder.info(child)
                if tool_info.labels != ("Tool",):
                    self.error(child.start_byte, f"{what}: expected a tool pattern "
                                                 "[name:Tool {...} | signature] or a tool name")
                    continue
                spec = self.tool(child, tool_info, file_types)
                tool_name = tool_info.ident or ""
                offset = tool_info.ident_offset if tool_info.ident is not None else child.start_byte
            else:
                self.error(child.start_byte, f"{what}: expected a tool pattern [name:Tool "
                                             "{...} | signature] or a tool name")
                continue
            if tool_name in seen:
                self.error(offset, f"{what}: duplicate tool '{tool_name}' (first at "
                                   f"{self.where(seen[tool_name])})")
                continue
            seen[tool_name] = offset
            if spec is not None:
                specs.append(spec)
        if len(self.problems) > count or name is None or instruction is None or model is None:
            return None
        return Agent(name=name, description=None if description is None else description[0],
                     model=model, instruction=instruction[0], tools=tuple(specs))

    def document(self) -> GramDocument:
        agents_found: list[tuple[Node, NodeInfo]] = []
        tools_found: list[tuple[Node, NodeInfo]] = []
        file_types = _Types(shared=True)
        types_found: list[tuple[Node, NodeInfo]] = []
        broken: set[str] = set()
        root = self.tree.root_node
        for child in root.named_children if not root.is_error else ():
            kind = child.kind_id
            if kind == K_COMMENT or child.is_error:
                continue
            if kind != K_SUBJECT:
                if kind == K_RECORD:
                    self.error(child.start_byte, "a file-level record is not part of an agent "
                                                 "file")
                elif missing_bar(_previous(child)):
                    pass  # the elements of a pattern that lacks its '|' (reported there)
                elif not child.has_error:
                    self.error(child.start_byte, "expected an agent [name:Agent {...} | tools], "
                                                 "a tool [name:Tool {...} | signature] or a type "
                                                 "pattern at the top level")
                continue
            info = self.decoder.info(child)
            if child.has_error:
                if info.ident is not None:
                    broken.add(info.ident)
                continue
            if info.labels == ("Agent",):
                agents_found.append((child, info))
            elif info.labels == ("Tool",):
                tools_found.append((child, info))
            elif info.labels:
                types_found.append((child, info))
            else:
                self.error(child.start_byte, "a top-level pattern needs a label: "
                                             "[name:Agent ...], [name:Tool ...] or "
                                             "[Name:Object ...]")
        type_names = {info.ident for _, info in types_found}
        for node, info in types_found:
            if not self.misspelt_kind(info, type_names):
                self.collect_type(file_types, node)
        tools: dict[str, ToolSpec | None] = dict.fromkeys(broken)
        first_at: dict[str, int] = {}
        standalone: list[ToolSpec] = []
        for node, info in tools_found:
            spec = self.tool(node, info, file_types)
            if info.ident is None:
                continue
            if info.ident in first_at:
                self.error(info.ident_offset, f"duplicate tool '{info.ident}' (first defined at "
                                              f"{self.where(first_at[info.ident])})")
                continue
            first_at[info.ident] = info.ident_offset
            tools[info.ident] = spec
            if spec is not None:
                standalone.append(spec)
        self.resolve_all(file_types)
        agents: list[Agent] = []
        agent_at: dict[str, int] = {}
        for node, info in agents_found:
            agent = self.agent(node, info, tools, file_types)
            if info.ident is not None:
                if info.ident in agent_at:
                    self.error(info.ident_offset, f"duplicate agent '{info.ident}' (first "
                                                  f"defined at {self.where(agent_at[info.ident])})")
                    continue
                agent_at[info.ident] = info.ident_offset
            if agent is not None:
                agents.append(agent)
        self.raise_problems()
        types = tuple(file_types.named[n] for n in file_types.patterns if n in file_types.named)
        return GramDocument(agents=tuple(agents), tools=tuple(standalone), types=types)

    def lone_signature(self) -> Signature:
        scope = _Types()
        paths = []
        root = self.tree.root_node
        for child in root.named_children if not root.is_error else ():
            kind = child.kind_id
            if kind == K_COMMENT or child.has_error:
                continue
            if kind in (K_NODE, K_RELATIONSHIP):
                paths.append(child)
            elif kind == K_SUBJECT:
                self.collect_type(scope, child)
            else:
                self.error(child.start_byte, "expected a signature like "
                                             "(x::String)==>(::String), optionally followed by "
                                             "type patterns")
        sig = None
        if len(paths) > 1:
            self.error(paths[1].start_byte, "expected one signature path (found a second one)")
        elif not paths and not self.problems:
            self.error(0, "expected a signature like (x::String)==>(::String)")
        elif paths:
            sig = self.signature(paths[0], scope)
        self.resolve_all(scope)
        self.raise_problems()
        if sig is None:  # pragma: no cover - problems were raised above
            raise SpecError("invalid signature")
        return sig


def _copy(schema: JSONSchema) -> JSONSchema:
    """A deep copy of a JSON schema (named types are copied into every use)."""
    return {k: _copy_value(v) for k, v in schema.items()}


def _copy_value(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_value(v) for v in value]
    return value


# --------------------------------------------------------------------------------------------
# Public reading API
# --------------------------------------------------------------------------------------------

def _encode(text: str, file: str | None) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        line = text.count("\n", 0, exc.start) + 1
        column = exc.start - (text.rfind("\n", 0, exc.start) + 1) + 1
        raise SpecError([Diagnostic("text holds a character that is not valid Unicode "
                                    "(a lone surrogate)", file, line, column)]) from None


def load_gram(text: str | bytes, *, file: str | None = None) -> GramDocument:
    """Read the agents and stand-alone tools of a gram text.

    Args:
        text: The gram text (``bytes`` are read as UTF-8).
        file: The file name to put in error positions.

    Raises:
        SpecError: Every syntax and semantic problem, each as ``file:line:col: message``.
    """
    src = text if isinstance(text, bytes) else _encode(text, file)
    return _Reader(src, file).document()


def read_signature(text: str, *, file: str | None = None) -> Signature:
    """Read a signature: one gram path, optionally followed by type patterns."""
    return _Reader(_encode(text, file), file).lone_signature()


def load_file(path: str | os.PathLike[str]) -> GramDocument:
    """Read a ``.gram`` file (UTF-8).

    Raises:
        SpecError: The file cannot be read or decoded, or its gram has problems.
    """
    return load_gram(_read_source(path), file=str(path))


def _read_source(path: str | os.PathLike[str]) -> bytes:
    """The bytes of a UTF-8 file, without a byte order mark; SpecError if unreadable."""
    name = str(path)
    try:
        src = Path(path).read_bytes()
    except OSError as exc:
        raise SpecError([Diagnostic(f"cannot read the file: {exc.strerror or exc}", name)]) \
            from None
    if src.startswith(codecs.BOM_UTF8):
        src = src[len(codecs.BOM_UTF8):]
    try:
        src.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = src.count(b"\n", 0, exc.start) + 1
        start = src.rfind(b"\n", 0, exc.start) + 1
        column = len(src[start: exc.start].decode("utf-8", "replace")) + 1
        raise SpecError([Diagnostic("the file is not valid UTF-8", name, line, column)]) \
            from None
    return src


def load_agent(source: str | os.PathLike[str], name: str | None = None) -> Agent:
    """Load one agent from a gram file or gram text.

    Args:
        source: A path (``os.PathLike``, or a string without ``[``) or gram text.
        name: The agent to load; may be left out when there is exactly one.

    Raises:
        SpecError: The gram has problems, or the agent is missing or ambiguous.
    """
    text = isinstance(source, str) and "[" in source
    document = load_gram(source) if text else load_file(source)  # type: ignore[arg-type]
    try:
        return document.agent(name)
    except SpecError as exc:
        if text:
            raise
        # Name the file: "examples/x.gram: no agent named 'y'; the file declares: ..."
        raise SpecError([Diagnostic(d.message, file=os.fspath(source), line=d.line,
                                    column=d.column) for d in exc.diagnostics]) from None


def has_comments(text: str | bytes) -> bool:
    """Whether a gram text holds ``//`` comments (which :func:`to_gram` of what it reads
    cannot keep; :func:`format_gram` keeps them)."""
    src = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    if b"//" not in src:
        return False
    return any(n.kind_id == K_COMMENT for n in descendants(parse(src).root_node))


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------

def to_gram(obj: Agent | ToolSpec | GramDocument) -> str:
    """The canonical gram text of an agent, a tool spec or a whole document.

    In a document, file-level type patterns come first, then stand-alone tools, then agents;
    an agent's tool equal to a stand-alone one is written as a reference to it. Type
    patterns keep the names they were read with, and file-level ones stay at file level
    (an agent's too); a tool spec is written whole, its type patterns inside it. Reading
    the text back gives an equal object. For a text's comments, see :func:`format_gram`.
    """
    return write_gram(obj)


class Formatted(NamedTuple):
    """What :func:`format_gram` gives: the canonical text and the comments it could not keep."""

    text: str
    """The canonical gram text, with the comments that could be placed."""
    dropped: tuple[Diagnostic, ...]
    """One positioned diagnostic per comment left out, saying where it was."""


def format_gram(text: str | bytes, *, file: str | None = None) -> Formatted:
    """The canonical form of a gram text (what ``gramagent fmt`` prints), keeping comments.

    Each comment stays with the element it precedes (or ends the line of), wherever the
    canonical order puts it: between top-level patterns, between the elements after ``|``
    of an agent, tool or type pattern, between the nodes of a signature, and inside records
    and nodes (a record holding a comment is written one entry a line). A comment elsewhere
    inside a pattern or node goes with the nearest element after it; one whose element the
    canonical form leaves out goes with the next element written (``docs/format.md``).
    ``dropped`` lists any comment that still found no place.

    Raises:
        SpecError: The text has problems (nothing is formatted).
    """
    src = text if isinstance(text, bytes) else _encode(text, file)
    reader = _Reader(src, file)
    document = reader.document()
    if b"//" not in src:
        return Formatted(write_gram(document), ())
    comments = collect_comments(reader.tree, reader.decoder)
    out = write_gram(document, comments)
    stray = comments.stray + [(n.offset, "where the formatter has no place for it")
                              for notes in comments.notes.values() for n in notes.values()]
    dropped = []
    for offset, where in sorted(stray):
        line, column = reader.decoder.position(offset)
        dropped.append(Diagnostic(f"a comment {where} cannot be kept", file, line, column))
    return Formatted(out, tuple(dropped))


def format_file(path: str | os.PathLike[str]) -> Formatted:
    """:func:`format_gram` of a ``.gram`` file (UTF-8).

    Raises:
        SpecError: The file cannot be read or decoded, or its gram has problems.
    """
    return format_gram(_read_source(path), file=str(path))
