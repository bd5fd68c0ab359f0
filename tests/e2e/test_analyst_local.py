"""The analyst example on the embedded 0.5B model, with the real built-in tools.

The small model cannot be expected to finish an analysis; what must hold is that the agent
runs on it offline: in one model request (to keep CI time down) the model calls one of the
analyst's tools with valid arguments and the tool's result (the table description) comes
back. Temperature 0 keeps runs repeatable on one machine.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gramagent._messages import ToolResultMessage
from gramagent._runtime.limits import RunLimits
from gramagent._runtime.loop import run_agent
from gramagent._spec.gram.text import load_agent
from gramagent.errors import LimitExceeded
from gramagent.tools import builtin_library

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ANALYST_TOOLS = {"load_csv", "describe_table", "python_repl", "chart"}


async def test_analyst_runs_on_the_embedded_model(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(EXAMPLES / "data" / "sales.csv", data / "sales.csv")
    agent = load_agent(EXAMPLES / "analyst.gram")
    library = builtin_library(data_dir=data, session_dir=tmp_path / "session")
    try:
        try:
            response = await run_agent(
                agent, "Load sales.csv and tell me which region had the highest revenue.",
                library=library, limits=RunLimits(max_iterations=1),
                settings={"temperature": 0, "max_tokens": 256})
            context = response.context
        except LimitExceeded as exc:  # one request only: the tool ran, no answer requested
            context = exc.context
    finally:
        library.forget()
    results = [m for m in context.messages if isinstance(m, ToolResultMessage)]
    assert results, "the model called no tool"
    assert {m.name for m in results} <= ANALYST_TOOLS
    good = [m for m in results if not m.is_error]
    assert good, [m.content for m in results]
    assert any("Table sales: 48 rows" in m.content or "table sales: 48 rows" in m.content
               for m in good)
