"""Escape attempts aimed at the host process: its pipes, its trust in replies, its lifetime.

Model-written code runs inside the worker, so it can rewrite the worker's own protocol loop,
write frames on its private pipes and change its process attributes. Each test attacks the
parent that way and checks the outcome from the host side: elapsed time against a generous
bound that only proves "did not hang", the session lock, marker files, the worker's process
in /proc, and what the next call reports.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tools_support import FAST_LIMITS, fast_config, start_or_skip

from gramagent.tools.sandbox import PythonSandbox, SandboxConfig, SandboxError

pytestmark = pytest.mark.slow

HANG_BOUND = 60.0
"""Seconds after which a call that should have ended counts as hung (a 4 s timeout is set)."""

WORKER_FRAMES = """
import json, os, struct, sys
_loop = sys._getframe(2).f_locals  # the cell <- Session.run <- the worker's main loop

def _send(body):
    os.write(_loop["proto_out"], struct.pack(">I", len(body)) + body)
"""
"""Cell code that reaches the worker's private pipes and its current request, as an attacker
would (the worker is the cell's own process)."""

STOP_READING = WORKER_FRAMES + """
import fcntl, time
fcntl.fcntl(_loop["proto_in"], 1031, 4096)  # F_SETPIPE_SZ: the smallest request pipe
def _stuck(fd, decoder):
    os.read(fd, 1)  # looks like a worker waiting for its request, then never reads again
    time.sleep(10 ** 6)
sys.modules["_protocol"].read_frame = _stuck
"""


def alive(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie (read from /proc)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def wait_gone(pid: int, bound: float = 20.0) -> bool:
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


def call_in_thread(box: PythonSandbox, code: str) -> tuple[threading.Thread, list[object]]:
    """Run ``box.run(code)`` in a thread; the list receives its result or exception."""
    outcome: list[object] = []

    def target() -> None:
        try:
            outcome.append(box.run(code))
        except SandboxError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, outcome


# -- class 1: the parent must not trust the worker's pipe -------------------------------------

def test_a_worker_that_stops_reading_cannot_hang_the_call(sandbox: PythonSandbox) -> None:
    """The cell shrinks its request pipe and stops reading it; the next request is larger than
    the pipe. The write is bounded by the call's timeout, the lock is released, and the next
    call runs in a fresh worker."""
    sandbox.run(STOP_READING)
    old_pid = sandbox.worker_pid
    assert old_pid is not None
    started = time.monotonic()
    thread, outcome = call_in_thread(sandbox, "#" * 200_000 + "\n1")
    thread.join(HANG_BOUND)
    assert not thread.is_alive(), "the call hung on a worker that stopped reading"
    assert time.monotonic() - started < HANG_BOUND
    error = outcome[0]
    assert isinstance(error, SandboxError) and error.kind == "timeout" and error.state_lost
    assert not sandbox._lock.locked()
    assert wait_gone(old_pid)
    assert sandbox.run("1").restarted


def test_close_does_not_wait_for_a_hung_call(tmp_path: Path, data_dir: Path) -> None:
    """With a long timeout, a call hangs on a worker that stopped reading; close() from
    another thread returns at once, kills the worker and ends the call."""
    box = PythonSandbox(tmp_path / "w", data_dir=data_dir, config=fast_config(timeout=300.0))
    try:
        start_or_skip(box)
        box.run(STOP_READING)
        pid = box.worker_pid
        assert pid is not None
        thread, outcome = call_in_thread(box, "#" * 200_000 + "\n1")
        time.sleep(0.5)
        assert thread.is_alive()  # really stuck in the write
        started = time.monotonic()
        box.close()
        thread.join(HANG_BOUND)
        assert time.monotonic() - started < HANG_BOUND and not thread.is_alive()
    finally:
        box.close()
    error = outcome[0]
    assert isinstance(error, SandboxError) and error.kind == "closed"
    assert not box._lock.locked() and wait_gone(pid)


# -- class 2: replies bound to their request; no cell code after its result --------------------

def test_a_reply_to_another_request_kills_the_worker(sandbox: PythonSandbox) -> None:
    """A well-formed reply frame with a made-up id is a protocol error, never a result."""
    sandbox.run("kept = 1")
    pid = sandbox.worker_pid
    forged = WORKER_FRAMES + """
_send(json.dumps({"op": "result", "id": "not-yours", "output": "FORGED", "output_bytes": 6,
                  "value": None, "error": None}).encode())
import time
time.sleep(30)
"""
    with pytest.raises(SandboxError) as info:
        sandbox.run(forged)
    assert info.value.kind == "protocol" and info.value.state_lost
    assert "does not answer this request" in str(info.value)
    assert pid is not None and wait_gone(pid)
    after = sandbox.run("'kept' in globals()")
    assert after.restarted and after.value == "False"


def test_a_forged_reply_with_the_right_id_freezes_the_cell_there(sandbox: PythonSandbox) -> None:
    """The cell answers its own request (reading the id from the worker's frame) and means to
    keep running. Its frame is its call's answer (what the cell chose to say, as if it had
    printed it), but the supervisor stops the worker the moment it has that frame: the late
    marker does not appear while no call runs. The next call lets the cell finish, and the
    worker's own, late reply to the old request is refused."""
    marker = sandbox.workdir / "late-marker"
    forged = WORKER_FRAMES + f"""
_send(json.dumps({{"op": "result", "id": _loop["request"]["id"], "output": "FORGED",
                  "output_bytes": 6, "value": None, "error": None}}).encode())
import time
time.sleep(1.0)
open({str(marker)!r}, "w").write("ran after its result")
"""
    assert sandbox.run(forged).output == "FORGED"
    time.sleep(2.5)
    assert not marker.exists(), "cell code ran after its call returned"
    with pytest.raises(SandboxError) as info:
        sandbox.run("1")
    assert info.value.kind == "protocol" and "does not answer this request" in str(info.value)
    assert sandbox.run("1").restarted


def test_bytes_after_a_reply_are_refused(sandbox: PythonSandbox) -> None:
    """The cell writes its answer and more bytes at once; the supervisor finds them before it
    lets the worker run again and refuses the worker."""
    forged = WORKER_FRAMES + """
reply = json.dumps({"op": "result", "id": _loop["request"]["id"], "output": "FORGED",
                    "output_bytes": 6, "value": None, "error": None}).encode()
os.write(_loop["proto_out"], struct.pack(">I", len(reply)) + reply + struct.pack(">I", 2) + b"{}")
import time
time.sleep(1.0)
"""
    sandbox.run(forged)
    with pytest.raises(SandboxError) as info:
        sandbox.run("1")
    assert info.value.kind == "protocol" and "more after its reply" in str(info.value)


FRAME_KINDS = ("right id", "other id", "not JSON", "announces 1 GB")


def _frame_bytes(kind: str) -> str:
    """Cell source for the bytes of one frame of ``kind`` (``_loop`` as in WORKER_FRAMES)."""
    if kind == "announces 1 GB":
        return 'struct.pack(">I", 1 << 30)'
    if kind == "not JSON":
        return 'struct.pack(">I", 5) + b"{oops"'
    ident = '_loop["request"]["id"]' if kind == "right id" else '"not-yours"'
    return (f'(lambda b: struct.pack(">I", len(b)) + b)(json.dumps({{"op": "result", "id": '
            f'{ident}, "output": "FORGED", "output_bytes": 6, "value": None, '
            f'"error": None}}).encode())')


@settings(max_examples=12, deadline=None)
@given(st.lists(st.sampled_from(FRAME_KINDS), min_size=1, max_size=3))
def test_only_the_first_frame_of_a_call_is_ever_taken(kinds: list[str]) -> None:
    """Whatever frames a cell writes on its pipe in one go, the host takes at most the first
    as the call's answer (only if it answers this request), and the call after it is refused:
    either for the bytes after that frame or for the worker's own late reply to the old
    request. The call after that runs in a fresh worker."""
    with tempfile.TemporaryDirectory() as folder, \
            PythonSandbox(Path(folder) / "w", config=fast_config()) as box:
        start_or_skip(box)
        written = " + ".join(_frame_bytes(kind) for kind in kinds)
        cell = WORKER_FRAMES + f"os.write(_loop['proto_out'], {written})\nimport time\n" \
            "time.sleep(0.5)\n"
        if kinds[0] == "right id":
            assert box.run(cell).output == "FORGED"
            with pytest.raises(SandboxError) as info:
                box.run("1")
        else:
            with pytest.raises(SandboxError) as info:
                box.run(cell)
        assert info.value.kind == "protocol" and info.value.state_lost
        assert box.run("1").restarted


def test_no_cell_code_runs_between_calls(sandbox: PythonSandbox) -> None:
    """A cell arms a timer whose handler writes a marker, then returns. Between calls the
    worker is stopped: the marker does not appear until the next call lets the worker run."""
    marker = sandbox.workdir / "timer-marker"
    result = sandbox.run(f"""
import signal
signal.signal(signal.SIGALRM, lambda *_: open({str(marker)!r}, "w").write("tick"))
signal.setitimer(signal.ITIMER_REAL, 0.3)
"done"
""")
    assert result.value == "'done'"
    time.sleep(1.5)
    assert not marker.exists(), "cell code ran after its result was returned"
    sandbox.run("import time\ntime.sleep(0.2)")
    assert marker.exists()  # the pending signal is handled inside the next call's limits


# -- class 3: workers die with their host ------------------------------------------------------

HOST_SCRIPT = """
import ctypes, os, sys, time
from gramagent.tools.sandbox import PythonSandbox, SandboxConfig, SandboxLimits
box = PythonSandbox(sys.argv[1], config=SandboxConfig(
    limits=SandboxLimits(timeout=10), syscall_filter=sys.argv[2]))
cleared = box.run(
    "import ctypes, sys, time\\n"
    # a survivor would not leave when its pipe closes: it sleeps instead of reading requests
    "sys.modules['_protocol'].read_frame = lambda *_: time.sleep(10 ** 6)\\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, 0, 0, 0, 0)")
print(box.worker_pid, cleared.value, box._worker.proc.pid, flush=True)
time.sleep(600)
"""


def start_host(workdir: Path,
               syscall_filter: str) -> tuple[subprocess.Popen[str], int, str, int]:
    """A host process with a sandbox whose cell tried to clear its parent-death signal;
    returns the host, the worker's pid, what prctl returned in the cell and the pid of the
    worker's supervisor."""
    host = subprocess.Popen([sys.executable, "-c", HOST_SCRIPT, str(workdir), syscall_filter],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "GRAMAGENT_SANDBOX_ALLOW_WEAK": "0"})
    assert host.stdout is not None
    line = host.stdout.readline().split()
    if len(line) != 3:
        host.kill()
        stderr = host.communicate()[1]
        if os.geteuid() != 0 and "unavailable" in stderr:
            pytest.skip("no OS isolation for the sandbox on this machine")
        raise AssertionError(stderr)
    return host, int(line[0]), line[1], int(line[2])


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM])
def test_workers_die_with_their_host(tmp_path: Path, signum: int) -> None:
    """The host is killed (or terminated); its worker, whose cell tried to clear the
    parent-death signal, is gone too."""
    pytest.importorskip("pyseccomp")
    host, pid, cleared, _ = start_host(tmp_path / "work", "required")
    try:
        assert cleared == "-1"  # the filter refused to clear the parent-death signal
        assert alive(pid)
        host.send_signal(signum)
        host.wait(HANG_BOUND)
        assert wait_gone(pid), f"worker {pid} outlived its host"
    finally:
        host.kill()
        host.communicate()
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_a_session_does_not_start_while_an_old_worker_lives(tmp_path: Path) -> None:
    """Without the filter a cell can clear its parent-death signal and outlive its supervisor
    and host when both are killed (the supervisor kills its worker when the host's pipe
    closes, so it is killed first here). A new session on the same work directory kills that
    survivor before it starts."""
    workdir = tmp_path / "work"
    host, old, cleared, supervisor = start_host(workdir, "off")
    try:
        assert cleared == "0"
        os.kill(supervisor, signal.SIGKILL)
        host.kill()
        host.communicate(timeout=HANG_BOUND)
        time.sleep(0.5)
        assert alive(old)  # the precondition: it survived its host
        box = PythonSandbox(workdir, config=SandboxConfig(limits=FAST_LIMITS, syscall_filter="off"))
        try:
            start_or_skip(box)
            assert not alive(old)
            assert box.worker_pid != old and box.run("6 * 7").value == "42"
        finally:
            box.close()
    finally:
        if alive(old):
            os.kill(old, signal.SIGKILL)


# -- class 8: protocol robustness --------------------------------------------------------------

@pytest.mark.parametrize("body", [
    b"[" * 100_000,
    b'{"op": "result", "id": "x", "output": "\\ud800", "output_bytes": 1, "value": null, '
    b'"error": null}',
    b'{"op": "result", "id": "x", "output": "", "output_bytes": NaN, "value": null, '
    b'"error": null}',
    b'{"op": "result", "id": "x", "output": 5, "output_bytes": 1, "value": null, "error": null}',
    b"\xff\xfe not utf-8",
], ids=["deep nesting", "lone surrogate", "NaN", "wrong type", "invalid utf-8"])
def test_malformed_frames_are_typed_errors_and_kill_the_worker(sandbox: PythonSandbox,
                                                                 body: bytes) -> None:
    sandbox.run("kept = 1")
    pid = sandbox.worker_pid
    code = WORKER_FRAMES + f"_send({body!r})\nimport time\ntime.sleep(30)"
    with pytest.raises(SandboxError) as info:
        sandbox.run(code)
    assert info.value.kind == "protocol" and info.value.state_lost
    assert pid is not None and wait_gone(pid)
    assert sandbox.run("1").restarted


def test_a_worker_lost_between_calls_is_reported(sandbox: PythonSandbox) -> None:
    """A worker killed from outside between two calls: the next result says state was lost."""
    sandbox.run("kept = 1")
    pid = sandbox.worker_pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    assert wait_gone(pid)
    result = sandbox.run("'kept' in globals()")
    assert result.restarted and result.value == "False"
    assert result.to_text().startswith("[note: this ran in a new Python session")
    assert sandbox.restarts == 1



# -- class 4: memory the address-space limit does not see --------------------------------------

def shmem_kib() -> int:
    """The machine's shared memory (memfd and tmpfs pages), from /proc/meminfo."""
    with open("/proc/meminfo") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Shmem:"))


def test_memfd_pages_cannot_bypass_the_memory_limit(tmp_path: Path) -> None:
    """memfd pages are not in the worker's address space, so RLIMIT_AS does not count them:
    16 memfds of 64 MiB each, kept in flight over a socket pair, would hold 1 GiB past the
    768 MiB limit. That must fail, and the machine's shared memory must not grow by it. The
    report names the accounting in force."""
    box = PythonSandbox(tmp_path / "w", config=fast_config(max_file_bytes=64 << 20))
    try:
        isolation = start_or_skip(box).isolation
        assert isolation is not None
        memory = isolation.features["memory"]
        if not memory[0]:
            pytest.skip(f"no memory accounting in force here: {memory[1]}")
        before = shmem_kib()
        text = box.run("""
import os, socket
keep = socket.socketpair()
try:
    for _ in range(16):
        fd = os.memfd_create("hoard")
        for _ in range(8):
            os.write(fd, b"x" * (8 << 20))
        socket.send_fds(keep[0], [b"m"], [fd])
        os.close(fd)
    print("HOARDED")
except OSError as exc:
    print("refused", type(exc).__name__)
""").to_text()
        grown = shmem_kib() - before
    finally:
        box.close()
    assert "HOARDED" not in text, text
    assert grown < 256 << 10, f"shared memory grew by {grown} KiB"
    assert memory[0] and ("memfd_create denied" in memory[1] or "cgroup" in memory[1])


def test_a_tmpfs_work_directory_is_reported_as_not_counted(tmp_path: Path) -> None:
    """Files in a work directory on tmpfs are memory that RLIMIT_AS does not see: without a
    memory cgroup the isolation report says so instead of claiming the limit holds."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or not os.access(shm, os.W_OK):
        pytest.skip("no writable /dev/shm")
    workdir = Path(tempfile.mkdtemp(dir=shm, prefix="gramagent-test-"))
    box = PythonSandbox(workdir / "work", config=fast_config())
    try:
        isolation = start_or_skip(box).isolation
        assert isolation is not None
        ok, detail = isolation.features["memory"]
        if "cgroup v2 memory.max" in detail:
            assert ok
        else:
            assert not ok and "on tmpfs: its files are not counted" in detail
    finally:
        box.close()
        shutil.rmtree(workdir, ignore_errors=True)
