"""OpenTelemetry spans of a run, after the GenAI semantic conventions.

=====================================  ========  ===========================================
span                                   kind      attributes
=====================================  ========  ===========================================
``invoke_agent {agent}`` (the run)     INTERNAL  ``gen_ai.operation.name``, ``gen_ai.agent.name``,
                                                 ``gen_ai.provider.name``,
                                                 ``gen_ai.request.model``,
                                                 ``gen_ai.conversation.id``, the run's
                                                 ``gen_ai.usage.input_tokens`` /
                                                 ``output_tokens``
``chat {model}`` (each model request)  CLIENT    ``gen_ai.operation.name``,
                                                 ``gen_ai.provider.name``,
                                                 ``gen_ai.request.model``, ``gen_ai.usage.*``,
                                                 ``gen_ai.response.finish_reasons``
``execute_tool {tool}`` (each call)    INTERNAL  ``gen_ai.operation.name``, ``gen_ai.tool.name``,
                                                 ``gen_ai.tool.call.id``, ``gen_ai.tool.type``
=====================================  ========  ===========================================

The model and tool spans are children of the run's. A failure sets the span's status to ERROR
and ``error.type`` (an exception's class name, or the loop's error type of a tool call such as
``invalid_arguments`` or ``tool_timeout``). Like the events, spans never carry arguments,
results, messages or exception texts (which may quote them), and never a key.

Tracing is on only when the ``opentelemetry-api`` package is imported and a tracer provider is
configured (``opentelemetry.trace.set_tracer_provider``, or ``gramagent run --otel``):
:func:`run_tracer` looks for the module in ``sys.modules`` and never imports it, so a run
without tracing does one dictionary lookup.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol

__all__ = [
    "SCOPE",
    "TRACE_MODULE",
    "Span",
    "Tracer",
    "agent_span",
    "fail",
    "model_span",
    "record_turn",
    "record_usage",
    "rejected_tool_span",
    "run_tracer",
    "tool_span",
]

SCOPE = "gramagent"
"""The instrumentation scope name of gramagent's tracer."""

TRACE_MODULE = "opentelemetry.trace"
"""The module whose presence in ``sys.modules`` :func:`run_tracer` looks for first."""

AttributeValue = str | bool | int | float | tuple[str, ...]
"""The values of the span attributes set here."""


class Span(Protocol):
    """What the spans of a run are asked to do (an OpenTelemetry span does it)."""

    def set_attribute(self, key: str, value: AttributeValue, /) -> object:
        """Set one attribute."""

    def set_status(self, status: object, /) -> object:
        """Set the span's status (an OpenTelemetry ``Status``)."""


class Tracer(Protocol):
    """The one method of an OpenTelemetry tracer a run calls."""

    def start_as_current_span(
        self, name: str, *, kind: object, attributes: Mapping[str, AttributeValue],
        record_exception: bool, set_status_on_exception: bool,
    ) -> AbstractContextManager[Span]:
        """A span that is the current one inside its ``with`` block."""


_tracers: dict[int, tuple[object, Tracer]] = {}
"""id(provider) -> (provider, tracer): one tracer per configured provider."""


def run_tracer() -> Tracer | None:
    """The tracer for a run, or None when tracing is off (see the module docs)."""
    trace = sys.modules.get(TRACE_MODULE)
    if trace is None:
        return None
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    cached = _tracers.get(id(provider))
    if cached is not None and cached[0] is provider:
        return cached[1]
    tracer: Tracer = provider.get_tracer(SCOPE)
    _tracers[id(provider)] = (provider, tracer)
    return tracer


@contextmanager
def _span(tracer: Tracer, name: str, kind: str, attributes: Mapping[str, AttributeValue]
          ) -> Iterator[Span]:
    trace = sys.modules[TRACE_MODULE]
    with tracer.start_as_current_span(
        name, kind=getattr(trace.SpanKind, kind), attributes=attributes,
        record_exception=False, set_status_on_exception=False,  # texts may quote arguments
    ) as span:
        try:
            yield span
        except BaseException as exc:
            fail(span, "cancelled" if isinstance(exc, asyncio.CancelledError)
                 else type(exc).__name__)
            raise


def fail(span: Span, error_type: str) -> None:
    """Mark ``span`` failed: ``error.type`` and an ERROR status naming only the type."""
    trace = sys.modules[TRACE_MODULE]
    span.set_attribute("error.type", error_type)
    span.set_status(trace.Status(trace.StatusCode.ERROR, error_type))


def agent_span(tracer: Tracer, *, agent: str, model: str, provider: str,
               conversation_id: str) -> AbstractContextManager[Span]:
    """The span of one run (a context manager yielding the span)."""
    return _span(tracer, f"invoke_agent {agent}", "INTERNAL", {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": agent,
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": model,
        "gen_ai.conversation.id": conversation_id,
    })


def model_span(tracer: Tracer, *, model: str, provider: str) -> AbstractContextManager[Span]:
    """The span of one model request (a context manager yielding the span)."""
    return _span(tracer, f"chat {model}", "CLIENT", {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": model,
    })


def tool_span(tracer: Tracer, *, tool: str, call_id: str) -> AbstractContextManager[Span]:
    """The span of one tool call (a context manager yielding the span)."""
    return _span(tracer, f"execute_tool {tool}", "INTERNAL", _tool_attributes(tool, call_id))


def rejected_tool_span(tracer: Tracer, *, tool: str, call_id: str, error_type: str) -> None:
    """The span of a call that was not run (rejected by the loop's checks): failed at once."""
    with _span(tracer, f"execute_tool {tool}", "INTERNAL",
               _tool_attributes(tool, call_id)) as span:
        fail(span, error_type)


def _tool_attributes(tool: str, call_id: str) -> dict[str, str]:
    return {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
            "gen_ai.tool.call.id": call_id, "gen_ai.tool.type": "function"}


def record_turn(span: Span, input_tokens: int, output_tokens: int,
                finish_reason: str | None) -> None:
    """A model request's usage and finish reason."""
    record_usage(span, input_tokens, output_tokens)
    if finish_reason:
        span.set_attribute("gen_ai.response.finish_reasons", (finish_reason,))


def record_usage(span: Span, input_tokens: int, output_tokens: int) -> None:
    """Token usage (of a request, or summed over a run)."""
    span.set_attribute("gen_ai.usage.input_tokens", input_tokens)
    span.set_attribute("gen_ai.usage.output_tokens", output_tokens)
