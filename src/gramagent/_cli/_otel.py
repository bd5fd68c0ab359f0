"""``--otel``: export the spans of runs (:mod:`gramagent._runtime.tracing`) with the
OpenTelemetry SDK, to the console (stderr) or to an OTLP/HTTP collector."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, cast

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter

from gramagent._install import needs_extra
from gramagent.errors import ConfigurationError

__all__ = ["EXPORTERS", "setup_tracing"]

EXPORTERS = ("console", "otlp")
_OTLP_HINT = "pip install opentelemetry-exporter-otlp-proto-http"
OTLP_TIMEOUT: Final = 2.0
"""Seconds for one batch of spans, retries included, unless OTEL_EXPORTER_OTLP_TIMEOUT says."""


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
        from gramagent._cli._terminal import TerminalStream

        # spans quote tool arguments and errors: shown, never obeyed
        processor = SimpleSpanProcessor(ConsoleSpanExporter(
            out=TerminalStream(sys.stderr)))  # type: ignore[arg-type]
    else:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError as exc:
            raise ConfigurationError(f"--otel otlp needs the OTLP exporter: {_OTLP_HINT}"
                                     ) from exc
        exporter_ = _Reported(OTLPSpanExporter(timeout=_otlp_timeout()))
        # _Reported has the three methods the processor calls
        processor = BatchSpanProcessor(cast("SpanExporter", exporter_))
    provider = TracerProvider(resource=Resource.create({"service.name": "gramagent"}))
    provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)
    if exporter == "console":
        shutdown: Callable[[], None] = provider.shutdown  # typed where the SDK is missing too
        return shutdown

    def shutdown_and_report() -> None:
        provider.shutdown()
        exporter_.report()

    return shutdown_and_report


def _otlp_timeout() -> float:
    """Seconds the OTLP exporter may spend on one batch, retries included: the standard
    variables where set, else a bound short enough that a missing collector does not hold
    the command's exit."""
    for name in ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"):
        value = os.environ.get(name)
        if value:
            try:
                return float(value)
            except ValueError:
                break
    return OTLP_TIMEOUT


class _Reported:
    """The OTLP exporter, counting the spans it could not send, with its own log records
    (a record per retry) silenced: :meth:`report` says it in one line at the end."""

    def __init__(self, inner: Any) -> None:
        import logging

        self.inner = inner
        self.lost = 0
        self.endpoint = getattr(inner, "_endpoint", None) or "the OTLP collector"
        quiet = logging.getLogger("opentelemetry.exporter.otlp")
        quiet.addHandler(logging.NullHandler())
        quiet.propagate = False

    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        result = self.inner.export(spans)
        if result is not SpanExportResult.SUCCESS:
            self.lost += len(spans)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        flushed: bool = self.inner.force_flush(timeout_millis)
        return flushed

    def report(self) -> None:
        if self.lost:
            sys.stderr.write(f"--otel otlp: {self.lost} spans not exported: no answer from "
                             f"{self.endpoint} (OTEL_EXPORTER_OTLP_ENDPOINT names the "
                             "collector)\n")
