"""A run as an async iterator: :func:`run_agent_stream`.

The stream yields, in order, the model's text as it is generated (:class:`TextDelta`), each
tool call it asks for (:class:`ToolCallRequested`), each call's outcome
(:class:`ToolCallAnswered`) and last the run's :class:`FinalResponse`. It is
:func:`~gramagent.run_agent` with :class:`~gramagent.RunHooks` feeding a queue; every wire
format streams (see :class:`~gramagent._models.base.StreamingModel`).

Stopping early (``aclose()``, leaving ``async with``, or cancelling the consumer) cancels the
run and leaves :attr:`AgentStream.context` a conversation that can be continued: a partial
answer is kept as an :class:`~gramagent._messages.AssistantMessage` marked ``interrupted``, and
every call the model asked for has a result (an error result for calls that did not finish).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Self, TypeAlias

from gramagent._messages import (
    AssistantMessage,
    Conversation,
    Message,
    ToolCall,
    ToolResultMessage,
)
from gramagent._runtime.approval import Decision
from gramagent._runtime.hooks import RunHooks
from gramagent._runtime.library import BoundAgent
from gramagent._runtime.loop import resume_agent, run_agent
from gramagent._runtime.results import AgentResponse, ToolInvocation
from gramagent._spec.model import Agent

if TYPE_CHECKING:
    from types import TracebackType

__all__ = [
    "INTERRUPTED_RESULT",
    "AgentStream",
    "FinalResponse",
    "StreamEvent",
    "TextDelta",
    "ToolCallAnswered",
    "ToolCallRequested",
    "resume_agent_stream",
    "run_agent_stream",
    "settle_interrupted",
]

INTERRUPTED_RESULT = "Not run: the run was interrupted before this call finished."
"""The error result recorded for a call the interruption left without one."""


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the model's text, as generated."""

    text: str
    kind: Literal["text_delta"] = "text_delta"


@dataclass(frozen=True, slots=True)
class ToolCallRequested:
    """The model asked for this call (its arguments are the model's raw JSON text)."""

    call: ToolCall
    kind: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True, slots=True)
class ToolCallAnswered:
    """A call was answered: run, or rejected with the error the model will read."""

    invocation: ToolInvocation
    kind: Literal["tool_result"] = "tool_result"


@dataclass(frozen=True, slots=True)
class FinalResponse:
    """The run is over: what :func:`~gramagent.run_agent` returns."""

    response: AgentResponse
    kind: Literal["final"] = "final"


StreamEvent: TypeAlias = TextDelta | ToolCallRequested | ToolCallAnswered | FinalResponse
"""What :class:`AgentStream` yields (``match`` on the class or on ``kind``)."""

_END = object()


class _QueueHooks(RunHooks):
    """Puts what the run reports on the stream's queue; keeps the current request's text."""

    def __init__(self, queue: asyncio.Queue[Any]) -> None:
        self.queue = queue
        self.conversation: Conversation | None = None
        self.partial: list[str] = []
        """Text of the model request in flight (cleared when it asked for calls)."""

    def on_start(self, conversation: Conversation) -> None:
        self.conversation = conversation

    def on_text(self, text: str) -> None:
        self.partial.append(text)
        self.queue.put_nowait(TextDelta(text))

    def on_tool_calls(self, calls: Sequence[ToolCall]) -> None:
        self.partial.clear()
        for call in calls:
            self.queue.put_nowait(ToolCallRequested(call))

    def on_tool_results(self, invocations: Sequence[ToolInvocation]) -> None:
        for invocation in invocations:
            self.queue.put_nowait(ToolCallAnswered(invocation))


class AgentStream:
    """A run in progress: iterate it for :data:`StreamEvent` items.

    Use it as ``async with run_agent_stream(...) as stream: async for event in stream``; the
    run starts at the first iteration. Errors of the run (``ModelAPIError``,
    ``LimitExceeded``, ...) are raised from the iteration, as ``run_agent`` raises them.
    """

    def __init__(self, agent: Agent | BoundAgent, start: str | Mapping[str, Decision],
                 context: Conversation | Iterable[Message] | None, options: dict[str, Any],
                 paused: AgentResponse | None = None) -> None:
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._hooks = _QueueHooks(self._queue)
        self._args = (agent, start)
        """The agent, and the user message or the decisions that resume a paused run."""
        self._context = context
        self._paused = paused
        """The paused response a resumed run continues (None: only its conversation)."""
        self._options = options
        self._task: asyncio.Task[None] | None = None
        self._finished = False
        self.response: AgentResponse | None = None
        """The run's response once the stream has yielded it."""
        self.interrupted = False
        """Whether the stream was closed before the run finished."""
        self._settled: Conversation | None = None

    @property
    def context(self) -> Conversation:
        """The conversation to continue from: the response's, or after an interruption the
        conversation so far, settled (see the module docs)."""
        if self.response is not None:
            return self.response.context
        if self._settled is not None:
            return self._settled
        live = self._hooks.conversation
        if live is not None:
            return live.copy()
        return Conversation(self._context or ())

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> StreamEvent:
        if self._finished:
            raise StopAsyncIteration
        if self._task is None:
            agent, start = self._args
            self._task = asyncio.get_running_loop().create_task(_work(
                self._queue, self._hooks, agent, start, self._context, self._paused,
                self._options))
        item = await self._queue.get()
        if item is _END:
            self._finished = True
            raise StopAsyncIteration
        if isinstance(item, BaseException):
            self._finished = True
            await self._task
            raise item
        if isinstance(item, FinalResponse):
            self.response = item.response
        return item  # type: ignore[no-any-return]

    def __del__(self) -> None:
        # Dropped without aclose() (a `break` outside `async with`): its run is stopped. The
        # run's task holds no reference to the stream (see _work), so a stream nobody holds
        # is collected and its run no longer goes on calling tools for nobody.
        task = self._task
        if task is not None and not task.done():
            with contextlib.suppress(RuntimeError):  # its event loop is closed: over anyway
                task.get_loop().call_soon_threadsafe(task.cancel)

    async def aclose(self) -> None:
        """Stop the run if it is still going (the conversation is settled, see
        :attr:`context`); nothing happens when it is over."""
        self._finished = True
        task = self._task
        if task is None or task.done():
            return
        task.cancel()
        self.interrupted = True
        try:
            # Not ``await task`` under suppress(CancelledError): that swallowed the
            # cancellation of the task closing the stream too, when it came while the run
            # wound down. wait() raises only this task's own.
            await asyncio.wait((task,))
        finally:
            live = self._hooks.conversation
            if live is not None:
                self._settled = settle_interrupted(live, "".join(self._hooks.partial))

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()


async def _work(queue: asyncio.Queue[Any], hooks: _QueueHooks, agent: Agent | BoundAgent,
                start: str | Mapping[str, Decision],
                context: Conversation | Iterable[Message] | None,
                paused: AgentResponse | None, options: dict[str, Any]) -> None:
    """The run of an :class:`AgentStream`, its events put on ``queue``: a function, not a
    method, so that its task holds no reference to the stream (see ``AgentStream.__del__``)."""
    try:
        if isinstance(start, str):
            response = await run_agent(agent, start, context=context, hooks=hooks, **options)
        else:
            resumed = paused if paused is not None else context or ()
            response = await resume_agent(agent, resumed, start, hooks=hooks, **options)
    except Exception as exc:  # handed to the consumer, raised from __anext__
        queue.put_nowait(exc)
        return
    queue.put_nowait(FinalResponse(response))
    queue.put_nowait(_END)


def run_agent_stream(
    agent: Agent | BoundAgent,
    user_input: str,
    *,
    context: Conversation | Iterable[Message] | None = None,
    **options: Any,
) -> AgentStream:
    """:func:`~gramagent.run_agent`, as a stream of what happens while it runs.

    Takes the same arguments as ``run_agent`` (except ``hooks``). Example::

        async with run_agent_stream(agent, "Greet Alice", library=library) as stream:
            async for event in stream:
                match event:
                    case TextDelta(text=text):
                        print(text, end="", flush=True)
                    case ToolCallRequested(call=call):
                        print(f"\\n-> {call.name}")
                    case FinalResponse(response=response):
                        print()
        stream.context  # continue the conversation from here

    Returns:
        An :class:`AgentStream`; the run starts when it is first iterated.
    """
    if "hooks" in options:
        raise TypeError("run_agent_stream() sets hooks itself; use run_agent(hooks=...)")
    return AgentStream(agent, user_input, context, options)


def resume_agent_stream(
    agent: Agent | BoundAgent,
    paused: AgentResponse | Conversation | Iterable[Message],
    decisions: Mapping[str, Decision],
    **options: Any,
) -> AgentStream:
    """:func:`~gramagent.resume_agent`, as a stream (see :func:`run_agent_stream`).

    Returns:
        An :class:`AgentStream`; the run resumes when it is first iterated.
    """
    if "hooks" in options:
        raise TypeError("resume_agent_stream() sets hooks itself; use resume_agent(hooks=...)")
    if isinstance(paused, AgentResponse):
        return AgentStream(agent, dict(decisions), paused.context, options, paused)
    return AgentStream(agent, dict(decisions), paused, options)


def settle_interrupted(conversation: Conversation, partial_text: str = "") -> Conversation:
    """A copy of an interrupted run's ``conversation`` that can be continued.

    Every call of the last assistant message that has no result gets an error result
    (:data:`INTERRUPTED_RESULT`); then, unless the conversation ends with the model's answer,
    the text the model was writing (``partial_text``, possibly empty) becomes an assistant
    message marked ``interrupted``, so a next user message follows an assistant one.
    """
    settled = conversation.copy()
    for call in settled.unanswered_calls():
        settled.append(ToolResultMessage(call_id=call.id, name=call.name,
                                         content=INTERRUPTED_RESULT, is_error=True))
    if len(settled) and not isinstance(settled[-1], AssistantMessage):
        settled.append(AssistantMessage(content=partial_text, interrupted=True))
    return settled
