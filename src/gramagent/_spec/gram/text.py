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

Reading parses the text once with tree-sitter (:mod:`gramagent._spec.gram.syntax`) and gives it
meaning (:mod:`gramagent._spec.gram.docreader`, on the type and signature readers). Every problem
(syntax errors, i.e. ERROR and MISSING nodes, and semantic ones: unknown types or tools,
duplicates, empty names, bad defaults, missing fields) is collected with its 1-based
``line:column`` into one :class:`~gramagent.errors.SpecError`. Writing (:func:`to_gram`, in
:mod:`gramagent._spec.gram.docwriter`) emits the canonical form; reading what it wrote gives
equal spec objects. Reading records, as formatting metadata, the names of the type patterns
a text used, so that writing keeps them; :func:`format_gram` (``gramagent fmt``) also keeps
the text's comments (``docs/format.md``). The signature notation itself is described in
:mod:`gramagent._spec.signature` and ``docs/signatures.md``.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from gramagent._files import read_bounded
from gramagent._spec.gram.comments import Comments, collect_comments
from gramagent._spec.gram.docreader import DocumentReader
from gramagent._spec.gram.docwriter import write_gram
from gramagent._spec.gram.syntax import K_COMMENT, Decoder, descendants, parse, source_bytes
from gramagent._spec.model import Agent, GramDocument, ToolSpec
from gramagent.errors import Diagnostic, SpecError

__all__ = ["Formatted", "dropped_comments", "format_file", "format_gram", "has_comments",
           "load_agent", "load_file", "load_gram", "to_gram"]


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------

def load_gram(text: str | bytes, *, file: str | None = None) -> GramDocument:
    """Read the agents and stand-alone tools of a gram text.

    Args:
        text: The gram text (``bytes`` are read as UTF-8, a byte order mark left out).
        file: The file name to put in error positions.

    Raises:
        SpecError: Every syntax and semantic problem, each as ``file:line:col: message``
            (bytes that are not UTF-8 and values, schemas or type patterns nested more than
            32 levels deep included).
    """
    return DocumentReader(source_bytes(text, file), file).document()



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
        src = read_bounded(path)
    except OSError as exc:
        raise SpecError([Diagnostic(f"cannot read the file: {exc.strerror or exc}", name)]) \
            from None
    return source_bytes(src, name)


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
    src = source_bytes(text, file)
    reader = DocumentReader(src, file)
    document = reader.document()
    if b"//" not in src:
        return Formatted(write_gram(document), ())
    comments = collect_comments(reader.tree, reader.decoder)
    out = write_gram(document, comments)
    return Formatted(out, dropped_comments(src, file, comments))


def dropped_comments(src: bytes, file: str | None, comments: Comments
                     ) -> tuple[Diagnostic, ...]:
    """One positioned diagnostic per comment a writer left in ``comments`` (it pops those it
    places) or that had no element to go with."""
    decoder = Decoder(src)
    stray = comments.stray + [(n.offset, "where the formatter has no place for it")
                              for notes in comments.notes.values() for n in notes.values()]
    dropped = []
    for offset, where in sorted(stray):
        line, column = decoder.position(offset)
        dropped.append(Diagnostic(f"a comment {where} cannot be kept", file, line, column))
    return tuple(dropped)


def format_file(path: str | os.PathLike[str]) -> Formatted:
    """:func:`format_gram` of a ``.gram`` file (UTF-8).

    Raises:
        SpecError: The file cannot be read or decoded, or its gram has problems.
    """
    return format_gram(_read_source(path), file=str(path))
