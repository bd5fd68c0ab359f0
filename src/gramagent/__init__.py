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
from gramagent.runtime.library import Tool, ToolContext, ToolLibrary, tool
from gramagent.runtime.limits import RunLimits
from gramagent.runtime.loop import AgentResponse, ToolInvocation, run_agent, run_agent_sync
from gramagent.spec.model import Agent, ModelRef, Param, Signature, ToolSpec

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgentResponse",
    "ConfigurationError",
    "Conversation",
    "GramagentError",
    "LimitExceeded",
    "ModelAPIError",
    "ModelRef",
    "Param",
    "RunError",
    "RunLimits",
    "SchemaError",
    "Signature",
    "SpecError",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolError",
    "ToolInvocation",
    "ToolLibrary",
    "ToolSpec",
    "Usage",
    "ValidationError",
    "run_agent",
    "run_agent_sync",
    "tool",
]
