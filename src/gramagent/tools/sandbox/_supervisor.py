"""The sandbox supervisor: the process that holds the host's pipes and keeps the worker stopped.

Runs in the process the host started (``python -I -S _worker.py``), which never runs user
code. It enters new namespaces (:func:`_isolate.enter_namespaces`), forks the worker (process
1 of the new PID namespace, which cannot see or signal the supervisor or the host) and then
relays frames: one request from the host to the worker, one reply back. The worker's own pipes
end here; the host's pipes are not in the worker, so nothing a cell writes reaches the host
except the one frame that answers its call.

Between calls the worker is stopped by the supervisor (``SIGSTOP``, from outside its PID
namespace), and a reply is passed on only once ``waitpid`` reports the stop: the worker runs
only from the moment a request arrives to the moment its reply has been read. Bytes it wrote
after its reply stay in its pipe and are read as the next reply, which the host refuses (its id
is not the next request's).

Like the other worker modules it imports only the standard library.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import select
import signal
import struct
from typing import Any

__all__ = ["Relay", "die_with_parent", "mirror_exit", "read_raw", "write_all"]

_HEADER = struct.Struct(">I")
PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int | None) -> None:
    """``SIGKILL`` when the host dies; exit now if it already has."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(70)


def _read_exact(fd: int, size: int) -> bytes | None:
    chunks: list[bytes] = []
    while size:
        chunk = os.read(fd, min(size, 1 << 16))
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def read_raw(fd: int, max_bytes: int) -> bytes | None:
    """One frame's bytes (header included) from ``fd``; None if the stream ended first. A
    header announcing more than ``max_bytes`` is returned alone (the host refuses it)."""
    header = _read_exact(fd, _HEADER.size)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    if size > max_bytes:
        return header
    body = _read_exact(fd, size)
    return None if body is None else header + body


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd`` (blocking)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def mirror_exit(pid: int) -> None:
    """Reap the worker and end this process the same way (status or signal)."""
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        os._exit(70)
    if os.WIFSIGNALED(status):
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        signum = os.WTERMSIG(status)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 70)


class Relay:
    """The supervisor's loop over the host's pipes and the worker's.

    Args:
        worker: the worker's pid (as the supervisor and the host see it).
        host_in, host_out: the host's request and reply pipes.
        to_worker, from_worker: the worker's request and reply pipes.
        max_request, max_reply: frame size limits (the host checks replies again).
    """

    def __init__(self, worker: int, host_in: int, host_out: int, to_worker: int,
                 from_worker: int, *, max_request: int, max_reply: int) -> None:
        self.worker = worker
        self.host_in, self.host_out = host_in, host_out
        self.to_worker, self.from_worker = to_worker, from_worker
        self.max_request, self.max_reply = max_request, max_reply

    def _stop_worker(self) -> bool:
        """Stop the worker and wait until the kernel reports it stopped (False: it died)."""
        try:
            os.kill(self.worker, signal.SIGSTOP)
            while True:
                pid, status = os.waitpid(self.worker, os.WUNTRACED)
                if pid == self.worker and os.WIFSTOPPED(status):
                    return True
                if pid == self.worker:
                    return False
        except (ChildProcessError, ProcessLookupError):
            return False

    def _reply(self) -> bytes:
        """The worker's next frame, with the worker stopped; ends this process if it died."""
        frame = read_raw(self.from_worker, self.max_reply)
        if frame is None or not self._stop_worker():
            os.kill(self.worker, signal.SIGKILL)
            mirror_exit(self.worker)
        assert frame is not None
        return frame

    def _refuse(self, reason: str) -> None:
        """Tell the host the worker broke the protocol, kill it and end."""
        body = json.dumps({"op": "refused", "reason": reason}).encode()
        write_all(self.host_out, _HEADER.pack(len(body)) + body)
        os.kill(self.worker, signal.SIGKILL)
        mirror_exit(self.worker)

    def start(self) -> None:
        """Pass on the worker's ``ready`` frame, adding the worker's pid."""
        frame = self._reply()
        try:
            ready: dict[str, Any] = json.loads(frame[_HEADER.size:])
        except ValueError:  # the worker ran no user code yet: not expected
            ready = {"op": "ready", "ok": False, "error": "the worker's first frame is not JSON"}
        ready["pid"] = self.worker
        body = json.dumps(ready, ensure_ascii=False).encode()
        write_all(self.host_out, _HEADER.pack(len(body)) + body)

    def serve(self) -> None:
        """Relay requests and replies until the host closes its pipe; then kill the worker."""
        while True:
            request = read_raw(self.host_in, self.max_request)
            if request is None:
                os.kill(self.worker, signal.SIGKILL)
                mirror_exit(self.worker)
            assert request is not None
            if select.select([self.from_worker], [], [], 0)[0]:
                if not os.read(self.from_worker, 1):  # the worker died between calls
                    mirror_exit(self.worker)
                self._refuse("the worker wrote more after its reply")
            os.kill(self.worker, signal.SIGCONT)
            try:
                write_all(self.to_worker, request)
            except BrokenPipeError:
                mirror_exit(self.worker)
            write_all(self.host_out, self._reply())
