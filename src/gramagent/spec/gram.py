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

Reading parses the text once with tree-sitter and walks the tree. Every problem (syntax errors,
i.e. ERROR and MISSING nodes, and semantic ones: unknown types or tools, duplicates, empty
names, bad defaults, missing fields) is collected with its 1-based ``line:column`` into one
:class:`~gramagent.errors.SpecError`. Writing (:func:`to_gram`) emits the canonical form;
reading what it wrote gives equal spec objects. The signature notation itself is described in
:mod:`gramagent.spec.signature`.
"""

from __future__ import annotations

import codecs
import difflib
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import orjson
import tree_sitter_gram
from tree_sitter import Language, Node, Parser

from gramagent.errors import Diagnostic, SpecError
from gramagent.spec.model import (
    Agent,
    GramDocument,
    JSONSchema,
    ModelRef,
    Param,
    Signature,
    ToolSpec,
)
from gramagent.spec.signature import (
    ITEMS,
    PROPERTIES,
    REQUIRED,
    SCHEMA,
    SCHEMA_LIST,
    SCHEMA_MAP,
    TYPE,
    TYPE_NAMES,
    VALUE,
    SignatureWriter,
    canonical_required,
    default_problem,
    format_name,
    keyword_kind,
    quote_string,
    value_problem,
)

__all__ = ["load_agent", "load_file", "load_gram", "read_signature", "to_gram"]

LANGUAGE = Language(tree_sitter_gram.language())
"""The gram grammar (tree-sitter-gram)."""

_ID = LANGUAGE.id_for_node_kind
K_SUBJECT = _ID("subject_pattern", True)
K_NODE = _ID("node_pattern", True)
K_RELATIONSHIP = _ID("relationship_pattern", True)
K_REFERENCE = _ID("pattern_reference", True)
K_ELEMENTS = _ID("subject_pattern_elements", True)
K_RECORD = _ID("record", True)
K_PROPERTY = _ID("record_property", True)
K_LABELS = _ID("labels", True)
K_SYMBOL = _ID("symbol", True)
K_QUOTED_NAME = _ID("quoted_name", True)
K_DQ_NAME = _ID("double_quoted_name", True)
K_INTEGER = _ID("integer", True)
K_DECIMAL = _ID("decimal", True)
K_HEX = _ID("hexadecimal", True)
K_OCTAL = _ID("octal", True)
K_MEASUREMENT = _ID("measurement", True)
K_STRING = _ID("string_literal", True)
K_TAGGED = _ID("tagged_string", True)
K_BOOLEAN = _ID("boolean_literal", True)
K_ARRAY = _ID("array", True)
K_MAP = _ID("map", True)
K_RANGE = _ID("range", True)
K_COMMENT = _ID("comment", True)
K_RIGHT = _ID("right_arrow", True)
_ARROWS = {K_RIGHT, _ID("left_arrow", True), _ID("undirected_arrow", True),
           _ID("bidirectional_arrow", True)}
_IDENTIFIERS = {K_SYMBOL, K_QUOTED_NAME, K_INTEGER}
_KEYS = {K_SYMBOL, K_QUOTED_NAME, K_DQ_NAME}

_ESCAPES = {'"': '"', "'": "'", "`": "`", "\\": "\\", "/": "/", "b": "\b", "f": "\f",
            "n": "\n", "r": "\r", "t": "\t"}
_ESCAPE_RE = re.compile(r"\\(.)", re.S)
_INVALID: Any = object()
"""Marks a value that could not be read (its problem is already recorded)."""

_AGENT_KEYS = ("description", "instruction", "model")
_TOOL_KEYS = ("description",)


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    return _ESCAPE_RE.sub(lambda m: _ESCAPES.get(m.group(1), m.group(0)), text)


def dedent_fenced(content: str) -> str:
    """The text of a fenced string: the closing fence's line dropped, common indent removed.

    ``content`` runs from after the opening fence's newline to the closing fence.
    """
    lines = content.split("\n")
    if len(lines) > 1 and not lines[-1].strip(" \t"):
        lines.pop()
    indents = [len(line) - len(line.lstrip(" \t")) for line in lines if line.strip(" \t")]
    if not indents:
        return "\n".join(line.lstrip(" \t") for line in lines)
    first = next(line for line in lines if line.strip(" \t"))
    prefix = first[: min(indents)]
    for line in lines:
        if line.strip(" \t"):
            while not line.startswith(prefix):
                prefix = prefix[:-1]
    width = len(prefix)
    return "\n".join(line[width:] if line.startswith(prefix) else line.lstrip(" \t")
                     for line in lines)


class _Parts(NamedTuple):
    """The pieces of a subject or node pattern (None when absent)."""

    node: Node
    ident: Node | None
    labels: Node | None
    record: Node | None
    elements: Node | None


def _parts(node: Node) -> _Parts:
    ident = labels = record = elements = None
    for child in node.children:
        kind = child.kind_id
        if kind in _IDENTIFIERS:
            ident = child
        elif kind == K_LABELS:
            labels = child
        elif kind == K_RECORD:
            record = child
        elif kind == K_ELEMENTS:
            elements = child
    return _Parts(node, ident, labels, record, elements)


class _Types:
    """A scope of named type patterns (a tool's own, or the file's), resolved on demand."""

    def __init__(self, parent: _Types | None = None) -> None:
        self.parent = parent
        self.patterns: dict[str, _Parts] = {}
        self.resolved: dict[str, JSONSchema | None] = {}
        self.resolving: set[str] = set()

    def names(self) -> list[str]:
        scope: _Types | None = self
        out: list[str] = []
        while scope is not None:
            out.extend(scope.patterns)
            scope = scope.parent
        return out


class _Reader:
    """One parse of one text; collects every problem, positioned."""

    def __init__(self, src: bytes, file: str | None) -> None:
        self.src = src
        self.file = file
        self.problems: list[tuple[int, int, int, str]] = []
        self.tree = Parser(LANGUAGE).parse(src)

    # ---- problems ---------------------------------------------------------------------------

    def error(self, node: Node, message: str) -> None:
        row, col = node.start_point
        self.problems.append((node.start_byte, row, col, message))

    def raise_problems(self) -> None:
        if not self.problems:
            return
        seen = set()
        diagnostics = []
        for offset, row, col, message in sorted(self.problems, key=lambda p: p[0]):
            if (offset, message) in seen:
                continue
            seen.add((offset, message))
            chars = len(self.src[offset - col: offset].decode("utf-8", "replace"))
            diagnostics.append(Diagnostic(message, self.file, row + 1, chars + 1))
        raise SpecError(diagnostics)

    def position(self, node: Node) -> str:
        row, col = node.start_point
        offset = node.start_byte
        chars = len(self.src[offset - col: offset].decode("utf-8", "replace"))
        return f"{row + 1}:{chars + 1}"

    # ---- syntax -----------------------------------------------------------------------------

    def syntax_errors(self) -> None:
        stack = [self.tree.root_node]
        while stack:
            node = stack.pop()
            if node.is_missing:
                self.missing(node)
            elif node.is_error:
                self.unexpected(node)
            elif node.has_error:
                stack.extend(reversed(node.children))

    def missing(self, node: Node) -> None:
        kind = node.type
        parent = node.parent
        if kind in ("]", ")", "}") and parent is not None:
            opener = {"]": "[", ")": "(", "}": "{"}[kind]
            for sibling in parent.children:
                if sibling.type == opener:
                    self.error(node, f"expected '{kind}' to close the '{opener}' at "
                                     f"{self.position(sibling)}")
                    return
            self.error(node, f"expected '{kind}'")
        elif parent is not None and parent.kind_id == K_ARRAY:
            self.error(node, "expected a value: gram lists cannot be empty "
                             "(write json`[]` for an empty list)")
        elif parent is not None and parent.kind_id in (K_PROPERTY, _ID("map_entry", True)):
            self.error(node, "expected a value after ':'")
        else:
            self.error(node, f"expected {_friendly(kind)}")

    def unexpected(self, node: Node) -> None:
        openers: list[Node] = []
        quote: Node | None = None
        first: Node | None = None
        for leaf in _leaves(node):
            kind = leaf.type
            if first is None:
                first = leaf
            if quote is not None:
                if kind == quote.type:
                    quote = None
                continue
            if kind in ('"', "'", "`"):
                quote = leaf
            elif kind in ("[", "(", "{"):
                openers.append(leaf)
            elif kind in ("]", ")", "}") and openers and _CLOSER[openers[-1].type] == kind:
                openers.pop()
        if quote is not None:
            self.error(quote, f"unterminated string: expected a closing {quote.type} on the "
                              "same line")
            return
        if openers and node.end_byte >= len(self.src.rstrip()):
            for opener in openers:
                self.error(opener, f"'{opener.type}' is never closed: expected "
                                   f"'{_CLOSER[opener.type]}' before the end of the text")
            return
        leaf = first or node
        text = self.src[leaf.start_byte: min(leaf.end_byte, leaf.start_byte + 30)]
        excerpt = text.decode("utf-8", "replace").split("\n")[0] or node.type
        if excerpt.startswith("\\"):
            self.error(leaf, "invalid escape in a string: gram strings allow \\\" \\' \\` "
                             "\\\\ \\/ \\b \\f \\n \\r \\t (write other characters as they are)")
            return
        if excerpt.startswith("\0"):
            self.error(leaf, "a NUL character cannot appear in gram text")
            return
        message = f"unexpected '{excerpt}'"
        expected = self.expected(node)
        if expected:
            message += f": expected {expected}"
        self.error(leaf, message)

    def expected(self, error: Node) -> str | None:
        """What the grammar accepts where ``error`` starts (None when it says nothing useful)."""
        before = _leaf_before(error)
        if before is None or before.next_parse_state == 0:
            return None
        it = LANGUAGE.lookahead_iterator(before.next_parse_state)
        if it is None:
            return None
        closer = None
        ancestor = error.parent
        while ancestor is not None and closer is None:
            closer = {K_RECORD: "}", K_MAP: "}", K_NODE: ")", K_SUBJECT: "]",
                      K_ARRAY: "]"}.get(ancestor.kind_id)
            ancestor = ancestor.parent
        names: list[str] = []
        for symbol in it.symbols():
            if not LANGUAGE.node_kind_is_visible(symbol):
                continue
            kind = LANGUAGE.node_kind_for_id(symbol) or ""
            if kind in ("]", ")", "}") and closer is not None and kind != closer:
                continue
            name = _friendly(kind)
            if name and name not in names:
                names.append(name)
        if not names or len(names) > 6:
            return None
        return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]

    # ---- scalars ----------------------------------------------------------------------------

    def text(self, node: Node) -> str:
        return self.src[node.start_byte: node.end_byte].decode()

    def name(self, node: Node) -> str:
        """An identifier, key or label: symbol, integer, `quoted` or "quoted" name."""
        raw = self.src[node.start_byte: node.end_byte].decode()
        if node.kind_id in (K_QUOTED_NAME, K_DQ_NAME):
            return _unescape(raw[1:-1])
        return raw

    def string(self, node: Node) -> str | None:
        """The text of a string literal or tagged string; None if ``node`` is not one."""
        kind = node.kind_id
        if kind == K_STRING:
            raw = self.src[node.start_byte: node.end_byte]
            if raw.startswith(b"```"):
                return dedent_fenced(self.content(node))
            return _unescape(raw[1:-1].decode())
        if kind == K_TAGGED:
            tag, body = self.tagged(node)
            if tag == "json":
                value = self.json(node, body)
                if value is _INVALID:
                    return ""
                if not isinstance(value, str):
                    self.error(node, "expected a string, not a JSON "
                                     f"{type(value).__name__}")
                    return ""
                return value
            return body
        return None

    def content(self, node: Node) -> str:
        for child in node.children:
            if child.type == "string_content":
                return self.text(child)
        return ""

    def tagged(self, node: Node) -> tuple[str, str]:
        raw = self.src[node.start_byte: node.end_byte]
        if raw.startswith(b"```"):
            tag = self.text(node.child(1)) if node.child_count > 1 else ""
            return tag, dedent_fenced(self.content(node))
        tick = raw.index(b"`")
        return raw[:tick].decode(), _unescape(raw[tick + 1: -1].decode())

    def json(self, node: Node, body: str) -> Any:
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            self.error(node, f"invalid JSON in json`...`: {exc}")
            return _INVALID

    def value(self, node: Node) -> Any:
        """A JSON value: gram scalar, list, map, ``null`` or json`...`; _INVALID if not."""
        kind = node.kind_id
        if kind == K_STRING:
            return self.string(node)
        if kind == K_INTEGER:
            return int(self.src[node.start_byte: node.end_byte])
        if kind == K_DECIMAL:
            return float(self.src[node.start_byte: node.end_byte])
        if kind == K_BOOLEAN:
            return self.src[node.start_byte] == 0x74  # "t"
        if kind == K_ARRAY:
            out = []
            for child in node.children:
                if child.is_named and child.kind_id != K_COMMENT:
                    item = self.value(child)
                    if item is _INVALID:
                        return _INVALID
                    out.append(item)
            return out
        if kind == K_MAP:
            result: dict[str, Any] = {}
            for entry in node.named_children:
                if entry.kind_id == K_COMMENT:
                    continue
                key_node, value_node = _key_value(entry)
                if key_node is None or value_node is None:
                    return _INVALID
                item = self.value(value_node)
                if item is _INVALID:
                    return _INVALID
                result[self.name(key_node)] = item
            return result
        if kind == K_TAGGED:
            tag, body = self.tagged(node)
            return self.json(node, body) if tag == "json" else body
        if kind == K_HEX:
            return int(self.text(node), 16)
        if kind == K_OCTAL:
            return int(self.text(node), 8)
        if kind == K_SYMBOL:
            word = self.text(node)
            if word == "null":
                return None
            self.error(node, f"unexpected name '{word}': write a string as \"{word}\"")
            return _INVALID
        if kind == K_MEASUREMENT:
            self.error(node, f"'{self.text(node)}' is not a JSON value; quote it as a string")
            return _INVALID
        if kind == K_RANGE:
            self.error(node, "ranges are not JSON values; use minimum and maximum")
            return _INVALID
        self.error(node, f"expected a value, not {node.type}")
        return _INVALID

    def record(self, node: Node | None, what: str) -> list[tuple[str, Node, Node]]:
        """The ``(key, key node, value node)`` entries of a record; duplicates reported."""
        if node is None:
            return []
        out = []
        seen: set[str] = set()
        for prop in node.children:
            if prop.kind_id != K_PROPERTY:
                continue
            key_node, value_node = _key_value(prop)
            if key_node is None or value_node is None:
                continue
            key = self.name(key_node)
            if key in seen:
                self.error(key_node, f"{what}: duplicate key '{key}'")
                continue
            seen.add(key)
            out.append((key, key_node, value_node))
        return out

    def labels(self, node: Node | None) -> list[tuple[str, Node]]:
        if node is None:
            return []
        return [(self.name(child), child) for child in node.children
                if child.kind_id in (K_SYMBOL, K_QUOTED_NAME)]

    def required_name(self, parts: _Parts, what: str) -> str | None:
        """The identifier of a pattern that must have a non-empty one."""
        if parts.ident is None:
            self.error(parts.node, f"{what} needs a name, e.g. [name:{what.capitalize()} ...]")
            return None
        name = self.name(parts.ident)
        if not name.strip():
            self.error(parts.ident, f"{what} name must not be empty")
            return None
        return name

    def strings(self, parts: _Parts, what: str, allowed: tuple[str, ...]
                ) -> tuple[dict[str, tuple[str, Node]], set[str]]:
        """The string properties of an agent or tool record (and every key present)."""
        out = {}
        entries = self.record(parts.record, what)
        for key, key_node, value_node in entries:
            if key not in allowed:
                hint = _did_you_mean(key, allowed)
                self.error(key_node, f"{what}: unknown property '{key}' (expected "
                                     f"{', '.join(allowed)}){hint}")
                continue
            text = self.string(value_node)
            if text is None:
                self.error(value_node, f"{what}: {key} must be a string")
                continue
            out[key] = (text, value_node)
        return out, {key for key, _, _ in entries}

    # ---- types ------------------------------------------------------------------------------

    def collect_types(self, scope: _Types, parts: _Parts) -> None:
        """Register a type pattern ``[Name:Type {...} | members]`` in ``scope``."""
        if parts.ident is None:
            self.error(parts.node, "a type pattern needs a name: [Name:Object | ...]")
            return
        name = self.name(parts.ident)
        if not name:
            self.error(parts.ident, "type name must not be empty")
        elif name in TYPE_NAMES:
            self.error(parts.ident, f"'{name}' is a built-in type; choose another type name")
        elif name in scope.patterns:
            first = scope.patterns[name]
            self.error(parts.ident, f"duplicate type '{name}' (first defined at "
                                    f"{self.position(first.node)})")
        else:
            scope.patterns[name] = parts

    def resolve(self, name: str, node: Node, scope: _Types) -> JSONSchema | None:
        """The schema of a named type (a fresh copy), or None after reporting a problem."""
        where: _Types | None = scope
        while where is not None and name not in where.patterns:
            where = where.parent
        if where is None:
            known = [*TYPE_NAMES, *scope.names()]
            self.error(node, f"unknown type '{name}' (expected a built-in type: "
                             f"{', '.join(TYPE_NAMES)}, or a type pattern [{name}:Object | ...]"
                             f"){_did_you_mean(name, known)}")
            return None
        if name in where.resolved:
            schema = where.resolved[name]
            return None if schema is None else orjson.loads(orjson.dumps(schema))
        if name in where.resolving:
            self.error(node, f"type '{name}' refers to itself; recursive types cannot be "
                             "written as JSON Schema without $ref")
            return None
        where.resolving.add(name)
        parts = where.patterns[name]
        result = self.typed(parts, where, member=False, members=parts.elements)
        where.resolving.discard(name)
        schema = None if result is None else result[0]
        where.resolved[name] = schema
        return None if schema is None else orjson.loads(orjson.dumps(schema))

    def base_type(self, parts: _Parts, scope: _Types, what: str) -> JSONSchema | None:
        """The schema the labels of a node stand for: built-in types or one named type."""
        labels = self.labels(parts.labels)
        if not labels:
            self.error(parts.node, f"{what} needs a type, e.g. ::String")
            return None
        if len(labels) == 1:
            name, node = labels[0]
            jtype = TYPE_NAMES.get(name, "")
            if jtype == "":
                return self.resolve(name, node, scope)
            return {} if jtype is None else {"type": jtype}
        types: list[str] = []
        for name, node in labels:
            jtype = TYPE_NAMES.get(name, "")
            if jtype is None or jtype == "":
                if jtype == "" and not any(name in s.patterns for s in _chain(scope)):
                    self.resolve(name, node, scope)  # reports the unknown type
                else:
                    self.error(node, f"'{name}' cannot be part of a union: only built-in "
                                     "types other than Any combine (e.g. ::String:Null)")
                return None
            if jtype in types:
                self.error(node, f"type '{name}' is listed twice")
                return None
            types.append(jtype)
        return {"type": types}

    def typed(self, parts: _Parts, scope: _Types, *, member: bool,
              members: Node | None = None, what: str = "type"
              ) -> tuple[JSONSchema, bool | None] | None:
        """The schema of a typed node or type pattern, and its ``required:`` flag (if any)."""
        count = len(self.problems)
        schema = self.base_type(parts, scope, what)
        if schema is None:
            return None
        flag: bool | None = None
        default_node: Node | None = None
        for key, key_node, value_node in self.record(parts.record, what):
            kind = keyword_kind(key)
            if kind == REQUIRED and value_node.kind_id == K_BOOLEAN:
                if not member:
                    self.error(key_node, f"{what}: a required flag applies to parameters and "
                                         "members only")
                    continue
                flag = self.value(value_node)
                continue
            value = self.keyword(key, kind, key_node, value_node, scope, what)
            if value is not _INVALID:
                schema[key] = value
                if key == "default":
                    default_node = value_node
        if members is not None:
            self.members(schema, members, scope, parts)
        if len(self.problems) > count:
            return None
        problem = default_problem(schema)
        if problem:
            self.error(default_node or parts.node, f"{what}: {problem}")
            return None
        return schema, flag

    def keyword(self, key: str, kind: int | None, key_node: Node, value_node: Node,
                scope: _Types, what: str) -> Any:
        """The value of one schema keyword in a record; _INVALID after reporting."""
        if kind is None:
            self.error(key_node, f"{what}: unknown keyword '{key}'"
                                 f"{_did_you_mean(key, _KNOWN_KEYWORDS)}")
            return _INVALID
        if kind == VALUE:
            value = self.value(value_node)
            if value is _INVALID:
                return _INVALID
            problem = value_problem(key, value)
            if problem:
                self.error(value_node, f"{what}: {problem}")
                return _INVALID
            return value
        if kind == TYPE:
            self.error(key_node, f"{what}: write the type as a label, e.g. (x::String)")
            return _INVALID
        if kind == SCHEMA or (kind == ITEMS and value_node.kind_id != K_ARRAY):
            return self.type_ref(value_node, scope)
        if kind in (SCHEMA_LIST, ITEMS):
            if value_node.kind_id != K_ARRAY:
                self.error(value_node, f"{what}: {key} takes a list of types, e.g. [A, B]")
                return _INVALID
            refs = [self.type_ref(child, scope) for child in value_node.named_children
                    if child.kind_id != K_COMMENT]
            return _INVALID if _INVALID in refs else refs
        if kind == SCHEMA_MAP:
            if value_node.kind_id != K_MAP:
                self.error(value_node, f"{what}: {key} takes a map of types, e.g. "
                                       "{\"^x-\": String}")
                return _INVALID
            out = {}
            for entry in value_node.named_children:
                k, v = _key_value(entry)
                if k is None or v is None:
                    continue
                ref = self.type_ref(v, scope)
                if ref is _INVALID:
                    return _INVALID
                out[self.name(k)] = ref
            return out
        if kind == PROPERTIES:
            if value_node.kind_id != K_MAP or value_node.named_child_count:
                self.error(value_node, f"{what}: properties are member nodes of a type "
                                       "pattern; only 'properties: {}' (explicitly none) is "
                                       "written as a keyword")
                return _INVALID
            return {}
        # REQUIRED, as a list of names
        value = self.value(value_node)
        if value is _INVALID:
            return _INVALID
        if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
            self.error(value_node, f"{what}: required is true, false or a list of names")
            return _INVALID
        return value

    def type_ref(self, node: Node, scope: _Types) -> Any:
        """A sub-schema written as a type name or ``true``/``false``."""
        kind = node.kind_id
        if kind == K_BOOLEAN:
            return self.value(node)
        if kind in (K_SYMBOL, K_QUOTED_NAME):
            name = self.name(node)
            if name in TYPE_NAMES:
                jtype = TYPE_NAMES[name]
                return {} if jtype is None else {"type": jtype}
            schema = self.resolve(name, node, scope)
            return _INVALID if schema is None else schema
        self.error(node, "expected a type name (String, Integer, ... or a type pattern's name) "
                         "or true/false")
        return _INVALID

    def members(self, schema: JSONSchema, elements: Node, scope: _Types,
                parts: _Parts) -> None:
        """Fill ``properties``/``required`` of an object type from its member nodes."""
        jtype = schema.get("type", "object")
        if "object" not in (jtype if isinstance(jtype, list) else [jtype]):
            self.error(parts.node, "members (properties) need an Object type: "
                                   "[Name:Object | (field::String)]")
            return
        if "properties" in schema:
            self.error(parts.node, "'properties: {}' says there are none, but members follow")
            return
        explicit = "required" in schema
        props: dict[str, JSONSchema] = {}
        required: list[str] = []
        for child in elements.children:
            if child.kind_id == K_NODE:
                member = _parts(child)
                if member.ident is None:
                    self.error(child, "a member needs a name: (name::Type)")
                    continue
                name = self.name(member.ident)
                if name in props:
                    self.error(member.ident, f"duplicate member '{name}'")
                    continue
                result = self.typed(member, scope, member=True, what=f"member '{name}'")
                if result is None:
                    continue
                sub, flag = result
                if explicit and flag is not None:
                    self.error(child, f"member '{name}': a required flag conflicts with the "
                                      "type's required list")
                props[name] = sub
                if flag if flag is not None else "default" not in sub:
                    required.append(name)
            elif child.is_named and child.kind_id != K_COMMENT:
                self.error(child, "expected a member node (name::Type) in a type pattern")
        schema["properties"] = props
        if not explicit and required:
            schema["required"] = required

    # ---- signatures -------------------------------------------------------------------------

    def signature(self, path: Node, scope: _Types) -> Signature | None:
        """A tool signature from a node or relationship pattern."""
        count = len(self.problems)
        nodes: list[Node] = []
        current: Node | None = path
        while current is not None and current.kind_id == K_RELATIONSHIP:
            right = None
            arrow = False
            for child in current.children:
                kind = child.kind_id
                if kind in _ARROWS:
                    self.arrow(child)
                    arrow = True
                elif kind == K_NODE and not arrow:
                    nodes.append(child)
                elif kind in (K_NODE, K_RELATIONSHIP):
                    right = child
            current = right
        if current is not None:
            nodes.append(current)
        if len(self.problems) > count:
            return None
        node_parts = [_parts(n) for n in nodes]
        result = node_parts.pop()
        keywords: JSONSchema = {}
        if node_parts and node_parts[0].ident is None and node_parts[0].labels is None:
            keywords = self.arguments(node_parts.pop(0), scope)
        params: list[Param] = []
        flags: list[tuple[Node, bool | None]] = []
        seen: dict[str, Node] = {}
        for parts in node_parts:
            if parts.ident is None:
                self.error(parts.node, "a parameter needs a name: (name::Type)")
                continue
            name = self.name(parts.ident)
            if not name:
                self.error(parts.ident, "parameter name must not be empty")
                continue
            if name in seen:
                self.error(parts.ident, f"duplicate parameter '{name}' (first at "
                                        f"{self.position(seen[name])})")
                continue
            seen[name] = parts.ident
            typed = self.typed(parts, scope, member=True, what=f"parameter '{name}'")
            if typed is None:
                continue
            sub, flag = typed
            required = flag if flag is not None else "default" not in sub
            params.append(Param(name=name, schema=sub, required=required))
            flags.append((parts.node, flag))
        returns = self.result(result, scope)
        if len(self.problems) > count or returns is None:
            return None
        if "required" in keywords:
            listed = keywords["required"]
            for node, flag in flags:
                if flag is not None:
                    self.error(node, "a required flag conflicts with the required list of "
                                     "the arguments node")
                    return None
            params = [Param(name=p.name, schema=p.schema, required=p.name in listed)
                      for p in params]
            if listed and listed == canonical_required(params):
                del keywords["required"]
        return Signature(params=tuple(params), returns=returns, keywords=keywords)

    def arrow(self, node: Node) -> None:
        if node.kind_id != K_RIGHT:
            self.error(node, f"a signature reads left to right: expected -->, ==> or ~~>, "
                             f"not {self.text(node)}")
        elif node.named_child_count:
            self.error(node, "an arrow in a signature carries no subject: write ==>")

    def arguments(self, parts: _Parts, scope: _Types) -> JSONSchema:
        """Keywords of the arguments object, from the leading unnamed node's record."""
        out: JSONSchema = {}
        for key, key_node, value_node in self.record(parts.record, "arguments"):
            kind = keyword_kind(key)
            if kind == PROPERTIES:
                self.error(key_node, "arguments: the parameters are the properties")
                continue
            if kind == REQUIRED and value_node.kind_id == K_BOOLEAN:
                self.error(key_node, "arguments: required takes a list of parameter names")
                continue
            value = self.keyword(key, kind, key_node, value_node, scope, "arguments")
            if value is not _INVALID:
                out[key] = value
        return out

    def result(self, parts: _Parts, scope: _Types) -> JSONSchema | None:
        if parts.ident is not None:
            self.error(parts.ident, "the result node takes no name: write (::String)")
            return None
        typed = self.typed(parts, scope, member=False, what="the result")
        return None if typed is None else typed[0]

    # ---- tools and agents -------------------------------------------------------------------

    def tool(self, parts: _Parts, file_types: _Types) -> ToolSpec | None:
        count = len(self.problems)
        name = self.required_name(parts, "tool")
        what = f"tool '{name}'" if name else "tool"
        props, keys = self.strings(parts, what, _TOOL_KEYS)
        description = props.get("description")
        if description is None:
            if "description" not in keys:
                self.error(parts.ident or parts.node, f"{what}: missing description")
        elif not description[0].strip():
            self.error(description[1], f"{what}: description must not be empty")
        scope = _Types(file_types)
        path: Node | None = None
        for child in (parts.elements.children if parts.elements is not None else ()):
            kind = child.kind_id
            if kind in (K_NODE, K_RELATIONSHIP):
                if path is not None:
                    self.error(child, f"{what}: a tool has one signature (found a second "
                                      "path)")
                else:
                    path = child
            elif kind == K_SUBJECT:
                self.collect_types(scope, _parts(child))
            elif child.is_named and kind != K_COMMENT:
                self.error(child, f"{what}: expected a signature like (x::String)==>(::String)"
                                  " or a type pattern")
        if path is None:
            self.error(parts.ident or parts.node, f"{what}: missing signature, e.g. "
                                                  f"[{name or 'name'}:Tool {{...}} | "
                                                  "()==>(::String)]")
            return None
        sig = self.signature(path, scope)
        for type_name, type_parts in scope.patterns.items():
            if type_name not in scope.resolved:
                self.resolve(type_name, type_parts.ident or type_parts.node, scope)
        if sig is None or len(self.problems) > count or name is None or description is None:
            return None
        return ToolSpec.create(name, description[0], sig)

    def agent(self, parts: _Parts, tools: dict[str, ToolSpec | None],
              file_types: _Types) -> Agent | None:
        count = len(self.problems)
        name = self.required_name(parts, "agent")
        what = f"agent '{name}'" if name else "agent"
        props, keys = self.strings(parts, what, _AGENT_KEYS)
        description = props.get("description")
        if description is not None and not description[0].strip():
            self.error(description[1], f"{what}: description must not be empty (leave it out "
                                       "instead)")
        instruction = props.get("instruction")
        if instruction is None and "instruction" not in keys:
            self.error(parts.ident or parts.node, f"{what}: missing instruction")
        elif instruction is not None and not instruction[0].strip():
            self.error(instruction[1], f"{what}: instruction must not be empty")
        model: ModelRef | None = None
        if "model" in props:
            try:
                model = ModelRef.parse(props["model"][0])
            except SpecError as exc:
                self.error(props["model"][1], f"{what}: {exc.diagnostics[0].message}")
        elif "model" not in keys:
            self.error(parts.ident or parts.node, f"{what}: missing model, e.g. "
                                                  "model: \"openai/gpt-4o-mini\"")
        specs: list[ToolSpec] = []
        seen: dict[str, Node] = {}
        for child in (parts.elements.children if parts.elements is not None else ()):
            kind = child.kind_id
            spec: ToolSpec | None = None
            if kind == K_REFERENCE:
                ref = self.name(child)
                where: Node = child
                if ref not in tools:
                    self.error(child, f"{what}: unknown tool '{ref}' (define it as a top-level "
                                      f"[{ref}:Tool {{...}} | ...] pattern)"
                                      f"{_did_you_mean(ref, list(tools))}")
                    continue
                spec = tools[ref]
                tool_name = ref
            elif kind == K_SUBJECT:
                tparts = _parts(child)
                label = self.labels(tparts.labels)
                if [n for n, _ in label] != ["Tool"]:
                    self.error(child, f"{what}: expected a tool pattern [name:Tool {{...}} | "
                                      "signature] or a tool name")
                    continue
                spec = self.tool(tparts, file_types)
                where = tparts.ident or child
                tool_name = self.name(tparts.ident) if tparts.ident is not None else ""
            elif child.is_named and kind != K_COMMENT:
                self.error(child, f"{what}: expected a tool pattern [name:Tool {{...}} | "
                                  "signature] or a tool name")
                continue
            else:
                continue
            if tool_name in seen:
                self.error(where, f"{what}: duplicate tool '{tool_name}' (first at "
                                  f"{self.position(seen[tool_name])})")
                continue
            seen[tool_name] = where
            if spec is not None:
                specs.append(spec)
        if len(self.problems) > count or name is None or instruction is None or model is None:
            return None
        try:
            return Agent(name=name, description=None if description is None else description[0],
                         model=model, instruction=instruction[0], tools=tuple(specs))
        except SpecError as exc:  # pragma: no cover - the checks above cover the rules
            for d in exc.diagnostics:
                self.error(parts.node, d.message)
            return None

    def document(self) -> GramDocument:
        root = self.tree.root_node
        if root.has_error:
            self.syntax_errors()
        agent_parts: list[_Parts] = []
        tool_parts: list[_Parts] = []
        file_types = _Types()
        broken: set[str] = set()
        for child in root.children:
            kind = child.kind_id
            if kind == K_COMMENT or child.is_error:
                continue
            if kind != K_SUBJECT:
                if kind == K_RECORD:
                    self.error(child, "a file-level record is not part of an agent file")
                elif not child.has_error:
                    self.error(child, "expected an agent [name:Agent {...} | tools], a tool "
                                      "[name:Tool {...} | signature] or a type pattern at the "
                                      "top level")
                continue
            parts = _parts(child)
            if child.has_error:
                if parts.ident is not None:
                    broken.add(self.name(parts.ident))
                continue
            labels = [n for n, _ in self.labels(parts.labels)]
            if labels == ["Agent"]:
                agent_parts.append(parts)
            elif labels == ["Tool"]:
                tool_parts.append(parts)
            elif labels:
                self.collect_types(file_types, parts)
            else:
                self.error(child, "a top-level pattern needs a label: [name:Agent ...], "
                                  "[name:Tool ...] or [Name:Object ...]")
        tools: dict[str, ToolSpec | None] = dict.fromkeys(broken)
        first_at: dict[str, Node] = {}
        standalone: list[ToolSpec] = []
        for parts in tool_parts:
            spec = self.tool(parts, file_types)
            name = self.name(parts.ident) if parts.ident is not None else None
            if name is None:
                continue
            if name in first_at:
                self.error(parts.ident or parts.node, f"duplicate tool '{name}' (first defined "
                                                      f"at {self.position(first_at[name])})")
                continue
            first_at[name] = parts.node
            tools[name] = spec
            if spec is not None:
                standalone.append(spec)
        for type_name, type_parts in file_types.patterns.items():
            if type_name not in file_types.resolved:
                self.resolve(type_name, type_parts.ident or type_parts.node, file_types)
        agents: list[Agent] = []
        agent_at: dict[str, Node] = {}
        for parts in agent_parts:
            agent = self.agent(parts, tools, file_types)
            if parts.ident is not None:
                name = self.name(parts.ident)
                if name in agent_at:
                    self.error(parts.ident, f"duplicate agent '{name}' (first defined at "
                                            f"{self.position(agent_at[name])})")
                    continue
                agent_at[name] = parts.node
            if agent is not None:
                agents.append(agent)
        self.raise_problems()
        return GramDocument(agents=tuple(agents), tools=tuple(standalone))

    def lone_signature(self) -> Signature:
        root = self.tree.root_node
        if root.has_error:
            self.syntax_errors()
        scope = _Types()
        paths = []
        for child in root.children:
            kind = child.kind_id
            if kind == K_COMMENT or child.has_error:
                continue
            if kind in (K_NODE, K_RELATIONSHIP):
                paths.append(child)
            elif kind == K_SUBJECT:
                self.collect_types(scope, _parts(child))
            else:
                self.error(child, "expected a signature like (x::String)==>(::String), "
                                  "optionally followed by type patterns")
        sig = None
        if len(paths) > 1:
            self.error(paths[1], "expected one signature path (found a second one)")
        elif not paths and not self.problems:
            self.error(root, "expected a signature like (x::String)==>(::String)")
        elif paths:
            sig = self.signature(paths[0], scope)
        for type_name, type_parts in scope.patterns.items():
            if type_name not in scope.resolved:
                self.resolve(type_name, type_parts.ident or type_parts.node, scope)
        self.raise_problems()
        assert sig is not None
        return sig


_CLOSER = {"[": "]", "(": ")", "{": "}"}
_KNOWN_KEYWORDS = sorted(
    k for k in ("description", "title", "default", "examples", "enum", "const", "format",
                "pattern", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum",
                "exclusiveMaximum", "multipleOf", "items", "prefixItems", "minItems",
                "maxItems", "uniqueItems", "required", "additionalProperties", "anyOf",
                "oneOf", "allOf", "not", "properties", "patternProperties", "minProperties",
                "maxProperties"))


def _chain(scope: _Types) -> Iterator[_Types]:
    current: _Types | None = scope
    while current is not None:
        yield current
        current = current.parent


def _key_value(node: Node) -> tuple[Node | None, Node | None]:
    """The key and value nodes of a record property or map entry."""
    key = value = None
    for child in node.children:
        if child.is_named and child.kind_id != K_COMMENT:
            if key is None:
                key = child
            else:
                value = child
                break
    if key is not None and key.kind_id not in _KEYS:
        return None, None
    return key, value


def _descendants(node: Node) -> Iterator[Node]:
    """``node`` and everything under it, in document order."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))


def _leaves(node: Node) -> Iterator[Node]:
    return (n for n in _descendants(node) if not n.child_count)


def _leaf_before(node: Node) -> Node | None:
    current = node
    sibling = current.prev_sibling
    while sibling is None:
        parent = current.parent
        if parent is None:
            return None
        current = parent
        sibling = current.prev_sibling
    while sibling.child_count:
        last = sibling.child(sibling.child_count - 1)
        if last is None:
            break
        sibling = last
    return sibling


_FRIENDLY = {
    "symbol": "a name", "integer": "a number", "decimal": "a number", "hexadecimal": "a number",
    "octal": "a number", "measurement": "a number", '"': "a string", "'": "a string",
    "`": "a string", "```": "a string", "string_literal": "a string", "tagged_string":
    "a string", "true": "true or false", "false": "true or false", "boolean_literal":
    "true or false", "array": "a list", "map": "a map", "-": "an arrow (==>)",
    "=": "an arrow (==>)", "~": "an arrow (==>)", "<-": "an arrow (==>)",
    "<=": "an arrow (==>)", "<~": "an arrow (==>)",
}
_SILENT = {"comment", "range", "..", "...", "@", "@@", "->", "=>", "~>", "end", "\n"}


def _friendly(kind: str) -> str:
    if kind in _SILENT:
        return ""
    return _FRIENDLY.get(kind, f"'{kind}'")


def _did_you_mean(word: str, candidates: list[str] | tuple[str, ...]) -> str:
    close = difflib.get_close_matches(word, list(candidates), n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


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
    return load_gram(src, file=name)


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
    return document.agent(name)


def has_comments(text: str | bytes) -> bool:
    """Whether a gram text holds ``//`` comments (which :func:`to_gram` does not keep)."""
    src = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    if b"//" not in src:
        return False
    root = Parser(LANGUAGE).parse(src).root_node
    return any(n.kind_id == K_COMMENT for n in _descendants(root))


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------

def _string(text: str, indent: str, *, fence: bool) -> str:
    """A string value; multi-line ones fenced (when that reads back exactly)."""
    if fence and "\n" in text and "```" not in text and "\0" not in text:
        body = "\n".join(indent + line if line else "" for line in text.split("\n"))
        if dedent_fenced(body + "\n" + indent) == text:
            return "```\n" + body + "\n" + indent + "```"
    return quote_string(text)


def _tool(spec: ToolSpec, indent: str) -> str:
    writer = SignatureWriter()
    nodes = writer.nodes(spec.signature)
    inner = indent + "  "
    path = "==>".join(nodes)
    if len(inner) + len(path) > 100:
        path = f"\n{inner}==>".join(nodes)
    parts = [inner + path, *(p.render(inner) for p in writer.definitions)]
    head = (f"{indent}[{format_name(spec.name)}:Tool "
            f"{{description: {quote_string(spec.description)}}} |")
    return head + "\n" + ",\n".join(parts) + "\n" + indent + "]"


def _agent(agent: Agent, shared: dict[str, ToolSpec]) -> str:
    entries = []
    if agent.description is not None:
        entries.append(f"  description: {_string(agent.description, '  ', fence=True)}")
    entries.append(f"  instruction: {_string(agent.instruction, '  ', fence=True)}")
    entries.append(f"  model: {quote_string(str(agent.model))}")
    head = f"[{format_name(agent.name)}:Agent {{\n" + ",\n".join(entries) + "\n}"
    if not agent.tools:
        return head + "]"
    items = [f"  {format_name(t.name)}" if shared.get(t.name) == t else _tool(t, "  ")
             for t in agent.tools]
    return head + " |\n" + ",\n".join(items) + "\n]"


def to_gram(obj: Agent | ToolSpec | GramDocument) -> str:
    """The canonical gram text of an agent, a tool spec or a whole document.

    In a document, stand-alone tools come first, and an agent's tool equal to a stand-alone
    one is written as a reference to it. Reading the text back gives an equal object.
    Comments are not kept.
    """
    if isinstance(obj, ToolSpec):
        return _tool(obj, "") + "\n"
    if isinstance(obj, Agent):
        return _agent(obj, {}) + "\n"
    if isinstance(obj, GramDocument):
        shared = {t.name: t for t in obj.tools}
        blocks = [_tool(t, "") for t in obj.tools] + [_agent(a, shared) for a in obj.agents]
        return "\n\n".join(blocks) + "\n"
    raise TypeError(f"to_gram() takes an Agent, ToolSpec or GramDocument, not "
                    f"{type(obj).__name__}")
