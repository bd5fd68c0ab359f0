"""The Chat Completions wire format (``POST /chat/completions``).

Request (built by :func:`build_chat_body`, plain dicts)::

    {"model": ..., "messages": [
        {"role": "system", "content": INSTRUCTION},
        {"role": "user", "content": ...},
        {"role": "assistant", "content": null,
         "tool_calls": [{"id": ..., "type": "function",
                         "function": {"name": ..., "arguments": "<json text>"}}]},
        {"role": "tool", "tool_call_id": ..., "content": ...}],
     "tools": [{"type": "function", "function": {"name", "description", "parameters"}}],
     "tool_choice": "auto" | "none" | "required" | {"type": "function", "function": {"name": N}},
     "parallel_tool_calls": true}

Legacy functions (``functions=True``): ``functions: [{"name", "description", "parameters"}]``,
``function_call: "auto" | "none" | {"name": N}``, one ``function_call`` per assistant message and
results as ``{"role": "function", "name": N, "content": ...}``. Legacy has no ``"required"``: it
becomes ``{"name": N}`` when exactly one tool is offered, else ``"auto"``. A history turn holding
several calls is sent as successive assistant/function pairs.

Reply: ``choices[0].message`` with ``content`` (may be null) and ``tool_calls`` (or legacy
``function_call``); ``usage.prompt_tokens`` / ``usage.completion_tokens``. Calls keep their
``arguments`` text as sent; ids are synthesized when a server sends none (legacy always).

Streaming (``stream=True``) sends ``stream: true`` and ``stream_options.include_usage``; the
SSE chunks (``choices[0].delta`` with ``content`` pieces and ``tool_calls`` deltas keyed by
``index``, usage in the last chunk) are assembled by :func:`assemble_chat_chunks` into the
non-streamed reply shape and read by the same parser, so both paths give the same turn.

``tool_call_mode``:

``native``
    The above.
``constrained``
    Also sends ``response_format`` (``json_schema``) with
    :func:`~gramagent._models.jsoncalls.tool_step_schema`, and no ``tool_choice`` /
    ``function_call`` / ``parallel_tool_calls``: the choice is expressed in the schema. When
    the schema allows several calls (a list), the system instruction gets
    :data:`~gramagent._models.jsoncalls.SEVERAL_CALLS_HINT` as a last paragraph. With
    ``continue_lone_calls``, a reply that is one call where a list was allowed is asked once
    more: the same request under
    :func:`~gramagent._models.jsoncalls.continued_list_schema`, a list opening with that call,
    so the model itself chooses between ``]`` (that call alone) and ``,`` (more calls); the
    server's prompt cache makes that the cost of the call's tokens again. History
    and ``tools`` are still sent in native form so chat templates render them. Native
    ``tool_calls`` in the reply are taken as they are (llama.cpp answers a request holding both
    ``tools`` and a schema through its generic JSON handler, which may return either); otherwise
    the content is read by :func:`~gramagent._models.jsoncalls.read_tool_step`.
``text``
    The native request; when the reply has no native calls, calls written as JSON in the
    content are recovered by :func:`~gramagent._models.jsoncalls.extract_json_calls` (unknown
    tool names stay text). Not when the request says ``tool_choice="none"``: then the content
    is the answer, whatever it holds.
``hybrid``
    A ``text`` request first; its calls are kept when they are valid, asked again in
    ``constrained`` mode when they are not, and a reply calling only tools that are not offered
    is a decline, answered by a ``constrained`` text-only step
    (:func:`~gramagent._models.hybrid.hybrid_turn`). Requests whose ``tool_choice`` is not
    ``auto`` go out ``constrained``.

With ``llama_server_root`` (the embedded model sets it), a request of the modes whose content
gramagent reads itself (all but ``native``) that llama.cpp's chat parser rejects (HTTP 500,
"does not match the expected peg-native format") is generated again as a raw completion and
its text read as usual (:mod:`gramagent._models.unparsed`); in ``native`` mode the server's
parser is the reader, and its error stands.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Coroutine, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal, TypeAlias, Unpack, get_args

from gramagent import _json as exact_json
from gramagent._logs import MODEL_LOGGER
from gramagent._messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    new_tool_call,
)
from gramagent._models._wire import (
    RenderedReply,
    ReplyError,
    ToolsMemo,
    arguments_text,
    finish_chunk,
    new_call_id,
    render_history,
    split_cut_off,
    sse,
    tool_parameters,
    usage_from,
    usage_sum,
)
from gramagent._models.base import (
    ModelRequest,
    ModelTurn,
    NamedToolChoice,
    TextSink,
    ToolChoice,
    new_turn,
)
from gramagent._models.http import HTTPAdapter, HTTPClient, HTTPOptions, body_model
from gramagent._models.hybrid import WireMode, hybrid_turn
from gramagent._models.jsoncalls import (
    SEVERAL_CALLS_HINT,
    StepTextStream,
    allows_several_calls,
    continued_calls,
    continued_list_response_format,
    extract_json_calls,
    lone_call,
    read_tool_step,
    tool_step_content,
    tool_step_response_format,
    wants_tool_step,
)
from gramagent._models.unparsed import (
    APPLY_TEMPLATE_PATH,
    COMPLETIONS_PATH,
    chat_reply_from_completion,
    raw_completion_body,
    rejected_by_chat_parser,
)
from gramagent._spec.definition import ToolDefinition
from gramagent.errors import ConfigurationError, ModelAPIError

__all__ = [
    "CHAT_PATH",
    "TOOL_CALL_MODES",
    "ChatCompletionsModel",
    "ToolCallMode",
    "assemble_chat_chunks",
    "build_chat_body",
    "chat_messages",
    "chat_tools",
    "parse_chat_reply",
    "render_chat_chunks",
    "render_chat_completion",
    "render_reply",
]

CHAT_PATH = "/chat/completions"
_log = logging.getLogger(MODEL_LOGGER)

ToolCallMode: TypeAlias = Literal["native", "constrained", "text", "hybrid"]
TOOL_CALL_MODES: tuple[str, ...] = get_args(ToolCallMode)
"""Every ``tool_call_mode``, in the order the docs list them."""


class ChatCompletionsModel(HTTPAdapter):
    """A :class:`~gramagent._models.base.Model` speaking Chat Completions.

    Args:
        base_url: The API root, e.g. ``https://api.openai.com/v1`` or ``http://127.0.0.1:8080/v1``.
        api_key: Bearer token; None for local servers that need none.
        functions: Use the legacy ``functions`` / ``function_call`` form.
        tool_call_mode: ``native``, ``constrained``, ``text`` or ``hybrid`` (see the module
            docs).
        stream: Ask for an SSE stream and assemble it.
        strict: Send tools with ``strict: true`` and their strict-compiled schema (tools whose
            strict schema was not compiled are sent non-strict).
        continue_lone_calls: In ``constrained`` mode (and the constrained steps of
            ``hybrid``), a reply that is one call where a list was allowed is asked once more,
            as the opening of a list the model may go on with (see the module docs). Needs a
            server that enforces ``prefixItems`` and ``const`` (llama.cpp with llguidance, as
            embedded); the embedded model turns it on.
        llama_server_root: The root URL of the llama.cpp server behind ``base_url`` (e.g.
            ``http://127.0.0.1:8080``): a reply its chat parser rejects, in a mode whose
            content gramagent reads itself (all but ``native``), is generated again through
            its ``/apply-template`` and ``/v1/completions`` endpoints and read as usual (see
            :mod:`gramagent._models.unparsed`). The embedded model sets it.
        http: Share an existing :class:`~gramagent._models.http.HTTPClient` (its pool) instead
            of creating one; transport options then belong to that client.
        **http_options: Transport options, see :class:`~gramagent._models.http.HTTPOptions`.

    Raises:
        ConfigurationError: an unknown ``tool_call_mode``, or ``http`` given with options.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        functions: bool = False,
        tool_call_mode: ToolCallMode = "native",
        stream: bool = False,
        strict: bool = False,
        continue_lone_calls: bool = False,
        llama_server_root: str | None = None,
        http: HTTPClient | None = None,
        **http_options: Unpack[HTTPOptions],
    ) -> None:
        if tool_call_mode not in TOOL_CALL_MODES:
            raise ConfigurationError(
                f"unknown tool_call_mode {tool_call_mode!r}; "
                f"expected one of {', '.join(TOOL_CALL_MODES)}"
            )
        super().__init__(
            base_url, api_key, api="functions" if functions else "chat", http=http,
            **http_options,
        )
        self.functions = functions
        self.tool_call_mode: ToolCallMode = tool_call_mode
        self.stream = stream
        self.strict = strict
        self.continue_lone_calls = continue_lone_calls
        self._tools = ToolsMemo(self._tools_payload)
        self._llama_root = (None if llama_server_root is None
                            else HTTPClient(llama_server_root.rstrip("/"), api="chat"))

    def __repr__(self) -> str:
        return (
            f"ChatCompletionsModel({self.http.base_url!r}, functions={self.functions}, "
            f"tool_call_mode={self.tool_call_mode!r}, stream={self.stream})"
        )

    def request(self, request: ModelRequest) -> Coroutine[Any, Any, ModelTurn]:
        """Send ``request`` as a Chat Completions call and return the normalized turn (to be
        awaited: the coroutine of the exchange itself, without one of its own around it).

        Raises:
            ModelAPIError: transport or HTTP failure after retries, or an unreadable reply.
            ConfigurationError: a constrained ``tool_choice`` naming a tool not offered.
        """
        mode = self.tool_call_mode
        if mode == "native" and not self.stream:
            # The usual request, in the fewest frames (each costs measurably per request:
            # bench/RESULTS.md, issue 18): the body built here, the reply read in the HTTP
            # request's own coroutine, no coroutine of the adapter's around it.
            # By position (request, functions, tool_call_mode, stream, strict, tools_payload):
            # a keyword costs ~125 machine instructions per request.
            body = build_chat_body(request, self.functions, "native", False, self.strict,
                                   self._tools.get(request.tools))
            return self.http.post_read(CHAT_PATH, body, parse_chat_reply)
        if mode == "hybrid":
            return hybrid_turn(request, self._exchange, self._continued)
        return self._exchange(request, mode)

    async def _exchange(self, request: ModelRequest, mode: WireMode) -> ModelTurn:
        """One request in one wire mode (``stream`` as configured), read into a turn."""
        body = build_chat_body(
            request,
            functions=self.functions,
            tool_call_mode=mode,
            stream=self.stream,
            strict=self.strict,
            tools_payload=self._tools.get(request.tools),
        )
        data = await self.post_body(body, mode)
        turn = self._read(data, request, mode)
        if mode == "constrained":
            turn = await self._continued(request, turn, _reply_content(data) or "")
        return turn

    async def post_body(self, body: dict[str, Any], mode: WireMode = "constrained"
                        ) -> dict[str, Any]:
        """POST a chat body (as :func:`build_chat_body` makes them, ``stream`` as configured)
        and return the reply, assembled; with ``llama_server_root``, a reply llama.cpp's chat
        parser rejected is generated again raw when ``mode`` is not ``native`` (see
        :mod:`gramagent._models.unparsed`).

        Raises:
            ModelAPIError: as :meth:`request`.
        """
        try:
            return await self._post(body)
        except ModelAPIError as error:
            return await self._recovered(body, mode, error)

    async def _recovered(self, body: dict[str, Any], mode: WireMode, error: ModelAPIError
                         ) -> dict[str, Any]:
        """The reply to ``body`` generated again as a raw completion, when ``error`` is
        llama.cpp's chat parser rejecting it and gramagent reads the content itself (see
        :mod:`gramagent._models.unparsed`); else ``error`` is raised."""
        root = self._llama_root
        if root is None or mode == "native" or not rejected_by_chat_parser(str(error)):
            raise error
        _log.warning("llama.cpp's chat parser rejected the reply (%s); generating it again "
                     "as a raw completion", error)
        template = await root.post_json(APPLY_TEMPLATE_PATH, body)
        prompt = template.get("prompt")
        if not isinstance(prompt, str):
            raise root.error("the answer has no prompt", url=root.base_url + APPLY_TEMPLATE_PATH,
                             status=200, body=template, model=body_model(body))
        data = await root.post_json(COMPLETIONS_PATH, raw_completion_body(body, prompt))
        try:
            return chat_reply_from_completion(data)
        except ReplyError as exc:
            unread = root.error(str(exc), url=root.base_url + COMPLETIONS_PATH, status=200,
                                body=data, model=body_model(body))
            unread.__cause__ = exc  # as ``raise ... from exc`` (a compiled build drops ``from``)
            raise unread  # noqa: B904 (set above)

    async def aclose(self) -> None:
        """Close the connection pools."""
        await super().aclose()
        if self._llama_root is not None:
            await self._llama_root.aclose()

    def _post(self, body: dict[str, Any]) -> Coroutine[Any, Any, dict[str, Any]]:
        """Send ``body`` (streamed when it says so); to be awaited for the reply, assembled
        (the request's own coroutine when not streamed: no coroutine of its own around it)."""
        if self.stream:
            return self._post_streamed(body)
        return self.http.post_json(CHAT_PATH, body)

    async def _post_streamed(self, body: dict[str, Any]) -> dict[str, Any]:
        return assemble_chat_chunks(await self.http.post_sse(CHAT_PATH, body,
                                                             ends=finish_chunk))

    def _read(self, data: Mapping[str, Any], request: ModelRequest, mode: WireMode
              ) -> ModelTurn:
        names = () if mode == "native" else _readable_tool_names(request, mode)
        try:
            return parse_chat_reply(data, tool_call_mode=mode, tool_names=names)
        except ReplyError as exc:
            error = self.reply_error(CHAT_PATH, exc, body=data, model=request.model)
            error.__cause__ = exc  # as ``raise ... from exc`` (a compiled build drops ``from``)
            raise error  # noqa: B904 (set above)

    async def _continued(self, request: ModelRequest, turn: ModelTurn,
                         content: str | None = None) -> ModelTurn:
        """A reply that is one call, where the constrained schema allows a list, asked once
        more with :func:`~gramagent._models.jsoncalls.continued_list_schema`: the same
        request, answered by a list that opens with that call, so the model chooses whether
        more calls follow. ``content``: the constrained reply as written (a list of one call
        is not continued: the model closed it); None for a call read from free text (hybrid).
        Only the reply to a user's message is continued: after tool results the loop gives
        the model another turn for its next call anyway, and each continuation costs the
        call's tokens again (bench/RESULTS.md, "BFCL"). Any other reply is returned as it
        is; so is the lone call when the continuation cannot be read as a list opening with
        it."""
        if (not self.continue_lone_calls or len(turn.tool_calls) != 1
                or turn.finish_reason == "length"
                or not allows_several_calls(request.tools, request.tool_choice)
                or not request.replies_to_user):
            return turn
        written = lone_call(tool_step_content(turn) if content is None else content,
                            [t.name for t in request.tools])
        if written is None:
            return turn
        body = build_chat_body(
            request, functions=self.functions, tool_call_mode="constrained", stream=self.stream,
            strict=self.strict, tools_payload=self._tools.get(request.tools),
        )
        body["response_format"] = continued_list_response_format(request.tools, written)
        more = self._read(await self.post_body(body, "constrained"), request, "constrained")
        return replace(turn, tool_calls=continued_calls(turn.tool_calls[0], more),
                       usage=usage_sum(turn.usage, more.usage))

    async def stream_request(self, request: ModelRequest, on_text: TextSink) -> ModelTurn:
        """:meth:`request`, streamed: the text pieces go to ``on_text`` as they arrive.

        In ``native`` mode each content delta is passed on; in ``constrained`` mode the
        answer's text as it is decoded from the step (:class:`StepTextStream`); in ``text``
        and ``hybrid`` modes the content may turn out to be calls, so the answer's text is
        passed on whole once the reply is read.

        Raises:
            ModelAPIError: as :meth:`request`, or the stream broke off.
            ConfigurationError: as :meth:`request`.
        """
        if self.tool_call_mode == "hybrid":
            turn = await hybrid_turn(request, self._exchange, self._continued)
            if turn.text:
                on_text(turn.text)
            return turn
        mode: WireMode = self.tool_call_mode
        body = build_chat_body(
            request, functions=self.functions, tool_call_mode=mode, stream=True,
            strict=self.strict, tools_payload=self._tools.get(request.tools),
        )
        step = StepTextStream() if mode == "constrained" else None
        live = mode != "text"
        sent: list[str] = []
        events: list[dict[str, Any]] = []
        try:
            async for event in self.http.stream_sse(CHAT_PATH, body, ends=finish_chunk):
                events.append(event)
                if live:
                    piece = _content_delta(event)
                    if piece and step is not None:
                        piece = step.feed(piece)
                    if piece:
                        sent.append(piece)
                        on_text(piece)
            data = assemble_chat_chunks(events)
        except ModelAPIError as error:  # the stream ends with the parser's error event
            data = await self._recovered(body, mode, error)
        turn = self._read(data, request, mode)
        if mode == "constrained":
            turn = await self._continued(request, turn, _reply_content(data) or "")
        streamed = "".join(sent)
        if turn.text and turn.text != streamed and turn.text.startswith(streamed):
            on_text(turn.text[len(streamed):])  # what could not be streamed (see above)
        return turn

    def _tools_payload(self, tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
        return chat_tools(tools, functions=self.functions, strict=self.strict)


def _reply_content(data: Mapping[str, Any]) -> str | None:
    """The ``content`` of a reply's first choice (as :func:`parse_chat_reply` reads it)."""
    choices = data.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        message = choices[0].get("message")
        if isinstance(message, dict) and isinstance(message.get("content"), str):
            return str(message["content"])
    return None


def _content_delta(chunk: Mapping[str, Any]) -> str | None:
    """The content piece of a streamed chunk's first choice (as :func:`assemble_chat_chunks`
    reads it), or None."""
    choices = chunk.get("choices")
    for choice in choices if isinstance(choices, list) else ():
        if isinstance(choice, dict) and choice.get("index", 0) == 0:
            delta = choice.get("delta") or choice.get("message")
            if isinstance(delta, dict):
                piece = delta.get("content")
                return piece if isinstance(piece, str) else None
    return None


# -- request ---------------------------------------------------------------------------------


def build_chat_body(
    request: ModelRequest,
    functions: bool = False,
    tool_call_mode: WireMode = "native",
    stream: bool = False,
    strict: bool = False,
    tools_payload: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The JSON body for ``request`` (pure; see the module docs for the shape).

    ``request.settings`` are copied in first, so the fields this function sets win over them;
    in constrained mode a ``tool_choice`` given in settings passes through untouched.
    ``tools_payload`` is :func:`chat_tools` of ``request.tools``, when the caller has it.
    """
    settings = request.settings
    tools = request.tools
    instruction = request.instruction
    native_choice = tool_call_mode != "constrained"
    if not native_choice and allows_several_calls(tools, request.tool_choice):
        instruction = (f"{instruction}\n\n{SEVERAL_CALLS_HINT}" if instruction
                       else SEVERAL_CALLS_HINT)
    messages = chat_messages(instruction, request.messages, functions, request.rendered)
    # One dict display, the settings first (fields set here win over them).
    body: dict[str, Any] = ({**settings, "model": request.model, "messages": messages}
                            if settings else {"model": request.model, "messages": messages})
    if tools:
        if tools_payload is None:
            tools_payload = chat_tools(tools, functions=functions, strict=strict)
        choice = request.tool_choice
        if functions:
            body["functions"] = tools_payload
            if native_choice:
                body["function_call"] = _legacy_function_call(choice, tools)
        elif native_choice:
            body["tools"] = tools_payload
            body["tool_choice"] = choice if isinstance(choice, str) else _tool_choice(choice)
            body["parallel_tool_calls"] = request.parallel_tool_calls
        else:
            body["tools"] = tools_payload
    if not native_choice:
        body["response_format"] = tool_step_response_format(tools, request.tool_choice)
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    elif settings:
        body.pop("stream", None)
        body.pop("stream_options", None)
    return body


def chat_tools(
    tools: Sequence[ToolDefinition], *, functions: bool = False, strict: bool = False
) -> list[dict[str, Any]]:
    """The ``tools`` list (or legacy ``functions`` list) describing ``tools``."""
    if functions:
        return [_function_def(t, strict) for t in tools]
    return [{"type": "function", "function": _function_def(t, strict)} for t in tools]


def chat_messages(
    instruction: str, messages: Sequence[Message], legacy: bool = False,
    rendered: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The ``messages`` list: the system instruction first, then the history (``rendered``:
    the conversation's memo of earlier requests, see :func:`render_history`)."""
    out: list[dict[str, Any]] = [{"role": "system", "content": instruction}] if instruction else []
    if legacy:
        out.extend(_legacy_history(list(messages)))
        return out
    return render_history(out, messages, rendered, "chat", _append_chat)


def _append_chat(messages: Sequence[Message], out: list[Any]) -> None:
    for message in messages:
        if isinstance(message, UserMessage):
            out.append({"role": "user", "content": message.content})
        elif isinstance(message, AssistantMessage):
            if message.tool_calls:
                out.append({
                    "role": "assistant",
                    "content": message.content,
                    "tool_calls": _call_dicts(message.tool_calls),
                })
            else:
                out.append({"role": "assistant", "content": message.content or ""})
        else:
            out.append(
                {"role": "tool", "tool_call_id": message.call_id, "content": message.content}
            )


def _legacy_history(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """History in the legacy form: one ``function_call`` per assistant message, each followed
    by its ``role: function`` result (several calls become successive pairs)."""
    out: list[dict[str, Any]] = []
    i = 0
    while i < len(messages):
        message = messages[i]
        i += 1
        if isinstance(message, UserMessage):
            out.append({"role": "user", "content": message.content})
        elif isinstance(message, ToolResultMessage):
            out.append(_function_result(message))
        elif not message.tool_calls:
            out.append({"role": "assistant", "content": message.content or ""})
        else:
            results: dict[str, ToolResultMessage] = {}
            while i < len(messages) and isinstance(messages[i], ToolResultMessage):
                result = messages[i]
                assert isinstance(result, ToolResultMessage)
                results.setdefault(result.call_id, result)
                i += 1
            for n, call in enumerate(message.tool_calls):
                out.append({
                    "role": "assistant",
                    "content": message.content if n == 0 else None,
                    "function_call": {"name": call.name, "arguments": call.arguments},
                })
                matched = results.pop(call.id, None)
                if matched is not None:
                    out.append(_function_result(matched))
            out.extend(_function_result(r) for r in results.values())
    return out


def _function_result(message: ToolResultMessage) -> dict[str, Any]:
    return {"role": "function", "name": message.name, "content": message.content}


def _call_dicts(calls: Sequence[ToolCall]) -> list[dict[str, Any]]:
    """The ``tool_calls`` of an assistant message. A plain loop: ``list(map(...))`` over a
    function per call cost ~1.6k machine instructions more per rendered message with one call
    (a type call, a map object, a frame per call; bench/RESULTS.md, issue 18, eighth pass)."""
    out = []
    for call in calls:
        out.append({
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": call.arguments},
        })
    return out


def _function_def(tool: ToolDefinition, strict: bool) -> dict[str, Any]:
    parameters, is_strict = tool_parameters(tool, strict)
    out: dict[str, Any] = {
        "name": tool.name,
        "description": tool.description,
        "parameters": parameters,
    }
    if is_strict:
        out["strict"] = True
    return out


def _tool_choice(choice: ToolChoice) -> str | dict[str, Any]:
    if isinstance(choice, NamedToolChoice):
        return {"type": "function", "function": {"name": choice.name}}
    return choice


def _legacy_function_call(
    choice: ToolChoice, tools: Sequence[ToolDefinition]
) -> str | dict[str, str]:
    if isinstance(choice, NamedToolChoice):
        return {"name": choice.name}
    if choice == "required":
        return {"name": tools[0].name} if len(tools) == 1 else "auto"
    return choice


# -- reply -----------------------------------------------------------------------------------


def _readable_tool_names(request: ModelRequest, tool_call_mode: WireMode) -> list[str]:
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
    data: Mapping[str, Any],
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
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ReplyError("the reply has no choices")
    choice = choices[0]
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


def _content_text(content: Any) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts, sent by some servers
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        return "".join(p for p in parts if isinstance(p, str))
    return str(content)


def _native_calls(raw_calls: Any, message: Mapping[str, Any]) -> tuple[ToolCall, ...]:
    """The calls of a reply's ``message`` (``raw_calls``: its ``tool_calls``), or its legacy
    ``function_call``."""
    calls: list[ToolCall] = []
    if isinstance(raw_calls, list):
        for raw in raw_calls:
            # The usual call: an object with a non-empty string id and a function object with
            # a string name and string arguments, read without a method call or isinstance
            # each; anything else is read field by field (_odd_call).
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


def _odd_call(raw: Any) -> ToolCall | None:
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


def assemble_chat_chunks(chunks: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Fold streamed ``chat.completion.chunk`` events into the non-streamed reply shape.

    Content pieces are concatenated; ``tool_calls`` deltas are merged by ``index`` (the id and
    type from the first delta that has them, name and arguments pieces concatenated; a new id
    at a used index, or deltas without an index, as :meth:`_CallsSoFar.merge` says); legacy
    ``function_call`` deltas likewise; the last ``finish_reason`` and ``usage`` seen win. A
    whole ``message`` (a server that ignored ``stream: true``) counts as one big delta. With no
    choice in any chunk the result has no choices (the parser reports that).

    Every piece is kept in a list and joined once at the end: a string grown by ``+=`` in a
    dict is copied whole at every piece, time in the square of its length (a hostile server's
    200,000 pieces of 10 characters took 69 s, on the event loop's thread, where neither the
    wall time nor anything else could interrupt it).
    """
    meta: dict[str, Any] = {}
    texts: dict[str, list[str]] = {"content": [], "refusal": []}
    calls = _CallsSoFar()
    legacy: _CallPieces | None = None
    finish: str | None = None
    usage: Any = None
    seen = False
    for chunk in chunks:
        if not meta and chunk.get("id") is not None:
            meta = {k: chunk[k] for k in ("id", "created", "model") if k in chunk}
        if chunk.get("usage"):
            usage = chunk["usage"]
        choices = chunk.get("choices")  # anything but a list: no choice (a hostile server)
        for choice in choices if isinstance(choices, list) else ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            seen = True
            delta = choice.get("delta") or choice.get("message")
            if isinstance(delta, dict):
                legacy = _fold_delta(delta, texts, calls, legacy)
            if choice.get("finish_reason"):
                finish = choice["finish_reason"]
    if not seen:
        return {**meta, "object": "chat.completion", "choices": [], "usage": usage}
    content, refusal = texts["content"], texts["refusal"]
    message: dict[str, Any] = {"role": "assistant", "content": "".join(content) if content
                               else None}
    if refusal:
        message["refusal"] = "".join(refusal)
    if calls.slots:
        message["tool_calls"] = calls.joined()
    if legacy is not None:
        message["function_call"] = legacy.joined()
    return {
        **meta,
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage,
    }


class _CallPieces:
    """A streamed call's id and its name and arguments pieces, joined once at the end."""

    __slots__ = ("arguments", "id", "name")

    def __init__(self) -> None:
        self.id: Any = None
        self.name: list[str] = []
        self.arguments: list[str] = []

    def add(self, fn: Mapping[str, Any]) -> None:
        """The ``name`` and ``arguments`` pieces of one delta (arguments that are not text, as
        JSON text; anything else adds nothing)."""
        self.name.append(_piece(fn.get("name")))
        args = fn.get("arguments")
        if isinstance(args, str):
            self.arguments.append(args)
        elif args is not None:
            self.arguments.append(arguments_text(args))

    def joined(self) -> dict[str, str]:
        return {"name": "".join(self.name), "arguments": "".join(self.arguments)}


def _fold_delta(delta: Mapping[str, Any], texts: dict[str, list[str]],
                calls: _CallsSoFar, legacy: _CallPieces | None
                ) -> _CallPieces | None:
    """Add one delta's text pieces (``content``, ``refusal``) and call pieces; returns the
    legacy ``function_call`` so far."""
    for key, pieces in texts.items():
        piece = delta.get(key)
        if isinstance(piece, str):
            pieces.append(piece)
    raw_calls = delta.get("tool_calls")
    for raw in raw_calls if isinstance(raw_calls, list) else ():
        if isinstance(raw, dict):
            calls.merge(raw)
    fc = delta.get("function_call")
    if isinstance(fc, dict):
        legacy = legacy or _CallPieces()
        legacy.add(fc)
    return legacy


def _piece(value: Any) -> str:
    """A streamed name or arguments piece; anything but a string adds nothing."""
    return value if isinstance(value, str) else ""


class _CallsSoFar:
    """The calls of a streamed reply so far, keyed ``(index, n)``: sent back by index, then
    in the order they came."""

    __slots__ = ("latest", "slots")

    def __init__(self) -> None:
        self.slots: dict[tuple[int, int], _CallPieces] = {}
        self.latest: dict[int, tuple[int, int]] = {}
        """Per index, the key of its last call."""

    def merge(self, raw: Mapping[str, Any]) -> None:
        """Add one ``tool_calls`` delta to its call: the last call of its ``index``, unless it
        brings an id other than that call's (a server that numbers every call 0: a new call).
        Without an index (some servers send none), a delta with an id starts a new call and
        one without continues the last call (it is a piece of it), or starts the first."""
        index = raw.get("index")
        new_id = raw.get("id") or None
        slots = self.slots
        slot: _CallPieces | None
        if isinstance(index, int) and not isinstance(index, bool):
            key = self.latest.get(index, (index, 0))
            slot = slots.get(key)
            if slot is not None and new_id is not None and slot.id and new_id != slot.id:
                key, slot = (index, len(slots)), None  # a new call at a used index
            self.latest[index] = key
        elif slots and new_id is None:
            key = next(reversed(slots))  # a piece of the last call
            slot = slots[key]
        else:
            key, slot = (len(slots), -1), None
        if slot is None:
            slot = slots[key] = _CallPieces()
        if new_id is not None and not slot.id:
            slot.id = new_id
        fn = raw.get("function")
        if isinstance(fn, dict):
            slot.add(fn)

    def joined(self) -> list[dict[str, Any]]:
        """The calls in the reply shape."""
        return [{"id": self.slots[k].id, "type": "function", "function": self.slots[k].joined()}
                for k in sorted(self.slots)]


# -- replies as a server sends them (used by the scripted server) ----------------------------


def _usage_dict(usage: Usage | None) -> dict[str, int] | None:
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
) -> dict[str, Any]:
    """The ``chat.completion`` object a server sends for ``turn`` (inverse of
    :func:`parse_chat_reply`); ``legacy`` renders the first call as ``function_call``."""
    message: dict[str, Any] = {"role": "assistant", "content": turn.text}
    if turn.tool_calls:
        if legacy:
            first = turn.tool_calls[0]
            message["function_call"] = {"name": first.name, "arguments": first.arguments}
        else:
            message["tool_calls"] = _call_dicts(turn.tool_calls)
    out: dict[str, Any] = {
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
) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` events a streaming server sends for ``turn``: a role
    delta, content in ``piece``-character deltas, each call's id and name then its arguments
    in pieces, the finish reason, and (``include_usage``) a final chunk with empty ``choices``
    and the usage."""
    stamp = int(time.time()) if created is None else created

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
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


def render_reply(turn: ModelTurn, request: Mapping[str, Any], *, model: str, number: int,
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
        return RenderedReply(sse(chunks), content_type="text/event-stream")
    completion = render_chat_completion(turn, model=model, legacy=legacy, completion_id=reply_id)
    return RenderedReply(exact_json.dumps(completion).encode())
