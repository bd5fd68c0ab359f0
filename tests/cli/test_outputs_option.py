"""``--outputs DIR``: a chart the analyst draws is still there after the command (issue 33).

Through the installed console script, the analyst example against the scripted server on
127.0.0.1 (real HTTP), the real ``load_csv`` and ``chart`` tools.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_support import run_gramagent
from extras import needs_tools

from gramagent.testing import ScriptedServer, call, reply

pytestmark = [needs_tools, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
ANALYST = ROOT / "examples" / "analyst.gram"
CHART = {
    "df_name": "sales", "logical_name": "region", "chart_type": "column",
    "x_field": "month", "x_label": "Month", "y_label": "Revenue", "title": "Revenue by month",
    "note": "", "series": [{"name": "Revenue", "y_field": "revenue"}],
}


def _run_analyst(tmp_path: Path, *more: str) -> tuple[str, str]:
    """Run the analyst (load_csv, chart, answer); (stderr, the chart tool's result)."""
    script = [call("load_csv", {"path": "sales.csv"}), call("chart", CHART),
              reply("Chart saved.")]
    with ScriptedServer(script) as server:
        done = run_gramagent("run", str(ANALYST), "Chart monthly revenue.", "--model",
                             "openai/scripted", "--base-url", server.base_url, *more,
                             cwd=tmp_path, env={"GRAMAGENT_DATA_DIR": str(ROOT / "examples"
                                                                           / "data")})
        results = [m for m in server.requests[-1].body["messages"] if m["role"] == "tool"]
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Chart saved."
    return done.stderr, results[-1]["content"]


def test_outputs_keeps_the_chart_where_its_path_says(tmp_path: Path) -> None:
    """With --outputs, the chart's path is in DIR, the file outlives the command, and the
    command says where the files are."""
    kept = tmp_path / "out"
    stderr, result = _run_analyst(tmp_path, "--outputs", str(kept))
    charts = list((kept / "charts").glob("*.png"))
    assert len(charts) == 1 and charts[0].stat().st_size > 0
    assert str(charts[0].resolve()) in result
    assert f"in {kept}:" in stderr and "charts/" in stderr and "outputs: " in stderr


def test_without_outputs_the_command_says_the_files_were_removed(tmp_path: Path) -> None:
    """Without --outputs, the chart was in a temporary workspace: gone at exit, and said so
    (naming the file and the option that keeps it)."""
    stderr, result = _run_analyst(tmp_path)
    assert "/gramagent-session-" in result
    path = result[result.index("/"):].split()[0].rstrip(".,;:)")
    assert not Path(path).exists(), path
    assert "temporary workspace, removed at exit" in stderr
    assert "charts/region.png" in stderr and "--outputs DIR keeps them" in stderr


def test_outputs_with_a_library_without_workspaces_is_one_error_line(tmp_path: Path) -> None:
    """--outputs with a --tools library that has no built-in tools' workspace: refused
    before any request, one line naming the option, no traceback."""
    (tmp_path / "own_tools.py").write_text(
        "from gramagent import ToolLibrary, tool\n\n"
        "@tool(name='sayHello')\n"
        "def say_hello(personName: str = 'world') -> str:\n"
        "    \"\"\"Returns a friendly greeting message for the given name\"\"\"\n"
        "    return f'Hello, {personName}!'\n\n"
        "library = ToolLibrary([say_hello])\n")
    done = run_gramagent("run", str(ROOT / "examples" / "hello_world.gram"), "Hi",
                         "--model", "openai/scripted", "--base-url", "http://127.0.0.1:9/v1",
                         "--tools", "own_tools:library", "--outputs", str(tmp_path / "out"),
                         cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith("ConfigurationError: --outputs keeps the files")
    assert "Traceback" not in done.stderr and not (tmp_path / "out").exists()
