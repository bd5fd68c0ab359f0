"""What a run returns: :class:`AgentResponse`, with a :class:`ToolInvocation` per tool call."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gramagent._frozen import builds
from gramagent._messages import Conversation, Usage
from gramagent._runtime.approval import ApprovalRequest
from gramagent._spec.vocabulary import json_problem
from gramagent.errors import ValidationError

__all__ = ["AgentResponse", "ToolInvocation", "new_invocation"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolInvocation:
    """One tool call of a run and how it went."""

    call_id: str
    name: str
    """The tool name the model asked for (possibly unknown)."""
    arguments: dict[str, Any] | str
    """The parsed arguments, or the raw text when they could not be parsed."""
    result: Any = None
    """The tool's return value (``{"ok": true}`` in dry-run mode); None on error."""
    error: str | None = None
    """The error text sent to the model; None on success."""
    error_type: str | None = None
    """``tool_payload_too_large``, ``tool_payload_parse_error``, ``unknown_tool``,
    ``invalid_arguments``, ``tool_exception``, ``tool_timeout``, ``repeated_call`` or
    ``approval_refused`` (a person did not approve the call)."""
    latency: float = 0.0
    """Seconds the tool ran (0 for calls that did not run)."""
    seq: int = 0
    """Order of the call within the run, from 1 (the events' ``seq``)."""

    @property
    def ok(self) -> bool:
        return self.error_type is None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {
            "call_id": self.call_id,
            "name": self.name,
            "arguments": self.arguments,
            "result": self.result,
            "error": self.error,
            "error_type": self.error_type,
            "latency": self.latency,
            "seq": self.seq,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentResponse:
    """What a run returns: the answer, the tool calls made, the conversation and usage."""

    content: str
    """The model's final text."""
    tool_invocations: tuple[ToolInvocation, ...] = ()
    """Every tool call of this run, in order."""
    context: Conversation = field(default_factory=Conversation)
    """The whole conversation, this run included; pass it back to continue."""
    usage: Usage = field(default_factory=Usage)
    """Tokens of this run (reported, or estimated where the server reported none)."""
    stopped_by: str | None = None
    """None when the model answered on its own; ``"repeated_call"`` when the loop guard
    answered a repeated call and asked the model for its final answer."""
    run_id: str = ""
    """The run's id (``request_id`` of its events)."""
    finish_reason: str = "stop"
    """How the answer ended: ``stop`` (the model finished it), ``length`` (cut at the token
    limit: the answer may be partial), ``content_filter`` (cut by the server's filter),
    ``refusal`` (the model declined; ``content`` is its refusal), ``approval_required`` (the
    run paused: see :attr:`pending_approvals`), or another reason as the server named it."""
    pending_approvals: tuple[ApprovalRequest, ...] = ()
    """The tool calls the paused run waits for a person to approve (empty when it answered):
    give a decision on each to :func:`~gramagent.resume_agent`. ``content`` is then empty."""

    @property
    def paused(self) -> bool:
        """Whether the run paused for approvals instead of answering."""
        return bool(self.pending_approvals)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (the CLI's ``--json`` output)."""
        return {
            "content": self.content,
            "tool_invocations": [i.to_dict() for i in self.tool_invocations],
            "context": self.context.to_list(),
            "conversation_id": self.context.id,
            "usage": self.usage.to_dict(),
            "stopped_by": self.stopped_by,
            "run_id": self.run_id,
            "finish_reason": self.finish_reason,
            "pending_approvals": [p.to_dict() for p in self.pending_approvals],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AgentResponse:
        """Inverse of :meth:`to_dict`: a response read back from JSON, e.g. a paused run's
        (``gramagent run --json``), to continue it in another process with
        :func:`~gramagent.resume_agent`, its limits holding across the pause.

        Raises:
            ValidationError: ``data`` is not the ``to_dict`` form of a response.
        """
        try:
            return _response_from(data)
        except (KeyError, TypeError, ValueError, AttributeError, ArithmeticError,
                RecursionError) as exc:
            raise ValidationError(f"not a response's to_dict form: {exc}") from None


def _response_from(data: Mapping[str, Any]) -> AgentResponse:
    """:meth:`AgentResponse.from_dict`, raising whatever malformed data makes it raise."""
    usage = data["usage"]
    pending = data.get("pending_approvals") or ()
    return AgentResponse(
        content=_typed(data["content"], str, "content"),
        tool_invocations=tuple(_invocation_from(i) for i in data.get("tool_invocations") or ()),
        context=Conversation.from_list(data["context"], id=_typed(
            data.get("conversation_id") or None, (str, type(None)), "conversation_id")),
        usage=Usage(**{k: _count(usage.get(k, 0), f"usage.{k}")
                       for k in ("input_tokens", "output_tokens", "requests")},
                    estimated=usage.get("estimated") is True),
        stopped_by=_typed(data.get("stopped_by"), (str, type(None)), "stopped_by"),
        run_id=_typed(data.get("run_id", ""), str, "run_id"),
        finish_reason=_typed(data.get("finish_reason", "stop"), str, "finish_reason"),
        pending_approvals=tuple(ApprovalRequest(
            call_id=_typed(p["call_id"], str, "call_id"), tool=_typed(p["tool"], str, "tool"),
            arguments=_json(_typed(p["arguments"], dict, "arguments"), "arguments"))
            for p in pending),
    )


def _invocation_from(data: Mapping[str, Any]) -> ToolInvocation:
    return ToolInvocation(
        call_id=_typed(data["call_id"], str, "call_id"), name=_typed(data["name"], str, "name"),
        arguments=_json(_typed(data["arguments"], (dict, str), "arguments"), "arguments"),
        result=_json(data.get("result"), "result"),
        error=_typed(data.get("error"), (str, type(None)), "error"),
        error_type=_typed(data.get("error_type"), (str, type(None)), "error_type"),
        latency=_seconds(data.get("latency", 0.0), "latency"),
        seq=_count(data.get("seq", 0), "seq"))


_MAX_COUNT = 2**63 - 1
"""The largest count a run's response holds (a signed 64-bit integer, as OpenTelemetry's
attributes and metrics carry the run's usage): no run gets near it."""


def _count(value: Any, what: str) -> int:
    """A count (tokens, requests, seq): a negative one would let a run past its limits, and
    one beyond 64 bits cannot be exported with the run's usage."""
    if not 0 <= _typed(value, int, what) <= _MAX_COUNT:
        raise ValueError(f"{what} is {value}: a count from 0 to 2**63-1")
    return int(value)


def _seconds(value: Any, what: str) -> float:
    seconds = float(_typed(value, (int, float), what))  # OverflowError: an ArithmeticError
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{what} is {seconds!r}")
    return seconds


def _json(value: Any, what: str) -> Any:
    """``value`` if it is a JSON value (what a response's own JSON form can hold)."""
    problem = json_problem(value, limit=None)
    if problem is not None:
        raise ValueError(f"{what}: {problem}")
    return value


def _typed(value: Any, kind: type | tuple[type, ...], what: str) -> Any:
    """``value`` if it is of ``kind`` (a bool is not an int here)."""
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise TypeError(f"{what} is {type(value).__name__}")
    return value


# The builder of the record the loop makes for every tool call: the same object as the class
# makes, without a call of ``object.__setattr__`` per field (gramagent._frozen;
# docs/performance.md, "Frozen builders"). An AgentResponse, once per run, is built by its class.


@builds(AgentResponse)
def new_response(*, content: str, tool_invocations: tuple[ToolInvocation, ...] = (),
                 context: Conversation, usage: Usage, stopped_by: str | None = None,
                 run_id: str = "", finish_reason: str = "stop",
                 pending_approvals: tuple[ApprovalRequest, ...] = ()) -> AgentResponse:
    """An :class:`AgentResponse` (:func:`gramagent._frozen.builds`)."""
    return AgentResponse(content=content, tool_invocations=tool_invocations, context=context,
                         usage=usage, stopped_by=stopped_by, run_id=run_id,
                         finish_reason=finish_reason, pending_approvals=pending_approvals)


@builds(ToolInvocation)
def new_invocation(*, call_id: str, name: str, arguments: dict[str, Any] | str,
                   result: Any = None, error: str | None = None, error_type: str | None = None,
                   latency: float = 0.0, seq: int = 0) -> ToolInvocation:
    """A :class:`ToolInvocation` (:func:`gramagent._frozen.builds`)."""
    return ToolInvocation(call_id=call_id, name=name, arguments=arguments, result=result,
                          error=error, error_type=error_type, latency=latency, seq=seq)
