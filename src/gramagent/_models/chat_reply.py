"""Reading a Chat Completions reply (non-streamed, or assembled from its stream) into a turn.

A reply is ``choices[0].message`` with ``content`` (may be null) and ``tool_calls`` (or legacy
``function_call``); ``usage.prompt_tokens`` / ``usage.completion_tokens``. Calls keep their
``arguments`` text as sent; ids are synthesized when a server sends none (legacy always). In the
modes where gramagent reads the content itself, calls written in it are read too
(:func:`parse_chat_reply`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from gramagent._messages import (
    ToolCall,
    new_tool_call,
)
from gramagent._models._wire import (
    ReplyError,
    arguments_text,
    first_choice,
    new_call_id,
    split_cut_off,
    usage_from,
)
from gramagent._models.base import (
    ModelRequest,
    ModelTurn,
    new_turn,
)
from gramagent._models.hybrid import WireMode
from gramagent._models.jsoncalls import (
    extract_json_calls,
    read_tool_step,
)

__all__ = ["parse_chat_reply", "readable_tool_names", "reply_content"]


def readable_tool_names(request: ModelRequest, tool_call_mode: WireMode) -> list[str]:
    """The tool names whose calls may be read from a reply's content.

    None in ``native`` mode (calls come in ``tool_calls`` only), and none in ``text`` mode when
    the request says ``tool_choice="none"``: the model was told not to call (the loop's repeat
    guard asks for a final answer this way), so JSON it writes anyway stays text instead of
    becoming calls the loop would run again and again.
    """
    if tool_call_mode == "native" or (tool_call_mode == "text" and request.tool_choice == "none"):
        return []
    return [t.name for t in request.tools]


def parse_chat_reply(
    data: Mapping[str, object],
    *,
    tool_call_mode: WireMode = "native",
    tool_names: Collection[str] = (),
) -> ModelTurn:
    """Read a (non-streamed or assembled) Chat Completions reply into a :class:`ModelTurn`.

    ``tool_names`` are the offered tools, used by the ``text`` and ``constrained`` modes.
    Legacy ``finish_reason: "function_call"`` is reported as ``"tool_calls"``; a ``refusal``
    (the model declined) becomes the text, with ``finish_reason`` ``"refusal"``.

    Raises:
        ReplyError: the reply has no ``choices[0].message``.
    """
    choice = first_choice(data)
    message = choice.get("message")
    if not isinstance(message, dict):
        raise ReplyError("the reply's first choice has no message")
    content = message.get("content")
    text = content if content is None or isinstance(content, str) else _content_text(content)
    raw_calls = message.get("tool_calls")
    calls = (_native_calls(raw_calls, message) if raw_calls or "function_call" in message
             else ())
    finish = choice.get("finish_reason")
    if not calls:
        if text is not None and tool_call_mode != "native":
            if tool_call_mode == "constrained":
                text, calls = read_tool_step(text, tool_names)
            elif tool_call_mode == "text":
                text, calls = extract_json_calls(text, tool_names)
        refusal = message.get("refusal")
        if not calls and refusal and isinstance(refusal, str):
            # The model declined: its refusal is the answer's text, and says how it ended.
            text, finish = (text or refusal), "refusal"
    if finish == "function_call":
        finish = "tool_calls"
    cut_off: tuple[ToolCall, ...] = ()
    if finish == "length":
        calls, cut_off = split_cut_off(calls)
    usage = usage_from(data.get("usage"), "prompt_tokens", "completion_tokens")
    return new_turn(text=text, tool_calls=calls, usage=usage,
                    finish_reason=finish if isinstance(finish, str) else None,
                    cut_off_calls=cut_off, raw=data)


def _content_text(content: object) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts, sent by some servers
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        return "".join(p for p in parts if isinstance(p, str))
    return str(content)


def _native_calls(raw_calls: object, message: Mapping[str, object]) -> tuple[ToolCall, ...]:
    """The calls of a reply's ``message`` (``raw_calls``: its ``tool_calls``), or its legacy
    ``function_call``."""
    calls: list[ToolCall] = []
    if isinstance(raw_calls, list):
        for raw in raw_calls:
            # The usual call: an object with a non-empty string id and a function object with
            # a string name and string arguments, read at once; anything else is read field
            # by field (_odd_call).
            try:
                fn = raw["function"]
                call_id, name, arguments = raw["id"], fn["name"], fn["arguments"]
            except (TypeError, KeyError, IndexError):
                call = _odd_call(raw)
            else:
                call = (new_tool_call(id=call_id, name=name, arguments=arguments)
                        if type(call_id) is str and call_id and type(name) is str
                        and type(arguments) is str else _odd_call(raw))
            if call is not None:
                calls.append(call)
        if calls:
            return tuple(calls)
    legacy = message.get("function_call")
    if isinstance(legacy, dict):
        name = legacy.get("name")
        return (new_tool_call(
            id=new_call_id(),
            name=name if isinstance(name, str) else "",
            arguments=arguments_text(legacy.get("arguments")),
        ),)
    return ()


def _odd_call(raw: object) -> ToolCall | None:
    """A ``tool_calls`` item that is not the usual one, read as far as it goes: a missing or
    empty id gets a fresh one, a missing name is empty, arguments that are not text are
    encoded; None for an item that is not an object."""
    if not isinstance(raw, dict):
        return None
    fn = raw.get("function")
    if isinstance(fn, dict):
        name = fn.get("name")
        arguments = fn.get("arguments")
    else:
        name = arguments = None
    call_id = raw.get("id")
    return new_tool_call(
        id=call_id if call_id and isinstance(call_id, str) else new_call_id(),
        name=name if isinstance(name, str) else "",
        arguments=arguments if isinstance(arguments, str) else arguments_text(arguments),
    )


def reply_content(data: Mapping[str, object]) -> str | None:
    """The ``content`` of a reply's first choice (as :func:`parse_chat_reply` reads it)."""
    choices = data.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        message = choices[0].get("message")
        if isinstance(message, dict) and isinstance(message.get("content"), str):
            return str(message["content"])
    return None

