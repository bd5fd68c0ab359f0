"""When the embedded model's reply after tool results is read as "done" (issue 33).

The answer step itself runs on the real 0.5B in tests/e2e/test_local_model.py; here, which
replies count as repeats of answered calls.
"""

from __future__ import annotations

import json
import random
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gramagent._messages import (
    AssistantMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from gramagent._models.answering import repeats_answered_calls
from gramagent._models.base import ModelRequest, ModelTurn

HELLO = '{"personName":"Alice"}'


def _after(result_error: bool = False, arguments: str = HELLO, **request: Any) -> ModelRequest:
    """The request after one sayHello call and its result."""
    messages = [UserMessage(content="Hi, I'm Alice"),
                AssistantMessage(content=None, tool_calls=(
                    ToolCall(id="c1", name="sayHello", arguments=arguments),)),
                ToolResultMessage(call_id="c1", name="sayHello", content="Hello, Alice!",
                                  is_error=result_error)]
    return ModelRequest(model="m", instruction="", messages=messages, **request)


def _reply(*calls: tuple[str, str]) -> ModelTurn:
    return ModelTurn(tool_calls=tuple(ToolCall(id=f"n{i}", name=name, arguments=arguments)
                                      for i, (name, arguments) in enumerate(calls)),
                     finish_reason="tool_calls")


def test_the_same_call_again_after_its_result_is_done() -> None:
    assert repeats_answered_calls(_after(), _reply(("sayHello", HELLO)))
    assert repeats_answered_calls(_after(), _reply(("sayHello", HELLO), ("sayHello", HELLO)))


def test_a_new_call_is_a_next_step() -> None:
    """Other arguments, another tool, or a repeat beside a new call go to the loop."""
    assert not repeats_answered_calls(_after(), _reply(("sayHello", '{"personName":"Bob"}')))
    assert not repeats_answered_calls(_after(), _reply(("sayGoodbye", HELLO)))
    assert not repeats_answered_calls(
        _after(), _reply(("sayHello", HELLO), ("sayHello", '{"personName":"Bob"}')))


def test_only_after_tool_results_with_the_choice_left_to_the_model() -> None:
    """A reply to the user's message, a forced choice, a failed earlier call, a text answer,
    or unreadable arguments are not read as done."""
    to_user = ModelRequest(model="m", instruction="", messages=[UserMessage(content="hi")])
    assert not repeats_answered_calls(to_user, _reply(("sayHello", HELLO)))
    assert not repeats_answered_calls(_after(tool_choice="required"),
                                      _reply(("sayHello", HELLO)))
    assert not repeats_answered_calls(_after(result_error=True), _reply(("sayHello", HELLO)))
    assert not repeats_answered_calls(_after(), ModelTurn(text="Hello!"))
    assert not repeats_answered_calls(_after(), _reply(("sayHello", '{"personName":')))
    assert not repeats_answered_calls(_after(arguments="{oops"), _reply(("sayHello", "{oops")))


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                  max_size=3),
    max_leaves=8)


def _shuffled(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: _shuffled(v, rng) for k, v in items}
    if isinstance(value, list):
        return [_shuffled(v, rng) for v in value]
    return value


@given(st.dictionaries(st.text(max_size=6), _json_values, max_size=4), st.randoms(),
       st.sampled_from([(",", ":"), (", ", ": "), (" ,", " : ")]))
def test_key_order_and_spacing_do_not_make_a_new_call(
        arguments: dict[str, Any], rng: random.Random, separators: tuple[str, str]) -> None:
    """The same JSON value written in another key order or spacing is the same call; any
    other value is a new one."""
    first = json.dumps(arguments)
    again = json.dumps(_shuffled(arguments, rng), separators=separators)
    assert repeats_answered_calls(_after(arguments=first), _reply(("sayHello", again)))
    other = json.dumps({**arguments, "\x00new": 1})
    assert not repeats_answered_calls(_after(arguments=first), _reply(("sayHello", other)))
