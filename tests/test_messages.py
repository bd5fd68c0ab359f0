"""gramagent._messages.unique_call_ids (issue 14 item 5)."""

from __future__ import annotations

import pickle

from hypothesis import example, given, settings
from hypothesis import strategies as st

from gramagent._messages import (
    REMEMBERED_FROM,
    AssistantMessage,
    Conversation,
    Message,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    unique_call_ids,
)


def calls(*ids: str) -> tuple[ToolCall, ...]:
    return tuple(ToolCall(id=i, name=f"f{n}", arguments="{}") for n, i in enumerate(ids))


def test_distinct_ids_are_kept_as_they_are() -> None:
    original = calls("a", "b", "c")
    assert unique_call_ids(original) is original
    single = calls("x")
    assert unique_call_ids(single) is single


def test_repeats_and_empty_ids_get_a_suffix_no_other_call_has() -> None:
    assert [c.id for c in unique_call_ids(calls("a", "a", "a~2", "", ""))] == [
        "a", "a~3", "a~2", "call~2", "call~3"]
    assert [c.id for c in unique_call_ids(calls(""))] == ["call~2"]


@settings(max_examples=60)
@given(st.lists(st.sampled_from(["", "a", "a~2", "a~3", "b", "call~2"]), max_size=8))
def test_ids_are_unique_and_calls_unchanged_otherwise(ids: list[str]) -> None:
    original = calls(*ids)
    out = unique_call_ids(original)
    assert len({c.id for c in out}) == len(out) and all(c.id for c in out)
    assert [(c.name, c.arguments) for c in out] == [(c.name, c.arguments) for c in original]
    first = {i for i in ids if i}
    assert all(c.id == o.id for c, o in zip(out, original, strict=True)
               if o.id and ids.index(o.id) == original.index(o))
    assert first <= {c.id for c in out}


def test_a_pickled_conversation_leaves_its_rendering_memo_behind() -> None:
    """The adapters' memo is no part of a conversation's value: not pickled either."""
    conversation = Conversation([UserMessage(content="hi")], id="c1")
    conversation.rendered["chat"] = ((), [], [])
    back = pickle.loads(pickle.dumps(conversation))
    assert back == conversation and back.id == "c1" and back.rendered == {}


def test_ids_the_conversation_holds_are_not_given_again() -> None:
    """Across turns too: a model (or server) that numbers calls per reply reuses ids."""
    assert [c.id for c in unique_call_ids(calls("call_0"), {"call_0"})] == ["call_0~2"]
    assert [c.id for c in unique_call_ids(calls("call_0", "call_1"),
                                          {"call_0", "call_0~2"})] == ["call_0~3", "call_1"]
    fresh = calls("x")
    assert unique_call_ids(fresh, {"y"}) is fresh


@settings(max_examples=60)
@given(st.lists(st.sampled_from(["", "a", "a~2", "b", "call~2"]), max_size=6),
       st.sets(st.sampled_from(["a", "a~2", "a~3", "b", "call~2", "c"])))
def test_new_ids_avoid_the_used_ones(ids: list[str], used: set[str]) -> None:
    out = unique_call_ids(calls(*ids), used)
    new = [c.id for c in out]
    assert len(set(new)) == len(new) and all(new) and used.isdisjoint(new)


def _fresh_ids(conversation: Conversation) -> set[str]:
    return {c.id for m in conversation if isinstance(m, AssistantMessage) for c in m.tool_calls}


_turns = st.lists(st.lists(st.sampled_from(["a", "b", "c", "d", "e~2", ""]), max_size=3),
                  min_size=1, max_size=12)


@settings(max_examples=40, deadline=None)
@given(history=_turns, branches=st.lists(st.tuples(st.integers(0, 50), _turns), max_size=4))
# A copy cut short and grown back to the memo's length with other calls: the memo's messages
# and the copy's are compared whole (no slice), and differ.
@example(history=[["a"]] * 6, branches=[(15, [["b"]])])
def test_call_ids_remembered_are_those_of_the_messages(
        history: list[list[str]], branches: list[tuple[int, list[list[str]]]]) -> None:
    """However copies of a conversation grow and part ways (runs continuing one context), the
    call ids it reports are exactly those of its messages, memo or not."""

    def grow(conversation: Conversation, turns: list[list[str]]) -> None:
        for ids in turns:
            conversation.append(UserMessage(content="u"))
            conversation.append(AssistantMessage(content=None, tool_calls=calls(*ids)))
            conversation.extend(ToolResultMessage(call_id=i, name="f", content="r")
                                for i in ids)

    base = Conversation()
    grow(base, history)
    assert base.call_ids() == _fresh_ids(base)
    for cut, turns in branches:  # a copy, cut short or not, grown its own way
        messages: list[Message] = list(base)[:cut]
        copy = base.copy() if cut >= len(base) else Conversation(messages, id=base.id)
        copy.rendered = base.rendered  # the shared memo, as copies of one context share it
        grow(copy, turns)
        ids = copy.call_ids()
        assert ids == _fresh_ids(copy)
        ids.add("the caller's own")  # a new set each time: the memo does not change
        assert copy.call_ids() == _fresh_ids(copy)
        assert base.call_ids() == _fresh_ids(base)


def test_a_long_conversation_remembers_its_call_ids_a_short_one_does_not() -> None:
    short = Conversation([UserMessage(content="u")] * (REMEMBERED_FROM - 1))
    assert short.call_ids() == set() and short.rendered == {}
    long = Conversation([AssistantMessage(tool_calls=calls("a"))] * REMEMBERED_FROM)
    assert long.call_ids() == {"a"} and "call_ids" in long.rendered
    back = pickle.loads(pickle.dumps(long))
    assert back.rendered == {} and back.call_ids() == {"a"}
