"""The constrained step schema and the JSON-in-text readers, including fuzzing: whatever a
model writes, the readers return text or calls and never raise."""

from __future__ import annotations

import json

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gramagent._messages import ToolCall
from gramagent._models.base import ModelTurn
from gramagent._models.jsoncalls import (
    continued_calls,
    continued_list_schema,
    extract_json_calls,
    lone_call,
    read_tool_step,
    tool_step_content,
    tool_step_schema,
)
from gramagent._spec.definition import ToolDefinition

ADDRESS_TOOL = ToolDefinition(
    name="ship",
    description="Ship to an address",
    parameters={
        "type": "object",
        "properties": {"to": {"$ref": "#/$defs/Address"}},
        "required": ["to"],
        "$defs": {"Address": {"type": "object", "properties": {"city": {"type": "string"}},
                              "required": ["city"]}},
    },
)
PING = ToolDefinition(name="ping", description="Ping", parameters={"type": "object"})


def test_step_schema_lifts_defs_and_validates_steps():
    """Tool $defs move to the root so references resolve; the schema accepts each tool's call
    and the final answer, and rejects calls to other names."""
    schema = tool_step_schema([ADDRESS_TOOL, PING], "auto")
    assert set(schema) == {"anyOf", "$defs"}
    assert "$defs" not in schema["anyOf"][0]["properties"]["arguments"]
    validator = jsonschema.Draft202012Validator(schema)
    assert validator.is_valid({"name": "ship", "arguments": {"to": {"city": "Oslo"}}})
    assert validator.is_valid({"name": "ping", "arguments": {}})
    assert validator.is_valid({"text": "done"})
    assert validator.is_valid([{"name": "ping", "arguments": {}},
                               {"name": "ship", "arguments": {"to": {"city": "Oslo"}}}])
    assert not validator.is_valid([])
    assert not validator.is_valid([{"name": "ping", "arguments": {}}, {"text": "done"}])
    assert not validator.is_valid({"name": "ship", "arguments": {"to": {}}})
    assert not validator.is_valid({"name": "rm", "arguments": {}})
    assert ADDRESS_TOOL.parameters["$defs"]  # the tool's own schema is left untouched


def test_step_content_round_trips():
    """tool_step_content is what read_tool_step reads back, malformed arguments included."""
    call = ToolCall(id="x", name="ping", arguments='{"n": 1}')
    text, calls = read_tool_step(tool_step_content(ModelTurn(tool_calls=(call,))))
    assert text is None and [(c.name, c.arguments) for c in calls] == [("ping", '{"n":1}')]
    broken = ToolCall(id="x", name="ping", arguments='{"n": ')
    _, calls = read_tool_step(tool_step_content(ModelTurn(tool_calls=(broken,))))
    assert [(c.name, c.arguments) for c in calls] == [("ping", '{"n": }')]
    assert read_tool_step(tool_step_content(ModelTurn(text='say "hi"'))) == ('say "hi"', ())
    two = (call, ToolCall(id="y", name="ship", arguments='{"to": {"city": "Oslo"}}'))
    content = tool_step_content(ModelTurn(tool_calls=two))
    assert jsonschema.Draft202012Validator(tool_step_schema([ADDRESS_TOOL, PING], "required")
                                           ).is_valid(json.loads(content))
    text, calls = read_tool_step(content)
    assert text is None and [(c.name, c.arguments) for c in calls] == [
        ("ping", '{"n":1}'), ("ship", '{"to":{"city":"Oslo"}}')]


@given(st.lists(st.sampled_from(["ping", "ship"]), min_size=1, max_size=4),
       st.lists(st.integers(), min_size=4, max_size=4))
@settings(max_examples=40, deadline=None)
def test_any_number_of_calls_round_trips(names, numbers):
    """However many calls a turn holds, the constrained content of it reads back as the same
    calls in the same order."""
    turn = ModelTurn(tool_calls=tuple(
        ToolCall(id=str(i), name=n, arguments=json.dumps({"n": numbers[i]}))
        for i, n in enumerate(names)))
    text, calls = read_tool_step(tool_step_content(turn), ["ping", "ship"])
    assert text is None
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [
        (n, {"n": numbers[i]}) for i, n in enumerate(names)]


NAMES = ["ping", "ship"]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(["name", "arguments", "text", "x", "tool_call"]), inner,
                      max_size=3),
    max_leaves=8,
)
fragments = st.one_of(
    st.text(max_size=30),
    json_values.map(json.dumps),
    st.builds(lambda n, a: json.dumps({"name": n, "arguments": a}),
              st.sampled_from(NAMES + ["other"]), json_values),
    st.sampled_from(["```json\n", "\n```", "<tool_call>", "</tool_call>", "{", "[", '"', "}"]),
)
model_output = st.lists(fragments, max_size=6).map("".join)


@settings(max_examples=300, deadline=None)
@given(model_output)
def test_readers_never_raise(content):
    """Random, truncated and mixed JSON/prose never crash either reader; text mode only ever
    returns calls to known tools, each with an id and text arguments."""
    text, calls = extract_json_calls(content, NAMES)
    assert all(c.name in NAMES and c.id and isinstance(c.arguments, str) for c in calls)
    if not calls:
        assert text == content
    text, calls = read_tool_step(content, NAMES)
    assert text is not None or calls
    assert all(c.id and isinstance(c.arguments, str) for c in calls)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(NAMES), json_values, st.text(max_size=20), st.text(max_size=20))
def test_text_mode_finds_a_call_anywhere(name, arguments, before, after):
    """A known call written between arbitrary prose is found, with its arguments intact."""
    written = json.dumps({"name": name, "arguments": arguments})
    if "{" in before or "[" in before:
        before = ""
    _, calls = extract_json_calls(f"{before}\n{written}\n{after}", NAMES)
    assert calls
    assert calls[0].name == name
    found = calls[0].arguments
    if isinstance(arguments, str):
        assert found == arguments
    elif arguments is None:
        assert found == "{}"
    else:
        assert json.loads(found) == arguments


def test_huge_integers_stay_valid_json():
    """Arguments holding integers beyond 64 bits (which orjson refuses) are still encoded as
    JSON, not as Python reprs (found by the fuzz test above)."""
    content = '{"name": "ping", "arguments": {"n": -9223372036854775809}}'
    for reader in (extract_json_calls, read_tool_step):
        _, calls = reader(content, NAMES)
        assert json.loads(calls[0].arguments) == {"n": -9223372036854775809}


# -- a lone call continued as a list ---------------------------------------------------------

OSLO = {"name": "ship", "arguments": {"to": {"city": "Oslo"}}}


def test_continued_list_schema_opens_with_the_written_call():
    """The continuation accepts the written call alone or followed by any calls, and nothing
    that does not open with it; the tools' $defs still resolve."""
    schema = continued_list_schema([ADDRESS_TOOL, PING], OSLO)
    assert schema["prefixItems"] == [{"const": OSLO}] and "Address" in schema["$defs"]
    validator = jsonschema.Draft202012Validator(schema)
    assert validator.is_valid([OSLO])
    assert validator.is_valid([OSLO, {"name": "ping", "arguments": {}},
                               {"name": "ship", "arguments": {"to": {"city": "Rome"}}}])
    assert not validator.is_valid([])
    assert not validator.is_valid(OSLO)
    assert not validator.is_valid([{"name": "ship", "arguments": {"to": {"city": "Rome"}}}])
    assert not validator.is_valid([{"name": "ping", "arguments": {}}, OSLO])
    assert not validator.is_valid([OSLO, {"text": "done"}])
    assert not validator.is_valid([OSLO, {"name": "ship", "arguments": {"to": {}}}])


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (json.dumps(OSLO), OSLO),
        ("```json\n" + json.dumps(OSLO) + "\n```", OSLO),
        ('  {"name": "ping", "arguments": {}}\n', {"name": "ping", "arguments": {}}),
        ("[" + json.dumps(OSLO) + "]", None),  # a list: the model chose how many
        ('{"text": "done"}', None),
        ('{"name": "final_answer", "arguments": {"text": "done"}}', None),
        ('{"name": "rm", "arguments": {}}', None),  # not an offered tool
        ('{"name": "ping", "arguments": "x"}', None),
        ('{"name": "ping", "arguments": {}, "id": "7"}', None),
        ('{"name": "ping", "arguments": {', None),  # cut off
        ("Shipped.", None),
        (None, None),
    ],
)
def test_lone_call_is_one_call_object_to_an_offered_tool(content, expected):
    assert lone_call(content, ["ship", "ping"]) == expected


def _turn(*items: tuple[str, str], cut_off: tuple[str, str] | None = None) -> ModelTurn:
    made = tuple(ToolCall(id=f"c{i}", name=n, arguments=a) for i, (n, a) in enumerate(items))
    cut = () if cut_off is None else (ToolCall(id="cut", name=cut_off[0], arguments=cut_off[1]),)
    return ModelTurn(tool_calls=made, cut_off_calls=cut)


arguments_objects = st.dictionaries(st.sampled_from(["a", "b", "to"]),
                                    st.integers() | st.text(max_size=5), max_size=3)


@settings(max_examples=60, deadline=None)
@given(arguments_objects, st.lists(st.tuples(st.sampled_from(NAMES), arguments_objects),
                                   max_size=3),
       st.sampled_from([(", ", ": "), (",", ":"), (",\n  ", ":  ")]))
def test_continued_calls_keep_the_first_call_and_add_the_rest(arguments, more, separators):
    """The continuation's further calls follow the lone call (kept as it was, id included),
    however the server spaced the call it repeated; a continuation that does not open with
    the lone call, or was cut off, leaves the lone call alone."""
    first = ToolCall(id="lone", name="ship", arguments=json.dumps(arguments))
    rest = [(n, json.dumps(a)) for n, a in more]
    echoed = ("ship", json.dumps(arguments, separators=separators))
    got = continued_calls(first, _turn(echoed, *rest))
    assert got[0] is first
    assert [(c.name, json.loads(c.arguments)) for c in got[1:]] == [
        (n, json.loads(a)) for n, a in rest]
    assert continued_calls(first, _turn(("ping", echoed[1]), *rest)) == (first,)
    assert continued_calls(first, _turn(("ship", json.dumps({**arguments, "x": 1})),
                                        *rest)) == (first,)
    assert continued_calls(first, _turn(echoed, cut_off=("ping", '{"a": '))) == (first,)
    assert continued_calls(first, _turn()) == (first,)
