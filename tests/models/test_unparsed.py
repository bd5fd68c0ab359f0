"""A reply llama.cpp's chat parser rejected: recognising the error, the raw completion's body,
its reply read as a chat reply, and the HTTP client not retrying that error.

The recovery itself, against the real embedded server, is in tests/e2e/test_local_unparsed.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gramagent._messages import UserMessage
from gramagent._models._wire import ReplyError
from gramagent._models.base import ModelRequest
from gramagent._models.chat import ChatCompletionsModel
from gramagent._models.chat_reply import parse_chat_reply
from gramagent._models.chat_request import build_chat_body
from gramagent._models.http import HTTPClient
from gramagent._models.unparsed import (
    chat_reply_from_completion,
    llama_retryable_answer,
    raw_completion_body,
    rejected_by_chat_parser,
)
from gramagent._spec.definition import ToolDefinition
from gramagent.errors import ModelAPIError
from gramagent.testing import completion, error, reply

REJECTED = "The model produced output that does not match the expected peg-native format"
CHAT_ONLY = ("messages", "tools", "tool_choice", "parallel_tool_calls", "functions",
             "function_call", "response_format", "stream", "stream_options", "logprobs",
             "top_logprobs")

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
settings_keys = st.text(min_size=1, max_size=12).filter(lambda k: k not in CHAT_ONLY)


def test_the_servers_message_is_recognised() -> None:
    assert rejected_by_chat_parser(REJECTED)
    assert rejected_by_chat_parser(f"request to model 'm' failed: HTTP 500: {REJECTED} (url)")
    assert not rejected_by_chat_parser("HTTP 500: scripted error")
    assert not rejected_by_chat_parser("the model produced output")


@settings(max_examples=60, deadline=None)
@given(fmt=st.from_regex(r"[A-Za-z0-9_.-]{1,20}", fullmatch=True),
       before=st.text(max_size=30), after=st.text(max_size=30))
def test_any_format_name_is_recognised(fmt: str, before: str, after: str) -> None:
    """Whatever format llama.cpp names, and whatever wraps the message."""
    message = f"{before}output that does not match the expected {fmt} format{after}"
    assert rejected_by_chat_parser(message)


@settings(max_examples=80, deadline=None)
@given(text=st.text(max_size=200).filter(lambda t: "does not match the expected" not in t))
def test_other_messages_are_not_recognised(text: str) -> None:
    assert not rejected_by_chat_parser(text)


@settings(max_examples=80, deadline=None)
@given(extra=st.dictionaries(settings_keys, json_values, max_size=5),
       chat_only=st.dictionaries(st.sampled_from(CHAT_ONLY), json_values, max_size=4),
       schema=st.none() | st.dictionaries(st.text(max_size=8), json_values, max_size=3),
       prompt=st.text(max_size=50))
def test_raw_body_keeps_the_settings_and_carries_the_schema(
        extra: dict[str, Any], chat_only: dict[str, Any], schema: dict[str, Any] | None,
        prompt: str) -> None:
    """Every setting kept as it was, nothing of the chat's own, the prompt given, and the
    ``response_format`` schema (when there is one) as ``json_schema``."""
    body = {**extra, **chat_only}
    if schema is not None:
        body["response_format"] = {"type": "json_schema",
                                   "json_schema": {"name": "tool_step", "schema": schema}}
    raw = raw_completion_body(body, prompt)
    assert raw["prompt"] == prompt
    assert not set(raw) & set(CHAT_ONLY)
    for key, value in extra.items():
        if key not in ("prompt", "json_schema"):
            assert raw[key] == value
    if schema is not None:
        assert raw["json_schema"] == schema
    else:
        assert raw.get("json_schema") == extra.get("json_schema")


def test_raw_body_of_a_constrained_request() -> None:
    """The body the product sends in constrained mode: its schema, settings and model kept."""
    tool = ToolDefinition(name="note", description="Take a note.", parameters={
        "type": "object", "properties": {"text": {"type": "string", "pattern": "^[^{}]+$"}}})
    request = ModelRequest(model="m", instruction="Be brief.",
                           messages=[UserMessage(content="hi")], tools=[tool],
                           settings={"temperature": 0.0, "max_tokens": 64})
    body = build_chat_body(request, tool_call_mode="constrained", stream=True)
    raw = raw_completion_body(body, "PROMPT")
    assert raw == {"temperature": 0.0, "max_tokens": 64, "model": "m", "prompt": "PROMPT",
                   "json_schema": body["response_format"]["json_schema"]["schema"]}


@settings(max_examples=80, deadline=None)
@given(text=st.text(max_size=200),
       finish=st.sampled_from(["stop", "length", None]),
       usage=st.none() | st.fixed_dictionaries({"prompt_tokens": st.integers(0, 10**6),
                                                "completion_tokens": st.integers(0, 10**6)}))
def test_completion_reads_as_the_chat_reply_with_that_content(
        text: str, finish: str | None, usage: dict[str, int] | None) -> None:
    """The raw completion's text read in constrained mode is what the same text as a chat
    reply's content reads as: same text, calls, finish reason and usage."""
    completion: dict[str, Any] = {"choices": [{"index": 0, "text": text,
                                               "finish_reason": finish}]}
    chat: dict[str, Any] = {"choices": [{"index": 0, "finish_reason": finish, "message": {
        "role": "assistant", "content": text}}]}
    if usage is not None:
        completion["usage"] = chat["usage"] = usage
    got = parse_chat_reply(chat_reply_from_completion(completion),
                           tool_call_mode="constrained", tool_names=["note"])
    want = parse_chat_reply(chat, tool_call_mode="constrained", tool_names=["note"])
    assert (got.text, got.finish_reason, got.usage) == (want.text, want.finish_reason,
                                                        want.usage)
    assert [(c.name, c.arguments) for c in got.tool_calls] == [
        (c.name, c.arguments) for c in want.tool_calls]


@settings(max_examples=80, deadline=None)
@given(data=st.dictionaries(st.text(max_size=10), json_values, max_size=4)
       | st.fixed_dictionaries({"choices": json_values}))
def test_any_other_completion_is_a_reply_error(data: dict[str, Any]) -> None:
    """A reply without a first choice holding text is a ReplyError, nothing else."""
    try:
        out = chat_reply_from_completion(data)
    except ReplyError:
        return
    assert isinstance(out["choices"][0]["message"]["content"], str)


async def test_the_rejection_is_not_retried(serve: Any) -> None:
    """The same request would write the same output: one attempt, the server's message kept;
    another 500 is still retried."""
    srv = serve([error(500, REJECTED), error(500, "oops"), reply("fine")])
    async with HTTPClient(srv.base_url, backoff_base=0.01,
                          retryable_answer=llama_retryable_answer) as http:
        with pytest.raises(ModelAPIError, match="peg-native") as caught:
            await http.post_json("/chat/completions", {"model": "m", "messages": []})
        assert caught.value.status == 500
        assert len(srv.requests) == 1
        data = await http.post_json("/chat/completions", {"model": "m", "messages": []})
    assert data["choices"][0]["message"]["content"] == "fine"
    assert len(srv.requests) == 3


async def test_the_generic_client_retries_the_rejection_as_any_500(serve: Any) -> None:
    """The rule is llama.cpp's, given by its adapter: a client without it knows nothing of
    llama.cpp's parser and retries its 500 as any other."""
    srv = serve([error(500, REJECTED), reply("fine")])
    async with HTTPClient(srv.base_url, backoff_base=0.01) as http:
        data = await http.post_json("/chat/completions", {"model": "m", "messages": []})
    assert data["choices"][0]["message"]["content"] == "fine"
    assert len(srv.requests) == 2


async def test_the_adapter_recovers_through_the_two_endpoints(serve: Any) -> None:
    """A constrained request rejected: the same body to ``/apply-template``, then the prompt
    under the step's schema to ``/v1/completions``; the text read as the step. In native mode
    the rejection is the error."""
    note = ToolDefinition(name="note", description="Take a note.", parameters={
        "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
    request = ModelRequest(model="m", instruction="Be brief.", messages=[UserMessage(
        content="hi")], tools=[note], settings={"temperature": 0.0})
    srv = serve([error(500, REJECTED),
                 completion('{"name": "note", "arguments": {"text": "hi"}}'),
                 error(500, REJECTED)])
    root = srv.base_url.removesuffix("/v1")
    async with ChatCompletionsModel(srv.base_url, tool_call_mode="constrained",
                                    llama_server_root=root) as chat:
        turn = await chat.request(request)
        assert [(c.name, json.loads(c.arguments)) for c in turn.tool_calls] == [
            ("note", {"text": "hi"})]
        sent = [(r.path, r.body) for r in srv.requests]
        assert [path for path, _ in sent] == [
            "/v1/chat/completions", "/apply-template", "/v1/completions"]
        assert sent[1][1] == sent[0][1]
        prompt = "\n".join([*(f"{m['role']}: {m['content']}" for m in sent[0][1]["messages"]),
                            "assistant:"])  # what the scripted /apply-template answers
        assert sent[2][1] == {"model": "m", "temperature": 0.0, "prompt": prompt,
                              "json_schema": sent[0][1]["response_format"]["json_schema"][
                                  "schema"]}
    async with ChatCompletionsModel(srv.base_url, llama_server_root=root) as native:
        with pytest.raises(ModelAPIError, match="peg-native"):
            await native.request(request)
    assert len(srv.requests) == 4
