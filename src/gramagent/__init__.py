"""gramagent: LLM agents with late-bound tools, declared in gram notation.

The public names live in private-ish modules (``gramagent._spec``, ``gramagent._runtime``,
...) and are re-exported here. They are imported on first use, so that ``import gramagent``
(and with it every ``import gramagent.<module>``) stays cheap: the CLI, the spec tools and the
error types do not pay for the loop, the event loop machinery or the HTTP client.

Re-exported objects keep their defining module as ``__module__``: every module uses postponed
annotations, which ``typing.get_type_hints`` resolves in the namespace ``__module__`` names, so
pointing it at this package would break type introspection of the dataclasses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gramagent._lazy import lazy_exports

if TYPE_CHECKING:
    from gramagent._messages import (
        AssistantMessage,
        Conversation,
        Message,
        ToolCall,
        ToolResultMessage,
        Usage,
        UserMessage,
    )
    from gramagent._runtime.events import ToolCallPlanned, ToolCallResult
    from gramagent._runtime.library import Tool, ToolContext, ToolLibrary, tool
    from gramagent._runtime.limits import RunLimits
    from gramagent._runtime.loop import AgentResponse, ToolInvocation, run_agent, run_agent_sync
    from gramagent._spec.gram import load_agent, load_file, load_gram, to_gram
    from gramagent._spec.model import Agent, GramDocument, ModelRef, Param, Signature, ToolSpec
    from gramagent._spec.schema import strict_schema
    from gramagent._spec.signature import (
        format_signature,
        parse_signature,
        schema_to_signature,
        signature_to_schema,
    )
    from gramagent.errors import (
        ConfigurationError,
        Diagnostic,
        GramagentError,
        LimitExceeded,
        ModelAPIError,
        RunError,
        SchemaError,
        SpecError,
        ToolError,
        ValidationError,
    )

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgentResponse",
    "AssistantMessage",
    "ConfigurationError",
    "Conversation",
    "Diagnostic",
    "GramDocument",
    "GramagentError",
    "LimitExceeded",
    "Message",
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
    "ToolCallPlanned",
    "ToolCallResult",
    "ToolContext",
    "ToolError",
    "ToolInvocation",
    "ToolLibrary",
    "ToolResultMessage",
    "ToolSpec",
    "Usage",
    "UserMessage",
    "ValidationError",
    "format_signature",
    "load_agent",
    "load_file",
    "load_gram",
    "parse_signature",
    "run_agent",
    "run_agent_sync",
    "schema_to_signature",
    "signature_to_schema",
    "strict_schema",
    "to_gram",
    "tool",
]

_EXPORTS: dict[str, tuple[str, ...]] = {
    "errors": (
        "ConfigurationError", "Diagnostic", "GramagentError", "LimitExceeded", "ModelAPIError",
        "RunError", "SchemaError", "SpecError", "ToolError", "ValidationError",
    ),
    "_messages": (
        "AssistantMessage", "Conversation", "Message", "ToolCall", "ToolResultMessage", "Usage",
        "UserMessage",
    ),
    "_runtime.events": ("ToolCallPlanned", "ToolCallResult"),
    "_runtime.library": ("Tool", "ToolContext", "ToolLibrary", "tool"),
    "_runtime.limits": ("RunLimits",),
    "_runtime.loop": ("AgentResponse", "ToolInvocation", "run_agent", "run_agent_sync"),
    "_spec.gram": ("load_agent", "load_file", "load_gram", "to_gram"),
    "_spec.model": ("Agent", "GramDocument", "ModelRef", "Param", "Signature", "ToolSpec"),
    "_spec.schema": ("strict_schema",),
    "_spec.signature": (
        "format_signature", "parse_signature", "schema_to_signature", "signature_to_schema",
    ),
}
_HOME = {name: module for module, names in _EXPORTS.items() for name in names}
"""Public name -> the submodule (below ``gramagent``) that defines it."""

__getattr__, __dir__ = lazy_exports(globals(), _HOME)
