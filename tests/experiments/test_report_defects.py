"""Defects of the report, each pinned: a rounding-sized difference, Holm's family, the interval
of pass rates when no pair disagrees, memory linear in runs, metrics served by ``experiment run``.
"""

from __future__ import annotations

import pytest
from extras import require

require("experiments")

import io
import json
import math
import tracemalloc
from pathlib import Path

import httpx
import numpy as np
import orjson
from experiments_support import write_experiment
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from scipy import stats as scipy_stats
from typer.testing import CliRunner

from gramagent._cli import app
from gramagent.experiments import EvalResult, RunRecord, Store, render_report
from gramagent.experiments import _stats as stats
from gramagent.experiments._html import html_report
from gramagent.experiments._report import LATENCY, TOKENS, build_report
from gramagent.testing import ScriptedServer

# B's latencies are A's in another order: the mean difference is 0, but numpy's pairwise sum
# of the differences gives about -9e-18 (the "cases needed" of that was about 1e35)
ROUNDING_A = [0.1, 0.2, 0.7] * 4
ROUNDING_B = [0.2, 0.7, 0.1] * 4


def _run(variant: str, case: int, *, wall: float = 5.0, tokens: int = 10,
         scores: dict[str, bool] | None = None, repeat: int = 0) -> RunRecord:
    return RunRecord(variant=variant, case_id=f"c{case:05}", repeat=repeat, answer="x",
                     stop="answer", wall_ms=wall, input_tokens=tokens,
                     evaluations=tuple(EvalResult(name=n, score=float(ok), passed=ok)
                                       for n, ok in (scores or {}).items()))


def _settings(evaluators: list[str], cases: int) -> dict[str, object]:
    return {"experiment": "e", "baseline": "A", "variants": ["A", "B"],
            "evaluators": evaluators, "cases": cases}


def test_a_rounding_sized_difference_is_no_difference() -> None:
    d = np.array(ROUNDING_B) - np.array(ROUNDING_A)
    assert np.mean(d) != 0.0  # the rounding the report must not take for a difference
    assert stats.pairs_needed_paired(list(d), 0.05) is None
    records = [_run(v, i, wall=w) for v, walls in (("A", ROUNDING_A), ("B", ROUNDING_B))
               for i, w in enumerate(walls)]
    result = build_report(records, _settings([], len(ROUNDING_A)))
    latency = result.comparison("B", LATENCY)
    assert latency.pairs_needed is None and "no difference observed" in latency.verdict
    orjson.dumps(result.to_dict())  # raised "Integer exceeds 64-bit range" before


def test_experiment_report_json_of_a_rounding_sized_difference(tmp_path: Path) -> None:
    path = tmp_path / "rounding.sqlite"
    records = [_run(v, i, wall=w) for v, walls in (("A", ROUNDING_A), ("B", ROUNDING_B))
               for i, w in enumerate(walls)]
    with Store.create(path, fingerprint={"experiment": "e"},
                      settings=_settings([], len(ROUNDING_A))) as db:
        db.write(records)
    runner = CliRunner()
    done = runner.invoke(app, ["experiment", "report", str(path), "--json"])
    assert done.exit_code == 0, done.output  # was 70, "internal error"
    data = json.loads(done.stdout)
    assert all(c["pairs_needed"] is None for c in data["comparisons"])
    shown = runner.invoke(app, ["experiment", "report", str(path)])
    assert shown.exit_code == 0 and "e+" not in shown.stdout


@settings(max_examples=80, deadline=None)
@given(diffs=st.lists(st.floats(-1e6, 1e6, allow_subnormal=True), min_size=1, max_size=30),
       alpha=st.sampled_from([0.01, 0.05, 0.2]))
def test_pairs_needed_is_an_integer_json_can_carry(diffs: list[float], alpha: float) -> None:
    needed = stats.pairs_needed_paired(diffs, alpha)
    assert needed is None or 1 <= needed <= stats.MOST_PAIRS
    orjson.dumps(needed)


@settings(max_examples=10, deadline=None)
@given(walls=st.lists(st.floats(0, 1e4), min_size=4, max_size=12),
       shift=st.floats(-1e-12, 1e-12))
@pytest.mark.slow
def test_every_report_encodes_and_prints_small_figures(walls: list[float], shift: float) -> None:
    records = [_run(v, i, wall=w + (shift if v == "B" else 0.0), scores={"ok": i % 2 == 0})
               for v in "AB" for i, w in enumerate(walls)]
    result = build_report(records, _settings(["ok"], len(walls)))
    orjson.dumps(result.to_dict())
    console = Console(width=300, file=io.StringIO())
    console.print(render_report(result))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "e+" not in text and "e+" not in html_report(result).split("<img")[0]


def test_holm_leaves_out_metrics_that_cannot_differ() -> None:
    """A 7-0 split of discordant pairs (p = 2/2**7 = 0.016) is a verdict at alpha 0.05: two
    evaluators constant in both variants, latency and tokens equal, used to make Holm's family
    five and the verdict "no difference" (p 0.078)."""
    records = [_run(v, i, scores={"real": v == "B" or i >= 7, "always": True, "never": False})
               for v in "AB" for i in range(20)]
    result = build_report(records, _settings(["real", "always", "never"], 20))
    real = result.comparison("B", "real")
    assert real.discordant == (0, 7)
    assert real.p_value == scipy_stats.binomtest(7, 7, 0.5).pvalue
    assert real.p_adjusted == real.p_value and real.outcome == "better"
    for metric in ("always", "never", LATENCY, TOKENS):
        constant = result.comparison("B", metric)
        assert not constant.tested and constant.p_adjusted == 1.0


def test_holm_still_counts_every_metric_that_can_differ() -> None:
    records = [_run(v, i, scores={"a": v == "B" or i >= 7, "b": (i + (v == "B")) % 2 == 0})
               for v in "AB" for i in range(20)]
    result = build_report(records, _settings(["a", "b"], 20))
    a, b = result.comparison("B", "a"), result.comparison("B", "b")
    assert a.tested and b.tested
    assert a.p_adjusted == min(1.0, 2 * a.p_value)  # the smaller p of two, times two


def test_the_interval_of_rates_that_always_agree_is_not_a_point() -> None:
    records = [_run(v, i, scores={"ok": i % 3 == 0}) for v in "AB" for i in range(40)]
    result = build_report(records, _settings(["ok"], 40))
    ok = result.comparison("B", "ok")
    assert ok.discordant == (0, 0) and ok.difference == 0.0
    z = scipy_stats.norm.ppf(0.975)
    half = z * math.sqrt(2 / 42 / 42)  # Bonett-Price: one pair of each kind added, n + 2
    assert (ok.low, ok.high) == (-half, half)
    assert ok.high > 0.06  # was [0, 0] from a bootstrap that cannot move


def test_the_paired_rate_interval_covers_rare_discordance() -> None:
    """Seeded coverage check: with 1 % of pairs discordant each way and 30 pairs, most samples
    have no discordant pair; the interval must still cover the true difference (0)."""
    rng = np.random.default_rng(7)
    counts = rng.multinomial(30, [0.01, 0.01, 0.98], size=4000)
    covered = sum(low <= 0.0 <= high for low, high in (
        stats.paired_rate_interval(int(b), int(c), 30) for b, c, _ in counts))
    assert covered / len(counts) >= 0.95
    shifted = rng.multinomial(60, [0.02, 0.12, 0.86], size=4000)  # true difference +10 points
    covered = sum(low <= 0.10 <= high for low, high in (
        stats.paired_rate_interval(int(b), int(c), 60) for b, c, _ in shifted))
    assert covered / len(shifted) >= 0.93


def test_the_report_memory_is_linear_in_pairs() -> None:
    """5,000 pairs: BCa's jackknife held 5,000 x 4,999 floats per metric (200 MB), and the
    permutation test 9,999 resamples of every pair; both are now linear (well under 60 MB)."""
    rng = np.random.default_rng(3)
    walls = rng.gamma(2.0, 400.0, size=(2, 5000))
    records = [_run(v, i, wall=float(walls[k, i]), tokens=int(walls[k, i]) // 10,
                    scores={"ok": bool(walls[k, i] > 500)})
               for k, v in enumerate("AB") for i in range(5000)]
    tracemalloc.start()
    try:
        result = build_report(records, _settings(["ok"], 5000))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 60e6, peak
    latency = result.comparison("B", LATENCY)
    d = walls[1] - walls[0]
    ci = scipy_stats.ttest_1samp(d, 0.0).confidence_interval(0.95)
    assert (latency.low, latency.high) == (ci.low, ci.high)
    assert latency.p_value == scipy_stats.ttest_rel(walls[1], walls[0]).pvalue


def test_experiment_run_serves_tool_call_metrics(tmp_path: Path,
                                                 greeter_server: ScriptedServer) -> None:
    from prometheus_client import REGISTRY

    from gramagent import ToolMetrics

    path = write_experiment(tmp_path, names=["ann", "bob"], base_url=greeter_server.base_url)
    labels = {"tool": "sayHello", "status": "ok"}
    before = REGISTRY.get_sample_value("tool_calls_total", labels) or 0.0
    done = CliRunner().invoke(app, ["experiment", "run", str(path), "--metrics-port", "0"])
    assert done.exit_code == 0, done.output
    assert REGISTRY.get_sample_value("tool_calls_total", labels) == before + 4
    assert (REGISTRY.get_sample_value("tool_call_latency_ms_count", {"tool": "sayHello"})
            or 0.0) >= 4
    port = ToolMetrics.for_registry().server_port
    served = httpx.get(f"http://127.0.0.1:{port}/metrics").text
    assert f'tool_calls_total{{status="ok",tool="sayHello"}} {before + 4}' in served
