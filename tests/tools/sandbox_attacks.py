"""A host process under attack from its sandbox's cells, for the process-boundary tests.

Run as ``python sandbox_attacks.py BASE SECRET --api-key=SECRET`` (as root or as an ordinary
user): it opens listeners of its own (an abstract unix socket, a TCP port on 127.0.0.1, a unix
datagram socket and a FIFO in the data directory the worker reads), starts a victim sandbox and
an attacker sandbox, runs the attacks of :data:`ATTACKS` and :data:`BETWEEN_CALLS` in the
attacker, and prints one ``RESULT {json}`` line with what each attempt returned and what the
host saw (its listeners, its limits, the victim, the attacker's CPU time while no call ran).
A host killed by an attack prints nothing (its exit status tells).
"""

from __future__ import annotations

import json
import os
import resource
import socket
import sys
import time
from pathlib import Path
from typing import Any

ATTACKS = r'''
import ctypes, errno, fcntl, json, os, resource, signal, socket, struct
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
HOST, VICTIM, SECRET, FIFO, DGRAM, ABSTRACT, PORT = {args}
out = {{}}

def name(err):
    return errno.errorcode.get(err, str(err))

def attempt(label, action):
    try:
        result = action()
        if isinstance(result, int) and result < 0:
            out[label] = name(ctypes.get_errno())
        else:
            out[label] = "ok"
    except OSError as exc:
        out[label] = name(exc.errno)

r, w = os.pipe()
attempt("kill(host, 0)", lambda: os.kill(HOST, 0))
attempt("kill(victim, SIGKILL)", lambda: os.kill(VICTIM, signal.SIGKILL))
attempt("kill(0, SIGSTOP)", lambda: os.kill(0, signal.SIGSTOP))
attempt("pidfd_open(host)", lambda: libc.syscall(434, HOST, 0))
attempt("open(/proc/host)", lambda: os.open(f"/proc/{{HOST}}", os.O_RDONLY | os.O_DIRECTORY))
own = os.open("/proc/self", os.O_RDONLY | os.O_DIRECTORY)
attempt("pidfd_send_signal", lambda: libc.syscall(424, own, 0, None, 0))
attempt("F_SETOWN(host)", lambda: fcntl.fcntl(r, fcntl.F_SETOWN, HOST))
attempt("F_SETOWN_EX(host)", lambda: fcntl.fcntl(r, 15, struct.pack("ii", 1, HOST)))
attempt("F_SETSIG(SIGKILL)", lambda: fcntl.fcntl(r, 10, signal.SIGKILL))
attempt("ioctl(FIOSETOWN, host)", lambda: fcntl.ioctl(r, 0x8901, struct.pack("i", HOST)))
attempt("O_ASYNC", lambda: fcntl.fcntl(r, fcntl.F_SETFL, os.O_ASYNC))
os.write(w, b"x")  # would signal the owner, had one been set
attempt("prlimit(host)", lambda: resource.prlimit(HOST, resource.RLIMIT_NOFILE, (3, 3)))
attempt("prlimit(victim)", lambda: resource.prlimit(VICTIM, resource.RLIMIT_NOFILE, (3, 3)))
attempt("prlimit(self)", lambda: resource.prlimit(0, resource.RLIMIT_CORE, (0, 0)))
attempt("open(/proc/victim/comm)", lambda: os.open(f"/proc/{{VICTIM}}/comm", os.O_RDONLY))
attempt("open(/proc/host/net/unix)", lambda: os.open(f"/proc/{{HOST}}/net/unix", os.O_RDONLY))
attempt("socketpair(AF_UNIX, SOCK_DGRAM)", lambda: socket.socketpair(socket.AF_UNIX,
                                                                    socket.SOCK_DGRAM))
attempt("socket(AF_UNIX, SOCK_DGRAM)", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM))
def connect_abstract():
    a, b = socket.socketpair()
    a.connect(ABSTRACT)
attempt("connect(abstract)", connect_abstract)
def write_fifo():
    fd = os.open(FIFO, os.O_WRONLY | os.O_NONBLOCK)
    os.write(fd, b"leak " + SECRET.encode())
attempt("write(host FIFO)", write_fifo)
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
seen = []
for pid in pids:
    try:
        with open(f"/proc/{{pid}}/cmdline", "rb") as f:
            if SECRET.encode() in f.read():
                seen.append(pid)
    except OSError:
        pass
net = ""
for table in ("unix", "tcp", "tcp6", "udp"):
    try:
        with open(f"/proc/net/{{table}}") as f:
            net += f.read()
    except OSError:
        pass
print("PROBE " + json.dumps({{"attempts": out, "pids": pids, "ppid": os.getppid(),
                              "secret_in_cmdline": seen,
                              "abstract_listed": ABSTRACT[1:] in net,
                              "port_listed": f":{{PORT:04X}}" in net}}))
'''
"""Cell attacking the host, another sandbox and the host's listeners (one ``PROBE`` line)."""

BETWEEN_CALLS = r'''
import ctypes, errno, fcntl, json, os, signal, struct
libc = ctypes.CDLL(None, use_errno=True)
MARKER = {marker!r}
out = {{}}
signal.signal(signal.SIGCONT, lambda *_: open(MARKER, "a").write("SIGCONT\n"))
signal.signal(signal.SIGALRM, lambda *_: open(MARKER, "a").write("SIGALRM\n"))
event = ctypes.create_string_buffer(64)
struct.pack_into("qii", event, 0, 0, signal.SIGCONT, 0)  # SIGEV_SIGNAL with SIGCONT
timer = ctypes.c_void_p()
made = libc.timer_create(1, event, ctypes.byref(timer))  # CLOCK_MONOTONIC
out["timer_create(SIGCONT)"] = "ok" if made == 0 else errno.errorcode[ctypes.get_errno()]
if made == 0:
    spec = struct.pack("qqqq", 0, 20_000_000, 0, 20_000_000)  # every 20 ms
    libc.timer_settime(timer, 0, ctypes.c_char_p(spec), None)
r, w = os.pipe()
try:
    fcntl.fcntl(r, 10, signal.SIGCONT)  # F_SETSIG: I/O on r would send SIGCONT
    out["F_SETSIG(SIGCONT)"] = "ok"
except OSError as exc:
    out["F_SETSIG(SIGCONT)"] = errno.errorcode[exc.errno]
signal.setitimer(signal.ITIMER_REAL, 0.05, 0.05)
print("PROBE " + json.dumps(out))
'''
"""Cell that leaves timers and handlers behind: anything that runs writes to ``marker``."""

FD_INODES = r'''
import os
inodes = set()
for fd in range(1024):
    try:
        inodes.add(os.fstat(fd).st_ino)
    except OSError:
        pass
sorted(inodes)
'''
"""Cell listing the inodes of every descriptor the worker holds."""


def _probe(text: str) -> dict[str, Any]:
    line = next(line for line in text.splitlines() if line.startswith("PROBE "))
    parsed: dict[str, Any] = json.loads(line[len("PROBE "):])
    return parsed


def _cpu_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def _listeners(base: Path, secret: str) -> dict[str, Any]:
    data = base / "data"
    data.mkdir(mode=0o755)
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind("\0gramagent-probe-" + secret)
    abstract.listen()
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen()
    dgram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    dgram.bind(str(data / "probe.sock"))
    os.chmod(data / "probe.sock", 0o777)
    fifo = data / "probe.fifo"
    os.mkfifo(fifo, 0o666)
    os.chmod(fifo, 0o666)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    for sock in (abstract, tcp, dgram):
        sock.setblocking(False)
    return {"data": data, "abstract": abstract, "tcp": tcp, "dgram": dgram, "fifo": fifo,
            "reader": reader}


def _received(listeners: dict[str, Any]) -> dict[str, bool]:
    got = {}
    for name in ("abstract", "tcp"):
        try:
            listeners[name].accept()
            got[name] = True
        except BlockingIOError:
            got[name] = False
    try:
        got["dgram"] = bool(listeners["dgram"].recv(100))
    except BlockingIOError:
        got["dgram"] = False
    try:
        got["fifo"] = bool(os.read(listeners["reader"], 100))
    except BlockingIOError:
        got["fifo"] = False
    return got


def main() -> None:
    from gramagent.tools.sandbox import PythonSandbox, SandboxConfig, SandboxError, SandboxLimits

    def fast_config() -> SandboxConfig:  # tools_support's limits, without importing pytest
        return SandboxConfig(limits=SandboxLimits(
            timeout=10.0, cpu_seconds=2, session_cpu_seconds=60, memory_bytes=768 << 20,
            max_open_files=64, max_file_bytes=4 << 20, max_output_chars=4000))

    base, secret = Path(sys.argv[1]), sys.argv[2]
    listeners = _listeners(base, secret)
    results: dict[str, Any] = {"uid": os.getuid()}
    victim = PythonSandbox(base / "victim", config=fast_config())
    box = PythonSandbox(base / "attacker", data_dir=listeners["data"], config=fast_config())
    try:
        try:
            results["isolation"] = box.start().describe()
            victim.run("kept = 42")
        except SandboxError as exc:
            print("RESULT " + json.dumps({"unavailable": str(exc)}), flush=True)
            return
        nofile = resource.getrlimit(resource.RLIMIT_NOFILE)
        args = (os.getpid(), victim.worker_pid, secret, str(listeners["fifo"]),
                str(listeners["data"] / "probe.sock"), "\0gramagent-probe-" + secret,
                listeners["tcp"].getsockname()[1])
        results["attacks"] = _probe(box.run(ATTACKS.format(args=repr(args))).to_text())
        results["received"] = _received(listeners)
        results["nofile_kept"] = resource.getrlimit(resource.RLIMIT_NOFILE) == nofile
        results["victim"] = victim.run("kept").value
        worker = box._worker
        assert worker is not None
        results["host_pipes"] = [os.fstat(stream.fileno()).st_ino for stream in (
            worker.proc.stdin, worker.proc.stdout, worker.proc.stderr) if stream is not None]
        results["worker_fds"] = json.loads(box.run(FD_INODES).value or "[]")
        marker = box.workdir / "between-calls"
        results["between"] = _probe(box.run(BETWEEN_CALLS.format(marker=str(marker))).output)
        cell = box.worker_pid
        assert cell is not None
        before = _cpu_ticks(cell)
        time.sleep(1.5)
        results["idle"] = {"cpu_ticks": _cpu_ticks(cell) - before, "state": _state(cell),
                           "marker": marker.exists()}
        box.run("import time\ntime.sleep(0.2)")
        results["marker_in_next_call"] = marker.exists()
    finally:
        box.close()
        victim.close()
    print("RESULT " + json.dumps(results), flush=True)


if __name__ == "__main__":
    main()
