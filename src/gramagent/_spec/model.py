"""The spec objects: what an agent *is*, as data.

Everything here is a frozen, slotted, keyword-only dataclass with no behaviour beyond
validation and (de)serialisation helpers. Tool *implementations* never appear in a spec: they
are bound at run time (see :mod:`gramagent._runtime.library`).

A tool's type signature (:class:`~gramagent._spec.signature.Signature`, made of
:class:`~gramagent._spec.data.Param`) is defined below this module, with its notation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict

from gramagent._spec.data import JSONSchema, NamedType, Param
from gramagent._spec.signature import Signature
from gramagent.errors import Diagnostic, SpecError

__all__ = ["Agent", "AgentDict", "GramDocument", "ModelRef", "NamedType", "Param", "Signature",
           "ToolSpec", "ToolSpecDict"]
# NamedType, Param and Signature are defined below this module (data, signature) and
# re-exported here, next to the objects made of them.


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """A tool's declarative specification: name, description and type signature.

    Construction checks the data model's rules (a non-empty name and description) and raises
    one :class:`~gramagent.errors.SpecError` listing what is wrong. ``schema`` is not given:
    it is generated from ``signature``, so the two always agree.
    """

    name: str
    """Unique name of the tool within an agent, e.g. ``sayHello``."""
    description: str
    """What the tool does, for the model."""
    signature: Signature
    """The curried type signature the schema is generated from."""
    requires_approval: bool = False
    """Whether a person must approve each call before it runs (``requiresApproval: true`` in
    gram); see :func:`~gramagent.resume_agent`."""
    runs_alone: bool = False
    """Whether a call of the tool must not run alongside other calls of its turn
    (``runsAlone: true`` in gram): the calls before it end first, those after it start once
    it has ended."""
    schema: JSONSchema = field(init=False)
    """JSON Schema of the arguments object, generated from ``signature`` (read-only)."""

    def __post_init__(self) -> None:
        problems = tool_problems(self.name, self.description)
        if problems:
            raise SpecError([Diagnostic(p) for p in problems])
        object.__setattr__(self, "schema", self.signature.to_schema())

    @classmethod
    def create(cls, name: str, description: str, signature: Signature | str, *,
               requires_approval: bool = False, runs_alone: bool = False) -> ToolSpec:
        """Build a spec, parsing ``signature`` if it is text.

        Raises:
            SpecError: The name or description is empty, or the signature text has problems.
        """
        sig = Signature.parse(signature) if isinstance(signature, str) else signature
        return cls(name=name, description=description, signature=sig,
                   requires_approval=requires_approval, runs_alone=runs_alone)

    def problems(self) -> list[str]:
        """Every validation rule this spec breaks: none, as construction checks them all
        (kept for symmetry with :meth:`Agent.problems`)."""
        return tool_problems(self.name, self.description)

    def to_dict(self) -> ToolSpecDict:
        """A JSON-ready dict: name, description, signature (gram text) and schema, and
        ``requires_approval`` and ``runs_alone`` when they are set."""
        data: ToolSpecDict = {
            "name": self.name,
            "description": self.description,
            "signature": self.signature.to_gram(),
            "schema": self.schema,
        }
        if self.requires_approval:
            data["requires_approval"] = True
        if self.runs_alone:
            data["runs_alone"] = True
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolSpec:
        """Inverse of :meth:`to_dict`; the schema is regenerated from the signature."""
        return cls.create(data["name"], data["description"], data["signature"],
                          requires_approval=bool(data.get("requires_approval", False)),
                          runs_alone=bool(data.get("runs_alone", False)))


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRef:
    """Which model an agent uses: a provider and a model name within it."""

    provider: str
    """``openai`` (any OpenAI-compatible server), ``local`` (the embedded model), ..."""
    name: str
    """The model name the provider knows, e.g. ``gpt-4o-mini`` or ``qwen2.5-coder-0.5b``."""

    @classmethod
    def parse(cls, text: str) -> ModelRef:
        """Parse ``provider/name``; text without a ``/`` means provider ``openai``.

        Only the first ``/`` separates: ``local/models/x.gguf`` is provider ``local``, name
        ``models/x.gguf``.
        """
        text = text.strip()
        if not text:
            raise SpecError("model must not be empty (expected 'provider/name')")
        provider, sep, name = text.partition("/")
        if not sep:
            return cls(provider="openai", name=text)
        if not provider or not name:
            raise SpecError(f"invalid model {text!r}: expected 'provider/name'")
        return cls(provider=provider, name=name)

    def __str__(self) -> str:
        return f"{self.provider}/{self.name}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Agent:
    """An agent: identity, model, instruction and the specs of the tools it may call.

    Construction validates every rule and raises one :class:`~gramagent.errors.SpecError`
    listing all violations.
    """

    name: str
    """Unique agent identifier, e.g. ``hello_world_agent``."""
    model: ModelRef
    """The model to run on."""
    instruction: str
    """The system instruction."""
    description: str | None = None
    """Optional human description of the agent."""
    tools: tuple[ToolSpec, ...] = ()
    """Tool specifications; names are unique."""

    def __post_init__(self) -> None:
        if isinstance(self.model, str):  # convenience: Agent(model="openai/gpt-4o-mini", ...)
            object.__setattr__(self, "model", ModelRef.parse(self.model))
        if not isinstance(self.tools, tuple):
            object.__setattr__(self, "tools", tuple(self.tools))
        problems = self.problems()
        if problems:
            raise SpecError([Diagnostic(p) for p in problems])

    def problems(self) -> list[str]:
        """Every validation rule this agent breaks (empty when valid)."""
        return agent_problems(self.name, self.instruction, self.tools)

    def tool(self, name: str) -> ToolSpec:
        """The tool spec called ``name``; KeyError if there is none."""
        for spec in self.tools:
            if spec.name == name:
                return spec
        raise KeyError(name)

    def to_dict(self) -> AgentDict:
        """A JSON-ready dict; :meth:`from_dict` gives back an equal agent."""
        tools = [t.to_dict() for t in self.tools]
        if self.description is None:
            return {"name": self.name, "model": str(self.model),
                    "instruction": self.instruction, "tools": tools}
        return {"name": self.name, "description": self.description, "model": str(self.model),
                "instruction": self.instruction, "tools": tools}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Agent:
        """Inverse of :meth:`to_dict`."""
        return cls(
            name=data["name"],
            description=data.get("description"),
            model=ModelRef.parse(data["model"]),
            instruction=data["instruction"],
            tools=tuple(ToolSpec.from_dict(t) for t in data.get("tools", ())),
        )


class ToolSpecDict(TypedDict):
    """The JSON form of a :class:`ToolSpec` (:meth:`ToolSpec.to_dict`)."""

    name: str
    description: str
    signature: str
    """The signature as gram text."""
    schema: JSONSchema
    requires_approval: NotRequired[bool]
    runs_alone: NotRequired[bool]


class AgentDict(TypedDict):
    """The JSON form of an :class:`Agent` (:meth:`Agent.to_dict`)."""

    name: str
    description: NotRequired[str]
    model: str
    """``provider/name``."""
    instruction: str
    tools: list[ToolSpecDict]


def tool_problems(name: str, description: str) -> list[str]:
    """The data-model validation rules of a tool spec, all of them, in a stable order."""
    out = []
    if not name.strip():
        out.append("tool name must not be empty")
    if not description.strip():
        out.append(f"tool {name or '<unnamed>'!r}: description must not be empty")
    return out


def agent_problems(name: str, instruction: str, tools: Sequence[ToolSpec]) -> list[str]:
    """The data-model validation rules of an agent, all of them, in a stable order."""
    out = []
    if not name.strip():
        out.append("agent name must not be empty")
    if not instruction.strip():
        out.append(f"agent {name or '<unnamed>'!r}: instruction must not be empty")
    seen: set[str] = set()
    for spec in tools:
        out.extend(spec.problems())
        if spec.name in seen:
            out.append(f"agent {name or '<unnamed>'!r}: duplicate tool name {spec.name!r}")
        seen.add(spec.name)
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class GramDocument:
    """Everything one gram file declares: its agents and its stand-alone tool patterns.

    Stand-alone tools are the top-level ``[name:Tool {...} | ...]`` patterns that agents
    reference by name; an agent's ``tools`` already hold the resolved specs.
    """

    agents: tuple[Agent, ...] = ()
    """The agents, in file order."""
    tools: tuple[ToolSpec, ...] = ()
    """The stand-alone (top-level) tool specs, in file order."""
    types: tuple[NamedType, ...] = field(default=(), compare=False, repr=False)
    """Formatting metadata, not part of equality: the file-level type patterns, in file
    order, so that the writer puts them back at file level, once."""

    def agent(self, name: str | None = None) -> Agent:
        """The agent called ``name``; without a name, the file's only agent.

        Raises:
            SpecError: There is no such agent, or no name was given and the file does not
                hold exactly one agent.
        """
        names = [a.name for a in self.agents]
        if name is None:
            if len(self.agents) == 1:
                return self.agents[0]
            if not self.agents:
                raise SpecError("the file declares no agent (expected [name:Agent {...}])")
            raise SpecError(f"the file declares {len(names)} agents ({', '.join(names)}); "
                            "name the one to load")
        for agent in self.agents:
            if agent.name == name:
                return agent
        raise SpecError(f"no agent named {name!r}; the file declares: "
                        f"{', '.join(names) or 'no agent'}")

    def tool(self, name: str) -> ToolSpec:
        """The stand-alone tool spec called ``name``; KeyError if there is none."""
        for spec in self.tools:
            if spec.name == name:
                return spec
        raise KeyError(name)
