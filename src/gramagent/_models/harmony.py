"""Harmony, the format of OpenAI's gpt-oss models, over a text completions endpoint.

:class:`HarmonyModel` renders the conversation into a Harmony prompt
(:mod:`~gramagent._models.harmony_render`), posts it to ``/v1/completions`` (as vLLM, llama.cpp
and other servers of gpt-oss serve it), parses the generated text
(:mod:`~gramagent._models.harmony_parse`) and returns one normalized turn::

    {"model": ..., "prompt": "<|start|>system<|message|>...<|start|>assistant",
     "stop": ["<|call|>", "<|return|>"], "max_tokens": 4096, "skip_special_tokens": false}

One assistant turn may hold several messages (chain of thought on ``analysis``, a preamble on
``commentary``, then a call or the answer), separated by ``<|end|>``; it is over at ``<|call|>``
or ``<|return|>``, so those are the stop sequences and ``<|end|>`` is not. Servers strip the
stop sequence from the text: when the reply says it stopped on one (``finish_reason: "stop"``,
and vLLM's ``stop_reason`` naming it when available) the missing token is put back (``<|call|>``
after a tool call, else ``<|return|>``), so a call is only executed when it was really
finished, not cut off by ``max_tokens``. ``skip_special_tokens: false`` asks vLLM to keep the
Harmony tokens in the text (other servers ignore the field); ``settings`` override any field.

Reading the turn: messages after the first ``<|call|>`` or ``<|return|>`` are ignored (the
server generated past the stop; the model had not seen the tool's result). Tool calls become
:class:`~gramagent._messages.ToolCall` objects with fresh ids and their raw argument text; a call
whose payload failed the parser's checks keeps its raw payload as arguments, so the loop's own
checks produce the error result (same error types). A call cut off by the end of the text is
not executed; when the token limit cut it off (``finish_reason: "length"``) it is passed on in
``ModelTurn.cut_off_calls`` with its partial payload, so the loop tells the model. The text is
the ``final`` channel; without one, the assistant's other messages
that are neither chain of thought nor calls (e.g. an answer on ``commentary``). Chain of
thought (``analysis``) is dropped.

``tool_choice``: ``none`` leaves the tools out of the prompt; a named tool prefills
``<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>`` so the model can only
write its arguments; ``required`` prefills ``<|channel|>commentary to=functions.`` so it must
name some function. Harmony calls one tool per turn, so ``parallel_tool_calls`` has no field
to go to (when it is false, the loop runs the calls of a turn one at a time in any format).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Final, Unpack

import orjson

from gramagent import _json as exact_json
from gramagent._messages import AssistantMessage, ToolCall, new_tool_call
from gramagent._models._wire import (
    RenderedReply,
    ReplyError,
    completion_choice,
    finish_chunk,
    new_call_id,
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
from gramagent._models.harmony_parse import (
    CALL,
    END,
    RETURN,
    HarmonyDelta,
    HarmonyMessage,
    HarmonyStreamParser,
    parse_harmony,
)
from gramagent._models.harmony_render import Reasoning, render_history, render_prompt
from gramagent._models.http import HTTPClient, HTTPOptions
from gramagent._models.http_adapter import HTTPAdapter
from gramagent._models.sse import encode_sse
from gramagent._models.wire_shapes import JSONObject
from gramagent.errors import ConfigurationError

__all__ = [
    "COMPLETIONS_PATH",
    "STOP",
    "HarmonyDelta",
    "HarmonyMessage",
    "HarmonyModel",
    "HarmonyStreamParser",
    "build_completion_body",
    "build_prompt",
    "completion_text",
    "parse_harmony",
    "prefill_for",
    "read_completion",
    "render_prompt",
    "render_reply",
    "turn_from_messages",
]

COMPLETIONS_PATH: Final = "/completions"

STOP: Final = (CALL, RETURN)
"""Stop sequences: the end of an assistant turn (``<|end|>`` only ends one of its messages)."""

DEFAULT_MAX_TOKENS: Final = 4096
"""Completions endpoints default to very few tokens (16 for vLLM); chain of thought needs room."""

_REASONING: Final = ("low", "medium", "high")
_STOP_TOKEN_IDS: Final = {200012: CALL, 200002: RETURN, 200007: END}


class HarmonyModel(HTTPAdapter):
    """A :class:`~gramagent._models.base.Model` for gpt-oss over ``/v1/completions``.

    Args:
        base_url: The API root, e.g. ``http://127.0.0.1:8000/v1``.
        api_key: Bearer token; None for local servers that need none.
        reasoning: The reasoning effort written in the system message: ``low``, ``medium`` or
            ``high``.
        max_tokens: Most tokens to generate per turn (chain of thought included).
        current_date: ``Current date:`` in the system message (ISO date); None leaves it out.
        stream: Ask for an SSE stream (read whole, then parsed like a plain reply).
        http: Share an existing :class:`~gramagent._models.http.HTTPClient` instead of
            creating one; transport options then belong to that client.
        **http_options: Transport options, see :class:`~gramagent._models.http.HTTPOptions`.

    Raises:
        ConfigurationError: an unknown ``reasoning``, or ``http`` given with options.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        reasoning: Reasoning = "low",
        max_tokens: int = DEFAULT_MAX_TOKENS,
        current_date: str | None = None,
        stream: bool = False,
        http: HTTPClient | None = None,
        **http_options: Unpack[HTTPOptions],
    ) -> None:
        if reasoning not in _REASONING:
            raise ConfigurationError(
                f"unknown reasoning effort {reasoning!r}; expected one of {', '.join(_REASONING)}"
            )
        super().__init__(base_url, api_key, api="harmony", http=http, **http_options)
        self.reasoning: Reasoning = reasoning
        self.max_tokens = max_tokens
        self.current_date = current_date
        self.stream = stream

    def __repr__(self) -> str:
        return (
            f"HarmonyModel({self.http.base_url!r}, reasoning={self.reasoning!r}, "
            f"stream={self.stream})"
        )

    def prompt(self, request: ModelRequest) -> str:
        """The prompt this model sends for ``request`` (prefill included)."""
        return build_prompt(request, reasoning=self.reasoning, current_date=self.current_date)

    async def request(self, request: ModelRequest) -> ModelTurn:
        """Render, complete, parse: one assistant turn.

        Raises:
            ModelAPIError: transport or HTTP failure after retries, or an unreadable reply.
        """
        prefill = prefill_for(request.tool_choice, bool(request.tools))
        body = build_completion_body(
            request, self.prompt(request), max_tokens=self.max_tokens, stream=self.stream
        )
        reply: JSONObject | list[JSONObject]
        if self.stream:
            reply = await self.http.post_sse(COMPLETIONS_PATH, body, ends=finish_chunk)
        else:
            reply = await self.http.post_json(COMPLETIONS_PATH, body)
        try:
            data = reply if isinstance(reply, dict) else _assemble(reply)
            return read_completion(data, prefill=prefill)
        except ReplyError as exc:
            raise self.reply_error(
                COMPLETIONS_PATH, exc, body=orjson.dumps(reply), model=request.model
            ) from exc


    async def stream_request(self, request: ModelRequest, on_text: TextSink) -> ModelTurn:
        """:meth:`request`, streamed: the completion's text is fed to a
        :class:`HarmonyStreamParser` as it arrives, and the content of ``final``-channel
        messages goes to ``on_text`` (chain of thought and calls do not). The turn is read
        from the whole text as :meth:`request` reads it; when its text is not (all) on the
        ``final`` channel (an answer on ``commentary``), the rest is passed on at the end.

        Raises:
            ModelAPIError: as :meth:`request`, or the stream broke off.
        """
        prefill = prefill_for(request.tool_choice, bool(request.tools))
        body = build_completion_body(
            request, self.prompt(request), max_tokens=self.max_tokens, stream=True
        )
        parser = HarmonyStreamParser()
        parser.feed(prefill)
        events: list[JSONObject] = []
        sent: list[str] = []
        over = False  # a message ended the turn (<|call|>, <|return|>): the rest is not read
        async for event in self.http.stream_sse(COMPLETIONS_PATH, body, ends=finish_chunk):
            events.append(event)
            piece = _text_piece(event)
            if piece and not over:
                for item in parser.feed(piece):
                    if type(item) is HarmonyDelta:
                        if item.channel == "final" and item.text:
                            sent.append(item.text)
                            on_text(item.text)
                    elif type(item) is HarmonyMessage and item.ended_by in ("call", "return"):
                        over = True
                        break
        try:
            turn = read_completion(_assemble(events), prefill=prefill)
        except ReplyError as exc:
            raise self.reply_error(
                COMPLETIONS_PATH, exc, body=orjson.dumps(events), model=request.model
            ) from exc
        streamed = "".join(sent)
        if turn.text and turn.text != streamed and turn.text.startswith(streamed):
            on_text(turn.text[len(streamed):])
        return turn


def _text_piece(event: Mapping[str, object]) -> str | None:
    """The text of a streamed completion event's first choice, or None."""
    choices = event.get("choices")
    for choice in choices if isinstance(choices, list) else ():
        if isinstance(choice, dict) and choice.get("index", 0) == 0:
            text = choice.get("text")
            return text if isinstance(text, str) else None
    return None


def build_prompt(
    request: ModelRequest, *, reasoning: Reasoning = "low", current_date: str | None = None
) -> str:
    """The completion prompt for ``request``: the rendered conversation, then the prefill its
    ``tool_choice`` asks for (see the module docs)."""
    tools = () if request.tool_choice == "none" else request.tools
    text = render_prompt(
        request.instruction,
        request.messages,
        tools,
        reasoning=reasoning,
        current_date=current_date,
    )
    return text + prefill_for(request.tool_choice, bool(tools))


def prefill_for(choice: ToolChoice, has_tools: bool) -> str:
    """The start of the assistant's message that forces a call (see the module docs)."""
    if not has_tools:
        return ""
    if isinstance(choice, NamedToolChoice):
        return f"<|channel|>commentary to=functions.{choice.name} <|constrain|>json<|message|>"
    if choice == "required":
        return "<|channel|>commentary to=functions."
    return ""


def build_completion_body(
    request: ModelRequest, prompt: str, *, max_tokens: int = DEFAULT_MAX_TOKENS,
    stream: bool = False,
) -> JSONObject:
    """The ``/v1/completions`` body; ``request.settings`` override any field."""
    body: JSONObject = {
        "model": request.model,
        "prompt": prompt,
        "stop": list(STOP),
        "max_tokens": max_tokens,
        "skip_special_tokens": False,
    }
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    body.update(request.settings)
    return body


def read_completion(data: Mapping[str, object], *, prefill: str = "") -> ModelTurn:
    """Turn a ``/v1/completions`` reply into a :class:`ModelTurn`.

    Args:
        data: The decoded reply (``choices[0].text``, ``finish_reason``, ``usage``).
        prefill: Text the prompt ended with after ``<|start|>assistant``; it is the start of
            the first generated message.

    Raises:
        ReplyError: the reply has no text choice.
    """
    choice, text = completion_choice(data)
    finish = choice.get("finish_reason")
    text = prefill + text
    messages = parse_harmony(text)
    if finish == "stop" and messages and messages[-1].ended_by == "eof":
        token = _stop_token(choice.get("stop_reason"), messages[-1])
        messages = parse_harmony(text + token)
    turn = turn_from_messages(messages)
    cut_off: tuple[ToolCall, ...] = ()
    if turn.tool_calls:
        finish = "tool_calls"
    elif finish == "length" and messages and _cut_off_call(messages[-1]):
        cut_off = (_tool_call(messages[-1]),)  # so that the loop tells the model
    return new_turn(
        text=turn.text,
        tool_calls=turn.tool_calls,
        cut_off_calls=cut_off,
        usage=usage_from(data.get("usage"), "prompt_tokens", "completion_tokens"),
        finish_reason=finish if isinstance(finish, str) else None,
        raw={"response": dict(data), "text": text, **(turn.raw or {})},
    )


def turn_from_messages(messages: Sequence[HarmonyMessage]) -> ModelTurn:
    """The assistant turn in parsed messages: text, calls, and what was set aside (in ``raw``).

    The turn ends with the first message ended by ``<|call|>`` or ``<|return|>``; later
    messages are ignored.
    """
    cut = len(messages)
    for index, message in enumerate(messages):
        if message.ended_by in ("call", "return"):
            cut = index + 1
            break
    turn, ignored = messages[:cut], messages[cut:]
    calls: list[ToolCall] = []
    final: list[str] = []
    other: list[str] = []
    for message in turn:
        if message.kind != "message" or message.role != "assistant":
            continue
        if message.is_tool_call:
            if message.complete:
                calls.append(_tool_call(message))
        elif message.channel == "final":
            final.append(message.content)
        elif message.channel != "analysis" and message.content.strip():
            other.append(message.content)
    chosen = final or other
    return new_turn(
        text="\n\n".join(chosen) if chosen else None,
        tool_calls=tuple(calls),
        raw={
            "messages": [m.to_dict() for m in turn],
            "ignored": [m.to_dict() for m in ignored],
        },
    )


def _cut_off_call(message: HarmonyMessage) -> bool:
    """Whether ``message`` is an assistant's tool call cut off by the end of the text."""
    return (message.kind == "message" and message.role == "assistant"
            and message.is_tool_call and not message.complete)


def _tool_call(message: HarmonyMessage) -> ToolCall:
    """A :class:`ToolCall` for a parsed call; a rejected payload is passed on as it was sent,
    so the loop's checks report it."""
    name = message.name or ""
    if message.arguments is not None:
        if name == "python" and message.recipient == "python":
            arguments = orjson.dumps({"code": message.arguments}).decode()
        else:
            arguments = message.arguments
    elif message.channel == "tool" and message.recipient is None:
        arguments = _stub_arguments(message.content)
    else:
        arguments = message.content
    return new_tool_call(id=new_call_id(), name=name, arguments=arguments)


def _stub_arguments(payload: str) -> str:
    """For a rejected stub call: its ``arguments`` value when the payload is a JSON object
    (so a non-object is reported as such), else the raw payload."""
    if payload.strip().startswith("{"):
        try:
            value = exact_json.loads(payload)
        except ValueError:
            return payload
        if isinstance(value, dict) and "arguments" in value:
            return exact_json.dumps(value["arguments"])
    return payload


def _stop_token(stop_reason: object, last: HarmonyMessage) -> str:
    """The stop sequence the server stripped: named by vLLM's ``stop_reason`` when it can be,
    else ``<|call|>`` after a call and ``<|return|>`` otherwise."""
    if isinstance(stop_reason, str) and stop_reason in (CALL, RETURN, END):
        return stop_reason
    if isinstance(stop_reason, int) and stop_reason in _STOP_TOKEN_IDS:
        return _STOP_TOKEN_IDS[stop_reason]
    return CALL if last.is_tool_call else RETURN


def _assemble(events: Sequence[Mapping[str, object]]) -> JSONObject:
    """A streamed completion as the non-streamed reply shape (text joined, last finish)."""
    pieces: list[str] = []
    finish: object = None
    stop_reason: object = None
    usage: object = None
    for event in events:
        if isinstance(event.get("usage"), dict):
            usage = event["usage"]
        choices = event.get("choices")  # anything but a list: no choice (a hostile server)
        for choice in choices if isinstance(choices, list) else ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            if isinstance(choice.get("text"), str):
                pieces.append(choice["text"])
            if choice.get("finish_reason") is not None:
                finish = choice["finish_reason"]
            if choice.get("stop_reason") is not None:
                stop_reason = choice["stop_reason"]
    if not events:
        raise ReplyError("the completion stream carried no events")
    choice_out: JSONObject = {"index": 0, "text": "".join(pieces), "finish_reason": finish}
    if stop_reason is not None:
        choice_out["stop_reason"] = stop_reason
    out: JSONObject = {"choices": [choice_out]}
    if usage is not None:
        out["usage"] = usage
    return out


def render_reply(turn: ModelTurn, request: Mapping[str, object], *, model: str, number: int,
                 verbatim: bool = False) -> RenderedReply:
    """The answer a ``/v1/completions`` server sends to ``request`` for ``turn`` (the renderer
    of this wire format in :class:`gramagent.testing.ScriptedServer`), whole or as SSE in
    16-character pieces: the text :func:`completion_text` writes for ``turn``, or with
    ``verbatim`` ``turn.text`` as the raw completion (Harmony tokens and all)."""
    text = (turn.text or "") if verbatim else completion_text(turn)
    usage = {} if turn.usage is None else {"usage": {
        "prompt_tokens": turn.usage.input_tokens,
        "completion_tokens": turn.usage.output_tokens,
        "total_tokens": turn.usage.total_tokens,
    }}
    head = {"id": f"cmpl-{number}", "object": "text_completion", "created": int(time.time()),
            "model": model}

    def choice(piece: str, finish: str | None) -> JSONObject:
        return {"index": 0, "text": piece, "logprobs": None, "finish_reason": finish}

    if request.get("stream") is not True:
        whole = {**head, "choices": [choice(text, "stop")], **usage}
        return RenderedReply(exact_json.dumps(whole).encode())
    events: list[JSONObject] = [
        {**head, "choices": [choice(text[i:i + 16], None)]} for i in range(0, len(text), 16)
    ]
    events.append({**head, "choices": [choice("", "stop")]})
    options = request.get("stream_options")
    if usage and isinstance(options, dict) and options.get("include_usage") is True:
        events.append({**head, "choices": [], **usage})
    return RenderedReply(encode_sse(events), content_type="text/event-stream")


def completion_text(turn: ModelTurn) -> str:
    """What gpt-oss generates after ``<|start|>assistant`` for ``turn``, as a server with
    :data:`STOP` as stop sequences returns it: the text as the ``final`` answer; with calls,
    the text as a ``commentary`` preamble and then the first call (Harmony makes one call per
    turn), its closing ``<|call|>`` cut off by the stop sequence."""
    message = AssistantMessage(content=turn.text or "", tool_calls=turn.tool_calls[:1])
    text = render_history([message], escape_special=False).removeprefix("<|start|>assistant")
    return text.removesuffix(CALL if turn.tool_calls else END)
