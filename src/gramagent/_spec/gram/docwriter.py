"""The gram writer: spec objects -> canonical gram text, keeping a source text's comments.

:func:`write_gram` emits the canonical form (described in ``docs/signatures.md``): in a
document, file-level type patterns first, then stand-alone tools, then agents, one blank line
apart. Names the text was read with are kept: type patterns keep their names, and file-level
types stay at file level, written once, however many tools use them.

Given the comments of the text (:func:`gramagent._spec.gram.comments.collect_comments`), the writer
puts each back next to its element. When the canonical form leaves an element out (a
redundant ``required: true``, a keyword that repeats its named type, an empty arguments node),
its comments go to the next element of its list that is written, else to the end of the list;
when a node or pattern is written with no record at all, the comments of its record go on the
lines above it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Iterable, Mapping, Sequence

from gramagent._spec.data import NamedType
from gramagent._spec.gram.comments import (
    HEADER,
    PATH,
    RECORD,
    CommentMap,
    Comments,
    Key,
    Orders,
)
from gramagent._spec.gram.layout import ListNotes, Notes, render_elements
from gramagent._spec.gram.literals import format_name, quote_string
from gramagent._spec.gram.sigwriter import SignatureWriter, TypePattern
from gramagent._spec.gram.syntax import K_RECORD, Decoder, key_value, parse
from gramagent._spec.model import Agent, GramDocument, ToolSpec

__all__ = ["string_value", "write_gram"]


def string_value(text: str, indent: str, *, fence: bool) -> str:
    """A string value (its first line at ``indent``); multi-line ones fenced when ``fence``
    and that reads back exactly."""
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
            node, above = self.record(node, indent + "  ", (*where, key, RECORD))
            self.hoist(where, key, above)
            members.append((name, node))
        if members != pattern.members:
            pattern = dataclasses.replace(pattern, members=members)
        text, above = self.record(pattern.render(indent, self.notes(where)), indent,
                                  (*where, RECORD))
        self.hoist(where[:-1], where[-1], above)
        return text

    def tool(self, spec: ToolSpec, indent: str, where: tuple[Key, ...],
             file_types: Mapping[str, NamedType]) -> str:
        sig = spec.signature
        own = [t for t in sig.named_types if not (t.shared and file_types.get(t.name) == t)]
        writer = SignatureWriter(own, file_types.values())
        inner = indent + "  "
        keys: list[Key] = [("param", p.name) for p in sig.params]
        nodes = writer.nodes(sig.params, sig.returns, sig.keywords, sig.type_refs)
        keys = [*([("arguments",)] if len(nodes) > len(keys) + 1 else []), *keys, ("result",)]
        path = self.path(nodes, keys, inner, where)
        parts: list[tuple[Hashable, str]] = [(PATH, path)]
        for pattern in writer.definitions:
            key = ("type", pattern.name)
            parts.append((key, self.pattern(pattern, inner, (*where, key))))
        description = ("entry", "description")
        flags = [key for key, on in (("requiresApproval", spec.requires_approval),
                                     ("runsAlone", spec.runs_alone)) if on]
        present = [description, *(("entry", key) for key in flags)]
        notes, _ = self.settle((*where, RECORD), present, end=True)
        flag = "".join(f", {key}: true" for key in flags)
        head = f"{indent}[{format_name(spec.name)}:Tool {{description: " \
               f"{quote_string(spec.description)}{flag}}} |"
        if notes or "\n" in spec.description or len(head) > 100:
            entries = [(description, f"{inner}description: "
                                     f"{string_value(spec.description, inner, fence=True)}")]
            entries.extend((("entry", key), f"{inner}{key}: true") for key in flags)
            record = render_elements(entries, inner, notes)
            head = f"{indent}[{format_name(spec.name)}:Tool {{\n{record}\n{indent}}} |"
        return (head + "\n" + render_elements(parts, inner, self.notes(where)) + "\n" + indent
                + "]")

    def path(self, nodes: list[str], keys: list[Key], inner: str, where: tuple[Key, ...]
             ) -> str:
        """The signature path of the tool at ``where``: on one line (broken before each
        arrow when too long), or one node per line when comments sit between its nodes or
        inside them. Comments above the first node go above the path, in the tool's list."""
        path_where = (*where, PATH)
        for left in self.orders.get(path_where, ()):
            if left not in keys:  # a node left out (an empty arguments node): the comments
                _, inside = self.settle((*path_where, left, RECORD), (), end=False)
                self.hoist(path_where, left, inside)  # inside it go on with its own
        texts: list[str] = []
        above: list[list[str]] = []
        for key, node in zip(keys, nodes, strict=True):
            text, up = self.record(node, inner, (*path_where, key, RECORD))
            texts.append(text)
            above.append(up)
        # The result node is always written, so nothing is left over in practice (rest).
        notes, rest = self.settle(path_where, keys, end=False)
        for i, key in enumerate(keys):
            note = notes.pop(key, None)
            before = [*(note.before if note is not None else ()), *above[i]]
            if i == 0:
                self.hoist(where, PATH, [*before, *rest])
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
            description = string_value(agent.description, "  ", fence=True)
            entries.append((("entry", "description"), f"  description: {description}"))
        entries.append((("entry", "instruction"),
                        f"  instruction: {string_value(agent.instruction, '  ', fence=True)}"))
        entries.append((("entry", "model"), f"  model: {quote_string(str(agent.model))}"))
        notes, _ = self.settle((*where, RECORD), [k for k, _ in entries], end=True)
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
        header = notes.pop(HEADER, None) if notes else None
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
