"""Issue 31, class 5: the host's cost of what a worker leaves behind.

Cleanup must cost what the leftovers are, not their square (10,000 sibling directories cost
the CLI 162 s and 45 CPU-s when every removal listed the parent again), and it must happen
when the CLI is stopped by SIGTERM or SIGHUP during a call, as it does on Ctrl-C. Checked
from the host side: the directories listed and entries read (a counting wrapper around the
real ``os.scandir``), what is left in the temporary directory, the worker in ``/proc``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tools_support import EXAMPLES, fast_config, invoke_tool, start_or_skip, workspace_of

from gramagent.testing import ScriptedServer, call, reply
from gramagent.tools import builtin_library
from gramagent.tools._workspace import remove_tree
from gramagent.tools.sandbox import PythonSandbox

HANG_BOUND = 60.0
"""Seconds after which something that should have ended counts as hung."""


class ScanCounter:
    """Counts the directories ``os.scandir`` lists and the entries it yields (the real
    function does the work)."""

    def __init__(self) -> None:
        self.listings = 0
        self.entries = 0
        self._real = os.scandir

    def __call__(self, path: Any) -> Any:
        self.listings += 1
        counter = self

        class Counted:
            def __init__(self) -> None:
                self._it = counter._real(path)

            def __enter__(self) -> Counted:
                return self

            def __exit__(self, *exc: object) -> None:
                self._it.close()

            def __iter__(self) -> Iterator[os.DirEntry[str]]:
                for entry in self._it:
                    counter.entries += 1
                    yield entry

        return Counted()


def count_entries(root: Path) -> int:
    return sum(len(dirs) + len(files) for _, dirs, files in os.walk(root))


def count_directories(root: Path) -> int:
    return sum(1 for _ in os.walk(root))


def build(root: Path, shape: list[Any]) -> None:
    """A tree from ``shape``: each item an int (that many empty files) or a list (a
    subdirectory of that shape)."""
    root.mkdir()
    for i, item in enumerate(shape):
        if isinstance(item, int):
            for j in range(item):
                (root / f"f{i}_{j}").touch()
        else:
            build(root / f"d{i}", item)


trees = st.recursive(st.integers(0, 3), lambda sub: st.lists(sub, max_size=6), max_leaves=60)


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(shape=st.lists(trees, max_size=8))
def test_removal_reads_each_entry_once(shape: list[Any], tmp_path_factory: Any) -> None:
    """Any tree: no entry is read twice and no directory listed twice, and it is gone."""
    root = tmp_path_factory.mktemp("tree") / "root"
    build(root, shape)
    total, directories = count_entries(root), count_directories(root)
    counter = ScanCounter()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "scandir", counter)
        remove_tree(root)
    assert not root.exists()
    assert counter.entries <= total
    assert counter.listings <= directories


@pytest.mark.parametrize("layout", [pytest.param("siblings", marks=pytest.mark.slow),
                                    pytest.param("nested-siblings", marks=pytest.mark.slow),
                                    "deep", pytest.param("files", marks=pytest.mark.slow)])
def test_many_entries_are_removed_in_linear_work(layout: str, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The shapes of the attack: 10,000 empty sibling directories (listed 10,000 times
    before the fix: 50 million entries read), 100 directories of 100, a chain 2,000 deep,
    10,000 files."""
    root = tmp_path / "root"
    root.mkdir()
    if layout == "siblings":
        for i in range(10_000):
            (root / f"d{i}").mkdir()
    elif layout == "nested-siblings":
        for i in range(100):
            for j in range(100):
                (root / f"d{i}" / f"e{j}").mkdir(parents=True)
    elif layout == "deep":
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for _ in range(2000):
                os.mkdir("x", dir_fd=fd)
                child = os.open("x", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
                os.close(fd)
                fd = child
        finally:
            os.close(fd)
    else:
        for i in range(10_000):
            (root / f"f{i}").touch()
    total = 10_000 if layout != "nested-siblings" else 10_100
    if layout == "deep":
        total = 2000
    counter = ScanCounter()
    monkeypatch.setattr(os, "scandir", counter)
    remove_tree(root)
    monkeypatch.undo()
    assert not root.exists()
    assert counter.entries <= total, (counter.entries, total)
    assert counter.listings <= total + 1


@pytest.mark.parametrize("vanishing", ["file", "empty-dir", "full-dir"])
def test_entries_removed_meanwhile_are_not_an_error(vanishing: str, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """At exit the CLI's tool thread clears the worker's record while the workspace is being
    removed: an entry listed and then gone is no failure (it left the workspace behind)."""
    root = tmp_path / "root"
    build(root, [2, [1, []], 3])
    victim = {"file": root / "f0_0", "empty-dir": root / "d1" / "d1",
              "full-dir": root / "d1"}[vanishing]
    doomed = [*sorted(victim.rglob("*"), reverse=True), victim] if victim.is_dir() else [victim]
    real = os.scandir

    def scandir_then_remove(path: Any) -> Any:
        listing = list(real(path))
        for item in doomed:  # deepest first
            if os.path.lexists(item):
                os.rmdir(item) if os.path.isdir(item) else os.unlink(item)

        class Listing:
            def __enter__(self) -> list[os.DirEntry[str]]:
                return listing

            def __exit__(self, *exc: object) -> None:
                pass

        return Listing()

    monkeypatch.setattr(os, "scandir", scandir_then_remove)
    remove_tree(root)
    monkeypatch.undo()
    assert not root.exists()


@pytest.mark.slow
def test_directories_made_in_the_sandbox_cost_the_host_linear_work(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The attack itself: a cell makes 10,000 empty directories and a few nested ones; closing
    the workspace removes them, reading each entry once."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    library = builtin_library(sandbox=fast_config(cpu_seconds=30, timeout=60.0))
    try:
        text = invoke_tool(library, "python_repl", code=(
            "import os\n"
            "for i in range(10000):\n"
            "    os.mkdir(f'd{i}')\n"
            "os.makedirs('a/b/c/d')\n"
            "open('a/b/f', 'w').close()\n"
            "print('MADE', len(os.listdir('.')))"))
        assert "MADE" in str(text), text
        sessions = [p for p in tmp_path.iterdir() if p.name.startswith("gramagent-session-")]
        assert len(sessions) == 1
        total = count_entries(sessions[0])
        counter = ScanCounter()
        monkeypatch.setattr(os, "scandir", counter)
        library.forget()
        monkeypatch.setattr(os, "scandir", counter._real)
    finally:
        library.forget()
    assert not sessions[0].exists()
    assert counter.entries <= total, (counter.entries, total)


# -- SIGTERM / SIGHUP to the CLI during a call ------------------------------------------------

SLOW_CELL = ("import os, time\n"
             "open('started', 'w').write('x')\n"
             "time.sleep(3)\n"
             "print('slept')")


def workers_of(pid: int) -> list[int]:
    """The sandbox workers whose parent is ``pid`` (from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid and b"_worker.py" in cmdline:
            found.append(int(entry))
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT],
                         ids=["SIGTERM", "SIGHUP", "SIGINT"])
def test_a_stopped_cli_removes_its_workspace(signum: int, tmp_path: Path) -> None:
    """``gramagent run`` gets the signal while python_repl runs a cell: it exits as on Ctrl-C
    (130, or 128 + the signal), the worker is gone and no gramagent-session-* directory is
    left in TMPDIR."""
    box = PythonSandbox(tmp_path / "probe", config=fast_config())
    start_or_skip(box)
    box.close()
    temp = tmp_path / "tmp"
    temp.mkdir()
    script = [call("python_repl", {"code": SLOW_CELL}), reply("Done.")]
    env = {**os.environ, "TMPDIR": str(temp), "OPENAI_API_KEY": "sk-test",
           "GRAMAGENT_SANDBOX_ALLOW_WEAK": "0"}
    with ScriptedServer(script) as server:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gramagent", "run", str(EXAMPLES / "analyst.gram"),
             "Compute.", "--model", "openai/scripted", "--base-url", server.base_url, "--yes"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + HANG_BOUND
            started: list[Path] = []
            while not started and time.monotonic() < deadline and proc.poll() is None:
                started = list(temp.glob("gramagent-session-*/work/started"))
                time.sleep(0.05)
            assert started, proc.stderr.read() if proc.poll() is not None else "no call"
            workers = workers_of(proc.pid)
            assert workers
            proc.send_signal(signum)
            out, err = proc.communicate(timeout=HANG_BOUND)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    expected = 130 if signum == signal.SIGINT else 128 + signum
    assert proc.returncode == expected, (proc.returncode, err)
    assert "Traceback" not in err, err
    assert sorted(str(p.relative_to(temp)) for p in temp.rglob("*")) == [], err
    assert not any(alive(pid) for pid in workers)


@pytest.mark.slow
def test_the_worker_record_is_not_listed_as_an_output(tmp_path: Path) -> None:
    """The outputs note listed ``.work.worker`` (the sandbox's record of its worker) among
    the files the tools wrote; what the cell wrote is listed, the record is not."""
    for session_dir in (None, tmp_path / "kept"):
        library = builtin_library(session_dir=session_dir, sandbox=fast_config())
        try:
            invoke_tool(library, "python_repl", code="open('made.txt', 'w').write('x')")
            workspace = workspace_of(library)
            names = [str(p) for p in workspace.files()]
            assert any(p.endswith("made.txt") for p in names), names
            assert not any(p.endswith(".worker") for p in names), names
            assert list(workspace.root.rglob(".*.worker")), "the record is there"
        finally:
            library.forget()
