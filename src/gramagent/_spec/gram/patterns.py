"""A canonical printer of gram patterns the agent vocabulary does not know, keeping comments.

The agent writer (:mod:`gramagent._spec.gram.docwriter`) writes what the spec reader
understood. Files of other vocabularies built on gram (experiments:
``[name:Experiment {...} | [A:Variant {...}], [judge:Evaluator {...}]]``) are written here
from their syntax instead, in the same canonical style, so that their meaning, whatever it is,
stays as it was:

- top-level patterns one blank line apart, their records one entry a line (as agents');
- the elements after ``|`` one a line, two spaces in, in their order; a nested pattern's
  record on its line (``[A:Variant {library: "m:polite", limits: {max_iterations: 4}}]``),
  or one entry a line when it holds a comment or a multi-line string, or would run past
  100 columns;
- entries in the order the caller gives for the pattern's labels (``orders``), the others
  after them in their order;
- values in one form: double-quoted strings (a fence for a multi-line string of an entry on
  a line of its own, when that reads back exactly), numbers in decimal (``0x1F`` becomes
  ``31``, ``1.50`` becomes ``1.5``), ``json`...``` with its JSON written compactly when
  that reads back equal, keys and names bare when they are symbols.

Comments are kept as :mod:`gramagent._spec.gram.comments` finds them (``by_position``): with
the pattern, element or entry they annotate, wherever entries move.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

from tree_sitter import Node

from gramagent._spec.gram.comments import ELEMENT, HEADER, RECORD, CommentMap, Comments, Key
from gramagent._spec.gram.docwriter import string_value
from gramagent._spec.gram.layout import ListNotes, Notes, render_elements
from gramagent._spec.gram.literals import format_key, format_name, json_literal
from gramagent._spec.gram.syntax import (
    K_ARRAY,
    K_BOOLEAN,
    K_COMMENT,
    K_DECIMAL,
    K_ELEMENTS,
    K_HEX,
    K_INTEGER,
    K_MAP,
    K_OCTAL,
    K_PROPERTY,
    K_RECORD,
    K_REFERENCE,
    K_STRING,
    K_SUBJECT,
    K_TAGGED,
    V_JSON,
    V_SCALAR,
    Decoder,
    key_value,
    parse,
)
from gramagent.errors import Diagnostic, SpecError

__all__ = ["WIDTH", "write_patterns"]

WIDTH = 100
"""Columns past which a nested pattern's record is written one entry a line."""

_NUMBERS = frozenset({K_INTEGER, K_HEX, K_OCTAL, K_DECIMAL})


class _Printer:
    def __init__(self, decoder: Decoder, file: str | None, comments: Comments | None,
                 orders: Mapping[str, Sequence[str]]) -> None:
        self.decoder = decoder
        self.file = file
        self.notes: CommentMap = comments.notes if comments is not None else {}
        self.orders = orders

    def problem(self, offset: int, message: str) -> SpecError:
        line, column = self.decoder.position(offset)
        return SpecError([Diagnostic(message, self.file, line, column)])

    # ---- values -----------------------------------------------------------------------------

    def value(self, node: Node, indent: str, *, fence: bool) -> str:
        """The canonical text of a value node (its first line at ``indent``)."""
        kind = node.kind_id
        if kind == K_ARRAY:
            return "[" + ", ".join(self.value(c, indent, fence=False) for c in _named(node)) + "]"
        if kind == K_MAP:
            entries = []
            for entry in _named(node):
                key, val = key_value(entry)
                if key is None or val is None:  # not in a tree without errors
                    return self.decoder.text(node)
                entries.append(f"{format_key(self.decoder.name(key))}: "
                               f"{self.value(val, indent, fence=False)}")
            return "{" + ", ".join(entries) + "}"
        decoded = self.decoder.value(node)
        if kind in (K_STRING, K_TAGGED) and decoded[0] == V_SCALAR:
            return string_value(decoded[1], indent, fence=fence)
        if kind == K_TAGGED and decoded[0] == V_JSON:
            try:
                literal = json_literal(decoded[1])
            except ValueError:  # what JSON has no compact form for (1e400 reads as inf)
                return self.decoder.text(node)
            return literal if _reads_back(literal, decoded[1]) else self.decoder.text(node)
        if kind == K_BOOLEAN:
            return "true" if decoded[1] else "false"
        if kind in _NUMBERS:
            text = repr(decoded[1])
            return text if _reads_back(text, decoded[1]) else self.decoder.text(node)
        return self.decoder.text(node)  # a name (null), or what is no value (a range, ...)

    # ---- records ----------------------------------------------------------------------------

    def entries(self, record: Node, labels: tuple[str, ...], indent: str
                ) -> list[tuple[Hashable, str]]:
        """A record's entries as ``key: value`` texts in canonical order, each value's first
        line at ``indent`` (a multi-line string fenced)."""
        found: list[tuple[str, Node]] = []
        seen: set[str] = set()
        for prop in _named(record):
            key, val = key_value(prop) if prop.kind_id == K_PROPERTY else (None, None)
            if key is None or val is None:
                raise self.problem(prop.start_byte, "expected a record entry 'key: value'")
            name = self.decoder.name(key)
            if name in seen:
                raise self.problem(key.start_byte, f"duplicate key '{name}'")
            seen.add(name)
            found.append((name, val))
        rank = {k: i for i, k in enumerate(self.orders.get(":".join(labels), ()))}
        found.sort(key=lambda e: rank.get(e[0], len(rank)))  # stable: the others keep theirs
        return [(("entry", name), f"{format_key(name)}: {self.value(val, indent, fence=True)}")
                for name, val in found]

    def record(self, record: Node, labels: tuple[str, ...], indent: str,
               where: tuple[Key, ...], *, open_: bool, head: int) -> str:
        """A record: one entry a line when ``open_``, when it holds comments or a multi-line
        value, or when on one line it would end past :data:`WIDTH` (``head`` columns before
        it); else on one line."""
        notes = self.notes.get((*where, RECORD))
        inner = indent + "  "
        entries = self.entries(record, labels, inner)
        if not entries and not notes:
            return "{}"
        if not open_ and not notes:
            text = "{" + ", ".join(t for _, t in entries) + "}"
            if "\n" not in text and head + len(text) + 2 <= WIDTH:  # and "],"
                return text
        body = render_elements([(k, inner + t) for k, t in entries], inner, notes)
        return "{\n" + body + "\n" + indent + "}"

    # ---- patterns ---------------------------------------------------------------------------

    def pattern(self, node: Node, indent: str, where: tuple[Key, ...], *, top: bool) -> str:
        """A subject pattern (element ``where[-1]`` of list ``where[:-1]``) with its comments."""
        info = self.decoder.info(node)
        head = indent + "[" + ("" if info.ident is None else format_name(info.ident))
        head += "".join(":" + format_name(label) for label in info.labels)
        record = next((c for c in node.named_children if c.kind_id == K_RECORD), None)
        if record is not None:
            head += " " + self.record(record, info.labels, indent, where, open_=top,
                                      head=len(head) + 1)
        else:
            self.hoist(where, self.notes.pop((*where, RECORD), None))
        elements = next((c for c in node.named_children if c.kind_id == K_ELEMENTS), None)
        children = [] if elements is None else [c for c in elements.named_children
                                                 if c.kind_id != K_COMMENT]
        if not children:
            return head + "]"
        inner = indent + "  "
        items: list[tuple[Hashable, str]] = []
        for i, child in enumerate(children):
            key: Key = (ELEMENT, i)
            if child.kind_id == K_SUBJECT:
                items.append((key, self.pattern(child, inner, (*where, key), top=False)))
            elif child.kind_id == K_REFERENCE:
                items.append((key, inner + format_name(self.decoder.name(child))))
            else:
                raise self.problem(child.start_byte,
                                   "expected a pattern [...] or a pattern's name")
        return (head + " |\n" + render_elements(items, inner, self.notes.get(where)) + "\n"
                + indent + "]")

    def hoist(self, where: tuple[Key, ...], notes: ListNotes | None) -> None:
        """The comments of a pattern without a record (in its head): above the pattern."""
        if not notes:
            return
        lines = [c for n in notes.values() for c in (*n.before, *(
            () if n.after is None else (n.after,))) if c]
        parent = self.notes.setdefault(where[:-1], {})
        old = parent.get(where[-1])
        parent[where[-1]] = (Notes(tuple(lines)) if old is None
                             else Notes((*old.before, *lines), old.after, old.offset))

    def document(self, root: Node) -> str:
        """The top-level patterns one blank line apart, with the comments between them."""
        blocks: list[str] = []
        children = [c for c in root.named_children if c.kind_id != K_COMMENT]
        texts = []
        for i, child in enumerate(children):
            if child.kind_id != K_SUBJECT:
                raise self.problem(child.start_byte, "expected a pattern [...] at the top "
                                                     "level")
            texts.append(self.pattern(child, "", ((ELEMENT, i),), top=True))
        notes = self.notes.get((), {})
        header = notes.pop(HEADER, None)
        if header is not None:
            blocks.append("\n".join(header.before))
        for i, text in enumerate(texts):
            note = notes.pop((ELEMENT, i), None)
            if note is not None:
                text = "\n".join([*note.before, text]) + (
                    "" if note.after is None else "  " + note.after)
            blocks.append(text)
        out = "\n\n".join(blocks)
        end = notes.pop(None, None)
        if end is not None:
            lines = "\n".join(end.before)
            out = out + "\n" + lines if blocks else lines.lstrip("\n")
        return out + "\n"


def _named(node: Node) -> list[Node]:
    return [c for c in node.named_children if c.kind_id != K_COMMENT]


def _reads_back(literal: str, value: object) -> bool:
    """Whether a value literal reads as ``value`` (same type and value)."""
    src = f"[x {{v: {literal}}}]".encode()
    tree = parse(src)
    if tree.root_node.has_error:
        return False
    subject = tree.root_node.named_children[0]
    record = next(c for c in subject.named_children if c.kind_id == K_RECORD)
    prop = _named(record)[0]
    val = key_value(prop)[1]
    if val is None:
        return False
    got = Decoder(src, fast=False).value(val)[1]
    return type(got) is type(value) and got == value


def write_patterns(src: bytes, root: Node, comments: Comments | None = None, *,
                   orders: Mapping[str, Sequence[str]] | None = None,
                   file: str | None = None) -> str:
    """The canonical text of the patterns of a parsed text without syntax errors.

    Args:
        src: The text that was parsed (UTF-8).
        root: Its syntax tree's root.
        comments: Its comments (``collect_comments(..., by_position=True)``); the printer
            pops those it places, so what is left found no place.
        orders: The order of record entries, by the pattern's labels joined with ``:``
            (``{"Experiment": ["agent", "cases", ...]}``); keys it does not name follow, in
            their order.

    Raises:
        SpecError: A top-level element that is not a pattern, an element after ``|`` that
            is neither a pattern nor a name, or a record with a key twice (positioned in
            ``file``).
    """
    return _Printer(Decoder(src), file, comments, orders or {}).document(root)
