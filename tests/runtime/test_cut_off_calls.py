"""A tool call cut off by the token limit is never replayed as a call; the model is told.

Each reply below is served verbatim by the scripted server (``http_response``), as a server
sends it when generation stops at ``max_tokens`` (``finish_reason: "length"``, or a Responses
``incomplete`` response cut by ``max_output_tokens``). The assertions read the NEXT request's
body: what a server such as llama.cpp would refuse to read (partial argument JSON in a call)
must not be in it, and a note must tell the model what happened.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from runtime_support import (
    HELLO,
    ModelFactory,
    Tools,
    make_agent,
    make_tools,
    script,
    sent_calls,
    sent_results,
    user_texts,
)

from gramagent._models.registry import resolve_model
from gramagent._runtime.events import CaptureSink
from gramagent._runtime.loop import run_agent, run_agent_sync
from gramagent._spec.model import Agent
from gramagent.testing import ScriptedServer, completion, http_response, reply

WHOLE = '{"personName": "Alice"}'
CUT = '{"personName": "Bo'
NOTE = "was cut off by the output token limit"


def chat_reply(tool_calls: list[tuple[str, str]], *, content: str | None = None,
               finish: str = "length") -> dict[str, Any]:
    """A Chat Completions reply body with these (id, arguments) calls to sayHello."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [
            {"id": call_id, "type": "function",
             "function": {"name": "sayHello", "arguments": arguments}}
            for call_id, arguments in tool_calls]
    return {"id": "chatcmpl-cut", "object": "chat.completion", "created": 0,
            "model": "scripted",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 16, "total_tokens": 66}}


def all_call_ids(body: dict[str, Any]) -> list[str]:
    """Ids of every call in a request body's history (chat and responses)."""
    ids = [c["id"] for m in body.get("messages", ()) for c in m.get("tool_calls") or ()]
    ids += [i["call_id"] for i in body.get("input", ()) if i.get("type") == "function_call"]
    return ids


async def test_chat_cut_off_call_is_not_replayed_and_the_model_is_told(
        tools: Tools, agent: Agent, server: ScriptedServer, model_for: ModelFactory) -> None:
    """A whole call runs; the cut one is not sent back as a call, and a note says why."""
    script(server, http_response(chat_reply([("call_whole", WHOLE), ("call_cut", CUT)])),
           reply("done"))
    sink = CaptureSink()
    response = await run_agent(agent, "Hi", library=tools.library,
                               model=model_for(server, "chat"), events=sink)
    assert response.content == "done"
    body = server.requests[1].body
    assert all_call_ids(body) == ["call_whole"]
    assert CUT not in json.dumps(body)
    assert sent_results(body) == [("call_whole", HELLO)]
    assert NOTE in user_texts(body)[-1] and "'sayHello'" in user_texts(body)[-1]
    ok, cut = response.tool_invocations
    assert ok.ok and tools.runs["sayHello"] == 1
    assert cut.call_id == "call_cut" and cut.error_type == "tool_payload_parse_error"
    assert cut.error is not None and NOTE in cut.error
    # Events: the cut call is planned and reported like any call.
    results = [(e.seq, e.status) for e in sink.of_kind("tool_call_result")]
    assert sorted(results) == [(1, "ok"), (2, "error")]


async def test_chat_reply_of_only_a_cut_off_call_continues_the_run(
        tools: Tools, agent: Agent, server: ScriptedServer, model_for: ModelFactory) -> None:
    """No whole call and no text: the run goes on (it is not an empty answer)."""
    script(server, http_response(chat_reply([("call_cut", CUT)])), reply("done"))
    response = await run_agent(agent, "Hi", library=tools.library,
                               model=model_for(server, "chat"))
    assert response.content == "done" and tools.runs["sayHello"] == 0
    messages = server.requests[1].body["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert "tool_calls" not in messages[2] and NOTE in messages[3]["content"]
    # The conversation handed back continues without the cut call as well.
    assert all(not getattr(m, "tool_calls", ()) for m in response.context)


async def test_constrained_mode_cut_off_step_is_not_replayed(
        tools: Tools, agent: Agent, server: ScriptedServer) -> None:
    """The embedded model's mode: a JSON step cut off in the content (the issue's case)."""
    step = '{"name": "sayHello", "arguments": {"personName": "Al'
    script(server, http_response(chat_reply([], content=step)),
           http_response(chat_reply([], content='{"text": "done"}', finish="stop")))
    model = resolve_model("openai/scripted", api="chat", base_url=server.base_url,
                          tool_call_mode="constrained")
    try:
        response = await run_agent(agent, "Hi", library=tools.library, model=model)
    finally:
        await model.aclose()
    assert response.content == "done"
    body = server.requests[1].body
    assert all_call_ids(body) == [] and step not in json.dumps(body)
    assert NOTE in user_texts(body)[-1]


async def test_responses_incomplete_call_is_not_replayed(
        tools: Tools, agent: Agent, server: ScriptedServer, model_for: ModelFactory) -> None:
    """status incomplete, reason max_output_tokens: the same for the Responses API."""
    script(server, http_response({
        "id": "resp_cut", "object": "response", "created_at": 0, "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"}, "model": "scripted",
        "output": [
            {"type": "function_call", "id": "fc_1", "call_id": "call_whole",
             "name": "sayHello", "arguments": WHOLE, "status": "completed"},
            {"type": "function_call", "id": "fc_2", "call_id": "call_cut",
             "name": "sayHello", "arguments": CUT, "status": "incomplete"}],
        "usage": {"input_tokens": 50, "output_tokens": 16, "total_tokens": 66}}),
        reply("done"))
    response = await run_agent(agent, "Hi", library=tools.library,
                               model=model_for(server, "responses"))
    assert response.content == "done"
    body = server.requests[1].body
    assert all_call_ids(body) == ["call_whole"] and CUT not in json.dumps(body)
    assert sent_results(body) == [("call_whole", HELLO)]
    assert NOTE in user_texts(body)[-1]
    assert [i.error_type for i in response.tool_invocations] == [
        None, "tool_payload_parse_error"]


async def test_harmony_cut_off_call_is_told_not_replayed(
        tools: Tools, agent: Agent, server: ScriptedServer, model_for: ModelFactory) -> None:
    """Harmony: the call cut off at max_tokens is not run (even with a whole payload), not
    written back into the prompt as a call, and the model reads a note."""
    text = ('<|channel|>commentary to=functions.sayHello <|constrain|>json'
            '<|message|>{"personName": "Alice"}')
    script(server, http_response({
        "id": "cmpl-cut", "object": "text_completion", "created": 0, "model": "scripted",
        "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": "length"}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 16, "total_tokens": 66}}),
        completion("<|channel|>final<|message|>done"))
    response = await run_agent(agent, "Hi", library=tools.library,
                               model=model_for(server, "harmony"))
    assert response.content == "done" and tools.runs["sayHello"] == 0
    prompt = server.requests[1].body["prompt"]
    assert "to=functions.sayHello" not in prompt and '"personName": "Alice"' not in prompt
    assert NOTE in prompt
    (cut,) = response.tool_invocations
    assert cut.error_type == "tool_payload_parse_error" and cut.result is None


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.text(min_size=1, max_size=12), data=st.data())
def test_any_cut_of_a_call_leaves_a_history_a_server_can_read(name: str,
                                                              data: st.DataObject) -> None:
    """Wherever the token limit cuts the arguments, the next request holds only calls whose
    arguments are JSON objects, each answered by exactly one result."""
    whole = json.dumps({"personName": name})
    cut_at = data.draw(st.integers(min_value=0, max_value=len(whole)))
    arguments = whole[:cut_at]
    tools = make_tools()
    agent = make_agent(tools.library, names=["sayHello"])
    with ScriptedServer([http_response(chat_reply([("c1", WHOLE), ("c2", arguments)])),
                         reply("fine")]) as server:
        response = run_agent_sync(agent, "Hi", library=tools.library,
                                  base_url=server.base_url)
    assert response.content == "fine"
    body = server.requests[1].body
    for message in body["messages"]:
        for call in message.get("tool_calls") or ():
            assert isinstance(json.loads(call["function"]["arguments"] or "{}"), dict)
    ids = all_call_ids(body)
    assert sorted(i for i, _ in sent_results(body)) == sorted(ids)
    assert ("c2" in ids) == (arguments.strip() == "" or arguments == whole)
    assert sent_calls(body) == ["sayHello"] * len(ids)


async def test_a_stream_announces_a_cut_off_call_before_its_answer(
        tools: Tools, agent: Agent, server: ScriptedServer, model_for: ModelFactory) -> None:
    """The stream answered the cut-off call (ToolCallAnswered) that it never announced
    (ToolCallRequested): a consumer pairing them by call id met an answer to no call."""
    from gramagent import ToolCallAnswered, ToolCallRequested, run_agent_stream

    script(server, http_response(chat_reply([("call_whole", WHOLE), ("call_cut", CUT)])),
           reply("done"))
    requested: list[str] = []
    answered: list[str] = []
    async with run_agent_stream(agent, "Hi", library=tools.library,
                                model=model_for(server, "chat")) as stream:
        async for event in stream:
            if isinstance(event, ToolCallRequested):
                requested.append(event.call.id)
            elif isinstance(event, ToolCallAnswered):
                assert event.invocation.call_id in requested
                answered.append(event.invocation.call_id)
    assert requested == answered == ["call_whole", "call_cut"]
