"""The report reads a store as columns (``Store.table``), without a record per run: its figures
equal those computed plainly, run by run, from the records themselves, and the same records
reported from memory (``build_report``) give the same report."""

from __future__ import annotations

from extras import require

require("experiments")

import math
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gramagent.experiments import EvalResult, RunRecord, Store, ToolRecord, report
from gramagent.experiments._report import MAX_DISAGREEMENTS, build_report

EVALUATORS = ("exact", "score")
VARIANTS = ("A", "B")

_evaluation = st.one_of(
    st.builds(lambda p: EvalResult(name="exact", score=float(p), passed=p), st.booleans()),
    st.builds(lambda x: EvalResult(name="score", score=x, passed=None),
              st.floats(0, 1, allow_nan=False)),
    st.builds(lambda p: EvalResult(name="other", score=float(p), passed=p), st.booleans()))
_tool = st.builds(ToolRecord, name=st.sampled_from(["t", "u"]),
                  status=st.sampled_from(["ok", "error"]),
                  error_type=st.sampled_from([None, "timeout", "validation"]),
                  latency_ms=st.floats(0, 10), arguments=st.just({"n": 10**30}))


@st.composite
def _records(draw: st.DrawFn) -> list[RunRecord]:
    cases = draw(st.integers(0, 6))
    repeats = draw(st.integers(1, 3))
    out = []
    for variant in VARIANTS:
        for case in range(cases):
            for repeat in range(repeats):
                if draw(st.booleans()) and draw(st.booleans()):
                    continue  # a key not run (yet)
                out.append(RunRecord(
                    variant=variant, case_id=f"c{case}", repeat=repeat,
                    answer=draw(st.none() | st.text(max_size=5)),
                    stop=draw(st.sampled_from(["answer", "answer", "limit:wall_time",
                                               "error:ModelAPIError"])),
                    tools=tuple(draw(st.lists(_tool, max_size=3))),
                    input_tokens=draw(st.integers(0, 10**6)),
                    output_tokens=draw(st.integers(0, 10**4)),
                    requests=draw(st.integers(0, 5)),
                    wall_ms=draw(st.floats(0, 1e5, allow_nan=False)),
                    started=draw(st.sampled_from([0.0, 1.7e9, 1.8e9 + 0.25])),
                    estimated_tokens=draw(st.booleans()),
                    # an evaluator may be missing, repeated (the first counts) or unknown
                    evaluations=tuple(draw(st.lists(_evaluation, max_size=4)))))
    return out


def _first(record: RunRecord, name: str) -> EvalResult | None:
    return next((e for e in record.evaluations if e.name == name), None)


def _plain(records: list[RunRecord]) -> dict[str, Any]:
    """The report's counts and means computed run by run, the obvious way."""
    rated = {}
    for name in EVALUATORS:
        found = [e for e in (_first(r, name) for r in records) if e is not None]
        rated[name] = bool(found) and all(e.passed is not None for e in found)

    def score(r: RunRecord, name: str) -> float:
        e = _first(r, name)
        return 0.0 if e is None else e.score

    def ok(r: RunRecord) -> bool:
        return not r.stop.startswith("error:")

    variants = {}
    for v in VARIANTS:
        runs = sorted((r for r in records if r.variant == v),
                      key=lambda r: (r.case_id, r.repeat))
        metrics: dict[str, Any] = {}
        for name in EVALUATORS:
            values = [score(r, name) for r in runs]
            metrics[name] = (sum(1 for x in values if x >= 1.0) if rated[name]
                             else (sum(values) / len(values) if values else None))
        metrics["latency_ms"] = ([r.wall_ms for r in runs if ok(r)] or None) and (
            sum(r.wall_ms for r in runs if ok(r)) / sum(1 for r in runs if ok(r)))
        variants[v] = {
            "runs": len(runs), "metrics": metrics, "stops": dict(Counter(r.stop for r in runs)),
            "tool_calls": sum(len(r.tools) for r in runs),
            "tool_errors": dict(Counter(f"{t.name}:{t.error_type}" for r in runs
                                        for t in r.tools if t.status != "ok")),
            "estimated": sum(r.estimated_tokens for r in runs)}
    base = {(r.case_id, r.repeat): r for r in records if r.variant == "A"}
    pairs = sorted(((base[(r.case_id, r.repeat)], r) for r in records
                    if r.variant == "B" and (r.case_id, r.repeat) in base),
                   key=lambda p: (p[1].case_id, p[1].repeat))
    disagreements = [(b.case_id, b.repeat, name, b.answer, v.answer) for b, v in pairs
                     for name in EVALUATORS if rated[name]
                     and (score(b, name) >= 1.0) != (score(v, name) >= 1.0)]
    comparisons = {name: (len(pairs), sum(score(v, name) - score(b, name) for b, v in pairs))
                   for name in EVALUATORS}
    timed = [r for r in records if r.started]
    return {"variants": variants, "disagreements": disagreements, "comparisons": comparisons,
            "started": min((r.started for r in timed), default=None),
            "finished": max((r.started + r.wall_ms / 1000 for r in timed), default=None)}


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(records=_records(), priced=st.booleans())
def test_the_report_of_a_store_is_that_of_its_runs_counted_one_by_one(
        records: list[RunRecord], priced: bool) -> None:
    run_settings: dict[str, Any] = {
        "experiment": "e", "baseline": "A", "variants": list(VARIANTS),
        "evaluators": list(EVALUATORS), "cases": 6, "repeats": 3, "alpha": 0.05, "seed": 1,
        "models": {"A": "openai/a", "B": "openai/b"}}
    if priced:
        run_settings["prices"] = {"openai/a": [0.15, 0.6], "openai/b": [2.5, 10]}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.sqlite"
        with Store.create(path, fingerprint={"e": 1}, settings=run_settings) as db:
            db.write(records)
        stored = report(path)
    expected = _plain(records)
    for v in VARIANTS:
        summary, plain = stored.variant(v), expected["variants"][v]
        assert (summary.runs, summary.stops, summary.tool_calls, summary.tool_errors,
                summary.estimated) == (plain["runs"], plain["stops"], plain["tool_calls"],
                                       plain["tool_errors"], plain["estimated"])
        for m in summary.metrics:
            if m.name not in plain["metrics"]:
                continue
            want = plain["metrics"][m.name]
            got = m.passed if m.kind == "rate" else m.value
            if want is None:
                assert math.isnan(got)
            else:
                assert got == want or math.isclose(got, want, rel_tol=1e-12)
    for name, (pairs, total) in expected["comparisons"].items():
        c = stored.comparison("B", name)
        assert c.pairs == pairs
        if pairs:
            assert math.isclose(c.difference, total / pairs, rel_tol=1e-9, abs_tol=1e-12)
    assert stored.disagreements_total == len(expected["disagreements"])
    assert [(d.case_id, d.repeat, d.evaluator, d.baseline_answer, d.variant_answer)
            for d in stored.disagreements] == expected["disagreements"][:MAX_DISAGREEMENTS]
    assert (stored.started, stored.finished) == (expected["started"], expected["finished"])
    # the records reported from memory: the very same report
    assert build_report(records, run_settings).to_dict() == stored.to_dict()


def test_a_variant_with_repeats_and_no_baseline_run_yet_is_reported() -> None:
    """With repeats, a pass/fail comparison without a single pair (the baseline has not run
    any of the variant's keys yet: an experiment interrupted early) raised ValueError from an
    empty maximum ('internal error' on the command line)."""
    run = RunRecord(variant="B", case_id="c0", repeat=0, answer="x", stop="answer",
                    evaluations=(EvalResult(name="exact", score=1.0, passed=True),))
    result = build_report([run], {"baseline": "A", "variants": ["A", "B"],
                                  "evaluators": ["exact"], "repeats": 3})
    c = result.comparison("B", "exact")
    assert (c.pairs, c.outcome, c.verdict) == (0, "no difference", "no paired runs to compare")
