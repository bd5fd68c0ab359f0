"""The terminal report and the CLI print names and docstrings as text: an evaluator called
``[/b]`` or a docstring quoting ``[a, b]`` is shown as written, never read as rich markup."""

from __future__ import annotations

from extras import require

require("experiments")

import io
import re
from collections import Counter
from pathlib import Path

import pytest
from experiments_support import write_experiment
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from typer.testing import CliRunner

from gramagent._cli import app
from gramagent.experiments import EvalResult, RunRecord, render_report
from gramagent.experiments._html import html_report
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


_run = st.tuples(st.sampled_from(["A", "B"]), st.sampled_from(["c1", "c2", "c3"]),
                 st.sampled_from(["answer", "error:ModelAPIError"]), st.booleans())


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(runs=st.lists(_run, max_size=6, unique_by=lambda r: r[:2]))
def test_no_report_shows_nan_whatever_runs_are_missing(
        runs: list[tuple[str, str, str, bool]]) -> None:
    """A variant without runs reads "no runs", a comparison without pairs "no pairs": in the
    terminal and in HTML, never ``nan%`` or ``+nan``."""
    records = [RunRecord(variant=v, case_id=c, repeat=0, answer=None if stop != "answer"
                         else "x", stop=stop, wall_ms=5.0, input_tokens=3,
                         evaluations=(EvalResult(name="ok", score=float(ok), passed=ok),))
               for v, c, stop, ok in runs]
    result = build_report(records, {"experiment": "e", "baseline": "A", "variants": ["A", "B"],
                                    "evaluators": ["ok"], "cases": 3})
    console = Console(width=400, file=io.StringIO())
    console.print(render_report(result))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    page = re.sub(r"<img [^>]*>", "", html_report(result))  # base64 may spell "nan"
    for shown in (text, page):
        assert "nan" not in shown.lower()
    counts = Counter(v for v, *_ in runs)
    for variant in ("A", "B"):
        if not counts[variant]:
            assert "no runs" in text and "no runs" in page
    if any(c.pairs == 0 for c in result.comparisons):
        assert "no pairs" in text and "no pairs" in page
