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

This module is what talking to llama.cpp's server needs beyond Chat Completions: recognising
the error (:func:`rejected_by_chat_parser`), the retry rule that does not repeat it
(:func:`llama_retryable_answer`, given to the HTTP client of an adapter on llama.cpp: the
generic client knows nothing of llama.cpp), the two bodies and the reply (pure), and
:class:`RawCompletion`, which sends them;
:class:`~gramagent._models.chat.ChatCompletionsModel` uses it when given
``llama_server_root`` (the embedded model gives it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from gramagent._models._wire import ReplyError, completion_choice
from gramagent._models.http import HTTPClient, body_model
from gramagent._models.http_retry import retryable_answer
from gramagent._models.wire_shapes import JSONObject
from gramagent.errors import ModelAPIError

__all__ = [
    "APPLY_TEMPLATE_PATH",
    "COMPLETIONS_PATH",
    "RawCompletion",
    "chat_reply_from_completion",
    "llama_retryable_answer",
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

    The same request at temperature 0 writes the same output, so it is not retried
    (:func:`llama_retryable_answer`).
    """
    return _REJECTED.search(message) is not None


def llama_retryable_answer(status: int, message: str) -> bool:
    """The retry rule of an adapter on llama.cpp's server: the default rule
    (:func:`~gramagent._models.http_retry.retryable_answer`), except for the chat parser
    refusing a finished generation (:func:`rejected_by_chat_parser`)."""
    return retryable_answer(status, message) and not rejected_by_chat_parser(message)


def raw_completion_body(chat_body: Mapping[str, object], prompt: str) -> JSONObject:
    """The ``/v1/completions`` body generating ``chat_body``'s reply from ``prompt`` (what
    ``/apply-template`` made of it): the same settings, the chat-only fields left out, the
    ``response_format`` schema (if any) as ``json_schema``; never streamed."""
    body = {key: value for key, value in chat_body.items() if key not in _CHAT_ONLY}
    body["prompt"] = prompt
    schema = _schema(chat_body.get("response_format"))
    if schema is not None:
        body["json_schema"] = schema
    return body


def _schema(response_format: object) -> object:
    """The schema of a ``json_schema`` response format, else None."""
    if isinstance(response_format, Mapping):
        spec = response_format.get("json_schema")
        if isinstance(spec, Mapping) and "schema" in spec:
            return spec["schema"]
    return None


def chat_reply_from_completion(data: Mapping[str, object]) -> JSONObject:
    """A ``/v1/completions`` reply in the shape of a Chat Completions reply: its first
    choice's ``text`` as the message's ``content``, its ``finish_reason`` and ``usage`` kept.

    Raises:
        ~gramagent._models._wire.ReplyError: the reply has no first choice with a string
            ``text``.
    """
    choice, text = completion_choice(data)
    reply: JSONObject = {"choices": [{
        "index": 0,
        "message": {"role": "assistant", "content": text},
        "finish_reason": choice.get("finish_reason"),
    }]}
    if "usage" in data:
        reply["usage"] = data["usage"]
    return reply


class RawCompletion:
    """Generates a chat body's reply again through llama.cpp's own endpoints, at ``root_url``
    (the server's root, e.g. ``http://127.0.0.1:8080``), on a pool of its own."""

    def __init__(self, root_url: str) -> None:
        self.http = HTTPClient(root_url.rstrip("/"), api="chat",
                               retryable_answer=llama_retryable_answer)

    @staticmethod
    def recovers(error: ModelAPIError) -> bool:
        """Whether ``error`` is the rejection a raw completion recovers from."""
        return rejected_by_chat_parser(str(error))

    async def generate(self, body: Mapping[str, object]) -> JSONObject:
        """The reply to the chat ``body``, as a Chat Completions reply: the prompt
        ``/apply-template`` makes of it, completed by ``/v1/completions``.

        Raises:
            ModelAPIError: either request failed, or its answer cannot be read.
        """
        root = self.http
        template = await root.post_json(APPLY_TEMPLATE_PATH, body)
        prompt = template.get("prompt")
        if not isinstance(prompt, str):
            raise root.error("the answer has no prompt", url=root.base_url + APPLY_TEMPLATE_PATH,
                             status=200, body=template, model=body_model(body))
        data = await root.post_json(COMPLETIONS_PATH, raw_completion_body(body, prompt))
        try:
            return chat_reply_from_completion(data)
        except ReplyError as exc:
            raise root.error(str(exc), url=root.base_url + COMPLETIONS_PATH, status=200,
                             body=data, model=body_model(body)) from exc

    async def aclose(self) -> None:
        """Close the pool."""
        await self.http.aclose()
