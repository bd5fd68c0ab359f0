"""The lexical layer of the gram reader: tree-sitter parsing and decoded values (syntax
errors are in :mod:`gramagent._spec.gram.syntaxerrors`).

The readers (:mod:`gramagent._spec.gram.typereader` and those built on it) give gram its meaning;
this module turns the syntax tree into small decoded pieces they read without touching
tree-sitter nodes again:

- :class:`NodeInfo`: a node or subject pattern's identifier, labels and record entries, each
  with its byte offset (for positioned errors);
- values (:data:`Val`): ``(kind, payload, offset)`` tuples, see the ``V_*`` kinds.

Most nodes of a gram file are punctuation and string pieces inside records, and reading each
node from Python is what loading a file spends its time on (docs/performance.md, "Gram
parsing"). So, for a subtree tree-sitter parsed without error, the decoder first tries to
read a signature path, node or record from its text slice with anchored regular expressions
covering the common, simple forms (plain names, double-quoted strings without escapes,
numbers, booleans, lists of those). Anything else (escapes, other string forms, maps,
comments, ...) falls back to walking the tree. Both routes give the same result; tests
compare them.
"""

from __future__ import annotations

import bisect
import codecs
import json
import re
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple, NoReturn

import tree_sitter_gram
from tree_sitter import Language, Node, Parser, Tree

from gramagent._spec.vocabulary import MAX_DEPTH, TOO_DEEP
from gramagent.errors import Diagnostic, SpecError

__all__ = ["Decoder", "LANGUAGE", "NodeInfo", "Val", "dedent_fenced", "parse", "source_bytes"]

LANGUAGE = Language(tree_sitter_gram.language())
"""The gram grammar (tree-sitter-gram)."""


def _kind(name: str, named: bool) -> int:
    """The grammar's id of a node kind."""
    kind = LANGUAGE.id_for_node_kind(name, named)
    if kind is None:  # pragma: no cover - only with a grammar that renamed its nodes
        raise RuntimeError(f"tree-sitter-gram has no node kind {name!r}")
    return kind


K_SUBJECT = _kind("subject_pattern", True)
K_NODE = _kind("node_pattern", True)
K_RELATIONSHIP = _kind("relationship_pattern", True)
K_REFERENCE = _kind("pattern_reference", True)
K_ELEMENTS = _kind("subject_pattern_elements", True)
K_RECORD = _kind("record", True)
K_PROPERTY = _kind("record_property", True)
K_LABELS = _kind("labels", True)
K_SYMBOL = _kind("symbol", True)
K_QUOTED_NAME = _kind("quoted_name", True)
K_DQ_NAME = _kind("double_quoted_name", True)
K_INTEGER = _kind("integer", True)
K_DECIMAL = _kind("decimal", True)
K_HEX = _kind("hexadecimal", True)
K_OCTAL = _kind("octal", True)
K_MEASUREMENT = _kind("measurement", True)
K_STRING = _kind("string_literal", True)
K_TAGGED = _kind("tagged_string", True)
K_BOOLEAN = _kind("boolean_literal", True)
K_ARRAY = _kind("array", True)
K_MAP = _kind("map", True)
K_MAP_ENTRY = _kind("map_entry", True)
K_RANGE = _kind("range", True)
K_COMMENT = _kind("comment", True)
K_RIGHT = _kind("right_arrow", True)
ARROWS = frozenset({K_RIGHT, _kind("left_arrow", True), _kind("undirected_arrow", True),
                    _kind("bidirectional_arrow", True)})
IDENTIFIERS = frozenset({K_SYMBOL, K_QUOTED_NAME, K_INTEGER})
_KEYS = frozenset({K_SYMBOL, K_QUOTED_NAME, K_DQ_NAME})

# Value kinds: a value is (kind, payload, byte offset).
V_SCALAR = 0
"""payload: str, int, float or bool."""
V_SYMBOL = 1
"""payload: the bare name (``null``, a type name, ...)."""
V_LIST = 2
"""payload: list of values."""
V_MAP = 3
"""payload: list of ``(key, key offset, value)``."""
V_JSON = 4
"""payload: the JSON value of a ``json`...``` tagged string."""
V_BAD = 5
"""payload: why this is not a value (a measurement, a range, invalid JSON)."""

Val = tuple[int, Any, int]
Entry = tuple[str, int, Val]
"""A record entry: key, key offset, value."""


class NodeInfo(NamedTuple):
    """The decoded parts of a node or subject pattern."""

    offset: int
    """Byte offset of the pattern."""
    ident: str | None
    """The identifier, or None."""
    ident_offset: int
    labels: tuple[str, ...]
    """Label names, in order (``::String:Null`` -> String, Null)."""
    label_offsets: tuple[int, ...]
    entries: tuple[Entry, ...] | None
    """Record entries, or None when there is no record."""
    record_offset: int


def source_bytes(text: str | bytes, file: str | None) -> bytes:
    """The UTF-8 bytes the reader parses: ``text`` encoded, or ``bytes`` checked (a byte
    order mark left out).

    Raises:
        SpecError: ``text`` holds a lone surrogate, which UTF-8 cannot encode, or the bytes
            are not UTF-8; positioned.
    """
    if isinstance(text, bytes):
        return _checked_utf8(text, file)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        line = text.count("\n", 0, exc.start) + 1
        column = exc.start - (text.rfind("\n", 0, exc.start) + 1) + 1
        raise SpecError([Diagnostic("text holds a character that is not valid Unicode "
                                    "(a lone surrogate)", file, line, column)]) from None


def _checked_utf8(src: bytes, file: str | None) -> bytes:
    if src.startswith(codecs.BOM_UTF8):
        src = src[len(codecs.BOM_UTF8):]
    try:
        src.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = src.count(b"\n", 0, exc.start) + 1
        start = src.rfind(b"\n", 0, exc.start) + 1
        column = len(src[start: exc.start].decode("utf-8", "replace")) + 1
        what = "the file" if file else "the text"
        raise SpecError([Diagnostic(f"{what} is not valid UTF-8", file, line, column)]) \
            from None
    return src


def parse(src: bytes) -> Tree:
    """Parse gram bytes into a tree-sitter tree (ERROR/MISSING nodes mark syntax errors)."""
    return Parser(LANGUAGE).parse(src)


# --------------------------------------------------------------------------------------------
# Strings
# --------------------------------------------------------------------------------------------

_ESCAPES = {'"': '"', "'": "'", "`": "`", "\\": "\\", "/": "/", "b": "\b", "f": "\f",
            "n": "\n", "r": "\r", "t": "\t"}
_ESCAPE_RE = re.compile(r"\\(.)", re.S)


def unescape(text: str) -> str:
    """Resolve the backslash escapes gram strings allow."""
    if "\\" not in text:
        return text
    return _ESCAPE_RE.sub(lambda m: _ESCAPES.get(m.group(1), m.group(0)), text)


def dedent_fenced(content: str) -> str:
    """The text of a fenced string: the closing fence's line dropped, common indent removed.

    ``content`` runs from after the opening fence's newline to the closing fence. Windows
    line ends (CRLF) count as plain line ends.
    """
    lines = content.replace("\r\n", "\n").split("\n")
    if len(lines) > 1 and not lines[-1].strip(" \t"):
        lines.pop()
    body = [line for line in lines if line.strip(" \t")]
    if not body:
        return "\n".join(line.lstrip(" \t") for line in lines)
    prefix = body[0][: len(body[0]) - len(body[0].lstrip(" \t"))]
    for line in body[1:]:
        while not line.startswith(prefix):
            prefix = prefix[:-1]
    width = len(prefix)
    return "\n".join(line[width:] if line.startswith(prefix) else line.lstrip(" \t")
                     for line in lines)


# --------------------------------------------------------------------------------------------
# The fast route: simple text, already checked by tree-sitter
# --------------------------------------------------------------------------------------------

_SYM = r"[a-zA-Z_][0-9a-zA-Z_.\-@]*"
_AFTER = r"(?![0-9a-zA-Z_.\-@`])"
_SCALAR = (rf'"[^"\\\n]*"|-?(?:0|[1-9][0-9]*)\.[0-9]+{_AFTER}|-?(?:0|[1-9][0-9]*){_AFTER}'
           rf"|{_SYM}(?!`)")
_VALUE = rf"{_SCALAR}|\[\s*(?:{_SCALAR})(?:\s*,\s*(?:{_SCALAR}))*\s*\]"
_ENTRY = rf'({_SYM}|"[^"\\\n]*")\s*::?\s*({_VALUE})'
_RECORD = rf"\{{\s*(?:{_ENTRY}(?:\s*,\s*{_ENTRY})*)?\s*\}}"
_NODE_RE = re.compile(
    rf"\(\s*({_SYM}|-?(?:0|[1-9][0-9]*){_AFTER})?\s*((?:::?\s*{_SYM}\s*)*)({_RECORD})?\s*\)")
_ARROW_RE = re.compile(r"\s*(?:-->|==>|~~>)\s*")
_RECORD_RE = re.compile(_RECORD)
_ENTRY_RE = re.compile(_ENTRY)
_SCALAR_RE = re.compile(_SCALAR)
_LABEL_RE = re.compile(_SYM)
_SIMPLE_LABELS = re.compile(rb"(?:::?[a-zA-Z_][0-9a-zA-Z_.\-@]*)+")


def _scalar(text: str, offset: int) -> Val:
    first = text[0]
    if first == '"':
        return (V_SCALAR, text[1:-1], offset)
    if first == "-" or first.isdigit():
        return (V_SCALAR, float(text) if "." in text else int(text), offset)
    if text == "true" or text == "false":
        return (V_SCALAR, text == "true", offset)
    return (V_SYMBOL, text, offset)


def _fast_value(text: str, offset: int) -> Val:
    if text[0] != "[":
        return _scalar(text, offset)
    return (V_LIST, [_scalar(m.group(), offset + m.start())
                     for m in _SCALAR_RE.finditer(text, 1)], offset)


def _fast_entries(text: str, start: int, end: int, offset: int) -> tuple[Entry, ...]:
    """Entries of a record that matched ``_RECORD`` at ``text[start:end]``."""
    out = []
    for m in _ENTRY_RE.finditer(text, start, end):
        key, value = m.groups()
        if key[0] == '"':
            key = key[1:-1]
        at = offset + m.start(2)
        if value[0] == '"':
            out.append((key, offset + m.start(1), (V_SCALAR, value[1:-1], at)))
        else:
            out.append((key, offset + m.start(1), _fast_value(value, at)))
    return tuple(out)


def _labels(text: str, offset: int) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """Names and offsets of the labels in ``text`` (``::String:Null``) at ``offset``."""
    if " " in text or "\n" in text or "\t" in text or "\r" in text:
        found = list(_LABEL_RE.finditer(text))
        return tuple(x.group() for x in found), tuple(offset + x.start() for x in found)
    names = []
    offsets = []
    at = offset
    for part in text.split(":"):
        if part:
            names.append(part)
            offsets.append(at)
            at += len(part)
        at += 1
    return tuple(names), tuple(offsets)


def _fast_node(text: str, pos: int, base: int) -> tuple[NodeInfo, int] | None:
    """A node pattern at ``text[pos:]`` read from text, and where it ends; None if not simple."""
    m = _NODE_RE.match(text, pos)
    if m is None:
        return None
    ident, labels_text, record = m.group(1, 2, 3)
    labels: tuple[str, ...] = ()
    label_offsets: tuple[int, ...] = ()
    if labels_text:
        labels, label_offsets = _labels(labels_text.rstrip(), base + m.start(2))
    entries = None
    record_offset = 0
    if record is not None:
        start = m.start(3)
        record_offset = base + start
        entries = _fast_entries(text, start + 1, m.end(3), base)
    info = NodeInfo(base + pos, ident, base + m.start(1) if ident else 0, labels,
                    label_offsets, entries, record_offset)
    return info, m.end()


# --------------------------------------------------------------------------------------------
# The decoder
# --------------------------------------------------------------------------------------------

class Decoder:
    """Decodes the nodes of one parsed text (``src`` is what was parsed).

    ``fast=False`` turns the text route off (every read walks the tree), for tests.
    """

    def __init__(self, src: bytes, *, fast: bool = True) -> None:
        self.src = src
        self.fast = fast
        self._lines: list[int] | None = None

    # ---- positions --------------------------------------------------------------------------

    def position(self, offset: int) -> tuple[int, int]:
        """1-based line and column (in characters) of a byte offset."""
        if self._lines is None:
            self._lines = [0] + [m.end() for m in re.finditer(b"\n", self.src)]
        row = bisect.bisect_right(self._lines, offset) - 1
        start = self._lines[row]
        return row + 1, len(self.src[start:offset].decode("utf-8", "replace")) + 1

    def where(self, offset: int) -> str:
        line, column = self.position(offset)
        return f"{line}:{column}"

    # ---- leaves -----------------------------------------------------------------------------

    def text(self, node: Node) -> str:
        return self.src[node.start_byte: node.end_byte].decode()

    def name(self, node: Node) -> str:
        """An identifier, key or label: symbol, integer, `quoted` or "quoted" name."""
        raw = self.src[node.start_byte: node.end_byte]
        if raw[:1] in b'`"':
            return unescape(raw[1:-1].decode())
        return raw.decode()

    def _content(self, node: Node) -> str:
        for child in node.children:
            if child.type == "string_content":
                return self.text(child)
        return ""

    def _string(self, node: Node) -> str:
        raw = self.src[node.start_byte: node.end_byte]
        if raw.startswith(b"```"):
            return dedent_fenced(self._content(node))
        return unescape(raw[1:-1].decode())

    def _tagged(self, node: Node) -> tuple[str, str]:
        raw = self.src[node.start_byte: node.end_byte]
        if raw.startswith(b"```"):
            tag = node.child_by_field_name("tag")
            return (self.text(tag) if tag is not None else ""), dedent_fenced(self._content(node))
        tick = raw.index(b"`")
        return raw[:tick].decode(), unescape(raw[tick + 1: -1].decode())

    def value(self, node: Node, depth: int = 0) -> Val:
        """Decode a value node (the tree route), itself ``depth`` lists or maps deep."""
        kind = node.kind_id
        offset = node.start_byte
        scalar = _SCALARS.get(kind)
        if scalar is not None:
            return (V_SCALAR, scalar(self, node), offset)
        if kind == K_SYMBOL:
            return (V_SYMBOL, self.text(node), offset)
        if kind in (K_ARRAY, K_MAP) and depth >= MAX_DEPTH:
            return (V_BAD, f"the value is {TOO_DEEP}", offset)
        if kind == K_ARRAY:
            return (V_LIST, [self.value(c, depth + 1) for c in _named(node)], offset)
        if kind == K_MAP:
            entries = []
            for entry in _named(node):
                key, value = key_value(entry)
                if key is not None and value is not None:
                    entries.append((self.name(key), key.start_byte,
                                    self.value(value, depth + 1)))
            return (V_MAP, entries, offset)
        if kind == K_TAGGED:
            return self._tagged_value(node)
        if kind == K_MEASUREMENT:
            return (V_BAD, f"'{self.text(node)}' is not a JSON value; quote it as a string",
                    offset)
        if kind == K_RANGE:
            return (V_BAD, "ranges are not JSON values; use minimum and maximum", offset)
        return (V_BAD, f"expected a value, not {node.type}", offset)

    def _tagged_value(self, node: Node) -> Val:
        """A tagged string: JSON for ``json`...```, else the string itself."""
        tag, body = self._tagged(node)
        if tag != "json":
            return (V_SCALAR, body, node.start_byte)
        try:
            return (V_JSON, json.loads(body, parse_constant=_no_constant), node.start_byte)
        except ValueError as exc:
            return (V_BAD, f"invalid JSON in json`...`: {exc}", node.start_byte)
        except RecursionError:  # deeper than the interpreter's stack; shallower ones are
            # checked against MAX_DEPTH where the value is used (json_problem)
            return (V_BAD, f"the JSON in json`...` is {TOO_DEEP}", node.start_byte)

    # ---- records and patterns ---------------------------------------------------------------

    def entries(self, record: Node) -> tuple[Entry, ...]:
        """The entries of a record node."""
        if self.fast and not record.has_error:
            text = self.src[record.start_byte: record.end_byte].decode()
            if _RECORD_RE.fullmatch(text):
                return _fast_entries(text, 1, len(text), record.start_byte)
        out = []
        for prop in _named(record):
            key, value = key_value(prop)
            if key is not None and value is not None:
                out.append((self.name(key), key.start_byte, self.value(value)))
        return tuple(out)

    def info(self, node: Node) -> NodeInfo:
        """The identifier, labels and record of a node or subject pattern."""
        if self.fast and node.kind_id == K_NODE and not node.has_error:
            text = self.src[node.start_byte: node.end_byte].decode()
            fast = _fast_node(text, 0, node.start_byte)
            if fast is not None and fast[1] == len(text):
                return fast[0]
        ident = labels = record = None
        for child in node.named_children:
            kind = child.kind_id
            if kind in IDENTIFIERS:
                ident = child
            elif kind == K_LABELS:
                labels = child
            elif kind == K_RECORD:
                record = child
        names: tuple[str, ...] = ()
        offsets: tuple[int, ...] = ()
        if labels is not None:
            raw = self.src[labels.start_byte: labels.end_byte]
            if _SIMPLE_LABELS.fullmatch(raw):
                names, offsets = _labels(raw.decode(), labels.start_byte)
            else:
                nodes = [c for c in labels.children if c.kind_id in (K_SYMBOL, K_QUOTED_NAME)]
                names = tuple(self.name(c) for c in nodes)
                offsets = tuple(c.start_byte for c in nodes)
        return NodeInfo(
            node.start_byte,
            None if ident is None else self.name(ident),
            0 if ident is None else ident.start_byte,
            names, offsets,
            None if record is None else self.entries(record),
            0 if record is None else record.start_byte,
        )

    def path(self, node: Node) -> tuple[list[NodeInfo], list[Node | int]] | None:
        """The nodes of a signature path, and its arrows (nodes, or offsets of plain right
        arrows); None for a path tree-sitter could not parse."""
        if node.has_error:
            return None
        text = self.src[node.start_byte: node.end_byte].decode()
        base = node.start_byte
        infos: list[NodeInfo] = []
        arrows: list[Node | int] = []
        pos = 0
        while self.fast:
            fast = _fast_node(text, pos, base)
            if fast is None:
                break
            infos.append(fast[0])
            pos = fast[1]
            if pos == len(text):
                return infos, arrows
            m = _ARROW_RE.match(text, pos)
            if m is None:
                break
            arrows.append(base + pos)
            pos = m.end()
        infos, arrows = [], []
        current: Node | None = node
        while current is not None and current.kind_id == K_RELATIONSHIP:
            right = None
            seen_arrow = False
            for child in current.children:
                kind = child.kind_id
                if kind in ARROWS:
                    arrows.append(child)
                    seen_arrow = True
                elif kind == K_NODE and not seen_arrow:
                    infos.append(self.info(child))
                elif kind in (K_NODE, K_RELATIONSHIP):
                    right = child
            current = right
        if current is not None:
            infos.append(self.info(current))
        return infos, arrows


_SCALARS: dict[int, Callable[[Decoder, Node], Any]] = {
    K_STRING: Decoder._string,
    K_INTEGER: lambda d, n: int(d.src[n.start_byte: n.end_byte]),
    K_DECIMAL: lambda d, n: float(d.src[n.start_byte: n.end_byte]),
    K_BOOLEAN: lambda d, n: d.src[n.start_byte] == 0x74,  # "t"
    K_HEX: lambda d, n: int(d.text(n), 16),
    K_OCTAL: lambda d, n: int(d.text(n), 8),
}
"""How the tree route decodes each kind of scalar value node."""


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def key_value(node: Node) -> tuple[Node | None, Node | None]:
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


def _named(node: Node) -> Iterator[Node]:
    return (c for c in node.named_children if c.kind_id != K_COMMENT)


def descendants(node: Node) -> Iterator[Node]:
    """``node`` and everything under it, in document order."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))
