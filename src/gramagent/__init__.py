"""gramagent: LLM agents with late-bound tools, declared in gram notation."""

from gramagent.errors import (
    ConfigurationError,
    GramagentError,
    LimitExceeded,
    ModelAPIError,
    RunError,
    SchemaError,
    SpecError,
    ToolError,
    ValidationError,
)
from gramagent.messages import Conversation, ToolCall, Usage
from gramagent.spec.model import Agent, ModelRef, Param, Signature, ToolSpec

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "ConfigurationError",
    "Conversation",
    "GramagentError",
    "LimitExceeded",
    "ModelAPIError",
    "ModelRef",
    "Param",
    "RunError",
    "SchemaError",
    "Signature",
    "SpecError",
    "ToolCall",
    "ToolError",
    "ToolSpec",
    "Usage",
    "ValidationError",
]
