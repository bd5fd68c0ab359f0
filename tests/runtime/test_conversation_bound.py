"""The bound of a whole conversation (issue 32, item 2): ``max_turns`` user messages and
``max_context_bytes`` bytes of messages, over a real HTTP server on 127.0.0.1.

A conversation continued turn after turn (``context=response.context``, as a session or a
multi-turn case does) stops with ``LimitExceeded`` naming the bound before the request that
would pass it: no request goes out for it, and the error carries the whole conversation so
far, the refused user message included.
"""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from runtime_support import make_agent, make_tools

from gramagent import LimitExceeded, RunLimits, run_agent
from gramagent._messages import (
    AssistantMessage,
    Conversation,
    Message,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from gramagent._models.registry import resolve_model
from gramagent.testing import ScriptedServer, reply

ANSWER = "ok, noted: é"  # 13 UTF-8 bytes
ANSWER_BYTES = len(ANSWER.encode())


async def _converse(server: ScriptedServer, messages: list[str], limits: RunLimits
                    ) -> tuple[int, LimitExceeded | None, Conversation | None]:
    """Run ``messages`` as the turns of one conversation; the turns answered, the error that
    stopped it (if any) and the last conversation."""
    agent = make_agent(make_tools().library, names=())
    model = resolve_model("openai/scripted", base_url=server.base_url)
    context: Conversation | None = None
    try:
        for answered, message in enumerate(messages):
            try:
                response = await run_agent(agent, message, model=model, context=context,
                                           limits=limits)
            except LimitExceeded as exc:
                return answered, exc, exc.context
            context = response.context
        return len(messages), None, context
    finally:
        await model.aclose()


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(max_turns=st.integers(1, 8), turns=st.integers(1, 12))
def test_max_turns_stops_the_turn_past_it(max_turns: int, turns: int) -> None:
    messages = [f"message {i}" for i in range(turns)]
    with ScriptedServer([reply(ANSWER)], loop=True) as server:
        answered, error, context = asyncio.run(
            _converse(server, messages, RunLimits(max_turns=max_turns)))
        sent = len(server.requests)
    assert answered == min(turns, max_turns)
    assert sent == answered  # the refused turn sent nothing
    if turns <= max_turns:
        assert error is None
        return
    assert error is not None and error.limit == "max_turns"
    assert (error.value, error.observed) == (max_turns, max_turns + 1)
    assert f"the conversation has {max_turns + 1} user messages, more than {max_turns}" in (
        str(error))
    assert context is not None  # every turn answered, and the refused message, are kept
    users = [m.content for m in context.messages if isinstance(m, UserMessage)]
    assert users == messages[:max_turns + 1]
    assert len(context) == 2 * max_turns + 1


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(sizes=st.lists(st.integers(1, 400), min_size=1, max_size=10),
       wide=st.booleans(), max_bytes=st.integers(20, 2000))
def test_max_context_bytes_stops_the_request_that_would_carry_more(
        sizes: list[int], wide: bool, max_bytes: int) -> None:
    letter = "ж" if wide else "a"  # two UTF-8 bytes or one
    messages = [letter * size for size in sizes]
    expected_turns, total = len(messages), 0
    for index, message in enumerate(messages):
        total += len(message.encode())
        if total > max_bytes:
            expected_turns = index
            break
        total += ANSWER_BYTES
    with ScriptedServer([reply(ANSWER)], loop=True) as server:
        answered, error, context = asyncio.run(
            _converse(server, messages, RunLimits(max_context_bytes=max_bytes)))
        sent = len(server.requests)
    assert answered == sent == expected_turns
    if expected_turns == len(messages):
        assert error is None
        return
    assert error is not None and error.limit == "max_context_bytes"
    assert error.value == max_bytes and error.observed == total
    assert f"holds {total:,} bytes of messages" in str(error)
    assert context is not None and context.messages[-1] == UserMessage(
        content=messages[expected_turns])


def test_the_conversation_bound_is_on_by_default_and_can_be_lifted() -> None:
    limits = RunLimits()
    assert (limits.max_turns, limits.max_context_bytes) == (1000, 4 * 1024 * 1024)
    assert limits.max_conversation_time == 3600.0
    lifted = RunLimits(max_turns=None, max_context_bytes=None, max_conversation_time=None)
    assert lifted.max_turns is None and lifted.max_context_bytes is None


@pytest.mark.slow
@settings(max_examples=10, deadline=None)
@given(turns=st.integers(9, 14), branches=st.lists(st.integers(1, 300), min_size=2,
                                                   max_size=4))
def test_runs_branching_from_one_context_each_count_their_own(turns: int,
                                                              branches: list[int]) -> None:
    """A copy of a context starts from its original's count (Conversation.measure): runs
    that each continue one context with a message of their own are each measured exactly."""
    history = [f"m{i}" for i in range(turns)]
    with ScriptedServer([reply(ANSWER)], loop=True) as server:
        _, error, context = asyncio.run(_converse(server, history, RunLimits()))
        assert error is None and context is not None
        held = sum(len(m.encode()) for m in history) + turns * ANSWER_BYTES

        async def branch(size: int) -> LimitExceeded:
            agent = make_agent(make_tools().library, names=())
            model = resolve_model("openai/scripted", base_url=server.base_url)
            try:
                with pytest.raises(LimitExceeded) as caught:
                    await run_agent(agent, "b" * size, model=model, context=context,
                                    limits=RunLimits(max_context_bytes=held))
                return caught.value
            finally:
                await model.aclose()

        for size in branches:
            error = asyncio.run(branch(size))
            assert (error.limit, error.observed) == ("max_context_bytes", held + size)


def _utf8(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


_texts = st.text(st.characters(codec=None, blacklist_categories=()), max_size=12)


@settings(max_examples=200, deadline=None)
@given(parts=st.lists(st.tuples(st.sampled_from(["user", "result", "assistant"]),
                                _texts, _texts, st.lists(st.tuples(_texts, _texts), max_size=3),
                                st.booleans()), max_size=8),
       split=st.integers(0, 8), extra=_texts)
def test_the_size_of_messages_is_the_sum_of_their_texts_utf8_bytes(
        parts: list[tuple[str, str, str, list[tuple[str, str]], bool]], split: int,
        extra: str) -> None:
    """Each text counted on its own (lone surrogates 3 bytes each, as written with
    surrogatepass), whatever the mix of messages, and whether they were counted at once or
    some before the others were added: the bound's count of a request. A copy goes on from
    its original's count, and the original keeps its own."""
    messages: list[Message] = []
    turns = total = 0
    for kind, content, name, calls, empty in parts:
        if kind == "user":
            messages.append(UserMessage(content=content))
            turns, total = turns + 1, total + _utf8(content)
        elif kind == "result":
            messages.append(ToolResultMessage(call_id="c", name=name, content=content))
            total += _utf8(name) + _utf8(content)
        else:
            tool_calls = tuple(ToolCall(id="c", name=n, arguments=a) for n, a in calls)
            messages.append(AssistantMessage(content=None if empty else content,
                                             tool_calls=tool_calls))
            total += (0 if empty else _utf8(content)) + sum(
                _utf8(n) + _utf8(a) for n, a in calls)
    conversation = Conversation(messages[:split])
    conversation.measure()
    conversation.extend(messages[split:])
    assert conversation.measure() == (turns, total)
    assert Conversation(messages).measure() == (turns, total)
    branch = conversation.copy()
    branch.append(UserMessage(content=extra))
    assert branch.measure() == (turns + 1, total + _utf8(extra))
    assert conversation.measure() == (turns, total)
