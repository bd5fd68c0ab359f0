"""Human approval of tool calls: the calls a run waits for, and the decisions on them.

A tool whose spec says ``requiresApproval: true`` (or whose implementation was made with
``@tool(requires_approval=True)``) is called only after a person approves the call. The calls
of a turn are checked as usual first (an invalid call is answered with its error, and nobody is
asked about it); then, for each valid call that needs approval, in call order:

- with an ``approve`` callback (``run_agent(approve=...)``; the CLI asks on the terminal),
  the run asks it and waits (the wait is not counted against ``RunLimits.wall_time``);
- without one, the run **pauses**: the turn's other calls run, and ``run_agent`` returns an
  :class:`~gramagent.AgentResponse` whose :attr:`~gramagent.AgentResponse.pending_approvals`
  lists the waiting calls (``finish_reason == "approval_required"``); its ``context`` ends
  with the model's calls, which :func:`~gramagent.resume_agent` answers later, in this
  process or another (the context serializes, and a stored session keeps it).

An approved call runs; a refused one is answered with a result telling the model that the
user did not approve it (and why, when a reason is given), so it can answer without it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from gramagent import _json as exact_json
from gramagent._messages import Conversation
from gramagent._spec.calls.check import CallRejection, rejection
from gramagent.errors import ValidationError

__all__ = [
    "ApprovalRequest",
    "Approver",
    "Decision",
    "Refused",
    "check_decisions",
    "check_pending",
    "check_still_waiting",
    "decide_once_each",
    "refusal",
    "waiting_requests",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequest:
    """A tool call waiting for a person's approval."""

    call_id: str
    """The call's id: the key of its decision for :func:`~gramagent.resume_agent`."""
    tool: str
    """The tool the model wants to call."""
    arguments: dict[str, Any]
    """The call's arguments, checked against the tool's schema."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (the CLI's ``--json`` output)."""
        return {"call_id": self.call_id, "tool": self.tool, "arguments": self.arguments}


@dataclass(frozen=True, slots=True)
class Refused:
    """A refusal with the reason the model is told (a plain ``False`` gives none)."""

    reason: str = ""


Decision: TypeAlias = bool | Refused
"""A person's answer to an :class:`ApprovalRequest`: ``True`` runs the call; ``False`` or
:class:`Refused` answers it with a refusal instead."""

Approver: TypeAlias = Callable[[ApprovalRequest], Decision | Awaitable[Decision]]
"""Asks a person about one call (``run_agent(approve=...)``); may be a coroutine function.
Returning None leaves the call waiting: the run pauses, as without a callback."""


def refusal(tool: str, decision: Decision) -> CallRejection | None:
    """The result a refused call gets, or None when ``decision`` approves it.

    Raises:
        ValidationError: ``decision`` is neither a bool nor a :class:`Refused`.
    """
    _check_decision(decision)
    if decision is True:
        return None
    reason = decision.reason.strip() if isinstance(decision, Refused) else ""
    # Worded to be passed on: a small model copies the last tool result into its answer.
    text = (f"Not done: the user did not approve the call to {tool}"
            + (f" ({reason})." if reason else ".")
            + " It was not run; do not call it again for this request.")
    return rejection("approval_refused", text, "refused by the user")


def check_decisions(decisions: Mapping[str, Decision], waiting: Mapping[str, str]) -> None:
    """Check that ``decisions`` answers exactly the calls ``waiting`` (call id -> tool name).

    Raises:
        ValidationError: a waiting call has no decision, a decision names no waiting call, or
            a decision is neither a bool nor a :class:`Refused`.
    """
    for decision in decisions.values():  # every one, before anything runs
        _check_decision(decision)
    missing = [f"{waiting[i]} ({i})" for i in waiting if i not in decisions]
    unknown = [i for i in decisions if i not in waiting]
    if not waiting:
        raise ValidationError("the conversation has no tool calls waiting for approval: "
                              "nothing to resume")
    problems = []
    if missing:
        problems.append(f"no decision for {', '.join(missing)}")
    if unknown:
        problems.append(f"no waiting call has the id {', '.join(map(repr, unknown))} "
                        f"(waiting: {', '.join(waiting)})")
    if problems:
        raise ValidationError("; ".join(problems))


def check_pending(pending: Sequence[ApprovalRequest], waiting: Iterable[str]) -> None:
    """Check that a paused response's ``pending`` calls are the calls ``waiting`` (ids, in
    call order) that its conversation ends with, as a run leaves them: a response read back
    from edited JSON may say otherwise, and resuming the run it describes would then number
    and announce its calls wrongly.

    Raises:
        ValidationError: they differ (nothing is run).
    """
    said, waits = [r.call_id for r in pending], list(waiting)
    if said != waits:
        raise ValidationError(
            f"the response's pending_approvals ({', '.join(map(repr, said)) or 'none'}) are "
            f"not the calls its conversation waits for ({', '.join(map(repr, waits)) or 'none'})"
            ": resume from the response as the run returned it, or from its context alone")


def check_still_waiting(decisions: Mapping[str, Decision], conversation: Conversation,
                        session: str, read: Conversation | None = None) -> None:
    """Check, holding stored session ``session``, that the calls ``decisions`` were made on
    still wait in ``conversation`` as it is stored now.

    A person decides on calls read from the store before the session is held; another
    process may have decided on them, and gone on, meanwhile, or deleted the session and
    made it again, its waiting call under the same id (servers number their calls) another
    call. ``read``: the conversation the calls were read from (None: not known), whose calls
    must be those that wait now, in the same conversation.

    Raises:
        ValidationError: a decided call is in the conversation but no longer waits, or is
            not the call that was read (nothing is run).
    """
    waiting = {call.id: call for call in conversation.unanswered_calls()}
    gone = [call_id for call_id in decisions if call_id not in waiting]
    if gone:  # an id the conversation never had is check_decisions' to report
        known = conversation.call_ids()
        gone = [call_id for call_id in gone if call_id in known]
    if not gone and read is not None:
        shown = {call.id: call for call in read.unanswered_calls()}
        gone = [call_id for call_id in decisions if call_id in shown
                and (read.id != conversation.id or shown[call_id] != waiting.get(call_id))]
    if gone:
        raise ValidationError(
            f"session {session!r}: the call(s) {', '.join(map(repr, gone))} no longer wait "
            "for approval: another process decided on them since they were read, and the "
            "session went on (or it replaced the session); nothing was run (read the waiting "
            "calls again)")


def _check_decision(decision: object) -> None:
    """Raises:
        ValidationError: ``decision`` is neither a bool nor a :class:`Refused` with a string
            reason.
    """
    if decision is not True and decision is not False and not isinstance(decision, Refused):
        raise ValidationError(f"an approval decision is True, False or Refused(reason), "
                              f"got {type(decision).__name__}")
    if isinstance(decision, Refused) and not isinstance(decision.reason, str):
        raise ValidationError(f"Refused(reason) takes a string reason, got "
                              f"{type(decision.reason).__name__}")


def decide_once_each(pending: Sequence[ApprovalRequest],
                     decide: Callable[[ApprovalRequest], Decision]) -> dict[str, Decision]:
    """Decisions on the calls a run paused on, one per distinct call: ``decide`` is asked
    about the first of identical calls (the same tool and arguments) and its decision given
    to every copy, as a run with an ``approve`` callback asks (a refusal of any copy would
    refuse them all anyway)."""
    decided: dict[str, Decision] = {}
    decisions: dict[str, Decision] = {}
    for request in pending:
        key = exact_json.dumps([request.tool, request.arguments], sort_keys=True)
        if key not in decided:
            decided[key] = decide(request)
        decisions[request.call_id] = decided[key]
    return decisions


def waiting_requests(conversation: Conversation) -> tuple[ApprovalRequest, ...]:
    """The calls a paused conversation waits for (read back from its last assistant message,
    as a stored session holds it)."""
    return tuple(ApprovalRequest(call_id=c.id, tool=c.name, arguments=_arguments(c.arguments))
                 for c in conversation.unanswered_calls())


def _arguments(text: str) -> dict[str, Any]:
    """A waiting call's arguments (checked when the run paused, so they parse)."""
    try:
        value = exact_json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
