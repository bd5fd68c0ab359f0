"""The embedded model's answer after tool results: a repeated call means "done".

After a tool result, the small embedded models rarely write the answer on their own: under
the constrained step they write the call they just made once more (the hello-world agent
on the 0.5B: ``sayHello`` with the same name, every time), and the loop's repeat guard then
ends the run with the earlier result copied over (``stopped_by="repeated_call"``).

So the embedded model reads such a reply for what it is: every call in it is one the
conversation has already made, with the same arguments, and answered without an error. The
model has nothing left to call; the same request is asked again as the answer step
(``tool_choice="none"``: under the constrained schema, text only), and that answer is the
turn. The run then ends on the model's own answer. A call with new arguments, or to another
tool, is a next step and goes to the loop as written (an agent that chains calls keeps
doing so); a repeat of a call that failed goes to the loop too (it answers the copy with the
same failure).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from gramagent._messages import AssistantMessage, Message, ToolCall, ToolResultMessage
from gramagent._models.base import ModelRequest, ModelTurn

__all__ = ["repeats_answered_calls"]


def repeats_answered_calls(request: ModelRequest, turn: ModelTurn) -> bool:
    """Whether ``turn``, the reply to ``request``, only repeats calls already answered.

    True when the request follows tool results (not the user's message), leaves the choice
    to the model (``tool_choice="auto"``), and every call of the reply has the name and the
    arguments (as JSON values, key order aside) of a call of the conversation whose result
    was not an error.
    """
    if (not turn.tool_calls or request.replies_to_user or request.tool_choice != "auto"
            or turn.cut_off_calls):
        return False
    answered = _answered_calls(request.messages)
    if not answered:
        return False
    for call in turn.tool_calls:
        arguments = _arguments(call)
        if arguments is _UNREADABLE or (call.name, _key(arguments)) not in answered:
            return False
    return True


_UNREADABLE = object()


def _answered_calls(messages: Sequence[Message]) -> set[tuple[str, str]]:
    """(name, canonical arguments) of each call in ``messages`` answered without error."""
    ok = {m.call_id for m in messages if isinstance(m, ToolResultMessage) and not m.is_error}
    answered: set[tuple[str, str]] = set()
    for message in messages:
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                arguments = _arguments(call)
                if call.id in ok and arguments is not _UNREADABLE:
                    answered.add((call.name, _key(arguments)))
    return answered


def _arguments(call: ToolCall) -> Any:
    try:
        return json.loads(call.arguments or "{}")
    except ValueError:
        return _UNREADABLE


def _key(arguments: Any) -> str:
    """One text per JSON value, whatever the key order or spacing it was written with."""
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"))
