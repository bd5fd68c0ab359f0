"""Running into a store: resume after kill -9, refusal of a changed experiment, binding of an
arm with another docstring, events and metrics that carry the variant."""

from __future__ import annotations

from extras import require

require("experiments")

import dataclasses
import logging
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from experiments_support import greeter_script, stored_runs, write_experiment
from prometheus_client import CollectorRegistry

from gramagent import ToolCallResult, ToolError, ToolMetrics
from gramagent.errors import ExperimentError
from gramagent.experiments import (
    ExperimentMetrics,
    Store,
    load_experiment,
    report,
    run_experiment,
)
from gramagent.testing import CaptureSink, ScriptedServer, ScriptTurn, call

HERE = Path(__file__).parent
NAMES = [f"person{i}" for i in range(30)]


def _slow_script(path: str, body: Any) -> ScriptTurn:
    return dataclasses.replace(greeter_script(path, body), delay=0.03)


@pytest.fixture
def slow_server() -> Iterator[ScriptedServer]:
    with ScriptedServer(_slow_script, record=False) as server:
        yield server


@pytest.mark.slow
def test_resume_after_kill_9_runs_no_saved_key_twice_and_loses_none(
        tmp_path: Path, slow_server: ScriptedServer) -> None:
    path = write_experiment(tmp_path, names=NAMES, base_url=slow_server.base_url)
    store = tmp_path / "greetings.sqlite"
    log = tmp_path / "calls.log"
    env = {**os.environ, "AB_CALL_LOG": str(log),
           "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    code = ("import sys; from gramagent.experiments import load_experiment, "
            "run_experiment_sync; run_experiment_sync(load_experiment(sys.argv[1]), "
            "concurrency=3)")
    child = subprocess.Popen([sys.executable, "-c", code, str(path)], env=env, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while stored_runs(store) < 10 and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert child.poll() is None, "the runner finished before it could be killed"
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    with Store.read(store) as db:
        saved = db.done()
    assert 10 <= len(saved) < 2 * len(NAMES)
    calls_before = Counter(log.read_text().splitlines())

    resumed = subprocess.run([sys.executable, "-c", code, str(path)], env=env, cwd=tmp_path,
                             capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    with Store.read(store) as db:
        final = db.records()
    assert len(final) == 2 * len(NAMES)  # none lost
    assert {(r.variant, r.case_id) for r in final} == {
        (v, n) for v in ("A", "B") for n in NAMES}
    calls = Counter(log.read_text().splitlines())
    library = {"A": "polite", "B": "planted"}
    for key in saved:  # a saved run never runs again
        assert calls[f"{library[key.variant]}\t{key.case_id}"] == 1, key
    twice = [k for k, n in calls.items() if n > 1]
    assert len(twice) <= 3  # at most the runs in flight at the kill (concurrency 3)
    assert sum(calls.values()) - sum(calls_before.values()) == 2 * len(NAMES) - len(saved)


async def test_running_again_resumes_and_a_changed_experiment_is_refused(
        tmp_path: Path, greeter_server: ScriptedServer) -> None:
    path = write_experiment(tmp_path, names=NAMES[:5], base_url=greeter_server.base_url)
    first = await run_experiment(load_experiment(path))
    again = await run_experiment(load_experiment(path))
    assert (first.ran, first.skipped, again.ran, again.skipped) == (10, 0, 0, 10)

    write_experiment(tmp_path, names=NAMES[:6], base_url=greeter_server.base_url)
    with pytest.raises(ExperimentError, match="the dataset changed"):
        await run_experiment(load_experiment(path))
    write_experiment(tmp_path, names=NAMES[:5], base_url=greeter_server.base_url,
                     variant_b="ab_libs:reworded")
    with pytest.raises(ExperimentError, match=r"variant 'B' changed \(implementation, library\)"):
        await run_experiment(load_experiment(path))
    # another store is fine
    other = await run_experiment(load_experiment(path), store=tmp_path / "other.sqlite")
    assert other.ran == 10


async def test_an_arm_with_another_docstring_binds_with_a_warning(
        tmp_path: Path, greeter_server: ScriptedServer,
        caplog: pytest.LogCaptureFixture) -> None:
    path = write_experiment(tmp_path, names=NAMES[:3], base_url=greeter_server.base_url,
                            variant_b="ab_libs:reworded")
    with caplog.at_level(logging.WARNING, logger="gramagent._runtime.library"):
        summary = await run_experiment(load_experiment(path))
    assert summary.ran == 6
    assert len(summary.warnings) == 1
    assert summary.warnings[0].startswith("variant 'B': tool 'sayHello': description differs")
    assert "Greets a person by name, warmly." in caplog.text
    result = report(summary.store)
    assert result.variant("B").metrics[0].value == 1.0  # it ran, and answered


async def test_a_schema_mismatch_stops_before_any_request(
        tmp_path: Path, greeter_server: ScriptedServer) -> None:
    path = write_experiment(tmp_path, names=NAMES[:3], base_url=greeter_server.base_url,
                            variant_b="ab_libs:wrong_schema")
    with pytest.raises(ToolError, match="schema differs"):
        await run_experiment(load_experiment(path))
    assert not (tmp_path / "greetings.sqlite").exists()


async def test_events_and_metrics_carry_experiment_and_variant(
        tmp_path: Path, greeter_server: ScriptedServer) -> None:
    path = write_experiment(tmp_path, names=NAMES[:4], base_url=greeter_server.base_url)
    registry = CollectorRegistry()
    sink = CaptureSink()
    tool_metrics = ToolMetrics(registry)
    metrics = ExperimentMetrics.for_registry(registry)
    summary = await run_experiment(load_experiment(path), events=[sink, tool_metrics],
                                   metrics=metrics, concurrency=4)
    assert summary.ran == 8
    results = [e for e in sink.events if isinstance(e, ToolCallResult)]
    assert Counter((e.experiment, e.variant) for e in results) == {
        ("greetings", "A"): 4, ("greetings", "B"): 4}
    assert results[0].to_dict()["variant"] in ("A", "B")

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    # the ADR's families are unchanged ...
    assert value("tool_calls_total", tool="sayHello", status="ok") == 8
    # ... and the experiment's tell the arms apart
    for variant in ("A", "B"):
        arm = {"experiment": "greetings", "variant": variant}
        assert value("experiment_runs_total", **arm, stop="answer") == 4
        assert value("experiment_tool_calls_total", **arm, tool="sayHello", status="ok") == 4
        assert value("experiment_run_latency_ms_count", **arm) == 4
    assert value("experiment_evaluations_total", experiment="greetings", variant="A",
                 evaluator="exact", result="pass") == 4
    assert value("experiment_evaluations_total", experiment="greetings", variant="B",
                 evaluator="exact", result="pass") == 2  # person1, person3
    assert value("experiment_evaluations_total", experiment="greetings", variant="B",
                 evaluator="exact", result="fail") == 2


async def test_multi_turn_cases_limits_rate_limits_and_parquet_export(
        tmp_path: Path, greeter_server: ScriptedServer) -> None:
    import orjson
    import pyarrow.parquet as pq

    path = write_experiment(
        tmp_path, names=NAMES[:2], base_url=greeter_server.base_url,
        extra=",\n  rate_limits: {`openai/scripted`: 200}")
    text = path.read_text().replace(
        '[B:Variant {library: "ab_libs:planted",',
        '[B:Variant {library: "ab_libs:planted", limits: {max_iterations: 1},')
    path.write_text(text)
    (tmp_path / "cases.jsonl").write_bytes(orjson.dumps(
        {"id": "two", "input": ["Greet person1", "Now greet person3"]}) + b"\n")
    summary = await run_experiment(load_experiment(path))
    with Store.read(summary.store) as db:
        a, b = db.records()
        rows = db.export(tmp_path / "runs.parquet")
    assert a.stop == "answer" and a.answer == "Hello, person3!"
    assert [t.arguments for t in a.tools] == [{"personName": "person1"},
                                              {"personName": "person3"}]
    assert a.requests == 4
    assert b.stop == "limit:max_iterations" and b.answer is None
    assert b.tools[0].name == "sayHello" and b.requests == 1
    verdict = b.evaluation("exact")
    assert verdict is not None and verdict.passed is False
    table = pq.read_table(tmp_path / "runs.parquet").to_pylist()
    assert rows == 2 and [r["stop"] for r in table] == ["answer", "limit:max_iterations"]


async def test_a_run_waiting_for_approval_ends_its_case(tmp_path: Path,
                                                        greeter_server: ScriptedServer,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """An experiment runs unattended: a call that needs approval is not run, and the case
    is recorded as stopped by it (not scored as an empty answer)."""
    calls = tmp_path / "calls.log"
    monkeypatch.setenv("AB_CALL_LOG", str(calls))
    path = write_experiment(tmp_path, names=NAMES[:2], base_url=greeter_server.base_url,
                            variant_b="ab_libs:guarded")
    summary = await run_experiment(load_experiment(path))
    with Store.read(summary.store) as db:
        records = db.records()
    guarded = [r for r in records if r.variant == "B"]
    assert len(guarded) == 2
    for record in guarded:
        assert record.stop == "approval_required" and record.answer is None
        assert record.error is not None and "sayHello" in record.error
    assert {r.stop for r in records if r.variant == "A"} == {"answer"}
    assert sorted(calls.read_text().splitlines()) == [f"polite\t{n}" for n in NAMES[:2]]


def _inventive_script(path: str, body: Any) -> ScriptTurn:
    """Like the greeter, but first calls a tool named after the person (no such tool)."""
    messages = body.get("messages") or []
    if messages[-1].get("role") == "user":
        return call(f"invented_{str(messages[-1]['content']).split()[-1]}", {})
    if sum(m.get("role") == "tool" for m in messages) == 1:  # told there is no such tool
        return greeter_script(path, {"messages": [m for m in messages
                                                  if m.get("role") == "user"]})
    return greeter_script(path, body)


async def test_tool_labels_stay_bounded_whatever_names_the_model_invents(
        tmp_path: Path) -> None:
    """A tool name the model made up is counted as <unknown> in both tool families, so an
    inventive model cannot grow the number of series."""
    with ScriptedServer(_inventive_script, record=False) as server:
        path = write_experiment(tmp_path, names=NAMES[:3], base_url=server.base_url)
        registry = CollectorRegistry()
        await run_experiment(load_experiment(path), events=ToolMetrics(registry),
                             metrics=ExperimentMetrics.for_registry(registry))
    tools = {sample.labels["tool"] for family in registry.collect() for sample in family.samples
             if "tool" in sample.labels}
    assert tools == {"sayHello", "<unknown>"}
    assert registry.get_sample_value("experiment_tool_calls_total", {
        "experiment": "greetings", "variant": "A", "tool": "<unknown>",
        "status": "error"}) == 3
