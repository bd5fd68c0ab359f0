"""AgentResponse read back from its JSON form: the same response, or a ValidationError."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gramagent import _json as exact_json
from gramagent._messages import (
    AssistantMessage,
    Conversation,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from gramagent._runtime.approval import ApprovalRequest
from gramagent._runtime.results import AgentResponse, ToolInvocation
from gramagent.errors import ValidationError

_text = st.text(max_size=12)
_json_leaf = st.none() | st.booleans() | st.integers(-10**6, 10**6) | _text
_json = st.recursive(_json_leaf, lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(_text, inner, max_size=3), max_leaves=8)
_arguments = st.dictionaries(_text, _json, max_size=3)
_calls = st.builds(ToolCall, id=_text, name=_text, arguments=_text)
_messages = st.one_of(
    st.builds(UserMessage, content=_text),
    st.builds(AssistantMessage, content=st.none() | _text,
              tool_calls=st.lists(_calls, max_size=2).map(tuple), interrupted=st.booleans()),
    st.builds(ToolResultMessage, call_id=_text, name=_text, content=_text,
              is_error=st.booleans()),
)
_counts = st.integers(0, 10**9)
_responses = st.builds(
    AgentResponse,
    content=_text,
    tool_invocations=st.lists(st.builds(
        ToolInvocation, call_id=_text, name=_text, arguments=_arguments | _text, result=_json,
        error=st.none() | _text, error_type=st.none() | _text,
        latency=st.floats(0, 100, allow_nan=False), seq=_counts), max_size=3).map(tuple),
    context=st.builds(Conversation, st.lists(_messages, max_size=4), id=_text.filter(bool)),
    usage=st.builds(Usage, input_tokens=_counts, output_tokens=_counts, requests=_counts),
    stopped_by=st.none() | _text,
    run_id=_text,
    finish_reason=_text,
    pending_approvals=st.lists(st.builds(ApprovalRequest, call_id=_text, tool=_text,
                                         arguments=_arguments), max_size=2).map(tuple),
)


@settings(max_examples=60, deadline=None)
@given(response=_responses)
def test_from_dict_reads_back_what_to_dict_wrote(response: AgentResponse) -> None:
    """Through JSON text and back, every field is the same (the conversation's id too)."""
    again = AgentResponse.from_dict(json.loads(json.dumps(response.to_dict())))
    assert again.to_dict() == response.to_dict()
    assert again.context.id == response.context.id


_hostile_leaf = _json_leaf | st.sampled_from(
    [-1, -(10**30), 10**30, 10**400, math.nan, math.inf, -math.inf, -0.5]) | st.floats()
"""What JSON text read by Python's own ``json.loads`` can hold besides: numbers of any size
and sign, NaN and the infinities (it reads ``NaN`` and ``Infinity``)."""
_hostile = st.recursive(_hostile_leaf, lambda inner: st.lists(inner, max_size=3)
                        | st.dictionaries(_text, inner, max_size=3), max_leaves=8)


_ONE_CALL = AgentResponse(
    content="", tool_invocations=(ToolInvocation(call_id="a", name="t", arguments={}, seq=1),),
    pending_approvals=(ApprovalRequest(call_id="b", tool="t", arguments={}),))
"""Path [4, 0] is its usage's input tokens, [1, 0, 6] its call's latency, [1, 0, 7] its seq,
[1, 0, 3] its result, [8, 0, 2] its waiting call's arguments."""


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(response=_responses, path=st.lists(st.integers(0, 11), min_size=1, max_size=4),
       value=_hostile)
@example(response=_ONE_CALL, path=[4, 0], value=-1)
@example(response=_ONE_CALL, path=[4, 3], value=2**63)
@example(response=_ONE_CALL, path=[1, 0, 6], value=10**400)
@example(response=_ONE_CALL, path=[1, 0, 6], value=math.nan)
@example(response=_ONE_CALL, path=[1, 0, 7], value=-3)
@example(response=_ONE_CALL, path=[1, 0, 3], value=[math.inf])
@example(response=_ONE_CALL, path=[8, 0, 2], value={"x": math.nan})
def test_damaged_data_is_a_validation_error(response: AgentResponse, path: list[int],
                                            value: Any) -> None:
    """Whatever value replaces any part of the JSON form, the result is a response a run can
    go on from, or a ValidationError: never another exception. Such a response has its
    fields' types, counts a run's limits can rely on (none negative), a finite latency, and
    writes back as the same JSON."""
    data = response.to_dict()
    _replace_somewhere(data, path, value)
    try:
        again = AgentResponse.from_dict(data)
    except ValidationError as exc:
        assert "to_dict form" in str(exc)
        return
    assert isinstance(again.content, str) and isinstance(again.usage.requests, int)
    counts = (again.usage.input_tokens, again.usage.output_tokens, again.usage.requests)
    assert min(counts) >= 0 and max(counts) < 2**63
    for message in again.context:
        assert isinstance(getattr(message, "content", None) or "", str)
    for invocation in again.tool_invocations:
        assert isinstance(invocation.call_id, str) and isinstance(invocation.seq, int)
        assert 0 <= invocation.seq < 2**63 and 0 <= invocation.latency < math.inf
    text = exact_json.dumps(again.to_dict())
    assert AgentResponse.from_dict(exact_json.loads(text)).to_dict() == again.to_dict()


def _replace_somewhere(data: Any, path: list[int], value: Any) -> None:
    """Replace the part of ``data`` that ``path`` picks (an index into keys or items at
    each level, taken modulo their number) with ``value``."""
    for depth, step in enumerate(path):
        keys = list(data) if isinstance(data, dict) else list(range(len(data)))
        if not keys:
            return
        key = keys[step % len(keys)]
        last = depth == len(path) - 1
        if last or not isinstance(data[key], dict | list):
            data[key] = value
            return
        data = data[key]


@pytest.mark.parametrize("data", [None, [], "x", {"content": "a"}])
def test_not_a_mapping_or_incomplete(data: Any) -> None:
    with pytest.raises(ValidationError, match="to_dict form"):
        AgentResponse.from_dict(data)
