"""Issue 31, class 5: a temporary workspace left by a host killed with SIGKILL (no handler
runs) is removed by the next host that makes one beside it, and only such a workspace: one
whose host lives, one of another PID namespace or user, one without a record stays."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gramagent.tools._leftovers import (
    OWNER_FILE,
    SESSION_PREFIX,
    is_abandoned,
    owner_record,
    remove_abandoned,
)
from gramagent.tools._workspace import remove_tree

BOUND = 60.0

HOST = r"""
import sys, time
from gramagent.tools import ToolSettings, WorkspaceProvider
provider = WorkspaceProvider(ToolSettings())
workspace = provider.get(None)
if sys.argv[1] == "wait":
    print(workspace.sandbox().run("open('cell-file', 'w').write('x'); 42").to_text(), flush=True)
    print("READY", workspace.root, flush=True)
    time.sleep(600)
provider.close()
print("DONE", flush=True)
"""


def host(temp: Path, mode: str) -> subprocess.Popen[str]:
    env = {**os.environ, "TMPDIR": str(temp)}
    return subprocess.Popen([sys.executable, "-c", HOST, mode], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_ready(proc: subprocess.Popen[str]) -> Path:
    assert proc.stdout is not None
    deadline = time.monotonic() + BOUND
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith("READY "):
            return Path(line.split(" ", 1)[1].strip())
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError(proc.stderr.read() if proc.stderr else "no READY")


def run_to_end(temp: Path) -> None:
    proc = host(temp, "close")
    out, err = proc.communicate(timeout=BOUND)
    assert proc.returncode == 0 and "DONE" in out, err


def sessions(temp: Path) -> list[str]:
    return sorted(p.name for p in temp.iterdir() if p.name.startswith(SESSION_PREFIX))


@pytest.mark.slow
def test_a_workspace_left_by_a_killed_host_is_removed_by_the_next(tmp_path: Path) -> None:
    """A host with a running sandbox is killed with SIGKILL: its workspace (with what the cell
    wrote) stays. The next host removes it while a living host's workspace stays."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    killed, living = host(temp, "wait"), host(temp, "wait")
    try:
        left, kept = wait_ready(killed), wait_ready(living)
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=BOUND)
        assert (left / "work" / "cell-file").exists()
        run_to_end(temp)
        assert sessions(temp) == [kept.name]
        assert (kept / "work" / "cell-file").exists()
    finally:
        for proc in (killed, living):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for proc in (killed, living):
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
    run_to_end(temp)
    assert sessions(temp) == []


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def plant(temp: Path, name: str, record: str | None) -> Path:
    folder = temp / f"{SESSION_PREFIX}{name}"
    (folder / "work").mkdir(parents=True)
    (folder / "work" / "file").write_text("x")
    if record is not None:
        (folder / OWNER_FILE).write_text(record + "\n")
    return folder


def test_only_workspaces_of_hosts_that_are_gone_are_removed(tmp_path: Path) -> None:
    """Removed: a dead pid of this boot and PID namespace, a live pid whose start time is
    not the record's (the pid was reused), a record of another boot. Kept: this process,
    another PID namespace, no record, a malformed one, an unknown start time, a symlinked
    record, a folder of another name."""
    gone = dead_pid()
    pid, start, namespace, boot = owner_record().split()
    planted = {
        "dead": (f"{gone} 1 {namespace} {boot}", True),
        "other-boot": (f"{pid} {start} {namespace} 00000000-0000-0000-0000-000000000000", True),
        "alive": (owner_record(), False),
        "reused": (f"{pid} {int(start) + 1} {namespace} {boot}", True),
        "other-namespace": (f"{gone} 1 pid:[1] {boot}", False),
        "no-record": (None, False),
        "malformed": ("garbage", False),
        "unknown-start": (f"{gone} ? {namespace} {boot}", False),
    }
    folders = {name: plant(tmp_path, name, record) for name, (record, _) in planted.items()}
    victim = tmp_path / "victim"
    victim.write_text(f"{gone} 1 {namespace} {boot}\n")
    linked = plant(tmp_path, "symlinked", None)
    (linked / OWNER_FILE).symlink_to(victim)
    other = tmp_path / "elsewhere-dead"
    other.mkdir()
    (other / OWNER_FILE).write_text(f"{gone} 1 {namespace} {boot}\n")
    removed = remove_abandoned(tmp_path, remove_tree)
    expected = {folders[name] for name, (_, gone_) in planted.items() if gone_}
    assert set(removed) == expected
    for name, folder in folders.items():
        assert folder.exists() != planted[name][1], name
    assert linked.exists() and other.exists() and victim.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make another user's folder")
def test_another_users_workspace_is_left_alone(tmp_path: Path) -> None:
    pid, _, namespace, boot = owner_record().split()
    folder = plant(tmp_path, "theirs", f"{dead_pid()} 1 {namespace} {boot}")
    os.chown(folder, 65534, 65534)
    assert remove_abandoned(tmp_path, remove_tree) == [] and folder.exists()


@settings(max_examples=200, deadline=None)
@given(record=st.text(max_size=80))
def test_no_malformed_record_counts_as_abandoned(record: str) -> None:
    """Only a record of four fields, the first a pid, the second not '?', is ever judged
    abandoned; a record that is this process's own never is."""
    parts = record.split()
    if is_abandoned(record):
        assert len(parts) == 4 and parts[0].isdigit() and "?" not in parts
    assert not is_abandoned(owner_record())
