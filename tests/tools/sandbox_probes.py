"""Raw syscall attempts, as model code would make them through ctypes, for the seccomp tests.

:func:`probe_code` returns Python source that tries each call of :func:`attempts` with
harmless arguments (nonexistent pids and paths, NULL pointers, no-op flags) and prints one
``PROBE {json}`` line mapping each attempt to ``"ok"`` or the errno name it failed with.
Syscall numbers come from libseccomp on the host (the code under test runs where it may not
be able to load it), so the module needs ``pyseccomp``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

NO_SUCH_PID = 0x7FFFFFF0
CLONE_NEWUSER = 0x10000000
ADDR_NO_RANDOMIZE = 0x0040000
MS_REMOUNT = 0x20
MISSING_PATH = "/nonexistent-gramagent-probe"


def _number(name: str) -> int:
    seccomp: Any = pytest.importorskip("pyseccomp")
    nr = seccomp.resolve_syscall(seccomp.Arch.NATIVE, name)
    if nr < 0:
        pytest.skip(f"no {name} syscall on this architecture")
    return int(nr)


def attempts() -> dict[str, tuple[int, list[int | str]]]:
    """Attempt name -> (syscall number, arguments); a str argument is passed as a C string."""
    return {
        "ptrace": (_number("ptrace"), [2, NO_SUCH_PID, 0, 0]),  # PTRACE_PEEKDATA
        "process_vm_readv": (_number("process_vm_readv"), [NO_SUCH_PID, 0, 1, 0, 1, 0]),
        "mount": (_number("mount"), [0, MISSING_PATH, 0, MS_REMOUNT, 0]),
        "umount2": (_number("umount2"), [MISSING_PATH, 0]),
        "chroot": (_number("chroot"), [MISSING_PATH]),
        "unshare(0)": (_number("unshare"), [0]),
        "unshare(CLONE_NEWUSER)": (_number("unshare"), [CLONE_NEWUSER]),
        "setns": (_number("setns"), [-1, 0]),
        "bpf": (_number("bpf"), [0xFFFF, 0, 0]),
        "perf_event_open": (_number("perf_event_open"), [0, 0, -1, -1, 0]),
        "keyctl": (_number("keyctl"), [0, -3, 0]),  # KEYCTL_GET_KEYRING_ID, session keyring
        "userfaultfd": (_number("userfaultfd"), [1]),  # UFFD_USER_MODE_ONLY
        "io_uring_setup": (_number("io_uring_setup"), [0, 0]),
        "name_to_handle_at": (_number("name_to_handle_at"), [-100, "/", 0, 0, 0]),
        "personality(ADDR_NO_RANDOMIZE)": (_number("personality"), [ADDR_NO_RANDOMIZE]),
        "personality(query)": (_number("personality"), [0xFFFFFFFF]),
        "kill(other)": (_number("kill"), [NO_SUCH_PID, 0]),
        "tgkill(other)": (_number("tgkill"), [NO_SUCH_PID, NO_SUCH_PID, 0]),
        "pidfd_open(other)": (_number("pidfd_open"), [NO_SUCH_PID, 0]),
        "prlimit64(other)": (_number("prlimit64"), [NO_SUCH_PID, 7, 0, 0]),  # RLIMIT_NOFILE
        "pidfd_send_signal": (_number("pidfd_send_signal"), [-1, 0, 0, 0]),
        "timer_create": (_number("timer_create"), [1, 0, 0]),  # CLOCK_MONOTONIC
        "fcntl(F_SETOWN)": (_number("fcntl"), [0, 8, 0]),
        "fcntl(F_SETSIG)": (_number("fcntl"), [0, 10, 0]),
        "fcntl(F_SETOWN_EX)": (_number("fcntl"), [0, 15, 0]),
        "ioctl(FIOSETOWN)": (_number("ioctl"), [0, 0x8901, 0]),
    }


_PROBE = r'''
import ctypes, errno, json, socket
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long

def _arg(value):
    if isinstance(value, str):
        return ctypes.c_void_p(ctypes.cast(ctypes.c_char_p(value.encode()), ctypes.c_void_p).value)
    return ctypes.c_ulong(value & 0xFFFFFFFFFFFFFFFF) if value >= 0 else ctypes.c_long(value)

def _outcome(result, err):
    return "ok" if result >= 0 else errno.errorcode.get(err, str(err))

def _socket(family, kind=socket.SOCK_STREAM, pair=False):
    try:
        if pair:
            for s in socket.socketpair(family, kind):
                s.close()
        else:
            socket.socket(family, kind).close()
        return "ok"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))

_found = {}
for _name, (_nr, _args) in ATTEMPTS.items():
    _keep = [_arg(a) for a in _args]
    ctypes.set_errno(0)
    _found[_name] = _outcome(_libc.syscall(ctypes.c_long(_nr), *_keep), ctypes.get_errno())
_found["socket(AF_INET)"] = _socket(socket.AF_INET)
_found["socket(AF_INET6)"] = _socket(socket.AF_INET6)
_found["socket(AF_NETLINK)"] = _socket(socket.AF_NETLINK, socket.SOCK_RAW)
_found["socket(AF_PACKET)"] = _socket(socket.AF_PACKET, socket.SOCK_RAW)
_found["socket(AF_UNIX)"] = _socket(socket.AF_UNIX)
_found["socketpair(AF_UNIX)"] = _socket(socket.AF_UNIX, pair=True)
_found["socketpair(AF_INET)"] = _socket(socket.AF_INET, pair=True)
_found["socketpair(AF_UNIX, SOCK_DGRAM)"] = _socket(socket.AF_UNIX, socket.SOCK_DGRAM, pair=True)
print("PROBE " + json.dumps(_found))
'''


def probe_code() -> str:
    """Source that runs every attempt and prints the ``PROBE`` line."""
    return f"ATTEMPTS = {attempts()!r}\n{_PROBE}"


def parse_probe(text: str) -> dict[str, str]:
    """The attempt -> outcome map from the output of :func:`probe_code`."""
    for line in text.splitlines():
        if line.startswith("PROBE "):
            found: dict[str, str] = json.loads(line[len("PROBE "):])
            return found
    raise AssertionError(f"no PROBE line in:\n{text}")


DENIED_BY_FILTER = (
    "ptrace", "process_vm_readv", "mount", "umount2", "chroot", "unshare(0)",
    "unshare(CLONE_NEWUSER)", "setns", "bpf", "perf_event_open", "keyctl", "userfaultfd",
    "io_uring_setup", "name_to_handle_at", "personality(ADDR_NO_RANDOMIZE)", "socket(AF_INET)",
    "socket(AF_INET6)", "socket(AF_NETLINK)", "socket(AF_PACKET)", "socket(AF_UNIX)",
    "socketpair(AF_INET)", "kill(other)", "tgkill(other)", "pidfd_open(other)",
    "prlimit64(other)", "pidfd_send_signal", "timer_create", "fcntl(F_SETOWN)",
    "fcntl(F_SETSIG)", "fcntl(F_SETOWN_EX)", "ioctl(FIOSETOWN)",
    "socketpair(AF_UNIX, SOCK_DGRAM)",
)
"""Attempts the filter must answer with EPERM."""

ALLOWED_BY_FILTER = ("personality(query)", "socketpair(AF_UNIX)")
"""Attempts that must still succeed under the filter."""
