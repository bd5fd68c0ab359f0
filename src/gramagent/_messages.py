"""The conversation vocabulary shared by the runtime and the model adapters.

A leaf module (like :mod:`gramagent.errors`): the loop appends these messages, the adapters
render them into their wire formats, and :class:`Conversation` round-trips through JSON so a
conversation can be saved, resumed or shipped to another process.

Every message carries a ``kind`` literal, so ``match`` statements over messages are exhaustive
and the JSON form is self-describing.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypeAlias, TypedDict

from gramagent._frozen import builds

__all__ = [
    "AssistantMessage",
    "AssistantMessageDict",
    "Conversation",
    "Message",
    "MessageDict",
    "ToolCall",
    "ToolCallDict",
    "ToolResultMessage",
    "ToolResultMessageDict",
    "Usage",
    "UserMessage",
    "UserMessageDict",
    "message_from_dict",
    "new_assistant_message",
    "new_tool_call",
    "new_tool_result",
    "new_usage",
    "unique_call_ids",
]


class ToolCallDict(TypedDict):
    """The JSON form of a :class:`ToolCall` (:meth:`ToolCall.to_dict`)."""

    id: str
    name: str
    arguments: str


class UserMessageDict(TypedDict):
    """The JSON form of a :class:`UserMessage`."""

    kind: Literal["user"]
    content: str


class AssistantMessageDict(TypedDict):
    """The JSON form of an :class:`AssistantMessage`: ``tool_calls`` and ``interrupted`` only
    where there are calls, or the text was cut short."""

    kind: Literal["assistant"]
    content: str | None
    tool_calls: NotRequired[list[ToolCallDict]]
    interrupted: NotRequired[bool]


class ToolResultMessageDict(TypedDict):
    """The JSON form of a :class:`ToolResultMessage`."""

    kind: Literal["tool_result"]
    call_id: str
    name: str
    content: str
    is_error: bool


MessageDict: TypeAlias = UserMessageDict | AssistantMessageDict | ToolResultMessageDict
"""The JSON form of a message (:meth:`Conversation.to_list` gives a list of them)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """A call the model asked for. ``arguments`` is the raw JSON text, as the model sent it."""

    id: str
    """The call id (``tool_calls[].id`` / ``call_id``); synthesized where a format has none."""
    name: str
    """The tool name the model asked for (may be unknown)."""
    arguments: str
    """The arguments as raw JSON text; may be malformed, it is validated by the loop."""

    def to_dict(self) -> ToolCallDict:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


def unique_call_ids(calls: tuple[ToolCall, ...], used: AbstractSet[str] = frozenset()
                    ) -> tuple[ToolCall, ...]:
    """``calls`` with every id unique, also against ``used`` (the ids of the conversation's
    earlier calls): a repeated id (or an empty one) gets a suffix (``call_1`` ->
    ``call_1~2``), so each call is answered exactly once in every wire format, and a
    conversation never holds one id twice (strict servers refuse a Responses input that does).
    The calls are returned as they are when their ids already differ (the usual reply)."""
    if len(calls) == 1 and calls[0].id and calls[0].id not in used:  # the usual turn
        return calls
    ids = [c.id for c in calls]
    if len(set(ids)) == len(ids) and all(ids) and used.isdisjoint(ids):
        return calls
    taken = set(ids).union(used)
    seen = set(used)
    out: list[ToolCall] = []
    for call in calls:
        new_id = call.id
        if not new_id or new_id in seen:
            n = 2
            base = new_id or "call"
            while f"{base}~{n}" in taken:
                n += 1
            new_id = f"{base}~{n}"
            taken.add(new_id)
            call = new_tool_call(id=new_id, name=call.name, arguments=call.arguments)
        seen.add(new_id)
        out.append(call)
    return tuple(out)


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Tokens reported by the model server (summed over a run)."""

    input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0
    """How many model requests the figures cover."""
    estimated: bool = False
    """True when a server reported no usage for some request the figures cover: those tokens
    were estimated from the text (about 4 characters a token)."""

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return new_usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            requests=self.requests + other.requests,
            estimated=self.estimated or other.estimated,
        )

    def to_dict(self) -> dict[str, int]:
        """The figures (and ``"estimated": true`` when some were estimated)."""
        out = {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.total_tokens,
            "requests": self.requests,
        }
        if self.estimated:
            out["estimated"] = True
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class UserMessage:
    """A message from the user."""

    content: str
    kind: Literal["user"] = "user"

    def to_dict(self) -> UserMessageDict:
        return {"kind": self.kind, "content": self.content}


@dataclass(frozen=True, slots=True, kw_only=True)
class AssistantMessage:
    """A model turn: text, tool calls, or both."""

    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    interrupted: bool = False
    """The text is partial: the run was stopped while the model was writing it."""
    kind: Literal["assistant"] = "assistant"

    def to_dict(self) -> AssistantMessageDict:
        out: AssistantMessageDict = {"kind": self.kind, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        if self.interrupted:
            out["interrupted"] = True
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultMessage:
    """The output of one tool call, sent back to the model under the call's id."""

    call_id: str
    name: str
    content: str
    """The result as text (JSON for structured results), or the error text."""
    is_error: bool = False
    kind: Literal["tool_result"] = "tool_result"

    def to_dict(self) -> ToolResultMessageDict:
        return {
            "kind": self.kind,
            "call_id": self.call_id,
            "name": self.name,
            "content": self.content,
            "is_error": self.is_error,
        }


Message: TypeAlias = UserMessage | AssistantMessage | ToolResultMessage

# Builders of the objects the loop and the adapters make for every request, reply and tool
# call: the same objects as the classes make, without a call of ``object.__setattr__`` per
# field (gramagent._frozen; docs/performance.md, "Frozen builders", has the measurement that
# keeps them). Objects made once per run are built by their classes.


@builds(ToolCall)
def new_tool_call(*, id: str, name: str, arguments: str) -> ToolCall:
    """A :class:`ToolCall` (:func:`gramagent._frozen.builds`)."""
    return ToolCall(id=id, name=name, arguments=arguments)


@builds(Usage)
def new_usage(*, input_tokens: int = 0, output_tokens: int = 0, requests: int = 0,
              estimated: bool = False) -> Usage:
    """A :class:`Usage` (:func:`gramagent._frozen.builds`)."""
    return Usage(input_tokens=input_tokens, output_tokens=output_tokens, requests=requests,
                 estimated=estimated)


@builds(UserMessage)
def new_user_message(*, content: str, kind: Literal["user"] = "user") -> UserMessage:
    """A :class:`UserMessage` (:func:`gramagent._frozen.builds`)."""
    return UserMessage(content=content, kind=kind)


@builds(AssistantMessage)
def new_assistant_message(*, content: str | None = None, tool_calls: tuple[ToolCall, ...] = (),
                          interrupted: bool = False,
                          kind: Literal["assistant"] = "assistant") -> AssistantMessage:
    """An :class:`AssistantMessage` (:func:`gramagent._frozen.builds`)."""
    return AssistantMessage(content=content, tool_calls=tool_calls, interrupted=interrupted,
                            kind=kind)


@builds(ToolResultMessage)
def new_tool_result(*, call_id: str, name: str, content: str, is_error: bool = False,
                    kind: Literal["tool_result"] = "tool_result") -> ToolResultMessage:
    """A :class:`ToolResultMessage` (:func:`gramagent._frozen.builds`)."""
    return ToolResultMessage(call_id=call_id, name=name, content=content, is_error=is_error,
                             kind=kind)


def message_from_dict(data: Mapping[str, Any]) -> Message:
    """Rebuild a message from its ``to_dict`` form.

    Raises:
        ValueError: an unknown ``kind``. TypeError: a field of the wrong type.
        KeyError: a missing field.
    """
    kind = data.get("kind")
    if kind == "user":
        return UserMessage(content=_str(data["content"], "content"))
    if kind == "assistant":
        content = data.get("content")
        calls = tuple(ToolCall(id=_str(c["id"], "tool_calls.id"),
                               name=_str(c["name"], "tool_calls.name"),
                               arguments=_str(c["arguments"], "tool_calls.arguments"))
                      for c in data.get("tool_calls") or ())
        return AssistantMessage(content=None if content is None else _str(content, "content"),
                                tool_calls=calls,
                                interrupted=bool(data.get("interrupted", False)))
    if kind == "tool_result":
        return ToolResultMessage(
            call_id=_str(data["call_id"], "call_id"),
            name=_str(data["name"], "name"),
            content=_str(data["content"], "content"),
            is_error=bool(data.get("is_error", False)),
        )
    raise ValueError(f"unknown message kind {kind!r}")


def _str(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"a message's {what} is {type(value).__name__}, not a string")
    return value


REMEMBERED_FROM = 16
"""Conversations of this many messages or more remember what is derived from their history
(their call ids here, the adapters' renderings in ``rendered``) between runs and requests."""

_CALL_IDS = "call_ids"
"""The key of :meth:`Conversation.call_ids` in the conversation's memo (no wire format's name)."""


class Conversation:
    """An ordered, append-only list of messages (most recent last).

    Pass ``AgentResponse.context`` back into ``run_agent(context=...)`` to continue a
    conversation. The system instruction is not stored: it comes from the agent each turn.
    """

    __slots__ = ("_measured", "_messages", "id", "rendered")

    def __init__(self, messages: Iterable[Message] = (), id: str | None = None) -> None:
        self._messages: list[Message] = list(messages)
        self._measured: tuple[int, int, int] = (0, 0, 0)
        """What :meth:`measure` counted last: the messages it covered, their user messages
        and bytes."""
        self.id: str = id if id is not None else uuid.uuid4().hex
        """Identifies the conversation across runs (tools keep per-conversation state under
        it); kept by :meth:`copy`, not part of equality or of :meth:`to_list`."""
        self.rendered: dict[str, Any] = {}
        """The memo of what is derived from the messages: the model adapters' renderings, per
        wire format (``ModelRequest.rendered``; the next request renders only the messages
        after the prefix it shares with the last one), and :meth:`call_ids`. Shared with
        :meth:`copy` (runs continue copies of a context); not part of equality or of
        :meth:`to_list`."""

    @property
    def messages(self) -> tuple[Message, ...]:
        return tuple(self._messages)

    def append(self, message: Message) -> None:
        self._messages.append(message)

    def extend(self, messages: Iterable[Message]) -> None:
        self._messages.extend(messages)

    def __reduce__(self) -> tuple[object, ...]:
        # Pickled (errors carry a conversation across processes) without the memo.
        return (_conversation, (self._messages, self.id))

    def copy(self) -> Conversation:
        """A new list of the same messages, with the same :attr:`id` (and rendering memo),
        measured as this one is (:meth:`measure`)."""
        copy = Conversation(self._messages, id=self.id)
        copy.rendered = self.rendered  # a memo of renderings of both (never of their value)
        self.measure()
        copy._measured = self._measured
        return copy

    def measure(self) -> tuple[int, int]:
        """The size the bounds of a conversation hold (``RunLimits.max_turns`` and
        ``max_context_bytes``): its user messages, and the UTF-8 bytes of its texts (the
        contents, the tool names of calls and results, the calls' arguments; a lone
        surrogate counts three).

        The messages are counted once: a later call counts only those added since, and a
        :meth:`copy` starts from the count of its original (the runs that continue copies of
        one context count only their own messages)."""
        counted, turns, size = self._measured
        messages = self._messages
        if counted == len(messages):
            return turns, size
        texts: list[str] = []
        for message in messages[counted:]:
            if isinstance(message, ToolResultMessage):
                texts.append(message.content)
                texts.append(message.name)
            elif isinstance(message, UserMessage):
                texts.append(message.content)
                turns += 1
            else:
                if message.content:
                    texts.append(message.content)
                for call in message.tool_calls:
                    texts.append(call.name)
                    texts.append(call.arguments)
        text = "".join(texts)  # measured once: one check for ASCII, one encoding at most
        size += len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
        self._measured = (len(messages), turns, size)
        return turns, size

    def call_ids(self) -> set[str]:
        """The ids of every tool call in the conversation (a new set, the caller's to grow).

        A conversation of :data:`REMEMBERED_FROM` messages or more keeps them in its memo
        (:attr:`rendered`, shared with its copies), with the messages they were read from, up
        to the last one holding calls: the next run of the same conversation, or of a copy of
        it, reads only the messages after the prefix it shares with those (compared by identity
        first), instead of going through the whole history once per run. Ending
        the prefix there keeps it shared by runs that each continue one context with messages
        of their own (their user message first).
        """
        messages = self._messages
        ids: set[str] = set()
        start = 0
        memo = self.rendered.get(_CALL_IDS)
        if memo is not None:
            before, known = memo
            if len(before) <= len(messages) and messages[:len(before)] == before:
                ids.update(known)
                start = len(before)
        last = -1  # the last message read here that holds calls
        for index in range(start, len(messages)):
            message = messages[index]
            if isinstance(message, AssistantMessage) and message.tool_calls:
                for call in message.tool_calls:
                    ids.add(call.id)
                last = index
        if len(messages) >= REMEMBERED_FROM and last >= 0:
            self.rendered[_CALL_IDS] = (messages[:last + 1], frozenset(ids))
        return ids

    def unanswered_calls(self) -> tuple[ToolCall, ...]:
        """The tool calls of the last assistant message that have no result yet (in call
        order): those a paused run awaits approval for, or an interrupted run left behind.
        Empty when the conversation does not end with calls and their results."""
        messages = self._messages
        for index in range(len(messages) - 1, -1, -1):
            message = messages[index]
            if isinstance(message, AssistantMessage):
                if not message.tool_calls:
                    return ()
                answered = {m.call_id for m in messages[index + 1:]
                            if isinstance(m, ToolResultMessage)}
                return tuple(c for c in message.tool_calls if c.id not in answered)
            if not isinstance(message, ToolResultMessage):
                return ()
        return ()

    def __iter__(self) -> Iterator[Message]:
        return iter(self._messages)

    def __len__(self) -> int:
        return len(self._messages)

    def __getitem__(self, index: int) -> Message:
        return self._messages[index]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Conversation) and self._messages == other._messages

    def __repr__(self) -> str:
        return f"Conversation({self._messages!r})"

    def to_list(self) -> list[MessageDict]:
        """JSON-ready list of message dicts."""
        return [m.to_dict() for m in self._messages]

    @classmethod
    def from_list(cls, data: Iterable[Mapping[str, object]], *, id: str | None = None
                  ) -> Conversation:
        """Inverse of :meth:`to_list` (pass ``id`` to keep the conversation's identity)."""
        return cls((message_from_dict(d) for d in data), id=id)


def _conversation(messages: list[Message], id: str) -> Conversation:
    """Unpickle a :class:`Conversation`."""
    return Conversation(messages, id=id)
