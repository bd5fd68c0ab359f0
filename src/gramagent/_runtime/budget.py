"""What a run has spent against its limits: model requests, tokens, wall time.

:class:`Budget` counts each answered model request and its tokens (as reported, or estimated
at about four characters per token where the server reports none), says before each request
whether a limit stops the run, and builds the :class:`~gramagent.errors.LimitExceeded` that
stops it, carrying the conversation so far.
"""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from gramagent._messages import (
    REMEMBERED_FROM,
    AssistantMessage,
    Conversation,
    Message,
    ToolResultMessage,
    Usage,
    UserMessage,
    new_usage,
)
from gramagent._models.base import ModelRequest, ModelTurn
from gramagent._runtime.deadline import RunDeadline
from gramagent._runtime.limits import RunLimits
from gramagent.errors import LimitExceeded

__all__ = ["CHARS_PER_TOKEN", "Budget"]

CHARS_PER_TOKEN = 4
"""Token estimate for turns whose server reports no usage."""

_SIZE = "context_size"
"""The key of the conversation's size (messages, user turns, bytes) in its memo."""


class Budget:
    """The requests, tokens and time of one run, against its :class:`RunLimits`.

    Its :attr:`deadline` is the end of the wall time: it cuts a model request short when the
    wall time runs out. :meth:`start_request` checks the limits and puts the request under
    the deadline, until the loop ends it (:meth:`~RunDeadline.cut_short` on CancelledError,
    then :meth:`~RunDeadline.settle` however it ended).

    Args:
        limits: the run's limits.
        conversation: the run's conversation; a copy goes into every limit error.
        started: when the run started, on the event loop's clock.
    """

    __slots__ = ("_measured", "_tools_chars", "context_bytes", "conversation", "deadline",
                 "estimated", "input_tokens", "limits", "output_tokens", "requests", "started",
                 "turns")

    def __init__(self, limits: RunLimits, conversation: Conversation, started: float) -> None:
        wall_time = limits.wall_time
        self.deadline = RunDeadline(None if wall_time is None else started + wall_time)
        """The end of the wall time (no time: no wall time)."""
        self.limits = limits
        self.conversation = conversation
        self.started = started
        self.requests = 0
        """Model requests answered so far."""
        self.input_tokens = 0
        self.output_tokens = 0
        self.estimated = False
        """Whether a server reported no usage for some request (its tokens estimated)."""
        self._tools_chars = -1
        self.turns = 0
        """User messages in the conversation (as of the last request)."""
        self.context_bytes = 0
        """UTF-8 bytes of the conversation's messages (as of the last request)."""
        self._measured = 0  # how many of the conversation's messages are counted above

    @property
    def usage(self) -> Usage:
        """Tokens and requests of the run so far."""
        return new_usage(input_tokens=self.input_tokens, output_tokens=self.output_tokens,
                         requests=self.requests, estimated=self.estimated)

    def carry(self, usage: Usage) -> None:
        """Start from the requests and tokens of an earlier part of the run (one that paused
        for approvals), so its limits hold across the pause."""
        self.requests += usage.requests
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.estimated = self.estimated or usage.estimated

    def remaining(self, now: float) -> float | None:
        """Seconds left before the wall time runs out (None without a wall time)."""
        when = self.deadline.when
        return None if when is None else when - now

    def postpone(self, seconds: float) -> None:
        """Leave ``seconds`` out of the wall time (a wait for a person's approval)."""
        if seconds > 0:
            self.deadline.postpone(seconds)
            self.started += seconds

    def start_request(self, now: float, messages: Sequence[Message]) -> None:
        """Raise the limit one more request would pass (iterations, wall time, tokens, the
        conversation's bound on ``messages``, those the request carries); else the request
        starts, under the deadline."""
        limits = self.limits
        if self.requests >= limits.max_iterations:
            raise self.exceeded("max_iterations", limits.max_iterations, self.requests,
                                f"the model made {self.requests} requests without answering")
        when = self.deadline.when
        if when is not None and now >= when:
            raise self.wall_time_exceeded(now)
        max_tokens = limits.max_tokens
        if max_tokens is not None and self.input_tokens + self.output_tokens >= max_tokens:
            spent = self.input_tokens + self.output_tokens
            raise self.exceeded("max_tokens", max_tokens, spent,
                                f"the token budget of {max_tokens} is spent "
                                f"({spent} tokens in {self.requests} requests)")
        if limits.max_turns is not None or limits.max_context_bytes is not None:
            self._check_conversation(limits, messages)
        self.deadline.start()

    def _check_conversation(self, limits: RunLimits, messages: Sequence[Message]) -> None:
        """Raise the conversation's bound (turns, bytes) ``messages`` pass.

        Counts only the messages added since the last request. On a run's first request,
        the size of what the run continues is remembered in the conversation's memo (shared
        with its copies, as :meth:`~gramagent._messages.Conversation.call_ids` remembers its
        ids): all but the last message (the run's own), so that the next run of the same
        conversation, or each of several runs continuing one context with messages of their
        own, counts only the messages after it."""
        if self._measured:  # later requests of the run: only what was added since
            turns, total = _size(messages[self._measured:], self.turns, self.context_bytes)
        elif len(messages) <= REMEMBERED_FROM:  # short: counted whole
            turns, total = _size(messages, 0, 0)
        else:
            turns, total = self._continued_size(messages)
        self._measured = len(messages)
        self.turns, self.context_bytes = turns, total
        max_turns = limits.max_turns
        if max_turns is not None and turns > max_turns:
            raise self.exceeded("max_turns", max_turns, turns,
                                f"the conversation has {turns} user messages, more than "
                                f"{max_turns}; start a new conversation or raise max_turns")
        max_bytes = limits.max_context_bytes
        if max_bytes is not None and total > max_bytes:
            raise self.exceeded("max_context_bytes", max_bytes, total,
                                f"the conversation holds {total:,} bytes of messages, more "
                                f"than a request may carry ({max_bytes:,}); start a new "
                                "conversation or raise max_context_bytes")

    def _continued_size(self, messages: Sequence[Message]) -> tuple[int, int]:
        """The turns and bytes of ``messages`` on a run's first request, from the size the
        conversation's memo remembers of a prefix of them; the memo then remembers all but
        the last message."""
        memo = self.conversation.rendered
        start, turns, total = 0, 0, 0
        remembered = memo.get(_SIZE)
        if remembered is not None:
            before, known_turns, known_bytes = remembered
            if len(before) < len(messages) and messages[:len(before)] == before:
                start, turns, total = len(before), known_turns, known_bytes
        if start < len(messages) - 1:  # more to remember than the memo holds
            turns, total = _size(messages[start:-1], turns, total)
            memo[_SIZE] = (messages[:-1], turns, total)
        return _size(messages[-1:], turns, total)

    def count(self, request: ModelRequest, turn: ModelTurn) -> Usage:
        """Count one answered request; returns its usage (estimated if none was reported)."""
        usage = turn.usage if turn.usage is not None else self._estimate(request, turn)
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.requests += 1
        if usage.estimated:
            self.estimated = True
        return usage

    def wall_time_exceeded(self, now: float, where: str = "") -> LimitExceeded:
        """The error of a run past its wall time (``where``: what it was doing then)."""
        elapsed = round(now - self.started, 3)
        return self.exceeded("wall_time", self.limits.wall_time, elapsed,
                             f"the run took longer than {self.limits.wall_time:g} s{where}")

    def exceeded(self, name: str, value: float | None, observed: float,
                 what: str) -> LimitExceeded:
        """The error of limit ``name`` (set to ``value``) passed: ``observed`` by ``what``."""
        return LimitExceeded(
            f"run stopped: {what} (limit {name}={value}, observed {observed})",
            limit=name, value=value, observed=observed, context=self.conversation.copy(),
            usage=self.usage)

    def _estimate(self, request: ModelRequest, turn: ModelTurn) -> Usage:
        if self._tools_chars < 0:  # the tools are the same on every request of a run
            self._tools_chars = sum(
                len(d.name) + len(d.description) + len(orjson.dumps(d.parameters))
                for d in request.tools)
        chars = len(request.instruction) + self._tools_chars
        for message in request.messages:
            chars += _message_chars(message)
        out = len(turn.text or "") + sum(len(c.name) + len(c.arguments) for c in turn.tool_calls)
        return new_usage(input_tokens=-(-chars // CHARS_PER_TOKEN),
                         output_tokens=-(-out // CHARS_PER_TOKEN), estimated=True)


def _message_chars(message: Message) -> int:
    match message:
        case UserMessage(content=content) | ToolResultMessage(content=content):
            return len(content)
        case AssistantMessage(content=content, tool_calls=calls):
            return len(content or "") + sum(len(c.name) + len(c.arguments) for c in calls)
    return 0


def _size(messages: Sequence[Message], turns: int, total: int) -> tuple[int, int]:
    """``turns`` and ``total`` UTF-8 bytes with ``messages``' texts (content, tool names,
    arguments) counted in: the texts are joined and measured once."""
    texts: list[str] = []
    add = texts.append
    for message in messages:
        add(message.content or "")
        if isinstance(message, ToolResultMessage):
            add(message.name)
        elif isinstance(message, UserMessage):
            turns += 1
        else:
            for call in message.tool_calls:
                add(call.name)
                add(call.arguments)
    text = "".join(texts)
    size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    return turns, total + size
