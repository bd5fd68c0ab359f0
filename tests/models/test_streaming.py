"""Streamed requests (``stream_request``) of every wire format, against the scripted server
streaming real SSE: the text pieces, joined, equal the turn's text, and the turn equals the one
the unstreamed request reads."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gramagent._models.base import ModelRequest, ModelTurn, StreamingModel
from gramagent._models.chat import ChatCompletionsModel
from gramagent._models.chat_stream import assemble_chat_chunks
from gramagent._models.harmony import HarmonyModel
from gramagent._models.jsoncalls import StepTextStream, read_tool_step
from gramagent._models.responses import ResponsesModel
from gramagent._models.sse import SSEDecoder, encode_sse, parse_sse
from gramagent.errors import ModelAPIError
from gramagent.testing import ScriptedServer, call, calls, completion, http_response, reply

ANSWER = 'It is 10:00 in Paris. "Quoted", \\ back-slashed, ünïcödé 😀, and\na new line.'

ADAPTERS: dict[str, Callable[[str], Any]] = {
    "chat": lambda url: ChatCompletionsModel(url),
    "functions": lambda url: ChatCompletionsModel(url, functions=True),
    "constrained": lambda url: ChatCompletionsModel(url, tool_call_mode="constrained"),
    "text": lambda url: ChatCompletionsModel(url, tool_call_mode="text"),
    "responses": lambda url: ResponsesModel(url),
    "harmony": lambda url: HarmonyModel(url),
}


async def _both(adapter: Any, request: ModelRequest) -> tuple[list[str], ModelTurn, ModelTurn]:
    pieces: list[str] = []
    async with adapter:
        streamed = await adapter.stream_request(request, pieces.append)
        whole = await adapter.request(request)
    return pieces, streamed, whole


@pytest.mark.parametrize("api", list(ADAPTERS))
async def test_streamed_text_concatenates_to_the_answer(api, serve, make_request):
    """Several pieces arrive, they join to the answer, and the turn is the unstreamed one."""
    srv = serve([reply(ANSWER, usage=(12, 7)), reply(ANSWER, usage=(12, 7))])
    pieces, streamed, whole = await _both(ADAPTERS[api](srv.base_url), make_request())
    assert "".join(pieces) == streamed.text == whole.text == ANSWER
    assert len(pieces) > 1 or api == "text"  # text mode hands the answer out whole
    assert streamed.usage == whole.usage
    assert streamed.tool_calls == whole.tool_calls == ()
    assert srv.requests[0].body["stream"] is True
    assert "stream" not in srv.requests[1].body


@pytest.mark.parametrize("api", list(ADAPTERS))
async def test_streamed_calls_are_the_unstreamed_calls(api, serve, make_request):
    """A call's arguments arrive in pieces and are reassembled; they are not text."""
    script = [call("sayHello", {"name": "Alice"}, id="call_1")] * 2
    srv = serve(script)
    pieces, streamed, whole = await _both(ADAPTERS[api](srv.base_url), make_request())
    assert pieces == []
    assert [(c.name, json.loads(c.arguments)) for c in streamed.tool_calls] == [
        ("sayHello", {"name": "Alice"})]
    assert [(c.name, c.arguments) for c in streamed.tool_calls] == [
        (c.name, c.arguments) for c in whole.tool_calls]


async def test_parallel_calls_with_text_stream_the_text(serve, make_request):
    srv = serve([calls(call("sayHello", {"name": "A"}), call("sayHello", {"name": "B"}),
                       text="Greeting both.")])
    pieces: list[str] = []
    async with ChatCompletionsModel(srv.base_url) as model:
        turn = await model.stream_request(make_request(), pieces.append)
    assert "".join(pieces) == turn.text == "Greeting both."
    assert [json.loads(c.arguments)["name"] for c in turn.tool_calls] == ["A", "B"]


async def test_harmony_streams_the_final_channel_only(serve, make_request):
    """Chain of thought is not streamed; the final answer is."""
    raw = ("<|channel|>analysis<|message|>The user wants the time.<|end|>"
           "<|start|>assistant<|channel|>final<|message|>" + ANSWER)
    srv = serve([completion(raw)])
    pieces: list[str] = []
    async with HarmonyModel(srv.base_url) as model:
        turn = await model.stream_request(make_request(), pieces.append)
    assert "".join(pieces) == turn.text == ANSWER
    assert len(pieces) > 1
    assert all("user wants" not in p for p in pieces)


async def test_harmony_answer_on_commentary_is_passed_on_at_the_end(serve, make_request):
    srv = serve([completion("<|channel|>commentary<|message|>Just this.")])
    pieces: list[str] = []
    async with HarmonyModel(srv.base_url) as model:
        turn = await model.stream_request(make_request(), pieces.append)
    assert "".join(pieces) == turn.text == "Just this."


async def test_responses_stream_is_named_events_without_done(serve, make_request):
    """The rendered Responses stream is what the API sends: ``event:`` lines naming each
    event's type, sequence numbers, no ``[DONE]``."""
    srv = serve([reply("Hi there, Paris.")])
    answer = await _raw(srv.base_url + "/responses",
                        {"model": "m", "input": "hi", "stream": True})
    assert "[DONE]" not in answer
    names = [line[7:] for line in answer.splitlines() if line.startswith("event: ")]
    events = [json.loads(p) for p in parse_sse(answer)]
    assert names == [e["type"] for e in events]
    assert names[0] == "response.created" and names[-1] == "response.completed"
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    deltas = [e["delta"] for e in events if e["type"] == "response.output_text.delta"]
    assert "".join(deltas) == "Hi there, Paris."


async def _raw(url: str, body: dict[str, Any]) -> str:
    import aiohttp

    async with aiohttp.ClientSession() as session, session.post(url, json=body) as answer:
        return await answer.text()


async def test_error_event_mid_stream_is_a_model_api_error(serve, make_request):
    body = (b'data: {"choices": [{"index": 0, "delta": {"content": "Hel"}}]}\n\n'
            b'data: {"error": {"message": "overloaded"}}\n\n')
    srv = serve([http_response(body, content_type="text/event-stream")])
    pieces: list[str] = []
    async with ChatCompletionsModel(srv.base_url) as model:
        with pytest.raises(ModelAPIError, match="overloaded"):
            await model.stream_request(make_request(), pieces.append)
    assert pieces == ["Hel"]


async def test_responses_stream_without_completion_is_an_error(serve, make_request):
    body = (b'event: response.output_text.delta\n'
            b'data: {"type": "response.output_text.delta", "delta": "Hi"}\n\n')
    srv = serve([http_response(body, content_type="text/event-stream")])
    async with ResponsesModel(srv.base_url) as model:
        with pytest.raises(ModelAPIError, match="without a completed response"):
            await model.stream_request(make_request(), lambda _: None)


def test_every_adapter_streams():
    for make in ADAPTERS.values():
        assert isinstance(make("http://127.0.0.1:1/v1"), StreamingModel)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(), st.lists(st.integers(min_value=1, max_value=9), min_size=1, max_size=20),
       st.booleans(), st.lists(st.sampled_from(["", " ", "\n", "\t  "]), min_size=4,
                               max_size=4))
def test_step_text_stream_matches_the_whole_reading(text, cuts, ascii_only, spaces):
    """Whatever the answer, the spaces around its opening and however the content is cut,
    the decoded pieces join to what read_tool_step reads from the whole content."""
    body = json.dumps(text, ensure_ascii=ascii_only)
    content = f'{spaces[0]}{{{spaces[1]}"text"{spaces[2]}:{spaces[3]}{body}}}'
    reader = StepTextStream()
    out, at, i = [], 0, 0
    while at < len(content):
        size = cuts[i % len(cuts)]
        out.append(reader.feed(content[at:at + size]))
        at += size
        i += 1
    assert "".join(out) == read_tool_step(content)[0] == text


@pytest.mark.timeout(60)
def test_a_long_streamed_answer_is_decoded_in_one_pass():
    """A constrained answer in 300,000 pieces of 10 characters: the content was grown by
    ``+=`` and the whole of it copied at every piece (200,000 pieces: 99 s on the event
    loop's thread); only the text not decoded yet is kept now. And a flood of spaces before
    the opening, rescanned whole at every piece before, costs nothing either."""
    reader = StepTextStream()
    for _ in range(100_000):
        assert reader.feed("  ") == ""
    assert reader.feed('{"text": "') == ""
    out = [reader.feed("0123456789") for _ in range(300_000)]
    assert "".join(out) == "0123456789" * 300_000
    assert reader.feed('\\u00e9"}') == "\u00e9"


def test_step_text_stream_stops_at_an_escape_json_has_not():
    reader = StepTextStream()
    assert reader.feed('{"text": "ok \\x') == "ok "
    assert reader.feed("y" * 100) == ""  # never valid: nothing more, and nothing kept growing


def test_step_text_stream_ignores_calls():
    reader = StepTextStream()
    content = '{"name": "sayHello", "arguments": {"text": "no"}}'
    assert "".join(reader.feed(c) for c in content) == ""


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=20),
                max_size=6),
       st.lists(st.integers(min_value=1, max_value=7), min_size=1, max_size=10),
       st.sampled_from(["\n", "\r\n"]))
def test_sse_decoder_matches_parse_sse_however_split(payloads, cuts, newline):
    """Fed in arbitrary pieces (a \\r\\n may be split), the decoder yields the payloads."""
    clean = [p.replace("\r", "").replace("\n", "") or "x" for p in payloads]
    text = "".join(f"data: {p}{newline}{newline}" for p in clean) + f"data: [DONE]{newline}"
    out = _decoded_in_pieces(text, cuts)
    assert out == clean


def _decoded_in_pieces(text: str, cuts: list[int]) -> list[str]:
    """The payloads an SSEDecoder gives for ``text`` fed in pieces of the sizes ``cuts``
    (repeated), then closed."""
    decoder = SSEDecoder()
    out: list[str] = []
    at, i = 0, 0
    while at < len(text):
        out.extend(decoder.feed(text[at:at + cuts[i % len(cuts)]]))
        at += cuts[i % len(cuts)]
        i += 1
    out.extend(decoder.close())
    return out


def _reference_sse(text: str) -> list[str]:
    """The payloads of a whole SSE text, by the rules (WHATWG "event stream interpretation"),
    written plainly, without the decoder: lines end at CRLF, CR or LF; ``data`` lines of an
    event join with LF; a blank line ends the event; ``[DONE]`` ends the stream; the last
    event counts without its blank line."""
    payloads: list[str] = []
    data: list[str] = []
    for line in [*re.split(r"\r\n|\r|\n", text), ""]:
        if line:
            if line.startswith("data:"):
                value = line[5:]
                data.append(value[1:] if value.startswith(" ") else value)
            continue
        if data:
            payload, data = "\n".join(data), []
            if payload == "[DONE]":
                break
            payloads.append(payload)
    return payloads


_sse_line = st.one_of(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"),
             max_size=8).map(lambda t: f"data: {t}"),
    st.sampled_from(["data:x", "data:", ": a comment", "event: delta", "id: 7", "retry: 10",
                     "data: [DONE]", ""]))


@settings(max_examples=100, deadline=None)
@given(st.lists(_sse_line, max_size=14), st.lists(st.sampled_from(["\n", "\r\n", "\r"]),
                                                  min_size=1, max_size=5),
       st.lists(st.integers(min_value=1, max_value=9), min_size=1, max_size=10))
def test_sse_decoder_follows_the_rules_however_split(lines, ends, cuts):
    """Any lines (data split over lines, comments, other fields, [DONE] anywhere), ended by
    LF, CRLF or a lone CR, fed in pieces split anywhere: the payloads of the plain reading."""
    text = "".join(line + ends[i % len(ends)] for i, line in enumerate(lines))
    out = _decoded_in_pieces(text, cuts)
    assert out == _reference_sse(text)


@pytest.mark.timeout(60)
def test_a_long_line_in_small_pieces_is_read_in_one_pass():
    """A hostile server's 8 MB event in 1 KB pieces: each piece is scanned once (the decoder
    rescanned and copied the unfinished line with every piece: about 340 s on this machine,
    against well under one now; the timeout only catches that, at a 100-fold margin)."""
    decoder = SSEDecoder()
    assert decoder.feed("data: ") == []
    piece = "x" * 1024
    for _ in range(8 * 1024):
        assert decoder.feed(piece) == []
    assert decoder.feed("\r") == []  # the line ends; a blank line ends the event
    assert decoder.feed("\n\r\n") == ["x" * (8 << 20)]


@pytest.mark.slow
@pytest.mark.timeout(60)
@pytest.mark.parametrize("legacy", [False, True])
def test_many_small_call_pieces_are_folded_in_one_pass(legacy):
    """A hostile server's call in 300,000 pieces of 10 characters (3 MB of arguments, about
    30 MB of stream: within the default response limit). Grown by ``+=`` in a dict, the
    arguments were copied whole at every piece: minutes on the event loop's thread, where the
    wall time cannot interrupt (the timeout only catches that, at a 100-fold margin)."""
    n = 300_000
    if legacy:
        chunks = [{"choices": [{"delta": {"function_call": {"name": "f" if i == 0 else None,
                                                            "arguments": "0123456789"}}}]}
                  for i in range(n)]
    else:
        chunks = [{"choices": [{"delta": {"tool_calls": [
            {"index": 0, "id": "c1" if i == 0 else None,
             "function": {"name": "f" if i == 0 else "", "arguments": "0123456789"}}]}}]}
            for i in range(n)]
    message = assemble_chat_chunks(chunks)["choices"][0]["message"]
    call = message["function_call"] if legacy else message["tool_calls"][0]["function"]
    assert call == {"name": "f", "arguments": "0123456789" * n}


# A hostile server: replies and stream events of any JSON shape, with the fields the readers
# look at (a ``choices`` that is no list, a ``type`` that is a list, a message's content that
# is a number, a call's name that is a number...).
_KEYS = ["choices", "index", "delta", "message", "content", "refusal", "tool_calls",
         "function_call", "function", "name", "arguments", "id", "call_id", "finish_reason",
         "usage", "type", "response", "output", "status", "text", "incomplete_details"]
_json_value = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(-2, 2) | st.text(max_size=3)
    | st.sampled_from(["response.output_text.delta", "response.completed", "function",
                       "message", "output_text", "function_call", "refusal", "completed",
                       "incomplete"]),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(_KEYS), inner, max_size=4),
    max_leaves=12)
_hostile_object = st.dictionaries(st.sampled_from(_KEYS), _json_value, max_size=4)
_HOSTILE_ADAPTERS: dict[str, Callable[[str, bool], Any]] = {
    "chat": lambda url, stream: ChatCompletionsModel(url, stream=stream, max_retries=0),
    "responses": lambda url, _: ResponsesModel(url, max_retries=0),
    "harmony": lambda url, stream: HarmonyModel(url, stream=stream, max_retries=0),
}


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(events=st.lists(_hostile_object, min_size=1, max_size=4),
       api=st.sampled_from(list(_HOSTILE_ADAPTERS)),
       how=st.sampled_from(["whole", "streamed", "live"]))
@example(events=[{"type": []}], api="responses", how="live")
@example(events=[{"choices": 1}], api="chat", how="streamed")
@example(events=[{"choices": True}], api="chat", how="live")
@example(events=[{"choices": [{"delta": {"tool_calls": 2}}]}], api="chat", how="streamed")
@example(events=[{"choices": [{"delta": {"tool_calls": [{"function": {"name": 5}}]}}]}],
         api="chat", how="streamed")
@example(events=[{"choices": [{"delta": {"function_call": {"name": 5, "arguments": {}}}}]}],
         api="chat", how="streamed")
@example(events=[{"status": "completed", "output": [{"type": "message", "content": 5}]}],
         api="responses", how="whole")
@example(events=[{"choices": 1.5}], api="harmony", how="streamed")
@example(events=[{"choices": True}], api="harmony", how="live")
async def test_a_hostile_reply_gives_a_turn_or_a_typed_error(make_request, events, api, how):
    """Whatever shape a reply (``whole``: its first object) or a streamed event has, a request
    (streamed and read whole, or passed on ``live``) ends in a turn or a ModelAPIError,
    never another exception."""
    if how == "whole":
        answer = http_response(events[0])
    else:
        answer = http_response(
            encode_sse(events, named=api == "responses", done=api != "responses"),
            content_type="text/event-stream")
    with ScriptedServer([answer]) as srv:
        async with _HOSTILE_ADAPTERS[api](srv.base_url, how == "streamed") as model:
            try:
                if how == "live":
                    turn = await model.stream_request(make_request(), lambda _: None)
                else:
                    turn = await model.request(make_request())
            except ModelAPIError:
                return
    assert isinstance(turn, ModelTurn)
