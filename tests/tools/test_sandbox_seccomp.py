"""The seccomp filter module on its own: installed in a plain child process (no namespaces, no
process limit), so ordinary work the sandbox's other limits forbid (threads, subprocesses) can
be shown to survive the filter, and the filter to be inherited by children.

Each test compares with the same code run without the filter where the outcome differs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import gramagent.tools.sandbox as sandbox_package
from gramagent.tools.sandbox._seccomp import DENIED, Prepared, binding_path, install, prepare

pytestmark = [pytest.mark.skipif(not sys.platform.startswith("linux"), reason="seccomp is Linux"),
              pytest.mark.slow]

SANDBOX_DIR = Path(sandbox_package.__file__).parent


def run_child(code: str, cwd: Path, *, filtered: bool) -> dict[str, Any]:
    """Run ``code`` in a fresh interpreter, with the worker's filter installed first if
    ``filtered``; returns the JSON object the code prints on its last line."""
    prelude = f"import sys\nsys.path.insert(0, {str(SANDBOX_DIR)!r})\nimport _seccomp\n"
    if filtered:
        binding = binding_path()
        if binding is None:
            pytest.skip("pyseccomp is not installed")
        prelude += (f"_report = _seccomp.install(_seccomp.prepare({{'mode': 'on', "
                    f"'binding': {binding!r}}}))\nassert _report['ok'], _report\n")
    done = subprocess.run([sys.executable, "-I", "-c", prelude + code], cwd=cwd,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


ORDINARY_WORK = r'''
import asyncio, json, mmap, os, subprocess, sys, tempfile, threading
from concurrent.futures import ThreadPoolExecutor
out = {}
with ThreadPoolExecutor(4) as pool:
    out["threads"] = sum(pool.map(lambda n: sum(range(n)), [10, 100, 1000, 10000]))
idents = set()
workers = [threading.Thread(target=lambda: idents.add(threading.get_ident())) for _ in range(3)]
for t in workers:
    t.start()
for t in workers:
    t.join()
out["distinct_threads"] = len(idents)
out["subprocess"] = subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True,
                                   text=True, check=True).stdout.strip()
pid = os.fork()
if pid == 0:
    os._exit(3)
out["fork"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
with open("data.bin", "wb") as f:
    f.write(b"x" * 8192)
with open("data.bin", "r+b") as f, mmap.mmap(f.fileno(), 0) as m:
    m[0:5] = b"hello"
with open("data.bin", "rb") as f:
    out["file_mmap"] = f.read(5).decode()
anon = mmap.mmap(-1, 1 << 20)
anon[-1:] = b"z"
out["anon_mmap"] = anon[-1:].decode()
with tempfile.TemporaryDirectory(dir=".") as d:
    open(os.path.join(d, "t"), "w").write("tmp")
    out["tempfile"] = open(os.path.join(d, "t")).read()
async def main():
    await asyncio.sleep(0)
    return "async"
out["asyncio"] = asyncio.run(main())
try:
    import numpy as np
    a = np.arange(16, dtype=float).reshape(4, 4) + np.eye(4) * 10
    out["numpy"] = round(float(np.linalg.det(a)), 3) == round(float(np.linalg.det(a.T)), 3)
except ImportError:
    out["numpy"] = None
print(json.dumps(out))
'''


@pytest.mark.parametrize("filtered", [True, False], ids=["filtered", "unfiltered"])
def test_ordinary_work_runs_under_the_filter(tmp_path: Path, filtered: bool) -> None:
    """Threads, a Python subprocess, fork, file I/O, mmap, tempfiles, asyncio (an AF_UNIX
    socketpair) and numpy give the same results with and without the filter."""
    out = run_child(ORDINARY_WORK, tmp_path, filtered=filtered)
    assert out["threads"] == sum(sum(range(n)) for n in (10, 100, 1000, 10000))
    assert out["distinct_threads"] >= 1
    assert (out["subprocess"], out["fork"]) == ("42", 3)
    assert (out["file_mmap"], out["anon_mmap"], out["tempfile"]) == ("hello", "z", "tmp")
    assert out["asyncio"] == "async"
    assert out["numpy"] in (True, None)


INHERITANCE = r'''
import ctypes, json, os, subprocess, sys
child = "import socket\ntry:\n    socket.socket(socket.AF_INET).close(); print('ok')\n" \
        "except OSError as e:\n    print(e.errno)"
out = {"child_socket": subprocess.run([sys.executable, "-c", child], capture_output=True,
                                      text=True).stdout.strip()}
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
# raw clone(CLONE_NEWUSER | SIGCHLD): a new process in a new user namespace
pid = libc.syscall(ctypes.c_long(NR_CLONE), ctypes.c_ulong(0x10000000 | 17), ctypes.c_ulong(0),
                   ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))
if pid == 0:
    os._exit(0)
out["clone_newuser"] = ctypes.get_errno() if pid < 0 else "ok"
if pid > 0:
    os.waitpid(pid, 0)
status = dict(l.split(":\t", 1) for l in open("/proc/self/status") if ":\t" in l)
out["seccomp"] = status["Seccomp"].strip()
out["no_new_privs"] = status["NoNewPrivs"].strip()
print(json.dumps(out))
'''


def test_children_inherit_the_filter(tmp_path: Path) -> None:
    """A subprocess of filtered code cannot open an AF_INET socket; clone cannot create a
    user namespace; the kernel reports filter mode and no-new-privileges (set by libseccomp:
    this test process does not set it). Without the filter all of it goes through."""
    seccomp: Any = pytest.importorskip("pyseccomp")
    code = f"NR_CLONE = {seccomp.resolve_syscall(seccomp.Arch.NATIVE, 'clone')}\n{INHERITANCE}"
    filtered = run_child(code, tmp_path, filtered=True)
    assert filtered == {"child_socket": "1", "clone_newuser": 1, "seccomp": "2",
                        "no_new_privs": "1"}
    plain = run_child(code, tmp_path, filtered=False)
    assert plain["child_socket"] == "ok" and plain["seccomp"] == "0"
    assert plain["no_new_privs"] == "0"
    assert plain["clone_newuser"] == "ok"


def test_filter_rules_cover_the_deny_list(tmp_path: Path) -> None:
    """Every denied syscall this architecture has is in the compiled filter as ERRNO(EPERM),
    and the argument rules (socket, clone, clone3, personality) are there."""
    seccomp: Any = pytest.importorskip("pyseccomp")
    binding = binding_path()
    assert binding is not None
    prepared = prepare({"mode": "on", "binding": binding})  # built, not loaded, in this process
    assert prepared.filter is not None, prepared.detail
    pfc = tmp_path / "filter.pfc"
    with open(pfc, "w") as f:
        prepared.filter.export_pfc(f)
    text = pfc.read_text()
    names = [n for _, group in DENIED for n in group
             if seccomp.resolve_syscall(seccomp.Arch.NATIVE, n) >= 0]
    for name in [*names, "socket", "socketpair", "clone", "personality"]:
        assert f'filter for syscall "{name}"' in text, name
    assert 'syscall "clone3"' in text and "action ERRNO(38);" in text  # ENOSYS
    assert f"{len(names)} syscalls" in prepared.detail
    assert "# invalid architecture action\naction ERRNO(1);" in text  # i386, x32 ABIs


def test_filter_off_or_unavailable_is_reported(tmp_path: Path) -> None:
    """Turned off, not installed, or a binding that cannot find libseccomp: no filter, and
    the report says why (nothing is loaded, so this runs in the test process)."""
    off = prepare({"mode": "off", "binding": binding_path()})
    assert off == Prepared(None, "turned off by configuration (syscall_filter='off')")
    assert install(off) == {"ok": False, "detail": off.detail}
    missing = install(prepare({"mode": "on", "binding": None}))
    assert missing == {"ok": False, "detail": "pyseccomp is not installed (pip install pyseccomp)"}
    broken = tmp_path / "pyseccomp.py"
    broken.write_text('raise RuntimeError("Unable to find libseccomp")\n')
    no_library = install(prepare({"mode": "on", "binding": str(broken)}))
    assert no_library["ok"] is False
    assert no_library["detail"] == ("pyseccomp could not be loaded: RuntimeError: Unable to "
                                    "find libseccomp")
