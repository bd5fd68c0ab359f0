"""Landlock rules of a sandbox worker: writes only in the work directory, nothing outside.

Runs in the worker (``python -I -S``), so it imports only the standard library, and calls the
three Landlock syscalls through ``ctypes`` (the C library has no wrappers). Applied after the
other isolation steps (it needs ``PR_SET_NO_NEW_PRIVS``) and before the syscall filter.

The read-only mounts already keep the worker from changing files outside its work directory,
but a read-only mount does not stop opening a FIFO (or a device) for writing: a FIFO the host
made under a path the worker sees (the interpreter's prefix, a data directory) would reach a
reader on the host. Landlock's ``WRITE_FILE`` right is checked on every open for writing,
whatever the file type, so only the work directory and ``/dev/null``-like devices stay
writable. Where the kernel's Landlock has scopes (ABI 6, Linux 6.12), signals and abstract
unix sockets are also kept inside the worker's domain.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

__all__ = ["restrict"]

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # the same on every architecture
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

WRITE_FILE, REMOVE_DIR, REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
MAKE = (1 << 6) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12)
"""MAKE_CHAR, MAKE_DIR, MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM."""
REFER, TRUNCATE = 1 << 13, 1 << 14
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1, 2
WRITABLE_DEVICES = ("/dev/null", "/dev/zero", "/dev/full")


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _abi(libc: Any) -> int:
    version = libc.syscall(_CREATE_RULESET, None, ctypes.c_size_t(0),
                           ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return int(version) if version > 0 else 0


def _add(libc: Any, ruleset: int, path: str, access: int) -> None:
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        rule = _PathBeneathAttr(access, fd)
        if libc.syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule),
                        ctypes.c_uint32(0)) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"landlock_add_rule {path}: {os.strerror(errno)}")
    finally:
        os.close(fd)


def restrict(workdir: str) -> dict[str, Any]:
    """Restrict this process (and its future children) as the module docstring says;
    returns the ``landlock`` report entry (``ok`` False with the reason where it cannot)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    abi = _abi(libc)
    if abi < 1:
        return {"ok": False, "detail": "Landlock is not available (Linux 5.13 with Landlock "
                "enabled is needed): FIFOs of the host under readable paths can be opened "
                "for writing"}
    handled = WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE
    handled |= REFER if abi >= 2 else 0
    handled |= TRUNCATE if abi >= 3 else 0
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
    attr = _RulesetAttr(handled, 0, scoped)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else 8 * (2 if abi >= 4 else 1)
    ruleset = libc.syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size),
                           ctypes.c_uint32(0))
    if ruleset < 0:
        errno = ctypes.get_errno()
        return {"ok": False, "detail": f"landlock_create_ruleset failed: {os.strerror(errno)}"}
    try:
        _add(libc, ruleset, workdir, handled)
        for device in WRITABLE_DEVICES:
            if os.path.exists(device):
                _add(libc, ruleset, device, WRITE_FILE | (handled & TRUNCATE))
        if libc.syscall(_RESTRICT_SELF, ruleset, ctypes.c_uint32(0)) != 0:
            errno = ctypes.get_errno()
            return {"ok": False, "detail": f"landlock_restrict_self failed: "
                    f"{os.strerror(errno)}"}
    except OSError as exc:
        return {"ok": False, "detail": str(exc)}
    finally:
        os.close(ruleset)
    scopes = ("; signals and abstract unix sockets only within the sandbox" if scoped
              else "; no signal or abstract-socket scopes (Landlock ABI < 6)")
    return {"ok": True, "detail": f"Landlock ABI {abi}: files opened for writing, made or "
            f"removed only in the work directory (and {', '.join(WRITABLE_DEVICES)})" + scopes}
