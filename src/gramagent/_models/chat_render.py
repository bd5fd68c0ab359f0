"""Chat Completions replies as a server sends them: the scripted server's side of the format.

:func:`render_reply` answers a request with a turn (a ``chat.completion`` object, or its
``chat.completion.chunk`` events when the request asks for a stream), the inverse of
:mod:`gramagent._models.chat_reply` and :mod:`gramagent._models.chat_stream`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from gramagent import _json as exact_json
from gramagent._messages import (
    Usage,
)
from gramagent._models._wire import (
    RenderedReply,
)
from gramagent._models.base import (
    ModelTurn,
    new_turn,
)
from gramagent._models.chat_request import chat_tool_calls
from gramagent._models.jsoncalls import (
    tool_step_content,
    wants_tool_step,
)
from gramagent._models.sse import encode_sse
from gramagent._models.wire_shapes import (
    ChatCompletion,
    ChatReplyMessage,
    ChatUsage,
    JSONObject,
)

__all__ = ["render_chat_chunks", "render_chat_completion", "render_reply"]


def _usage_dict(usage: Usage | None) -> ChatUsage | None:
    if usage is None:
        return None
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
    }


def _finish(turn: ModelTurn, legacy: bool) -> str:
    if turn.finish_reason:
        return turn.finish_reason
    if turn.tool_calls:
        return "function_call" if legacy else "tool_calls"
    return "stop"


def render_chat_completion(
    turn: ModelTurn,
    *,
    model: str,
    legacy: bool = False,
    completion_id: str = "chatcmpl-0",
    created: int | None = None,
) -> ChatCompletion:
    """The ``chat.completion`` object a server sends for ``turn`` (inverse of
    :func:`parse_chat_reply`); ``legacy`` renders the first call as ``function_call``."""
    message: ChatReplyMessage = {"role": "assistant", "content": turn.text}
    if turn.tool_calls:
        if legacy:
            first = turn.tool_calls[0]
            message["function_call"] = {"name": first.name, "arguments": first.arguments}
        else:
            message["tool_calls"] = chat_tool_calls(turn.tool_calls)
    out: ChatCompletion = {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()) if created is None else created,
        "model": model,
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": None,
            "finish_reason": _finish(turn, legacy),
        }],
    }
    usage = _usage_dict(turn.usage)
    if usage is not None:
        out["usage"] = usage
    return out


def render_chat_chunks(
    turn: ModelTurn,
    *,
    model: str,
    legacy: bool = False,
    include_usage: bool = False,
    completion_id: str = "chatcmpl-0",
    created: int | None = None,
    piece: int = 16,
) -> list[JSONObject]:
    """The ``chat.completion.chunk`` events a streaming server sends for ``turn``: a role
    delta, content in ``piece``-character deltas, each call's id and name then its arguments
    in pieces, the finish reason, and (``include_usage``) a final chunk with empty ``choices``
    and the usage."""
    stamp = int(time.time()) if created is None else created

    def chunk(delta: JSONObject, finish: str | None = None) -> JSONObject:
        return {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": stamp,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }

    out = [chunk({"role": "assistant", "content": "" if turn.text is not None else None})]
    text = turn.text or ""
    out.extend(chunk({"content": text[i:i + piece]}) for i in range(0, len(text), piece))
    calls = turn.tool_calls[:1] if legacy else turn.tool_calls
    for index, call in enumerate(calls):
        args = call.arguments
        if legacy:
            out.append(chunk({"function_call": {"name": call.name, "arguments": ""}}))
            out.extend(chunk({"function_call": {"arguments": args[i:i + piece]}})
                       for i in range(0, len(args), piece))
            continue
        out.append(chunk({"tool_calls": [{
            "index": index, "id": call.id, "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }]}))
        out.extend(
            chunk({"tool_calls": [{"index": index, "function": {"arguments": args[i:i + piece]}}]})
            for i in range(0, len(args), piece)
        )
    out.append(chunk({}, _finish(turn, legacy)))
    usage = _usage_dict(turn.usage)
    if include_usage and usage is not None:
        out.append({
            "id": completion_id, "object": "chat.completion.chunk", "created": stamp,
            "model": model, "choices": [], "usage": usage,
        })
    return out


def render_reply(turn: ModelTurn, request: Mapping[str, object], *, model: str, number: int,
                 verbatim: bool = False) -> RenderedReply:
    """The answer a Chat Completions server sends to ``request`` for ``turn`` (the renderer of
    this wire format in :class:`gramagent.testing.ScriptedServer`): the first call as legacy
    ``function_call`` when the request declares ``functions``, SSE chunks when it asks for a
    stream, the constrained tool-step content when it asks for that format (unless
    ``verbatim``: then the text goes out as it is, to script malformed constrained output)."""
    if wants_tool_step(request) and not verbatim:
        turn = new_turn(text=tool_step_content(turn), usage=turn.usage, finish_reason="stop")
    legacy = bool(request.get("functions")) and not request.get("tools")
    reply_id = f"chatcmpl-{number}"
    if request.get("stream") is True:
        options = request.get("stream_options")
        include_usage = isinstance(options, dict) and options.get("include_usage") is True
        chunks = render_chat_chunks(turn, model=model, legacy=legacy,
                                    include_usage=include_usage, completion_id=reply_id)
        return RenderedReply(encode_sse(chunks), content_type="text/event-stream")
    completion = render_chat_completion(turn, model=model, legacy=legacy, completion_id=reply_id)
    return RenderedReply(exact_json.dumps(completion).encode())
