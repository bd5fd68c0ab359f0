"""Chat Completions adapter: request bodies, replies, legacy functions, streaming and the
constrained/text tool-call modes, over real HTTP against the scripted server."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gramagent._messages import AssistantMessage, ToolCall, ToolResultMessage, UserMessage
from gramagent._models.base import ModelTurn, NamedToolChoice
from gramagent._models.chat import ChatCompletionsModel
from gramagent._models.chat_render import render_chat_chunks, render_chat_completion
from gramagent._models.chat_reply import parse_chat_reply
from gramagent._models.chat_stream import assemble_chat_chunks
from gramagent._models.jsoncalls import SEVERAL_CALLS_HINT
from gramagent.errors import ConfigurationError, ModelAPIError
from gramagent.testing import call, calls, http_response, reply

# -- fixed conversation: the request body -----------------------------------------------------


def _native_messages() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You greet people."},
        {"role": "user", "content": "Greet Alice and Bob"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_a", "type": "function",
                 "function": {"name": "sayHello", "arguments": '{"name": "Alice"}'}},
                {"id": "call_b", "type": "function",
                 "function": {"name": "sayHello", "arguments": '{"name": "Bob"}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_b", "content": "Hello, Bob!"},
        {"role": "tool", "tool_call_id": "call_a", "content": "Hello, Alice!"},
        {"role": "assistant", "content": "Hello, Alice! Hello, Bob!"},
        {"role": "user", "content": "What time is it in Paris?"},
    ]


async def test_native_request_body_for_fixed_conversation(serve, make_request, tools):
    """The whole body for the fixed conversation: system first, tool_calls and tool results by
    id, tools in the function form, tool_choice and parallel_tool_calls, settings passed on."""
    srv = serve([reply("It is noon.")])
    async with ChatCompletionsModel(srv.base_url, "sk-test") as model:
        await model.request(make_request(settings={"temperature": 0, "model": "ignored"}))
    assert srv.requests[0].path == "/v1/chat/completions"
    assert srv.requests[0].body == {
        "temperature": 0,
        "model": "test-model",
        "messages": _native_messages(),
        "tools": [
            {"type": "function", "function": {
                "name": "sayHello", "description": "Returns a friendly greeting message",
                "parameters": tools[0].parameters}},
            {"type": "function", "function": {
                "name": "getTime", "description": "The current time in a city",
                "parameters": tools[1].parameters}},
        ],
        "tool_choice": "auto",
        "parallel_tool_calls": True,
    }
    assert srv.requests[0].headers["authorization"] == "Bearer sk-test"


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        (NamedToolChoice("getTime"), {"type": "function", "function": {"name": "getTime"}}),
    ],
    ids=["auto", "none", "required", "named"],
)
async def test_tool_choice_shapes(serve, make_request, choice, expected):
    """Each tool_choice is sent in the Chat Completions shape."""
    srv = serve([reply("ok")])
    async with ChatCompletionsModel(srv.base_url, "k") as model:
        await model.request(make_request(tool_choice=choice, parallel_tool_calls=False))
    body = srv.requests[0].body
    assert body["tool_choice"] == expected
    assert body["parallel_tool_calls"] is False


async def test_no_tools_sends_no_tool_fields(serve, make_request):
    """Without tools the body has no tools, tool_choice or parallel_tool_calls (OpenAI rejects
    parallel_tool_calls without tools)."""
    srv = serve([reply("hi")])
    async with ChatCompletionsModel(srv.base_url, "k") as model:
        await model.request(make_request(tools=()))
    assert not {"tools", "tool_choice", "parallel_tool_calls", "functions"} & set(
        srv.requests[0].body)


async def test_strict_tools_use_compiled_schema_or_fall_back(serve, make_request, tools):
    """strict=True sends strict_parameters with strict: true; a tool without a compiled strict
    schema is sent with its plain schema and no strict flag."""
    srv = serve([reply("ok")])
    async with ChatCompletionsModel(srv.base_url, "k", strict=True) as model:
        await model.request(make_request())
    sent = [t["function"] for t in srv.requests[0].body["tools"]]
    assert sent[0]["parameters"] == tools[0].strict_parameters
    assert sent[0]["strict"] is True
    assert sent[1]["parameters"] == tools[1].parameters
    assert "strict" not in sent[1]


# -- replies ----------------------------------------------------------------------------------


async def test_text_reply(serve, make_request):
    """A text answer becomes ModelTurn.text with the server's usage and finish reason."""
    srv = serve([reply("Hello, Alice!", usage=(31, 4))])
    async with ChatCompletionsModel(srv.base_url, "k") as model:
        turn = await model.request(make_request())
    assert turn.text == "Hello, Alice!"
    assert turn.tool_calls == ()
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (31, 4)
    assert turn.finish_reason == "stop"
    assert turn.raw["choices"][0]["message"]["content"] == "Hello, Alice!"


async def test_single_call_keeps_raw_arguments_and_id(serve, make_request):
    """A tool call keeps the server's id and its arguments text byte for byte."""
    srv = serve([call("sayHello", '{ "name" :"Alice" }', id="call_xyz")])
    async with ChatCompletionsModel(srv.base_url, "k") as model:
        turn = await model.request(make_request())
    assert turn.text is None
    assert turn.tool_calls == (
        ToolCall(id="call_xyz", name="sayHello", arguments='{ "name" :"Alice" }'),)
    assert turn.finish_reason == "tool_calls"


async def test_parallel_calls_in_order(serve, make_request):
    """Several calls in one turn come back in order, each with its own id."""
    srv = serve([calls(call("sayHello", {"name": "Alice"}, id="c1"),
                       call("getTime", {"city": "Paris"}, id="c2"),
                       text="Working on it.")])
    async with ChatCompletionsModel(srv.base_url, "k") as model:
        turn = await model.request(make_request())
    assert [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [
        ("c1", "sayHello", '{"name":"Alice"}'),
        ("c2", "getTime", '{"city":"Paris"}'),
    ]
    assert turn.text == "Working on it."


def test_parse_synthesizes_missing_ids_and_encodes_object_arguments():
    """Missing or empty ids get fresh unique ids; object arguments are encoded; null content
    stays None."""
    data = {"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": None, "tool_calls": [
            {"type": "function", "function": {"name": "a", "arguments": {"x": 1}}},
            {"id": "", "type": "function", "function": {"name": "b", "arguments": "{}"}},
        ]}}]}
    turn = parse_chat_reply(data)
    ids = [c.id for c in turn.tool_calls]
    assert all(i.startswith("call_") and len(i) > 10 for i in ids)
    assert len(set(ids)) == 2
    assert turn.tool_calls[0].arguments == '{"x":1}'
    assert turn.text is None
    assert turn.usage is None


async def test_reply_without_choices_is_model_api_error(serve, make_request):
    """A 200 reply without choices is a ModelAPIError naming the model, not a crash."""
    srv = serve([http_response({"object": "chat.completion", "choices": []})])
    async with ChatCompletionsModel(srv.base_url, "k") as model:
        with pytest.raises(ModelAPIError, match="no choices") as info:
            await model.request(make_request())
    assert info.value.model == "test-model"
    assert info.value.status == 200


# -- legacy functions -------------------------------------------------------------------------


async def test_legacy_body_renders_calls_as_successive_pairs(serve, make_request, tools):
    """Legacy mode sends functions/function_call, and a history turn with two calls becomes two
    assistant/function pairs, each result after its own call whatever order they came in."""
    srv = serve([reply("ok")])
    async with ChatCompletionsModel(srv.base_url, "k", functions=True) as model:
        await model.request(make_request())
    body = srv.requests[0].body
    assert body["functions"] == [
        {"name": "sayHello", "description": "Returns a friendly greeting message",
         "parameters": tools[0].parameters},
        {"name": "getTime", "description": "The current time in a city",
         "parameters": tools[1].parameters},
    ]
    assert body["function_call"] == "auto"
    assert not {"tools", "tool_choice", "parallel_tool_calls"} & set(body)
    assert body["messages"] == [
        {"role": "system", "content": "You greet people."},
        {"role": "user", "content": "Greet Alice and Bob"},
        {"role": "assistant", "content": None,
         "function_call": {"name": "sayHello", "arguments": '{"name": "Alice"}'}},
        {"role": "function", "name": "sayHello", "content": "Hello, Alice!"},
        {"role": "assistant", "content": None,
         "function_call": {"name": "sayHello", "arguments": '{"name": "Bob"}'}},
        {"role": "function", "name": "sayHello", "content": "Hello, Bob!"},
        {"role": "assistant", "content": "Hello, Alice! Hello, Bob!"},
        {"role": "user", "content": "What time is it in Paris?"},
    ]


@pytest.mark.parametrize(
    ("choice", "n_tools", "expected"),
    [
        ("auto", 2, "auto"),
        ("none", 2, "none"),
        (NamedToolChoice("getTime"), 2, {"name": "getTime"}),
        ("required", 1, {"name": "sayHello"}),
        ("required", 2, "auto"),
    ],
    ids=["auto", "none", "named", "required-one-tool", "required-two-tools"],
)
async def test_legacy_function_call_shapes(serve, make_request, tools, choice, n_tools,
                                           expected):
    """tool_choice maps onto legacy function_call; "required" has no legacy form."""
    srv = serve([reply("ok")])
    async with ChatCompletionsModel(srv.base_url, "k", functions=True) as model:
        await model.request(make_request(tools=tools[:n_tools], tool_choice=choice))
    assert srv.requests[0].body["function_call"] == expected


async def test_legacy_reply_function_call(serve, make_request):
    """A function_call reply becomes one call with a synthesized id; the server answers
    parallel calls in legacy form with the first call only."""
    srv = serve([calls(call("sayHello", {"name": "Alice"}), call("getTime", {"city": "X"}))])
    async with ChatCompletionsModel(srv.base_url, "k", functions=True) as model:
        turn = await model.request(make_request())
    message = turn.raw["choices"][0]["message"]
    assert message["function_call"] == {"name": "sayHello", "arguments": '{"name":"Alice"}'}
    assert "tool_calls" not in message
    assert len(turn.tool_calls) == 1
    assert turn.tool_calls[0].name == "sayHello"
    assert turn.tool_calls[0].arguments == '{"name":"Alice"}'
    assert turn.tool_calls[0].id.startswith("call_")
    assert turn.finish_reason == "tool_calls"


# -- streaming --------------------------------------------------------------------------------

SCRIPT_TURNS = [
    reply("Hello there, Alice! This answer is long enough to span several chunks.",
          usage=(40, 15)),
    calls(call("sayHello", '{"name": "Alice", "greeting": "Good morning to you"}', id="call_1"),
          usage=(41, 12)),
    calls(call("sayHello", {"name": "Alice"}, id="c1"), call("getTime", {"city": "Paris"}, id="c2"),
          usage=(42, 20)),
    reply("", usage=(43, 1)),
]
"""Explicit usage: the estimated figures depend on the request size, which streaming changes."""


def _comparable(turn: ModelTurn, *, ids: bool = True) -> tuple[Any, ...]:
    calls_ = tuple((c.id if ids else None, c.name, c.arguments) for c in turn.tool_calls)
    return turn.text, calls_, turn.usage, turn.finish_reason


@pytest.mark.parametrize("functions", [False, True], ids=["tools", "legacy"])
async def test_streaming_equals_non_streaming(serve, make_request, functions):
    """The same script gives the same turns streamed (SSE, assembled) and not streamed."""
    plain = serve(SCRIPT_TURNS)
    streamed = serve(SCRIPT_TURNS)
    results = []
    for srv, stream in ((plain, False), (streamed, True)):
        async with ChatCompletionsModel(srv.base_url, "k", stream=stream,
                                        functions=functions) as model:
            results.append([await model.request(make_request()) for _ in SCRIPT_TURNS])
    for a, b in zip(*results, strict=True):
        assert _comparable(a, ids=not functions) == _comparable(b, ids=not functions)
    assert results[1][0].usage is not None
    assert results[1][0].usage.output_tokens == 15
    body = streamed.requests[0].body
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert "stream" not in plain.requests[0].body


async def test_streaming_tolerates_a_plain_json_answer_and_rejects_an_empty_stream(serve,
                                                                                  make_request):
    """A server ignoring stream: true and answering JSON still gives the turn; a stream with
    no event at all is a ModelAPIError rather than an empty answer (a body that cannot be
    read, like any other, after the retries)."""
    plain = render_chat_completion(
        ModelTurn(tool_calls=(ToolCall(id="c9", name="getTime", arguments="{}"),)), model="m")
    srv = serve([http_response(plain),
                 http_response(b"data: [DONE]\n\n", content_type="text/event-stream")])
    async with ChatCompletionsModel(srv.base_url, "k", stream=True, max_retries=0) as model:
        turn = await model.request(make_request())
        with pytest.raises(ModelAPIError, match="no JSON event"):
            await model.request(make_request())
    assert turn.tool_calls == (ToolCall(id="c9", name="getTime", arguments="{}"),)


def test_assemble_merges_tool_call_deltas_by_index():
    """Interleaved deltas for two calls are merged by index; usage comes from the last chunk."""
    chunks = [
        {"id": "x", "choices": [{"index": 0, "delta": {"role": "assistant", "content": None}}]},
        {"id": "x", "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 1, "id": "c2", "type": "function",
             "function": {"name": "getTime", "arguments": ""}}]}}]},
        {"id": "x", "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "c1", "type": "function",
             "function": {"name": "sayHello", "arguments": '{"na'}}]}}]},
        {"id": "x", "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 1, "function": {"arguments": '{"city": "Oslo"}'}}]}}]},
        {"id": "x", "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "function": {"arguments": 'me": "Al"}'}}]}}]},
        {"id": "x", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        {"id": "x", "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 7}},
    ]
    turn = parse_chat_reply(assemble_chat_chunks(chunks))
    assert turn.tool_calls == (
        ToolCall(id="c1", name="sayHello", arguments='{"name": "Al"}'),
        ToolCall(id="c2", name="getTime", arguments='{"city": "Oslo"}'),
    )
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (9, 7)
    assert turn.finish_reason == "tool_calls"


@pytest.mark.parametrize("legacy", [False, True], ids=["tools", "legacy"])
def test_render_then_parse_round_trips(legacy):
    """What the scripted server renders (plain or chunked) parses back to the same turn."""
    turn = ModelTurn(
        text="Some text",
        tool_calls=(ToolCall(id="c1", name="f", arguments='{"a": [1, 2, 3]}'),),
        finish_reason="tool_calls",
    )
    plain = parse_chat_reply(render_chat_completion(turn, model="m", legacy=legacy))
    chunked = parse_chat_reply(assemble_chat_chunks(
        render_chat_chunks(turn, model="m", legacy=legacy, piece=3)))
    for parsed in (plain, chunked):
        assert parsed.text == "Some text"
        assert [(c.name, c.arguments) for c in parsed.tool_calls] == [("f", '{"a": [1, 2, 3]}')]
        assert parsed.finish_reason == "tool_calls"
        assert legacy or parsed.tool_calls[0].id == "c1"


# -- constrained mode -------------------------------------------------------------------------


def _variant(name: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"name": {"const": name}, "arguments": parameters},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    }


FINAL = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"],
         "additionalProperties": False}


def _call_list(*variants: dict[str, Any]) -> dict[str, Any]:
    items = variants[0] if len(variants) == 1 else {"anyOf": list(variants)}
    return {"type": "array", "items": items, "minItems": 1}


async def test_constrained_body(serve, make_request, tools):
    """Constrained mode adds the tool_step json_schema (one variant per tool, a list of calls
    and the final answer), still sends tools and native history, tells the model how to write
    several calls, and leaves the choice to the schema."""
    srv = serve([reply("ok")])
    async with ChatCompletionsModel(srv.base_url, None, tool_call_mode="constrained") as model:
        await model.request(make_request())
    body = srv.requests[0].body
    say, get = _variant("sayHello", tools[0].parameters), _variant("getTime", tools[1].parameters)
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "tool_step",
            "strict": False,
            "schema": {"anyOf": [say, get, _call_list(say, get), FINAL]},
        },
    }
    assert [t["function"]["name"] for t in body["tools"]] == ["sayHello", "getTime"]
    messages = _native_messages()
    messages[0]["content"] += "\n\n" + SEVERAL_CALLS_HINT
    assert body["messages"] == messages
    assert "tool_choice" not in body
    assert "parallel_tool_calls" not in body
    assert "authorization" not in srv.requests[0].headers


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("none", "final"),
        (NamedToolChoice("getTime"), "getTime"),
        ("required", "tools"),
    ],
    ids=["none", "named", "required"],
)
async def test_constrained_schema_follows_tool_choice(serve, make_request, tools, choice,
                                                      expected):
    """"none" allows only the final answer, a named tool only its variant, "required" only
    tool variants."""
    srv = serve([reply("ok")])
    async with ChatCompletionsModel(srv.base_url, None, tool_call_mode="constrained") as model:
        await model.request(make_request(tool_choice=choice))
    schema = srv.requests[0].body["response_format"]["json_schema"]["schema"]
    say, get = _variant("sayHello", tools[0].parameters), _variant("getTime", tools[1].parameters)
    if expected == "final":
        assert schema == FINAL
    elif expected == "getTime":
        assert schema == get
    else:
        assert schema == {"anyOf": [say, get, _call_list(say, get)]}
    hinted = srv.requests[0].body["messages"][0]["content"].endswith(SEVERAL_CALLS_HINT)
    assert hinted == (expected == "tools")


@pytest.mark.parametrize("mode", ["constrained", "native", "text", "hybrid"])
@pytest.mark.parametrize("parallel", [True, False])
async def test_parallel_tool_calls_false_asks_for_one_call(serve, make_request, tools, mode,
                                                           parallel):
    """``parallel_tool_calls=False``: a native request says so; a constrained one has no list
    of calls in its schema and no hint to write one (its schema is the one call or the
    answer), and a lone call is not asked whether more follow; hybrid's free request gets no
    hint of several calls either."""
    srv = serve([calls(call("sayHello", {"name": "Alice"})), reply("done")])
    async with ChatCompletionsModel(srv.base_url, None, tool_call_mode=mode,
                                    continue_lone_calls=True) as model:
        turn = await model.request(make_request(parallel_tool_calls=parallel,
                                                messages=(UserMessage(content="Greet Alice"),)))
    assert [c.name for c in turn.tool_calls] == ["sayHello"]
    body = srv.requests[0].body
    hinted = SEVERAL_CALLS_HINT in body["messages"][0]["content"]
    assert hinted == (parallel and mode in ("constrained", "hybrid"))
    if mode == "native" or mode == "text":
        assert body["parallel_tool_calls"] is parallel
    elif mode == "constrained":
        assert "parallel_tool_calls" not in body
        schema = body["response_format"]["json_schema"]["schema"]
        say = _variant("sayHello", tools[0].parameters)
        get = _variant("getTime", tools[1].parameters)
        listed = [_call_list(say, get)] if parallel else []
        assert schema == {"anyOf": [say, get, *listed, FINAL]}
        assert len(srv.requests) == (2 if parallel else 1)  # the lone call continued or not


async def test_constrained_several_calls_in_one_reply(serve, make_request):
    """A constrained reply holding a list of calls reaches the caller as several calls, each
    with its own id, in order, as parallel calls come from an API; the scripted server writes
    a turn of several calls as that list."""
    srv = serve([calls(call("sayHello", {"name": "Alice"}), call("getTime", {"city": "Oslo"})),
                 reply('[{"name": "getTime", "arguments": {"city": "Rome"}}, '
                       '{"name": "sayHello", "arguments": {"name": "Bob"}}]', raw=True)])
    async with ChatCompletionsModel(srv.base_url, None, tool_call_mode="constrained") as model:
        first = await model.request(make_request())
        second = await model.request(make_request())
    content = first.raw["choices"][0]["message"]["content"]
    assert content.startswith("[") and "tool_calls" not in first.raw["choices"][0]["message"]
    for turn, expected in ((first, [("sayHello", '{"name":"Alice"}'), ("getTime",
                                                                      '{"city":"Oslo"}')]),
                           (second, [("getTime", '{"city":"Rome"}'), ("sayHello",
                                                                      '{"name":"Bob"}')])):
        assert turn.text is None
        assert [(c.name, c.arguments) for c in turn.tool_calls] == expected
        assert len({c.id for c in turn.tool_calls}) == 2


AFTER_RESULT = (
    UserMessage(content="Greet Alice"),
    AssistantMessage(content=None, tool_calls=(
        ToolCall(id="a", name="sayHello", arguments='{"name": "Alice"}'),)),
    ToolResultMessage(call_id="a", name="sayHello", content="Hello, Alice!"),
)


def _continuation(body: dict[str, Any]) -> Any:
    """The call a continuation request opens its list with (None for any other request)."""
    schema = body["response_format"]["json_schema"]["schema"]
    return schema["prefixItems"][0]["const"] if "prefixItems" in schema else None


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
async def test_continue_lone_calls_asks_whether_more_calls_follow(serve, make_request, tools,
                                                                   stream):
    """With ``continue_lone_calls``, a lone call is asked again as the opening of a list: the
    same request with a schema whose first item is that call; the calls the model adds
    follow it in the turn, whose usage counts both requests."""
    alice = call("sayHello", {"name": "Alice"})
    srv = serve([alice, calls(alice, call("getTime", {"city": "Oslo"}))])
    async with ChatCompletionsModel(srv.base_url, None, tool_call_mode="constrained",
                                    continue_lone_calls=True, stream=stream) as model:
        turn = await (model.stream_request(make_request(), lambda piece: None) if stream
                      else model.request(make_request()))
    assert [(c.name, json.loads(c.arguments)) for c in turn.tool_calls] == [
        ("sayHello", {"name": "Alice"}), ("getTime", {"city": "Oslo"})]
    assert len({c.id for c in turn.tool_calls}) == 2
    first, more = (r.body for r in srv.requests)
    assert _continuation(first) is None
    assert _continuation(more) == {"name": "sayHello", "arguments": {"name": "Alice"}}
    schema = more["response_format"]["json_schema"]["schema"]
    say, get = _variant("sayHello", tools[0].parameters), _variant("getTime", tools[1].parameters)
    assert schema == {"type": "array", "prefixItems": [{"const": _continuation(more)}],
                      "items": {"anyOf": [say, get]}, "minItems": 1}
    assert more["messages"] == first["messages"]  # the server's prompt cache holds it
    assert {k: v for k, v in more.items() if k != "response_format"} == {
        k: v for k, v in first.items() if k != "response_format"}
    assert turn.usage is not None and turn.usage.requests == 2


async def test_continued_lone_call_that_closes_or_strays_stays_alone(serve, make_request):
    """The model closing the list (``]``) leaves the lone call; so does a continuation that
    does not open with it (a server that ignores ``const``)."""
    alice = call("sayHello", {"name": "Alice"})
    srv = serve([alice, calls(alice),
                 alice, calls(call("getTime", {"city": "Oslo"}), alice)])
    async with ChatCompletionsModel(srv.base_url, None, tool_call_mode="constrained",
                                    continue_lone_calls=True) as model:
        for _ in range(2):
            turn = await model.request(make_request())
            assert [(c.name, json.loads(c.arguments)) for c in turn.tool_calls] == [
                ("sayHello", {"name": "Alice"})]
    assert len(srv.requests) == 4


@pytest.mark.parametrize(
    ("script", "options"),
    [
        ([call("sayHello", {"name": "Alice"})], {"continue_lone_calls": False}),
        ([calls(call("sayHello", {"name": "Alice"}), call("getTime", {"city": "Oslo"}))], {}),
        ([reply("Hello!")], {}),
        ([call("sayHello", {"name": "Alice"})], {"tool_choice": NamedToolChoice("sayHello")}),
        ([reply('{"name": "sayHello", "arguments": {"name": "Al', raw=True)], {}),
        ([reply('{"name": "nope", "arguments": {}}', raw=True)], {}),
        ([call("sayHello", {"name": "Alice"})], {"messages": AFTER_RESULT}),
    ],
    ids=["off", "a-list", "text", "named-tool", "broken", "not-offered", "after-results"],
)
async def test_no_continuation_where_the_model_had_no_list_to_go_on_with(
        serve, make_request, script, options):
    """Only a readable lone call to an offered tool, in reply to the user's message, where the
    schema allowed a list, is continued, and only when asked for: one request otherwise."""
    srv = serve(script)
    on = options.pop("continue_lone_calls", True)
    async with ChatCompletionsModel(srv.base_url, None, tool_call_mode="constrained",
                                    continue_lone_calls=on) as model:
        await model.request(make_request(**options))
    assert len(srv.requests) == 1


async def test_constrained_list_with_a_broken_item_is_one_error_call(serve, make_request):
    """A list whose items are not all calls is not half-run: it becomes one call the loop
    answers with an error."""
    srv = serve([reply('[{"name": "getTime", "arguments": {"city": "Rome"}}, 7]', raw=True)])
    async with ChatCompletionsModel(srv.base_url, None, tool_call_mode="constrained") as model:
        turn = await model.request(make_request())
    assert turn.text is None and len(turn.tool_calls) == 1
    assert turn.tool_calls[0].name == "getTime"  # the name read, the arguments the raw rest


async def test_constrained_unknown_named_tool_fails_before_request(serve, make_request):
    """A forced tool that is not offered is a ConfigurationError and nothing is sent."""
    srv = serve([reply("ok")])
    async with ChatCompletionsModel(srv.base_url, None, tool_call_mode="constrained") as model:
        with pytest.raises(ConfigurationError, match="nope"):
            await model.request(make_request(tool_choice=NamedToolChoice("nope")))
    assert srv.requests == []


async def test_constrained_reply_becomes_call_or_text(serve, make_request):
    """The server's constrained content is translated: a step naming a tool becomes a call with
    a fresh id, a final answer becomes text."""
    srv = serve([call("sayHello", {"name": "Alice"}), reply("Hello, Alice!")])
    async with ChatCompletionsModel(srv.base_url, None, tool_call_mode="constrained") as model:
        first = await model.request(make_request())
        second = await model.request(make_request())
    assert first.raw["choices"][0]["message"]["content"].startswith('{"name": "sayHello"')
    assert first.text is None
    assert len(first.tool_calls) == 1
    assert first.tool_calls[0].name == "sayHello"
    assert first.tool_calls[0].arguments == '{"name":"Alice"}'
    assert first.tool_calls[0].id.startswith("call_")
    assert second.text == "Hello, Alice!"
    assert second.tool_calls == ()


@pytest.mark.parametrize(
    ("content", "name", "arguments"),
    [
        ('{"name": "sayHello", "arguments": {"name": "Al', "sayHello", '{"name": "Al'),
        ('{"foo": 1}', "", '{"foo": 1}'),
        ("[]", "", "[]"),
    ],
    ids=["truncated", "stray-shape", "empty-list"],
)
async def test_constrained_unreadable_json_becomes_error_call(serve, make_request, content,
                                                              name, arguments):
    """JSON the step schema cannot explain becomes a call the loop will answer with an error
    (unknown tool, or malformed arguments), never a crash and never a silent final answer."""
    srv = serve([reply(content, raw=True)])
    async with ChatCompletionsModel(srv.base_url, None, tool_call_mode="constrained") as model:
        turn = await model.request(make_request())
    assert turn.text is None
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [(name, arguments)]


@pytest.mark.parametrize(
    ("content", "expected_text", "expected_call"),
    [
        ("I cannot use tools here.", "I cannot use tools here.", None),
        ('```json\n{"name": "getTime", "arguments": {"city": "Oslo"}}\n```', None,
         ("getTime", '{"city":"Oslo"}')),
        ('{"text": "Bye"}', "Bye", None),
        ('{"name": "final_answer", "arguments": {"text": "Done"}}', "Done", None),
    ],
    ids=["prose", "fenced", "final", "final-as-call"],
)
async def test_constrained_other_content(serve, make_request, content, expected_text,
                                         expected_call):
    """Prose (a server ignoring the format) is text; a fenced step is read; both final-answer
    spellings are text."""
    srv = serve([reply(content, raw=True)])
    async with ChatCompletionsModel(srv.base_url, None, tool_call_mode="constrained") as model:
        turn = await model.request(make_request())
    assert turn.text == expected_text
    assert [(c.name, c.arguments) for c in turn.tool_calls] == (
        [expected_call] if expected_call else [])


def test_constrained_prefers_native_tool_calls():
    """A server that answers with native tool_calls (llama.cpp's generic handler does) is
    taken as it is; empty ids are replaced."""
    data = {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [
        {"id": "", "type": "function",
         "function": {"name": "sayHello", "arguments": '{"name":"A"}'}}]}}]}
    turn = parse_chat_reply(data, tool_call_mode="constrained", tool_names=["sayHello"])
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [("sayHello", '{"name":"A"}')]
    assert turn.tool_calls[0].id


# -- text mode --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "expected_text", "expected_calls"),
    [
        ('{"name": "sayHello", "arguments": {"name": "Alice"}}', None,
         [("sayHello", '{"name":"Alice"}')]),
        ('Sure!\n```json\n{"name": "sayHello", "arguments": {"name": "Bob"}}\n```\nDone.',
         "Sure!\n\nDone.", [("sayHello", '{"name":"Bob"}')]),
        ('<tool_call>\n{"name": "getTime", "parameters": {"city": "Rome"}}\n</tool_call>', None,
         [("getTime", '{"city":"Rome"}')]),
        ('[{"name": "sayHello", "arguments": {"name": "A"}}, '
         '{"name": "getTime", "arguments": "{\\"city\\": \\"B\\"}"}]', None,
         [("sayHello", '{"name":"A"}'), ("getTime", '{"city": "B"}')]),
        ('{"name": "launchRocket", "arguments": {}}', '{"name": "launchRocket", "arguments": {}}',
         []),
        ('{"name": "sayHello", "arguments": {"name": ', '{"name": "sayHello", "arguments": '
         '{"name": ', []),
        ("Just text, no JSON.", "Just text, no JSON.", []),
        ('The person is {"name": "Alice"}.', 'The person is {"name": "Alice"}.', []),
    ],
    ids=["bare", "fenced-with-prose", "tool-call-tags", "list", "unknown-name",
         "invalid-json", "prose", "json-without-arguments"],
)
async def test_text_mode(serve, make_request, content, expected_text, expected_calls):
    """Text mode recovers calls to known tools written as JSON in the content; unknown names,
    invalid JSON and plain prose stay text."""
    srv = serve([reply(content)])
    async with ChatCompletionsModel(srv.base_url, None, tool_call_mode="text") as model:
        turn = await model.request(make_request())
    assert "response_format" not in srv.requests[0].body
    assert srv.requests[0].body["tool_choice"] == "auto"
    assert turn.text == expected_text
    assert [(c.name, c.arguments) for c in turn.tool_calls] == expected_calls
    assert all(c.id for c in turn.tool_calls)


async def test_text_mode_reads_no_calls_when_told_not_to_call(serve, make_request):
    """With ``tool_choice="none"`` (how the loop asks for a final answer) a call written as JSON
    stays text: reading it as a call would make the loop run it again."""
    content = '{"name": "sayHello", "arguments": {"name": "Alice"}}'
    srv = serve([reply(content), reply(content)])
    async with ChatCompletionsModel(srv.base_url, None, tool_call_mode="text") as model:
        told_not_to = await model.request(make_request(tool_choice="none"))
        free = await model.request(make_request(tool_choice="auto"))
    assert srv.requests[0].body["tool_choice"] == "none"
    assert (told_not_to.text, told_not_to.tool_calls) == (content, ())
    assert [c.name for c in free.tool_calls] == ["sayHello"]


async def test_text_mode_keeps_native_calls(serve, make_request):
    """Native tool_calls are used as they are in text mode."""
    srv = serve([call("getTime", {"city": "Oslo"}, id="n1")])
    async with ChatCompletionsModel(srv.base_url, None, tool_call_mode="text") as model:
        turn = await model.request(make_request())
    assert turn.tool_calls == (ToolCall(id="n1", name="getTime", arguments='{"city":"Oslo"}'),)


def test_unknown_tool_call_mode_is_configuration_error():
    """A misspelt mode is refused when the adapter is built."""
    with pytest.raises(ConfigurationError, match="tool_call_mode"):
        ChatCompletionsModel("http://127.0.0.1:1/v1", None, tool_call_mode="json")  # type: ignore[arg-type]


@pytest.mark.parametrize("adapter", ["chat", "responses"])
async def test_tools_part_follows_the_tool_list_of_each_request(adapter, serve, make_request,
                                                                 tools):
    """An adapter builds the tools part of its bodies once per tool list and reuses it while
    the same list comes back; another list (or none) is described as it is."""
    from gramagent._models.responses import ResponsesModel

    srv = serve([reply("a"), reply("b"), reply("c"), reply("d")])
    cls = ChatCompletionsModel if adapter == "chat" else ResponsesModel
    async with cls(srv.base_url, "sk-test") as model:
        for offered in (tools, tools, tools[1:], ()):
            await model.request(make_request(tools=offered))

    def names(body: dict[str, Any]) -> list[str]:
        return [t.get("name") or t["function"]["name"] for t in body.get("tools", [])]

    sent = [names(r.body) for r in srv.requests]
    assert sent == [["sayHello", "getTime"], ["sayHello", "getTime"], ["getTime"], []]
    assert srv.requests[0].body["tools"] == srv.requests[1].body["tools"]


_call_text = st.text(alphabet="abc{}\": ,0123", min_size=0, max_size=12)


@settings(max_examples=80, deadline=None)
@given(calls=st.lists(st.tuples(st.sampled_from(["f", "getTime", "say_hi"]), _call_text),
                      min_size=1, max_size=4),
       cuts=st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=4),
       style=st.sampled_from(["indexed", "no index", "one index reused"]))
def test_call_deltas_however_numbered_assemble_to_the_calls(calls, cuts, style):
    """A call streamed as its first delta (id, name, a piece of arguments) and the rest of
    its arguments in pieces: numbered by ``index`` (the spec), or without any index (each
    call opening with its id, the pieces after it with neither id nor name), or every call
    at index 0 (a server counting per message): each assembles to the calls as sent. Without
    an index each piece was a call of its own; a new id on a used index was glued to the
    call before it."""
    chunks: list[dict[str, Any]] = []
    for n, (name, arguments) in enumerate(calls):
        size = cuts[n % len(cuts)]
        pieces = [arguments[i:i + size] for i in range(0, len(arguments), size)] or [""]
        for i, piece in enumerate(pieces):
            delta: dict[str, Any] = {"function": {"arguments": piece}}
            if i == 0:
                delta["id"] = f"call_{n}"
                delta["type"] = "function"
                delta["function"]["name"] = name
            if style == "indexed":
                delta["index"] = n
            elif style == "one index reused":
                delta["index"] = 0
            chunks.append({"choices": [{"index": 0, "delta": {"tool_calls": [delta]}}]})
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    turn = parse_chat_reply(assemble_chat_chunks(chunks))
    assert [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [
        (f"call_{n}", name, arguments) for n, (name, arguments) in enumerate(calls)]
