"""A missing extra names its exact install command (issue 12, items 3 and 4).

Through the installed console script, with the ``tools`` extra's packages hidden as if not
installed (see ``cli_support``): the README's "try a tool" commands and the analyst example
say which extra to install, with the command for *this* installation, and exit non-zero.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from cli_support import run_gramagent

from gramagent._install import install_command

ROOT = Path(__file__).resolve().parents[2]
TOOLS_EXTRA = ("pyarrow", "matplotlib")


@pytest.fixture
def session(tmp_path: Path) -> Path:
    """The README's session directory: data/sales.csv."""
    data = tmp_path / "s" / "data"
    data.mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "data" / "sales.csv", data)
    return tmp_path / "s"


def test_the_hint_is_the_command_for_a_checkout() -> None:
    """These tests run from a checkout: the hint is an editable install of it."""
    assert install_command("tools", cwd=Path("/")) == f'pip install -e "{ROOT}[tools]"'


@pytest.mark.slow
def test_a_data_tool_without_the_extra_names_the_install_command(
    session: Path, tmp_path: Path,
) -> None:
    done = run_gramagent("tool", "describe_table", '{"df_name": "sales"}',
                         "--session", str(session), cwd=tmp_path, hide=TOOLS_EXTRA)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "'tools' extra" in done.stderr
    assert install_command("tools", cwd=tmp_path) in done.stderr


@pytest.mark.slow
def test_the_tool_list_says_what_is_missing_and_how_to_install_it(tmp_path: Path) -> None:
    done = run_gramagent("tools", cwd=tmp_path, hide=TOOLS_EXTRA)
    assert done.returncode == 0
    assert "sayHello ::" in done.stdout
    assert "describe_table" not in done.stdout
    for name in ("load_csv", "describe_table", "chart"):
        assert f"not available: {name}: it needs the 'tools' extra" in done.stderr
    assert install_command("tools", cwd=tmp_path) in done.stderr


@pytest.mark.slow
def test_the_analyst_example_without_the_extra_names_the_install_command(
    tmp_path: Path,
) -> None:
    done = run_gramagent("run", str(ROOT / "examples" / "analyst.gram"), "Hi",
                         "--base-url", "http://127.0.0.1:9/v1", cwd=tmp_path, hide=TOOLS_EXTRA)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    for name in ("load_csv", "describe_table", "chart"):
        assert f"tool {name!r} of agent 'analyst_agent' is not available here" in done.stderr
    assert install_command("tools", cwd=tmp_path) in done.stderr


@pytest.mark.slow
def test_python_repl_without_pyarrow_fails_with_the_install_command(
    session: Path, tmp_path: Path,
) -> None:
    """``read_table`` in a sandbox without pyarrow: an error naming the command, exit 1 (it
    printed the worker's ModuleNotFoundError as output and exited 0)."""
    (tmp_path / "nopaths.py").write_text(
        "from gramagent.tools import SandboxConfig, builtin_library\n"
        "def library(session_dir=None):\n"
        "    config = SandboxConfig.from_env(python_paths=())  # the worker has no pyarrow\n"
        "    return builtin_library(session_dir=session_dir, sandbox=config)\n")
    done = run_gramagent("tool", "python_repl", '{"code": "read_table(\\"sales\\").num_rows"}',
                         "--session", str(session), "--tools", "nopaths:library",
                         cwd=tmp_path, hide=TOOLS_EXTRA)
    if "isolation" in done.stderr and "pyarrow" not in done.stderr:
        pytest.skip(f"no OS isolation here: {done.stderr.strip()}")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "the code needs pyarrow" in done.stderr
    assert install_command("tools", cwd=tmp_path) in done.stderr


@pytest.mark.slow
def test_python_repl_code_that_imports_an_unknown_module_is_ordinary_output(
    session: Path, tmp_path: Path,
) -> None:
    """A module no extra provides is the code's problem: the model reads the traceback."""
    done = run_gramagent("tool", "python_repl", '{"code": "import no_such_module_xyz"}',
                         "--session", str(session), cwd=tmp_path)
    if done.returncode != 0 and "isolation" in done.stderr:
        pytest.skip(f"no OS isolation here: {done.stderr.strip()}")
    assert done.returncode == 0
    assert "ModuleNotFoundError: No module named 'no_such_module_xyz'" in done.stdout


@pytest.mark.slow
def test_the_local_model_without_its_extra_names_the_install_command(tmp_path: Path) -> None:
    """Before any weights are touched or a server is started: a configuration error with the
    command (it was the child's exit status and a hint naming an uninstallable package)."""
    done = run_gramagent("run", str(ROOT / "examples" / "hello_world.gram"), "Hi",
                         cwd=tmp_path, hide=("xllamacpp",))
    assert done.returncode == 1
    assert done.stderr.startswith("ConfigurationError: local/qwen2.5-coder-0.5b (the embedded "
                                  "llama.cpp runtime) needs the 'local' extra")
    assert install_command("local", cwd=tmp_path) in done.stderr
