"""Temporary workspaces left by a host that died without removing them (a CLI killed by
``SIGKILL``, which no handler sees).

Each temporary workspace holds an owner record, :data:`OWNER_FILE`: the host's pid, that
process's start time (field 22 of ``/proc/<pid>/stat``), its PID namespace and the machine's
boot id. The first temporary workspace a process makes removes the ``gramagent-session-*``
directories beside it that its user owns and whose record names a host that is gone: another
boot, or the same boot and PID namespace with no process of that pid and start time. A
directory without a well-formed record, of another user, or of a host in another PID
namespace (whose processes this one cannot see) is left alone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Callable
from pathlib import Path

from gramagent.errors import GramagentError

__all__ = ["OWNER_FILE", "SESSION_PREFIX", "is_abandoned", "owner_record",
           "remove_abandoned", "write_owner"]

_log = logging.getLogger(__name__)

OWNER_FILE = ".owner"
"""The owner record's name in a temporary workspace's root."""
SESSION_PREFIX = "gramagent-session-"
"""How a temporary workspace's directory name starts."""
_MAX_RECORD = 256


def _start_time(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks after boot), or None if there is none."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else None


def _read(path: str) -> str:
    with contextlib.suppress(OSError), open(path) as f:
        return f.read().strip()
    return ""


def owner_record(pid: int | None = None) -> str:
    """The record of process ``pid`` (default: this one): ``pid start pidns boot``."""
    pid = os.getpid() if pid is None else pid
    namespace = os.readlink(f"/proc/{pid}/ns/pid")
    return (f"{pid} {_start_time(pid) or '?'} {namespace} "
            f"{_read('/proc/sys/kernel/random/boot_id') or '?'}")


def write_owner(root: Path) -> None:
    """Record this process as the owner of the temporary workspace ``root``."""
    with contextlib.suppress(OSError):  # no /proc: the workspace is only never reclaimed
        record = owner_record()
        fd = os.open(root / OWNER_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(record + "\n")


def is_abandoned(record: str) -> bool:
    """Whether the host ``record`` names is certainly gone (see the module's text)."""
    parts = record.split()
    if len(parts) != 4 or not parts[0].isdigit() or "?" in parts:
        return False
    pid, start, namespace, boot = parts
    now = _read("/proc/sys/kernel/random/boot_id")
    if not now:
        return False
    if boot != now:
        return True
    try:
        if namespace != os.readlink("/proc/self/ns/pid"):
            return False
    except OSError:
        return False
    return _start_time(int(pid)) != start


def _record_of(folder: Path, uid: int) -> str | None:
    """The owner record of ``folder`` if it and the record are ``uid``'s own (no symlinks)."""
    try:
        info = os.lstat(folder)
        if info.st_uid != uid or not stat.S_ISDIR(info.st_mode):
            return None
        fd = os.open(folder / OWNER_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != uid:
            return None
        return f.read(_MAX_RECORD).decode("ascii", "replace")


def remove_abandoned(parent: Path, remove: Callable[[Path], None]) -> list[Path]:
    """Remove the abandoned temporary workspaces in ``parent`` with ``remove`` (the
    workspace's ``remove_tree``); the ones removed. One whose removal raises a
    :class:`~gramagent.errors.GramagentError` is logged and left."""
    removed: list[Path] = []
    uid = os.geteuid()
    try:
        names = [e.name for e in os.scandir(parent) if e.name.startswith(SESSION_PREFIX)]
    except OSError:
        return removed
    for name in names:
        folder = parent / name
        record = _record_of(folder, uid)
        if record is None or not is_abandoned(record):
            continue
        try:
            remove(folder)
        except GramagentError as exc:
            _log.warning("an abandoned workspace was not removed: %s", exc)
            continue
        removed.append(folder)
    if removed:
        _log.info("removed %d workspace(s) left by hosts that are gone", len(removed))
    return removed
