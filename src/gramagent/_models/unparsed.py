"""A reply llama.cpp's chat parser rejected, generated again as a raw completion.

llama.cpp's server reads every Chat Completions reply with a parser built from the chat
template (its ``peg-native`` format). With a ``response_format`` schema, the grammar that
constrains the model is built from that same parser, but the grammar lets through text the
parser then refuses: a schema ``pattern`` becomes raw characters, so a string may hold an
unescaped ``"`` or a line break, and the model may go on after a closing quote
(``"Banana"\\n]\\n// a comment "]``). The generation ends and the server answers HTTP 500
"The model produced output that does not match the expected peg-native format", the text
lost (bench/RESULTS.md, issue 19, "The server's parser rejecting a reply").

gramagent reads the content itself in ``constrained`` and ``text`` modes (and the steps of
``hybrid``), so the server's reading is not needed there: such a request is generated again
without it, through llama.cpp's own endpoints: ``POST /apply-template`` (the same body; the
prompt the chat template makes of it) then ``POST /v1/completions`` with that prompt, the same
settings, and the step's schema as ``json_schema`` (which llama.cpp compiles with llguidance,
whose strings are JSON strings: the output is JSON). The reply's text then goes through the
adapter's usual reading, as the ``content`` of a Chat Completions reply.

This module holds the pure parts: recognising the error and building the two bodies and the
reply; :class:`~gramagent._models.chat.ChatCompletionsModel` sends them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gramagent._models._wire import completion_choice

__all__ = [
    "APPLY_TEMPLATE_PATH",
    "COMPLETIONS_PATH",
    "chat_reply_from_completion",
    "raw_completion_body",
    "rejected_by_chat_parser",
]

APPLY_TEMPLATE_PATH = "/apply-template"
"""llama.cpp's endpoint (at the server's root) answering ``{"prompt": ...}`` for a chat body."""
COMPLETIONS_PATH = "/v1/completions"
"""The raw (OpenAI legacy) completions endpoint, from the server's root."""

_REJECTED = re.compile(r"output that does not match the expected [\w.-]+ format")

_CHAT_ONLY = frozenset({
    "messages", "tools", "tool_choice", "parallel_tool_calls", "functions", "function_call",
    "response_format", "stream", "stream_options", "logprobs", "top_logprobs",
    "chat_template_kwargs", "add_generation_prompt", "continue_final_message",
})
"""Fields of a chat body that are the chat's own (rendered into the prompt, or read differently
by the completions endpoint): not carried into the raw completion."""


def rejected_by_chat_parser(message: str) -> bool:
    """Whether an error message is llama.cpp's chat parser refusing a finished generation
    ("The model produced output that does not match the expected peg-native format").

    The same request at temperature 0 writes the same output, so the HTTP client does not
    retry it.
    """
    return _REJECTED.search(message) is not None


def raw_completion_body(chat_body: Mapping[str, Any], prompt: str) -> dict[str, Any]:
    """The ``/v1/completions`` body generating ``chat_body``'s reply from ``prompt`` (what
    ``/apply-template`` made of it): the same settings, the chat-only fields left out, the
    ``response_format`` schema (if any) as ``json_schema``; never streamed."""
    body = {key: value for key, value in chat_body.items() if key not in _CHAT_ONLY}
    body["prompt"] = prompt
    schema = _schema(chat_body.get("response_format"))
    if schema is not None:
        body["json_schema"] = schema
    return body


def _schema(response_format: Any) -> Any:
    """The schema of a ``json_schema`` response format, else None."""
    if isinstance(response_format, Mapping):
        spec = response_format.get("json_schema")
        if isinstance(spec, Mapping) and "schema" in spec:
            return spec["schema"]
    return None


def chat_reply_from_completion(data: Mapping[str, Any]) -> dict[str, Any]:
    """A ``/v1/completions`` reply in the shape of a Chat Completions reply: its first
    choice's ``text`` as the message's ``content``, its ``finish_reason`` and ``usage`` kept.

    Raises:
        ~gramagent._models._wire.ReplyError: the reply has no first choice with a string
            ``text``.
    """
    choice, text = completion_choice(data)
    reply: dict[str, Any] = {"choices": [{
        "index": 0,
        "message": {"role": "assistant", "content": text},
        "finish_reason": choice.get("finish_reason"),
    }]}
    if "usage" in data:
        reply["usage"] = data["usage"]
    return reply
