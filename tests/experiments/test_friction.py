"""Experiments as a new user meets them (issue 33, item 6): where the store goes, what an
export holds, what ``ab`` scores without ``-e``, when warnings come, an honest ETA."""

from __future__ import annotations

from extras import require

require("experiments")

import csv
import io
import json
from datetime import datetime
from pathlib import Path

import orjson
import pytest
from experiments_support import AGENT_GRAM, write_experiment
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console
from typer.testing import CliRunner

from gramagent._cli import app
from gramagent._cli._eta import remaining_seconds
from gramagent._cli.experiment_commands import _Live
from gramagent.experiments import Started, load_experiment, run_experiment
from gramagent.testing import ScriptedServer

NAMES = ["ann", "bob", "cy"]


async def test_a_relative_store_is_written_in_the_working_directory(
        tmp_path: Path, greeter_server: ScriptedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not beside the experiment file (an installed example's is in site-packages)."""
    files, work = tmp_path / "installed", tmp_path / "work"
    files.mkdir()
    work.mkdir()
    path = write_experiment(files, names=NAMES[:1], base_url=greeter_server.base_url)
    monkeypatch.chdir(work)
    summary = await run_experiment(load_experiment(path))
    assert summary.store == "greetings.sqlite"
    assert (work / "greetings.sqlite").is_file()
    assert not list(files.glob("*.sqlite"))


def test_an_export_has_each_runs_input_expected_value_and_iso_start(
        tmp_path: Path, greeter_server: ScriptedServer) -> None:
    path = write_experiment(tmp_path, names=NAMES, base_url=greeter_server.base_url)
    runner = CliRunner()
    assert runner.invoke(app, ["experiment", "run", str(path)]).exit_code == 0
    table = tmp_path / "runs.csv"
    done = runner.invoke(app, ["experiment", "report", "greetings.sqlite", "--export",
                               str(table)])
    assert done.exit_code == 0, done.output
    with table.open() as text:
        rows = list(csv.DictReader(text))
    assert len(rows) == 2 * len(NAMES)
    by_case = {(r["variant"], r["case_id"]): r for r in rows}
    ann = by_case[("A", "ann")]
    assert ann["input"] == "Please greet ann"
    assert json.loads(ann["expected"]) == {"answer": "Hello, ann!"}
    started = datetime.fromisoformat(ann["started"])
    assert started.utcoffset() is not None and started.year >= 2024


def test_ab_without_evaluators_scores_the_cases_one_expected_value_and_says_so(
        tmp_path: Path, greeter_server: ScriptedServer) -> None:
    """Cases whose expected values are ``{"name": ...}`` (as examples/ab's): ``contains``
    of that value, named on stderr, not silently dropped."""
    (tmp_path / "greeter.gram").write_text(AGENT_GRAM)
    (tmp_path / "cases.jsonl").write_bytes(b"\n".join(
        orjson.dumps({"id": n, "input": f"Please greet {n}", "expected": {"name": n}})
        for n in NAMES) + b"\n")
    done = CliRunner().invoke(app, [
        "ab", "greeter.gram", "--variant", "A=ab_libs:polite", "--variant",
        "B=ab_libs:reworded", "--cases", "cases.jsonl", "--base-url", greeter_server.base_url,
        "--json"], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    assert ("evaluators (no -e given): contains_name (the answer contains the case's "
            "expected 'name'), no_tool_errors") in done.stderr
    metrics = [c["metric"] for c in json.loads(done.stdout)["comparisons"]]
    assert metrics[:2] == ["contains_name", "no_tool_errors"]


def test_ab_warns_when_no_default_scores_the_expected_values(
        tmp_path: Path, greeter_server: ScriptedServer) -> None:
    (tmp_path / "greeter.gram").write_text(AGENT_GRAM)
    (tmp_path / "cases.jsonl").write_bytes(b"\n".join(
        orjson.dumps({"id": n, "input": f"Please greet {n}",
                      "expected": {"name": n, "tone": "warm"}}) for n in NAMES) + b"\n")
    done = CliRunner().invoke(app, [
        "ab", "greeter.gram", "--variant", "A=ab_libs:polite", "--variant",
        "B=ab_libs:reworded", "--cases", "cases.jsonl", "--base-url", greeter_server.base_url],
        catch_exceptions=False)
    assert done.exit_code == 0, done.output
    assert "no default evaluator scores the cases' expected values (name, tone)" in done.stderr


def test_binding_warnings_and_the_store_are_said_when_the_store_opens() -> None:
    """Before the first run (the runner calls ``on_start`` before any), not after them."""
    experiment = type("E", (), {"evaluators": (), "name": "demo"})()
    out = io.StringIO()
    live = _Live(experiment, Console(file=out, width=200))  # type: ignore[arg-type]
    live.start(Started(store="demo.sqlite", total=4, done=0,
                       warnings=("variant 'B': tool 'sayHello': description differs",)))
    text = out.getvalue()
    assert "writing " in text and "demo.sqlite" in text
    assert "warning: variant 'B': tool 'sayHello': description differs" in text


def test_the_eta_is_the_mean_time_per_run_times_the_runs_left() -> None:
    """Resumed runs are not counted as finished by this command; none finished: unknown."""
    assert remaining_seconds(600.0, completed=20, total=48) == pytest.approx(840.0)
    assert remaining_seconds(600.0, completed=30, total=48, resumed=10) == pytest.approx(540.0)
    assert remaining_seconds(30.0, completed=10, total=48, resumed=10) is None
    assert remaining_seconds(None, completed=1, total=2) is None
    assert remaining_seconds(5.0, completed=1, total=None) is None


@given(st.floats(0.1, 1e5), st.integers(1, 500), st.integers(0, 500), st.integers(0, 500))
def test_the_eta_never_goes_negative_and_is_zero_when_done(
        elapsed: float, done: int, left: int, resumed: int) -> None:
    total = resumed + done + left
    eta = remaining_seconds(elapsed, completed=resumed + done, total=total, resumed=resumed)
    assert eta is not None and eta >= 0
    assert (eta == 0) == (left == 0)


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ab" / "experiment.gram"


def test_check_accepts_the_shipped_experiment_and_reports_a_bad_one(tmp_path: Path) -> None:
    """``gramagent check`` reads an experiment file as one (its agent, cases, variants,
    evaluators), not as an agent file with an unknown type."""
    runner = CliRunner()
    done = runner.invoke(app, ["check", str(EXAMPLE)])
    assert done.exit_code == 0, done.output
    assert done.stdout.strip() == "OK: 1 file, 0 agents, 0 tools, 1 experiment"
    bad = tmp_path / "bad.gram"
    bad.write_text(EXAMPLE.read_text().replace('"cases.jsonl"', '"missing.jsonl"')
                   .replace('alpha: 0.05', 'alpha: 2'))
    (tmp_path / "hello.gram").write_text((EXAMPLE.parent / "hello.gram").read_text())
    failed = runner.invoke(app, ["check", str(bad)])
    assert failed.exit_code == 1
    assert "alpha must be a number between 0 and 1" in failed.stderr
    assert "unknown type 'Experiment'" not in failed.stderr


def test_the_eta_column_renders_the_mean_rate_estimate() -> None:
    from rich.progress import Progress

    from gramagent._cli._eta import MeanRateRemainingColumn

    column = MeanRateRemainingColumn()
    progress = Progress(column, console=Console(file=io.StringIO()))
    task_id = progress.add_task("x", total=48, resumed=8)
    task = progress.tasks[0]
    assert column.render(task).plain == "-:--:--"  # nothing finished yet
    progress.update(task_id, completed=28)
    shown = column.render(task).plain
    hours, minutes, seconds = (int(part) for part in shown.split(":"))
    assert 0 <= minutes < 60 and 0 <= seconds < 60 and hours >= 0
