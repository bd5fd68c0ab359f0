"""The builders of frozen dataclasses (gramagent._frozen) build the very objects the classes
build."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gramagent._frozen import builds
from gramagent._messages import (
    AssistantMessage,
    Conversation,
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
from gramagent._models.base import ModelTurn, new_request, new_turn
from gramagent._runtime.results import AgentResponse, ToolInvocation, new_invocation, new_response
from gramagent._spec.calls.check import PreparedCall, check_parsed, new_prepared

text = st.text(max_size=20)
calls = st.builds(ToolCall, id=text, name=text, arguments=text).map(lambda c: (c,))
usage = st.builds(Usage, input_tokens=st.integers(0, 10**6), output_tokens=st.integers(0, 10**6),
                  requests=st.integers(0, 9), estimated=st.booleans())

CASES: list[tuple[Any, Any, st.SearchStrategy[dict[str, Any]]]] = [
    (Usage, new_usage, st.fixed_dictionaries({}, optional={
        "input_tokens": st.integers(0, 10**6), "output_tokens": st.integers(0, 10**6),
        "estimated": st.booleans()})),
    (ToolCall, new_tool_call, st.fixed_dictionaries(
        {"id": text, "name": text, "arguments": text})),
    (UserMessage, new_user_message, st.fixed_dictionaries({"content": text})),
    (AgentResponse, new_response, st.fixed_dictionaries(
        {"content": text, "context": st.just(Conversation()), "usage": usage},
        optional={"stopped_by": st.none() | text, "run_id": text,
                  "finish_reason": text})),
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
    (PreparedCall, new_prepared, st.fixed_dictionaries(
        {"name": text, "arguments": st.dictionaries(text, text, max_size=3)})),
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


@pytest.mark.parametrize("build", [c[1] for c in CASES] + [new_request],
                         ids=[c[0].__name__ for c in CASES] + ["ModelRequest"])
def test_what_it_builds_is_immutable(build: Any) -> None:
    required: dict[Any, dict[str, Any]] = {
        new_tool_call: {"id": "1", "name": "n", "arguments": "{}"},
        new_tool_result: {"call_id": "1", "name": "n", "content": "x"},
        new_invocation: {"call_id": "1", "name": "n", "arguments": {}},
        new_prepared: {"name": "n", "arguments": {}},
        new_user_message: {"content": "hi"},
        new_response: {"content": "", "context": Conversation(), "usage": Usage()},
        new_request: {"model": "m", "instruction": "i", "messages": (), "tools": (),
                      "tool_choice": "auto", "settings": {}}}
    built = build(**required.get(build, {}))
    name = dataclasses.fields(built)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(built, name, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        delattr(built, name)
    # Python 3.11's frozen slotted dataclasses refuse another name with a TypeError (their
    # __setattr__'s super() names the class before slots), later ones with an AttributeError.
    with pytest.raises((AttributeError, TypeError)):
        built.not_a_field = 1


BUILDERS = [new_tool_call, new_usage, new_user_message, new_response, new_assistant_message,
            new_tool_result, new_request, new_turn, new_invocation, new_prepared]


@pytest.mark.parametrize("build", BUILDERS, ids=[b.__name__ for b in BUILDERS])
def test_takes_its_arguments_as_its_reference_does(build: Any) -> None:
    """Each builder takes its arguments as its reference function does (the decorated one,
    which builds the object through the class): by keyword, with its defaults."""
    own = inspect.signature(build, follow_wrapped=False).parameters.values()
    parameters = inspect.signature(build.__wrapped__).parameters.values()
    assert [(p.name, p.kind, p.default) for p in own] == [
        (p.name, p.kind, p.default) for p in parameters]
    values = {p.name: f"v{i}" for i, p in enumerate(parameters) if p.default is p.empty}
    made, built = build.__wrapped__(**values), build(**values)
    assert type(built) is type(made) and built == made and repr(built) == repr(made)


def test_factory_fields_are_passed() -> None:
    """A field whose default is a factory has no default in its builder: each object gets
    the value it is given (never one shared between objects)."""
    with pytest.raises(TypeError):
        new_request(model="m", instruction="i", messages=(), tools=(),  # type: ignore[call-arg]
                    tool_choice="auto")  # no settings

    @dataclasses.dataclass(frozen=True, slots=True)
    class Holder:
        items: list[int] = dataclasses.field(default_factory=list)

    with pytest.raises(TypeError):
        @builds(Holder)
        def new_holder(items: list[int] = []) -> Holder:  # noqa: B006  (the case refused)
            return Holder(items)


def test_the_parameters_are_the_fields() -> None:
    """A builder takes exactly its class's fields, with the fields' defaults."""
    @dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
    class Pair:
        a: int
        b: int = 0

    @builds(Pair)
    def new_pair(b: int, a: int) -> Pair:  # any order; a default may be left out
        return Pair(a=a, b=b)

    assert new_pair(2, 1) == Pair(a=1, b=2) and type(new_pair(2, 1)) is Pair
    refused: list[Any] = [
        lambda a: Pair(a=a),  # b missing
        lambda a, b, c=0: Pair(a=a, b=b),  # another name
        lambda a, b=1: Pair(a=a, b=b),  # not b's default
        lambda a, *b: Pair(a=a),  # *args
        lambda a, **b: Pair(a=a),  # **kwargs
    ]
    for reference in refused:
        with pytest.raises(TypeError):
            builds(Pair)(reference)
    prepared = check_parsed("t", {"a": 1}, validators={"t": lambda _: ()}, schemas={})
    assert type(prepared) is PreparedCall and prepared == PreparedCall("t", {"a": 1})


DEFAULTS = [0, 0.0, -0.0, False, 1, 1.0, True, "", (), (0,), (0.0,), (False,), None]


@settings(max_examples=60, deadline=None)
@given(field_default=st.sampled_from(DEFAULTS), builder_default=st.sampled_from(DEFAULTS))
def test_a_default_is_the_fields_own(field_default: Any, builder_default: Any) -> None:
    """A builder's default that only compares equal to the field's (``0`` for ``0.0``,
    ``False`` for ``0``, ``-0.0`` for ``0.0``) is refused: an object built with it would not
    be the one the class builds (another repr, another type in its field, another JSON)."""
    cls = dataclasses.make_dataclass(
        "Holder", [("value", Any, dataclasses.field(default=field_default))],
        frozen=True, slots=True, kw_only=True)
    def reference(value: Any = builder_default) -> Any:
        return cls(value=value)

    try:
        build: Any = builds(cls)(reference)
    except TypeError:
        assert repr(builder_default) != repr(field_default)
        return
    made, built = cls(), build()
    assert type(built.value) is type(made.value) and repr(built) == repr(made)


@pytest.mark.parametrize("name", ["self", "_twin", "_cls"])
def test_a_field_named_as_the_builders_own_names_is_refused(name: str) -> None:
    """The builder's code names the object it fills, the twin class and the class: a field
    of one of those names would shadow it (every build then failed, or filled the wrong
    object), so such a class is refused when the builder is made."""
    cls = dataclasses.make_dataclass("Odd", [(name, int), ("other", int)], frozen=True,
                                     slots=True, kw_only=True)
    reference = eval(f"lambda {name}, other: cls({name}={name}, other=other)", {"cls": cls})
    with pytest.raises(TypeError, match=name):
        builds(cls)(reference)


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
            builds(cls)
