"""Tests of the event types, the argument hash, the sinks and the Prometheus metrics."""

from __future__ import annotations

import os
import socket
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from runtime_support import reference_hash

from gramagent._runtime.events import (
    CaptureSink,
    JSONLSink,
    ToolCallPlanned,
    ToolCallResult,
    ToolMetrics,
    args_preview_hash,
    emit,
    fan_out,
    serve_metrics,
)
from gramagent.errors import ConfigurationError


def test_hash_matches_the_adr_definition() -> None:
    """SHA-256 of the canonical JSON (sorted keys, compact) cut to 200 characters."""
    args = {"b": [1, 2.5, None], "a": "Zoë", "c": {"y": True, "x": "€"}}
    assert args_preview_hash(args) == reference_hash(args)
    assert args_preview_hash({"a": 1, "b": 2}) == args_preview_hash({"b": 2, "a": 1})
    assert len(args_preview_hash(args)) == 64


def test_hash_only_covers_the_first_200_characters() -> None:
    """Arguments differing only after the preview hash alike; a change within it does not."""
    long = "x" * 300
    assert args_preview_hash({"a": long + "1"}) == args_preview_hash({"a": long + "2"})
    assert args_preview_hash({"a": "1" + long}) != args_preview_hash({"a": "2" + long})


def test_hash_of_unparseable_text_uses_the_raw_text() -> None:
    """For a raw string (unparseable arguments) the first 200 characters are hashed."""
    raw = '{"personName": "Al' + "z" * 400
    assert args_preview_hash(raw) == reference_hash(raw)


def planned(seq: int = 1) -> ToolCallPlanned:
    return ToolCallPlanned(request_id="r1", tool="sayHello", args_preview_hash="h" * 64, seq=seq)


def result(status: str = "ok", error_type: str | None = None, tool: str = "sayHello"
           ) -> ToolCallResult:
    return ToolCallResult(request_id="r1", tool=tool, status=status,  # type: ignore[arg-type]
                          latency_ms=12.5, seq=1, error_type=error_type)


def test_events_serialize_with_their_kind() -> None:
    """to_dict carries every field and the discriminating kind."""
    assert planned().to_dict() == {
        "kind": "tool_call_planned", "request_id": "r1", "tool": "sayHello",
        "args_preview_hash": "h" * 64, "seq": 1, "args_schema_version": None,
    }
    data = result("error", "tool_timeout").to_dict()
    assert data["kind"] == "tool_call_result" and data["error_type"] == "tool_timeout"
    assert data["status"] == "error" and data["latency_ms"] == 12.5


def test_jsonl_sink_writes_one_flushed_line_per_event(tmp_path: Path) -> None:
    """Each event is one JSON line, readable before the sink is closed."""
    path = tmp_path / "events.jsonl"
    with JSONLSink(path) as sink:
        sink(planned())
        sink(result())
        lines = path.read_bytes().splitlines()
        assert [orjson.loads(line)["kind"] for line in lines] == [
            "tool_call_planned", "tool_call_result"]
    sink.close()  # idempotent


def test_a_jsonl_sink_on_a_fifo_nobody_reads_is_refused_at_once(tmp_path: Path) -> None:
    """Opening a FIFO for writing waits for a reader: with none, the sink (and so
    ``gramagent run --events FIFO``) would wait for ever. It is refused, naming the file;
    with a reader, the events reach it."""
    fifo = tmp_path / "events"
    os.mkfifo(fifo)
    with pytest.raises(ConfigurationError, match="a FIFO that no process reads"):
        JSONLSink(fifo).open()
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        with JSONLSink(fifo) as sink:
            sink.open()
            sink(planned())
            assert orjson.loads(os.read(reader, 65536))["kind"] == "tool_call_planned"
    finally:
        os.close(reader)


def test_fan_out_and_emit_deliver_to_every_sink() -> None:
    """A single callable, a list of sinks and None are all accepted."""
    first, second = CaptureSink(), CaptureSink()
    assert fan_out(None) == ()
    assert fan_out(first) == (first,)
    sinks = fan_out([first, second.__call__])
    emit(sinks, planned())
    assert first.events == second.events == [planned()]


def test_a_failing_sink_does_not_stop_the_others(caplog: pytest.LogCaptureFixture) -> None:
    """A broken sink is logged; the next sink still gets the event."""

    def broken(event: object) -> None:
        raise RuntimeError("sink down")

    capture = CaptureSink()
    emit((broken, capture), planned())
    assert capture.events == [planned()]
    assert "event sink" in caplog.text


def test_metrics_contract_keys_appear_in_the_exposition() -> None:
    """tool_calls_total{tool,status} and tool_call_latency_ms{tool} are exposed."""
    registry = CollectorRegistry()
    metrics = ToolMetrics(registry)
    metrics(planned())  # planned events do not count
    metrics(result("ok"))
    metrics(result("error", "tool_timeout"))
    metrics(result("error", "invalid_arguments", tool="<unknown>"))
    text = generate_latest(registry).decode()
    assert 'tool_calls_total{status="ok",tool="sayHello"} 1.0' in text
    assert 'tool_calls_total{status="error",tool="sayHello"} 1.0' in text
    assert 'tool_calls_total{status="error",tool="<unknown>"} 1.0' in text
    assert 'tool_call_latency_ms_count{tool="sayHello"} 2.0' in text
    assert 'tool_call_latency_ms_bucket{le="25.0",tool="sayHello"} 2.0' in text
    # a rejected call has no latency measurement: no histogram series for it
    assert 'tool_call_latency_ms_count{tool="<unknown>"}' not in text


def test_metrics_for_registry_returns_one_instance_per_registry() -> None:
    """Registering the metric names twice in one registry would fail; for_registry reuses."""
    registry = CollectorRegistry()
    assert ToolMetrics.for_registry(registry) is ToolMetrics.for_registry(registry)
    assert ToolMetrics.for_registry(CollectorRegistry()) is not ToolMetrics.for_registry(registry)


def test_serve_metrics_serves_the_registry_over_http() -> None:
    """serve_metrics(0) picks a free port and serves the counters."""
    registry = CollectorRegistry()
    metrics = serve_metrics(0, registry=registry)
    metrics(result("ok"))
    assert metrics.server_port
    url = f"http://127.0.0.1:{metrics.server_port}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            body = answer.read().decode()
    finally:
        metrics.stop_serving()
    assert metrics.server_port is None
    assert 'tool_calls_total{status="ok",tool="sayHello"} 1.0' in body


@pytest.fixture(scope="module")
def busy_port() -> Iterator[int]:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        yield busy.getsockname()[1]


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(port=st.integers(max_value=-1) | st.integers(min_value=65536) | st.booleans()
       | st.just("busy") | st.floats() | st.text(max_size=5))
def test_a_port_that_cannot_be_served_is_a_configuration_error(busy_port: int,
                                                               port: object) -> None:
    """Whatever the port, serve_metrics serves or says why in a typed error naming it: never
    an OSError, an OverflowError or a TypeError from the socket layer."""
    port = busy_port if port == "busy" else port
    with pytest.raises(ConfigurationError) as raised:
        serve_metrics(port, registry=CollectorRegistry())  # type: ignore[arg-type]
    message = str(raised.value)
    if port == busy_port:
        assert message.startswith(f"cannot serve metrics on 127.0.0.1:{busy_port}: ")
    else:
        assert message == f"metrics port must be a whole number from 0 to 65535 (got {port!r})"


def test_tag_events_stamps_experiment_and_variant() -> None:
    from gramagent._runtime.events import ToolCallResult, tag_events
    from gramagent.testing import CaptureSink

    sink = CaptureSink()
    tagged = tag_events(sink, experiment="greetings", variant="B")
    event = ToolCallResult(request_id="r", tool="sayHello", status="ok", latency_ms=1.0, seq=1)
    tagged(event)
    (stamped,) = sink.events
    assert (stamped.experiment, stamped.variant) == ("greetings", "B")
    assert stamped.to_dict()["variant"] == "B"
    assert "variant" not in event.to_dict()  # untagged events keep the ADR's JSONL form
