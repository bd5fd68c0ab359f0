"""gramagent._messages.unique_call_ids (issue 14 item 5)."""

from __future__ import annotations

import pickle

from hypothesis import given, settings
from hypothesis import strategies as st

from gramagent._messages import Conversation, ToolCall, UserMessage, unique_call_ids


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
