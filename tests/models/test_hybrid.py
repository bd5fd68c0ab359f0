"""The hybrid tool-call mode: a free first reply, then a constrained request only where one is
needed (a broken call, a decline), over real HTTP against the scripted server."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gramagent._messages import ToolCall, Usage
from gramagent._models.base import ModelTurn, NamedToolChoice
from gramagent._models.chat import ChatCompletionsModel
from gramagent._models.chat_reply import parse_chat_reply
from gramagent._models.hybrid import CALL_RATHER_THAN_SOLVE, read_free_reply
from gramagent._models.jsoncalls import SEVERAL_CALLS_HINT, tool_step_schema
from gramagent.testing import call, calls, http_response, reply


def _schema(body):
    return body["response_format"]["json_schema"]["schema"]


async def _hybrid(srv, request, *, stream: bool = False):
    async with ChatCompletionsModel(srv.base_url, None, tool_call_mode="hybrid") as model:
        if not stream:
            return await model.request(request)
        pieces: list[str] = []
        turn = await model.stream_request(request, pieces.append)
        assert "".join(pieces) == (turn.text or "")
        return turn


async def test_valid_call_to_an_offered_tool_is_taken_from_one_free_request(serve, make_request):
    """The first request is unconstrained (no response_format, tool_choice auto, the hints about
    lists and about calling rather than solving); a valid call in its reply is the turn, and
    nothing more is asked."""
    srv = serve([reply('```json\n{"name": "getTime", "arguments": {"city": "Oslo"}}\n```')])
    turn = await _hybrid(srv, make_request())
    assert len(srv.requests) == 1
    body = srv.requests[0].body
    assert "response_format" not in body
    assert body["tool_choice"] == "auto"
    assert body["messages"][0]["content"] == (
        f"You greet people.\n\n{SEVERAL_CALLS_HINT}\n\n{CALL_RATHER_THAN_SOLVE}")
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [("getTime", '{"city":"Oslo"}')]
    assert turn.text is None


async def test_several_valid_calls_are_taken(serve, make_request):
    srv = serve([reply('[{"name": "sayHello", "arguments": {"name": "A"}}, '
                       '{"name": "getTime", "arguments": {"city": "B"}}]')])
    turn = await _hybrid(srv, make_request())
    assert len(srv.requests) == 1
    assert [c.name for c in turn.tool_calls] == ["sayHello", "getTime"]
    assert len({c.id for c in turn.tool_calls}) == 2


async def test_a_lone_free_call_is_continued_when_the_adapter_continues(serve, make_request):
    """With ``continue_lone_calls``, a lone valid call of the free reply is asked whether more
    calls follow (a constrained list opening with it), and the calls added follow it."""
    srv = serve([reply('{"name": "getTime", "arguments": {"city": "Oslo"}}'),
                 calls(call("getTime", {"city": "Oslo"}), call("getTime", {"city": "Rome"}))])
    async with ChatCompletionsModel(srv.base_url, None, tool_call_mode="hybrid",
                                    continue_lone_calls=True) as model:
        turn = await model.request(make_request())
    assert [json.loads(c.arguments) for c in turn.tool_calls] == [{"city": "Oslo"},
                                                                  {"city": "Rome"}]
    free, more = (r.body for r in srv.requests)
    assert "response_format" not in free
    assert _schema(more)["prefixItems"] == [{"const": {"name": "getTime",
                                                       "arguments": {"city": "Oslo"}}}]
    # the constrained request's instruction (the hint about lists, without the free step's
    # sentence about calling rather than solving), then the same conversation
    assert more["messages"][0]["content"] == f"You greet people.\n\n{SEVERAL_CALLS_HINT}"
    assert more["messages"][1:] == free["messages"][1:]
    assert turn.usage is not None and turn.usage.requests == 2


@pytest.mark.parametrize("prose", ["It is noon in Paris.", "Use a sayHelloWorld function."])
async def test_prose_is_the_answer(serve, make_request, prose):
    srv = serve([reply(prose)])
    turn = await _hybrid(srv, make_request())
    assert len(srv.requests) == 1
    assert (turn.text, turn.tool_calls) == (prose, ())


@pytest.mark.parametrize(
    "content",
    [
        '{"name": "getCapital", "arguments": {"country": "France"}}',
        'Let me look.\n```json\n{"name": "getCapital", "arguments": {"country": "France"',
        '<tool_call>\n{"name": "find_capital", "parameters": {}}\n</tool_call>',
        "To find the capital of France, I will call the sayHello function.",
    ],
    ids=["invented-call", "invented-broken", "invented-in-tags", "prose-naming-a-tool"],
)
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
async def test_a_call_only_to_an_invented_tool_is_a_decline(serve, make_request, tools, content,
                                                            stream):
    """Calls to tools that are not offered (read or not) mean no offered tool fits, and prose
    about a call it did not make is no answer: the answer is asked for under the text-only
    constrained schema, and usage covers both requests."""
    srv = serve([reply(content, usage=(100, 20)),
                 reply("Paris is the capital of France.", usage=(110, 9))])
    turn = await _hybrid(srv, make_request(), stream=stream)
    assert len(srv.requests) == 2
    assert _schema(srv.requests[1].body) == tool_step_schema(tools, "none")
    assert (turn.text, turn.tool_calls) == ("Paris is the capital of France.", ())
    assert turn.usage == Usage(input_tokens=210, output_tokens=29, requests=2)


async def test_a_native_call_to_an_invented_tool_is_a_decline(serve, make_request, tools):
    srv = serve([call("getCapital", {"country": "France"}), reply("Paris.")])
    turn = await _hybrid(srv, make_request())
    assert _schema(srv.requests[1].body) == tool_step_schema(tools, "none")
    assert (turn.text, turn.tool_calls) == ("Paris.", ())


async def test_offered_calls_are_kept_and_invented_ones_dropped(serve, make_request):
    srv = serve([reply('{"name": "getTime", "arguments": {"city": "Oslo"}}\n'
                       '{"name": "getWeather", "arguments": {"city": "Oslo"}}')])
    turn = await _hybrid(srv, make_request())
    assert len(srv.requests) == 1
    assert [c.name for c in turn.tool_calls] == ["getTime"]


@pytest.mark.parametrize(
    "content",
    [
        '{"name": "sayHello", "arguments": {"greeting": "Hi"}}',  # required "name" left out
        '{"name": "sayHello", "arguments": {"name": 7}}',  # a number for a string
        '{"name": "sayHello", "arguments": "Alice"}',  # not an object
    ],
    ids=["missing-required", "wrong-type", "not-an-object"],
)
async def test_one_invalid_call_is_asked_again_for_that_tool(serve, make_request, tools, content):
    """A call to an offered tool whose arguments do not validate is asked again under that
    tool's constrained variant, so the turn's call parses and validates."""
    srv = serve([reply(content), call("sayHello", {"name": "Alice"})])
    turn = await _hybrid(srv, make_request())
    assert len(srv.requests) == 2
    assert _schema(srv.requests[1].body) == tool_step_schema(tools, NamedToolChoice("sayHello"))
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [("sayHello", '{"name":"Alice"}')]


@pytest.mark.parametrize(
    "content",
    [
        '{"name": "sayHello", "arguments": {"name": "Al',  # cut off
        '[{"name": "sayHello", "arguments": {"name": "A"}}, '
        '{"name": "getTime", "arguments": {}}]',  # two calls, one invalid
    ],
    ids=["broken-json", "one-of-two-invalid"],
)
async def test_a_broken_call_is_asked_again_under_every_call_shape(serve, make_request, tools,
                                                                   content):
    """A broken call to an offered tool (JSON that cannot be read, or several calls of which
    one is invalid) is asked again with a call required: the tools and the list, no text."""
    srv = serve([reply(content), calls(call("sayHello", {"name": "A"}),
                                       call("getTime", {"city": "B"}))])
    turn = await _hybrid(srv, make_request())
    assert len(srv.requests) == 2
    assert _schema(srv.requests[1].body) == tool_step_schema(tools, "required")
    assert [c.name for c in turn.tool_calls] == ["sayHello", "getTime"]


@pytest.mark.parametrize("choice", ["none", "required", NamedToolChoice("getTime")],
                         ids=["none", "required", "named"])
async def test_no_decision_to_make_goes_straight_to_the_constrained_step(serve, make_request, tools,
                                                                         choice):
    srv = serve([call("getTime", {"city": "Oslo"}) if choice != "none" else reply("Bye")])
    turn = await _hybrid(srv, make_request(tool_choice=choice))
    assert len(srv.requests) == 1
    assert _schema(srv.requests[0].body) == tool_step_schema(tools, choice)
    assert turn.tool_calls or turn.text == "Bye"


async def test_after_tool_results_the_step_is_constrained(serve, make_request, history, tools):
    """Once tools have answered, the step goes out constrained (left free there, a small model
    repeats its last call): the answer or further calls, as in constrained mode."""
    srv = serve([reply("Done.")])
    turn = await _hybrid(srv, make_request(messages=history[:4]))
    assert len(srv.requests) == 1
    assert _schema(srv.requests[0].body) == tool_step_schema(tools, "auto")
    assert turn.text == "Done."


async def test_a_cut_off_run_of_one_call_counts_it_once(serve, make_request):
    """A free reply cut off at max_tokens while repeating one call yields that call once;
    distinct calls stay."""
    repeated = '{"name": "sayHello", "arguments": {"name": "A"}}\n' * 5
    content = (repeated + '{"name": "getTime", "arguments": {"city": "B"}}\n' + repeated
               + '{"name": "sayHe')
    srv = serve([http_response({"choices": [{"index": 0, "finish_reason": "length", "message": {
        "role": "assistant", "content": content}}]})])
    turn = await _hybrid(srv, make_request())
    assert len(srv.requests) == 1
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [
        ("sayHello", '{"name":"A"}'), ("getTime", '{"city":"B"}')]


async def test_no_tools_goes_straight_to_the_constrained_step(serve, make_request):
    srv = serve([reply("Hi")])
    turn = await _hybrid(srv, make_request(tools=()))
    assert len(srv.requests) == 1 and "response_format" in srv.requests[0].body
    assert turn.text == "Hi"


_NAMES = st.sampled_from(["sayHello", "getTime", "getCapital", "", "final_answer"])
_ARGS = st.one_of(
    st.dictionaries(st.sampled_from(["name", "city", "greeting", "x"]),
                    st.one_of(st.text(max_size=5), st.integers(), st.none()), max_size=3),
    st.text(max_size=8), st.integers(),
)
_CALL_JSON = st.builds(lambda n, a: json.dumps({"name": n, "arguments": a}), _NAMES, _ARGS)
_PIECES = st.one_of(_CALL_JSON, st.text(max_size=20),
                    st.sampled_from(["```json\n", "\n```", "<tool_call>", "[", "]", ", "]))


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(_PIECES, max_size=6), cut=st.integers(min_value=0, max_value=400))
def test_free_reply_calls_are_always_offered_and_valid(tools, pieces, cut):
    """Whatever the free reply holds (calls, invented calls, prose, broken JSON, cut anywhere),
    reading it never raises, and the calls it keeps are offered tools with valid arguments;
    a reply naming no tool at all is never a decline."""
    content = "".join(pieces)[:cut]
    data = {"choices": [{"message": {"role": "assistant", "content": content}}]}
    turn = parse_chat_reply(data, tool_call_mode="text", tool_names=[t.name for t in tools])
    read = read_free_reply(turn, tools)
    if read.kind == "calls":
        assert read.calls
        for c in read.calls:
            args = json.loads(c.arguments)
            assert c.name in ("sayHello", "getTime") and isinstance(args, dict)
            assert c.name != "sayHello" or isinstance(args.get("name"), str)
            assert c.name != "getTime" or isinstance(args.get("city"), str)
    else:
        assert not read.calls
    if '"name"' not in content and "sayHello" not in content and "getTime" not in content:
        assert read.kind == "text"


def test_read_free_reply_retry_names_the_tool_of_a_single_invalid_call(tools):
    turn = ModelTurn(tool_calls=(ToolCall(id="c1", name="sayHello", arguments="{}"),))
    assert read_free_reply(turn, tools).retry_with == "sayHello"
