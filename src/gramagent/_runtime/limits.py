"""Run limits: the guardrails every run of the loop observes.

A limit that stops a run raises :class:`~gramagent.errors.LimitExceeded` naming the limit, its
value and the observed count, and carrying the conversation so far. Limits on single tool calls
(timeout, output size, payload size) do not stop the run: they become error results or
truncated output the model sees.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import Enum
from typing import Final

from gramagent._limit_values import limit_problem, refuse_problems

__all__ = ["INHERIT", "Inherit", "RunLimits"]


class Inherit(Enum):
    """Type of :data:`INHERIT`."""

    INHERIT = "inherit"

    def __repr__(self) -> str:
        return "INHERIT"


INHERIT: Final = Inherit.INHERIT
"""Sentinel for a per-tool setting that takes the run's value (unlike ``None``: no limit)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunLimits:
    """Guardrails for one run of :func:`~gramagent._runtime.loop.run_agent`.

    ``None`` disables a limit. The defaults are meant for interactive agents; tighten them for
    untrusted inputs.
    """

    max_iterations: int = 10
    """Model requests per run (the seeds' iteration limit)."""
    tool_timeout: float | None = 60.0
    """Seconds one tool call may take; a tool's own ``timeout`` overrides it."""
    wall_time: float | None = 600.0
    """Seconds a whole run may take. Checked before each model request; model requests and
    tool calls are cut short so the run ends close to this bound."""
    max_tokens: int | None = None
    """Token budget (input + output) across the run, from reported usage, or an estimate of
    about four characters per token for turns that report none. Checked before each request."""
    max_tool_calls: int | None = 100
    """Tool calls per run, valid or not."""
    max_tool_output_chars: int | None = 20_000
    """Longest tool result sent back to the model; longer results are cut, with a marker."""
    max_invalid_calls_per_tool: int | None = 3
    """Retry budget: after this many invalid calls (bad payload, unknown tool, schema
    violation) to one tool name in a run, the run stops."""
    max_payload_bytes: int = 8192
    """Largest argument payload (UTF-8 bytes) parsed; larger ones are rejected unparsed."""
    max_turns: int | None = 1000
    """User messages in one conversation, this run's included: a run continuing a longer
    conversation stops before its first request (the conversation so far kept)."""
    max_context_bytes: int | None = 4 * 1024 * 1024
    """UTF-8 bytes of the conversation's messages (texts, tool names, arguments and results)
    a request may carry; checked before each request. 4 MiB is about a million tokens, past
    every model's context window."""
    max_conversation_time: float | None = 3600.0
    """Seconds the turns of one conversation may take together where gramagent runs them one
    after another (an experiment's multi-turn case): each turn's ``wall_time`` is cut to what
    is left. A single run continuing a ``context`` cannot know when its conversation began,
    so it counts only its own ``wall_time``."""
    repeat_guard: bool = True
    """Do not run a call identical (same name, same canonical arguments) to one that already
    succeeded in this run, nor copies of one call in the same reply: answer them with that
    call's output, record them as ``repeated_call`` (invocations, events), and ask the model
    to answer (next ``tool_choice`` is ``"none"``). Copies of a call that failed share its
    failure."""

    def __post_init__(self) -> None:
        problems = [limit_problem(f.name, getattr(self, f.name), whole=f.name not in _SECONDS)
                    for f in fields(self) if f.name != "repeat_guard"]
        if not isinstance(self.repeat_guard, bool):
            problems.append(f"repeat_guard must be True or False (got {self.repeat_guard!r})")
        refuse_problems("invalid RunLimits", problems)


_SECONDS = frozenset({"tool_timeout", "wall_time", "max_conversation_time"})
"""The limits counted in seconds (any positive number); the others count things."""
