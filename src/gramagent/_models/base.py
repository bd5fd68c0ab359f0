"""The one seam between the loop and the wire formats.

Every adapter (Chat Completions, legacy functions, Responses, Harmony, the embedded model)
implements :class:`Model`: it takes a normalized :class:`ModelRequest`, speaks its wire format
over HTTP, and returns one normalized :class:`ModelTurn`. The loop never branches on the
format. Adapters know nothing of tools beyond their :class:`ToolDefinition`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from gramagent._messages import Message, ToolCall, Usage
from gramagent._spec.definition import ToolDefinition

__all__ = [
    "Model",
    "ModelRequest",
    "ModelTurn",
    "NamedToolChoice",
    "ToolChoice",
]


@dataclass(frozen=True, slots=True)
class NamedToolChoice:
    """Force the model to call this one tool."""

    name: str


ToolChoice: TypeAlias = Literal["auto", "none", "required"] | NamedToolChoice


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRequest:
    """One request to a model: everything an adapter needs to build its body."""

    model: str
    """The model name the server knows (the ``name`` part of the agent's ModelRef)."""
    instruction: str
    """The system instruction, prepended every turn."""
    messages: Sequence[Message]
    """The conversation so far, most recent last."""
    tools: Sequence[ToolDefinition] = ()
    tool_choice: ToolChoice = "auto"
    parallel_tool_calls: bool = True
    settings: Mapping[str, Any] = field(default_factory=dict)
    """Extra body fields (``temperature``, ``max_tokens``, ...) passed through as they are."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelTurn:
    """A model's answer, normalized across wire formats."""

    text: str | None = None
    """The assistant's text, or None."""
    tool_calls: tuple[ToolCall, ...] = ()
    """The calls it asked for, in order (several when parallel)."""
    usage: Usage | None = None
    """Tokens the server reported for this request, None if it reported none."""
    finish_reason: str | None = None
    """How the reply ended, normalized across formats: ``stop`` (the model finished),
    ``tool_calls``, ``length`` (cut at a token limit; a Responses ``incomplete`` status),
    ``content_filter``, ``refusal`` (the model declined; its refusal is the text), another
    reason as the server named it, or None when it named none."""
    cut_off_calls: tuple[ToolCall, ...] = ()
    """Calls the token limit cut off (``finish_reason == "length"``), after ``tool_calls``:
    never to run, nor to be sent back as calls (their arguments are partial)."""
    raw: Any = None
    """The decoded wire response, for debugging (``-v``); never read by the loop."""


@runtime_checkable
class Model(Protocol):
    """A wire-format adapter. One method does the work."""

    async def request(self, request: ModelRequest) -> ModelTurn:
        """Send ``request`` and return the normalized turn.

        Raises:
            ModelAPIError: transport or HTTP failure after the adapter's retries.
        """
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...
