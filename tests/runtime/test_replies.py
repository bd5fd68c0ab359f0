"""Replies that repeat call ids, and replies that are not answers (issue 14 items 5 and 6),
through the real loop over HTTP.

Duplicate ids: every call is answered exactly once, under ids made unique, in every wire
format (the scripted server sends the raw reply a hostile server would). Not answers: a
refusal, a reply cut at the token limit or by a content filter, a Responses ``incomplete``
status are answers that say how they ended (``AgentResponse.finish_reason``); an empty answer
with no reason is a ModelAPIError carrying the conversation.
"""

from __future__ import annotations

from typing import Any

import pytest
from runtime_support import Tools, make_agent, make_tools

from gramagent._messages import AssistantMessage, ToolResultMessage, UserMessage
from gramagent._runtime.loop import run_agent_sync
from gramagent.errors import ModelAPIError
from gramagent.testing import ScriptedServer, http_response, reply


def chat_body(message: dict[str, Any], finish: str | None = "stop") -> dict[str, Any]:
    return {"id": "r", "object": "chat.completion", "model": "scripted",
            "choices": [{"index": 0, "finish_reason": finish,
                         "message": {"role": "assistant", "content": None, **message}}]}


def chat_calls(*ids: str) -> dict[str, Any]:
    return chat_body({"tool_calls": [
        {"id": i, "type": "function",
         "function": {"name": "sayHello", "arguments": f'{{"personName": "P{n}"}}'}}
        for n, i in enumerate(ids)]}, "tool_calls")


def responses_body(output: list[dict[str, Any]], status: str = "completed",
                   reason: str | None = None) -> dict[str, Any]:
    return {"id": "r", "object": "response", "status": status, "model": "scripted",
            "output": output, "incomplete_details": {"reason": reason} if reason else None}


def responses_calls(*ids: str) -> dict[str, Any]:
    return responses_body([
        {"type": "function_call", "id": f"fc{n}", "call_id": i, "name": "sayHello",
         "arguments": f'{{"personName": "P{n}"}}'} for n, i in enumerate(ids)])


def responses_text(text: str, status: str = "completed", reason: str | None = None,
                   kind: str = "output_text") -> dict[str, Any]:
    part = {"type": kind, kind.replace("output_", ""): text}
    return responses_body([{"type": "message", "role": "assistant", "content": [part]}],
                          status, reason)


def run(api: str, *turns: Any, tools: Tools | None = None) -> Any:
    tools = tools or make_tools()
    with ScriptedServer(list(turns)) as server:
        response = run_agent_sync(make_agent(tools.library), "Hi", library=tools.library,
                                  api=api, model="openai/scripted", base_url=server.base_url)
    return response, [r.body for r in server.requests], tools


# -- duplicate call ids -------------------------------------------------------------------------

@pytest.mark.parametrize(("api", "ids"), [
    ("chat", ("dup", "dup")), ("chat", ("dup", "dup", "dup~2")), ("chat", ("", "")),
    ("functions", ("dup", "dup")), ("responses", ("dup", "dup")),
])
def test_duplicate_call_ids_are_each_answered_once(api: str, ids: tuple[str, ...]) -> None:
    body = responses_calls(*ids) if api == "responses" else chat_calls(*ids)
    response, requests, tools = run(api, http_response(body), reply("done"))
    assert response.content == "done"
    assert tools.runs["sayHello"] == len(ids)
    call_ids = [i.call_id for i in response.tool_invocations]
    assert len(set(call_ids)) == len(ids)
    turn = next(m for m in response.context if isinstance(m, AssistantMessage)
                and m.tool_calls)
    results = [m for m in response.context if isinstance(m, ToolResultMessage)]
    assert [c.id for c in turn.tool_calls] == [r.call_id for r in results] == call_ids
    sent = requests[1]
    if api == "chat":
        asked = [c["id"] for m in sent["messages"] for c in m.get("tool_calls") or ()]
        answered = [m["tool_call_id"] for m in sent["messages"] if m["role"] == "tool"]
        assert asked == answered == call_ids
    elif api == "functions":
        roles = [m["role"] for m in sent["messages"] if m["role"] != "system"]
        assert roles == ["user"] + ["assistant", "function"] * len(ids)
        greetings = [m["content"] for m in sent["messages"] if m["role"] == "function"]
        assert greetings == [f"Hello, P{n}! Nice to meet you." for n in range(len(ids))]
    else:
        asked = [i["call_id"] for i in sent["input"] if i.get("type") == "function_call"]
        answered = [i["call_id"] for i in sent["input"]
                    if i.get("type") == "function_call_output"]
        assert asked == answered == call_ids


# -- replies that are not answers ---------------------------------------------------------------

@pytest.mark.parametrize(("api", "body", "text", "reason"), [
    ("chat", chat_body({"refusal": "I can't help with that."}), "I can't help with that.",
     "refusal"),
    ("chat", chat_body({"content": "Half an ans"}, "length"), "Half an ans", "length"),
    ("chat", chat_body({"content": ""}, "content_filter"), "", "content_filter"),
    ("chat", chat_body({"content": None}, "length"), "", "length"),
    ("functions", chat_body({"content": "cut"}, "length"), "cut", "length"),
    ("responses", responses_text("partial", "incomplete", "max_output_tokens"), "partial",
     "length"),
    ("responses", responses_text("", "incomplete", "content_filter"), "", "content_filter"),
    ("responses", responses_text("No.", kind="refusal"), "No.", "refusal"),
    ("chat", chat_body({"content": "Fine."}), "Fine.", "stop"),
])
def test_how_the_answer_ended(api: str, body: dict[str, Any], text: str, reason: str) -> None:
    response, _, _ = run(api, http_response(body))
    assert (response.content, response.finish_reason) == (text, reason)
    assert response.to_dict()["finish_reason"] == reason


@pytest.mark.parametrize(("api", "body"), [
    ("chat", chat_body({"content": ""})), ("chat", chat_body({"content": None}, None)),
    ("functions", chat_body({"content": "   "})),
    ("responses", responses_body([])),
])
def test_an_empty_answer_with_no_reason_is_an_error(api: str, body: dict[str, Any]) -> None:
    with pytest.raises(ModelAPIError, match="empty answer") as info:
        run(api, http_response(body))
    context = info.value.context
    assert context is not None and context.messages[0] == UserMessage(content="Hi")
