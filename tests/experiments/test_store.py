"""The store keeps every finished run, whatever it holds, and shares its keys between runners:
tool arguments with integers beyond 64 bits, lone surrogates in a reason or an error, two
runners of one experiment on the same file; a store without runs takes a corrected
experiment."""

from __future__ import annotations

from extras import require

require("experiments")

import asyncio
import csv
import dataclasses
import sqlite3
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from experiments_support import greeter_script, write_experiment
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gramagent._cli import app
from gramagent.errors import ConfigurationError, ExperimentError
from gramagent.experiments import (
    EvalResult,
    RunRecord,
    Store,
    ToolRecord,
    load_experiment,
    report,
    run_experiment,
)
from gramagent.testing import ScriptedServer, ScriptTurn, call

BIG = 123456789012345678901234567890

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8)

_texts = st.text(st.characters(codec=None) | st.characters(
    min_codepoint=0xD800, max_codepoint=0xDFFF, categories=["Cs"]))
"""Any text, lone surrogates included (an evaluator's reason or an error may hold them)."""


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(arguments=_json_values, reason=_texts, error=st.none() | _texts)
def test_any_run_is_saved_and_read_back_exactly(tmp_path: Path, arguments: Any, reason: str,
                                                error: str | None) -> None:
    path = tmp_path / "s.sqlite"
    path.unlink(missing_ok=True)
    record = RunRecord(
        variant="A", case_id="c", repeat=0, answer=None, stop="answer", error=error,
        tools=(ToolRecord(name="t", status="ok", error_type=None, latency_ms=1.0,
                          arguments=arguments),),
        evaluations=(EvalResult(name="e", score=1.0, passed=True, reason=reason),))
    with Store.create(path, fingerprint={}, settings={"baseline": "A"}) as store:
        assert store.write([record]) == 1
        (saved,) = store.records()
    assert saved.tools[0].arguments == arguments
    assert saved.evaluations[0].reason.encode("utf-8", "replace").decode() == \
        saved.evaluations[0].reason  # always valid text
    assert (saved.error is None) == (error is None)


def _big_arguments(path: str, body: Any) -> ScriptTurn:
    messages = body["messages"]
    if messages[-1]["role"] == "user" and messages[-1]["content"].endswith("person1"):
        return call("sayHello", f'{{"personName": {BIG}}}')  # not a string: a tool error
    return greeter_script(path, body)


async def test_a_tool_call_with_a_huge_integer_is_saved(tmp_path: Path) -> None:
    with ScriptedServer(_big_arguments, record=False) as server:
        path = write_experiment(tmp_path, names=["person0", "person1"],
                                base_url=server.base_url)
        summary = await run_experiment(load_experiment(path))
    assert summary.ran == 4
    with Store.read(summary.store) as store:
        calls = [t for r in store.records() if r.case_id == "person1" for t in r.tools]
    assert calls and all(t.arguments == {"personName": BIG} for t in calls)
    assert all(t.status == "error" for t in calls)


async def test_two_runners_on_one_store_save_each_key_once(
        tmp_path: Path, greeter_server: ScriptedServer) -> None:
    names = [f"person{i}" for i in range(8)]
    path = write_experiment(tmp_path, names=names, base_url=greeter_server.base_url)
    first, second = await asyncio.gather(run_experiment(load_experiment(path), concurrency=2),
                                         run_experiment(load_experiment(path), concurrency=2))
    assert first.ran + second.ran == 16
    result = report(first.store)
    assert result.missing == 0 and [v.runs for v in result.variants] == [8, 8]


async def test_a_store_without_runs_takes_the_corrected_experiment(
        tmp_path: Path, greeter_server: ScriptedServer) -> None:
    typo = '[polite:Evaluator {kind: "custom", function: "ab_lib:greets_politely"}]'
    path = write_experiment(tmp_path, names=["person0"], base_url=greeter_server.base_url,
                            evaluators=typo)
    with pytest.raises(ConfigurationError, match="cannot import 'ab_lib'"):
        await run_experiment(load_experiment(path))
    path = write_experiment(tmp_path, names=["person0"], base_url=greeter_server.base_url,
                            evaluators=typo.replace("ab_lib:", "ab_libs:"))
    summary = await run_experiment(load_experiment(path))
    assert summary.ran == 2
    changed = write_experiment(tmp_path, names=["person0"], base_url=greeter_server.base_url)
    with pytest.raises(ExperimentError, match="the evaluators changed"):  # runs: kept safe
        await run_experiment(load_experiment(changed))


async def test_a_store_in_a_directory_not_made_yet_is_made(
        tmp_path: Path, greeter_server: ScriptedServer) -> None:
    path = write_experiment(tmp_path, names=["person0"], base_url=greeter_server.base_url,
                            extra=',\n  store: "results/ab/greetings.sqlite"')
    path.write_text(path.read_text().replace('  store: "greetings.sqlite",\n', ""))
    summary = await run_experiment(load_experiment(path))
    assert summary.ran == 2
    assert (tmp_path / "results" / "ab" / "greetings.sqlite").is_file()
    (tmp_path / "file").write_text("")
    with pytest.raises(ExperimentError, match="cannot make the store's directory"):
        await run_experiment(load_experiment(path), store=tmp_path / "file" / "x.sqlite")


def test_runs_of_two_experiments_never_mix_in_one_store(tmp_path: Path) -> None:
    """The second experiment takes the store while the first has saved no run yet: the
    first one's runs are refused from then on, not mixed in."""
    path = tmp_path / "shared.sqlite"
    run = RunRecord(variant="A", case_id="c", repeat=0, answer="x", stop="answer")
    with Store.create(path, fingerprint={"experiment": "one"},
                      settings={"baseline": "A"}) as first:
        with Store.create(path, fingerprint={"experiment": "two"},
                          settings={"baseline": "A"}) as second:
            assert second.write([run]) == 1
        with pytest.raises(ExperimentError, match="another experiment was started"):
            first.write([dataclasses.replace(run, case_id="d")])
    with Store.read(path) as store:
        assert [r.case_id for r in store.records()] == ["c"]


_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


@pytest.mark.slow
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(answer=st.one_of(st.sampled_from(['=HYPERLINK("http://x","y")', "+1+1", "-2+3",
                                         "@SUM(A1)", "\t=1", "\r=1", "Hello"]),
                        st.text(max_size=8)),
       error=st.none() | st.text(max_size=8), variant=st.sampled_from(["A", "=B", "-C"]))
def test_csv_export_never_hands_a_spreadsheet_a_formula(
        tmp_path: Path, answer: str, error: str | None, variant: str) -> None:
    """Every text cell a spreadsheet would run gets a leading ', every other cell is as it
    was; Parquet is untouched."""
    path = tmp_path / "s.sqlite"
    path.unlink(missing_ok=True)
    record = RunRecord(variant=variant, case_id="c", repeat=0, answer=answer, stop="answer",
                       error=error, evaluations=(EvalResult(name="e", score=1.0, passed=True),))
    with Store.create(path, fingerprint={}, settings={"evaluators": ["e"]}) as store:
        store.write([record])
        store.export(tmp_path / "runs.csv")
        store.export(tmp_path / "runs.parquet")
    with open(tmp_path / "runs.csv", newline="", encoding="utf-8") as text:
        (row,) = list(csv.DictReader(text))
    for column, original in [("variant", variant), ("answer", answer), ("error", error or "")]:
        defused = "'" + original if original.startswith(_FORMULA_STARTS) else original
        assert row[column] == defused
    assert row["score:e"] == "1.0"
    assert pq.read_table(tmp_path / "runs.parquet").to_pylist()[0]["answer"] == answer


@pytest.mark.slow
@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(saved=st.one_of(
    st.just("{not json"),
    _json_values.filter(lambda v: not isinstance(v, dict)).map(str),
    st.dictionaries(st.sampled_from(["baseline", "variants", "alpha"]), _json_values,
                    max_size=3)
    .filter(lambda d: not isinstance(d.get("baseline"), str)).map(repr),
    st.sampled_from(['["B"]', '"A"', '["A", 1]', "{}"])
    .map(lambda variants: f'{{"baseline": "A", "variants": {variants}}}')))
def test_a_store_with_damaged_settings_is_named_so_at_once(tmp_path: Path, saved: str,
                                                          ) -> None:
    """Settings a runner never saves (a store edited or written by hand) are refused when the
    store is opened for a report, as a damaged store: never a KeyError from the report."""
    path = tmp_path / "damaged.sqlite"
    path.unlink(missing_ok=True)
    with Store.create(path, fingerprint={"experiment": "x"}, settings={"baseline": "A"}):
        pass
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = ? WHERE key = 'settings'", (saved,))
    db.close()
    with pytest.raises(ExperimentError, match="a damaged experiment store"):
        report(path)
    done = CliRunner().invoke(app, ["experiment", "report", str(path)])
    assert done.exit_code == 1
    assert "a damaged experiment store" in done.output
    assert "Traceback" not in done.output
