"""examples/analyst.gram end to end: run_agent over the scripted HTTP server, real tools."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest
from extras import needs_tools
from tools_support import EXAMPLES, fast_config

from gramagent._runtime.loop import run_agent
from gramagent._spec.gram.text import load_agent
from gramagent.testing import ScriptedServer, call, reply
from gramagent.tools import builtin_library
from gramagent.tools.sandbox import PythonSandbox, SandboxError

pytestmark = needs_tools

REPL_CODE = """t = read_table("sales")
by_region = t.group_by("region", use_threads=False).aggregate([("revenue", "sum")])
best = max(by_region.to_pylist(), key=lambda r: r["revenue_sum"])
print(best["region"], round(best["revenue_sum"], 2))"""

CHART_ARGS = {
    "df_name": "sales", "logical_name": "monthly_revenue", "chart_type": "column",
    "x_field": "month", "x_label": "Month", "y_label": "Revenue", "title": "Revenue by month",
    "note": "", "series": [{"name": "Revenue", "y_field": "revenue"}],
}


def expected_best(csv_path: Path) -> tuple[str, float]:
    totals: dict[str, float] = {}
    with csv_path.open() as f:
        for row in csv.DictReader(f):
            totals[row["region"]] = totals.get(row["region"], 0.0) + float(row["revenue"])
    region = max(totals, key=lambda k: totals[k])
    return region, round(totals[region], 2)


def require_sandbox(tmp_path: Path) -> None:
    box = PythonSandbox(tmp_path / "probe", config=fast_config())
    try:
        box.start()
    except SandboxError as exc:
        if exc.kind == "unavailable" and os.geteuid() != 0:
            pytest.skip(f"no OS isolation here: {exc}")
        raise
    finally:
        box.close()


@pytest.mark.slow
@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_analyst_runs_end_to_end(api: str, data_dir: Path, tmp_path: Path) -> None:
    """load_csv, describe_table, python_repl and chart run for real; the answer comes back."""
    require_sandbox(tmp_path)
    region, revenue = expected_best(data_dir / "sales.csv")
    script = [
        call("load_csv", {"path": "sales.csv"}),
        call("describe_table", {"df_name": "sales"}),
        call("python_repl", {"code": REPL_CODE}),
        call("chart", CHART_ARGS),
        reply(f"{region} sold the most ({revenue}). Chart: monthly_revenue.png"),
    ]
    agent = load_agent(EXAMPLES / "analyst.gram")
    library = builtin_library(data_dir=data_dir, session_dir=tmp_path / "session",
                              sandbox=fast_config())
    try:
        with ScriptedServer(script) as server:
            response = await run_agent(agent, "Which region sold the most? Chart revenue.",
                                       library=library, model="openai/scripted", api=api,
                                       base_url=server.base_url)
            bodies = [json.dumps(r.body) for r in server.requests]
    finally:
        library.forget()
    names = [i.name for i in response.tool_invocations]
    assert names == ["load_csv", "describe_table", "python_repl", "chart"]
    assert all(i.ok for i in response.tool_invocations), [i.error for i in
                                                          response.tool_invocations]
    results = {i.name: str(i.result) for i in response.tool_invocations}
    assert "table sales: 48 rows" in results["load_csv"]
    assert results["describe_table"].startswith("Table sales: 48 rows, 4 columns")
    assert results["python_repl"] == f"{region} {revenue}"
    chart_png = tmp_path / "session" / "charts" / "monthly_revenue.png"
    assert results["chart"].startswith(f"Chart saved to {chart_png}")
    assert chart_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert response.content.startswith(f"{region} sold the most")
    # each tool result went back to the model, and the tools were offered with their schemas
    assert len(bodies) == 5
    assert f"{region} {revenue}" in bodies[3] and "Chart saved to" in bodies[4]
    first = server.requests[0].body
    offered = {t.get("name") or t["function"]["name"] for t in first["tools"]}
    assert offered == {"load_csv", "describe_table", "python_repl", "chart"}


async def test_bad_chart_arguments_come_back_as_an_error_result(data_dir: Path,
                                                                tmp_path: Path) -> None:
    """An unknown column is an error result the model sees; it can then answer."""
    script = [
        call("load_csv", {"path": "sales.csv"}),
        call("chart", {**CHART_ARGS, "x_field": "monthh"}),
        reply("The column name was wrong."),
    ]
    agent = load_agent(EXAMPLES / "analyst.gram")
    library = builtin_library(data_dir=data_dir, session_dir=tmp_path / "s")
    try:
        with ScriptedServer(script) as server:
            response = await run_agent(agent, "chart it", library=library,
                                       model="openai/scripted", base_url=server.base_url)
    finally:
        library.forget()
    failed = response.tool_invocations[1]
    assert failed.error_type == "tool_exception"
    assert failed.error is not None and "x_field 'monthh' is not a column" in failed.error
    assert response.content == "The column name was wrong."
