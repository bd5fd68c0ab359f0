"""``--otel``: export the spans of runs (:mod:`gramagent._runtime.tracing`) with the
OpenTelemetry SDK, to the console (stderr) or to an OTLP/HTTP collector."""

from __future__ import annotations

import sys
from collections.abc import Callable

from gramagent._install import needs_extra
from gramagent.errors import ConfigurationError

__all__ = ["EXPORTERS", "setup_tracing"]

EXPORTERS = ("console", "otlp")
_OTLP_HINT = "pip install opentelemetry-exporter-otlp-proto-http"


def setup_tracing(exporter: str) -> Callable[[], None]:
    """Install an SDK tracer provider exporting to ``exporter``; returns its shutdown.

    ``console`` writes each span as JSON to stderr when it ends; ``otlp`` sends them in
    batches to the collector the standard ``OTEL_EXPORTER_OTLP_*`` variables name (default
    ``http://localhost:4318``).

    Raises:
        ConfigurationError: an unknown exporter, or a package it needs is not installed (the
            message names the install command).
    """
    if exporter not in EXPORTERS:
        raise ConfigurationError(
            f"unknown --otel exporter {exporter!r}; expected one of: {', '.join(EXPORTERS)}")
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            ConsoleSpanExporter,
            SimpleSpanProcessor,
        )
    except ImportError as exc:
        raise ConfigurationError(f"{needs_extra('--otel (the OpenTelemetry SDK)', 'otel')} ({exc})"
                                 ) from exc
    processor: SpanProcessor
    if exporter == "console":
        processor = SimpleSpanProcessor(ConsoleSpanExporter(out=sys.stderr))
    else:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError as exc:
            raise ConfigurationError(f"--otel otlp needs the OTLP exporter: {_OTLP_HINT}"
                                     ) from exc
        processor = BatchSpanProcessor(OTLPSpanExporter())
    provider = TracerProvider(resource=Resource.create({"service.name": "gramagent"}))
    provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)
    shutdown: Callable[[], None] = provider.shutdown  # typed where the SDK is not installed too
    return shutdown
