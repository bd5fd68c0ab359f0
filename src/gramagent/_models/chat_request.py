"""The body of a Chat Completions request (``POST /chat/completions``), built as plain dicts.

The shape :func:`build_chat_body` makes::

    {"model": ..., "messages": [
        {"role": "system", "content": INSTRUCTION},
        {"role": "user", "content": ...},
        {"role": "assistant", "content": null,
         "tool_calls": [{"id": ..., "type": "function",
                         "function": {"name": ..., "arguments": "<json text>"}}]},
        {"role": "tool", "tool_call_id": ..., "content": ...}],
     "tools": [{"type": "function", "function": {"name", "description", "parameters"}}],
     "tool_choice": "auto" | "none" | "required" | {"type": "function", "function": {"name": N}},
     "parallel_tool_calls": true | false}   (the request's: the run's settings may say false)

Legacy functions (``functions=True``): ``functions: [{"name", "description", "parameters"}]``,
``function_call: "auto" | "none" | {"name": N}``, one ``function_call`` per assistant message and
results as ``{"role": "function", "name": N, "content": ...}``. Legacy has no ``"required"``: it
becomes ``{"name": N}`` when exactly one tool is offered, else ``"auto"``. A history turn holding
several calls is sent as successive assistant/function pairs.

A ``constrained`` request also carries ``response_format`` (the tool step's schema: without
its list of calls when ``parallel_tool_calls`` is false) and no ``tool_choice`` /
``function_call`` / ``parallel_tool_calls``; a streamed one ``stream: true`` and
``stream_options.include_usage``. Legacy functions have no such field: a reply holds one call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from gramagent._messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from gramagent._models._wire import (
    render_history,
    tool_parameters,
)
from gramagent._models.base import (
    ModelRequest,
    NamedToolChoice,
    ToolChoice,
)
from gramagent._models.hybrid import WireMode
from gramagent._models.jsoncalls import (
    SEVERAL_CALLS_HINT,
    allows_several_calls,
    tool_step_response_format,
)
from gramagent._models.wire_shapes import (
    ChatBody,
    ChatFunctionMessage,
    ChatMessage,
    ChatTool,
    ChatToolCall,
    ChatToolChoice,
    FunctionDefinition,
    LegacyFunctionChoice,
)
from gramagent._spec.definition import ToolDefinition

__all__ = ["build_chat_body", "chat_messages", "chat_tool_calls", "chat_tools"]


def build_chat_body(
    request: ModelRequest,
    functions: bool = False,
    tool_call_mode: WireMode = "native",
    stream: bool = False,
    strict: bool = False,
    tools_payload: list[ChatTool] | None = None,
) -> ChatBody:
    """The JSON body for ``request`` (pure; see the module docs for the shape).

    ``request.settings`` are copied in first, so the fields this function sets win over them;
    in constrained mode a ``tool_choice`` given in settings passes through untouched.
    ``tools_payload`` is :func:`chat_tools` of ``request.tools``, when the caller has it.
    """
    settings = request.settings
    tools = request.tools
    instruction = request.instruction
    native_choice = tool_call_mode != "constrained"
    if not native_choice and allows_several_calls(tools, request.tool_choice,
                                                  request.parallel_tool_calls):
        instruction = (f"{instruction}\n\n{SEVERAL_CALLS_HINT}" if instruction
                       else SEVERAL_CALLS_HINT)
    messages = chat_messages(instruction, request.messages, functions, request.rendered)
    # One dict display, the settings first (fields set here win over them).
    body: ChatBody = (cast(ChatBody, {**settings, "model": request.model, "messages": messages})
                      if settings else {"model": request.model, "messages": messages})
    if tools:
        if tools_payload is None:
            tools_payload = chat_tools(tools, strict=strict)
        choice = request.tool_choice
        if functions:
            body["functions"] = [tool["function"] for tool in tools_payload]
            if native_choice:
                body["function_call"] = _legacy_function_call(choice, tools)
        elif native_choice:
            body["tools"] = tools_payload
            body["tool_choice"] = choice if isinstance(choice, str) else _tool_choice(choice)
            body["parallel_tool_calls"] = request.parallel_tool_calls
        else:
            body["tools"] = tools_payload
    if not native_choice:
        body["response_format"] = tool_step_response_format(tools, request.tool_choice,
                                                            request.parallel_tool_calls)
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    elif settings:
        body.pop("stream", None)
        body.pop("stream_options", None)
    return body


def chat_tools(tools: Sequence[ToolDefinition], *, strict: bool = False) -> list[ChatTool]:
    """The ``tools`` list describing ``tools`` (a legacy ``functions`` list holds their
    ``function`` objects)."""
    return [{"type": "function", "function": _function_def(t, strict)} for t in tools]


def chat_messages(
    instruction: str, messages: Sequence[Message], legacy: bool = False,
    rendered: dict[str, Any] | None = None,
) -> list[ChatMessage]:
    """The ``messages`` list: the system instruction first, then the history (``rendered``:
    the conversation's memo of earlier requests, see :func:`render_history`)."""
    out: list[ChatMessage] = [{"role": "system", "content": instruction}] if instruction else []
    if legacy:
        out.extend(_legacy_history(list(messages)))
        return out
    return render_history(out, messages, rendered, "chat", _append_chat)


def _append_chat(messages: Sequence[Message], out: list[ChatMessage]) -> None:
    for message in messages:
        if isinstance(message, UserMessage):
            out.append({"role": "user", "content": message.content})
        elif isinstance(message, AssistantMessage):
            if message.tool_calls:
                out.append({
                    "role": "assistant",
                    "content": message.content,
                    "tool_calls": chat_tool_calls(message.tool_calls),
                })
            else:
                out.append({"role": "assistant", "content": message.content or ""})
        else:
            out.append(
                {"role": "tool", "tool_call_id": message.call_id, "content": message.content}
            )


def _legacy_history(messages: Sequence[Message]) -> list[ChatMessage]:
    """History in the legacy form: one ``function_call`` per assistant message, each followed
    by its ``role: function`` result (several calls become successive pairs)."""
    out: list[ChatMessage] = []
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


def _function_result(message: ToolResultMessage) -> ChatFunctionMessage:
    return {"role": "function", "name": message.name, "content": message.content}


def chat_tool_calls(calls: Sequence[ToolCall]) -> list[ChatToolCall]:
    """The ``tool_calls`` of an assistant message."""
    out: list[ChatToolCall] = []
    for call in calls:
        out.append({
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": call.arguments},
        })
    return out


def _function_def(tool: ToolDefinition, strict: bool) -> FunctionDefinition:
    parameters, is_strict = tool_parameters(tool, strict)
    out: FunctionDefinition = {
        "name": tool.name,
        "description": tool.description,
        "parameters": parameters,
    }
    if is_strict:
        out["strict"] = True
    return out


def _tool_choice(choice: ToolChoice) -> ChatToolChoice:
    if isinstance(choice, NamedToolChoice):
        return {"type": "function", "function": {"name": choice.name}}
    return choice


def _legacy_function_call(
    choice: ToolChoice, tools: Sequence[ToolDefinition]
) -> LegacyFunctionChoice:
    if isinstance(choice, NamedToolChoice):
        return {"name": choice.name}
    if choice == "required":
        return {"name": tools[0].name} if len(tools) == 1 else "auto"
    return choice

