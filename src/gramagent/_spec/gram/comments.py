"""The comments of a gram text, by the element each goes with, for ``gramagent fmt``.

:func:`collect_comments` maps each ``//`` comment of a parsed text to the element it sits next
to, so that the writer (:mod:`gramagent._spec.gram.docwriter`) can put it back:

- between top-level patterns (before one, at the end of its last line, or at the end of the
  file);
- between the elements after ``|`` of an agent (tools), a tool (its signature and type
  patterns) and a type pattern (its members);
- between the nodes of a signature path;
- between the entries of a record: an agent's, a tool's, a type pattern's, or a node's (a
  record holding comments is written one entry a line);
- elsewhere inside a pattern or node (before its record, between its labels, inside an
  entry's value, before a pattern's ``|``): with the nearest element that follows (the
  entry the comment is inside, the first entry, the first element after ``|``), or with
  the entry that ends on the comment's line.

Elements are keyed by what they are and their name (``("tool", "getForecast")``,
``("member", "city")``, ``("path",)``, ``("param", "days")``, ``("entry", "minLength")``),
lists by the keys of the elements enclosing them, so comments follow their element wherever
the canonical order puts it. For patterns the agent vocabulary does not know (written by
:mod:`gramagent._spec.gram.patterns`, in their source order), ``by_position`` keys each
pattern and element by its place in its list instead (``("element", 0)``); record entries
keep their names.
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable
from typing import NamedTuple

from tree_sitter import Node, Tree

from gramagent._spec.gram.layout import ListNotes, Notes
from gramagent._spec.gram.syntax import (
    K_COMMENT,
    K_ELEMENTS,
    K_NODE,
    K_PROPERTY,
    K_RECORD,
    K_REFERENCE,
    K_RELATIONSHIP,
    K_SUBJECT,
    Decoder,
    descendants,
    key_value,
)

__all__ = ["CommentMap", "Comments", "ELEMENT", "HEADER", "Key", "Orders", "PATH", "RECORD",
           "collect_comments"]

Key = tuple[Hashable, ...]
"""An element key, e.g. ``("tool", "getForecast")``."""

CommentMap = dict[tuple[Key, ...], ListNotes]
"""Comments by list (the keys of the enclosing elements, ``()`` for the file) and element."""

Orders = dict[tuple[Key, ...], list[Key]]
"""The element keys of a list in the order of the source text (records and paths, whose
elements the canonical form may leave out)."""


class Comments(NamedTuple):
    """The comments of a text, as :func:`collect_comments` finds them."""

    notes: CommentMap
    """Comments by list and element; the writer pops what it places."""
    orders: Orders
    """Source order of the elements of records and signature paths."""
    stray: list[tuple[int, str]]
    """Comments with no element to go with: ``(byte offset, why)``."""

ELEMENT = "element"
"""The first part of an element's key when elements are keyed by position."""
PATH: Key = ("path",)
RECORD: Key = ("record",)
HEADER: Key = ("header",)


class _Slot:
    """Notes under construction."""

    __slots__ = ("after", "before", "end", "gap", "offset")

    def __init__(self, offset: int) -> None:
        self.before: list[str] = []
        self.after: str | None = None
        self.offset = offset
        self.end = -1
        """Byte offset where the last comment of ``before`` ends."""
        self.gap = False
        """Whether a blank line separates the last comment from the element."""

    def notes(self) -> Notes:
        return Notes((*self.before, "") if self.gap else tuple(self.before), self.after,
                     self.offset)


class _Span(NamedTuple):
    key: Key
    node: Node
    start: int
    end: int
    """Where the element's own text starts and ends (comments at its edges left out)."""


def _edge(node: Node, *, last: bool) -> int:
    """The first (or last) byte of a node's own text, leaving out comments at its edges."""
    while node.child_count:
        children = [c for c in node.children if c.kind_id != K_COMMENT]
        if not children:
            break
        node = children[-1] if last else children[0]
    return node.end_byte if last else node.start_byte


class _Collector:
    def __init__(self, tree: Tree, decoder: Decoder, *, by_position: bool = False) -> None:
        self.by_position = by_position
        self.src = decoder.src
        self.decoder = decoder
        self.tree = tree
        self.comments = [n for n in descendants(tree.root_node) if n.kind_id == K_COMMENT]
        self.starts = [c.start_byte for c in self.comments]
        self.slots: dict[tuple[Key, ...], dict[Hashable, _Slot]] = {}
        self.orders: Orders = {}
        self.stray: list[tuple[int, str]] = []

    def run(self) -> Comments:
        root = self.tree.root_node
        elements = [c for c in root.named_children if c.kind_id != K_COMMENT]
        spans = [self.span(c, "file", i) for i, c in enumerate(elements)]
        self.visit((), spans, 0, len(self.src), "file")
        first = self.slots.get((), {}).get(spans[0].key) if spans else None
        lines = [] if first is None else [*first.before, *([""] if first.gap else [])]
        if first is not None and "" in lines:  # a header, apart from the first pattern
            cut = len(lines) - lines[::-1].index("")
            header = self.slots[()][HEADER] = _Slot(first.offset)
            header.before, first.before = lines[: cut - 1], lines[cut:]
            first.gap = False
            if not first.before and first.after is None:
                del self.slots[()][spans[0].key]
        out: CommentMap = {}
        for where, slots in self.slots.items():
            out[where] = {k: s.notes() for k, s in slots.items()}
        return Comments(out, self.orders, sorted(self.stray))

    def text(self, node: Node) -> str:
        return self.src[node.start_byte: node.end_byte].decode("utf-8", "replace").rstrip()

    def span(self, node: Node, owner: str, index: int) -> _Span:
        """The key of element ``index`` of a list of kind ``owner`` (file, agent, tool, type,
        element)."""
        kind = node.kind_id
        key: Key
        if self.by_position:
            key = (ELEMENT, index)
        elif kind == K_REFERENCE:
            key = ("tool", self.decoder.name(node))
        elif kind == K_SUBJECT:
            info = self.decoder.info(node)
            if owner == "file":
                what = {"Agent": "agent", "Tool": "tool"}.get(":".join(info.labels), "type")
            else:
                what = "tool" if owner == "agent" else "type"
            key = (what, info.ident)
        elif owner == "tool":
            key = PATH
        else:
            key = ("member", self.decoder.info(node).ident)
        return _Span(key, node, _edge(node, last=False), _edge(node, last=True))

    def between(self, lo: int, hi: int) -> list[Node]:
        """The comments that start in ``[lo, hi)``."""
        first = bisect.bisect_left(self.starts, lo)
        return self.comments[first: bisect.bisect_left(self.starts, hi, first)]

    def visit(self, where: tuple[Key, ...], spans: list[_Span], lo: int, hi: int,
              owner: str) -> None:
        """Place the comments of one list (between ``lo`` and ``hi``), then go inside."""
        for comment in self.between(lo, hi):
            if not any(s.start <= comment.start_byte < s.end for s in spans):
                self.place(where, spans, comment)
        for span in spans:
            inner = (*where, span.key)
            if span.node.kind_id == K_SUBJECT:
                self.subject(inner, span, str(span.key[0]))
            elif owner == "tool":
                nodes = _path_nodes(span.node)
                keys: list[Key] = []
                for i, node in enumerate(nodes):
                    info = self.decoder.info(node)
                    if i == len(nodes) - 1:
                        keys.append(("result",))
                    elif info.ident is None:
                        keys.append(("arguments",))
                    else:
                        keys.append(("param", info.ident))
                self.orders[inner] = list(keys)
                inside = [_Span(k, n, n.start_byte, n.end_byte)
                          for k, n in zip(keys, nodes, strict=True)]
                self.visit(inner, inside, span.start, span.end, "path")
            elif span.node.kind_id == K_NODE:  # a node of a path, or a member
                record = next((c for c in span.node.named_children if c.kind_id == K_RECORD),
                              None)
                entries = self.entries((*inner, RECORD), record)
                for comment in self.between(span.start, span.end):
                    self.in_record((*inner, RECORD), entries, comment)

    def entries(self, where: tuple[Key, ...], record: Node | None) -> list[_Span]:
        """The entries of a record (list ``where``), noting their source order."""
        spans = []
        for entry in record.named_children if record is not None else ():
            key = key_value(entry)[0] if entry.kind_id == K_PROPERTY else None
            if key is not None:
                spans.append(_Span(("entry", self.decoder.name(key)), entry,
                                   _edge(entry, last=False), _edge(entry, last=True)))
        self.orders[where] = [s.key for s in spans]
        return spans

    def in_record(self, where: tuple[Key, ...], entries: list[_Span], comment: Node) -> None:
        """Place a comment of a record's owner with the entries of the record: one inside
        an entry (in its value, ...) goes on the lines above that entry."""
        entry = next((s for s in entries if s.start <= comment.start_byte < s.end), None)
        if entry is None:
            self.place(where, entries, comment)
            return
        slot = self.slots.setdefault(where, {}).setdefault(entry.key,
                                                           _Slot(comment.start_byte))
        slot.before.append(self.text(comment))

    def subject(self, where: tuple[Key, ...], span: _Span, owner: str) -> None:
        """The comments of a pattern: in its head (before ``|``) with its record, or with
        the first element after ``|``; then those between and inside its elements."""
        node = span.node
        bar = next((c for c in node.children if c.type == "|"), None)
        record = next((c for c in node.named_children if c.kind_id == K_RECORD), None)
        elements = next((c for c in node.named_children if c.kind_id == K_ELEMENTS), None)
        children = [] if elements is None else [
            c for c in elements.named_children if c.kind_id != K_COMMENT]
        spans = [self.span(c, owner, i) for i, c in enumerate(children)]
        record_where = (*where, RECORD)
        entries = self.entries(record_where, record)
        after_record = record.end_byte if record is not None else span.start
        for comment in self.between(span.start, bar.start_byte if bar else span.end):
            start = comment.start_byte
            trailing = bool(entries) and b"\n" not in self.src[entries[-1].end: start]
            if spans and start >= after_record and not trailing:
                self.place(where, spans, comment)  # before the first element after '|'
            else:
                self.in_record(record_where, entries, comment)
        if bar is not None:
            self.visit(where, spans, bar.end_byte, span.end, owner)

    def place(self, where: tuple[Key, ...], spans: list[_Span], comment: Node) -> None:
        start, end = comment.start_byte, comment.end_byte
        before = [s for s in spans if s.end <= start]
        after = [s for s in spans if s.start >= end]
        slots = self.slots.setdefault(where, {})
        text = self.text(comment)
        if before and b"\n" not in self.src[before[-1].end: start]:
            trail = slots.setdefault(before[-1].key, _Slot(start))
            if trail.after is None:
                trail.after = text
                return
            self.stray.append((start, "next to another comment on the same line"))
            return
        key = after[0].key if after else None
        slot = slots.get(key)
        if slot is None:
            slot = slots[key] = _Slot(start)
            if key is None and before and self._blank(before[-1].end, start):
                slot.before.append("")
        elif slot.end >= 0 and self._blank(slot.end, start):
            slot.before.append("")
        slot.before.append(text)
        slot.end = end
        slot.gap = bool(after) and self._blank(end, after[0].start)

    def _blank(self, lo: int, hi: int) -> bool:
        """Whether a blank line separates ``lo`` from ``hi``."""
        return self.src.count(b"\n", lo, hi) >= 2


def _path_nodes(node: Node) -> list[Node]:
    """The nodes of a signature path, in order (a path nests one relationship a node)."""
    out: list[Node] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if current.kind_id == K_NODE:
            out.append(current)
            continue
        stack.extend(reversed([c for c in current.named_children
                               if c.kind_id in (K_NODE, K_RELATIONSHIP)]))
    return out


def collect_comments(tree: Tree, decoder: Decoder, *, by_position: bool = False) -> Comments:
    """The comments of a parsed text, by the element they go with (and the few with no
    element to go with); ``by_position``: patterns and elements keyed by their place in
    their list, not by what they are and their name."""
    return _Collector(tree, decoder, by_position=by_position).run()
