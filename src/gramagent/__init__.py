"""gramagent: LLM agents with late-bound tools, declared in gram notation.

Everything a user needs is importable from here: specs and their notation (``load_agent``,
``ToolSpec``, ``parse_signature``, ...), binding (``tool``, ``ToolLibrary``, ``BoundAgent``),
running (``run_agent``, ``RunLimits``, ``resolve_model``), events and metrics (``CaptureSink``,
``JSONLSink``, ``ToolMetrics``), the model seam for custom adapters (``Model``, ``ModelRequest``,
``ModelTurn``, ``register_wire_format``), the built-in tools (``builtin_library``) and the
errors. The other public modules are :mod:`gramagent.errors`, :mod:`gramagent.testing` (the
scripted OpenAI-compatible server and test helpers), :mod:`gramagent.tools` (built-in tools)
and :mod:`gramagent.tools.sandbox`; modules whose name starts with ``_`` are private.

Names are imported on first use, so that ``import gramagent`` (and with it every ``import
gramagent.<module>``) loads only what is used: the CLI, the spec tools and the error types do
not load the loop, the event loop machinery or the HTTP client.

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
    from gramagent._models.base import (
        Model,
        ModelRequest,
        ModelTurn,
        NamedToolChoice,
        StreamingModel,
        ToolChoice,
    )
    from gramagent._models.registry import WireFormat, register_wire_format, resolve_model
    from gramagent._runtime.approval import ApprovalRequest, Approver, Decision, Refused
    from gramagent._runtime.events import (
        CaptureSink,
        EventSink,
        JSONLSink,
        ToolCallPlanned,
        ToolCallResult,
        ToolMetrics,
        args_preview_hash,
        serve_metrics,
    )
    from gramagent._runtime.hooks import RunHooks
    from gramagent._runtime.library import BoundAgent, Tool, ToolContext, ToolLibrary, tool
    from gramagent._runtime.limits import INHERIT, RunLimits
    from gramagent._runtime.loop import RunAgentOptions, resume_agent, run_agent, run_agent_sync
    from gramagent._runtime.results import AgentResponse, ToolInvocation
    from gramagent._runtime.sessions import SessionInfo, SessionStore, StoredSession
    from gramagent._runtime.stream import (
        AgentStream,
        FinalResponse,
        StreamEvent,
        TextDelta,
        ToolCallAnswered,
        ToolCallRequested,
        resume_agent_stream,
        run_agent_stream,
    )
    from gramagent._spec.data import Param
    from gramagent._spec.definition import ToolDefinition
    from gramagent._spec.gram.text import load_agent, load_file, load_gram, to_gram
    from gramagent._spec.model import Agent, GramDocument, ModelRef, ToolSpec
    from gramagent._spec.schema.strict import strict_schema
    from gramagent._spec.signature import (
        Signature,
        format_signature,
        parse_signature,
        schema_to_signature,
        signature_to_schema,
    )
    from gramagent.errors import (
        ApprovalError,
        AuthenticationError,
        ConfigurationError,
        Diagnostic,
        GramagentError,
        LimitExceeded,
        MCPServerError,
        ModelAPIError,
        RunError,
        SandboxError,
        SchemaError,
        SpecError,
        ToolError,
        ValidationError,
    )
    from gramagent.tools import builtin_library

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgentResponse",
    "AgentStream",
    "ApprovalError",
    "ApprovalRequest",
    "Approver",
    "AssistantMessage",
    "AuthenticationError",
    "BoundAgent",
    "CaptureSink",
    "ConfigurationError",
    "Conversation",
    "Decision",
    "Diagnostic",
    "EventSink",
    "FinalResponse",
    "GramDocument",
    "GramagentError",
    "INHERIT",
    "JSONLSink",
    "LimitExceeded",
    "MCPServerError",
    "Message",
    "Model",
    "ModelAPIError",
    "ModelRef",
    "ModelRequest",
    "ModelTurn",
    "NamedToolChoice",
    "Param",
    "Refused",
    "RunAgentOptions",
    "RunError",
    "RunHooks",
    "RunLimits",
    "SandboxError",
    "SchemaError",
    "SessionInfo",
    "SessionStore",
    "Signature",
    "SpecError",
    "StoredSession",
    "StreamEvent",
    "StreamingModel",
    "TextDelta",
    "Tool",
    "ToolCall",
    "ToolCallAnswered",
    "ToolCallPlanned",
    "ToolCallRequested",
    "ToolCallResult",
    "ToolChoice",
    "ToolContext",
    "ToolDefinition",
    "ToolError",
    "ToolInvocation",
    "ToolLibrary",
    "ToolMetrics",
    "ToolResultMessage",
    "ToolSpec",
    "Usage",
    "UserMessage",
    "ValidationError",
    "WireFormat",
    "args_preview_hash",
    "builtin_library",
    "format_signature",
    "load_agent",
    "load_file",
    "load_gram",
    "parse_signature",
    "register_wire_format",
    "resolve_model",
    "resume_agent",
    "resume_agent_stream",
    "run_agent",
    "run_agent_stream",
    "run_agent_sync",
    "schema_to_signature",
    "serve_metrics",
    "signature_to_schema",
    "strict_schema",
    "to_gram",
    "tool",
]

_EXPORTS: dict[str, tuple[str, ...]] = {
    "errors": (
        "ApprovalError", "AuthenticationError", "ConfigurationError", "Diagnostic",
        "GramagentError", "LimitExceeded", "MCPServerError", "ModelAPIError", "RunError",
        "SandboxError", "SchemaError", "SpecError", "ToolError", "ValidationError",
    ),
    "_messages": (
        "AssistantMessage", "Conversation", "Message", "ToolCall", "ToolResultMessage", "Usage",
        "UserMessage",
    ),
    "_spec.data": ("Param",),
    "_spec.definition": ("ToolDefinition",),
    "_spec.gram.text": ("load_agent", "load_file", "load_gram", "to_gram",),
    "_spec.model": ("Agent", "GramDocument", "ModelRef", "ToolSpec",),
    "_spec.signature": (
        "Signature", "format_signature", "parse_signature", "schema_to_signature",
        "signature_to_schema",
    ),
    "_spec.schema.strict": ("strict_schema",),
    "_models.base": (
        "Model", "ModelRequest", "ModelTurn", "NamedToolChoice", "StreamingModel", "ToolChoice",
    ),
    "_models.registry": ("WireFormat", "register_wire_format", "resolve_model",),
    "_runtime.events": (
        "CaptureSink", "EventSink", "JSONLSink", "ToolCallPlanned", "ToolCallResult",
        "ToolMetrics", "args_preview_hash", "serve_metrics",
    ),
    "_runtime.approval": ("ApprovalRequest", "Approver", "Decision", "Refused",),
    "_runtime.hooks": ("RunHooks",),
    "_runtime.library": ("BoundAgent", "Tool", "ToolContext", "ToolLibrary", "tool",),
    "_runtime.limits": ("INHERIT", "RunLimits",),
    "_runtime.loop": ("RunAgentOptions", "resume_agent", "run_agent", "run_agent_sync",),
    "_runtime.results": ("AgentResponse", "ToolInvocation",),
    "_runtime.sessions": ("SessionInfo", "SessionStore", "StoredSession",),
    "_runtime.stream": (
        "AgentStream", "FinalResponse", "StreamEvent", "TextDelta", "ToolCallAnswered",
        "ToolCallRequested", "resume_agent_stream", "run_agent_stream",
    ),
    "tools": ("builtin_library",),
}
_HOME = {name: module for module, names in _EXPORTS.items() for name in names}
"""Public name -> the submodule (below ``gramagent``) that defines it."""

__getattr__, __dir__ = lazy_exports(globals(), _HOME)
