"""Tokens a server did not report are estimated, and every report says so: the mark is set
where the estimate is made (the run's budget), carried by the run's usage, record and store,
and shown in the terminal and HTML reports (an asterisk and a footnote) and the exports."""

from __future__ import annotations

from extras import require

require("experiments")

import asyncio
import csv
import io
from pathlib import Path
from typing import Any

import orjson
import pytest
from experiments_support import AGENT_GRAM, greeter_script, write_experiment
from rich.console import Console

from gramagent import ToolLibrary, load_agent, run_agent
from gramagent.experiments import Store, load_experiment, render_report, report, run_experiment
from gramagent.experiments._html import html_report
from gramagent.testing import ScriptedServer, ScriptTurn, http_response, reply

NOTE = "estimated, the server reported no usage"


def _completion(message: dict[str, Any], finish: str) -> ScriptTurn:
    """A chat completion without a ``usage`` object (as some servers answer)."""
    return http_response({"id": "x", "object": "chat.completion", "model": "m", "choices": [
        {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}]})


def unreported(path: str, body: Any) -> ScriptTurn:
    """The greeter's two steps, never reporting usage."""
    last = body["messages"][-1]
    if last.get("role") == "tool":
        return _completion({"content": str(last.get("content"))}, "stop")
    name = str(last.get("content")).split()[-1].strip(".!?")
    return _completion({"content": None, "tool_calls": [{
        "id": "call_1", "type": "function", "function": {
            "name": "sayHello", "arguments": orjson.dumps({"personName": name}).decode()}}]},
        "tool_calls")


def _greeter() -> Any:
    library = ToolLibrary()

    @library.register
    def sayHello(personName: str = "world") -> str:
        """Returns a friendly greeting message for the given name."""
        return f"Hello, {personName}!"

    return library.bind(load_agent(AGENT_GRAM))


@pytest.mark.slow
@pytest.mark.parametrize(("script", "estimated"), [
    (unreported, True), (greeter_script, False),
    # one request reported, the other not: the run's tokens are partly estimated
    (lambda path, body: reply("Hello!", usage=(3, 2)) if body["messages"][-1].get(
        "role") == "tool" else unreported(path, body), True)])
def test_a_run_says_whether_its_tokens_were_estimated(script: Any, estimated: bool) -> None:
    bound = _greeter()
    with ScriptedServer(script) as server:
        response = asyncio.run(run_agent(bound, "Please greet Ann", base_url=server.base_url))
    assert response.usage.estimated is estimated
    assert response.usage.input_tokens > 0 and response.usage.requests == 2
    assert response.usage.to_dict().get("estimated", False) is estimated


@pytest.mark.slow
def test_reports_and_exports_mark_the_estimated_tokens(tmp_path: Path) -> None:
    with ScriptedServer(greeter_script) as a, ScriptedServer(unreported) as b:
        path = write_experiment(tmp_path, names=["Ann", "Bob", "Cy"], base_url=a.base_url,
                                variant_b="ab_libs:polite")
        text = path.read_text()
        head, tail = text.rsplit(a.base_url, 1)  # variant B's server: no usage reported
        path.write_text(head + b.base_url + tail)
        summary = asyncio.run(run_experiment(load_experiment(path)))
    with Store.read(summary.store) as db:
        records = db.records()
        db.export(tmp_path / "runs.csv")
        result = report(db)
    assert {r.variant: r.estimated_tokens for r in records} == {"A": False, "B": True}
    assert (result.variant("A").estimated, result.variant("B").estimated) == (0, 3)
    assert result.to_dict()["variants"][1]["estimated"] == 3

    console = Console(file=io.StringIO(), width=160)
    console.print(render_report(result))
    terminal = console.file.getvalue()  # type: ignore[attr-defined]
    tokens_row = next(line for line in terminal.splitlines() if line.strip().startswith(
        "tokens"))
    assert tokens_row.count("*") == 1 and tokens_row.rstrip().endswith("*")
    assert f"* {NOTE} (B: 3 of 3 runs)" in terminal

    page = html_report(result)
    assert f"* {NOTE} (B: 3 of 3 runs)" in page
    assert page.count("*<br><small>") == 1  # B's tokens only

    with open(tmp_path / "runs.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert {(r["variant"], r["tokens_estimated"]) for r in rows} == {("A", "False"),
                                                                      ("B", "True")}


def test_a_store_written_before_the_mark_reads_as_reported(tmp_path: Path) -> None:
    """A store made before runs noted estimates (no ``estimated`` column) is reported, and
    takes the column when it is run into again."""
    import sqlite3

    path = tmp_path / "old.sqlite"
    with Store.create(path, fingerprint={"e": 1}, settings={"baseline": "A"}):
        pass
    with sqlite3.connect(path) as db:
        db.execute("ALTER TABLE runs DROP COLUMN estimated")
        db.execute("INSERT INTO runs VALUES ('A', 'c', 0, 'hi', 'answer', NULL, 1, 2, 1, 5.0, "
                   "1.8e9, '[]', '[]')")
    with Store.read(path) as old:
        assert old.records()[0].estimated_tokens is False
        assert report(old).variant("A").estimated == 0
    with Store.create(path, fingerprint={"e": 1}, settings={"baseline": "A"}) as again:
        assert again.records()[0].estimated_tokens is False
    with sqlite3.connect(path) as db:
        assert "estimated" in {row[1] for row in db.execute("PRAGMA table_info(runs)")}
