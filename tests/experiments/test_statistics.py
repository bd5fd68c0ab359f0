"""Reports on real runs: a planted difference is detected, a null one is not, and the figures
are scipy's on the same data."""

from __future__ import annotations

from extras import require

require("experiments")

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ab_libs import PLANTED
from experiments_support import greeter_script, write_experiment
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from gramagent.experiments import (
    EvalResult,
    RunRecord,
    Store,
    load_experiment,
    report,
    run_experiment,
)
from gramagent.experiments import _stats as stats
from gramagent.experiments._report import LATENCY, build_report
from gramagent.testing import ScriptedServer, ScriptTurn, error

NAMES = [f"person{i}" for i in range(40)]


async def _run(tmp_path: Path, server: ScriptedServer, variant_b: str) -> Path:
    path = write_experiment(tmp_path, names=NAMES, base_url=server.base_url,
                            variant_b=variant_b)
    summary = await run_experiment(load_experiment(path), concurrency=8)
    assert summary.ran == 2 * len(NAMES)
    return Path(summary.store)


async def test_a_planted_difference_is_detected(tmp_path: Path,
                                                greeter_server: ScriptedServer) -> None:
    store = await _run(tmp_path, greeter_server, "ab_libs:planted")
    result = report(store)
    planted = sum(1 for n in NAMES if n in PLANTED)
    assert planted == 20

    exact = result.comparison("B", "exact")
    assert exact.test == "mcnemar_exact"
    assert exact.discordant == (planted, 0)
    assert exact.difference == pytest.approx(-planted / len(NAMES))
    assert exact.p_value == pytest.approx(scipy_stats.binomtest(0, planted, 0.5).pvalue)
    assert exact.p_value == pytest.approx(2 * 0.5 ** planted)
    assert exact.outcome == "worse" and exact.verdict.startswith("worse: -50.0 points")
    assert exact.high < 0  # the interval excludes no difference

    rate = result.variant("B").metrics[0]
    ci = scipy_stats.binomtest(len(NAMES) - planted, len(NAMES)).proportion_ci(
        confidence_level=0.95, method="wilson")
    assert (rate.name, rate.passed, rate.n) == ("exact", 20, 40)
    assert (rate.low, rate.high) == pytest.approx((ci.low, ci.high))

    # the interval of the difference of pass rates: Bonett-Price's adjusted Wald interval
    # (one discordant pair of each kind added), recomputed from the discordant counts
    with Store.read(store) as db:
        records = db.records()
    by_key = {(r.variant, r.case_id): r for r in records}
    diffs = np.array([by_key[("B", n)].evaluation("exact").score  # type: ignore[union-attr]
                      - by_key[("A", n)].evaluation("exact").score  # type: ignore[union-attr]
                      for n in sorted(NAMES)])
    b, c, n = int(np.sum(diffs < 0)), int(np.sum(diffs > 0)), diffs.size
    p12, p21 = (b + 1) / (n + 2), (c + 1) / (n + 2)
    half = scipy_stats.norm.ppf(0.975) * np.sqrt((p12 + p21 - (p21 - p12) ** 2) / (n + 2))
    assert (exact.low, exact.high) == pytest.approx((p21 - p12 - half, p21 - p12 + half))

    # the other evaluators did not move
    assert result.comparison("B", "called").outcome == "no difference"
    assert result.disagreements_total == 2 * planted  # exact and hello, on the planted cases
    assert {d.case_id for d in result.disagreements} == {n for n in NAMES if n in PLANTED}
    row = result.disagreements[0]
    assert row.baseline_answer == f"Hello, {row.case_id}!"
    assert row.variant_answer == f"Hi {row.case_id}."


async def test_a_null_difference_is_not_detected(tmp_path: Path,
                                                 greeter_server: ScriptedServer) -> None:
    store = await _run(tmp_path, greeter_server, "ab_libs:reworded")
    result = report(store)
    for metric in ("exact", "hello", "called", "clean"):
        comparison = result.comparison("B", metric)
        assert comparison.outcome == "no difference", comparison
        assert comparison.p_value == 1.0 and comparison.difference == 0.0
        assert "no detectable difference at alpha=0.05" in comparison.verdict
    assert result.disagreements_total == 0

    # latency: the permutation test's p-value is scipy's on the same pairs
    latency = result.comparison("B", LATENCY)
    with Store.read(store) as db:
        records = db.records()
    by_key = {(r.variant, r.case_id): r.wall_ms for r in records}
    a = np.array([by_key[("A", n)] for n in sorted(NAMES)])
    b = np.array([by_key[("B", n)] for n in sorted(NAMES)])
    rng = stats.rng_for(0, "B", LATENCY, "paired")
    stats.bootstrap_mean(list(b - a), rng)  # the report draws its interval first
    expected = scipy_stats.permutation_test(
        (b, a), lambda x, y, axis: np.mean(x - y, axis=axis), permutation_type="samples",
        vectorized=True, n_resamples=stats.RESAMPLES, rng=rng)
    assert latency.p_value == pytest.approx(expected.pvalue)


async def test_the_same_store_gives_the_same_report(tmp_path: Path,
                                                    greeter_server: ScriptedServer) -> None:
    store = await _run(tmp_path, greeter_server, "ab_libs:planted")
    assert report(store).to_dict() == report(store).to_dict()


def test_a_planted_shift_in_scores_is_detected_and_none_is_not() -> None:
    rng = np.random.default_rng(1)
    base = rng.normal(0.5, 0.1, 60)
    shifted = base + 0.05 + rng.normal(0, 0.02, 60)
    p_shift = stats.paired_permutation(list(shifted), list(base), stats.rng_for(0, "x"))
    assert p_shift < 0.001
    same = base + rng.normal(0, 0.02, 60)
    assert stats.paired_permutation(list(same), list(base), stats.rng_for(0, "x")) > 0.05
    low, high = stats.bootstrap_mean(list(shifted - base), stats.rng_for(0, "y"))
    assert low < 0.05 < high and low > 0


def test_mcnemar_and_sample_sizes() -> None:
    assert stats.mcnemar_exact(0, 0) == 1.0
    assert stats.mcnemar_exact(5, 5) == 1.0
    assert stats.mcnemar_exact(0, 10) == pytest.approx(2 * 0.5 ** 10)
    assert stats.pairs_needed_mcnemar(2, 2, 40, 0.05) is None
    small = stats.pairs_needed_mcnemar(1, 3, 40, 0.05)
    large = stats.pairs_needed_mcnemar(0, 20, 40, 0.05)
    assert small is not None and large is not None and small > 40 > large
    assert stats.pairs_needed_paired([0.0, 0.0], 0.05) is None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=8))
def test_holm_is_monotone_and_bounded(pvalues: list[float]) -> None:
    adjusted = stats.holm(pvalues)
    m = len(pvalues)
    for p, q in zip(pvalues, adjusted, strict=True):
        assert p <= q + 1e-12 and q <= 1.0
        assert q <= min(1.0, m * p) + 1e-12
    order = sorted(range(m), key=lambda i: pvalues[i])
    ranked = [adjusted[i] for i in order]
    assert ranked == sorted(ranked)
    smallest = order[0]
    assert math.isclose(adjusted[smallest], min(1.0, m * pvalues[smallest]))


@settings(max_examples=40, deadline=None)
@given(pairs=st.integers(0, 3), outcomes=st.lists(st.booleans(), min_size=6, max_size=6),
       latencies=st.lists(st.floats(1, 1000), min_size=6, max_size=6))
def test_a_report_of_very_few_pairs_claims_no_interval_and_no_effect(
        pairs: int, outcomes: list[bool], latencies: list[float]) -> None:
    records = [RunRecord(variant=v, case_id=str(i), repeat=0, answer="x", stop="answer",
                         wall_ms=latencies[k * 3 + i],
                         evaluations=(EvalResult(name="ok", score=float(outcomes[k * 3 + i]),
                                                 passed=outcomes[k * 3 + i]),))
               for k, v in enumerate("AB") for i in range(pairs)]
    result = build_report(records, {"baseline": "A", "variants": ["A", "B"],
                                    "evaluators": ["ok"], "cases": pairs})
    for c in result.comparisons:
        assert c.pairs == pairs
        if pairs < 2:  # one pair: no spread, no test
            assert math.isnan(c.low) and math.isnan(c.high) and c.p_value == 1.0
        assert c.outcome == "no difference"  # 3 pairs can never reach p < 0.05


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 40), alpha=st.sampled_from([0.01, 0.05, 0.1, 0.2]),
       difference=st.floats(0.1, 100))
def test_the_pairs_a_difference_would_need_could_show_it(n: int, alpha: float,
                                                          difference: float) -> None:
    """Every pair differs the same way: the claimed count of such pairs reaches p < alpha."""
    needed = stats.pairs_needed_paired([difference] * n, alpha)
    assert needed is not None
    assert stats.paired_permutation([difference] * needed, [0.0] * needed,
                                    stats.rng_for(0, "n")) < alpha
    discordant = stats.pairs_needed_mcnemar(0, n, n, alpha)
    assert discordant is not None and stats.mcnemar_exact(0, discordant) < alpha


def _flaky_script(path: str, body: Any) -> ScriptTurn:
    """The greeter, but the server fails (HTTP 500) every request about person0-person9."""
    user = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
    if user.split()[-1] in {f"person{i}" for i in range(10)}:
        return error(500, "overloaded", retry_after=0)
    return greeter_script(path, body)


async def test_runs_that_end_on_a_server_error_fail_and_cost_nothing_to_compare(
        tmp_path: Path, greeter_server: ScriptedServer) -> None:
    with ScriptedServer(_flaky_script, record=False) as flaky:
        path = write_experiment(tmp_path, names=NAMES[:30], base_url=greeter_server.base_url,
                                variant_b="ab_libs:polite")
        path.write_text(path.read_text().replace(
            f'library: "ab_libs:polite", base_url: "{greeter_server.base_url}"}}],\n'
            f'  [B:Variant {{library: "ab_libs:polite", base_url: "{greeter_server.base_url}',
            f'library: "ab_libs:polite", base_url: "{greeter_server.base_url}"}}],\n'
            f'  [B:Variant {{library: "ab_libs:polite", base_url: "{flaky.base_url}'))
        summary = await run_experiment(load_experiment(path), concurrency=4)
    result = report(summary.store)
    assert result.variant("B").stops == {"answer": 20, "error:ModelAPIError": 10}
    assert result.comparison("B", "exact").outcome == "worse"  # errors fail the evaluators
    for metric in (LATENCY, "tokens"):  # but B's failing fast is not "cheaper"
        compared = result.comparison("B", metric)
        assert compared.pairs == 20
        if metric == "tokens":
            assert compared.difference == 0 and compared.outcome == "no difference"
    assert result.variant("B").metrics[-1].n == 20  # tokens of B: the 20 answered runs


@settings(max_examples=30, deadline=None)
@given(errors=st.lists(st.booleans(), min_size=8, max_size=8),
       cost=st.lists(st.integers(0, 500), min_size=8, max_size=8))
def test_error_runs_leave_latency_and_tokens_as_without_them(errors: list[bool],
                                                             cost: list[int]) -> None:
    def run(variant: str, i: int, failed: bool) -> RunRecord:
        return RunRecord(variant=variant, case_id=f"{i:02}", repeat=0,
                         answer=None if failed else "x",
                         stop="error:ModelAPIError" if failed else "answer",
                         input_tokens=cost[i] if failed else 100 + i * (variant == "B"),
                         wall_ms=float(cost[i]) if failed else 50.0 + i)

    settings_ = {"baseline": "A", "variants": ["A", "B"], "evaluators": [], "cases": 8}
    everything = [run(v, i, errors[i] and v == "B") for v in "AB" for i in range(8)]
    answered = [run(v, i, False) for v in "AB" for i in range(8) if not errors[i]]
    with_errors, without = build_report(everything, settings_), build_report(answered, settings_)
    for metric in (LATENCY, "tokens"):
        a, b = with_errors.comparison("B", metric), without.comparison("B", metric)
        assert (a.pairs, a.difference, a.p_value) == (b.pairs, b.difference, b.p_value) or (
            a.pairs == 0 == b.pairs)
