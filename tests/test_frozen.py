"""The cheap constructors of frozen dataclasses build the very objects the classes build."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gramagent._frozen import constructor
from gramagent._messages import (
    AssistantMessage,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    new_assistant_message,
    new_tool_call,
    new_tool_result,
    new_usage,
    new_user_message,
)
from gramagent._models.base import ModelRequest, ModelTurn, new_request, new_turn
from gramagent._runtime.results import (
    AgentResponse,
    ToolInvocation,
    new_invocation,
    new_response,
)
from gramagent._spec.calls import PreparedCall, check_parsed

text = st.text(max_size=20)
calls = st.builds(ToolCall, id=text, name=text, arguments=text).map(lambda c: (c,))
usage = st.builds(Usage, input_tokens=st.integers(0, 10**6), output_tokens=st.integers(0, 10**6),
                  requests=st.integers(0, 9))

CASES: list[tuple[Any, Any, st.SearchStrategy[dict[str, Any]]]] = [
    (Usage, new_usage, st.fixed_dictionaries({}, optional={
        "input_tokens": st.integers(0, 10**6), "output_tokens": st.integers(0, 10**6)})),
    (ToolCall, new_tool_call, st.fixed_dictionaries(
        {"id": text, "name": text, "arguments": text})),
    (UserMessage, new_user_message, st.fixed_dictionaries({"content": text})),
    (AssistantMessage, new_assistant_message, st.fixed_dictionaries({}, optional={
        "content": st.none() | text, "tool_calls": calls, "interrupted": st.booleans()})),
    (ToolResultMessage, new_tool_result, st.fixed_dictionaries(
        {"call_id": text, "name": text, "content": text}, optional={"is_error": st.booleans()})),
    (ModelTurn, new_turn, st.fixed_dictionaries({}, optional={
        "text": st.none() | text, "tool_calls": calls, "usage": st.none() | usage,
        "finish_reason": st.none() | text})),
    (ToolInvocation, new_invocation, st.fixed_dictionaries(
        {"call_id": text, "name": text, "arguments": st.dictionaries(text, text, max_size=3)},
        optional={"error": st.none() | text, "latency": st.floats(0, 10), "seq": st.integers(0)})),
]


@pytest.mark.parametrize(("cls", "build", "kwargs"), CASES,
                         ids=[c[0].__name__ for c in CASES])
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_builds_the_same_object_as_the_class(cls: Any, build: Any, kwargs: Any,
                                             data: st.DataObject) -> None:
    values = data.draw(kwargs)
    made, built = cls(**values), build(**values)
    assert type(built) is cls
    assert built == made and repr(built) == repr(made)
    try:
        expected_hash = hash(made)
    except TypeError:  # a field holds a dict: neither is hashable
        with pytest.raises(TypeError):
            hash(built)
    else:
        assert hash(built) == expected_hash
    assert pickle.loads(pickle.dumps(built)) == made
    assert copy.deepcopy(built) == made
    assert dataclasses.replace(built) == made
    assert dataclasses.asdict(built) == dataclasses.asdict(made)


@pytest.mark.parametrize("build", [c[1] for c in CASES] + [new_request, new_response],
                         ids=[c[0].__name__ for c in CASES] + ["ModelRequest", "AgentResponse"])
def test_what_it_builds_is_immutable(build: Any) -> None:
    required: dict[str, dict[str, Any]] = {"ToolCall": {"id": "1", "name": "n", "arguments": "{}"},
                "UserMessage": {"content": "hi"},
                "ToolResultMessage": {"call_id": "1", "name": "n", "content": "x"},
                "ToolInvocation": {"call_id": "1", "name": "n", "arguments": {}},
                "ModelRequest": {"model": "m", "instruction": "i", "messages": ()},
                "AgentResponse": {"content": "x"}}
    built = build(**required.get(build.__name__.removeprefix("new_"), {}))
    name = dataclasses.fields(built)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(built, name, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        delattr(built, name)
    # Python 3.11's frozen slotted dataclasses refuse another name with a TypeError (their
    # __setattr__'s super() names the class before slots), later ones with an AttributeError.
    with pytest.raises((AttributeError, TypeError)):
        built.not_a_field = 1


def test_default_factories_give_each_object_its_own_value() -> None:
    first = new_request(model="m", instruction="i", messages=())
    second = new_request(model="m", instruction="i", messages=())
    assert first.settings == {} and first.settings is not second.settings
    assert first == ModelRequest(model="m", instruction="i", messages=())
    response = new_response(content="x")
    assert response.context is not new_response(content="x").context
    assert response.usage == Usage()
    assert new_response(content="x", usage=new_usage(input_tokens=3)) == AgentResponse(
        content="x", usage=Usage(input_tokens=3), context=response.context)


def test_the_signature_is_the_classes() -> None:
    with pytest.raises(TypeError):
        new_usage(1, 2)  # type: ignore[call-arg]  # keyword-only, as Usage(1, 2) is
    with pytest.raises(TypeError):
        new_tool_call(id="1", name="n")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        new_user_message(content="x", other=1)  # type: ignore[call-arg]
    prepared = check_parsed("t", {"a": 1}, validators={"t": lambda _: ()}, schemas={})
    assert type(prepared) is PreparedCall and prepared == PreparedCall("t", {"a": 1})


def test_refuses_what_it_cannot_build() -> None:
    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        a: int

    @dataclasses.dataclass(slots=True)
    class NotFrozen:
        a: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class PostInit:
        a: int

        def __post_init__(self) -> None:
            pass

    for cls in (NoSlots, NotFrozen, PostInit, dict):
        with pytest.raises(TypeError):
            constructor(cls)
