"""The CLI: ``gramagent experiment run|report`` and ``gramagent ab``, errors without
tracebacks."""

from __future__ import annotations

from extras import require

require("experiments")

import csv
import json
import re
from pathlib import Path
from typing import Any

import pytest
from experiments_support import AGENT_GRAM, greeter_script, write_cases, write_experiment
from typer.testing import CliRunner

from gramagent._cli import app
from gramagent.testing import ScriptedServer, ScriptTurn, error

NAMES = [f"person{i}" for i in range(24)]


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_experiment_run_then_report_with_html_and_export(
        tmp_path: Path, greeter_server: ScriptedServer, runner: CliRunner,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = write_experiment(tmp_path, names=NAMES, base_url=greeter_server.base_url)
    done = runner.invoke(app, ["experiment", "run", str(path), "--json", "-c", "3"],
                         catch_exceptions=False)
    assert done.exit_code == 0, done.output
    data = json.loads(done.stdout)
    exact = next(c for c in data["comparisons"] if c["metric"] == "exact")
    assert exact["discordant"] == [12, 0] and exact["outcome"] == "worse"
    assert "48 runs done, 0 already in" in done.stderr

    again = runner.invoke(app, ["experiment", "run", str(path)], catch_exceptions=False)
    assert again.exit_code == 0
    assert "0 runs done, 48 already in" in again.stderr
    assert "Verdicts" in again.stdout and "worse: -50.0 points" in again.stdout

    html, table = tmp_path / "report.html", tmp_path / "runs.csv"
    shown = runner.invoke(app, ["experiment", "report", str(tmp_path / "greetings.sqlite"),
                                "--html", str(html), "--export", str(table)],
                          catch_exceptions=False)
    assert shown.exit_code == 0, shown.output
    page = html.read_text()
    assert page.count('src="data:image/png;base64,') == 4
    assert not re.search(r"(src|href)=\"?https?:", page)  # nothing loaded from the network
    assert "Hi person0." in page and "Hello, person0!" in page  # the disagreement table
    with table.open() as text:
        rows = list(csv.DictReader(text))
    assert len(rows) == 48 and rows[0]["variant"] == "A" and rows[0]["score:exact"] == "1.0"


def test_ab_one_liner(tmp_path: Path, greeter_server: ScriptedServer, runner: CliRunner,
                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "greeter.gram").write_text(AGENT_GRAM)
    write_cases(tmp_path / "cases.jsonl", NAMES)
    done = runner.invoke(app, [
        "ab", "greeter.gram", "--variant", "A=ab_libs:polite", "--variant",
        "B=ab_libs:reworded", "--cases", "cases.jsonl", "--base-url", greeter_server.base_url,
        "-e", "exact", "-e", "tool_called=sayHello", "--json"], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    data = json.loads(done.stdout)
    assert [c["metric"] for c in data["comparisons"]] == [
        "exact", "tool_called:sayHello", "latency_ms", "tokens"]
    assert data["comparisons"][0]["outcome"] == "no difference"
    assert "description differs" in done.stderr  # the reworded docstring: a warning
    assert (tmp_path / "greeter_ab.sqlite").is_file()


@pytest.mark.parametrize(("args", "message"), [
    (["experiment", "report", "missing.sqlite"], "missing.sqlite: no such store"),
    (["experiment", "report", "greeter.gram"], "greeter.gram: not an experiment store"),
    (["ab", "greeter.gram", "--variant", "A", "--variant", "B=x:y", "--cases", "cases.jsonl"],
     "--variant 'A': expected NAME=MODULE:LIBRARY"),
    (["ab", "greeter.gram", "--variant", "A=ab_libs:polite", "--variant", "B=nope:lib",
      "--cases", "cases.jsonl"], "cannot import 'nope'"),
    (["experiment", "run", "bad.gram"], "bad.gram:1:"),
    (["experiment", "run", "bad.gram", "--rate", "x"], "bad.gram:1:"),
])
def test_errors_are_one_line_without_traceback(tmp_path: Path, runner: CliRunner,
                                               monkeypatch: pytest.MonkeyPatch,
                                               args: list[str], message: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "greeter.gram").write_text(AGENT_GRAM)
    write_cases(tmp_path / "cases.jsonl", NAMES[:2])
    (tmp_path / "bad.gram").write_text("[oops:Experiment {agent: 3} | ]\n")
    result = runner.invoke(app, args)
    assert result.exit_code == 1, result.output
    assert message in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize("rate", ["nan", "inf", "0", "-2", "fast"])
def test_a_rate_that_is_not_a_positive_finite_number_is_refused(
        tmp_path: Path, runner: CliRunner, monkeypatch: pytest.MonkeyPatch, rate: str) -> None:
    monkeypatch.chdir(tmp_path)
    path = write_experiment(tmp_path, names=["ann"], base_url="http://127.0.0.1:9/v1")
    result = runner.invoke(app, ["experiment", "run", str(path), "--rate",
                                 f"openai/scripted={rate}"])
    assert result.exit_code == 1, result.output
    assert f"--rate 'openai/scripted={rate}': expected MODEL=PER_SECOND" in result.stderr
    assert not list(tmp_path.glob("*.sqlite"))  # refused before any run or store


@pytest.mark.slow
def test_ctrl_c_stops_cleanly_and_the_same_command_resumes(tmp_path: Path) -> None:
    import dataclasses
    import itertools
    import os
    import signal
    import sqlite3
    import subprocess
    import sys
    import threading
    import time

    # Slow enough after the first runs that the command is still running when the test,
    # however starved of CPU, sees them stored and interrupts it; quick again afterwards.
    answered = itertools.count()
    interrupted = threading.Event()

    def slow(path: str, body: Any) -> Any:
        quick = next(answered) < 12 or interrupted.is_set()
        return dataclasses.replace(greeter_script(path, body), delay=0.05 if quick else 0.5)

    names = [f"person{i}" for i in range(16)]
    with ScriptedServer(slow, record=False) as server:
        path = write_experiment(tmp_path, names=names, base_url=server.base_url)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])}
        command = [sys.executable, "-m", "gramagent", "experiment", "run", str(path), "-c", "2"]
        # A shell that starts the suite in the background has it ignore SIGINT, and a child
        # inherits an ignored signal: start the command as from a terminal, where Ctrl-C
        # means what it means (a Python handler is not inherited: the child gets the default).
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            child = subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        finally:
            signal.signal(signal.SIGINT, previous)
        store = tmp_path / "greetings.sqlite"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and child.poll() is None:
            try:
                with sqlite3.connect(store) as db:
                    if db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] >= 6:
                        break
            except sqlite3.OperationalError:
                pass
            time.sleep(0.02)
        child.send_signal(signal.SIGINT)
        interrupted.set()
        out, err = child.communicate(timeout=60)
        assert child.returncode == 130, err
        assert "Traceback" not in out + err
        saved = int(err.split("stopped: ")[1].split(" runs saved")[0])
        with sqlite3.connect(store) as db:
            assert db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == saved
        assert 6 <= saved < 2 * len(names)
        done = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True,
                              timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"{2 * len(names) - saved} runs done, {saved} already in" in done.stderr


def test_runs_that_ended_on_an_error_are_run_again_on_request(
        tmp_path: Path, greeter_server: ScriptedServer, runner: CliRunner,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """B's server is down for the first run (HTTP 503 for every request): its runs are saved
    as errors; a plain rerun keeps them, --retry-errors runs them again."""
    monkeypatch.chdir(tmp_path)
    down = tmp_path / "down"
    down.touch()

    def flaky(path: str, body: Any) -> ScriptTurn:
        return (error(503, "down", retry_after=0) if down.exists()
                else greeter_script(path, body))

    with ScriptedServer(flaky, record=False) as server:
        path = write_experiment(tmp_path, names=NAMES[:6], base_url=greeter_server.base_url)
        path.write_text(path.read_text().replace(
            f'"ab_libs:planted", base_url: "{greeter_server.base_url}"',
            f'"ab_libs:planted", base_url: "{server.base_url}"'))
        first = runner.invoke(app, ["experiment", "run", str(path), "--json"])
        assert first.exit_code == 0, first.output
        assert json.loads(first.stdout)["variants"][1]["stops"] == {"error:ModelAPIError": 6}
        assert "6 runs ended on an error; --retry-errors runs them again" in first.stderr
        down.unlink()
        again = runner.invoke(app, ["experiment", "run", str(path), "--json"])
        assert "0 runs done, 12 already in" in again.stderr
        retried = runner.invoke(app, ["experiment", "run", str(path), "--json",
                                      "--retry-errors"])
    assert retried.exit_code == 0, retried.output
    assert "6 runs done, 6 already in" in retried.stderr
    assert "ended on an error" not in retried.stderr
    assert json.loads(retried.stdout)["variants"][1]["stops"] == {"answer": 6}


def test_a_rate_limit_of_a_model_no_variant_uses_is_refused(
        tmp_path: Path, runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    """A typo in the model of a rate limit would silently limit nothing."""
    monkeypatch.chdir(tmp_path)
    path = write_experiment(tmp_path, names=["ann"], base_url="http://127.0.0.1:9/v1")
    result = runner.invoke(app, ["experiment", "run", str(path), "--rate", "openai/scriptd=5"])
    assert result.exit_code == 1, result.output
    assert ("rate limit of 'openai/scriptd': no variant uses that model (they use "
            "openai/scripted), so it would limit nothing") in " ".join(result.stderr.split())
    assert not list(tmp_path.glob("*.sqlite"))
