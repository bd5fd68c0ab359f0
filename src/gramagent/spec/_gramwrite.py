"""The gram writer: spec objects -> canonical gram text, keeping a source text's comments.

:func:`write_gram` emits the canonical form (described in ``docs/signatures.md``): in a
document, file-level type patterns first, then stand-alone tools, then agents, one blank line
apart. Names the text was read with are kept: type patterns keep their names, and file-level
types stay at file level, written once, however many tools use them.

For ``gramagent fmt``, :func:`collect_comments` maps each ``//`` comment of a parsed text to
the list element it sits next to, so that the writer can put it back:

- between top-level patterns (before one, at the end of its last line, or at the end of the
  file);
- between the elements after ``|`` of an agent (tools), a tool (its signature and type
  patterns) and a type pattern (its members);
- between the nodes of a signature path;
- between the entries of an agent's record (written one a line).

Elements are keyed by what they are and their name (``("tool", "getForecast")``,
``("member", "city")``, ``("path",)``, ``("param", "days")``), lists by the keys of the
elements enclosing them, so comments follow their element wherever the canonical order puts
it. A comment anywhere else (inside a record, a node or a pattern's header) is reported
instead, with its position.
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable, Iterable, Mapping
from typing import NamedTuple

from tree_sitter import Node, Tree

from gramagent.spec._gramsyntax import (
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
from gramagent.spec.model import Agent, GramDocument, NamedType, ToolSpec
from gramagent.spec.signature import (
    ListNotes,
    Notes,
    SignatureWriter,
    format_name,
    quote_string,
    render_elements,
)

__all__ = ["CommentMap", "collect_comments", "write_gram"]

Key = tuple[Hashable, ...]
"""An element key, e.g. ``("tool", "getForecast")``."""

CommentMap = dict[tuple[Key, ...], ListNotes]
"""Comments by list (the keys of the enclosing elements, ``()`` for the file) and element."""

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


class _Writer:
    """Writes spec objects; places (and pops) the comments of ``comments`` as it goes."""

    def __init__(self, comments: CommentMap | None = None) -> None:
        self.comments = comments if comments is not None else {}

    def notes(self, where: tuple[Key, ...]) -> ListNotes | None:
        return self.comments.get(where)

    # ---- blocks -----------------------------------------------------------------------------

    def tool(self, spec: ToolSpec, indent: str, where: tuple[Key, ...],
             file_types: Mapping[str, NamedType]) -> str:
        sig = spec.signature
        own = [t for t in sig.named_types if not (t.shared and file_types.get(t.name) == t)]
        writer = SignatureWriter(own, file_types.values())
        nodes = writer.nodes(sig)
        inner = indent + "  "
        keys: list[Key] = [("param", p.name) for p in sig.params]
        keys = [*([("arguments",)] if len(nodes) > len(keys) + 1 else []), *keys, ("result",)]
        path_notes = self.notes((*where, _PATH))
        if path_notes:
            path = self._path(nodes, keys, inner, path_notes)
        else:
            path = "==>".join(nodes)
            if len(inner) + len(path) > 100:
                path = f"\n{inner}==>".join(nodes)
            path = inner + path
        parts: list[tuple[Hashable, str]] = [(_PATH, path)]
        for pattern in writer.definitions:
            key = ("type", pattern.name)
            parts.append((key, pattern.render(inner, self.notes((*where, key)))))
        head = f"{indent}[{format_name(spec.name)}:Tool {{description: " \
               f"{quote_string(spec.description)}}} |"
        if "\n" in spec.description or len(head) > 100:
            description = _string(spec.description, inner, fence=True)
            head = (f"{indent}[{format_name(spec.name)}:Tool {{\n{inner}description: "
                    f"{description}\n{indent}}} |")
        return (head + "\n" + render_elements(parts, inner, self.notes(where)) + "\n" + indent
                + "]")

    @staticmethod
    def _path(nodes: list[str], keys: list[Key], inner: str, path_notes: ListNotes) -> str:
        """A path one node per line, with the comments between its nodes (a comment after
        the last node is one after the path, in the tool's list)."""
        lines: list[str] = []
        for i, (key, node) in enumerate(zip(keys, nodes, strict=True)):
            text = inner + ("==>" if i else "") + node
            note = path_notes.pop(key, None)
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
        record = render_elements(entries, "  ", self.notes((*where, _RECORD)))
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
            blocks.append((key, pattern.render("", self.notes((key,)))))
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


def write_gram(obj: Agent | ToolSpec | GramDocument, comments: CommentMap | None = None
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
        self.stray: list[tuple[int, str]] = []

    def run(self) -> tuple[CommentMap, list[tuple[int, str]]]:
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
        return out, sorted(self.stray)

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
                inside = [_Span(k, n, n.start_byte, n.end_byte)
                          for k, n in zip(keys, nodes, strict=True)]
                self.visit(inner, inside, span.start, span.end, "path")
            else:
                for comment in self.between(span.start, span.end):
                    self.stray.append((comment.start_byte, _inside(comment)))

    def subject(self, where: tuple[Key, ...], span: _Span, owner: str) -> None:
        node = span.node
        bar = next((c for c in node.children if c.type == "|"), None)
        split = bar.end_byte if bar is not None else span.end
        record = next((c for c in node.named_children if c.kind_id == K_RECORD), None)
        if owner == "agent" and record is not None:  # one entry a line: comments fit
            entries = [c for c in record.named_children if c.kind_id != K_COMMENT]
            spans = [_Span(("entry", self.decoder.name(key)), e, _edge(e, last=False),
                           _edge(e, last=True))
                     for e in entries if (key := key_value(e)[0]) is not None]
            self.visit((*where, _RECORD), spans, record.start_byte + 1, record.end_byte - 1,
                       "record")
            header = [c for c in self.between(span.start, split)
                      if not record.start_byte < c.start_byte < record.end_byte]
        else:
            header = self.between(span.start, split)
        for comment in header:
            self.stray.append((comment.start_byte, _inside(comment)))
        if bar is None:
            return
        elements = next((c for c in node.named_children if c.kind_id == K_ELEMENTS), None)
        children = [] if elements is None else [
            c for c in elements.named_children if c.kind_id != K_COMMENT]
        self.visit(where, [self.span(c, owner) for c in children], split, span.end, owner)

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


_WHERE = {K_PROPERTY: "inside a property (key: value)", K_RECORD: "inside a record {...}",
          K_NODE: "inside a node (...)", K_SUBJECT: "before the '|' of a pattern"}


def _inside(comment: Node) -> str:
    """Where a comment the writer cannot place stands, for the message."""
    parent = comment.parent
    while parent is not None and parent.kind_id not in _WHERE:
        parent = parent.parent
    return _WHERE[parent.kind_id] if parent is not None else "inside a value"


def collect_comments(tree: Tree, decoder: Decoder) -> tuple[CommentMap, list[tuple[int, str]]]:
    """The comments of a parsed text, by the element they go with, and the ones the writer
    cannot place: ``(byte offset, why)``."""
    return _Collector(tree, decoder).run()
