"""What a model is told about one tool: its name, description and argument schemas."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ToolDefinition"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolDefinition:
    """What a model is told about one tool. Built once, at bind time."""

    name: str
    description: str
    parameters: dict[str, Any]
    """JSON Schema of the arguments object (the original, used for local validation)."""
    strict_parameters: dict[str, Any] | None = None
    """The same schema compiled for OpenAI ``strict: true`` (see ``gramagent.strict_schema``);
    adapters that send strict tools use it, None where it was not compiled."""
