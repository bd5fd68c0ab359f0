"""Issue 31, class 4: files a cell writes to its work directory are never memory the limits
do not see, unless the report says so.

A host (``sandbox_workspace_host.py``) whose system temporary directory is on tmpfs makes a
temporary workspace as the built-in tools do, and its sandbox's cells write many small files,
one big file, nested directories and many big files (more in total than ``RLIMIT_FSIZE``
allows one file). By default the workspace is made on disk (``/var/tmp``): the files are on a
disk file system and the machine's ``Shmem`` does not grow by them. When ``TMPDIR`` names the
tmpfs (the user's choice), the files are memory: ``Shmem`` grows by them, and the report says
``memory: NO`` naming the tmpfs (or a memory cgroup counts them). Run with the host as root and
as uid 65534.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_sandbox_escapes_processes import BOUND, _as_user, user_python

from gramagent.tools._workspace import DISK_TEMP_DIRS
from gramagent.tools.sandbox._memory import in_memory

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
LAYOUTS = ("many small files", "one big file", "nested directories", "many big files")


def _memory_dir() -> Path:
    shm = Path("/dev/shm")
    if not shm.is_dir() or not os.access(shm, os.W_OK) or not in_memory(shm):
        pytest.skip("no writable tmpfs at /dev/shm")
    return shm


def run_host(mode: str, as_user: bool) -> dict[str, Any]:
    memdir = Path(tempfile.mkdtemp(dir=_memory_dir(), prefix="gramagent-test-"))
    try:
        os.chmod(memdir, 0o1777)
        python = user_python() if as_user else sys.executable
        argv = [python, str(HERE / "sandbox_workspace_host.py"), str(memdir), mode]
        if as_user:
            argv = _as_user(argv)
        env = {k: v for k, v in os.environ.items() if not k.startswith("GRAMAGENT_SANDBOX")}
        host = subprocess.run(argv, capture_output=True, text=True, timeout=BOUND, env=env,
                              cwd="/")
        lines = [line for line in host.stdout.splitlines() if line.startswith("RESULT ")]
        assert host.returncode == 0 and lines, (host.returncode, host.stdout,
                                                host.stderr[-3000:])
        result: dict[str, Any] = json.loads(lines[-1][len("RESULT "):])
        result["left in the tmpfs"] = sorted(p.name for p in memdir.iterdir())
    finally:
        shutil.rmtree(memdir, ignore_errors=True)
    if "unavailable" in result:
        if os.geteuid() != 0 or as_user:
            pytest.skip(f"no OS isolation for the sandbox here: {result['unavailable']}")
        raise AssertionError(result["unavailable"])
    return result


@pytest.fixture(scope="module", params=["root", "ordinary-user"])
def user(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def default_host(user: str) -> Iterator[dict[str, Any]]:
    """The host with ``TMPDIR`` unset and its temporary directory on tmpfs."""
    if not any(os.path.isdir(d) and not in_memory(d) for d in DISK_TEMP_DIRS):
        pytest.skip(f"none of {DISK_TEMP_DIRS} is on disk here")
    yield run_host("default", user == "ordinary-user")


@pytest.fixture(scope="module")
def tmpdir_host(user: str) -> Iterator[dict[str, Any]]:
    """The host with ``TMPDIR`` naming a tmpfs directory."""
    yield run_host("tmpdir", user == "ordinary-user")


def _wrote(layout: dict[str, Any]) -> int:
    text = layout["text"]
    assert "WROTE " in text, text
    return int(text.rsplit("WROTE ", 1)[1].split()[0])


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_temporary_workspace_is_made_on_disk(default_host: dict[str, Any],
                                               layout: str) -> None:
    """With the system's temporary directory on tmpfs, the workspace is made on disk: the
    cell's files are on a disk file system, the machine's Shmem does not grow by them, and
    the report does not name a tmpfs work directory."""
    assert not in_memory(default_host["root"]), default_host
    seen = default_host["layouts"][layout]
    wrote = _wrote(seen)
    assert seen["file_systems"] and not set(seen["file_systems"]) & {"tmpfs", "ramfs"}, seen
    assert seen["shmem_grown"] < wrote // 2, (seen["shmem_grown"], wrote)
    assert "its files are not counted" not in default_host["memory"][1], default_host["memory"]
    assert default_host["removed"] and not default_host["left in the tmpfs"]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_work_directory_on_tmpfs_is_counted_or_reported(tmpdir_host: dict[str, Any],
                                                          layout: str) -> None:
    """With ``TMPDIR`` on tmpfs the workspace stays there (the user's choice): the files are
    memory (Shmem grows by them: the measure sees them), and the report says so, unless a
    memory cgroup counts them."""
    seen = tmpdir_host["layouts"][layout]
    wrote = _wrote(seen)
    assert seen["file_systems"] == ["tmpfs"], seen
    assert seen["shmem_grown"] >= wrote // 2, (seen["shmem_grown"], wrote)
    ok, detail = tmpdir_host["memory"]
    if "cgroup v2 memory.max" in detail:
        assert ok, detail
    else:
        assert not ok and "the work directory is on tmpfs: its files are not counted" in detail
    assert tmpdir_host["removed"], tmpdir_host
