"""Reading the calls of a reply: the usual call's short path reads what the careful one does.

The chat and Responses readers take a call whose fields have the usual types (a non-empty
string id, a string name and string arguments) without a method call or ``isinstance`` per
field, and any other item field by field (``_odd_call``). Whatever a server sends, both
must give the same call: the properties below put any JSON value in every field.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gramagent._messages import ToolCall
from gramagent._models import chat_reply, responses

_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                     st.text(max_size=8), st.sampled_from(["", "call_1", "sayHello", "{}"]))
_values = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=6)


_usual = st.sampled_from(["", "call_1", "sayHello", "{}", '{"a": 1}'])
"""Strings of the usual shape (the empty one among them): the short path's cases."""


def _field(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A field's value (a usual string half the time), or ``...`` for a field left out."""
    return st.one_of(st.just(...), _usual, values)


def _object(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not ...}


def _same(fast: ToolCall, careful: ToolCall) -> bool:
    """The same call; a synthesized id (fresh each time) only needs to be one on both."""
    fresh = careful.id.startswith("call_") and len(careful.id) == 29
    return ((fast.id.startswith("call_") and len(fast.id) == 29) if fresh
            else fast.id == careful.id) and (fast.name, fast.arguments) == (
        careful.name, careful.arguments)


_function = st.one_of(st.builds(
    _object, name=_field(_values), arguments=_field(_values)), _values)
_chat_items = st.one_of(st.builds(
    _object, id=_field(_values), type=_field(st.just("function")), function=_field(_function)),
    _values)


def _fn(**fields: Any) -> dict[str, Any]:
    return {"id": "c1", "type": "function", **fields}


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.lists(_chat_items, max_size=3))
@example([_fn(id="", function={"name": "a", "arguments": "{}"})])
@example([_fn(function={"name": 3, "arguments": "{}"})])
@example([_fn(function={"name": "a", "arguments": {"x": 1}})])
@example([_fn(id=7, function={"name": "a", "arguments": "{}"})])
@example([{"function": {"name": "a", "arguments": "{}"}}, "call", None])
def test_chat_reader_reads_any_item_as_the_careful_reading_does(items: list[Any]) -> None:
    """Chat Completions ``tool_calls``: every item, usual or not, gives the call the
    field-by-field reading gives (or none for an item that is not an object)."""
    read = chat_reply._native_calls(items, {})
    careful = [c for c in map(chat_reply._odd_call, items) if c is not None]
    assert len(read) == len(careful)
    assert all(_same(a, b) for a, b in zip(read, careful, strict=True))


_responses_items = st.builds(
    _object, type=st.just("function_call"), call_id=_field(_values), id=_field(_values),
    name=_field(_values), arguments=_field(_values))


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.lists(_responses_items, max_size=3))
@example([{"type": "function_call", "call_id": "", "id": "fc", "name": "a", "arguments": ""}])
@example([{"type": "function_call", "call_id": "c", "name": None, "arguments": "{}"}])
@example([{"type": "function_call", "call_id": "c", "name": "a", "arguments": [1]}])
def test_responses_reader_reads_any_item_as_the_careful_reading_does(
        items: list[dict[str, Any]]) -> None:
    """Responses ``function_call`` items: every item gives the call the field-by-field
    reading gives."""
    turn = responses.parse_responses_reply({"status": "completed", "output": items})
    careful = [responses._odd_call(item) for item in items]
    assert len(turn.tool_calls) == len(careful)
    assert all(_same(a, b) for a, b in zip(turn.tool_calls, careful, strict=True))


def test_the_usual_call_keeps_its_fields() -> None:
    """The short path's own result: the id, name and arguments as sent."""
    item = {"id": "call_7", "type": "function",
            "function": {"name": "sayHello", "arguments": '{"personName": "Ann"}'}}
    (call,) = chat_reply._native_calls([item], {})
    assert (call.id, call.name, call.arguments) == ("call_7", "sayHello",
                                                    '{"personName": "Ann"}')
    (call,) = responses.parse_responses_reply({"output": [
        {"type": "function_call", "call_id": "fc_1", "name": "a", "arguments": "{}"}]}
    ).tool_calls
    assert (call.id, call.name, call.arguments) == ("fc_1", "a", "{}")
