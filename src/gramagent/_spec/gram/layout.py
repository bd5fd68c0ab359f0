"""Layout shared by the gram writers: elements one per line, with comments placed around them."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import NamedTuple

__all__ = ["ListNotes", "Notes", "render_elements"]


class Notes(NamedTuple):
    """Comments a writer places around one element of a list (see ``gramagent fmt``)."""

    before: tuple[str, ...] = ()
    """Whole comment lines before the element (``""``: a blank line)."""
    after: str | None = None
    """A comment at the end of the element's last line."""
    offset: int = 0
    """Byte offset of the first of these comments in the text they came from."""


ListNotes = dict[Hashable, Notes]
"""The notes of one list, by element key; the key None holds the lines after the last element.
Writers pop what they place, so whatever is left was not placed."""


def render_elements(items: Sequence[tuple[Hashable, str]], indent: str,
                    notes: ListNotes | None = None) -> str:
    """The elements of a pattern, one per line (each text already indented), comma-separated,
    with the comments of ``notes`` placed around them."""
    lines: list[str] = []
    last = len(items) - 1
    for i, (key, text) in enumerate(items):
        note = notes.pop(key, None) if notes else None
        if i < last:
            text += ","
        if note is not None:
            lines.extend(indent + c if c else "" for c in note.before)
            if note.after is not None:
                text += "  " + note.after
        lines.append(text)
    end = notes.pop(None, None) if notes else None
    if end is not None:
        lines.extend(indent + c if c else "" for c in end.before)
    return "\n".join(lines)

