"""Repeats are analysed per case: every paired statistic is computed over cases (each case's
difference averaged over its repeats), recomputed here with scipy on the same data."""

from __future__ import annotations

from extras import require

require("experiments")

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from gramagent.experiments import EvalResult, RunRecord
from gramagent.experiments import _stats as stats
from gramagent.experiments._report import LATENCY, Report, build_report

CASES, REPEATS = 24, 4


def _records(passes: np.ndarray, walls: np.ndarray) -> list[RunRecord]:
    """``passes[v, case, repeat]`` and ``walls[v, case, repeat]`` for variants A (0), B (1)."""
    return [RunRecord(variant=v, case_id=f"c{case:03}", repeat=r, answer="x", stop="answer",
                      wall_ms=float(walls[k, case, r]), input_tokens=10,
                      evaluations=(EvalResult(name="ok", score=float(passes[k, case, r]),
                                              passed=bool(passes[k, case, r])),))
            for k, v in enumerate("AB") for case in range(passes.shape[1])
            for r in range(passes.shape[2])]


def _report(passes: np.ndarray, walls: np.ndarray) -> Report:
    return build_report(_records(passes, walls), {
        "experiment": "e", "baseline": "A", "variants": ["A", "B"], "evaluators": ["ok"],
        "cases": passes.shape[1], "repeats": passes.shape[2]})


def _data(seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    easy = rng.random(CASES) < 0.5  # a case's difficulty: repeats of a case are correlated
    rate = np.stack([np.where(easy, 0.85, 0.25), np.where(easy, 0.95, 0.4)])
    passes = rng.random((2, CASES, REPEATS)) < rate[:, :, None]
    walls = rng.gamma(3.0, 100.0, (1, CASES, 1)) + rng.normal(0, 20, (2, CASES, REPEATS))
    walls[1] += 15.0
    return passes, walls


def test_scores_are_compared_over_cases_as_scipy_does() -> None:
    passes, walls = _data()
    result = _report(passes, walls)
    latency = result.comparison("B", LATENCY)
    assert (latency.pairs, latency.cases, latency.repeats) == (CASES * REPEATS, CASES, REPEATS)
    base, var = walls[0].mean(axis=1), walls[1].mean(axis=1)  # per-case means
    rng = stats.rng_for(0, "B", LATENCY, "paired")
    boot = scipy_stats.bootstrap((var - base,), np.mean, n_resamples=stats.RESAMPLES,
                                 confidence_level=0.95, method="BCa", rng=rng)
    assert (latency.low, latency.high) == pytest.approx(
        (boot.confidence_interval.low, boot.confidence_interval.high))
    permutation = scipy_stats.permutation_test(
        (var, base), lambda x, y, axis: np.mean(x - y, axis=axis), permutation_type="samples",
        vectorized=True, n_resamples=stats.RESAMPLES, rng=rng)
    assert latency.p_value == pytest.approx(permutation.pvalue)
    assert latency.wilcoxon_p == pytest.approx(scipy_stats.wilcoxon(var - base).pvalue)
    assert (latency.wins, latency.ties, latency.losses) == (
        int(np.sum(var < base)), 0, int(np.sum(var > base)))  # lower latency wins


def test_pass_rates_are_compared_over_cases() -> None:
    passes, walls = _data()
    ok = _report(passes, walls).comparison("B", "ok")
    assert ok.test == "clustered_sign_flip"
    base, var = passes[0].mean(axis=1), passes[1].mean(axis=1)
    rng = stats.rng_for(0, "B", "ok", "paired")
    permutation = scipy_stats.permutation_test(
        (var, base), lambda x, y, axis: np.mean(x - y, axis=axis), permutation_type="samples",
        vectorized=True, n_resamples=stats.RESAMPLES, rng=rng)
    assert ok.p_value == pytest.approx(permutation.pvalue)
    flat = (passes[1] ^ passes[0]).sum(), passes.shape[1] * passes.shape[2]
    assert sum(ok.discordant or ()) == flat[0] and ok.pairs == flat[1]
    assert ok.design_effect is not None and ok.design_effect > 1  # correlated repeats
    b, c = ok.discordant or (0, 0)
    worth = min(ok.design_effect, REPEATS)
    assert (ok.low, ok.high) == pytest.approx(
        stats.paired_rate_interval(b / worth, c / worth, ok.pairs / worth))


def test_repeats_that_copy_each_other_are_worth_one_pair() -> None:
    """A deterministic model repeats itself: five repeats must say what one does (before,
    they were five pairs: p 2/2**35 instead of 2/2**7)."""
    one = np.zeros((2, 20, 1), dtype=bool)
    one[1, :7, 0] = True  # B passes 7 cases that A fails
    five = np.repeat(one, 5, axis=2)
    walls = np.full((2, 20, 1), 100.0)
    single = _report(one, walls).comparison("B", "ok")
    repeated = _report(five, np.repeat(walls, 5, axis=2)).comparison("B", "ok")
    assert single.p_value == scipy_stats.binomtest(7, 7).pvalue
    assert repeated.p_value == pytest.approx(single.p_value, abs=0.005)
    assert repeated.design_effect == pytest.approx(5.0) and repeated.icc == pytest.approx(1.0)
    assert (repeated.low, repeated.high) == pytest.approx((single.low, single.high))
    assert repeated.cases_needed == single.cases_needed


def test_the_design_effect_matches_the_anova_intra_class_correlation() -> None:
    rng = np.random.default_rng(11)
    groups, size = 400, 4
    values = rng.normal(0, 1, (groups, 1)) + rng.normal(0, 1, (groups, size))  # ICC 0.5
    cases = np.repeat(np.arange(groups), size)
    design = stats.design_effect(values.ravel(), cases)
    f = scipy_stats.f_oneway(*values).statistic
    anova_icc = (f - 1) / (f + size - 1)
    assert design is not None
    icc = stats.intra_case_correlation(design, size)
    assert icc == pytest.approx(anova_icc, abs=0.05) and icc == pytest.approx(0.5, abs=0.08)
    assert stats.design_effect(np.zeros(8), np.arange(8)) is None


def test_flip_rates_count_cases_whose_repeats_disagree() -> None:
    passes, walls = _data()
    result = _report(passes, walls)
    for k, variant in enumerate("AB"):
        metric = result.variant(variant).metrics[0]
        mixed = np.sum(passes[k].any(axis=1) & ~passes[k].all(axis=1))
        assert metric.flip_cases == CASES and metric.flip_rate == mixed / CASES


@pytest.mark.slow
@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=3, max_size=12))
def test_one_repeat_changes_nothing(outcomes: list[tuple[bool, bool]]) -> None:
    passes = np.array(outcomes, dtype=bool).T[:, :, None]
    walls = np.arange(2 * len(outcomes), dtype=float).reshape(2, -1, 1)
    ok = _report(passes, walls).comparison("B", "ok")
    b = sum(1 for a, v in outcomes if a and not v)
    c = sum(1 for a, v in outcomes if v and not a)
    assert ok.test == "mcnemar_exact" and ok.discordant == (b, c)
    assert ok.p_value == stats.mcnemar_exact(b, c) and ok.design_effect is None
    assert ok.cases == ok.pairs == len(outcomes)
