"""The Responses API wire format (``POST /responses``), used statelessly.

Request (built by :func:`build_responses_body`)::

    {"model": ..., "store": false, "input": [
        {"role": "system", "content": INSTRUCTION},
        {"role": "user", "content": ...},
        {"type": "message", "role": "assistant",
         "content": [{"type": "output_text", "text": ...}]},
        {"type": "function_call", "call_id": ..., "name": ..., "arguments": "<json text>"},
        {"type": "function_call_output", "call_id": ..., "output": ...}],
     "tools": [{"type": "function", "name", "description", "parameters", "strict": true}],
     "tool_choice": "auto" | "none" | "required" | {"type": "function", "name": N},
     "parallel_tool_calls": true | false}   (the request's: the run's settings may say false)

The whole history goes in ``input`` every turn (no ``previous_response_id``; ``store: false``).
Strict tools (the default) use the schema compiled at bind time
(``ToolDefinition.strict_parameters``, from ``spec.schema.strict_schema``); a tool without one is
sent with its plain schema and ``strict: false``. A ``max_tokens`` setting is sent as
``max_output_tokens``.

Reply: the ``output`` items: ``message`` items (``output_text`` parts; ``refusal`` parts read as
text), ``function_call`` items (``call_id``, ``name``, ``arguments``; several when parallel),
``reasoning`` and other items ignored; ``usage.input_tokens`` / ``usage.output_tokens``. The
finish reason is normalized: ``length`` for an ``incomplete`` response cut by
``max_output_tokens`` (with or without calls: the last may be cut off), the incompleteness
reason for another ``incomplete`` response (``content_filter``), else ``tool_calls`` when there
are calls, ``refusal`` when the model declined, else ``stop``. A ``failed`` response is a
ModelAPIError.
"""

from __future__ import annotations

import time
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, Unpack, cast

from gramagent import _json as exact_json
from gramagent._messages import AssistantMessage, Message, ToolCall, UserMessage, new_tool_call
from gramagent._models._wire import (
    RenderedReply,
    ReplyError,
    ToolsMemo,
    arguments_text,
    new_call_id,
    render_history,
    split_cut_off,
    tool_parameters,
    usage_from,
)
from gramagent._models.base import (
    ModelRequest,
    ModelTurn,
    NamedToolChoice,
    TextSink,
    ToolChoice,
    new_turn,
)
from gramagent._models.http import HTTPClient, HTTPOptions
from gramagent._models.http_adapter import HTTPAdapter
from gramagent._models.sse import encode_sse
from gramagent._models.wire_shapes import (
    JSONObject,
    ResponsesBody,
    ResponsesInputItem,
    ResponsesTool,
    ResponsesToolChoice,
)
from gramagent._spec.definition import ToolDefinition

__all__ = [
    "RESPONSES_PATH",
    "ResponsesModel",
    "build_responses_body",
    "parse_responses_reply",
    "render_reply",
    "render_response",
    "render_response_events",
    "responses_input",
    "responses_tools",
]

RESPONSES_PATH = "/responses"


class ResponsesModel(HTTPAdapter):
    """A :class:`~gramagent._models.base.Model` speaking the Responses API, statelessly.

    Args:
        base_url: The API root, e.g. ``https://api.openai.com/v1``.
        api_key: Bearer token; None for local servers that need none.
        strict: Send tools as ``strict: true`` with their strict-compiled schemas.
        http: Share an existing :class:`~gramagent._models.http.HTTPClient` instead of creating
            one; transport options then belong to that client.
        **http_options: Transport options, see :class:`~gramagent._models.http.HTTPOptions`.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        strict: bool = True,
        http: HTTPClient | None = None,
        **http_options: Unpack[HTTPOptions],
    ) -> None:
        super().__init__(base_url, api_key, api="responses", http=http, **http_options)
        self.strict = strict
        self._tools = ToolsMemo(self._tools_payload)

    def __repr__(self) -> str:
        return f"ResponsesModel({self.http.base_url!r}, strict={self.strict})"

    def request(self, request: ModelRequest) -> Coroutine[object, None, ModelTurn]:
        """Send ``request`` to ``/responses``; the returned coroutine, awaited, gives the
        normalized turn.

        Raises:
            ModelAPIError: transport or HTTP failure after retries, a ``failed`` response, or
                an unreadable reply.
        """
        body = build_responses_body(request, strict=self.strict,
                                    tools_payload=self._tools.get(request.tools))
        return self.http.post_read(RESPONSES_PATH, body, parse_responses_reply)

    async def stream_request(self, request: ModelRequest, on_text: TextSink) -> ModelTurn:
        """:meth:`request`, streamed (``stream: true``): each ``response.output_text.delta``
        (and ``response.refusal.delta``) goes to ``on_text``; the turn is read from the
        response the final ``response.completed`` (``.incomplete``, ``.failed``) event carries.

        Raises:
            ModelAPIError: as :meth:`request`, the stream broke off, reported an ``error``, or
                ended without a final response.
        """
        body = build_responses_body(
            request, strict=self.strict, tools_payload=self._tools.get(request.tools),
        )
        body["stream"] = True
        final: object = None
        async for event in self.http.stream_sse(RESPONSES_PATH, body):
            kind = event.get("type")
            if not isinstance(kind, str):  # a hostile event (a list is not even hashable)
                continue
            if kind in _TEXT_DELTAS:
                piece = event.get("delta")
                if isinstance(piece, str) and piece:
                    on_text(piece)
            elif kind in _FINAL_EVENTS:
                final = event.get("response")
            elif kind == "error":
                message = event.get("message")
                raise self.reply_error(
                    RESPONSES_PATH, ReplyError(f"the stream reported an error: {message}"),
                    body=exact_json.dumps(event).encode(), model=request.model,
                )
        try:
            if not isinstance(final, dict):
                raise ReplyError("the stream ended without a completed response")
            return parse_responses_reply(final)
        except ReplyError as exc:
            error = self.reply_error(
                RESPONSES_PATH, exc, body=exact_json.dumps(final).encode(), model=request.model)
            error.__cause__ = exc  # as ``raise ... from exc`` (a compiled build drops ``from``)
            raise error  # noqa: B904 (set above)

    def _tools_payload(self, tools: Sequence[ToolDefinition]) -> list[ResponsesTool]:
        return responses_tools(tools, strict=self.strict)


_TEXT_DELTAS = frozenset({"response.output_text.delta", "response.refusal.delta"})
_FINAL_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed"})


# -- request ---------------------------------------------------------------------------------


def build_responses_body(
    request: ModelRequest, strict: bool = True,
    tools_payload: list[ResponsesTool] | None = None,
) -> ResponsesBody:
    """The JSON body for ``request`` (pure; see the module docs for the shape).

    ``tools_payload`` is :func:`responses_tools` of ``request.tools``, when the caller has it.
    """
    settings = request.settings
    tools = request.tools
    body: ResponsesBody = {
        "model": request.model,
        "input": responses_input(request.instruction, request.messages, request.rendered),
    }
    if settings:  # first, so the fields set here win over them
        merged: dict[str, object] = {**settings, **body}
        if "max_tokens" in merged:
            merged.setdefault("max_output_tokens", merged.pop("max_tokens"))
        merged.pop("stream", None)
        merged.pop("stream_options", None)
        merged.pop("previous_response_id", None)
        body = cast(ResponsesBody, merged)
    if tools:
        body["tools"] = (tools_payload if tools_payload is not None
                         else responses_tools(tools, strict=strict))
        choice = request.tool_choice
        body["tool_choice"] = choice if isinstance(choice, str) else _tool_choice(choice)
        body["parallel_tool_calls"] = request.parallel_tool_calls
    body["store"] = False
    return body


def responses_tools(tools: Sequence[ToolDefinition], *, strict: bool = True
                    ) -> list[ResponsesTool]:
    """The ``tools`` list describing ``tools`` (strict-compiled schemas when ``strict``)."""
    out: list[ResponsesTool] = []
    for tool in tools:
        parameters, is_strict = tool_parameters(tool, strict)
        out.append({
            "type": "function",
            "name": tool.name,
            "description": tool.description,
            "parameters": parameters,
            "strict": is_strict,
        })
    return out


def responses_input(instruction: str, messages: Sequence[Message],
                    rendered: dict[str, Any] | None = None) -> list[ResponsesInputItem]:
    """The ``input`` items: the system instruction, then the history (``rendered``: the
    conversation's memo of earlier requests, see :func:`render_history`)."""
    items: list[ResponsesInputItem] = ([{"role": "system", "content": instruction}]
                                       if instruction else [])
    return render_history(items, messages, rendered, "responses", _append_items)


def _append_items(messages: Sequence[Message], items: list[ResponsesInputItem]) -> None:
    """Append the ``input`` items of ``messages`` (an assistant turn: its text, its calls)."""
    for message in messages:
        if isinstance(message, UserMessage):
            items.append({"role": "user", "content": message.content})
        elif isinstance(message, AssistantMessage):
            if message.content:
                items.append({
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": message.content}],
                })
            for call in message.tool_calls:
                items.append({
                    "type": "function_call",
                    "call_id": call.id,
                    "name": call.name,
                    "arguments": call.arguments,
                })
        else:
            items.append({
                "type": "function_call_output",
                "call_id": message.call_id,
                "output": message.content,
            })


def _tool_choice(choice: ToolChoice) -> ResponsesToolChoice:
    if isinstance(choice, NamedToolChoice):
        return {"type": "function", "name": choice.name}
    return choice


# -- reply -----------------------------------------------------------------------------------


def parse_responses_reply(data: Mapping[str, object]) -> ModelTurn:
    """Read a Responses API ``response`` object into a :class:`ModelTurn`.

    Raises:
        ReplyError: the response ``failed``, or has no ``output`` list.
    """
    status = data.get("status")
    if status == "failed":
        error = data.get("error")
        message = error.get("message") if isinstance(error, dict) else None
        raise ReplyError(f"the response failed: {message or 'no reason given'}")
    output = data.get("output")
    if not isinstance(output, list):
        raise ReplyError("the reply has no output list")
    texts: list[str] = []
    calls: list[ToolCall] = []
    refused = False
    for item in output:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "message":
            refused = _message_text(item, texts) or refused
        elif kind == "function_call":
            # The usual call (a non-empty string call_id, string name and arguments) read
            # at once; anything else field by field.
            call_id, name, arguments = (item.get("call_id"), item.get("name"),
                                        item.get("arguments"))
            calls.append(new_tool_call(id=call_id, name=name, arguments=arguments)
                         if type(call_id) is str and call_id and type(name) is str
                         and type(arguments) is str else _odd_call(item))
    if status == "incomplete":  # even with calls: the last one may be cut off
        details = data.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        finish = "length" if reason in (None, "max_output_tokens") else str(reason)
    elif calls:
        finish = "tool_calls"
    elif refused:
        finish = "refusal"
    else:
        finish = "stop"
    whole: tuple[ToolCall, ...] = tuple(calls) if calls else ()
    cut_off: tuple[ToolCall, ...] = ()
    if finish == "length":
        whole, cut_off = split_cut_off(whole)
    text = "".join(texts) if texts else None
    usage = usage_from(data.get("usage"), "input_tokens", "output_tokens")
    return new_turn(text=text, tool_calls=whole, usage=usage, finish_reason=finish,
                    cut_off_calls=cut_off, raw=data)


def _odd_call(item: Mapping[str, object]) -> ToolCall:
    """The call of a ``function_call`` output item that is not the usual one, read as far as
    it goes: a missing or empty id is the item's ``id`` or a fresh one, a missing name is
    empty, arguments that are not text are encoded."""
    call_id = item.get("call_id") or item.get("id")
    name = item.get("name")
    arguments = item.get("arguments")
    return new_tool_call(
        id=call_id if call_id and isinstance(call_id, str) else new_call_id(),
        name=name if isinstance(name, str) else "",
        arguments=arguments if isinstance(arguments, str) else arguments_text(arguments),
    )


def _message_text(item: Mapping[str, object], texts: list[str]) -> bool:
    """Append the text of a ``message`` output item to ``texts``; whether it holds a
    refusal."""
    refused = False
    parts = item.get("content")
    for part in parts if isinstance(parts, list) else ():  # anything else: no text
        if isinstance(part, dict):
            kind = part.get("type")
            if kind == "output_text":
                piece = part.get("text")
                if isinstance(piece, str):
                    texts.append(piece)
            elif kind == "refusal":
                piece = part.get("refusal")
                if isinstance(piece, str):
                    texts.append(piece)
                    refused = True
    return refused


# -- replies as a server sends them (used by the scripted server) ----------------------------


def render_response(
    turn: ModelTurn,
    *,
    model: str,
    response_id: str = "resp_0",
    created: int | None = None,
    request: Mapping[str, object] | None = None,
) -> JSONObject:
    """The ``response`` object a server sends for ``turn`` (inverse of
    :func:`parse_responses_reply`); ``request`` fields such as ``tools`` are echoed back."""
    output: list[JSONObject] = []
    if turn.text is not None:
        output.append({
            "type": "message",
            "id": f"msg_{response_id}",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": turn.text, "annotations": []}],
        })
    output.extend(
        {
            "type": "function_call",
            "id": f"fc_{response_id}_{n}",
            "call_id": call.id,
            "name": call.name,
            "arguments": call.arguments,
            "status": "completed",
        }
        for n, call in enumerate(turn.tool_calls)
    )
    request = request or {}
    out: JSONObject = {
        "id": response_id,
        "object": "response",
        "created_at": int(time.time()) if created is None else created,
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "model": model,
        "output": output,
        "parallel_tool_calls": request.get("parallel_tool_calls", True),
        "tool_choice": request.get("tool_choice", "auto"),
        "tools": request.get("tools", []),
        "store": request.get("store", False),
    }
    if turn.usage is not None:
        out["usage"] = {
            "input_tokens": turn.usage.input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": turn.usage.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": turn.usage.total_tokens,
        }
    return out


def render_reply(turn: ModelTurn, request: Mapping[str, object], *, model: str, number: int,
                 verbatim: bool = False) -> RenderedReply:
    """The answer a Responses server sends to ``request`` for ``turn`` (the renderer of this
    wire format in :class:`gramagent.testing.ScriptedServer`): the ``response`` object, or,
    when the request asks for a stream, the events of :func:`render_response_events` as
    named server-sent events. ``verbatim`` changes nothing here."""
    response = render_response(turn, model=model, response_id=f"resp_{number}", request=request)
    if request.get("stream") is True:
        events = render_response_events(response)
        return RenderedReply(encode_sse(events, named=True, done=False),
                             content_type="text/event-stream")
    return RenderedReply(exact_json.dumps(response).encode())


def render_response_events(response: Mapping[str, Any], *, piece: int = 16
                           ) -> list[dict[str, Any]]:
    """The stream a Responses server sends for ``response`` (a completed ``response``
    object): ``response.created`` and ``.in_progress``, then per output item its
    ``output_item.added``, the text (``content_part.added``, ``output_text.delta`` in
    ``piece``-character pieces, ``output_text.done``, ``content_part.done``) or the call's
    arguments (``function_call_arguments.delta`` pieces, ``.done``), ``output_item.done``;
    last ``response.completed`` with the whole response. Each event has its
    ``sequence_number``."""
    events: list[dict[str, Any]] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append({"type": kind, "sequence_number": len(events), **fields})

    started = {**response, "status": "in_progress", "output": [], "usage": None}
    emit("response.created", response=started)
    emit("response.in_progress", response=started)
    for index, item in enumerate(response.get("output") or ()):
        item_id = item.get("id")
        if item.get("type") == "message":
            emit("response.output_item.added", output_index=index,
                 item={**item, "status": "in_progress", "content": []})
            for c_index, part in enumerate(item.get("content") or ()):
                text = part.get("text") or ""
                at = {"item_id": item_id, "output_index": index, "content_index": c_index}
                emit("response.content_part.added", **at, part={**part, "text": ""})
                for i in range(0, len(text), piece):
                    emit("response.output_text.delta", **at, delta=text[i:i + piece],
                         logprobs=[])
                emit("response.output_text.done", **at, text=text, logprobs=[])
                emit("response.content_part.done", **at, part=part)
        elif item.get("type") == "function_call":
            args = item.get("arguments") or ""
            emit("response.output_item.added", output_index=index,
                 item={**item, "status": "in_progress", "arguments": ""})
            for i in range(0, len(args), piece):
                emit("response.function_call_arguments.delta", item_id=item_id,
                     output_index=index, delta=args[i:i + piece])
            emit("response.function_call_arguments.done", item_id=item_id,
                 output_index=index, arguments=args)
        emit("response.output_item.done", output_index=index, item=item)
    emit("response.completed", response=response)
    return events
