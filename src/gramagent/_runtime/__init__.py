"""Execution: tool binding, the agent loop, limits, events.

The public names are re-exported here and imported on first use, so that light submodules
(``runtime.calls``, used by the Harmony parser) do not pull in the whole loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gramagent._lazy import lazy_exports

if TYPE_CHECKING:
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
    from gramagent._runtime.library import BoundAgent, Tool, ToolContext, ToolLibrary, tool
    from gramagent._runtime.limits import INHERIT, RunLimits
    from gramagent._runtime.loop import AgentResponse, ToolInvocation, run_agent, run_agent_sync

__all__ = [
    "AgentResponse",
    "BoundAgent",
    "CaptureSink",
    "EventSink",
    "INHERIT",
    "JSONLSink",
    "RunLimits",
    "Tool",
    "ToolCallPlanned",
    "ToolCallResult",
    "ToolContext",
    "ToolInvocation",
    "ToolLibrary",
    "ToolMetrics",
    "args_preview_hash",
    "run_agent",
    "run_agent_sync",
    "serve_metrics",
    "tool",
]

_HOME = {
    "INHERIT": "limits", "RunLimits": "limits",
    "AgentResponse": "loop", "ToolInvocation": "loop", "run_agent": "loop",
    "run_agent_sync": "loop",
    "BoundAgent": "library", "Tool": "library", "ToolContext": "library",
    "ToolLibrary": "library", "tool": "library",
    "CaptureSink": "events", "EventSink": "events", "JSONLSink": "events",
    "ToolCallPlanned": "events", "ToolCallResult": "events", "ToolMetrics": "events",
    "args_preview_hash": "events", "serve_metrics": "events",
}

__getattr__, __dir__ = lazy_exports(globals(), _HOME)
