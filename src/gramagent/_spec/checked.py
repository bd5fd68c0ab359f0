"""The two ends of checking a tool call: :class:`PreparedCall` and :class:`CallRejection`.

Apart from :mod:`gramagent._spec.calls`, which checks the calls, so that it can be compiled
(``gramagent._compiled``): these frozen classes stay interpreted, as the builder of
:class:`PreparedCall` (:func:`gramagent._frozen.builds`) needs its class so. Import them from
:mod:`gramagent._spec.calls`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

from gramagent._frozen import builds

__all__ = ["TOOL_ERROR_TYPES", "CallRejection", "PreparedCall", "ToolErrorType", "new_prepared"]

ToolErrorType: TypeAlias = Literal[
    "tool_payload_too_large",
    "tool_payload_parse_error",
    "unknown_tool",
    "invalid_arguments",
    "tool_exception",
    "tool_timeout",
    "repeated_call",
    "approval_refused",
    "interrupted",
]
"""Why a tool call produced an error result (results, events and the Harmony parser alike).
``interrupted``: the run ended (cancelled, a closed stream, a failing approve callback) before
the call finished; only in events (the run's result is its exception)."""

TOOL_ERROR_TYPES: Final[frozenset[str]] = frozenset(ToolErrorType.__args__)  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True)
class CallRejection:
    """A call that cannot run, with one message for the model and one for events."""

    error_type: ToolErrorType
    message: str
    """The text sent back to the model: what was wrong and what was expected."""
    event_message: str
    """A short description that never contains argument values (for events and metrics)."""


@dataclass(frozen=True, slots=True)
class PreparedCall:
    """A call that passed every check: a known tool and schema-valid arguments."""

    name: str
    arguments: dict[str, Any]


@builds(PreparedCall)
def new_prepared(name: str, arguments: dict[str, Any]) -> PreparedCall:
    """A :class:`PreparedCall` (every checked call makes one), built the cheap way."""
    return PreparedCall(name, arguments)
