"""The sandbox worker's seccomp filter: a deny-list of syscalls ordinary Python never needs.

Defence in depth on top of the namespaces, limits and dropped privileges of :mod:`_isolate`:
the filter shrinks the kernel surface the model's code (and every process it starts, as filters
are inherited across fork and exec) can reach. It is built with ``pyseccomp`` (a ctypes binding
of libseccomp; no hand-written BPF) and installed by the worker after the other isolation steps
and before any user code. Denied calls fail with ``EPERM``, so the code sees a readable
``PermissionError`` instead of being killed. What is denied and why: :data:`DENIED` and
``docs/sandbox.md``.

Like the other worker modules it imports only the standard library: the worker runs as
``python -I -S`` and loads ``pyseccomp`` from the file the parent found (:func:`binding_path`),
so the filter does not depend on the worker's import paths.
"""

from __future__ import annotations

import errno
import importlib.util
import os
from types import ModuleType
from typing import Any, NamedTuple

__all__ = ["DENIED", "MODES", "Prepared", "binding_path", "install", "prepare"]

MODES = ("on", "required", "off")
"""``on``: install when available, else report it missing; ``required``: the parent refuses
to run code without it; ``off``: not installed."""

DENIED: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("reading or changing other processes",
     ("ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "pidfd_getfd",
      "kcmp")),
    ("changing mounts or the root directory",
     ("mount", "umount", "umount2", "pivot_root", "chroot", "mount_setattr", "move_mount",
      "open_tree", "fsopen", "fsconfig", "fsmount", "fspick")),
    ("entering or creating namespaces", ("unshare", "setns")),
    ("loading kernel code, changing the machine",
     ("kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot",
      "swapon", "swapoff", "syslog", "acct", "quotactl", "quotactl_fd", "iopl", "ioperm",
      "uselib", "lookup_dcookie", "nfsservctl", "vm86", "vm86old")),
    ("memory the address-space limit does not count", ("memfd_create", "memfd_secret")),
    ("memory outside the address space: System V IPC, POSIX message queues, pages moved "
     "into pipes, inotify watches pinning inodes",
     ("shmget", "shmat", "shmctl", "msgget", "msgsnd", "msgctl", "semget", "semctl", "semop",
      "semtimedop", "ipc", "mq_open", "mq_timedsend", "mq_notify", "vmsplice", "splice", "tee",
      "sendfile", "sendfile64", "inotify_init", "inotify_init1", "fanotify_init")),
    ("kernel interfaces often used in local exploits",
     ("bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key",
      "io_uring_setup", "io_uring_enter", "io_uring_register", "open_by_handle_at",
      "name_to_handle_at")),
)
"""Syscalls denied outright (``EPERM``), grouped by the reason. Names this architecture does
not have are skipped. Argument-dependent rules are in :func:`_add_argument_rules` and
:func:`_add_buffer_rules`."""

AF_UNIX = 1
PR_SET_PDEATHSIG = 1
SIGNAL_CALLS = ("kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open")
"""Calls whose first argument names the process to signal (or to open a pidfd of)."""
NAMESPACE_CLONE_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000,
                         0x20000000, 0x40000000)
"""CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET."""
PERSONALITY_QUERY = 0xFFFFFFFF
F_SETPIPE_SZ = 1031
DEFAULT_PIPE_BYTES = 65536
"""A pipe's default capacity: F_SETPIPE_SZ may shrink a pipe to it or below, not grow it."""
SOL_SOCKET = 1
SOCKET_BUFFER_OPTIONS = (7, 8, 32, 33)
"""SO_SNDBUF, SO_RCVBUF, SO_SNDBUFFORCE, SO_RCVBUFFORCE."""
INT_MASK = 0xFFFFFFFF
"""The kernel reads these arguments as 32-bit ints: compare only the bits it reads."""
_S390_ARCHS = (22, 22 | 0x80000000)  # EM_S390 (31 and 64 bit): clone's flags come second


class Prepared(NamedTuple):
    """A filter built before isolation, or why there is none."""

    filter: Any | None
    """The ``pyseccomp.SyscallFilter`` to load, or None."""
    detail: str
    """What the filter denies, or why it is off."""


def binding_path() -> str | None:
    """The file of the ``pyseccomp`` module as this interpreter finds it, or None (parent side)."""
    try:
        spec = importlib.util.find_spec("pyseccomp")
    except (ImportError, ValueError):
        return None
    return spec.origin if spec is not None and spec.origin else None


def _load_binding(path: str) -> ModuleType:
    """Load ``pyseccomp`` from ``path`` without adding its folder to the import path."""
    spec = importlib.util.spec_from_file_location("pyseccomp", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # finds libseccomp.so.2; raises RuntimeError without it
    return module


def _add_argument_rules(seccomp: ModuleType, flt: Any, deny: int) -> None:
    """Rules that look at arguments: sockets, clone flags, clone3, personality, prctl,
    signals."""
    # Sockets: no socket() at all, so no path-based unix socket of the host can be reached
    # (connecting needs one); socketpair only for AF_UNIX (the asyncio event loop's self-pipe).
    # NE, not a list of families: the full 64-bit argument is compared, so high garbage bits
    # cannot sneak past.
    flt.add_rule(deny, "socket")
    flt.add_rule(deny, "socketpair", seccomp.Arg(0, seccomp.NE, AF_UNIX))
    flags_arg = 1 if seccomp.system_arch() in _S390_ARCHS else 0
    for flag in NAMESPACE_CLONE_FLAGS:  # threads and fork stay allowed; new namespaces do not
        flt.add_rule(deny, "clone", seccomp.Arg(flags_arg, seccomp.MASKED_EQ, flag, flag))
    # clone3 passes its flags in memory, which seccomp cannot read. ENOSYS (not EPERM) makes
    # the C library fall back to clone, where the flags are checked.
    flt.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    # personality: the query form only (setting e.g. ADDR_NO_RANDOMIZE would weaken ASLR).
    flt.add_rule(deny, "personality", seccomp.Arg(0, seccomp.NE, PERSONALITY_QUERY))
    # the parent-death signal the worker armed: the code may not clear or change it
    flt.add_rule(deny, "prctl", seccomp.Arg(0, seccomp.EQ, PR_SET_PDEATHSIG))
    # signals only to itself (the worker cannot start processes or threads, so its pid is its
    # only thread and process group): no other session's worker, and not the host, even
    # where they share a uid (unprivileged mode)
    own = os.getpid()
    for name in SIGNAL_CALLS:
        flt.add_rule(deny, name, seccomp.Arg(0, seccomp.NE, own))


def _add_buffer_rules(seccomp: ModuleType, flt: Any, deny: int) -> None:
    """Kernel buffers kept at their default size, so the memory a worker holds outside its
    address space stays small: no pipe grown past 64 KiB (``F_SETPIPE_SZ``), no socket
    buffer enlarged (``SO_SNDBUF``, ``SO_RCVBUF`` and their ``FORCE`` forms)."""
    flt.add_rule(deny, "fcntl", seccomp.Arg(1, seccomp.MASKED_EQ, INT_MASK, F_SETPIPE_SZ),
                 seccomp.Arg(2, seccomp.GT, DEFAULT_PIPE_BYTES))
    for option in SOCKET_BUFFER_OPTIONS:
        flt.add_rule(deny, "setsockopt", seccomp.Arg(1, seccomp.MASKED_EQ, INT_MASK, SOL_SOCKET),
                     seccomp.Arg(2, seccomp.MASKED_EQ, INT_MASK, option))


F_SETOWN, F_SETSIG, F_SETOWN_EX = 8, 10, 15
FIOSETOWN, SIOCSPGRP = 0x8901, 0x8902
SOCK_STREAM, SOCK_TYPE_MASK = 1, 0xF
OWNER_CALLS = (("fcntl", (F_SETOWN, F_SETSIG, F_SETOWN_EX)), ("ioctl", (FIOSETOWN, SIOCSPGRP)))
"""Commands that make the kernel signal a chosen process (or the worker with a chosen signal)
when a file is ready: ``fcntl`` and its ``ioctl`` twins."""


def _add_process_rules(seccomp: ModuleType, flt: Any, deny: int) -> None:
    """Rules that keep the worker from acting on any other process and from waking itself
    while it is stopped between calls.

    - ``prlimit64`` only on itself (pid 0, the form ``setrlimit``/``getrlimit`` use);
    - ``pidfd_send_signal`` denied (a pidfd of another process comes from ``/proc/<pid>``);
    - ``fcntl(F_SETOWN, F_SETOWN_EX, F_SETSIG)`` and ``ioctl(FIOSETOWN, SIOCSPGRP)``
      denied: with them, I/O on a file signals a chosen process (the host) with a chosen
      signal (``SIGKILL``), or the stopped worker with ``SIGCONT``;
    - ``timer_create`` denied: a POSIX timer can deliver ``SIGCONT``, which would continue
      the stopped worker between calls (``setitimer``/``alarm`` send only their fixed
      signals, which do not continue a stopped process);
    - ``socketpair`` only of ``SOCK_STREAM`` type: a datagram pair can ``sendto`` a socket
      file of the host by its path.
    """
    flt.add_rule(deny, "prlimit64", seccomp.Arg(0, seccomp.NE, 0))
    flt.add_rule(deny, "pidfd_send_signal")
    flt.add_rule(deny, "timer_create")
    for name, commands in OWNER_CALLS:  # the command is an unsigned int (INT_MASK)
        for command in commands:
            flt.add_rule(deny, name, seccomp.Arg(1, seccomp.MASKED_EQ, INT_MASK, command))
    for kind in range(SOCK_TYPE_MASK + 1):
        if kind != SOCK_STREAM:
            flt.add_rule(deny, "socketpair",
                         seccomp.Arg(1, seccomp.MASKED_EQ, SOCK_TYPE_MASK, kind))


def _build(seccomp: ModuleType) -> tuple[Any, int]:
    deny = seccomp.ERRNO(errno.EPERM)
    flt = seccomp.SyscallFilter(seccomp.ALLOW)
    # other ABIs (i386 via int 0x80, x32) are not described by the rules: deny all their calls
    flt.set_attr(seccomp.Attr.ACT_BADARCH, deny)
    flt.set_attr(seccomp.Attr.CTL_NNP, 1)  # the default; stated, as install() relies on it
    count = 0
    for _, names in DENIED:
        for name in names:
            if seccomp.resolve_syscall(seccomp.Arch.NATIVE, name) < 0:
                continue  # not a syscall of this architecture
            flt.add_rule(deny, name)
            count += 1
    _add_argument_rules(seccomp, flt, deny)
    _add_buffer_rules(seccomp, flt, deny)
    _add_process_rules(seccomp, flt, deny)
    return flt, count


def prepare(options: dict[str, Any] | None) -> Prepared:
    """Load the binding and build the filter; call before isolation.

    Loading ``pyseccomp`` runs ``ctypes.util.find_library``, which starts ``ldconfig``; after
    isolation the worker can no longer start processes.

    Args:
        options: ``{"mode": one of MODES, "binding": path of pyseccomp.py or None}``.
    """
    options = options or {}
    if options.get("mode", "on") == "off":
        return Prepared(None, "turned off by configuration (syscall_filter='off')")
    path = options.get("binding")
    if not path:
        return Prepared(None, "pyseccomp is not installed (pip install pyseccomp)")
    try:
        seccomp = _load_binding(str(path))
    except Exception as exc:  # noqa: BLE001 - RuntimeError without libseccomp, AttributeError
        # with a libseccomp older than the binding: either way the sandbox runs without it
        return Prepared(None, f"pyseccomp could not be loaded: {type(exc).__name__}: {exc}")
    try:
        flt, count = _build(seccomp)
    except (OSError, ValueError) as exc:
        return Prepared(None, f"building the seccomp filter failed: {exc}")
    return Prepared(flt, f"seccomp filter: {count} syscalls, socket(), socket pairs other than "
                         "AF_UNIX, "
                         "new namespaces, personality changes, clearing the parent-death "
                         "signal, signals, prlimit and I/O signal owners aimed at other "
                         "processes, POSIX timers, datagram socket pairs, growing pipe "
                         "and socket buffers denied (EPERM)")


def _status() -> dict[str, str]:
    with open("/proc/self/status") as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def install(prepared: Prepared) -> dict[str, Any]:
    """Load the prepared filter into this process; returns the ``syscalls`` report entry.

    ``ok`` only when the kernel confirms it: ``/proc/self/status`` shows seccomp filter mode
    and no-new-privileges (libseccomp sets ``PR_SET_NO_NEW_PRIVS`` before loading).
    """
    if prepared.filter is None:
        return {"ok": False, "detail": prepared.detail}
    try:
        prepared.filter.load()
        status = _status()
    except OSError as exc:
        return {"ok": False, "detail": f"loading the seccomp filter failed: {exc}"}
    if status.get("Seccomp", "").strip() != "2" or status.get("NoNewPrivs", "").strip() != "1":
        return {"ok": False, "detail": "the kernel does not report the filter as active "
                f"(Seccomp: {status.get('Seccomp')}, NoNewPrivs: {status.get('NoNewPrivs')})"}
    return {"ok": True, "detail": prepared.detail}
