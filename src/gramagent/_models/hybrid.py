"""Hybrid tool calling: a free first reply, constrained only where it must be.

Constrained decoding (:func:`~gramagent._models.jsoncalls.tool_step_schema`) makes every call
parse, but a small model under it never declines: offered one unrelated function, it calls it
(bench/RESULTS.md, "BFCL", issue 19). Left free, the same model signals "no offered function
fits" by writing a call to a function it *invents* (``calculate_triangle_area`` when offered a
BMI calculator). ``tool_call_mode="hybrid"`` reads that signal, and keeps constrained decoding
as the safety net for calls:

1. The request goes out unconstrained (``text`` mode: calls written as JSON are recovered),
   with the constrained mode's sentence about lists of calls (without it the 1.5B wrote one
   call where BFCL's ``parallel`` asks for several) and :data:`CALL_RATHER_THAN_SOLVE` (without
   it the 1.5B solved a quadratic itself when offered a quadratic solver).
2. Calls to offered tools whose arguments are a JSON object valid against the tool's schema
   are the turn, as they are (a lone call is asked whether more follow, when the adapter
   continues lone calls).
3. A call to an offered tool with arguments that do not parse or validate, or a call whose
   JSON is broken (an offered name in a ``"name"`` field that could not be read), is asked
   again under the constrained step schema: that tool's variant when one call was meant, every
   call shape (``"required"``) when several were.
4. Only calls to tools that are not offered: the model declined. The answer is asked for under
   the constrained schema that allows text only (``tool_choice="none"``).
5. Prose, with no call in it, is the answer; unless it names an offered tool ("I will call the
   sayHello function with ..."): then it talks about a call it did not make, and its answer
   is asked for as in 4.

Only a request that ends with the user's message, offers tools and leaves the choice to the
model (``tool_choice="auto"``) is such a decision; every other request (after tool results,
a forced or forbidden call, no tools) goes straight to the constrained step. A reply cut off
at ``max_tokens`` counts each distinct call once (a small model may repeat one call until the
limit). The turn's usage sums every request made.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal, TypeAlias

from gramagent._messages import ToolCall
from gramagent._models._wire import usage_sum
from gramagent._models.base import ModelRequest, ModelTurn, NamedToolChoice
from gramagent._models.jsoncalls import SEVERAL_CALLS_HINT, call_names_in
from gramagent._spec.calls.validate import compile_validator
from gramagent._spec.definition import ToolDefinition
from gramagent.errors import SchemaError

__all__ = ["CALL_RATHER_THAN_SOLVE", "FreeReply", "WireMode", "hybrid_turn", "read_free_reply"]

CALL_RATHER_THAN_SOLVE = (
    "Whenever one of the provided functions can compute or look up what the user asks, call "
    "it instead of working the answer out yourself; answer in text only when no provided "
    "function fits the request."
)
"""The free step's last paragraph: left free, the 1.5B worked out in prose what an offered
function computes (roots of a quadratic, a free-fall speed); told this, it calls the function
and still answers in prose where none fits (bench/RESULTS.md, "BFCL", issue 19)."""

WireMode: TypeAlias = Literal["native", "constrained", "text"]
"""The modes one request goes out in (``hybrid`` is made of ``text`` and ``constrained``)."""

Send: TypeAlias = Callable[[ModelRequest, WireMode], Awaitable[ModelTurn]]
"""Sends one request in one wire mode and reads the reply."""

More: TypeAlias = Callable[[ModelRequest, ModelTurn], Awaitable[ModelTurn]]
"""Takes a request and the calls read from its free reply; returns the turn to keep."""

FreeKind: TypeAlias = Literal["calls", "retry", "declined", "text"]


@dataclass(frozen=True, slots=True)
class FreeReply:
    """What the free first reply of a hybrid step amounts to (:func:`read_free_reply`).

    ``kind``: ``calls`` (valid calls to offered tools, in ``calls``), ``retry`` (a call to an
    offered tool that must be asked again under the schema; ``retry_with`` names the tool when
    one call was meant), ``declined`` (only calls to tools not offered, or prose naming an
    offered tool it did not call: the answer is asked for in text), ``text`` (an answer).
    """

    kind: FreeKind
    calls: tuple[ToolCall, ...] = ()
    retry_with: str | None = None


def read_free_reply(turn: ModelTurn, tools: Sequence[ToolDefinition]) -> FreeReply:
    """Classify an unconstrained reply (read in ``text`` mode) against the offered ``tools``."""
    offered = {tool.name: tool for tool in tools}
    mine = [call for call in turn.tool_calls if call.name in offered]
    if turn.finish_reason == "length":  # a reply cut off while repeating one call: once
        mine = _distinct(mine)
    if mine:
        if all(_valid_arguments(call, offered[call.name]) for call in mine):
            return FreeReply("calls", tuple(mine))
        names = {call.name for call in mine}
        only = next(iter(names)) if len(mine) == 1 else None
        return FreeReply("retry", retry_with=only)
    named = [*(call.name for call in turn.tool_calls), *call_names_in(turn.text)]
    if any(name in offered for name in named):
        return FreeReply("retry")  # a call to an offered tool whose JSON could not be read
    if named or any(_mentions(turn.text, name) for name in offered):
        return FreeReply("declined")
    return FreeReply("text")


async def hybrid_turn(request: ModelRequest, send: Send, more: More | None = None
                      ) -> ModelTurn:
    """One hybrid step (see the module docs): one to two requests through ``send``; valid
    calls of the free reply then go through ``more`` (the adapter asks a lone call whether
    more calls follow).

    Raises:
        ModelAPIError: as ``send``.
        ConfigurationError: as ``send`` (a named ``tool_choice`` that is not offered).
    """
    if not _is_a_decision(request):
        return await send(request, "constrained")
    hints = (f"{SEVERAL_CALLS_HINT}\n\n{CALL_RATHER_THAN_SOLVE}" if request.parallel_tool_calls
             else CALL_RATHER_THAN_SOLVE)
    instruction = f"{request.instruction}\n\n{hints}" if request.instruction else hints
    free = await send(replace(request, instruction=instruction), "text")
    reply = read_free_reply(free, request.tools)
    if reply.kind == "calls":
        turn = replace(free, tool_calls=reply.calls, cut_off_calls=())
        return turn if more is None else await more(request, turn)
    if reply.kind == "text":
        return free
    if reply.kind == "declined":
        again = replace(request, tool_choice="none")
    elif reply.retry_with is not None:
        again = replace(request, tool_choice=NamedToolChoice(reply.retry_with))
    else:
        again = replace(request, tool_choice="required")
    turn = await send(again, "constrained")
    return replace(turn, usage=usage_sum(free.usage, turn.usage))


def _is_a_decision(request: ModelRequest) -> bool:
    """Whether the model must choose between the offered tools and answering itself: tools
    offered, ``tool_choice="auto"``, and a user message last (after tool results the step
    goes out constrained: left free there, the 0.5B repeats its last call until ``max_tokens``,
    bench/RESULTS.md)."""
    return bool(request.tools) and request.tool_choice == "auto" and request.replies_to_user


def _mentions(text: str | None, name: str) -> bool:
    """Whether ``text`` names the tool ``name`` (as a whole word)."""
    return bool(text) and re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", text or "") is not None


def _distinct(calls: Sequence[ToolCall]) -> list[ToolCall]:
    seen: set[tuple[str, str]] = set()
    out: list[ToolCall] = []
    for call in calls:
        if (call.name, call.arguments) not in seen:
            seen.add((call.name, call.arguments))
            out.append(call)
    return out


def _valid_arguments(call: ToolCall, tool: ToolDefinition) -> bool:
    try:
        arguments = json.loads(call.arguments or "{}")
    except ValueError:
        return False
    if not isinstance(arguments, Mapping):
        return False
    try:
        return compile_validator(tool.parameters).is_valid(arguments)
    except SchemaError:
        return True  # a schema the validator cannot compile: the tool will say

