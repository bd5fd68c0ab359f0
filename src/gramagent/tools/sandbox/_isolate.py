"""OS-level isolation of a sandbox worker, applied by the worker to itself before any user code.

Runs inside the isolated worker interpreter (``python -I -S``), so it imports only the standard
library. :func:`isolate` applies, in this order, and reports what it achieved:

1. **Namespaces** (``unshare``): a new network namespace (only a loopback interface, which is
   down: no route anywhere), a new mount namespace and a new IPC namespace; plus a new user
   namespace when not started as root (unprivileged namespaces). As root, the IPC
   namespace's limits are set to zero (:data:`IPC_LIMITS`), and ``RLIMIT_MSGQUEUE`` is 0.
2. **Filesystem view** (in the new mount namespace), an allow-list: every mount becomes
   private; a new root (an empty tmpfs) gets bind mounts of the system directories
   (:data:`SYSTEM_PATHS`), a few device nodes, ``/proc``, and the paths the worker needs (the
   interpreter and its site-packages, the data directories, the work directory) at their own
   paths; ``pivot_root`` makes it the root and the old root is detached. Then the whole tree
   is made read-only and ``nosuid``, except the work directory, which stays writable.
3. **Resource limits** (``setrlimit``): address space, CPU seconds, open files, file size,
   processes (no new process or thread can start), core dumps off.
4. **Privileges**: as root, switch to an unprivileged uid/gid with no supplementary groups
   (which clears every capability); otherwise drop the capabilities the user namespace gave.
   Then ``PR_SET_NO_NEW_PRIVS``, so no exec can gain privileges again (setuid binaries, file
   capabilities).
5. **Lifetime**: ``PR_SET_PDEATHSIG`` (``SIGKILL``), set after the credentials changed (a
   change clears it), so the worker dies with the host process; if the host is already gone
   the worker exits. The syscall filter keeps the code from clearing it.

Each step that cannot be applied is reported, not silently skipped; the parent decides whether
the result is strong enough (see ``docs/sandbox.md``).
"""

from __future__ import annotations

import ctypes
import os
import resource
from typing import Any

__all__ = ["enter_namespaces", "isolate"]

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_NOATIME = 0x400
MS_NODIRATIME = 0x800
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
MS_RELATIME = 0x200000
MS_STRICTATIME = 0x1000000

AT_FDCWD = -100
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY = 0x1
MOUNT_ATTR_NOSUID = 0x2
SYS_MOUNT_SETATTR = 442  # the same number on every architecture that has it

PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
SIGKILL = 9
_LINUX_CAPABILITY_VERSION_3 = 0x20080522

SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc",
                "/nix/store")
"""System directories the new root holds (read-only), where they exist; symlinks among them
(``/bin -> usr/bin``) are recreated as symlinks."""
DEVICES = ("null", "zero", "full", "random", "urandom")
"""The device nodes of the new root's ``/dev``."""
MNT_DETACH = 2
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "ppc64": 203,
               "s390x": 217, "i686": 217, "i386": 217, "armv7l": 218, "armv8l": 218}
"""The number of pivot_root per machine (glibc has no wrapper for it)."""

_MOUNT_OPTION_FLAGS = {
    "nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": MS_NOATIME,
    "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME, "strictatime": MS_STRICTATIME,
}

_libc: object = None


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def _c() -> Any:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)  # the C library's symbols; no ldconfig run
        _libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                ctypes.c_ulong, ctypes.c_void_p]
        _libc.unshare.argtypes = [ctypes.c_int]
        _libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                                ctypes.c_ulong]
        _libc.syscall.restype = ctypes.c_long
    return _libc


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int,
           data: str | None = None) -> None:
    def enc(text: str | None) -> bytes | None:
        return text.encode() if text is not None else None

    _check(_c().mount(enc(source), target.encode(), enc(fstype), flags, enc(data)),
           f"mount {target}")


def _mount_setattr(path: str, *, set_: int = 0, clear: int = 0, recursive: bool) -> None:
    attr = _MountAttr(set_, clear, 0, 0)
    flags = AT_RECURSIVE if recursive else 0
    _check(_c().syscall(SYS_MOUNT_SETATTR, AT_FDCWD, path.encode(), flags, ctypes.byref(attr),
                        ctypes.sizeof(attr)), f"mount_setattr {path}")


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


# ---------------------------------------------------------------------------------------------
# Steps
# ---------------------------------------------------------------------------------------------

def _unshare(root: bool) -> tuple[bool, bool, str]:
    """Enter new namespaces. Returns (network isolated, mount namespace, detail)."""
    libc = _c()
    user = 0 if root else CLONE_NEWUSER
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(user | CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWIPC) == 0:
        mounts = True
    elif libc.unshare(user | CLONE_NEWNET) == 0:
        mounts = False
    else:
        errno = ctypes.get_errno()
        return False, False, f"unshare failed: {os.strerror(errno)}"
    if not root:  # map our own ids into the new user namespace
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    detail = "new network namespace (no interfaces up)"
    return True, mounts, detail


IPC_LIMITS = (("kernel/shmmni", "0"), ("kernel/shmall", "0"), ("kernel/shmmax", "0"),
              ("kernel/msgmni", "0"), ("kernel/msgmnb", "0"), ("kernel/sem", "0 0 0 0"),
              ("fs/mqueue/queues_max", "0"))
"""The worker's IPC namespace holds no System V segment, queue or semaphore and no POSIX
message queue: their memory is outside the address space. These sysctls belong to the IPC
namespace; only its owner (root, for a worker started as root) may write them, and ``/proc``
is read-only once the new root is built."""


def _ipc_limits(own_namespace: bool) -> dict[str, Any]:
    """No System V IPC or POSIX message queues in the worker's new IPC namespace (written
    while ``/proc`` is still writable), and ``RLIMIT_MSGQUEUE`` 0; the report entry.

    Args:
        own_namespace: whether the worker is in an IPC namespace of its own (not the host's).
    """
    resource.setrlimit(resource.RLIMIT_MSGQUEUE, (0, 0))
    if not own_namespace:
        return {"ok": False, "detail": "no IPC namespace of its own"}
    try:
        for name, value in IPC_LIMITS:
            _write(f"/proc/sys/{name}", value)
    except OSError as exc:
        return {"ok": False, "detail": f"the IPC namespace's limits cannot be set ({exc.strerror})"}
    return {"ok": True, "detail": "IPC namespace with no room for System V shared memory, "
            "message queues, semaphores or POSIX message queues"}


def enter_namespaces() -> dict[str, Any]:
    """Run by the supervisor before it forks the worker: new network, IPC and PID namespaces
    (and a user namespace first when not root). The supervisor stays in the host's PID
    namespace; its next child is process 1 of the new one. The worker makes its own mount
    namespace (:func:`isolate`), so the supervisor keeps the host's view.

    Returns ``{"network": report entry, "pid": bool, "ipc": bool, "userns": bool}``.
    """
    libc = _c()
    root = os.geteuid() == 0
    user = 0 if root else CLONE_NEWUSER
    uid, gid = os.getuid(), os.getgid()
    tries = (user | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWPID,
             user | CLONE_NEWNET | CLONE_NEWIPC, user | CLONE_NEWNET)
    made = next((flags for flags in tries if libc.unshare(flags) == 0), None)
    if made is None:
        errno = ctypes.get_errno()
        return {"network": {"ok": False, "detail": f"unshare failed: {os.strerror(errno)}"},
                "pid": False, "ipc": False, "userns": False}
    pid = bool(made & CLONE_NEWPID)
    ipc = bool(made & CLONE_NEWIPC)
    if not root:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    return {"network": {"ok": True, "detail": "new network namespace (no interfaces up)"},
            "pid": pid, "ipc": ipc, "userns": not root}


def _processes_entry(own_proc: bool, pid_namespace: bool) -> dict[str, Any]:
    if own_proc:
        return {"ok": True, "detail": "own PID namespace (the worker is its process 1) and its "
                "own /proc: no process outside the sandbox can be seen, signalled or limited"}
    why = "its /proc could not be mounted" if pid_namespace else "no PID namespace"
    return {"ok": False, "detail": f"{why}: the host's processes are visible in /proc; only "
            "the syscall filter keeps signals and prlimit to the worker itself"}


def _readonly_everything() -> None:
    """Make every mount read-only and nosuid (mount_setattr, or a remount per mount)."""
    try:
        _mount_setattr("/", set_=MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, recursive=True)
        return
    except OSError as exc:
        if exc.errno not in (38, 22):  # ENOSYS (kernel < 5.12) or EINVAL: remount one by one
            raise
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4:6] for line in f]
    for target, options in points:
        target = target.encode().decode("unicode_escape")
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID
        for option in options.split(","):
            flags |= _MOUNT_OPTION_FLAGS.get(option, 0)
        try:
            _mount(None, target, None, flags)
        except OSError:
            if target == "/":
                raise


def _graft(root: str, path: str, source: str) -> None:
    """Make ``path`` of the new ``root`` show ``source`` (a bind mount, or a copy of a
    symlink)."""
    target = root + path
    if os.path.islink(path) and source == path:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.lexists(target):
            os.symlink(os.readlink(path), target)
        return
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.exists(target):
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT, 0o644))
    _mount(source, target, None, MS_BIND | MS_REC)


def _pivot(root: str) -> None:
    """Make ``root`` the root directory and detach the old one entirely."""
    number = _PIVOT_ROOT.get(os.uname().machine)
    if number is None:
        raise OSError(38, f"pivot_root: unknown syscall number on {os.uname().machine}")
    os.chdir(root)
    _check(_c().syscall(number, b".", b"."), "pivot_root")
    _check(_c().umount2(b".", MNT_DETACH), "umount old root")
    os.chdir("/")


def _filesystem(workdir: str, readable: list[str], own_proc: bool = False) -> str:
    """Build the worker's view: a new root (tmpfs) holding only the system directories, the
    readable paths and the work directory; returns a description of it."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    exposed = sorted([*readable, workdir], key=lambda p: p.count("/"))
    fds = {path: os.open(path, os.O_PATH | os.O_DIRECTORY) for path in exposed}
    root = "/tmp" if os.path.isdir("/tmp") else "/mnt"
    try:
        _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
        for path in SYSTEM_PATHS:
            if os.path.lexists(path):
                _graft(root, path, path)
        for name in DEVICES:
            if os.path.exists(f"/dev/{name}"):
                _graft(root, f"/dev/{name}", f"/dev/{name}")
        if own_proc:  # the PID namespace's own /proc: only the worker's processes
            os.makedirs(root + "/proc", exist_ok=True)
            _mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        else:
            _graft(root, "/proc", "/proc")
        for path in exposed:
            _graft(root, path, f"/proc/self/fd/{fds[path]}")
    finally:
        for fd in fds.values():
            os.close(fd)
    _pivot(root)
    _readonly_everything()
    try:
        _mount_setattr(workdir, clear=MOUNT_ATTR_RDONLY, recursive=True)
    except OSError as exc:
        if exc.errno not in (38, 22):
            raise
        _mount(None, workdir, None, MS_REMOUNT | MS_BIND | MS_NOSUID)
    return ("a new root holding only " + ", ".join(p for p in SYSTEM_PATHS
                                                   if os.path.lexists(p))
            + ", /dev/{" + ",".join(DEVICES) + "}, " + ("its own /proc" if own_proc else "/proc")
            + " and " + ", ".join(exposed)
            + "; read-only, writable: the work directory only")


def _limits(limits: dict[str, int]) -> str:
    pairs = [
        (resource.RLIMIT_AS, limits["memory_bytes"]),
        (resource.RLIMIT_CPU, limits["session_cpu_seconds"]),
        (resource.RLIMIT_NOFILE, limits["max_open_files"]),
        (resource.RLIMIT_FSIZE, limits["max_file_bytes"]),
        (resource.RLIMIT_NPROC, 1),
        (resource.RLIMIT_CORE, 0),
    ]
    for which, value in pairs:
        resource.setrlimit(which, (value, value))
    return (f"address space {limits['memory_bytes']} B, CPU {limits['session_cpu_seconds']} s "
            f"per worker, {limits['max_open_files']} open files, files up to "
            f"{limits['max_file_bytes']} B, no new processes or threads, no core dumps")


def _drop_capabilities() -> None:
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(_c().capset(ctypes.byref(header), ctypes.byref(data)), "capset")


def _effective_capabilities() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    return -1


def _privileges(root: bool, uid: int | None, gid: int | None, in_userns: bool) -> tuple[bool, str]:
    if root:
        if uid is None or gid is None or uid == 0:
            return False, "running as root: no unprivileged uid was given"
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    elif in_userns:
        _drop_capabilities()
    caps = _effective_capabilities()
    _check(_c().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    ok = os.geteuid() != 0 and caps == 0
    return ok, f"uid {os.getuid()}, gid {os.getgid()}, no capabilities, no new privileges" if ok \
        else f"uid {os.geteuid()} with capabilities {caps:#x}"


def _die_with_parent(parent_pid: int | None) -> str:
    """Get SIGKILL when the host process dies; exit now if it is already gone."""
    _check(_c().prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(70)  # the host died before the signal was armed
    return "killed with the host process (PR_SET_PDEATHSIG)"


def isolate(config: dict[str, Any],
            entered: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """Isolate the calling process as ``config`` asks; returns a report per feature.

    ``entered`` is what :func:`enter_namespaces` returned in the supervisor before it forked
    this process; the worker then makes only its mount namespace, mounts its own ``/proc``
    when it is process 1 of a new PID namespace, and reports ``processes``. Without it the
    process makes all its namespaces itself (no PID namespace).

    ``config`` holds ``workdir``, ``readable`` (paths to keep visible, read-only), ``limits``
    (the numbers of :func:`_limits`), ``uid``/``gid`` (used when running as root).

    Each report entry is ``{"ok": bool, "detail": str}`` for ``network``, ``ipc`` (folded
    into the parent's ``memory`` entry), ``filesystem``, ``limits``, ``privileges`` and
    ``lifetime``. A step that fails is reported with its
    error; the steps after it still run.
    """
    report: dict[str, dict[str, Any]] = {}
    root = os.geteuid() == 0
    host_ipc = os.readlink("/proc/self/ns/ipc")
    own_proc = False
    if entered is None:
        try:
            net, mounts, detail = _unshare(root)
        except OSError as exc:
            net, mounts, detail = False, False, f"unshare failed: {exc}"
        report["network"] = {"ok": net, "detail": detail}
        in_userns = net and not root
        own_ipc = os.readlink("/proc/self/ns/ipc") != host_ipc
    else:
        report["network"] = entered["network"]
        in_userns = bool(entered["userns"])
        mounts = _c().unshare(CLONE_NEWNS) == 0
        own_proc = bool(entered["pid"]) and os.getpid() == 1
        own_ipc = bool(entered["ipc"])
    try:
        report["ipc"] = _ipc_limits(own_ipc)
    except OSError as exc:
        report["ipc"] = {"ok": False, "detail": f"IPC limits failed: {exc}"}
    if mounts:
        try:
            fs_detail = _filesystem(config["workdir"], list(config["readable"]), own_proc)
            report["filesystem"] = {"ok": True, "detail": fs_detail}
        except OSError as exc:
            own_proc = False
            report["filesystem"] = {"ok": False, "detail": f"filesystem setup failed: {exc}"}
    else:
        own_proc = False
        report["filesystem"] = {"ok": False, "detail": "no mount namespace: the worker sees "
                                "and may write what its user may"}
    if entered is not None:
        report["processes"] = _processes_entry(own_proc, bool(entered["pid"]))
    try:
        report["limits"] = {"ok": True, "detail": _limits(config["limits"])}
    except (OSError, ValueError) as exc:
        report["limits"] = {"ok": False, "detail": f"setrlimit failed: {exc}"}
    try:
        ok, detail = _privileges(root, config.get("uid"), config.get("gid"), in_userns)
        report["privileges"] = {"ok": ok, "detail": detail}
    except OSError as exc:
        report["privileges"] = {"ok": False, "detail": f"dropping privileges failed: {exc}"}
    try:
        report["lifetime"] = {"ok": True, "detail": _die_with_parent(config.get("parent_pid"))}
    except OSError as exc:
        report["lifetime"] = {"ok": False, "detail": f"parent-death signal failed: {exc}"}
    os.chdir(config["workdir"])
    return report
