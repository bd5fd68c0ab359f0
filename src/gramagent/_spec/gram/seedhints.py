"""Hints for the notation of the project's seed documents, which gram does not read.

The design documents wrote signatures in a sketch notation: records as
``(userParams::Object {fields: [...]})`` or ``{field1: T1}``, lists as ``[T]``, and Haskell
results as ``(name: Text) --> IO Text``. Read as gram, these give syntax errors or misleading
guesses ("did you mean 'else'?"). When a text with problems holds one of these forms,
:func:`with_seed_hints` replaces the problems inside it by one hint naming the form to write
instead (``docs/signatures.md``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import NamedTuple

__all__ = ["Hint", "seed_hints", "with_seed_hints"]


class Hint(NamedTuple):
    """A hint for one seed form, and the byte span whose problems it replaces."""

    start: int
    end: int
    offset: int
    """Where the hint is reported."""
    message: str


_FIELDS = re.compile(rb"[{,]\s*(fields)\s*:")
_NODE_HEAD = rb"\(\s*(?:[A-Za-z_][0-9A-Za-z_]*)?\s*::?\s*"
"""The start of a node up to where its type goes: ``(name::``, ``(name:``, ``(::``."""
_LIST = re.compile(_NODE_HEAD + rb"(\[)\s*([A-Za-z_][0-9A-Za-z_]*)\s*\]")
_RECORD_TYPE = re.compile(_NODE_HEAD + rb"(\{)")
_IO_RESULT = re.compile(rb"(-->|==>|~~>)\s*IO\s+([A-Za-z_][0-9A-Za-z_]*)")
_IO_LABEL = re.compile(_NODE_HEAD + rb"(IO)\b(?:\s+([A-Za-z_][0-9A-Za-z_]*))?")
_PARAM = re.compile(r"\(\s*([A-Za-z_][0-9A-Za-z_]*)\s*::?\s*([A-Za-z_][0-9A-Za-z_]*)\s*\)")
_NODE_NAME = re.compile(rb"\(\s*([A-Za-z_][0-9A-Za-z_]*)\s*::?")


def with_seed_hints(src: bytes, problems: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """``problems`` with those inside a seed form replaced by the form's hint (a form with
    no problem inside it is valid gram that only looks like one, and gets no hint)."""
    hints = [h for h in seed_hints(src) if any(h.start <= p[0] < h.end for p in problems)]
    if not hints:
        return problems
    kept = [p for p in problems if not any(h.start <= p[0] < h.end for h in hints)]
    return kept + [(h.offset, h.message) for h in hints]


def seed_hints(src: bytes) -> list[Hint]:
    """A hint for each seed form in ``src`` (none overlapping: the first one found wins)."""
    found: list[Hint] = []
    for finder in _FINDERS:
        for hint in finder(src):
            if not any(h.start < hint.end and hint.start < h.end for h in found):
                found.append(hint)
    return found


def _fields(src: bytes) -> Iterator[Hint]:
    for m in _FIELDS.finditer(src):
        start, end = _enclosing(src, m.start(1), b"{", b"}")
        name = _node_name(src, _enclosing(src, start, b"(", b")")[0])
        yield _record_hint(start, end, m.start(1), "'fields'", name)


def _lists(src: bytes) -> Iterator[Hint]:
    for m in _LIST.finditer(src):
        start, end = _enclosing(src, m.start(1), b"(", b")")
        name = _node_name(src, start) or "items"
        item = m.group(2).decode()
        yield Hint(start, end, m.start(1),
                   f"'[{item}]' is the seed documents' list notation; gram writes a list as "
                   f"({name}::Array {{items: {item}}})")


def _record_types(src: bytes) -> Iterator[Hint]:
    for m in _RECORD_TYPE.finditer(src):
        start, end = _enclosing(src, m.start(1), b"(", b")")
        yield _record_hint(start, end, m.start(1), "'{field: Type}'", _node_name(src, start))


def _record_hint(start: int, end: int, offset: int, form: str, name: str | None) -> Hint:
    """The hint for a record written in the seed's notation, for the node called ``name``."""
    name = name or "record"
    type_name = name[:1].upper() + name[1:]
    return Hint(start, end, offset,
                f"{form} is the seed documents' record notation; gram writes an object's "
                f"fields as the members of a type pattern: ({name}::{type_name}), with "
                f"[{type_name}:Object | (name::String), (age::Integer)] after the signature")


def _io_results(src: bytes) -> Iterator[Hint]:
    for m in _IO_RESULT.finditer(src):
        line_start = src.rfind(b"\n", 0, m.start()) + 1
        line_end = src.find(b"\n", m.end())
        line_end = len(src) if line_end < 0 else line_end
        head = src[line_start: m.start()].decode("utf-8", "replace")
        params = [f"({n}::{t})" for n, t in _PARAM.findall(head)]
        write = "==>".join([*params, f"(::{m.group(2).decode()})"])
        yield Hint(line_start, line_end, m.start(1),
                   f"'{m.group(1).decode()} IO {m.group(2).decode()}' is the seed documents' "
                   "Haskell notation; in gram the result is the path's last, unnamed node, "
                   f"typed with a JSON type: write {write}")


def _io_labels(src: bytes) -> Iterator[Hint]:
    for m in _IO_LABEL.finditer(src):
        start, end = _enclosing(src, m.start(1), b"(", b")")
        result = (m.group(2) or b"String").decode()
        yield Hint(start, end, m.start(1),
                   "'IO' is a Haskell effect, not a type: a result node names the JSON type "
                   f"of the result, e.g. (::{result})")


_FINDERS: tuple[Callable[[bytes], Iterator[Hint]], ...] = (
    _io_results, _io_labels, _lists, _fields, _record_types)


def _node_name(src: bytes, start: int) -> str | None:
    """The identifier of the node that opens at ``start`` (``(name::...``), if any."""
    m = _NODE_NAME.match(src, start)
    return m.group(1).decode() if m else None


def _enclosing(src: bytes, at: int, opener: bytes, closer: bytes) -> tuple[int, int]:
    """The span of the innermost ``opener``...``closer`` pair around byte ``at`` (the pair
    starting at ``at`` itself when ``src[at]`` is ``opener``); as far as the text goes where
    one side is missing."""
    depth = 0
    start = at
    for i in range(at if src[at:at + 1] == opener else at - 1, -1, -1):
        char = src[i:i + 1]
        if char == closer:
            depth += 1
        elif char == opener:
            if depth == 0:
                start = i
                break
            depth -= 1
    depth = 0
    end = len(src)
    for i in range(start + 1, len(src)):
        char = src[i:i + 1]
        if char == opener:
            depth += 1
        elif char == closer:
            if depth == 0:
                end = i + 1
                break
            depth -= 1
    return start, end
