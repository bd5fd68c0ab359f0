"""The plain data of a tool's type signature: parameters, named type patterns, the parts of a
signature as a reader finds them.

Frozen, slotted, keyword-only dataclasses with no behaviour. The JSON Schema of a parameter is
the source of truth for its type: a :class:`Param` holds the schema of its value, and
:mod:`gramagent._spec.signature` maps signatures to and from gram notation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = ["JSONSchema", "NamedType", "Param", "SignatureParts", "TypeRefs", "canonical_required"]

JSONSchema = dict[str, Any]

TypeRefs = Mapping[str, tuple[str, ...]]
"""Where gram text named a type pattern: a JSON pointer into a schema -> the labels written
there (``Address:Null`` -> ``("Address", "Null")``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NamedType:
    """A named type pattern ``[Name:Labels {...} | members]`` as gram text declared it.

    Formatting metadata: it lets the writer keep the names a user chose instead of generating
    new ones. It takes no part in equality or in any JSON Schema.
    """

    name: str
    """The type name, e.g. ``Forecast``."""
    schema: JSONSchema
    """The schema the name stands for (read-only)."""
    refs: TypeRefs = field(default_factory=dict)
    """Type names used inside the pattern, by JSON pointer relative to ``schema`` (``""``:
    the pattern's own labels, as in ``[Shipping:Address:Null]``)."""
    shared: bool = False
    """Declared at file level (usable by every tool of the file), not inside one tool."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Param:
    """One parameter of a tool's curried type signature."""

    name: str
    """The parameter name (a gram identifier), e.g. ``personName``."""
    schema: JSONSchema
    """JSON Schema of the parameter's value, including ``description`` and ``default``."""
    required: bool = True
    """Whether the model must supply it. A parameter with a ``default`` is never required."""


class SignatureParts(NamedTuple):
    """The fields of a :class:`~gramagent._spec.signature.Signature`, as the gram reader
    finds them (the reader sits below the class, which parses through it)."""

    params: tuple[Param, ...]
    returns: JSONSchema
    keywords: JSONSchema
    named_types: tuple[NamedType, ...]
    type_refs: TypeRefs


def canonical_required(params: Iterable[Param]) -> list[str]:
    """The names of the required parameters, in order (the canonical ``required`` list)."""
    return [p.name for p in params if p.required]
