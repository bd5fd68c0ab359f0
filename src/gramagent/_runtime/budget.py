"""What a run has spent against its limits: model requests, tokens, wall time.

:class:`Budget` counts each answered model request and its tokens (as reported, or estimated
at about four characters per token where the server reports none), says before each request
whether a limit stops the run, and builds the :class:`~gramagent.errors.LimitExceeded` that
stops it, carrying the conversation so far.
"""

from __future__ import annotations

import orjson

from gramagent._messages import (
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

    __slots__ = ("_tools_chars", "conversation", "deadline", "estimated", "input_tokens",
                 "limits", "output_tokens", "requests", "started")

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

    def start_request(self, now: float) -> None:
        """Raise the limit one more request would pass (iterations, wall time, tokens, the
        conversation's bounds); else the request starts, under the deadline."""
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
        max_turns, max_bytes = limits.max_turns, limits.max_context_bytes
        if max_turns is not None or max_bytes is not None:
            turns, size = self.conversation.measure()
            if max_turns is not None and turns > max_turns:
                raise self.exceeded("max_turns", max_turns, turns,
                                    f"the conversation has {turns} user messages, more than "
                                    f"{max_turns}; start a new conversation or raise "
                                    "max_turns")
            if max_bytes is not None and size > max_bytes:
                raise self.exceeded("max_context_bytes", max_bytes, size,
                                    f"the conversation holds {size:,} bytes of messages, more "
                                    f"than a request may carry ({max_bytes:,}); start a new "
                                    "conversation or raise max_context_bytes")
        self.deadline.start()

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

