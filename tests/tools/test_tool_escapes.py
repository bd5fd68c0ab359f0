"""Escape attempts through the data tools and the workspace, checked from the host side.

The model drives ``load_csv``, ``describe_table`` and ``chart``, which run in the host
process, and its sandboxed code shapes the workspace that the host later removes. Each test
checks what happened on the host: the victim file's bytes and mode, whether a directory is
gone, the host's peak memory, elapsed time against a generous "did not hang" bound, and what
an analyst run leaves in the checkout and the temporary directory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tools_support import EXAMPLES, SALES_CSV, fast_config, invoke_tool, workspace_of

from gramagent.testing import ScriptedServer, call, reply
from gramagent.tools import DataError, WorkspaceError, builtin_library
from gramagent.tools._workspace import remove_tree

pytestmark = pytest.mark.slow

pytest.importorskip("pyarrow")

HANG_BOUND = 60.0
"""Seconds that only a hung (unbounded) tool call would exceed."""


# -- class 7: files ------------------------------------------------------------------------------

def test_load_csv_never_follows_a_planted_symlink(data_dir: Path, tmp_path: Path) -> None:
    """Symlinks planted at the table's name and at the old temporary name point at a victim
    outside; load_csv leaves the victim's bytes and mode alone and writes a regular file."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    os.chmod(victim, 0o600)
    library = builtin_library(data_dir=data_dir)
    try:
        with pytest.raises(DataError):  # creates the conversation's workspace
            invoke_tool(library, "describe_table", df_name="none")
        tables = workspace_of(library).tables_dir
        for name in (".sales.parquet.partial", "sales.parquet"):
            (tables / name).symlink_to(victim)
        assert "table sales: 48 rows" in str(invoke_tool(library, "load_csv", path="sales.csv"))
        table = tables / "sales.parquet"
        assert table.is_file() and not table.is_symlink()
        assert not [p for p in tables.iterdir() if p.name.endswith(".partial")
                    and not p.is_symlink()]
    finally:
        library.forget()
    assert victim.read_text() == "precious"
    assert oct(victim.stat().st_mode & 0o777) == "0o600"


def test_a_deep_tree_made_in_the_sandbox_is_removed(tmp_path: Path) -> None:
    """The model's code builds a directory tree far deeper than the recursion limit and
    PATH_MAX; forgetting the conversation still removes the whole temporary workspace.
    (Making the tree is kernel work that grows with its depth: the call gets the CPU time
    and wall time a busy machine needs, as the test is about the cleanup.)"""
    library = builtin_library(sandbox=fast_config(cpu_seconds=20, timeout=60.0))
    try:
        try:
            invoke_tool(library, "python_repl", code="1")
        except Exception as exc:  # noqa: BLE001 - the sandbox may be unavailable off-root
            if os.geteuid() != 0:
                pytest.skip(f"no sandbox here: {exc}")
            raise
        root = workspace_of(library).root
        made = invoke_tool(library, "python_repl", code=(
            "import os\nfor _ in range(3000):\n    os.mkdir('d')\n    os.chdir('d')\n"
            "open('leaf', 'w').write('x')\nlen(os.getcwd())"))
        assert int(str(made).splitlines()[-1]) > 4096  # deeper than PATH_MAX
    finally:
        library.forget()
    assert not root.exists()


def test_a_failed_cleanup_is_reported(tmp_path: Path) -> None:
    """A file that cannot be removed (immutable) makes remove_tree raise, naming the place,
    instead of leaving the tree behind silently."""
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "stuck").write_text("x")
    if shutil.which("chattr") is None or subprocess.run(
            ["chattr", "+i", str(root / "sub")], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available here")
    try:
        with pytest.raises(WorkspaceError, match=r"cannot remove workspace .*/sub"):
            remove_tree(root)
        assert (root / "sub" / "stuck").exists()
    finally:
        subprocess.run(["chattr", "-i", str(root / "sub")], check=True)
    remove_tree(root)
    assert not root.exists()


# -- class 6: host-side work -------------------------------------------------------------------

CHART = {"logical_name": "", "chart_type": "column", "x_field": "month", "x_label": "",
         "y_label": "", "series": [{"name": "Revenue", "y_field": "revenue"}], "note": ""}


def test_chart_text_cannot_keep_the_host_busy(data_dir: Path) -> None:
    """A title and note of 60,000 math-text characters: the chart is drawn within a bound
    only a hang would exceed (math layout costs ~1 ms of CPU per character uncapped)."""
    pytest.importorskip("matplotlib")
    library = builtin_library(data_dir=data_dir)
    heavy = r"$\sqrt{\frac{a}{b}}$" * 3000
    try:
        started = time.monotonic()
        text = invoke_tool(library, "chart", df_name="sales", title=heavy,
                      **{**CHART, "note": heavy})
        elapsed = time.monotonic() - started
    finally:
        library.forget()
    assert str(text).startswith("Chart saved to ")
    assert elapsed < HANG_BOUND


MAKE_WIDE = """
import sys
import pyarrow as pa, pyarrow.parquet as pq
pq.write_table(pa.table({"zeros": pa.array([0] * 25_000_000, pa.int64())}), sys.argv[1],
               compression="zstd")
"""


def peak_rss_kib() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))


def test_a_table_too_large_to_decode_is_refused_from_its_footer(data_dir: Path) -> None:
    """A parquet file of a few hundred KB that decodes to 200 MB: describe_table refuses it
    from the footer, and the host's peak memory does not grow by the decoded size."""
    crafted = data_dir / "bomb.parquet"
    subprocess.run([sys.executable, "-c", MAKE_WIDE, str(crafted)], check=True)
    assert crafted.stat().st_size < 5 << 20
    try:
        Path("/proc/self/clear_refs").write_text("5")  # reset the peak (VmHWM) to now
    except OSError:
        pytest.skip("cannot reset the peak RSS here")
    before = peak_rss_kib()
    library = builtin_library(data_dir=data_dir, max_table_bytes=64 << 20)
    try:
        with pytest.raises(DataError, match=r"holds 2\d{8} bytes of data \(from its footer\)"):
            invoke_tool(library, "describe_table", df_name="bomb")
    finally:
        library.forget()
    assert peak_rss_kib() - before < 100 << 10  # KiB: far below the 195 MiB it decodes to


# -- issue 12, item 14: an analyst run leaves the checkout and /tmp as it found them -----------

def test_an_analyst_run_leaves_no_files_behind(data_dir: Path, tmp_path: Path) -> None:
    """``gramagent run examples/analyst.gram`` with GRAMAGENT_DATA_DIR on a copy of
    examples/data: the data folder holds only the CSV afterwards, and no
    gramagent-session-* directory is left in the temporary directory."""
    pytest.importorskip("matplotlib")
    temp = tmp_path / "tmp"
    temp.mkdir()
    chart = {**CHART, "df_name": "sales", "title": "Revenue"}
    script = [call("load_csv", {"path": "sales.csv"}), call("chart", chart), reply("Done.")]
    env = {**os.environ, "GRAMAGENT_DATA_DIR": str(data_dir), "TMPDIR": str(temp),
           "OPENAI_API_KEY": "sk-test", "GRAMAGENT_SANDBOX_ALLOW_WEAK": "0"}
    with ScriptedServer(script) as server:
        done = subprocess.run(
            [sys.executable, "-m", "gramagent", "run", str(EXAMPLES / "analyst.gram"),
             "Chart revenue.", "--model", "openai/scripted", "--base-url", server.base_url,
             "--json"], env=env, capture_output=True, text=True, timeout=HANG_BOUND)
        requests = len(server.requests)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert requests == 3 and "Done." in json.dumps(answer)
    assert sorted(p.name for p in data_dir.iterdir()) == [SALES_CSV.name]
    assert [p.name for p in temp.iterdir() if p.name.startswith("gramagent-session-")] == []
