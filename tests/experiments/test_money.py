"""Money: prices per model turn tokens into dollars per run, per passed run, and a paired
cost difference, in every report; no price, no cost."""

from __future__ import annotations

from extras import require

require("experiments")

import json
import math
from pathlib import Path

import numpy as np
import pytest
from experiments_support import write_experiment
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats as scipy_stats
from typer.testing import CliRunner

from gramagent._cli import app
from gramagent._prices import Price, parse_price, prices_from
from gramagent.errors import ConfigurationError
from gramagent.experiments import EvalResult, RunRecord
from gramagent.experiments import _stats as stats
from gramagent.experiments._report import COST, build_report
from gramagent.testing import ScriptedServer

SETTINGS = {"experiment": "e", "baseline": "A", "variants": ["A", "B"], "evaluators": ["ok"],
            "cases": 12, "models": {"A": "openai/big", "B": "openai/small"},
            "prices": {"openai/big": [2.5, 10.0]}}


def _records() -> list[RunRecord]:
    return [RunRecord(variant=v, case_id=f"c{i:02}", repeat=0, answer="x", stop="answer",
                      input_tokens=1000 + 37 * i, output_tokens=200 + (v == "B") * 13 * i,
                      evaluations=(EvalResult(name="ok", score=float(i % 3 > 0),
                                              passed=i % 3 > 0),))
            for v in "AB" for i in range(12)]


def test_parse_price() -> None:
    assert parse_price("openai/gpt-4o-mini=0.15,0.6") == ("openai/gpt-4o-mini",
                                                          Price(0.15, 0.6))
    assert parse_price("local/a=b=0,0") == ("local/a=b", Price(0.0, 0.0))
    assert Price(2.0, 8.0).cost(1_000_000, 500_000) == 6.0


@given(st.text(max_size=30))
def test_a_price_either_parses_or_is_a_clear_error(text: str) -> None:
    try:
        _model, price = parse_price(text)
    except ConfigurationError as exc:
        assert "expected MODEL=IN,OUT" in str(exc)
    else:
        assert math.isfinite(price.input) and price.input >= 0 and price.output >= 0


def test_prices_from_names_the_model() -> None:
    with pytest.raises(ConfigurationError, match="price of 'm'"):
        prices_from({"m": [1, -2]})
    assert prices_from({"m": "1,2", "n": (0, 3)}) == {"m": Price(1, 2), "n": Price(0, 3)}


def test_cost_per_run_per_pass_and_the_paired_difference() -> None:
    records = _records()
    result = build_report(records, SETTINGS, {"openai/small": Price(0.15, 0.6)})
    price = {"A": Price(2.5, 10.0), "B": Price(0.15, 0.6)}
    cost = {v: np.array([price[v].cost(r.input_tokens, r.output_tokens)
                         for r in records if r.variant == v]) for v in "AB"}
    for v in "AB":
        summary = result.variant(v)
        assert summary.cost_total == pytest.approx(cost[v].sum())
        assert summary.cost_per_pass == pytest.approx(cost[v].sum() / 8)  # 8 of 12 pass
        metric = next(m for m in summary.metrics if m.name == COST)
        assert metric.value == pytest.approx(cost[v].mean())
    compared = result.comparison("B", COST)
    assert compared.difference == pytest.approx((cost["B"] - cost["A"]).mean())
    rng = stats.rng_for(0, "B", COST, "paired")
    boot = scipy_stats.bootstrap((cost["B"] - cost["A"],), np.mean, method="BCa",
                                 n_resamples=stats.RESAMPLES, rng=rng)
    assert (compared.low, compared.high) == pytest.approx(
        (boot.confidence_interval.low, boot.confidence_interval.high))
    assert compared.outcome == "better"  # B is cheaper: lower is better
    assert json.dumps(result.to_dict())


def test_no_price_no_cost() -> None:
    result = build_report(_records(), SETTINGS)  # B's model has no price
    assert all(c.metric != COST for c in result.comparisons)
    assert all(v.cost_total is None for v in result.variants)


def test_experiment_run_with_prices_reports_cost(tmp_path: Path,
                                                 greeter_server: ScriptedServer) -> None:
    path = write_experiment(tmp_path, names=["ann", "bob", "cy", "dee"],
                            base_url=greeter_server.base_url,
                            extra=',\n  prices: {`openai/scripted`: "1.0,4"}')
    runner = CliRunner()
    done = runner.invoke(app, ["experiment", "run", str(path), "--json"])
    assert done.exit_code == 0, done.output
    data = json.loads(done.stdout)
    assert data["variants"][0]["price"] == [1.0, 4.0]
    assert data["variants"][0]["cost_total"] > 0
    assert any(c["metric"] == COST for c in data["comparisons"])
    store = tmp_path / "greetings.sqlite"
    shown = runner.invoke(app, ["experiment", "report", str(store), "--price",
                                "openai/scripted=10,40"])
    assert shown.exit_code == 0, shown.output
    assert "cost per pass" in shown.stdout and "cost_usd" in shown.stdout
    bad = runner.invoke(app, ["experiment", "report", str(store), "--price", "x=1"])
    assert bad.exit_code == 1 and "expected MODEL=IN,OUT" in bad.stderr


def test_a_bad_price_in_the_file_is_reported_with_its_place(tmp_path: Path) -> None:
    from gramagent.errors import ExperimentError
    from gramagent.experiments import load_experiment

    path = write_experiment(tmp_path, names=["ann"], base_url="http://127.0.0.1:9/v1",
                            extra=',\n  prices: {`openai/scripted`: "cheap"}')
    with pytest.raises(ExperimentError, match=r"greetings.gram:\d+:\d+: .*prices must be"):
        load_experiment(path)
