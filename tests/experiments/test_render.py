"""The terminal report and the CLI print names and docstrings as text: an evaluator called
``[/b]`` or a docstring quoting ``[a, b]`` is shown as written, never read as rich markup."""

from __future__ import annotations

from extras import require

require("experiments")

import io
from pathlib import Path

from experiments_support import write_experiment
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from typer.testing import CliRunner

from gramagent._cli import app
from gramagent.experiments import EvalResult, RunRecord, render_report
from gramagent.experiments._report import build_report
from gramagent.testing import ScriptedServer

_names = st.text(alphabet="[]/=#@:\\abc", min_size=1, max_size=8)


@settings(max_examples=40, deadline=None)
@given(evaluator=_names, stop=_names, experiment=_names)
def test_every_name_is_printed_as_written(evaluator: str, stop: str, experiment: str) -> None:
    records = [RunRecord(variant=v, case_id=str(i), repeat=0, answer="x",
                         stop=stop if i else "answer",
                         evaluations=(EvalResult(name=evaluator, score=float(i % 2),
                                                 passed=bool(i % 2)),))
               for v in ("A", "B") for i in range(3)]
    result = build_report(records, {"experiment": experiment, "baseline": "A",
                                    "variants": ["A", "B"], "evaluators": [evaluator],
                                    "cases": 3})
    console = Console(width=400, file=io.StringIO())
    console.print(render_report(result))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    lines = text.splitlines()
    assert any(line.strip().startswith(evaluator + " ") for line in lines)
    assert f"stopped: {stop}" in text
    assert f"Experiment {experiment}:" in text


def test_a_docstring_with_brackets_is_warned_about_as_written(
        tmp_path: Path, greeter_server: ScriptedServer) -> None:
    path = write_experiment(tmp_path, names=["person0", "person1"],
                            base_url=greeter_server.base_url, variant_b="ab_libs:bracketed")
    done = CliRunner().invoke(app, ["experiment", "run", str(path)], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    assert "Greets [bold]one[/bold] person [a, b] or [/path]." in " ".join(
        done.stderr.split())
