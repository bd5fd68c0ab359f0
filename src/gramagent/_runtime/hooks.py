"""Callbacks into a run as it happens: :class:`RunHooks`.

Pass an instance to ``run_agent(hooks=...)``: the run calls its methods from the event loop,
in order, as the model writes and the tools run. :func:`~gramagent.run_agent_stream` is built on
it. The methods do nothing by default; override the ones you need. They are called inline, so
they must be quick (hand work to a queue or a task).

Unlike the events of :mod:`~gramagent._runtime.events`, which are made for logs and metrics and
never carry arguments, hooks see the run's own data (the calls' arguments, the tools' results):
they are the caller's, like :class:`~gramagent._runtime.results.AgentResponse`.
"""

from __future__ import annotations

from collections.abc import Sequence

from gramagent._messages import Conversation, ToolCall
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
