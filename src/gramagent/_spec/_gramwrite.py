"""The gram writer: spec objects -> canonical gram text, keeping a source text's comments.

:func:`write_gram` emits the canonical form (described in ``docs/signatures.md``): in a
document, file-level type patterns first, then stand-alone tools, then agents, one blank line
apart. Names the text was read with are kept: type patterns keep their names, and file-level
types stay at file level, written once, however many tools use them.

For ``gramagent fmt``, :func:`collect_comments` maps each ``//`` comment of a parsed text to
the element it sits next to, so that the writer can put it back:

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
the canonical order puts it. When the canonical form leaves an element out (a redundant
``required: true``, a keyword that repeats its named type, an empty arguments node), its
comments go to the next element of its list that is written, else to the end of the list;
when a node or pattern is written with no record at all, the comments of its record go on
the lines above it.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import NamedTuple

from tree_sitter import Node, Tree

from gramagent._spec._gramsyntax import (
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
    parse,
)
from gramagent._spec.model import Agent, GramDocument, NamedType, ToolSpec
from gramagent._spec.signature import (
    ListNotes,
    Notes,
    SignatureWriter,
    TypePattern,
    format_name,
    quote_string,
    render_elements,
)

__all__ = ["CommentMap", "Comments", "collect_comments", "write_gram"]

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

_PATH: Key = ("path",)
_RECORD: Key = ("record",)
_HEADER: Key = ("header",)


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------

def _string(text: str, indent: str, *, fence: bool) -> str:
    """A string value; multi-line ones fenced when that reads back exactly."""
    if fence and "\n" in text and "```" not in text and "\0" not in text:
        body = "\n".join(indent + line if line else "" for line in text.split("\n"))
        literal = "```\n" + body + "\n" + indent + "```"
        if _reads_back(literal, text):
            return literal
    return quote_string(text)


def _reads_back(literal: str, text: str) -> bool:
    """Whether a string literal reads as ``text`` (fences drop leading blank lines, ...)."""
    src = f"[x {{v: {literal}}}]".encode()
    tree = parse(src)
    if tree.root_node.has_error:
        return False
    subject = tree.root_node.named_children[0]
    record = next(c for c in subject.named_children if c.kind_id == K_RECORD)
    entries = Decoder(src).entries(record)
    return len(entries) == 1 and entries[0][2][1] == text


def _file_types(tools: Iterable[ToolSpec], declared: Iterable[NamedType] = ()
                ) -> dict[str, NamedType]:
    """The file-level types to write: those declared, then the shared ones tools use (the
    first of each name; a tool whose type differs keeps its own copy)."""
    out = {t.name: t for t in declared}
    for spec in tools:
        for named in spec.signature.named_types:
            if named.shared:
                out.setdefault(named.name, named)
    return out


def _lines(note: Notes) -> list[str]:
    """A note's comments as whole lines (its trailing comment last, blank lines left out)."""
    return [c for c in note.before if c] + ([] if note.after is None else [note.after])


class _Writer:
    """Writes spec objects; places (and pops) the comments of ``comments`` as it goes."""

    def __init__(self, comments: Comments | None = None) -> None:
        self.comments: CommentMap = comments.notes if comments is not None else {}
        self.orders: Orders = comments.orders if comments is not None else {}

    def notes(self, where: tuple[Key, ...]) -> ListNotes | None:
        return self.comments.get(where)

    # ---- comments ---------------------------------------------------------------------------

    def settle(self, where: tuple[Key, ...], present: Sequence[Hashable], *, end: bool
               ) -> tuple[ListNotes, list[str]]:
        """The notes of a list whose written elements are ``present``.

        An element of the source that is not written hands its comments (as whole lines) to
        the next written one, in source order; those after the last one go to the end of
        the list (``end``), or are returned as lines for the caller to put above the list's
        owner (when the list is not written at all, or has no end).
        """
        notes = self.comments.get(where)
        if not notes:
            return {}, []
        written = set(present)
        out: ListNotes = {}
        carry: list[str] = []
        for key in self.orders.get(where, ()):
            note = notes.pop(key, None)
            if key not in written:
                carry += _lines(note) if note is not None else []
                continue
            if carry:
                note = Notes((*carry, *(note.before if note else ())),
                             note.after if note else None, note.offset if note else 0)
                carry = []
            if note is not None:
                out[key] = note
        last = notes.pop(None, None)
        lines = [*carry, *(last.before if last is not None else ())]
        if not lines:
            return out, []
        if not end:
            return out, [c for c in lines if c]
        out[None] = Notes(tuple(lines), None, last.offset if last is not None else 0)
        return out, []

    def hoist(self, where: tuple[Key, ...], key: Hashable, lines: list[str]) -> None:
        """Put comment ``lines`` on the lines above element ``key`` of list ``where`` (after
        the comments already there, which come first in the source)."""
        if not lines:
            return
        notes = self.comments.setdefault(where, {})
        old = notes.get(key)
        notes[key] = (Notes(tuple(lines)) if old is None
                      else Notes((*old.before, *lines), old.after, old.offset))

    def record(self, text: str, indent: str, where: tuple[Key, ...]) -> tuple[str, list[str]]:
        """``text`` (a node or pattern, its first line at ``indent``) with the comments of
        its record (list ``where``): the record is then written one entry a line. Also gives
        the comment lines that have no place in the record, for above the element."""
        if where not in self.comments:
            return text, []
        src = text.encode()
        pattern = parse(src).root_node.named_children[0]
        record = next((c for c in pattern.named_children if c.kind_id == K_RECORD), None)
        decoder = Decoder(src)
        entries: list[tuple[Hashable, str]] = []
        for prop in record.named_children if record is not None else ():
            key = key_value(prop)[0]
            if key is not None:
                entries.append((("entry", decoder.name(key)),
                                src[prop.start_byte: prop.end_byte].decode()))
        notes, above = self.settle(where, [k for k, _ in entries], end=record is not None)
        if record is None or not notes:
            return text, above
        inner = indent + "  "
        body = render_elements([(k, inner + t) for k, t in entries], inner, notes)
        text = (src[: record.start_byte].decode() + "{\n" + body + "\n" + indent + "}"
                + src[record.end_byte:].decode())
        return text, above

    # ---- blocks -----------------------------------------------------------------------------

    def pattern(self, pattern: TypePattern, indent: str, where: tuple[Key, ...]) -> str:
        """A type pattern (element ``where[-1]`` of list ``where[:-1]``) with its comments."""
        members = []
        for name, node in pattern.members:
            key = ("member", name)
            node, above = self.record(node, indent + "  ", (*where, key, _RECORD))
            self.hoist(where, key, above)
            members.append((name, node))
        if members != pattern.members:
            pattern = dataclasses.replace(pattern, members=members)
        text, above = self.record(pattern.render(indent, self.notes(where)), indent,
                                  (*where, _RECORD))
        self.hoist(where[:-1], where[-1], above)
        return text

    def tool(self, spec: ToolSpec, indent: str, where: tuple[Key, ...],
             file_types: Mapping[str, NamedType]) -> str:
        sig = spec.signature
        own = [t for t in sig.named_types if not (t.shared and file_types.get(t.name) == t)]
        writer = SignatureWriter(own, file_types.values())
        inner = indent + "  "
        keys: list[Key] = [("param", p.name) for p in sig.params]
        nodes = writer.nodes(sig)
        keys = [*([("arguments",)] if len(nodes) > len(keys) + 1 else []), *keys, ("result",)]
        path = self.path(nodes, keys, inner, where)
        parts: list[tuple[Hashable, str]] = [(_PATH, path)]
        for pattern in writer.definitions:
            key = ("type", pattern.name)
            parts.append((key, self.pattern(pattern, inner, (*where, key))))
        description = ("entry", "description")
        notes, _ = self.settle((*where, _RECORD), [description], end=True)
        head = f"{indent}[{format_name(spec.name)}:Tool {{description: " \
               f"{quote_string(spec.description)}}} |"
        if notes or "\n" in spec.description or len(head) > 100:
            entry = f"{inner}description: {_string(spec.description, inner, fence=True)}"
            record = render_elements([(description, entry)], inner, notes)
            head = f"{indent}[{format_name(spec.name)}:Tool {{\n{record}\n{indent}}} |"
        return (head + "\n" + render_elements(parts, inner, self.notes(where)) + "\n" + indent
                + "]")

    def path(self, nodes: list[str], keys: list[Key], inner: str, where: tuple[Key, ...]
             ) -> str:
        """The signature path of the tool at ``where``: on one line (broken before each
        arrow when too long), or one node per line when comments sit between its nodes or
        inside them. Comments above the first node go above the path, in the tool's list."""
        path_where = (*where, _PATH)
        for left in self.orders.get(path_where, ()):
            if left not in keys:  # a node left out (an empty arguments node): the comments
                _, inside = self.settle((*path_where, left, _RECORD), (), end=False)
                self.hoist(path_where, left, inside)  # inside it go on with its own
        texts: list[str] = []
        above: list[list[str]] = []
        for key, node in zip(keys, nodes, strict=True):
            text, up = self.record(node, inner, (*path_where, key, _RECORD))
            texts.append(text)
            above.append(up)
        # The result node is always written, so nothing is left over in practice (rest).
        notes, rest = self.settle(path_where, keys, end=False)
        for i, key in enumerate(keys):
            note = notes.pop(key, None)
            before = [*(note.before if note is not None else ()), *above[i]]
            if i == 0:
                self.hoist(where, _PATH, [*before, *rest])
                before = []
            if before or (note is not None and note.after is not None):
                notes[key] = Notes(tuple(before), note.after if note is not None else None)
        if not notes and not any("\n" in t for t in texts):
            path = "==>".join(texts)
            if len(inner) + len(path) > 100:
                path = f"\n{inner}==>".join(texts)
            return inner + path
        lines: list[str] = []
        for i, (key, text) in enumerate(zip(keys, texts, strict=True)):
            text = inner + ("==>" if i else "") + text
            note = notes.pop(key, None)
            if note is not None:
                lines.extend(inner + c if c else "" for c in note.before)
                if note.after is not None:
                    text += "  " + note.after
            lines.append(text)
        return "\n".join(lines)

    def agent(self, agent: Agent, shared: Mapping[str, ToolSpec],
              file_types: Mapping[str, NamedType]) -> str:
        where: tuple[Key, ...] = (("agent", agent.name),)
        entries: list[tuple[Hashable, str]] = []
        if agent.description is not None:
            entries.append((("entry", "description"),
                            f"  description: {_string(agent.description, '  ', fence=True)}"))
        entries.append((("entry", "instruction"),
                        f"  instruction: {_string(agent.instruction, '  ', fence=True)}"))
        entries.append((("entry", "model"), f"  model: {quote_string(str(agent.model))}"))
        notes, _ = self.settle((*where, _RECORD), [k for k, _ in entries], end=True)
        record = render_elements(entries, "  ", notes)
        head = f"[{format_name(agent.name)}:Agent {{\n{record}\n}}"
        if not agent.tools:
            return head + "]"
        items: list[tuple[Hashable, str]] = []
        for spec in agent.tools:
            key = ("tool", spec.name)
            if shared.get(spec.name) == spec:
                items.append((key, f"  {format_name(spec.name)}"))
            else:
                items.append((key, self.tool(spec, "  ", (*where, key), file_types)))
        return head + " |\n" + render_elements(items, "  ", self.notes(where)) + "\n]"

    # ---- files ------------------------------------------------------------------------------

    def file(self, types: Mapping[str, NamedType], tools: Iterable[ToolSpec],
             agents: Iterable[Agent]) -> str:
        """File-level types, stand-alone tools and agents, one blank line apart."""
        blocks: list[tuple[Key, str]] = []
        writer = SignatureWriter(types.values())
        for pattern in writer.definitions:
            key = ("type", pattern.name)
            blocks.append((key, self.pattern(pattern, "", (key,))))
        shared = {}
        for spec in tools:
            key = ("tool", spec.name)
            shared[spec.name] = spec
            blocks.append((key, self.tool(spec, "", (key,), types)))
        for agent in agents:
            blocks.append((("agent", agent.name), self.agent(agent, shared, types)))
        notes = self.notes(())
        out = []
        header = notes.pop(_HEADER, None) if notes else None
        if header is not None:
            out.append("\n".join(header.before))
        for where, block in blocks:
            note = notes.pop(where, None) if notes else None
            text = block
            if note is not None:
                text = "\n".join([*note.before, block]) + (
                    "" if note.after is None else "  " + note.after)
            out.append(text)
        text = "\n\n".join(out)
        end = notes.pop(None, None) if notes else None
        if end is not None:
            lines = "\n".join(end.before)
            text = text + "\n" + lines if out else lines.lstrip("\n")
        return text + "\n"


def write_gram(obj: Agent | ToolSpec | GramDocument, comments: Comments | None = None
               ) -> str:
    """The canonical gram text of an agent, a tool spec or a whole document.

    A tool spec is written whole (its type patterns inside it). In a document (and for an
    agent), file-level type patterns (``NamedType.shared``) are written once at the top, and
    an agent's tool equal to a stand-alone one is written as a reference to it. ``comments``
    (from :func:`collect_comments`) are placed and popped as the writer goes.
    """
    writer = _Writer(comments)
    if isinstance(obj, ToolSpec):
        return writer.tool(obj, "", (("tool", obj.name),), {}) + "\n"
    if isinstance(obj, Agent):
        return writer.file(_file_types(obj.tools), (), (obj,))
    if isinstance(obj, GramDocument):
        specs = [*obj.tools, *(t for a in obj.agents for t in a.tools)]
        return writer.file(_file_types(specs, obj.types), obj.tools, obj.agents)
    raise TypeError(f"to_gram() takes an Agent, ToolSpec or GramDocument, not "
                    f"{type(obj).__name__}")


# --------------------------------------------------------------------------------------------
# Comments
# --------------------------------------------------------------------------------------------

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
    def __init__(self, tree: Tree, decoder: Decoder) -> None:
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
        spans = [self.span(c, "file") for c in elements]
        self.visit((), spans, 0, len(self.src), "file")
        first = self.slots.get((), {}).get(spans[0].key) if spans else None
        lines = [] if first is None else [*first.before, *([""] if first.gap else [])]
        if first is not None and "" in lines:  # a header, apart from the first pattern
            cut = len(lines) - lines[::-1].index("")
            header = self.slots[()][_HEADER] = _Slot(first.offset)
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

    def span(self, node: Node, owner: str) -> _Span:
        """The key of an element of a list of kind ``owner`` (file, agent, tool, type)."""
        kind = node.kind_id
        key: Key
        if kind == K_REFERENCE:
            key = ("tool", self.decoder.name(node))
        elif kind == K_SUBJECT:
            info = self.decoder.info(node)
            if owner == "file":
                what = {"Agent": "agent", "Tool": "tool"}.get(":".join(info.labels), "type")
            else:
                what = "tool" if owner == "agent" else "type"
            key = (what, info.ident)
        elif owner == "tool":
            key = _PATH
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
                entries = self.entries((*inner, _RECORD), record)
                for comment in self.between(span.start, span.end):
                    self.in_record((*inner, _RECORD), entries, comment)

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
        spans = [self.span(c, owner) for c in children]
        record_where = (*where, _RECORD)
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
    if node.kind_id == K_NODE:
        return [node]
    out: list[Node] = []
    for child in node.named_children:
        if child.kind_id in (K_NODE, K_RELATIONSHIP):
            out.extend(_path_nodes(child))
    return out


def collect_comments(tree: Tree, decoder: Decoder) -> Comments:
    """The comments of a parsed text, by the element they go with (and the few with no
    element to go with)."""
    return _Collector(tree, decoder).run()
