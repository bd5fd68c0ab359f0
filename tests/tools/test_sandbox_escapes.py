"""Escape attempts against the python_repl sandbox: each one is blocked or contained.

Every test runs hostile code in a real worker and asserts what happened on the host side (the
secret never shows up, the file was not written or deleted, the listener saw no connection,
the worker was replaced) rather than trusting the worker's own words.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_probes import ALLOWED_BY_FILTER, DENIED_BY_FILTER, parse_probe, probe_code
from tools_support import FAST_LIMITS, fast_config, invoke_tool, start_or_skip, workspace_of

from gramagent.tools import builtin_library
from gramagent.tools.sandbox import PythonSandbox, SandboxConfig, SandboxError

pytestmark = pytest.mark.slow

SECRET = "sk-test-Zq8vJ3kL0pW7"


def run_text(sandbox: PythonSandbox, code: str) -> str:
    return sandbox.run(code).to_text()


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch) -> str:
    """A secret in the parent's environment, set before the worker starts."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("GRAMAGENT_TEST_SECRET_TOKEN", SECRET)
    return SECRET


@pytest.fixture
def fresh(tmp_path: Path, data_dir: Path, secret_env: str) -> Iterator[PythonSandbox]:
    """A sandbox started after the secret was put in the environment."""
    box = PythonSandbox(tmp_path / "work-secret", data_dir=data_dir, config=fast_config())
    try:
        yield start_or_skip(box)
    finally:
        box.close()


def test_parent_environment_is_not_inherited(fresh: PythonSandbox, secret_env: str) -> None:
    """The worker's environment is built from scratch: no key of the parent's is in it."""
    text = run_text(fresh, "import os\nprint(sorted(os.environ))\nprint(dict(os.environ))")
    assert secret_env not in text
    assert "OPENAI_API_KEY" not in text
    assert "PATH" in text  # the minimal environment is there


def test_parent_proc_files_are_unreadable(fresh: PythonSandbox, secret_env: str) -> None:
    """/proc/<parent>/environ, mem, cwd and root are refused; no process leaks the secret."""
    code = f"""
import os, glob
parent = {os.getpid()}
for part in ("environ", "mem", "cwd", "root", "fd"):
    try:
        path = f"/proc/{{parent}}/{{part}}"
        data = os.listdir(path) if part in ("cwd", "root", "fd") else open(path, "rb").read(4096)
        print("READ", part, data)
    except OSError as exc:
        print("refused", part, type(exc).__name__)
leaks = []
for path in glob.glob("/proc/[0-9]*/environ"):
    try:
        leaks.append(open(path, "rb").read())
    except OSError:
        pass
print("readable environs:", len(leaks))
print(b"".join(leaks))
"""
    text = run_text(fresh, code)
    assert secret_env not in text
    for part in ("environ", "mem", "cwd", "root", "fd"):
        assert f"refused {part}" in text, text
    assert "READ" not in text


def test_no_network_even_to_loopback(sandbox: PythonSandbox) -> None:
    """A listener of the host on 127.0.0.1 is unreachable; names do not resolve."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.settimeout(0.5)
        port = listener.getsockname()[1]
        text = run_text(sandbox, f"""
import socket
for target in [("127.0.0.1", {port}), ("1.1.1.1", 80)]:
    try:
        socket.create_connection(target, timeout=1)
        print("CONNECTED", target)
    except OSError as exc:
        print("refused", target, exc)
try:
    socket.getaddrinfo("example.com", 443)
    print("RESOLVED")
except OSError as exc:
    print("no dns", exc)
""")
        with pytest.raises(TimeoutError):
            listener.accept()
    assert "CONNECTED" not in text and "RESOLVED" not in text
    assert text.count("refused") == 2


def test_no_new_processes_or_threads(sandbox: PythonSandbox, tmp_path: Path) -> None:
    """fork, subprocess, os.system and threads all fail; the marker file is never made."""
    marker = sandbox.workdir / "spawned"
    text = run_text(sandbox, f"""
import os, subprocess, threading
results = []
try:
    pid = os.fork()
    if pid == 0:
        open({str(marker)!r}, "w").close()
        os._exit(0)
    results.append("FORKED")
except OSError as exc:
    results.append(f"fork: {{type(exc).__name__}}")
try:
    subprocess.run(["touch", {str(marker)!r}], check=True)
    results.append("SUBPROCESS")
except (OSError, subprocess.SubprocessError) as exc:
    results.append(f"subprocess: {{type(exc).__name__}}")
results.append(f"system: {{os.system('touch {marker}')}}")
try:
    threading.Thread(target=lambda: None).start()
    results.append("THREAD")
except RuntimeError as exc:
    results.append(f"thread: {{exc}}")
results
""")
    assert "FORKED" not in text and "SUBPROCESS" not in text and "THREAD" not in text
    assert "fork: BlockingIOError" in text
    assert "can't start new thread" in text
    assert not marker.exists()


def test_writes_outside_the_work_dir_fail(sandbox: PythonSandbox, tmp_path: Path,
                                          data_dir: Path) -> None:
    """The host's /tmp, /etc, the data directory and the test's own folder stay untouched."""
    targets = [tmp_path / "outside.txt", Path("/etc/gramagent-escape"),
               Path("/tmp/gramagent-escape"), data_dir / "planted.txt",
               Path(sys.prefix) / "gramagent-escape"]
    text = run_text(sandbox, f"""
for path in {[str(t) for t in targets]!r}:
    try:
        with open(path, "w") as f:
            f.write("escaped")
        print("WROTE", path)
    except OSError as exc:
        print("refused", path, type(exc).__name__)
open("inside.txt", "w").write("fine")
""")
    assert "WROTE" not in text
    for target in targets:
        assert not target.exists(), target
    assert (sandbox.workdir / "inside.txt").read_text() == "fine"


def test_deleting_files_outside_fails(sandbox: PythonSandbox, data_dir: Path) -> None:
    """Files the worker can see (data, interpreter) cannot be deleted or renamed."""
    victim = data_dir / "sales.csv"
    library_file = Path(os.__file__)
    text = run_text(sandbox, f"""
import os, shutil
for action, path in [("remove", {str(victim)!r}), ("remove", {str(library_file)!r}),
                     ("rename", {str(victim)!r}), ("rmtree", {str(data_dir)!r})]:
    try:
        if action == "remove":
            os.remove(path)
        elif action == "rename":
            os.rename(path, path + ".moved")
        else:
            shutil.rmtree(path)
        print("DONE", action, path)
    except OSError as exc:
        print("refused", action, type(exc).__name__)
""")
    assert "DONE" not in text
    assert victim.is_file() and library_file.is_file()
    assert text.count("refused") == 4


def test_hidden_host_files_are_invisible(sandbox: PythonSandbox, tmp_path: Path) -> None:
    """The worker's root is an allow-list: the test's own folder, the parent's working
    directory, /root, /home, /var, /opt and every other unlisted place are not there."""
    (tmp_path / "host-only.txt").write_text("private")
    cwd = Path.cwd()
    hidden = [tmp_path / "host-only.txt", Path("/root/.bash_history"),
              cwd / "pyproject.toml", cwd / "tests", Path("/var/log"), Path("/opt"),
              Path("/home"), Path("/boot"), Path("/sys"), Path("/run"),
              sandbox.workdir.parent / "elsewhere"]
    # The working directory itself is there only as the way to what the worker must read
    # when that lies inside it (a virtual environment made in the checkout, an editable
    # install's src/): then it shows nothing else.
    needed = [Path(p).resolve() for p in (sys.prefix, *sys.path) if p]
    inside = {p.relative_to(cwd).parts[0] for p in needed if p.is_relative_to(cwd) and p != cwd}
    if not inside:
        hidden.append(cwd)
    (sandbox.workdir.parent / "elsewhere").mkdir(exist_ok=True)
    text = run_text(sandbox, f"""
import os
for path in {[str(p) for p in hidden]!r}:
    print(path, os.path.exists(path))
print("CWD", sorted(os.listdir({str(cwd)!r})) if os.path.isdir({str(cwd)!r}) else [])
print("ROOT", sorted(os.listdir("/")))
""")
    assert "private" not in text
    assert " True" not in text and text.count(" False") == len(hidden)
    shown = eval(text.split("CWD ", 1)[1].split("\n", 1)[0])  # noqa: S307 - a printed list
    assert set(shown) <= inside
    top = eval(text.split("ROOT ", 1)[1])  # noqa: S307 - a list literal printed by the cell
    allowed = {"bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "nix", "proc", "sbin",
               "usr",
               # the interpreter (a venv's base interpreter may live elsewhere, e.g. /root)
               *(Path(p).parts[1] for p in [sandbox.workdir, sys.prefix, sys.base_prefix])}
    assert set(top) <= allowed, set(top) - allowed


def test_unix_sockets_of_the_host_are_out_of_reach(sandbox: PythonSandbox,
                                                   data_dir: Path) -> None:
    """A host listener on a unix socket in a directory the worker can see (the data
    directory): the cell cannot connect, and the listener records no connection. (The
    syscall filter denies socket(); without it such a socket is reachable: docs/sandbox.md.)"""
    assert sandbox.isolation is not None
    if not sandbox.isolation.holds("syscalls"):
        pytest.skip("without the syscall filter, sockets in visible directories are reachable")
    path = data_dir / "host.sock"
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(path))
        os.chmod(path, 0o777)
        listener.listen(1)
        listener.settimeout(0.5)
        text = run_text(sandbox, f"""
import socket
try:
    s = socket.socket(socket.AF_UNIX)
    s.connect({str(path)!r})
    print("CONNECTED")
except OSError as exc:
    print("refused", type(exc).__name__)
""")
        with pytest.raises(TimeoutError):
            listener.accept()
    assert "CONNECTED" not in text and "refused" in text


def test_memory_exhaustion_is_contained(sandbox: PythonSandbox) -> None:
    """Allocating past the address-space limit raises MemoryError; the session survives."""
    result = sandbox.run("keep = 7\nhog = bytearray(4 << 30)")
    assert result.error is not None and "MemoryError" in result.error
    again = sandbox.run("keep")
    assert again.value == "7" and not again.restarted


def test_busy_loop_is_stopped(sandbox: PythonSandbox) -> None:
    """A CPU-bound infinite loop is interrupted (CPU limit) or killed (wall clock)."""
    sandbox.run("kept = 1")
    try:
        result = sandbox.run("while True:\n    pass")
    except SandboxError as exc:  # the wall clock came first (busy machine)
        assert exc.kind == "timeout" and exc.state_lost
        assert sandbox.run("1 + 1").restarted
    else:
        assert result.error is not None and "CPUTimeExceeded" in result.error
        assert sandbox.run("kept").value == "1"


def test_ctypes_cannot_regain_privileges(sandbox: PythonSandbox) -> None:
    """Raw syscalls through ctypes: setuid(0) fails, nested namespaces unlock nothing."""
    text = run_text(sandbox, r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_void_p]
print("setuid", libc.setuid(0), os.getuid() != 0)
print("userns", libc.unshare(0x10000000 | 0x00020000))
print("remount", libc.mount(None, b"/", None, 0x20 | 0x1000, None))
print("umount", libc.umount2(b"/root", 2))
try:
    open("/etc/gramagent-ctypes", "w")
    print("WROTE")
except OSError as exc:
    print("refused", exc.errno)
print("root hidden", os.listdir("/root"))
""")
    assert "setuid -1 True" in text
    assert "remount -1" in text and "umount -1" in text
    assert "WROTE" not in text
    assert not Path("/etc/gramagent-ctypes").exists()


def test_ctypes_crash_restarts_the_worker(sandbox: PythonSandbox) -> None:
    """A segfault kills only the worker; the next call runs in a fresh session."""
    sandbox.run("value = 42")
    with pytest.raises(SandboxError) as info:
        sandbox.run("import ctypes\nctypes.string_at(0)")
    assert info.value.kind == "crashed" and info.value.state_lost
    assert "SIGSEGV" in str(info.value) and "lost" in str(info.value)
    after = sandbox.run("value")
    assert after.restarted and after.error is not None and "NameError" in after.error


def test_signalling_the_parent_fails(sandbox: PythonSandbox) -> None:
    """The worker cannot signal the process that started it."""
    text = run_text(sandbox, f"""
import os, signal
try:
    os.kill({os.getpid()}, signal.SIGTERM)
    print("SIGNALLED")
except OSError as exc:
    print("refused", type(exc).__name__)
""")
    assert "SIGNALLED" not in text and "refused" in text


def test_forged_protocol_frames_kill_the_worker(sandbox: PythonSandbox) -> None:
    """Garbage written to the private protocol pipe is a protocol error, not a result."""
    sandbox.run("state = 1")
    with pytest.raises(SandboxError) as info:
        sandbox.run("import os\nfor fd in range(3, 12):\n    try:\n"
                    "        os.write(fd, b'\\xff' * 16)\n    except OSError:\n        pass\n"
                    "import time\ntime.sleep(30)")
    assert info.value.kind in ("protocol", "timeout")
    assert sandbox.run("1").restarted


def test_sessions_cannot_see_each_other(tmp_path: Path, data_dir: Path) -> None:
    """Two sessions: distinct users, and one cannot read the other's work directory."""
    first = PythonSandbox(tmp_path / "a", data_dir=data_dir, config=fast_config())
    second = PythonSandbox(tmp_path / "b", data_dir=data_dir, config=fast_config())
    try:
        start_or_skip(first)
        start_or_skip(second)
        first.run("open('note.txt', 'w').write('for a only')\nsecret_a = 'alpha'")
        text = run_text(second, f"""
import os
try:
    print(open({str(first.workdir / 'note.txt')!r}).read())
except OSError as exc:
    print("refused", type(exc).__name__)
print("secret_a" in globals())
""")
        assert "for a only" not in text and "refused" in text and "False" in text
        if os.geteuid() == 0:
            uids = {box.run("import os\nos.getuid()").value for box in (first, second)}
            assert len(uids) == 2 and "0" not in uids
    finally:
        first.close()
        second.close()


def test_conversations_sharing_a_session_dir_are_apart(tmp_path: Path, data_dir: Path) -> None:
    """With session_dir (one directory for every conversation), two conversations get their
    own work directories and (as root) their own uids: one cannot read the other's files or
    signal its worker, which keeps running with its state (checked in /proc)."""
    library = builtin_library(session_dir=tmp_path / "shared", data_dir=data_dir,
                              sandbox=fast_config())

    def repl(conversation: str, code: str) -> str:
        return str(invoke_tool(library, "python_repl", conversation, code=code))

    try:
        try:
            repl("alice", "secret = 'alice only'\nopen('note.txt', 'w').write('alice')")
        except SandboxError as exc:
            if exc.kind == "unavailable" and os.geteuid() != 0:
                pytest.skip(f"no sandbox here: {exc}")
            raise
        alice = repl("alice", "import os\n(os.getuid(), os.getcwd())")
        uid, cwd = eval(alice.splitlines()[-1])  # noqa: S307 - a tuple literal
        pid = workspace_of(library, "alice").sandbox().worker_pid  # as the host sees it
        assert pid is not None
        text = repl("bob", f"""
import os, signal
print("uid", os.getuid(), "cwd", os.getcwd())
for action in ("read", "kill"):
    try:
        if action == "read":
            print(open({cwd!r} + "/note.txt").read())
        else:
            os.kill({pid}, signal.SIGKILL)
        print("DONE", action)
    except OSError as exc:
        print("refused", action, type(exc).__name__)
""")
        assert "DONE" not in text and "alice" not in text.replace(cwd, "")
        assert Path(f"/proc/{pid}").exists()
        assert repl("alice", "secret").endswith("'alice only'")
        bob_uid = int(text.split("uid ", 1)[1].split()[0])
        bob_cwd = text.split("cwd ", 1)[1].split()[0]
        assert bob_cwd != cwd
        if os.geteuid() == 0:
            assert bob_uid != uid and 0 not in (uid, bob_uid)
    finally:
        library.forget()


def test_seccomp_denies_dangerous_syscalls(sandbox: PythonSandbox) -> None:
    """ptrace, mount, unshare, bpf, perf_event_open, keyctl, io_uring, network sockets and
    more, called from the cell through ctypes or the socket module, fail with EPERM."""
    code = probe_code()  # skips when pyseccomp (which resolves the numbers) is not installed
    assert sandbox.isolation is not None and sandbox.isolation.holds("syscalls"), \
        sandbox.isolation.describe() if sandbox.isolation else None
    found = parse_probe(run_text(sandbox, code))
    assert {name: found[name] for name in DENIED_BY_FILTER} == dict.fromkeys(DENIED_BY_FILTER,
                                                                              "EPERM")
    assert {name: found[name] for name in ALLOWED_BY_FILTER} == dict.fromkeys(ALLOWED_BY_FILTER,
                                                                              "ok")


def test_without_seccomp_the_same_calls_get_further(tmp_path: Path, data_dir: Path) -> None:
    """The control for the test above: with syscall_filter="off" the very same attempts reach
    the kernel (succeed, or fail for another reason than EPERM), so the EPERMs come from the
    filter and not from the namespaces or the dropped privileges."""
    code = probe_code()
    box = PythonSandbox(tmp_path / "unfiltered", data_dir=data_dir,
                        config=SandboxConfig(limits=FAST_LIMITS, syscall_filter="off"))
    try:
        start_or_skip(box)
        assert box.isolation is not None and not box.isolation.holds("syscalls")
        found = parse_probe(run_text(box, code))
    finally:
        box.close()
    # AF_PACKET needs CAP_NET_RAW, which the worker never has
    reached = [name for name in DENIED_BY_FILTER if name != "socket(AF_PACKET)"]
    assert [name for name in reached if found[name] == "EPERM"] == []
    assert found["socket(AF_INET)"] == "ok" and found["unshare(CLONE_NEWUSER)"] == "ok"


def test_seccomp_error_is_a_readable_python_error(sandbox: PythonSandbox) -> None:
    """A denied call is an exception in the cell, not a dead worker; the session survives."""
    pytest.importorskip("pyseccomp")
    sandbox.run("kept = 5")
    result = sandbox.run("import socket\nsocket.create_connection(('127.0.0.1', 9), timeout=1)")
    assert result.error is not None
    assert result.error.splitlines()[-1] == "PermissionError: [Errno 1] Operation not permitted"
    assert sandbox.run("kept").value == "5" and sandbox.restarts == 0
