"""The Chat Completions adapter (``POST /chat/completions``): :class:`ChatCompletionsModel`.

The body is built by :mod:`gramagent._models.chat_request`, the reply read by
:mod:`gramagent._models.chat_reply` (a stream first assembled by
:mod:`gramagent._models.chat_stream`); this module sends them and chooses how calls are asked
for and read.

``tool_call_mode``:

``native``
    Calls asked for in ``tools`` / ``tool_choice`` and read from the reply's ``tool_calls``.
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
parser is the reader, and its error stands. Such a rejection is not retried either (the same
request writes the same output at temperature 0).
"""

from __future__ import annotations

import logging
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import replace
from typing import Literal, TypeAlias, Unpack, get_args

from gramagent._logs import MODEL_LOGGER
from gramagent._models._wire import ReplyError, ToolsMemo, finish_chunk, usage_sum
from gramagent._models.base import ModelRequest, ModelTurn, TextSink
from gramagent._models.chat_reply import parse_chat_reply, readable_tool_names, reply_content
from gramagent._models.chat_request import build_chat_body, chat_tools
from gramagent._models.chat_stream import assemble_chat_chunks, content_delta
from gramagent._models.http import HTTPClient, HTTPOptions
from gramagent._models.http_adapter import HTTPAdapter
from gramagent._models.hybrid import WireMode, hybrid_turn
from gramagent._models.jsoncalls import (
    StepTextStream,
    allows_several_calls,
    continued_calls,
    continued_list_response_format,
    lone_call,
    tool_step_content,
)
from gramagent._models.unparsed import RawCompletion, llama_retryable_answer
from gramagent._models.wire_shapes import ChatBody, ChatTool, JSONObject
from gramagent._spec.definition import ToolDefinition
from gramagent.errors import ConfigurationError, ModelAPIError

__all__ = [
    "CHAT_PATH",
    "TOOL_CALL_MODES",
    "ChatCompletionsModel",
    "ToolCallMode",
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
        if llama_server_root is not None and http is None:
            http_options.setdefault("retryable_answer", llama_retryable_answer)
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
        self._raw = None if llama_server_root is None else RawCompletion(llama_server_root)

    def __repr__(self) -> str:
        return (
            f"ChatCompletionsModel({self.http.base_url!r}, functions={self.functions}, "
            f"tool_call_mode={self.tool_call_mode!r}, stream={self.stream})"
        )

    def request(self, request: ModelRequest) -> Coroutine[object, None, ModelTurn]:
        """Send ``request`` as a Chat Completions call; the returned coroutine, awaited, gives
        the normalized turn.

        Raises:
            ModelAPIError: transport or HTTP failure after retries, or an unreadable reply.
            ConfigurationError: a constrained ``tool_choice`` naming a tool not offered.
        """
        mode = self.tool_call_mode
        if mode == "native" and not self.stream:
            # The usual request: the reply is read in the HTTP request's own coroutine
            # (docs/performance.md, "Models and HTTP").
            body = build_chat_body(request, functions=self.functions, tool_call_mode="native",
                                   strict=self.strict, tools_payload=self._tools.get(request.tools))
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
            turn = await self._continued(request, turn, reply_content(data) or "")
        return turn

    async def post_body(self, body: ChatBody, mode: WireMode = "constrained"
                        ) -> JSONObject:
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

    async def _recovered(self, body: ChatBody, mode: WireMode, error: ModelAPIError
                         ) -> JSONObject:
        """The reply to ``body`` generated again as a raw completion, when ``error`` is
        llama.cpp's chat parser rejecting it and gramagent reads the content itself (see
        :mod:`gramagent._models.unparsed`); else ``error`` is raised."""
        raw = self._raw
        if raw is None or mode == "native" or not raw.recovers(error):
            raise error
        _log.warning("llama.cpp's chat parser rejected the reply (%s); generating it again "
                     "as a raw completion", error)
        return await raw.generate(body)

    async def aclose(self) -> None:
        """Close the connection pools."""
        await super().aclose()
        if self._raw is not None:
            await self._raw.aclose()

    def _post(self, body: ChatBody) -> Coroutine[object, None, JSONObject]:
        """Send ``body`` (streamed when it says so); to be awaited for the reply, assembled
        (the request's own coroutine when not streamed: no coroutine of its own around it)."""
        if self.stream:
            return self._post_streamed(body)
        return self.http.post_json(CHAT_PATH, body)

    async def _post_streamed(self, body: ChatBody) -> JSONObject:
        return assemble_chat_chunks(await self.http.post_sse(CHAT_PATH, body,
                                                             ends=finish_chunk))

    def _read(self, data: Mapping[str, object], request: ModelRequest, mode: WireMode
              ) -> ModelTurn:
        names = () if mode == "native" else readable_tool_names(request, mode)
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
                or not allows_several_calls(request.tools, request.tool_choice,
                                            request.parallel_tool_calls)
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
        events: list[JSONObject] = []
        try:
            async for event in self.http.stream_sse(CHAT_PATH, body, ends=finish_chunk):
                events.append(event)
                if live:
                    piece = content_delta(event)
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
            turn = await self._continued(request, turn, reply_content(data) or "")
        streamed = "".join(sent)
        if turn.text and turn.text != streamed and turn.text.startswith(streamed):
            on_text(turn.text[len(streamed):])  # what could not be streamed (see above)
        return turn

    def _tools_payload(self, tools: Sequence[ToolDefinition]) -> list[ChatTool]:
        return chat_tools(tools, strict=self.strict)

