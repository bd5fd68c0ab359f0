"""The python_repl tool: one sandbox per conversation, closed with the conversation."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest
from extras import needs_tools
from tools_support import fast_config

from gramagent._runtime.library import ToolContext, ToolLibrary
from gramagent.tools import builtin_library
from gramagent.tools._workspace import STATE_KEY, Workspace
from gramagent.tools.sandbox import SandboxError


def repl(library: ToolLibrary, conversation: str, code: str) -> str:
    tool = library.lookup("python_repl")
    assert tool is not None
    ctx = ToolContext(conversation_id=conversation, run_id="r", call_id="c", tool="python_repl",
                      state=library.conversation_state(conversation))
    result = tool.invoke(code=code, ctx=ctx)
    assert isinstance(result, str)
    return result


@pytest.fixture
def library() -> ToolLibrary:
    lib = builtin_library(sandbox=fast_config())
    yield lib
    lib.forget()


def skip_without_isolation(library: ToolLibrary) -> None:
    try:
        repl(library, "probe", "1")
    except SandboxError as exc:
        if exc.kind == "unavailable" and os.geteuid() != 0:
            pytest.skip(f"no OS isolation here: {exc}")
        raise


def test_state_persists_per_conversation_not_across(library: ToolLibrary) -> None:
    skip_without_isolation(library)
    assert repl(library, "alice", "total = 40\ntotal + 2") == "42"
    assert repl(library, "alice", "total") == "40"
    other = repl(library, "bob", "total")
    assert "NameError: name 'total' is not defined" in other


def test_each_conversation_has_its_own_workspace(library: ToolLibrary) -> None:
    skip_without_isolation(library)
    repl(library, "alice", "open('mine.txt', 'w').write('a')")
    assert repl(library, "bob", "import os\nos.path.exists('mine.txt')") == "False"
    alice = library.conversation_state("alice")[STATE_KEY]
    bob = library.conversation_state("bob")[STATE_KEY]
    assert isinstance(alice, Workspace) and isinstance(bob, Workspace)
    assert alice.root != bob.root
    assert (alice.work_dir / "mine.txt").read_text() == "a"


def test_forget_stops_the_worker_and_removes_the_workspace(library: ToolLibrary) -> None:
    skip_without_isolation(library)
    repl(library, "carol", "1")
    workspace = library.conversation_state("carol")[STATE_KEY]
    assert isinstance(workspace, Workspace)
    pid = workspace.sandbox().worker_pid  # as the host sees it
    assert pid is not None
    root = Path(workspace.root)
    library.forget("carol")
    assert not root.exists()
    assert not Path(f"/proc/{pid}").exists() or _zombie(pid)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True


@pytest.mark.slow
@needs_tools
def test_the_repl_reads_tables_loaded_by_load_csv(data_dir: Path) -> None:
    """A table loaded in a conversation is read by that conversation's sandbox, which finds
    it in the workspace's tables folder (the shared upload directory holds only the CSV)."""
    library = builtin_library(data_dir=data_dir, sandbox=fast_config())
    try:
        skip_without_isolation(library)
        load = library.lookup("load_csv")
        assert load is not None
        load.invoke(path="sales.csv", ctx=ToolContext(
            conversation_id="d", run_id="r", call_id="c", tool="load_csv",
            state=library.conversation_state("d")))
        assert not (data_dir / "sales.parquet").exists()
        code = ("t = read_table('sales')\n"
                "by = t.group_by('region', use_threads=False).aggregate([('units', 'sum')])\n"
                "sorted(by.to_pylist(), key=lambda r: r['region'])[0]")
        with (data_dir / "sales.csv").open() as f:
            east = sum(int(row["units"]) for row in csv.DictReader(f) if row["region"] == "East")
        assert repl(library, "d", code) == repr({"region": "East", "units_sum": east})
    finally:
        library.forget()


@pytest.mark.slow
def test_timeouts_surface_as_errors_then_recover(library: ToolLibrary) -> None:
    skip_without_isolation(library)
    repl(library, "e", "kept = 1")
    with pytest.raises(SandboxError, match="state .* was lost"):
        repl(library, "e", "import time\ntime.sleep(30)")
    assert repl(library, "e", "2 * 21").endswith("42")
