"""The JSON shapes gramagent sends on the OpenAI-style wire formats, as TypedDicts.

Request bodies (Chat Completions, the Responses API), their messages and input items, tool
definitions, tool calls and the usage objects gramagent renders: what each holds, checked by
mypy; plain dicts at run time. What a server sends back is :data:`JSONObject` until a reader
has checked it (``gramagent._models.chat_reply``, ``gramagent._models.responses``).

A body also carries the request's ``settings`` (``temperature``, ``max_tokens``, ...), fields
no shape here names: they pass through as the caller gave them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, NotRequired, Required, TypeAlias, TypedDict

__all__ = [
    "ChatAssistantMessage",
    "ChatBody",
    "ChatCompletion",
    "ChatFunctionMessage",
    "ChatMessage",
    "ChatReplyMessage",
    "ChatSystemMessage",
    "ChatTool",
    "ChatToolCall",
    "ChatToolChoice",
    "ChatToolMessage",
    "ChatUsage",
    "ChatUserMessage",
    "FunctionCall",
    "FunctionDefinition",
    "JSONObject",
    "JSONSchema",
    "LegacyFunctionChoice",
    "ResponseFormat",
    "ResponsesBody",
    "ResponsesFunctionCall",
    "ResponsesFunctionCallOutput",
    "ResponsesInputItem",
    "ResponsesMessage",
    "ResponsesOutputText",
    "ResponsesTool",
    "ResponsesToolChoice",
    "StreamOptions",
]

JSONObject: TypeAlias = dict[str, object]
"""A decoded JSON object whose values are not checked yet (what a server sent)."""
JSONSchema: TypeAlias = Mapping[str, object]
"""A JSON Schema, as the tool definitions carry it."""


# -- Chat Completions ------------------------------------------------------------------------


class FunctionCall(TypedDict):
    """A call's function: ``{"name", "arguments"}``, the arguments as JSON text (also the
    legacy ``function_call`` of an assistant message)."""

    name: str
    arguments: str


class ChatToolCall(TypedDict):
    """One item of an assistant message's ``tool_calls``."""

    id: str
    type: Literal["function"]
    function: FunctionCall


class ChatSystemMessage(TypedDict):
    """The system instruction."""

    role: Literal["system"]
    content: str


class ChatUserMessage(TypedDict):
    """A user's message."""

    role: Literal["user"]
    content: str


class ChatAssistantMessage(TypedDict):
    """An assistant turn of the history: its text, and its calls (``tool_calls``, or one
    legacy ``function_call``)."""

    role: Literal["assistant"]
    content: str | None
    tool_calls: NotRequired[list[ChatToolCall]]
    function_call: NotRequired[FunctionCall]


class ChatToolMessage(TypedDict):
    """A tool's result, answering the call ``tool_call_id``."""

    role: Literal["tool"]
    tool_call_id: str
    content: str


class ChatFunctionMessage(TypedDict):
    """A legacy function's result, answering the last call of function ``name``."""

    role: Literal["function"]
    name: str
    content: str


ChatMessage: TypeAlias = (ChatSystemMessage | ChatUserMessage | ChatAssistantMessage
                          | ChatToolMessage | ChatFunctionMessage)
"""One item of a Chat Completions ``messages`` list."""


class FunctionDefinition(TypedDict):
    """A tool as Chat Completions describes it (a legacy ``functions`` item as it is)."""

    name: str
    description: str
    parameters: JSONSchema
    strict: NotRequired[bool]


class ChatTool(TypedDict):
    """One item of a Chat Completions ``tools`` list."""

    type: Literal["function"]
    function: FunctionDefinition


class _ChatFunctionName(TypedDict):
    name: str


class _NamedChatChoice(TypedDict):
    type: Literal["function"]
    function: _ChatFunctionName


ChatToolChoice: TypeAlias = Literal["auto", "none", "required"] | _NamedChatChoice
"""A Chat Completions ``tool_choice``."""
LegacyFunctionChoice: TypeAlias = Literal["auto", "none"] | _ChatFunctionName
"""A legacy ``function_call`` choice (no ``required``)."""


class _JSONSchemaFormat(TypedDict):
    name: str
    schema: JSONSchema
    strict: NotRequired[bool]


class ResponseFormat(TypedDict):
    """A ``response_format`` asking for JSON under a schema."""

    type: Literal["json_schema"]
    json_schema: _JSONSchemaFormat


class StreamOptions(TypedDict):
    """A streamed request's ``stream_options``."""

    include_usage: bool


class ChatBody(TypedDict, total=False):
    """A Chat Completions request body (beside the request's settings)."""

    model: Required[str]
    messages: Required[list[ChatMessage]]
    tools: list[ChatTool]
    tool_choice: ChatToolChoice
    parallel_tool_calls: bool
    functions: list[FunctionDefinition]
    function_call: LegacyFunctionChoice
    response_format: ResponseFormat
    stream: bool
    stream_options: StreamOptions


class ChatUsage(TypedDict):
    """A Chat Completions ``usage`` object, as gramagent renders it."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatReplyMessage(TypedDict):
    """The ``message`` of a rendered reply's choice."""

    role: Literal["assistant"]
    content: str | None
    tool_calls: NotRequired[list[ChatToolCall]]
    function_call: NotRequired[FunctionCall]


class _ChatChoice(TypedDict):
    index: int
    message: ChatReplyMessage
    logprobs: None
    finish_reason: str


class ChatCompletion(TypedDict):
    """A ``chat.completion`` object, as the scripted server renders it."""

    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[_ChatChoice]
    usage: NotRequired[ChatUsage]


# -- the Responses API -----------------------------------------------------------------------


class ResponsesOutputText(TypedDict):
    """A text part of an assistant ``message`` item."""

    type: Literal["output_text"]
    text: str


class ResponsesMessage(TypedDict):
    """An assistant turn's text in ``input``."""

    type: Literal["message"]
    role: Literal["assistant"]
    content: list[ResponsesOutputText]


class ResponsesFunctionCall(TypedDict):
    """A ``function_call`` item: one call of an assistant turn."""

    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str


class ResponsesFunctionCallOutput(TypedDict):
    """A ``function_call_output`` item: a tool's result for the call ``call_id``."""

    type: Literal["function_call_output"]
    call_id: str
    output: str


ResponsesInputItem: TypeAlias = (ChatSystemMessage | ChatUserMessage | ResponsesMessage
                                 | ResponsesFunctionCall | ResponsesFunctionCallOutput)
"""One item of a Responses ``input`` list (instruction and user messages as in chat)."""


class ResponsesTool(TypedDict):
    """One item of a Responses ``tools`` list."""

    type: Literal["function"]
    name: str
    description: str
    parameters: JSONSchema
    strict: bool


class _NamedResponsesChoice(TypedDict):
    type: Literal["function"]
    name: str


ResponsesToolChoice: TypeAlias = Literal["auto", "none", "required"] | _NamedResponsesChoice
"""A Responses ``tool_choice``."""


class ResponsesBody(TypedDict, total=False):
    """A Responses API request body (beside the request's settings)."""

    model: Required[str]
    input: Required[list[ResponsesInputItem]]
    tools: list[ResponsesTool]
    tool_choice: ResponsesToolChoice
    parallel_tool_calls: bool
    store: bool
    stream: bool
    max_output_tokens: int
