"""The HTML report: the forest plot draws each difference in its own unit (no latency as an
impossible share of the baseline), the page names models, date, duration and inputs, says
how tokens were counted, and shows what the run could detect."""

from __future__ import annotations

from extras import require

require("experiments")

import re

import numpy as np
from matplotlib.figure import Figure

from gramagent.experiments import EvalResult, RunRecord
from gramagent.experiments._html import _differences_figure, html_report
from gramagent.experiments._report import LATENCY, build_report


def _report():  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(4)
    # a skewed baseline with one very slow run: a difference of -34% [-164%, +9%] came of it
    walls = {"A": rng.gamma(1.0, 300.0, 30), "B": rng.gamma(1.0, 200.0, 30)}
    walls["A"][3] = 30_000.0
    records = [RunRecord(variant=v, case_id=f"c{i:02}", repeat=0, answer="x", stop="answer",
                         wall_ms=float(walls[v][i]), input_tokens=100, output_tokens=20,
                         started=1.8e9 + 10 * i,
                         evaluations=(EvalResult(name="ok", score=float(i % 2),
                                                 passed=bool(i % 2)),))
               for v in "AB" for i in range(30)]
    return build_report(records, {
        "experiment": "e", "baseline": "A", "variants": ["A", "B"], "evaluators": ["ok"],
        "cases": 30, "agent": "greeter", "dataset": "cases.jsonl",
        "models": {"A": "openai/gpt-4o", "B": "openai/gpt-4o-mini"},
        "prices": {"openai/gpt-4o": "2.5,10", "openai/gpt-4o-mini": "0.15,0.6"}})


def test_the_forest_plot_draws_each_difference_in_its_own_unit() -> None:
    result = _report()
    figure = _differences_figure(result, Figure)
    titles = [axes.get_title(loc="left") for axes in figure.axes]
    assert titles == ["pass rates: variant − baseline, points",
                      "latency: variant − baseline, ms per run",
                      "tokens: variant − baseline, per run",
                      "cost: variant − baseline, dollars per run"]
    latency = result.comparison("B", LATENCY)
    segment = figure.axes[1].collections[0].get_segments()[0]
    assert (segment[0][0], segment[1][0]) == (latency.low, latency.high)  # in ms, as is
    assert "% of the baseline" not in " ".join(a.get_xlabel() for a in figure.axes)


def test_the_page_names_models_date_duration_inputs_and_token_counting() -> None:
    page = re.sub(r"<img [^>]*>", "", html_report(_report()))
    assert "openai/gpt-4o-mini" in page and "openai/gpt-4o</code>" in page
    assert "2027-01-15 08:00:00 to 08:04:50 UTC (4:50 min)" in page
    assert "<code>cases.jsonl</code>" in page and "<code>greeter</code>" in page
    assert "estimated from the text" in page
    assert "What this run could detect" in page and "could detect (80% power)" in page
    assert "cost_usd" in page
