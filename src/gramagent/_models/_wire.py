"""Small pure helpers shared by the OpenAI-style wire formats (chat, responses)."""

from __future__ import annotations

import secrets
from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from gramagent import _json as exact_json
from gramagent._messages import REMEMBERED_FROM, Message, ToolCall, Usage, new_usage
from gramagent._spec.definition import ToolDefinition

__all__ = [
    "RenderedReply",
    "ReplyError",
    "ToolsMemo",
    "arguments_text",
    "completion_choice",
    "error_reply",
    "finish_chunk",
    "first_choice",
    "new_call_id",
    "REMEMBERED_FROM",
    "render_history",
    "split_cut_off",
    "tool_parameters",
    "MAX_REPORTED_TOKENS",
    "usage_from",
    "usage_sum",
]


_Item = TypeVar("_Item")
_Tool = TypeVar("_Tool")


class ReplyError(ValueError):
    """A server reply an adapter cannot read (the adapter turns it into a ModelAPIError)."""


def first_choice(data: Mapping[str, object], reply: str = "the reply"
                 ) -> Mapping[str, object]:
    """The first of a reply's ``choices`` (Chat Completions, completions).

    Raises:
        ReplyError: the reply has no first choice that is an object (``reply`` names it in
            the message).
    """
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ReplyError(f"{reply} has no choices")
    choice: Mapping[str, object] = choices[0]
    return choice


def completion_choice(data: Mapping[str, object]) -> tuple[Mapping[str, object], str]:
    """The first choice of a (legacy) completions reply and its ``text``.

    Raises:
        ReplyError: the reply has no first choice with a string ``text``.
    """
    choice = first_choice(data, "the completion reply")
    text = choice.get("text")
    if not isinstance(text, str):
        raise ReplyError("the completion reply's first choice has no text")
    return choice, text


@dataclass(frozen=True, slots=True)
class RenderedReply:
    """An HTTP answer as a server of one wire format sends it (built by the format's
    ``render_reply``, served by :class:`gramagent.testing.ScriptedServer`)."""

    body: bytes
    content_type: str = "application/json"
    status: int = 200


_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                403: "permission_error", 404: "not_found_error", 429: "rate_limit_error"}


def error_reply(status: int, message: str) -> RenderedReply:
    """An OpenAI-shaped error answer: ``{"error": {"message", "type", "param", "code"}}``."""
    kind = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    body = {"error": {"message": message, "type": kind, "param": None, "code": status}}
    return RenderedReply(exact_json.dumps(body).encode(), status=status)


def render_history(head: list[_Item], messages: Sequence[Message],
                   rendered: dict[str, Any] | None, wire_format: str,
                   render: Callable[[Sequence[Message], list[_Item]], None]) -> list[_Item]:
    """``head`` (a new list of the items before the history: the system instruction), then
    the wire items of ``messages`` (``render(messages, out)`` appends their items).

    With ``rendered`` (the conversation's memo, ``ModelRequest.rendered``, shared by the
    conversation and its copies), the items of the longest prefix of ``messages`` that the
    last request of the conversation (or of a copy) also sent are taken from it, and only the
    messages after that prefix are rendered: a long history is a list copy per request, not
    new dicts per message. The memo holds ``(head, messages, items, ends)`` per wire format,
    ``items`` being the whole list sent (the head's items first) and ``ends[i]`` (an
    ``array("q")``) the number of history items up to ``messages[i]`` included. A request
    with the same head as the last one continues that list (no copy into the body: the list
    itself is sent, and sent again when nothing was added); another head (an instruction
    that changed, e.g. a constrained step's hint) takes the history's items after its own.
    Items, and lists, are shared between request bodies: read-only, never extended in place.
    Histories shorter than :data:`REMEMBERED_FROM` messages are rendered afresh (into
    ``head``).
    """
    # Short histories are rendered afresh (docs/performance.md, "Models and HTTP").
    if rendered is None or len(messages) < REMEMBERED_FROM:
        render(messages, head)
        return head
    memo: tuple[list[_Item], Sequence[Message], list[_Item], array[int]] = rendered.get(
        wire_format, _NOTHING_RENDERED)
    before_head, before, items, ends = memo
    # Equal prefixes: the same conversation, grown (one slice, of the longer one).
    shown, sent = len(messages), len(before)
    common = min(shown, sent)
    if common and (messages[:sent] != before if shown > sent
                   else messages != before[:shown] if shown < sent
                   else messages != before):
        # Another branch. Runs that each continue one context with a message of their own part
        # at the last message both hold: checked first; else found one by one.
        last = common - 1
        if messages[:last] == before[:last]:
            common = last
        else:
            common = next((n for n, (a, b) in enumerate(zip(messages, before, strict=False))
                           if a is not b), common)
    size = len(head)
    if head == before_head:
        if common == shown == sent:
            return items
        if common:
            items, head = items[:size + ends[common - 1]], before_head
    elif common:  # the same history after another head: its items after this one
        offset = len(before_head)
        items = head + items[offset:offset + ends[common - 1]]
    if not common:
        items, head = head, head[:]  # the memo keeps the head as it was sent
    ends = ends[:common]
    for message in messages[common:]:
        render((message,), items)
        ends.append(len(items) - size)
    rendered[wire_format] = (head, messages, items, ends)
    return items


_NOTHING_RENDERED: tuple[list[object], Sequence[Message], list[object], array[int]] = (
    [None], (), [], array("q"))
"""No memo yet: a head no request sends, and no history."""


def finish_chunk(event: Mapping[str, object]) -> bool:
    """Whether a streamed chunk of Chat Completions or completions (``choices``) says the
    answer is over: a choice with a ``finish_reason``. With ``[DONE]``, what tells a stream
    that ended from one cut short (:meth:`~gramagent._models.http.HTTPClient.stream_sse`)."""
    choices = event.get("choices")
    return isinstance(choices, list) and any(
        isinstance(c, dict) and c.get("finish_reason") for c in choices)


def new_call_id() -> str:
    """A fresh call id, for formats and servers that send none (legacy functions, JSON modes)."""
    return "call_" + secrets.token_hex(12)


def arguments_text(value: object) -> str:
    """A call's arguments as JSON text: strings are kept verbatim (even when malformed, the loop
    reports that), objects are encoded, a missing value means no arguments (``{}``)."""
    if isinstance(value, str):
        return value
    if value is None:
        return "{}"
    try:
        return exact_json.dumps(value)
    except (TypeError, ValueError):
        return str(value)


def split_cut_off(calls: tuple[ToolCall, ...]
                  ) -> tuple[tuple[ToolCall, ...], tuple[ToolCall, ...]]:
    """``(whole, cut_off)`` of a reply the token limit ended (``finish_reason: "length"``): the
    calls whose arguments are not a whole JSON object were cut off by it."""
    whole = [_whole_object(call.arguments) for call in calls]
    if all(whole):
        return calls, ()
    return (tuple(call for call, ok in zip(calls, whole, strict=True) if ok),
            tuple(call for call, ok in zip(calls, whole, strict=True) if not ok))


def _whole_object(arguments: str) -> bool:
    if not arguments.strip():
        return True  # no arguments
    try:
        return isinstance(exact_json.loads(arguments), dict)
    except (ValueError, TypeError, RecursionError):
        return False


def tool_parameters(tool: ToolDefinition, strict: bool) -> tuple[dict[str, Any], bool]:
    """The parameters schema to send for ``tool`` and whether to mark it ``strict``.

    Strict mode uses the schema compiled at bind time (``strict_parameters``); a tool without
    one falls back to its plain schema, sent non-strict.
    """
    if strict and tool.strict_parameters is not None:
        return tool.strict_parameters, True
    return tool.parameters, False


MAX_REPORTED_TOKENS = 100_000_000
"""The most tokens one request can plausibly report in either direction (no context holds
more); a larger count, like a negative one, is not believed."""


def usage_sum(first: Usage | None, second: Usage | None) -> Usage | None:
    """The usage of two requests that made one turn; the one reported when the other is not
    (None when neither is)."""
    if first is None or second is None:
        return second or first
    return first + second


def usage_from(data: Any, input_key: str, output_key: str) -> Usage | None:
    """Read a usage object (``prompt_tokens``/``completion_tokens`` or ``input_tokens``/
    ``output_tokens``); None when the server reported none, or reported a count that cannot be
    true (negative, not an integer, beyond :data:`MAX_REPORTED_TOKENS`): the loop then
    estimates the turn's tokens, so a lying server cannot disable the token budget."""
    try:  # the usual reply: a dict with both counts
        inp = data[input_key]
        out = data[output_key]
    except (KeyError, TypeError):  # a count missing, or not an object (JSON: no dict)
        if not isinstance(data, dict):
            return None
        inp = data.get(input_key)
        out = data.get(output_key)
    # Two counts, neither negative (``inp | out`` is negative if one is) nor beyond the bound.
    if (type(inp) is int and type(out) is int and (inp | out) >= 0
            and inp <= MAX_REPORTED_TOKENS >= out):
        return new_usage(input_tokens=inp, output_tokens=out, requests=1)
    if not isinstance(data, dict) or inp is None and out is None:
        return None
    if not all(v is None or (type(v) is int and 0 <= v <= MAX_REPORTED_TOKENS)
               for v in (inp, out)):
        return None
    return new_usage(input_tokens=inp or 0, output_tokens=out or 0, requests=1)


class ToolsMemo(Generic[_Tool]):
    """The ``tools`` part of a request body, kept for the tool list it was built from.

    The loop sends the same definitions object (its bound agent's) on every request, so an
    adapter builds that part once and reuses it while the list is the same object; another
    list rebuilds it. The memo holds the list it was built from, so identity cannot be
    confused by a recycled ``id``. The payload is shared between bodies: read-only.
    """

    __slots__ = ("_build", "_memo")

    def __init__(self, build: Callable[[Sequence[ToolDefinition]], list[_Tool]]) -> None:
        self._build = build
        self._memo: tuple[Sequence[ToolDefinition], list[_Tool]] | None = None

    def get(self, tools: Sequence[ToolDefinition]) -> list[_Tool]:
        """The payload of ``tools``: ``build(tools)``, unless built for this list already."""
        memo = self._memo  # one tuple: threads sharing the adapter never see a torn pair
        if memo is None or memo[0] is not tools:
            memo = self._memo = (tools, self._build(tools))
        return memo[1]
