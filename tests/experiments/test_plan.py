"""Planning: the cases a difference needs (checked by the exact power of McNemar's test and of
the paired t test, computed with scipy), from a baseline rate, an sd or a pilot store; and
the minimum detectable difference of a finished run."""

from __future__ import annotations

from extras import require

require("experiments")

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats
from typer.testing import CliRunner

from gramagent._cli import app
from gramagent.errors import ConfigurationError
from gramagent.experiments import EvalResult, RunRecord, Store, plan_cases, plan_from_store
from gramagent.experiments import _stats as stats
from gramagent.experiments._report import build_report


def _mcnemar_power(n: int, discordant: float, delta: float, alpha: float) -> float:
    """Exact power of McNemar's exact test: d ~ Binomial(n, discordant) disagreeing pairs,
    of which c ~ Binomial(d, share) favour the variant."""
    share = (discordant + delta) / (2 * discordant)
    power = 0.0
    for d in range(1, n + 1):
        weight = scipy_stats.binom.pmf(d, n, discordant)
        if weight < 1e-12:
            continue
        c = np.arange(d + 1)
        rejects = np.array([scipy_stats.binomtest(int(k), d, 0.5).pvalue < alpha for k in c])
        power += weight * float(np.sum(scipy_stats.binom.pmf(c, d, share)[rejects]))
    return power


@pytest.mark.slow
def test_a_rate_plan_has_the_power_it_promises() -> None:
    plan = plan_cases(0.15, baseline_rate=0.6)
    p1 = 0.75
    discordant = 0.6 * (1 - p1) + p1 * 0.4
    assert plan.basis.startswith(f"share of disagreeing pairs {discordant:.3g}")
    assert _mcnemar_power(plan.cases, discordant, 0.15, 0.05) >= 0.8
    assert _mcnemar_power(plan.cases - 1, discordant, 0.15, 0.05) < 0.8
    for n in (10, 37, 120):
        assert stats.mcnemar_power(n, 0.3, 0.1, 0.05) == pytest.approx(
            _mcnemar_power(n, 0.3, 0.1, 0.05))


def test_a_mean_plan_is_the_smallest_n_of_the_paired_t_test() -> None:
    plan = plan_cases(5.0, sd=20.0, alpha=0.05, power=0.9)

    def power(n: int) -> float:
        t = scipy_stats.t.ppf(0.975, n - 1)
        nc = 0.25 * math.sqrt(n)
        return scipy_stats.nct.sf(t, n - 1, nc) + scipy_stats.nct.cdf(-t, n - 1, nc)

    assert power(plan.pairs) >= 0.9 > power(plan.pairs - 1)


def test_repeats_are_worth_what_their_correlation_leaves() -> None:
    one = plan_cases(0.1, discordant=0.3)
    copies = plan_cases(0.1, discordant=0.3, repeats=5, icc=1.0)
    independent = plan_cases(0.1, discordant=0.3, repeats=5, icc=0.0)
    half = plan_cases(0.1, discordant=0.3, repeats=5, icc=0.5)
    assert copies.cases == one.cases  # five copies are one pair
    assert independent.cases == math.ceil(one.pairs / 5)
    assert half.cases == math.ceil(one.pairs * 3 / 5)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({}, "give a baseline rate"),
    ({"baseline_rate": 0.95}, "is not a rate"),
    ({"discordant": 0.05}, "needs at least that share"),
    ({"sd": 1.0, "alpha": 2.0}, "alpha and power"),
])
def test_impossible_plans_are_clear_errors(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        plan_cases(0.1, **kwargs)


def _pilot(tmp_path: Path) -> Path:
    rng = np.random.default_rng(2)
    a = rng.random(50) < 0.6
    b = np.where(rng.random(50) < 0.8, a, ~a)
    records = [RunRecord(variant=v, case_id=f"c{i:02}", repeat=0, answer="x", stop="answer",
                         wall_ms=100.0 + float(rng.normal(0, 10)), input_tokens=5,
                         evaluations=(EvalResult(name="ok", score=float(x[i]),
                                                 passed=bool(x[i])),))
               for v, x in (("A", a), ("B", b)) for i in range(50)]
    path = tmp_path / "pilot.sqlite"
    with Store.create(path, fingerprint={"experiment": "p"}, settings={
            "experiment": "p", "baseline": "A", "variants": ["A", "B"],
            "evaluators": ["ok"], "cases": 50}) as db:
        db.write(records)
    return path


def test_a_pilot_store_gives_the_plan_of_its_discordance(tmp_path: Path) -> None:
    path = _pilot(tmp_path)
    with Store.read(path) as db:
        pilot = build_report(db.records(), db.settings())
    b, c = pilot.comparison("B", "ok").discordant or (0, 0)
    plans = plan_from_store(path, 0.1, metric="ok")
    assert len(plans) == 1 and plans[0].variant == "B"
    assert plans[0].cases == plan_cases(0.1, discordant=(b + c) / 50).cases
    latency = plan_from_store(path, 5.0, metric="latency_ms")[0]
    assert latency.cases == plan_cases(5.0, sd=pilot.comparison("B", "latency_ms").spread
                                       ).cases


def test_the_report_says_what_the_run_could_detect(tmp_path: Path) -> None:
    with Store.read(_pilot(tmp_path)) as db:
        result = build_report(db.records(), db.settings())
    ok = result.comparison("B", "ok")
    b, c = ok.discordant or (0, 0)
    assert ok.detectable is not None
    assert stats.connor_pairs(ok.detectable, (b + c) / 50, 0.05) == pytest.approx(50)
    latency = result.comparison("B", "latency_ms")
    assert latency.detectable is not None and latency.spread is not None
    assert stats.t_power(50, latency.detectable / latency.spread, 0.05) == pytest.approx(0.8)


def test_plan_command(tmp_path: Path) -> None:
    runner = CliRunner()
    done = runner.invoke(app, ["experiment", "plan", "--difference", "0.1",
                               "--baseline-rate", "0.7"])
    assert done.exit_code == 0, done.output
    expected = plan_cases(0.1, baseline_rate=0.7)
    assert f"{expected.cases:,} cases x 1 repeat(s) to detect +10.0 points" in done.stdout
    piloted = runner.invoke(app, ["experiment", "plan", "-d", "0.1", "--pilot",
                                  str(_pilot(tmp_path)), "--json"])
    assert piloted.exit_code == 0, piloted.output
    assert {p["metric"] for p in json.loads(piloted.stdout)} == {"ok", "latency_ms", "tokens"}
    bad = runner.invoke(app, ["experiment", "plan", "-d", "0.1"])
    assert bad.exit_code == 1 and "give a baseline rate" in bad.stderr


@settings(max_examples=40, deadline=None)
@given(cases=st.integers(0, 400), sd=st.floats(0, 1e6), alpha=st.sampled_from([0.01, 0.05]),
       pairs=st.floats(0, 1e5), share=st.floats(0, 1))
def test_minimum_detectable_differences_never_fail(cases: int, sd: float, alpha: float,
                                                    pairs: float, share: float) -> None:
    mean = stats.detectable_mean(cases, sd, alpha)
    assert mean is None or (math.isfinite(mean) and mean >= 0)
    rate = stats.detectable_rate(pairs, share, alpha)
    assert rate is None or 0 < rate <= share
