"""The one seam between the loop and the wire formats.

Every adapter (Chat Completions, legacy functions, Responses, Harmony, the embedded model)
implements :class:`Model`: it takes a normalized :class:`ModelRequest`, speaks its wire format
over HTTP, and returns one normalized :class:`ModelTurn`. The loop never branches on the
format. Adapters know nothing of tools beyond their :class:`ToolDefinition`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from gramagent._frozen import builds
from gramagent._messages import Message, ToolCall, Usage, UserMessage
from gramagent._spec.definition import ToolDefinition

__all__ = [
    "Model",
    "ModelRequest",
    "ModelTurn",
    "NamedToolChoice",
    "StreamingModel",
    "TextSink",
    "ToolChoice",
    "new_request",
    "new_turn",
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
    rendered: dict[str, Any] | None = None
    """Where an adapter may keep its rendering of ``messages`` for the next request of the same
    conversation (:attr:`~gramagent._messages.Conversation.rendered`); None: render them all."""

    @property
    def replies_to_user(self) -> bool:
        """Whether the reply answers the user's message (the last one), not tool results."""
        messages = self.messages
        return bool(messages) and isinstance(messages[-1], UserMessage)


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


# Builders of the objects the loop makes for every request and reply: the same objects as the
# classes make, without a call of ``object.__setattr__`` per field (gramagent._frozen;
# docs/performance.md, "Frozen builders").


@builds(ModelRequest)
def new_request(*, model: str, instruction: str, messages: Sequence[Message],
                tools: Sequence[ToolDefinition], tool_choice: ToolChoice,
                settings: Mapping[str, Any], rendered: dict[str, Any] | None = None,
                parallel_tool_calls: bool = True) -> ModelRequest:
    """A :class:`ModelRequest` (:func:`gramagent._frozen.builds`)."""
    return ModelRequest(model=model, instruction=instruction, messages=messages, tools=tools,
                        tool_choice=tool_choice, settings=settings, rendered=rendered,
                        parallel_tool_calls=parallel_tool_calls)


@builds(ModelTurn)
def new_turn(*, text: str | None = None, tool_calls: tuple[ToolCall, ...] = (),
             usage: Usage | None = None, finish_reason: str | None = None,
             cut_off_calls: tuple[ToolCall, ...] = (), raw: Any = None) -> ModelTurn:
    """A :class:`ModelTurn` (:func:`gramagent._frozen.builds`)."""
    return ModelTurn(text=text, tool_calls=tool_calls, usage=usage, finish_reason=finish_reason,
                     cut_off_calls=cut_off_calls, raw=raw)


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


TextSink: TypeAlias = Callable[[str], None]
"""Receives the pieces of a turn's text as the model generates them."""


@runtime_checkable
class StreamingModel(Model, Protocol):
    """A :class:`Model` that can also hand out its answer's text as it is generated.

    Every adapter of gramagent is one; a model of your own that is not is run unstreamed (its
    text arrives as one piece).
    """

    async def stream_request(self, request: ModelRequest, on_text: TextSink) -> ModelTurn:
        """Send ``request`` streamed; call ``on_text`` with each piece of the answer's text.

        The pieces, joined, equal the returned turn's ``text`` (none are sent when it has
        none). Chain of thought and tool-call arguments are not text.

        Raises:
            ModelAPIError: as :meth:`Model.request`; a stream that breaks off after it started
                is not retried (its pieces were handed out).
        """
        ...
