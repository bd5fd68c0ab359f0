"""The CLI: ``gramagent experiment run|report`` and ``gramagent ab``, errors without
tracebacks."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
from experiments_support import AGENT_GRAM, write_cases, write_experiment
from typer.testing import CliRunner

from gramagent._cli import app
from gramagent.testing import ScriptedServer

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
