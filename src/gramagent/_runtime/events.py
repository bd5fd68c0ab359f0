"""Tool-call events, event sinks and Prometheus metrics.

The contract (ADR "Tool Calling MVP Scope", seed 002):

- :class:`ToolCallPlanned` is emitted when a call has been parsed from a model turn, before
  anything runs; :class:`ToolCallResult` after the call was executed or rejected. For each
  ``seq`` the planned event precedes the result, and neither is emitted twice. Every planned
  call gets its result: one the run did not finish (cancelled, a closed stream, an approve
  callback that failed) is an ``interrupted`` error when the run ends; only a call waiting for
  approval in a paused run has none yet (it comes when the run is resumed).
- Events never carry raw arguments: only :func:`args_preview_hash`. The ``message`` of an error
  result names what went wrong without echoing argument values.
- ``tool`` is the name of a tool the agent declares, or ``"<unknown>"``: label sets stay bounded,
  so :class:`ToolMetrics` can use event fields as Prometheus labels directly.

A sink is any callable taking one event (:class:`EventSink`). :class:`ToolMetrics` is a sink too:
pass it in ``run_agent(events=[...])`` to count calls. With no sinks the loop builds no event
objects at all.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import threading
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal, Protocol, TypeAlias, TypeVar

import orjson

from gramagent.errors import ConfigurationError

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

__all__ = [
    "LATENCY_BUCKETS_MS",
    "UNKNOWN_TOOL_LABEL",
    "CaptureSink",
    "Event",
    "EventSink",
    "JSONLSink",
    "ToolCallPlanned",
    "ToolCallResult",
    "ToolMetrics",
    "args_preview_hash",
    "canonical_json",
    "emit",
    "fan_out",
    "serve_metrics",
    "tag_events",
]

logger = logging.getLogger(__name__)

UNKNOWN_TOOL_LABEL = "<unknown>"
"""The ``tool`` of events (and metric label) for a name the agent does not declare."""

PREVIEW_CHARS = 200
"""How much of the canonical argument JSON is hashed (ADR: first 200 characters)."""

LATENCY_BUCKETS_MS: tuple[float, ...] = (
    1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000,
)
"""Histogram buckets of ``tool_call_latency_ms``, in milliseconds."""


def args_preview_hash(arguments: object) -> str:
    """The privacy-preserving fingerprint of a call's arguments (SHA-256, hex).

    Parsed arguments are encoded as canonical JSON (sorted keys, compact separators, non-ASCII
    kept as is); the first 200 characters of that text are hashed. Identical calls hash alike,
    and nothing beyond a hash of a bounded preview is kept. Pass a ``str`` for arguments that
    could not be parsed: the raw text's first 200 characters are hashed.

    Args:
        arguments: the parsed arguments (any JSON value), or the raw text when unparseable.

    Returns:
        64 lowercase hex digits.
    """
    text = arguments if isinstance(arguments, str) else canonical_json(arguments)
    # "surrogatepass": raw text may hold lone surrogates (then refused as arguments).
    return hashlib.sha256(text[:PREVIEW_CHARS].encode("utf-8", "surrogatepass")).hexdigest()


def canonical_json(value: object) -> str:
    """Canonical JSON text: sorted keys, compact separators, non-ASCII characters unescaped.

    This is exactly ``json.dumps(value, sort_keys=True, separators=(",", ":"),
    ensure_ascii=False)``, the reference form of the ADR, so other producers of
    ``args_preview_hash`` (the Harmony parser, other languages) agree with it.
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallPlanned:
    """A tool call was parsed from a model turn and is about to be checked and run."""

    request_id: str
    """The run the call belongs to (``AgentResponse.run_id``)."""
    tool: str
    """The tool name, or ``"<unknown>"`` when the agent declares no such tool."""
    args_preview_hash: str
    """:func:`args_preview_hash` of the arguments; never the arguments themselves."""
    seq: int
    """Order of the call within the run, from 1."""
    args_schema_version: str | None = None
    """Optional version tag of the argument schema."""
    experiment: str | None = None
    """The experiment the run belongs to (set by :func:`tag_events`), else None."""
    variant: str | None = None
    """The experiment's variant (arm) the run belongs to, else None."""
    kind: Literal["tool_call_planned"] = "tool_call_planned"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (the JSONL form; ``experiment``/``variant`` only when set)."""
        out: dict[str, Any] = {
            "kind": self.kind,
            "request_id": self.request_id,
            "tool": self.tool,
            "args_preview_hash": self.args_preview_hash,
            "seq": self.seq,
            "args_schema_version": self.args_schema_version,
        }
        if self.experiment is not None or self.variant is not None:
            out["experiment"], out["variant"] = self.experiment, self.variant
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallResult:
    """A tool call finished: it ran (``ok``), or it was rejected or failed (``error``)."""

    request_id: str
    """The run the call belongs to."""
    tool: str
    """The tool name, or ``"<unknown>"``."""
    status: Literal["ok", "error"]
    latency_ms: float
    """Milliseconds from the planned event to the result."""
    seq: int
    """Same ``seq`` as the call's :class:`ToolCallPlanned`."""
    error_type: str | None = None
    """One of the tool-call error types (``tool_payload_too_large``, ...), None when ok."""
    message: str | None = None
    """A short description of the error that never echoes argument values."""
    experiment: str | None = None
    """The experiment the run belongs to (set by :func:`tag_events`), else None."""
    variant: str | None = None
    """The experiment's variant (arm) the run belongs to, else None."""
    kind: Literal["tool_call_result"] = "tool_call_result"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (the JSONL form; ``experiment``/``variant`` only when set)."""
        out: dict[str, Any] = {
            "kind": self.kind,
            "request_id": self.request_id,
            "tool": self.tool,
            "status": self.status,
            "latency_ms": self.latency_ms,
            "seq": self.seq,
            "error_type": self.error_type,
            "message": self.message,
        }
        if self.experiment is not None or self.variant is not None:
            out["experiment"], out["variant"] = self.experiment, self.variant
        return out


Event: TypeAlias = ToolCallPlanned | ToolCallResult


class EventSink(Protocol):
    """Anything that takes events: a function, a :class:`JSONLSink`, :class:`ToolMetrics`."""

    def __call__(self, event: Event, /) -> None: ...


class CaptureSink:
    """Keeps every event in memory, in order. For tests and notebooks.

    Example:
        >>> sink = CaptureSink()
        >>> # await run_agent(agent, "hi", library=lib, events=sink)
        >>> sink.events
        []
    """

    def __init__(self) -> None:
        self.events: list[Event] = []

    def __call__(self, event: Event, /) -> None:
        self.events.append(event)

    def of_kind(self, kind: str) -> list[Event]:
        """The captured events whose ``kind`` is ``kind``."""
        return [e for e in self.events if e.kind == kind]

    def clear(self) -> None:
        self.events.clear()


class JSONLSink:
    """Appends each event to a file as one JSON line, flushed at once.

    The file is opened (in append mode) on the first event, or by :meth:`open`. It may be a
    FIFO that another process reads: one that no process reads is refused at once rather
    than waited for. Usable as a context manager; :meth:`close` is idempotent.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._file: IO[bytes] | None = None
        self._lock = threading.Lock()

    def open(self) -> None:
        """Open the file now (a run's first event would), so that a file that cannot be
        written is known before any run.

        Raises:
            ConfigurationError: the file cannot be opened for appending, or is a FIFO that
                no process reads.
        """
        with self._lock:
            self._open()

    def _open(self) -> IO[bytes]:
        if self._file is None:
            fd = -1
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK,
                             0o666)
                os.set_blocking(fd, True)
                self._file = os.fdopen(fd, "ab")
            except OSError as exc:
                if fd >= 0:
                    with contextlib.suppress(OSError):  # fdopen may have closed it
                        os.close(fd)
                why = "a FIFO that no process reads" if exc.errno == errno.ENXIO \
                    else exc.strerror
                raise ConfigurationError(f"{self.path}: cannot append events to it ({why})") \
                    from None
        return self._file

    def __call__(self, event: Event, /) -> None:
        line = orjson.dumps(event.to_dict()) + b"\n"
        with self._lock:
            file = self._open()
            file.write(line)
            file.flush()

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def __enter__(self) -> JSONLSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_metrics_by_registry: weakref.WeakKeyDictionary[object, ToolMetrics] = weakref.WeakKeyDictionary()
_metrics_lock = threading.Lock()

_M = TypeVar("_M")


def per_registry(factory: Callable[[CollectorRegistry], _M], registry: CollectorRegistry | None,
                 made: weakref.WeakKeyDictionary[object, _M]) -> _M:
    """The metrics ``factory`` made for ``registry`` (default: the global one), made on first
    use and kept in ``made``: a registry refuses a second family of the same name."""
    from prometheus_client import REGISTRY

    key = REGISTRY if registry is None else registry
    with _metrics_lock:
        metrics = made.get(key)
        if metrics is None:
            metrics = made[key] = factory(key)
        return metrics


class ToolMetrics:
    """Prometheus metrics of tool calls, fed by :class:`ToolCallResult` events.

    ``tool_calls_total{tool,status}`` counts every result; ``tool_call_latency_ms{tool}``
    observes the latency of calls that ran (ok, exceptions and timeouts), not of calls rejected
    before running. Labels come from event fields, which are bounded by construction.

    Prometheus refuses to register a metric name twice in one registry, so build instances with
    :meth:`for_registry`, which returns the one instance of a registry.
    """

    server_port: int | None = None
    """The port :func:`serve_metrics` serves on, when it does."""

    def __init__(self, registry: CollectorRegistry | None = None,
                 *, buckets: Sequence[float] = LATENCY_BUCKETS_MS) -> None:
        from prometheus_client import REGISTRY, Counter, Histogram

        self.registry = REGISTRY if registry is None else registry
        self.calls = Counter(
            "tool_calls_total", "Tool calls by tool and status.", ["tool", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "tool_call_latency_ms", "Latency of executed tool calls, in milliseconds.",
            ["tool"], buckets=tuple(buckets), registry=self.registry,
        )

    _server: Any = None

    def stop_serving(self) -> None:
        """Stop the HTTP server :func:`serve_metrics` started (if any)."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
            self.server_port = None

    @classmethod
    def for_registry(cls, registry: CollectorRegistry | None = None) -> ToolMetrics:
        """The metrics of ``registry`` (default: the global one), created on first use."""
        return per_registry(cls, registry, _metrics_by_registry)

    def __call__(self, event: Event, /) -> None:
        if event.kind != "tool_call_result":
            return
        self.calls.labels(tool=event.tool, status=event.status).inc()
        if event.status == "ok" or event.error_type in _EXECUTED_ERRORS:
            self.latency.labels(tool=event.tool).observe(event.latency_ms)


_EXECUTED_ERRORS = frozenset({"tool_exception", "tool_timeout"})
"""Error types of calls that ran, so their latency is a real measurement."""


def serve_metrics(port: int, *, addr: str = "127.0.0.1",
                  registry: CollectorRegistry | None = None) -> ToolMetrics:
    """Serve ``registry``'s metrics over HTTP on ``addr:port`` (a daemon thread).

    Returns the :class:`ToolMetrics` sink of that registry: pass it to ``run_agent(events=...)``.
    Port 0 picks a free port; the bound port is in ``metrics.server_port``.

    Raises:
        ConfigurationError: ``port`` is not a port number (0 to 65535), or it cannot be bound
            on ``addr`` (in use, not allowed); the message names both and the cause.
    """
    from prometheus_client import REGISTRY, start_http_server

    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ConfigurationError(f"metrics port must be a whole number from 0 to 65535 (got "
                                 f"{port!r})")
    metrics = ToolMetrics.for_registry(registry)
    try:
        server, _thread = start_http_server(port, addr=addr,
                                            registry=REGISTRY if registry is None else registry)
    except OSError as exc:
        raise ConfigurationError(f"cannot serve metrics on {addr}:{port}: "
                                 f"{exc.strerror or exc}") from None
    metrics.server_port = server.server_port
    metrics._server = server
    return metrics


class tag_events:  # noqa: N801 - used like a function
    """A sink that stamps each event with an experiment and variant, then passes it on.

    Example:
        >>> sink = CaptureSink()
        >>> tagged = tag_events(sink, experiment="greetings", variant="B")
        >>> # await run_agent(agent, "hi", library=lib_b, events=tagged)
    """

    __slots__ = ("_sinks", "experiment", "variant")

    def __init__(self, sinks: EventSink | Iterable[EventSink], *, experiment: str,
                 variant: str) -> None:
        self._sinks = fan_out(sinks)
        self.experiment = experiment
        self.variant = variant

    def __call__(self, event: Event, /) -> None:
        emit(self._sinks, replace(event, experiment=self.experiment, variant=self.variant))


def fan_out(sinks: EventSink | Iterable[EventSink] | None) -> tuple[EventSink, ...]:
    """Normalize the ``events`` option of a run into a tuple of sinks (empty when disabled)."""
    if sinks is None:
        return ()
    if callable(sinks):
        return (sinks,)
    return tuple(sinks)


def emit(sinks: tuple[EventSink, ...], event: Event) -> None:
    """Deliver ``event`` to every sink; a failing sink is logged and never stops a run."""
    for sink in sinks:
        try:
            sink(event)
        except Exception:
            logger.exception("event sink %r failed on %s", sink, event.kind)
