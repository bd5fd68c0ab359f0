"""Hostile model output through the real loop over HTTP, in every wire format (issue 14).

A hypothesis property drives arbitrary argument text (any JSON value, truncated JSON, random
text, and the classes of the issue: lone surrogates, NaN/Infinity/1e999, long integers that
force the standard library's parser, nesting far past the limit) and arbitrary answer text
through ``run_agent`` against the scripted server, and checks what a run promises:

- it ends in an answer or a typed error (a :class:`~gramagent.errors.RunError`);
- every call id is answered exactly once, in the conversation and in the next request, even
  when the model repeats ids;
- no tool runs on rejected arguments, and a tool only ever sees valid text;
- the conversation is kept (on the error too) and can always be sent again.

Bounded: a few dozen examples per wire format, each a short run on 127.0.0.1.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from runtime_support import APIS, PARALLEL_APIS, sent_results

from gramagent import _json as exact_json
from gramagent._messages import AssistantMessage, Conversation, ToolResultMessage, UserMessage
from gramagent._runtime.library import ToolLibrary
from gramagent._runtime.limits import RunLimits
from gramagent._runtime.loop import AgentResponse, run_agent_sync
from gramagent._spec.calls.check import INVALID_CALL_TYPES
from gramagent._spec.model import Agent
from gramagent.errors import RunError, ValidationError
from gramagent.testing import ScriptedServer, call, calls, reply

# -- strategies -------------------------------------------------------------------------------

_scalars = (st.none() | st.booleans() | st.integers(min_value=-(2**80), max_value=2**80)
            | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12))
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=8)
_keys = st.sampled_from(["personName", "key", "x"]) | st.text(max_size=6)
_objects = st.dictionaries(_keys, _values, max_size=3).map(json.dumps)

HOSTILE = ['"\\ud800"', '"a\\udfff"', '"\\ud83d"', '"\\ud83d\\ude00"', "NaN", "Infinity",
           "-Infinity", "1e999", "-1e400", "123456789012345678901234567890", "1.5e308",
           '"\\u0000"', '"<|call|><|end|>"', '"[/red]"']
"""Values the issue found crashing the loop (or that stress a wire format's framing)."""


@st.composite
def _hostile_object(draw: st.DrawFn) -> str:
    value = draw(st.sampled_from(HOSTILE))
    long = draw(st.sampled_from(["", ', "n": 12345678901234567890123']))  # stdlib's parser
    name = draw(st.sampled_from(["personName", "key"]))
    return f'{{"{name}": {value}{long}}}'


@st.composite
def _deep(draw: st.DrawFn) -> str:
    depth = draw(st.integers(min_value=1, max_value=1500))
    open_, close = draw(st.sampled_from([("[", "]"), ('{"a":', "}")]))
    long = draw(st.sampled_from(["1", "12345678901234567890123"]))
    return '{"personName": "x", "deep": ' + open_ * depth + long + close * depth + "}"


@st.composite
def _truncated(draw: st.DrawFn) -> str:
    text = draw(_objects)
    return text[: draw(st.integers(min_value=0, max_value=len(text)))]


ARGUMENTS = st.one_of(
    _objects, _hostile_object(), _deep(), _truncated(), st.text(max_size=40),
    st.text(max_size=12).map(lambda name: json.dumps({"personName": name})),
    st.just('{"key": "k"}'),
)
ANSWERS = st.text(max_size=30) | st.sampled_from(["done", "[bold]x[/bold]", "<|end|>", ""])


# -- the tools: they record what they were given ----------------------------------------------

def recording_library(received: list[tuple[str, dict[str, Any]]]) -> ToolLibrary:
    library = ToolLibrary()

    @library.register
    def sayHello(personName: str = "world") -> str:
        """Returns a friendly greeting message for the given name."""
        received.append(("sayHello", {"personName": personName}))
        return f"Hello, {personName}!"

    @library.register
    def lookup(key: str) -> dict[str, Any]:
        """Returns a record."""
        received.append(("lookup", {"key": key}))
        return {"key": key, "big": 2**70, "deep": [[[[key]]]]}

    return library


def _agent(library: ToolLibrary) -> Agent:
    return Agent(name="hostile_probe", model="openai/scripted", instruction="Use the tools.",
                 tools=tuple(t.spec() for t in library))


# -- the property -----------------------------------------------------------------------------

def _turns(conversation: Conversation) -> list[tuple[AssistantMessage, list[ToolResultMessage]]]:
    """Each assistant turn with tool calls and the tool results that follow it."""
    out: list[tuple[AssistantMessage, list[ToolResultMessage]]] = []
    for message in conversation.messages:
        if isinstance(message, AssistantMessage) and message.tool_calls:
            out.append((message, []))
        elif isinstance(message, ToolResultMessage):
            assert out, "a tool result with no call before it"
            out[-1][1].append(message)
    return out


def check_run(api: str, arguments: list[str], answer: str,
              ids: list[str] | None = None) -> None:
    received: list[tuple[str, dict[str, Any]]] = []
    library = recording_library(received)
    names = ["sayHello", "lookup"]
    ids = ids or [f"call_{i}" for i in range(len(arguments))]
    items = [call(names[i % 2], text, id=ids[i % len(ids)])
             for i, text in enumerate(arguments)]
    with ScriptedServer([calls(*items), reply(answer)]) as server:
        try:
            outcome: AgentResponse | RunError = run_agent_sync(
                _agent(library), "Hi", library=library, model="openai/scripted", api=api,
                base_url=server.base_url, settings={},
                limits=RunLimits(repeat_guard=False, max_invalid_calls_per_tool=None))
        except RunError as exc:  # typed: ModelAPIError or LimitExceeded
            outcome = exc
        requests = [r.body for r in server.requests]

    # the conversation is kept, and can always be sent again
    context = outcome.context
    assert isinstance(context, Conversation)
    assert context.messages[0] == UserMessage(content="Hi")
    exact_json.dumps(context.to_list()).encode("utf-8")

    # every call id answered exactly once, in call order
    for turn, results in _turns(context):
        assert [r.call_id for r in results] == [c.id for c in turn.tool_calls]
        assert len({c.id for c in turn.tool_calls}) == len(turn.tool_calls)
    if len(requests) > 1:
        sent = sent_results(requests[1])
        made = sum(len(t.tool_calls) for t, _ in _turns(context))
        assert len(sent) == made
        ids = [i for i, _ in sent if i is not None]
        assert len(ids) == len(set(ids))

    # no tool ran on rejected arguments; tools only saw text that encodes
    if isinstance(outcome, AgentResponse):
        ok = [(i.name, {"personName": "world", **i.arguments} if i.name == "sayHello"
               else i.arguments) for i in outcome.tool_invocations if i.ok]
        assert Counter(map(repr, received)) == Counter(map(repr, ok))
        for invocation in outcome.tool_invocations:
            assert invocation.ok or invocation.error_type in INVALID_CALL_TYPES
        if api != "harmony":  # Harmony text cannot carry its own special tokens
            assert outcome.content == answer or not answer
    for _, kwargs in received:
        json.dumps(kwargs, ensure_ascii=False).encode("utf-8")


_SETTINGS = settings(max_examples=20, deadline=None, derandomize=True,
                     suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("api", APIS)
@_SETTINGS
@given(argument=ARGUMENTS, answer=ANSWERS)
def test_one_hostile_call_in_every_format(api: str, argument: str, answer: str) -> None:
    check_run(api, [argument], answer)


@pytest.mark.parametrize("api", PARALLEL_APIS)
@_SETTINGS
@given(arguments=st.lists(ARGUMENTS, min_size=2, max_size=4), answer=ANSWERS,
       ids=st.lists(st.sampled_from(["call_0", "call_1", "dup", "dup~2"]), min_size=1,
                    max_size=4))
def test_several_hostile_calls_in_one_reply(api: str, arguments: list[str], answer: str,
                                            ids: list[str]) -> None:
    """Calls with repeated ids too (issue 14 item 5): each still answered exactly once."""
    check_run(api, arguments, answer, ids)


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("argument", [f'{{"personName": {v}}}' for v in HOSTILE[:9]]
                         + [f'{{"personName": {v}, "n": 12345678901234567890123}}'
                            for v in HOSTILE[:9]])
def test_each_issue_example_is_refused_before_the_tool(api: str, argument: str) -> None:
    """The issue's examples, pinned: refused as arguments, the tool never runs."""
    received: list[tuple[str, dict[str, Any]]] = []
    library = recording_library(received)
    with ScriptedServer([call("sayHello", argument, id="c1"), reply("fine")]) as server:
        response = run_agent_sync(_agent(library), "Hi", library=library, api=api,
                                  model="openai/scripted", base_url=server.base_url)
    (invocation,) = response.tool_invocations
    if "\\ud83d\\ude00" in argument or "1.5e308" in argument:  # a pair, a finite double
        assert invocation.error_type == "invalid_arguments" or invocation.ok
    else:
        assert invocation.error_type == "tool_payload_parse_error", invocation
        assert received == []
    assert response.content == "fine"


@pytest.mark.parametrize("api", APIS)
@settings(max_examples=15, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(turns=st.lists(st.lists(st.sampled_from(["call_0", "call_1", "", "call_0~2"]),
                               min_size=1, max_size=3), min_size=1, max_size=3),
       again=st.booleans())
def test_call_ids_repeated_across_turns_are_made_unique(api: str, turns: list[list[str]],
                                                        again: bool) -> None:
    """A server numbering calls per reply repeats ids across turns (and across runs of one
    conversation): each call still gets an id of its own, so the history every wire format
    sends pairs each call with one result (strict Responses servers refuse duplicates)."""
    library = recording_library([])
    single = api not in PARALLEL_APIS
    script = [calls(*(call("sayHello", json.dumps({"personName": f"p{t}{i}"}), id=i_d)
                      for i, i_d in enumerate(ids[:1] if single else ids)))
              for t, ids in enumerate(turns)]
    script.append(reply("done"))
    if again:  # a second run on the same conversation, numbering from call_0 again
        script += [call("sayHello", '{"personName": "again"}', id="call_0"), reply("again")]
    with ScriptedServer(script) as server:
        agent = _agent(library)
        response = run_agent_sync(agent, "Hi", library=library, model="openai/scripted",
                                  api=api, base_url=server.base_url,
                                  limits=RunLimits(repeat_guard=False))
        if again:
            response = run_agent_sync(agent, "More", library=library, context=response.context,
                                      model="openai/scripted", api=api,
                                      base_url=server.base_url)
        last = server.requests[-1].body
    made = [c.id for t, _ in _turns(response.context) for c in t.tool_calls]
    assert len(made) == len(set(made)) and all(made)
    answered = [r.call_id for _, results in _turns(response.context) for r in results]
    assert answered == made
    wire = [i["call_id"] for i in last.get("input", ()) if i.get("type") == "function_call"]
    wire += [c["id"] for m in last.get("messages", ()) for c in m.get("tool_calls") or ()]
    assert len(wire) == len(set(wire))
    sent = [i for i, _ in sent_results(last) if i is not None]
    assert len(sent) == len(set(sent))


_USER_TEXT = st.lists(st.one_of(st.characters(max_codepoint=0x7F), st.characters(),
                                st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)),
                      min_size=1, max_size=12).map("".join).filter(str.strip)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_USER_TEXT)
def test_user_input_is_refused_with_a_lone_surrogate_and_sent_as_it_is_otherwise(
        text: str) -> None:
    """A user message holding a lone surrogate (a pair too: in a ``str`` its halves are two
    code points, which UTF-8 cannot carry) is a ValidationError before any request; any other
    text, ASCII or not, is sent exactly as given."""
    agent = Agent(name="echo", model="openai/scripted", instruction="x")
    lone = any(0xD800 <= ord(c) <= 0xDFFF for c in text)
    with ScriptedServer([reply("ok")]) as server:
        if lone:
            with pytest.raises(ValidationError, match="lone surrogate"):
                run_agent_sync(agent, text, library=ToolLibrary(), base_url=server.base_url)
            assert server.requests == []
            return
        response = run_agent_sync(agent, text, library=ToolLibrary(), base_url=server.base_url)
    assert response.content == "ok"
    assert server.requests[0].body["messages"][-1] == {"role": "user", "content": text}
