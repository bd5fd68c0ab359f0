"""The conversation's memo of rendered history: the bodies are those of a fresh rendering."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from gramagent._messages import (
    AssistantMessage,
    Conversation,
    Message,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from gramagent._models import chat_request
from gramagent._models.chat_request import chat_messages
from gramagent._models.responses import responses_input

_text = st.text(max_size=8)
_call = st.builds(ToolCall, id=_text, name=_text, arguments=_text)
_message: st.SearchStrategy[Message] = st.one_of(
    st.builds(UserMessage, content=_text),
    st.builds(AssistantMessage, content=st.none() | _text,
              tool_calls=st.lists(_call, max_size=3).map(tuple)),
    st.builds(ToolResultMessage, call_id=_text, name=_text, content=_text),
)
# Conversations' lives: messages appended between requests, copies taken and continued apart
# (runs continue copies of one context, sharing its memo), and a foreign memo handed in.
# Each request names its instruction (the items before the history): the memo must not give
# one instruction's head to another.
_step = st.tuples(
    st.sampled_from(["append", "request", "copy", "foreign", "list"]),
    st.integers(min_value=0, max_value=7),
    st.lists(_message, min_size=1, max_size=4),
    st.sampled_from(["sys", "", "be brief"]),
)


def _check_rendering(conversation: Conversation, instruction: str = "sys", *,
                     as_list: bool = False) -> list[Any]:
    """Check the memo's bodies against fresh ones (the history as the conversation holds it,
    or as a list: a caller's own sequence); return them, each with a deep copy."""
    messages: Sequence[Message] = (list(conversation.messages) if as_list
                                   else conversation.messages)
    sent: list[Any] = []
    for _ in range(2):  # the memo's first use, then its reuse
        body = chat_messages(instruction, messages, rendered=conversation.rendered)
        assert body == chat_messages(instruction, messages)
        items = responses_input(instruction, messages, conversation.rendered)
        assert items == responses_input(instruction, messages)
        sent += [(body, copy.deepcopy(body)), (items, copy.deepcopy(items))]
    return sent


@settings(max_examples=100, deadline=None)
@given(st.lists(_step, max_size=14))
def test_remembered_rendering_equals_a_fresh_one(
        steps: list[tuple[str, int, list[Message], str]]) -> None:
    with mock.patch("gramagent._models._wire.REMEMBERED_FROM", 2):  # short histories too
        _live(steps)


def _live(steps: list[tuple[str, int, list[Message], str]]) -> None:
    conversations = [Conversation()]
    sent: list[Any] = []
    for kind, which, messages, instruction in steps:
        conversation = conversations[which % len(conversations)]
        if kind == "append":
            conversation.extend(messages)
        elif kind == "copy":
            conversations.append(conversation.copy())
        elif kind == "foreign":  # a memo built for other messages is not taken for these
            other = Conversation(messages)
            sent += _check_rendering(other, instruction)
            conversation.rendered.update(other.rendered)
        sent += _check_rendering(conversation, instruction, as_list=kind == "list")
    for conversation in conversations:
        assert Conversation(conversation.messages) == conversation
    # A body once sent is never changed by a later request (of this conversation or a copy).
    for body, as_sent in sent:
        assert body == as_sent


@mock.patch("gramagent._models._wire.REMEMBERED_FROM", 1)
def test_copies_that_part_at_their_last_shared_message() -> None:
    """Runs that each continue one context with a message of their own (copies sharing its
    memo): each body is the fresh one, the context's items taken from the memo."""
    context = Conversation([UserMessage(content="a"), AssistantMessage(content="b")])
    runs = [context.copy() for _ in range(3)]
    runs[0].append(UserMessage(content="c"))
    runs[1].append(UserMessage(content="d"))  # as long as the memo's: they part at its end
    runs[2].extend([UserMessage(content="e"), AssistantMessage(content="f")])  # longer
    for run in runs:
        _check_rendering(run)


@mock.patch("gramagent._models._wire.REMEMBERED_FROM", 1)
def test_a_rendering_is_never_extended_in_place() -> None:
    """An earlier request's body keeps the history it was sent with."""
    conversation = Conversation([UserMessage(content="hi")])
    first = chat_messages("", conversation.messages, rendered=conversation.rendered)
    conversation.append(AssistantMessage(content="hello"))
    second = chat_messages("", conversation.messages, rendered=conversation.rendered)
    assert first == [{"role": "user", "content": "hi"}]
    assert second == [*first, {"role": "assistant", "content": "hello"}]


def test_short_histories_are_not_remembered() -> None:
    """Below REMEMBERED_FROM messages the memo stays empty (nothing held for short runs)."""
    conversation = Conversation([UserMessage(content=str(n)) for n in range(3)])
    chat_messages("", conversation.messages, rendered=conversation.rendered)
    assert conversation.rendered == {}


@mock.patch("gramagent._models._wire.REMEMBERED_FROM", 1)
def test_a_history_sent_as_a_list_then_a_tuple_renders_whole() -> None:
    """The memo compares sequences of either kind (a list never equals a tuple): the same
    messages given as a list after a tuple are rendered from their common prefix."""
    messages: tuple[Message, ...] = (UserMessage(content="hi"), AssistantMessage(content="hello"))
    rendered: dict[str, object] = {}
    first = chat_messages("sys", messages, rendered=rendered)
    grown: list[Message] = [*messages, UserMessage(content="again")]
    assert chat_messages("sys", grown, rendered=rendered) == chat_messages("sys", grown)
    assert chat_messages("sys", messages, rendered=rendered) == first
    assert responses_input("sys", grown, rendered) == responses_input("sys", grown)


def test_another_instruction_reuses_the_rendered_history() -> None:
    """Requests alternating instructions (hybrid mode's constrained step adds a hint) render
    each history message once, and every body is a fresh rendering's."""
    history = [UserMessage(content=str(i)) if i % 2 == 0 else AssistantMessage(content=str(i))
               for i in range(40)]
    conversation = Conversation(history)
    instructions = ("A", "B", "A", "", "B")
    fresh = [chat_messages(instruction, history) for instruction in instructions]
    rendered_messages: list[int] = []
    real = chat_request._append_chat

    def counted(messages: Sequence[Message], out: list[Any]) -> None:
        rendered_messages.append(len(messages))
        real(messages, out)

    with mock.patch.object(chat_request, "_append_chat", counted):
        bodies = [chat_messages(instruction, conversation.messages,
                                rendered=conversation.rendered) for instruction in instructions]
    assert bodies == fresh
    assert sum(rendered_messages) == len(history)
