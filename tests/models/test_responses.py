"""Responses API adapter: stateless request bodies, strict tools, output items, usage, over
real HTTP against the scripted server."""

from __future__ import annotations

import pytest

from gramagent._messages import ToolCall
from gramagent._models.base import ModelTurn, NamedToolChoice
from gramagent._models.responses import ResponsesModel, parse_responses_reply, render_response
from gramagent.errors import ModelAPIError
from gramagent.testing import call, calls, http_response, reply


async def test_request_body_for_fixed_conversation(serve, make_request, tools):
    """The whole body: system instruction then history as input items (function_call items with
    call_id, function_call_output per call, assistant text as an output message), strict tools
    with the compiled schema or a non-strict fallback, store false, no previous_response_id."""
    srv = serve([reply("It is noon.")])
    async with ResponsesModel(srv.base_url, "sk-test") as model:
        await model.request(make_request(settings={"max_tokens": 64,
                                                   "previous_response_id": "resp_x"}))
    assert srv.requests[0].path == "/v1/responses"
    assert srv.requests[0].body == {
        "max_output_tokens": 64,
        "model": "test-model",
        "input": [
            {"role": "system", "content": "You greet people."},
            {"role": "user", "content": "Greet Alice and Bob"},
            {"type": "function_call", "call_id": "call_a", "name": "sayHello",
             "arguments": '{"name": "Alice"}'},
            {"type": "function_call", "call_id": "call_b", "name": "sayHello",
             "arguments": '{"name": "Bob"}'},
            {"type": "function_call_output", "call_id": "call_b", "output": "Hello, Bob!"},
            {"type": "function_call_output", "call_id": "call_a", "output": "Hello, Alice!"},
            {"type": "message", "role": "assistant",
             "content": [{"type": "output_text", "text": "Hello, Alice! Hello, Bob!"}]},
            {"role": "user", "content": "What time is it in Paris?"},
        ],
        "tools": [
            {"type": "function", "name": "sayHello",
             "description": "Returns a friendly greeting message",
             "parameters": tools[0].strict_parameters, "strict": True},
            {"type": "function", "name": "getTime", "description": "The current time in a city",
             "parameters": tools[1].parameters, "strict": False},
        ],
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "store": False,
    }
    assert srv.requests[0].headers["authorization"] == "Bearer sk-test"


async def test_non_strict_option_sends_plain_schemas(serve, make_request, tools):
    """strict=False sends every tool's plain schema with strict: false."""
    srv = serve([reply("ok")])
    async with ResponsesModel(srv.base_url, "k", strict=False) as model:
        await model.request(make_request())
    sent = srv.requests[0].body["tools"]
    assert [(t["parameters"], t["strict"]) for t in sent] == [
        (tools[0].parameters, False), (tools[1].parameters, False)]


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        (NamedToolChoice("getTime"), {"type": "function", "name": "getTime"}),
    ],
    ids=["auto", "none", "required", "named"],
)
async def test_tool_choice_shapes(serve, make_request, choice, expected):
    """A named tool_choice uses the Responses shape (name at the top level)."""
    srv = serve([reply("ok")])
    async with ResponsesModel(srv.base_url, "k") as model:
        await model.request(make_request(tool_choice=choice, parallel_tool_calls=False))
    assert srv.requests[0].body["tool_choice"] == expected
    assert srv.requests[0].body["parallel_tool_calls"] is False


async def test_no_tools(serve, make_request):
    """Without tools there are no tool fields."""
    srv = serve([reply("ok")])
    async with ResponsesModel(srv.base_url, "k") as model:
        await model.request(make_request(tools=()))
    assert not {"tools", "tool_choice", "parallel_tool_calls"} & set(srv.requests[0].body)


async def test_text_single_and_parallel_calls(serve, make_request):
    """Text, one call and parallel calls come back as normalized turns with usage."""
    srv = serve([
        reply("Hello!", usage=(12, 3)),
        call("sayHello", '{"name":"Al"}', id="call_1"),
        calls(call("sayHello", {"name": "A"}, id="c1"), call("getTime", {"city": "B"}, id="c2")),
    ])
    async with ResponsesModel(srv.base_url, "k") as model:
        text = await model.request(make_request())
        single = await model.request(make_request())
        parallel = await model.request(make_request())
    assert (text.text, text.tool_calls, text.finish_reason) == ("Hello!", (), "stop")
    assert (text.usage.input_tokens, text.usage.output_tokens) == (12, 3)
    assert single.tool_calls == (ToolCall(id="call_1", name="sayHello", arguments='{"name":"Al"}'),)
    assert single.finish_reason == "tool_calls"
    assert [(c.id, c.name) for c in parallel.tool_calls] == [("c1", "sayHello"),
                                                            ("c2", "getTime")]
    items = parallel.raw["output"]
    assert [i["type"] for i in items] == ["function_call", "function_call"]
    assert all(i["id"] != i["call_id"] for i in items)


def test_parse_ignores_reasoning_and_reads_refusals():
    """Reasoning items are skipped, message parts are joined, a refusal reads as text."""
    data = {
        "status": "completed",
        "output": [
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"type": "message", "role": "assistant", "content": [
                {"type": "output_text", "text": "Part one. "},
                {"type": "refusal", "refusal": "I won't do part two."},
            ]},
        ],
        "usage": {"input_tokens": 5, "output_tokens": 6, "total_tokens": 11},
    }
    turn = parse_responses_reply(data)
    assert turn.text == "Part one. I won't do part two."
    assert turn.tool_calls == ()
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (5, 6)


def test_parse_incomplete_is_length():
    """A response cut by max_output_tokens reports finish reason "length"."""
    turn = parse_responses_reply({
        "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
        "output": [{"type": "message", "content": [{"type": "output_text", "text": "Hel"}]}],
    })
    assert (turn.text, turn.finish_reason, turn.usage) == ("Hel", "length", None)


def test_render_round_trips():
    """What the scripted server renders parses back to the same turn."""
    turn = ModelTurn(text="t", tool_calls=(ToolCall(id="c", name="f", arguments="{}"),))
    parsed = parse_responses_reply(render_response(turn, model="m"))
    assert (parsed.text, parsed.tool_calls) == (turn.text, turn.tool_calls)


async def test_failed_response_is_model_api_error(serve, make_request):
    """A 200 response with status "failed" raises ModelAPIError with the server's reason."""
    srv = serve([http_response({"object": "response", "status": "failed",
                                "error": {"code": "server_error", "message": "boom"},
                                "output": []})])
    async with ResponsesModel(srv.base_url, "k") as model:
        with pytest.raises(ModelAPIError, match="boom") as info:
            await model.request(make_request())
    assert info.value.model == "test-model"
    assert "boom" in info.value.body
