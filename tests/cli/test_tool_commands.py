"""``gramagent tool`` and ``gramagent tools``: one tool call without a model, the tool list."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from extras import needs_tools
from typer.testing import CliRunner

from gramagent._cli import app

ROOT = Path(__file__).resolve().parents[2]
SALES_CSV = ROOT / "examples" / "data" / "sales.csv"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def session(tmp_path: Path) -> Path:
    """A workspace whose data folder holds the bundled sales.csv."""
    root = tmp_path / "session"
    (root / "data").mkdir(parents=True)
    shutil.copy(SALES_CSV, root / "data" / "sales.csv")
    return root


def test_tool_prints_the_result(runner: CliRunner) -> None:
    result = runner.invoke(app, ["tool", "sayHello", '{"personName": "Ann"}'])
    assert result.exit_code == 0, result.output
    assert result.stdout == "Hello, Ann! Nice to meet you.\n"
    default = runner.invoke(app, ["tool", "sayHello"])
    assert default.stdout == "Hello, world! Nice to meet you.\n"


@pytest.mark.parametrize(("args", "message"), [
    ('{"personName": 3}', "invalid arguments for 'sayHello': personName: 3 is not of type"),
    ('{"personName": ', "are not valid JSON"),
    ('["Ann"]', "must be a JSON object, got list"),
])
def test_bad_arguments_are_refused_before_running(runner: CliRunner, args: str,
                                                  message: str) -> None:
    result = runner.invoke(app, ["tool", "sayHello", args])
    assert result.exit_code == 1
    assert result.stdout == ""
    assert "ValidationError" in result.stderr and message in result.stderr


def test_unknown_tool_suggests_a_near_name(runner: CliRunner) -> None:
    result = runner.invoke(app, ["tool", "sayHelo", "{}"])
    assert result.exit_code == 1
    assert "no tool named 'sayHelo'" in result.stderr and "did you mean 'sayHello'" in result.stderr


@needs_tools
def test_session_keeps_tables_and_charts(runner: CliRunner, session: Path) -> None:
    """load_csv then chart in two commands sharing --session; the PNG stays."""
    loaded = runner.invoke(app, ["tool", "load_csv", '{"path": "sales.csv"}',
                                 "--session", str(session)])
    assert loaded.exit_code == 0, loaded.stderr
    assert "table sales: 48 rows" in loaded.stdout
    chart = {"df_name": "sales", "logical_name": "by_region", "chart_type": "bar",
             "x_field": "region", "x_label": "", "y_label": "", "title": "", "note": "",
             "series": [{"name": "Units", "y_field": "units"}]}
    drawn = runner.invoke(app, ["tool", "chart", json.dumps(chart), "--session", str(session)])
    assert drawn.exit_code == 0, drawn.stderr
    png = session / "charts" / "by_region.png"
    assert drawn.stdout.startswith(f"Chart saved to {png}")
    assert png.read_bytes()[:4] == b"\x89PNG"


@needs_tools
def test_tool_errors_go_to_stderr_with_status_1(runner: CliRunner, session: Path) -> None:
    result = runner.invoke(app, ["tool", "describe_table", '{"df_name": "nope"}',
                                 "--session", str(session), "--json"])
    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    assert payload["ok"] is False and payload["error_type"] == "tool_exception"
    assert "there are no tables yet" in payload["output"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="python_repl needs Linux")
def test_python_repl_from_the_command_line(runner: CliRunner, session: Path) -> None:
    result = runner.invoke(app, ["tool", "python_repl", '{"code": "print(6 * 7)"}',
                                 "--session", str(session)])
    if result.exit_code != 0 and "refusing to run code" in result.stderr and os.geteuid() != 0:
        pytest.skip("no OS isolation for the sandbox here")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "42\n"
    assert (session / "work").is_dir()


def test_session_needs_a_factory_taking_session_dir(runner: CliRunner, tmp_path: Path) -> None:
    """--session with a library object (not a factory taking session_dir) is refused."""
    module = tmp_path / "my_tools_cli.py"
    module.write_text(
        "from gramagent._runtime.library import ToolLibrary\n"
        "library = ToolLibrary()\n"
        "@library.register\n"
        "def double(n: int) -> int:\n"
        "    '''Doubles a number.'''\n"
        "    return 2 * n\n")
    sys.path.insert(0, str(tmp_path))
    try:
        ok = runner.invoke(app, ["tool", "double", '{"n": 21}', "--tools", "my_tools_cli:library"])
        assert ok.exit_code == 0 and ok.stdout == "42\n"
        refused = runner.invoke(app, ["tool", "double", '{"n": 1}', "--tools",
                                      "my_tools_cli:library", "--session", str(tmp_path / "s")])
        assert refused.exit_code == 1
        assert "is not a factory taking session_dir=" in refused.stderr
        listed = runner.invoke(app, ["tools", "--tools", "my_tools_cli:library"])
        assert listed.stdout.splitlines() == ["double :: (n::Integer)==>(::Integer)",
                                              "    Doubles a number."]
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("my_tools_cli", None)


@needs_tools
def test_tools_lists_signatures(runner: CliRunner) -> None:
    result = runner.invoke(app, ["tools"])
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0] == 'sayHello :: (personName::String {default: "world"})==>(::String)'
    assert "    Returns a friendly greeting message for the given name" in lines
    names = [line.split(" :: ")[0] for line in lines if " :: " in line]
    assert names == ["sayHello", "sayGoodbye", "python_repl", "load_csv", "describe_table", "chart"]
    as_json = json.loads(runner.invoke(app, ["tools", "--json"]).stdout)
    chart = next(e for e in as_json if e["name"] == "chart")
    assert chart["schema"]["required"][0] == "df_name"
    assert "logical_name::String {default: \"\", required: true}" in chart["signature"]
