"""Early stopping: the mixture martingale keeps its error rate under continuous monitoring
(seeded simulations), stops early under a planted difference, and a stopped experiment says
so in every report."""

from __future__ import annotations

from extras import require

require("experiments")

import io
import json
from pathlib import Path

import numpy as np
import pytest
from experiments_support import write_experiment
from rich.console import Console
from scipy import special
from typer.testing import CliRunner

from gramagent._cli import app
from gramagent.experiments import load_experiment, render_report, report, run_experiment
from gramagent.experiments._html import html_report
from gramagent.experiments._sequential import Monitor, log_wealth
from gramagent.testing import ScriptedServer

ALPHA = 0.05


def _simulate(rng: np.random.Generator, experiments: int, cases: int, worse: float,
              better: float) -> tuple[float, float]:
    """Share of experiments whose wealth ever reaches 1/alpha, and the mean share of cases
    run (all of them when it never does)."""
    d = rng.choice([-1.0, 0.0, 1.0], p=[worse, 1 - worse - better, better],
                   size=(experiments, cases))
    crossed = log_wealth(d) >= np.log(1 / ALPHA)
    decided = crossed.any(axis=1)
    stop = np.where(decided, crossed.argmax(axis=1) + 1, cases)
    return float(decided.mean()), float(stop.mean() / cases)


def test_no_difference_keeps_false_verdicts_at_or_below_alpha() -> None:
    false, _ = _simulate(np.random.default_rng(0), 400, 200, 0.15, 0.15)
    assert false <= ALPHA


def test_a_planted_difference_stops_well_before_the_end() -> None:
    power, used = _simulate(np.random.default_rng(1), 400, 200, 0.05, 0.25)
    assert power >= 0.95 and used < 0.4


def test_pass_fail_wealth_is_the_beta_binomial_mixture() -> None:
    """One repeat, pass/fail: the wealth after b baseline-only and c variant-only passes is
    2**(b + c) * B(c + 1, b + 1) (a uniform prior on the variant's share)."""
    d = np.array([1.0] * 9 + [-1.0] * 2 + [0.0] * 5)
    exact = (9 + 2) * np.log(2) + special.betaln(9 + 1, 2 + 1)
    assert log_wealth(d)[-1] == pytest.approx(exact, rel=1e-3)


def test_the_monitor_counts_complete_cases_in_dataset_order() -> None:
    from gramagent.experiments import EvalResult, RunRecord

    monitor = Monitor(metric="ok", baseline="A", variants=["A", "B"], cases=["x", "y"],
                      repeats=1, alpha=ALPHA)

    def run(variant: str, case: str, ok: bool) -> RunRecord:
        return RunRecord(variant=variant, case_id=case, repeat=0, answer="", stop="answer",
                         evaluations=(EvalResult(name="ok", score=float(ok), passed=ok),))

    monitor.feed([run("A", "y", False), run("B", "y", True)])
    assert not monitor.decided() and monitor.info(0).cases_done == 0  # x is not complete
    monitor.feed([run("A", "x", False), run("B", "x", True)])
    assert not monitor.decided()
    assert monitor.info(0).cases_done == 2
    assert monitor.info(0).p_values["B"] == pytest.approx(
        float(np.exp(-log_wealth(np.array([1.0, 1.0]))[-1])))


async def test_a_planted_difference_stops_the_experiment_early(
        tmp_path: Path, greeter_server: ScriptedServer) -> None:
    names = [f"person{i}" for i in range(40)]  # half planted: B fails "exact" on them
    path = write_experiment(tmp_path, names=names, base_url=greeter_server.base_url,
                            extra=",\n  stop_when_decided: true")
    experiment = load_experiment(path)
    summary = await run_experiment(experiment, concurrency=2)
    assert summary.ran < 60
    result = report(summary.store)
    assert result.stopped is not None and result.stopped.metric == "exact"
    assert result.stopped.p_values["B"] <= ALPHA
    assert result.stopped.runs_not_run == result.missing == 80 - summary.ran
    console = Console(width=300, file=io.StringIO())
    console.print(render_report(result))
    assert "stopped early when decided" in console.file.getvalue()  # type: ignore[attr-defined]
    assert "stopped early when decided" in html_report(result)
    assert json.loads(json.dumps(result.to_dict()))["stopped"]["cases_done"] >= 8

    # the same command resumes where it stopped: still decided, nothing runs
    again = await run_experiment(experiment, concurrency=2)
    assert again.ran == 0 and report(again.store).stopped is not None
    # without early stopping, the rest runs and the report is a fixed-sample one again
    rest = await run_experiment(experiment, concurrency=4, stop_when_decided=False)
    assert rest.ran == 80 - summary.ran and report(rest.store).stopped is None


def test_stop_when_decided_on_the_command_line(tmp_path: Path,
                                               greeter_server: ScriptedServer) -> None:
    names = [f"person{i}" for i in range(40)]
    path = write_experiment(tmp_path, names=names, base_url=greeter_server.base_url)
    done = CliRunner().invoke(app, ["experiment", "run", str(path), "--stop-when-decided",
                                    "-c", "2", "--json"])
    assert done.exit_code == 0, done.output
    data = json.loads(done.stdout)
    assert data["stopped"]["runs_not_run"] == data["missing"] > 0


def test_with_repeats_a_case_counts_once_all_its_repeats_ran() -> None:
    from gramagent.experiments import EvalResult, RunRecord

    monitor = Monitor(metric="ok", baseline="A", variants=["A", "B"], cases=["x"],
                      repeats=2, alpha=ALPHA)

    def run(variant: str, repeat: int, ok: bool) -> RunRecord:
        return RunRecord(variant=variant, case_id="x", repeat=repeat, answer="", stop="answer",
                         evaluations=(EvalResult(name="ok", score=float(ok), passed=ok),))

    monitor.feed([run("A", 0, False), run("B", 0, True), run("A", 1, False)])
    monitor.decided()
    assert monitor.info(0).cases_done == 0
    monitor.feed([run("B", 1, False)])  # the case's difference: (1 + 0) / 2
    monitor.decided()
    assert monitor.info(0).cases_done == 1
    assert monitor.info(0).p_values["B"] == pytest.approx(
        float(np.exp(-log_wealth(np.array([0.5]))[-1])))
