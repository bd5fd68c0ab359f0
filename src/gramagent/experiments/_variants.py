"""Variants (arms): what late binding lets an experiment vary while the agent spec stays fixed.

A variant names its tool library by import path and may override the model, the wire format
(``api``), the base URL, the instruction, run limits, the local tool-call mode and request
settings. :func:`prepare` binds the agent to the variant's library; an implementation whose
docstring differs from the spec's description still binds (the difference is a warning, kept
in :attr:`Arm.warnings`), while names and schemas must match exactly.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from gramagent import Agent, BoundAgent, ModelRef, RunLimits, ToolLibrary
from gramagent._models.chat import TOOL_CALL_MODES
from gramagent.errors import ConfigurationError, SpecError
from gramagent.experiments._imports import import_object

__all__ = ["Arm", "ModelKey", "Variant", "prepare"]

_LIMIT_NAMES = frozenset(f.name for f in dataclasses.fields(RunLimits))


@dataclass(frozen=True, slots=True, kw_only=True)
class Variant:
    """One arm of an experiment. Everything is data (import paths, names, numbers)."""

    name: str
    library: str | None = None
    """``module:attribute`` of a ToolLibrary or a zero-argument function returning one; None
    for the built-in tools (``gramagent.tools:builtin_library``)."""
    model: str | None = None
    """``provider/name`` overriding the agent's model."""
    api: str | None = None
    """Wire format: ``chat``, ``functions``, ``responses`` or ``harmony``."""
    base_url: str | None = None
    instruction: str | None = None
    """Replaces the agent's instruction."""
    limits: Mapping[str, Any] = field(default_factory=dict)
    """:class:`~gramagent.RunLimits` fields (``max_iterations``, ``wall_time``, ...)."""
    tool_call_mode: str | None = None
    """``native``, ``constrained`` or ``text`` (how the embedded model writes tool calls)."""
    settings: Mapping[str, Any] = field(default_factory=dict)
    """Extra request body fields (``temperature``, ``seed``, ...); ``parallel_tool_calls:
    false`` also runs the calls of a turn one after another."""

    def problems(self) -> list[str]:
        """What is wrong with this variant's fields (empty when fine)."""
        out = []
        if not self.name or not self.name.replace("_", "").replace("-", "").isalnum():
            out.append(f"variant name {self.name!r} must be letters, digits, '_' or '-'")
        unknown = sorted(set(self.limits) - _LIMIT_NAMES)
        if unknown:
            out.append(f"variant {self.name!r}: unknown limit {', '.join(map(repr, unknown))} "
                       f"(known: {', '.join(sorted(_LIMIT_NAMES))})")
        try:  # the values of the known ones, checked as a run would
            RunLimits(**{k: v for k, v in self.limits.items() if k in _LIMIT_NAMES})
        except ConfigurationError as exc:
            out.append(f"variant {self.name!r}: {exc}")
        if not isinstance(self.settings.get("parallel_tool_calls", True), bool):
            out.append(f"variant {self.name!r}: settings: parallel_tool_calls must be true or "
                       "false")
        if self.tool_call_mode is not None and self.tool_call_mode not in TOOL_CALL_MODES:
            out.append(f"variant {self.name!r}: tool_call_mode must be one of "
                       f"{', '.join(TOOL_CALL_MODES)}")
        if self.model is not None:
            try:
                ModelRef.parse(self.model)
            except SpecError as exc:
                out.append(f"variant {self.name!r}: {exc.diagnostics[0].message}")
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (the store keeps it to detect a changed variant)."""
        return {
            "name": self.name, "library": self.library, "model": self.model, "api": self.api,
            "base_url": self.base_url, "instruction": self.instruction,
            "limits": dict(self.limits), "tool_call_mode": self.tool_call_mode,
            "settings": dict(self.settings),
        }


@dataclass(frozen=True, slots=True)
class ModelKey:
    """What decides which model adapter a variant uses; variants with equal keys share one."""

    ref: str
    api: str | None
    base_url: str | None
    tool_call_mode: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Arm:
    """A variant made ready to run: the bound agent, its limits and its model key."""

    variant: Variant
    bound: BoundAgent
    limits: RunLimits
    model: ModelKey
    settings: Mapping[str, Any]
    implementation: str
    """A fingerprint of the bound tools' source code (a changed implementation is a changed
    variant)."""

    @property
    def warnings(self) -> tuple[str, ...]:
        return self.bound.warnings

    @property
    def name(self) -> str:
        return self.variant.name


def prepare(variant: Variant, agent: Agent) -> Arm:
    """Load the variant's library and bind ``agent`` to it (descriptions: warn only).

    Raises:
        ConfigurationError: a bad field, or the library cannot be loaded.
        ToolError: a tool is missing or its name or schema differs from the spec.
    """
    problems = variant.problems()
    if problems:
        raise ConfigurationError("; ".join(problems))
    library = load_library(variant.library)
    if variant.instruction is not None:
        agent = dataclasses.replace(agent, instruction=variant.instruction)
    bound = library.bind(agent, check_description="warn")
    try:
        limits = RunLimits(**dict(variant.limits))
    except TypeError as exc:
        raise ConfigurationError(f"variant {variant.name!r}: bad limits: {exc}") from None
    ref = variant.model or str(agent.model)
    return Arm(variant=variant, bound=bound, limits=limits,
               model=ModelKey(ref, variant.api, variant.base_url, variant.tool_call_mode),
               settings=dict(variant.settings), implementation=_source_hash(bound))


def load_library(reference: str | None) -> ToolLibrary:
    """The ToolLibrary named by ``module:attribute`` (None: the built-in tools)."""
    reference = reference or "gramagent.tools:builtin_library"
    what = "tool library"
    obj = import_object(reference, what=what)
    if not isinstance(obj, ToolLibrary) and callable(obj):
        try:
            obj = obj()
        except TypeError as exc:
            raise ConfigurationError(f"{what} {reference!r}: calling it failed ({exc}); "
                                     "expected a ToolLibrary or a zero-argument function "
                                     "returning one") from None
    if not isinstance(obj, ToolLibrary):
        raise ConfigurationError(f"{what} {reference!r} gave a {type(obj).__name__}, expected "
                                 "a ToolLibrary or a zero-argument function returning one")
    return obj


def _source_hash(bound: BoundAgent) -> str:
    digest = hashlib.sha256()
    for name, tool in bound.tools.items():
        try:
            source = inspect.getsource(tool.invoke)
        except (OSError, TypeError):
            source = getattr(tool.invoke, "__qualname__", type(tool.invoke).__qualname__)
        digest.update(orjson.dumps([name, source]))
    return digest.hexdigest()
