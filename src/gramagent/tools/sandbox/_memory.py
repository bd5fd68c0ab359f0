"""How a worker's memory is accounted: a cgroup v2 memory limit where one can be made.

``RLIMIT_AS`` (set by the worker) caps address space, which misses memory that is not mapped
in the worker: ``memfd`` pages in flight over a socket pair, files in a work directory on tmpfs.
A cgroup v2 ``memory.max`` counts all of it. It is used when the host may create child
cgroups with the memory controller: ``GRAMAGENT_SANDBOX_CGROUP`` names such a parent cgroup
directory, else the host's own cgroup is used if its ``cgroup.subtree_control`` already lists
``memory``. Otherwise the holes are closed one by one: the syscall filter denies
``memfd_create``, System V IPC, POSIX message queues, splicing pages into pipes and growing
pipe and socket buffers; as root the worker's IPC namespace has no room for System V IPC
either. Files are memory on a file system that keeps them in memory (:data:`MEMORY_FILE_SYSTEMS`):
temporary workspaces are made on disk where the machine has one (``docs/sandbox.md``), and a
work directory on such a file system is reported as not counted.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path
from typing import Any

__all__ = ["CGROUP_ENV", "MEMORY_FILE_SYSTEMS", "MemoryLimit", "file_system_type", "in_memory"]

CGROUP_ENV = "GRAMAGENT_SANDBOX_CGROUP"
"""A cgroup v2 directory whose children may use the memory controller."""
MEMORY_FILE_SYSTEMS = frozenset({"tmpfs", "ramfs"})
"""File systems whose files are pages of memory (not counted by ``RLIMIT_AS``)."""


def _cgroup2_mount() -> Path | None:
    with contextlib.suppress(OSError), open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            if right.split()[:1] == ["cgroup2"]:
                return Path(left.split()[4])
    return None


def _own_cgroup() -> Path | None:
    mount = _cgroup2_mount()
    if mount is None:
        return None
    with contextlib.suppress(OSError), open("/proc/self/cgroup") as f:
        for line in f:
            if line.startswith("0::"):
                return mount / line[3:].strip().lstrip("/")
    return None


def _delegating_parent() -> Path | None:
    """A cgroup directory in which a child with a memory limit can be made, or None."""
    configured = os.environ.get(CGROUP_ENV, "").strip()
    candidate = Path(configured) if configured else _own_cgroup()
    if candidate is None:
        return None
    try:
        controls = (candidate / "cgroup.subtree_control").read_text().split()
    except OSError:
        return None
    return candidate if "memory" in controls and os.access(candidate, os.W_OK) else None


def file_system_type(path: Path) -> str:
    """The type of the file system holding ``path`` (e.g. ``ext4``, ``tmpfs``), or ``""``."""
    target = os.path.realpath(path)
    best, kind = "", ""
    with contextlib.suppress(OSError), open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            point = left.split()[4]
            inside = target == point or target.startswith(point.rstrip("/") + "/")
            if inside and len(point) >= len(best):
                best, kind = point, right.split()[0]
    return kind


def in_memory(path: str | os.PathLike[str]) -> bool:
    """Whether files under ``path`` are kept in memory (it is on tmpfs or ramfs)."""
    return file_system_type(Path(path)) in MEMORY_FILE_SYSTEMS


class MemoryLimit:
    """The memory accounting of one worker: a cgroup of its own, or none."""

    def __init__(self, cgroup: Path | None, limit: int, detail: str = "") -> None:
        self.cgroup = cgroup
        self.limit = limit
        self.detail = detail

    @classmethod
    def apply(cls, pid: int, limit: int) -> MemoryLimit:
        """Put ``pid`` (not yet running user code) into a new cgroup limited to ``limit``
        bytes, where that is possible."""
        parent = _delegating_parent()
        if parent is None:
            return cls(None, limit, "no cgroup v2 with a delegated memory controller")
        group = parent / f"gramagent-sandbox-{pid}-{secrets.token_hex(4)}"
        try:
            group.mkdir()
            (group / "memory.max").write_text(str(limit))
            with contextlib.suppress(OSError):  # absent without swap accounting
                (group / "memory.swap.max").write_text("0")
            (group / "cgroup.procs").write_text(str(pid))
        except OSError as exc:
            with contextlib.suppress(OSError):
                group.rmdir()
            return cls(None, limit, f"creating a memory cgroup failed: {exc}")
        return cls(group, limit)

    def release(self) -> None:
        """Remove the cgroup (its worker is dead)."""
        if self.cgroup is not None:
            with contextlib.suppress(OSError):
                self.cgroup.rmdir()
            self.cgroup = None

    def report(self, syscalls: object, ipc: object, workdir: Path) -> dict[str, Any]:
        """The ``memory`` entry of the isolation report: which accounting is in force.

        Without a cgroup, every path by which a worker holds memory outside its address
        space must be closed (see ``docs/sandbox.md``); the entry names each one left open.

        Args:
            syscalls: the worker's ``syscalls`` report entry (the filter denies memfd, System
                V IPC, message queues, splicing pages into pipes, growing kernel buffers).
            ipc: the worker's ``ipc`` report entry (its IPC namespace has no room for System
                V IPC or message queues).
            workdir: the work directory (files on tmpfs are memory).
        """
        if self.cgroup is not None:
            return {"ok": True, "detail": f"cgroup v2 memory.max {self.limit} B (counts every "
                    f"page of the worker: heap, memfd, tmpfs files); {self.cgroup}"}
        filtered = _holds(syscalls)
        kind = file_system_type(workdir)
        holes = []
        if not filtered:
            holes.append("memfd pages, pages spliced into pipes and grown pipe and socket "
                         "buffers are not counted (no syscall filter)")
            if not _holds(ipc):
                holes.append("System V shared memory, message queues and semaphores are not "
                             "counted (no syscall filter, and "
                             f"{_detail(ipc) or 'no IPC limits'})")
        if kind in MEMORY_FILE_SYSTEMS:
            holes.append(f"the work directory is on {kind}: its files are not counted")
        base = f"address space only (RLIMIT_AS; {self.detail})"
        if holes:
            return {"ok": False, "detail": f"{base}; " + "; ".join(holes)}
        closed = ("memfd_create, System V IPC, message queues, splicing into pipes and "
                  "growing pipe and socket buffers denied by the syscall filter" if filtered
                  else "")
        if _holds(ipc):
            closed += ("; " if closed else "") + "no System V IPC in the worker's IPC namespace"
        return {"ok": True, "detail": f"{base}; {closed}; work directory on disk"}


def _holds(entry: object) -> bool:
    return isinstance(entry, dict) and entry.get("ok") is True


def _detail(entry: object) -> str:
    detail = entry.get("detail") if isinstance(entry, dict) else None
    return detail if isinstance(detail, str) else ""
