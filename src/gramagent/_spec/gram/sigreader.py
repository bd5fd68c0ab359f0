"""The gram reader of signature paths: ``(a::T1)==>(b::T2)==>(::R)`` -> the parts of a
:class:`~gramagent._spec.signature.Signature`.

:class:`SignatureReader` adds signature paths to
:class:`~gramagent._spec.gram.typereader.TypeReader`; :mod:`gramagent._spec.gram.docreader`
extends it to whole files, and :func:`~gramagent._spec.signature.parse_signature` reads a
lone signature with it.
"""

from __future__ import annotations

import dataclasses

from tree_sitter import Node

from gramagent._spec.data import JSONSchema, Param, SignatureParts, canonical_required
from gramagent._spec.gram.literals import format_name
from gramagent._spec.gram.syntax import (
    K_COMMENT,
    K_NODE,
    K_RELATIONSHIP,
    K_RIGHT,
    K_SUBJECT,
    V_SCALAR,
    NodeInfo,
    source_bytes,
)
from gramagent._spec.gram.typereader import (
    INVALID,
    TypeReader,
    TypeScope,
    elements,
    property_pointer,
    used_types,
)
from gramagent._spec.vocabulary import PROPERTIES, REQUIRED, keyword_kind
from gramagent.errors import SpecError

__all__ = ["SignatureReader", "read_signature"]


class SignatureReader(TypeReader):
    """A :class:`TypeReader` that also reads signature paths."""

    def signature(self, path: Node, scope: TypeScope) -> SignatureParts | None:
        """A tool signature from a node or relationship pattern; None after reporting."""
        count = len(self.problems)
        decoded = self.decoder.path(path)
        if decoded is None:
            return None
        self.refs = {}
        infos, arrows = decoded
        self.arrows(arrows)
        result = infos.pop()
        keywords: JSONSchema = {}
        if infos and infos[0].ident is None and not infos[0].labels:
            keywords = self.arguments(infos.pop(0), scope)
        params, flagged = self.params(infos, scope)
        returns = self.result(result, scope, alone=not infos)
        if "required" in keywords:
            params = self.listed_required(keywords, params, flagged)
        refs = self.refs
        if not refs and not scope.patterns:  # the common case: no named types at all
            if len(self.problems) > count or returns is None:
                return None
            return SignatureParts(tuple(params), returns, keywords, (), refs)
        self.resolve_all(scope)
        if len(self.problems) > count or returns is None:
            return None
        named = {n: scope.named[n] for n in scope.patterns if n in scope.named}
        if any(s.shared and s.patterns for s in scope.chain()):
            for own in list(named.values()):
                used_types(own.refs, scope, named)
            used_types(refs, scope, named)
        return SignatureParts(tuple(params), returns, keywords, tuple(named.values()), refs)

    def arrows(self, arrows: list[Node | int]) -> None:
        """Report arrows a signature cannot have (plain right arrows are offsets)."""
        for arrow in arrows:
            if isinstance(arrow, int):
                continue
            if arrow.kind_id != K_RIGHT:
                self.error(arrow.start_byte, "a signature reads left to right: expected -->, "
                                             f"==> or ~~>, not {self.decoder.text(arrow)}")
            elif arrow.named_child_count:
                self.error(arrow.start_byte, "an arrow in a signature carries no subject: "
                                             "write ==>")

    def params(self, infos: list[NodeInfo], scope: TypeScope) -> tuple[list[Param], list[int]]:
        """The parameters of a signature, and the offsets of those with a ``required:``
        flag."""
        params: list[Param] = []
        flagged: list[int] = []
        seen: dict[str, int] = {}
        for info in infos:
            name = info.ident
            if name is None:
                self.error(info.offset, "a parameter needs a name: (name::Type)")
                continue
            if not name:
                self.error(info.ident_offset, "parameter name must not be empty")
                continue
            if name in seen:
                self.error(info.ident_offset, f"duplicate parameter '{name}' (first at "
                                              f"{self.where(seen[name])})")
                continue
            seen[name] = info.ident_offset
            typed = self.typed(info, scope, property_pointer("", name), member=True,
                               what=f"parameter '{name}'")
            if typed is None:
                continue
            sub, flag = typed
            if flag is not None:
                flagged.append(info.offset)
            required = flag if flag is not None else "default" not in sub
            params.append(Param(name=name, schema=sub, required=required))
        return params, flagged

    def listed_required(self, keywords: JSONSchema, params: list[Param], flagged: list[int]
                        ) -> list[Param]:
        """The parameters as the arguments node's ``required`` list says (flags conflict
        with it); the list is dropped from ``keywords`` when it is the canonical one."""
        listed = keywords["required"]
        for offset in flagged:
            self.error(offset, "a required flag conflicts with the required list of the "
                               "arguments node")
        params = [Param(name=p.name, schema=p.schema, required=p.name in listed)
                  for p in params]
        if listed and listed == canonical_required(params):
            del keywords["required"]
        return params

    def arguments(self, info: NodeInfo, scope: TypeScope) -> JSONSchema:
        """Keywords of the arguments object, from the leading unnamed node's record."""
        out: JSONSchema = {}
        for key, key_offset, val in info.entries or ():
            if key in out:
                self.error(key_offset, f"arguments: duplicate key '{key}'")
                continue
            kind = keyword_kind(key)
            if kind == PROPERTIES:
                self.error(key_offset, "arguments: the parameters are the properties")
                continue
            if kind == REQUIRED and val[0] == V_SCALAR and isinstance(val[1], bool):
                self.error(key_offset, "arguments: required takes a list of parameter names")
                continue
            value = self.keyword(key, kind, key_offset, val, scope, "", "arguments")
            if value is not INVALID:
                out[key] = value
        return out

    def result(self, info: NodeInfo, scope: TypeScope, *, alone: bool = False
               ) -> JSONSchema | None:
        """The result schema, from the last (unnamed) node; None after reporting."""
        if info.ident is not None:
            if alone:
                node = f"({format_name(info.ident)}::{':'.join(info.labels) or 'String'})"
                self.error(info.offset, "a signature ends with its result, an unnamed node: "
                                        f"write {node}==>(::String)")
            else:
                self.error(info.ident_offset, "the result node takes no name: write "
                                              "(::String)")
            return None
        typed = self.typed(info, scope, "returns", member=False, what="the result")
        return None if typed is None else typed[0]

    def lone_signature(self, *, wrapped: bool = False) -> SignatureParts:
        """The text as one signature path, optionally followed by type patterns; with
        ``wrapped``, the elements of the one subject pattern the text is (see
        :func:`read_signature`).

        Raises:
            SpecError: Every problem of the text, positioned.
        """
        scope = TypeScope()
        paths = []
        root = self.tree.root_node
        children = root.named_children if not root.is_error else []
        if wrapped:
            subjects = [c for c in children if c.kind_id == K_SUBJECT]
            children = elements(subjects[0]) if len(subjects) == 1 else []
        for child in children:
            kind = child.kind_id
            if kind == K_COMMENT or child.has_error:
                continue
            if kind in (K_NODE, K_RELATIONSHIP):
                paths.append(child)
            elif kind == K_SUBJECT:
                self.collect_type(scope, child)
            else:
                self.error(child.start_byte, "expected a signature like "
                                             "(x::String)==>(::String), optionally followed by "
                                             "type patterns")
        sig = None
        if len(paths) > 1:
            self.error(paths[1].start_byte, "expected one signature path (found a second one)")
        elif not paths and not self.problems:
            self.error(0, "expected a signature like (x::String)==>(::String)")
        elif paths:
            sig = self.signature(paths[0], scope)
        self.resolve_all(scope)
        self.raise_problems()
        if sig is None:  # pragma: no cover - problems were raised above
            raise SpecError("invalid signature")
        return sig


_WRAP = "[_ | "
"""Makes comma-separated signature text the elements of a subject pattern, as in a file."""


def read_signature(text: str, *, file: str | None = None) -> SignatureParts:
    """The parts of a lone signature text (a path, optionally followed by type patterns).

    The type patterns may follow the path separated by whitespace or, as they are written
    inside a tool pattern of a file, by commas.

    Raises:
        SpecError: Every problem of the text, positioned.
    """
    try:
        return SignatureReader(source_bytes(text, file), file).lone_signature()
    except SpecError:
        if "," not in text:
            raise
    # Read as the elements of a tool pattern: positions on the first line move back by the
    # length of the wrapper, so problems point into the text as given.
    try:
        return SignatureReader(source_bytes(_WRAP + text + "\n]", file),
                               file).lone_signature(wrapped=True)
    except SpecError as exc:
        raise SpecError([
            dataclasses.replace(d, column=d.column - len(_WRAP))
            if d.line == 1 and d.column is not None and d.column > len(_WRAP) else d
            for d in exc.diagnostics
        ]) from None
