"""The ADR's testing strategy for the Harmony stub path (issue 12, item 20).

The model writes the ADR's stub marker, ``<|start|>assistant<|channel|>tool<|message|>
{"tool":"NAME","arguments":{...}}<|end|>``, over the Harmony wire format (``/v1/completions``
of the scripted server, real HTTP); the run uses the dry-run executor (every valid call
answers ``{"ok": true}``, no tool runs). For each path (ok, payload too large, malformed JSON)
the events and the Prometheus metrics are compared with a snapshot
(``tests/fixtures/snapshots/harmony_stub.json``): the event sequence (Planned before Result,
no duplicates, argument hashes only) and the counter and histogram samples of
``tool_calls_total{tool,status}`` and ``tool_call_latency_ms{tool}``. Latencies and run ids
differ from run to run and are checked, then left out of the snapshot.

To regenerate after an intended change: ``GRAMAGENT_UPDATE_SNAPSHOTS=1 pytest THIS_FILE``,
then read the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from gramagent import CaptureSink, ToolMetrics, load_agent, resolve_model, run_agent
from gramagent.testing import ScriptedServer, completion

SNAPSHOT = Path(__file__).resolve().parents[1] / "fixtures" / "snapshots" / "harmony_stub.json"

AGENT = """
[stub_agent:Agent {instruction: "Greet with sayHello.", model: "openai/gpt-oss-20b"} |
  [sayHello:Tool {description: "Returns a friendly greeting message for the given name"} |
    (personName::String {default: "world"})==>(::String)]
]
"""

STUB = "<|start|>assistant<|channel|>tool<|message|>{payload}<|end|>"
PAYLOADS = {
    "ok": '{"tool":"sayHello","arguments":{"personName":"Alice"}}',
    "too_large": '{"tool":"sayHello","arguments":{"personName":"' + "A" * 9000 + '"}}',
    "parse_error": '{"tool":"sayHello","arguments":{"personName":"Alice"',
}
FINAL = "<|start|>assistant<|channel|>final<|message|>Done.<|return|>"


def _metric_samples(registry: CollectorRegistry) -> dict[str, float]:
    """Counter values and histogram counts by ``name{labels}`` (buckets and sums are times)."""
    out: dict[str, float] = {}
    for family in registry.collect():
        for sample in family.samples:
            if sample.name.endswith(("_total", "_count")):
                labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
                out[f"{sample.name}{{{labels}}}"] = sample.value
    return out


async def _run_path(payload: str) -> tuple[dict[str, Any], str]:
    """One run over the stub path: the snapshot record and the second request's prompt."""
    agent = load_agent(AGENT)
    capture = CaptureSink()
    registry = CollectorRegistry()
    with ScriptedServer([completion(STUB.format(payload=payload)), completion(FINAL)]) as srv:
        model = resolve_model("openai/gpt-oss-20b", api="harmony", base_url=srv.base_url)
        async with model:  # type: ignore[attr-defined]
            response = await run_agent(agent, "Hi, I'm Alice", model=model, dry_run=True,
                                       events=[capture, ToolMetrics(registry)])
        prompts = [r.body["prompt"] for r in srv.requests]
    events = [e.to_dict() for e in capture.events]
    for event in events:  # differ per run: checked here, then left out of the snapshot
        assert event.pop("request_id") == response.run_id
        if event["kind"] == "tool_call_result":
            assert event.pop("latency_ms") >= 0
    assert response.content == "Done."
    assert len(prompts) == 2
    return {"events": events, "metrics": _metric_samples(registry)}, prompts[1]


@pytest.fixture(scope="module")
def snapshot() -> dict[str, Any]:
    result: dict[str, Any] = json.loads(SNAPSHOT.read_text()) if SNAPSHOT.exists() else {}
    return result


@pytest.mark.parametrize("path", list(PAYLOADS))
async def test_stub_path_events_and_metrics_match_the_snapshot(
    path: str, snapshot: dict[str, Any],
) -> None:
    record, _ = await _run_path(PAYLOADS[path])
    if os.environ.get("GRAMAGENT_UPDATE_SNAPSHOTS") == "1":
        snapshot[path] = record
        SNAPSHOT.write_text(json.dumps(snapshot, indent=2, sort_keys=True) + "\n")
    assert record == snapshot[path]


@pytest.mark.parametrize("path", list(PAYLOADS))
async def test_stub_path_event_contract(path: str) -> None:
    """What the snapshot holds, stated: one Planned then one Result with the same seq, the
    status and error type the ADR names, and the contract's metric keys (the ADR's contract
    test)."""
    record, _ = await _run_path(PAYLOADS[path])
    planned, result = record["events"]
    assert (planned["kind"], result["kind"]) == ("tool_call_planned", "tool_call_result")
    assert planned["seq"] == result["seq"] == 1
    assert len(planned["args_preview_hash"]) == 64 and "Alice" not in json.dumps(record)
    expected = {"ok": ("ok", None), "too_large": ("error", "tool_payload_too_large"),
                "parse_error": ("error", "tool_payload_parse_error")}[path]
    assert (result["status"], result["error_type"]) == expected
    tool = result["tool"]
    assert record["metrics"][f"tool_calls_total{{status={expected[0]},tool={tool}}}"] == 1
    # the histogram observes calls that ran; a payload rejected before running has no latency
    # to measure (the ADR: "only if status=ok or error has latency measurement")
    latency = record["metrics"].get(f"tool_call_latency_ms_count{{tool={tool}}}")
    assert latency == (1 if path == "ok" else None)


async def test_the_dry_run_executor_answers_ok_into_the_conversation() -> None:
    """End to end: the stub call's canned result reaches the model as the tool's answer on
    the commentary channel of the next prompt."""
    _, prompt = await _run_path(PAYLOADS["ok"])
    answer = prompt[prompt.index("<|start|>functions.sayHello"):]
    assert answer.startswith("<|start|>functions.sayHello to=assistant<|channel|>commentary"
                             "<|message|>")
    body = answer.split("<|message|>", 1)[1].split("<|end|>", 1)[0]
    assert json.loads(body) == {"ok": True}
