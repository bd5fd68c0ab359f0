"""Callbacks into a run as it happens: :class:`RunHooks`, the one vocabulary for observing a run.

Pass an instance to ``run_agent(hooks=...)``: the run calls its methods from the event loop,
in order, as the model writes and the tools run. The methods do nothing by default; override
the ones you need. They are called inline, so they must be quick (hand work to a queue or a
task).

The other ways of observing a run are views of these hooks:

- :func:`~gramagent.run_agent_stream` is hooks feeding a queue: each item it yields is one
  hook's call (``on_text`` a :class:`~gramagent.TextDelta`, ``on_tool_calls`` one
  :class:`~gramagent.ToolCallRequested` per call, ``on_tool_results`` one
  :class:`~gramagent.ToolCallAnswered` per invocation), and last the response;
- an event sink (``run_agent(events=...)``, :mod:`~gramagent._runtime.events`) is the one-method
  form of :meth:`RunHooks.on_event`: the tool-call events, the same ones in the same order.

Hooks are the base because they see the run's own data (the calls' arguments, the tools'
results), which are the caller's, like :class:`~gramagent._runtime.results.AgentResponse`;
events are the part of it made for logs and metrics, which never carries arguments (only their
hash), so a sink may be handed to anything.
"""

from __future__ import annotations

from collections.abc import Sequence

from gramagent._messages import Conversation, ToolCall
from gramagent._runtime.events import Event
from gramagent._runtime.results import ToolInvocation

__all__ = ["RunHooks"]


class RunHooks:
    """What a run reports as it goes; every method does nothing unless overridden."""

    streams = True
    """Whether the model's text is wanted as it is generated (the request is then streamed,
    for models that can stream)."""

    def on_start(self, conversation: Conversation) -> None:
        """The run began; ``conversation`` is the live list it appends to (read, do not
        modify)."""

    def on_text(self, text: str) -> None:
        """A piece of the model's text. The pieces of one model request, joined, are its text
        (an answer, or words written beside tool calls)."""

    def on_tool_calls(self, calls: Sequence[ToolCall]) -> None:
        """The model asked for these calls; they are about to be checked and run. Calls the
        output token limit cut off are among them (after the whole ones): they are answered
        too, with the error that says so."""

    def on_tool_results(self, invocations: Sequence[ToolInvocation]) -> None:
        """The calls of one model turn were answered (run, or rejected with an error the
        model will read)."""

    def on_event(self, event: Event) -> None:
        """A tool call's event: :class:`~gramagent.ToolCallPlanned` once it is read from the
        model's turn, :class:`~gramagent.ToolCallResult` as it is answered (before
        :meth:`on_tool_results` for its turn). The same events, in the same order, as the
        run's event sinks get; they never carry arguments."""
