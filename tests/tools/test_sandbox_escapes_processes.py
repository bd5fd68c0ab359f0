"""Attacks on everything outside the sandbox's own processes, with the host run as root and as
an ordinary user (issue 31, classes 1, 2, 3 and 8).

A host process (``sandbox_attacks.py``) holds listeners, a victim sandbox and an attacker
sandbox, and runs the attacker's cells: signals, pidfds, ``prlimit`` and I/O signal owners aimed
at the host and the victim; its command line, ``/proc/<host>/net``, the victim's process name;
its abstract socket, a TCP port, a unix datagram socket and a FIFO in the data directory; timers
and handlers left to run between calls; the host's pipes. Every outcome is checked from the
host side: the host's exit status and limits, the victim's state, what the listeners received,
the attacker's CPU time and state in ``/proc`` while no call runs.

The ordinary-user case runs the host under ``setpriv --reuid=65534``. It needs an interpreter
(and gramagent's dependencies) that user can run: ``GRAMAGENT_TEST_USER_PYTHON`` names one
(``.ci/run`` makes it), else this interpreter is tried, and the case is skipped, with the
reason, where the user cannot run it (e.g. an interpreter under a 0700 home directory).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
NOBODY = 65534
USER_PYTHON_ENV = "GRAMAGENT_TEST_USER_PYTHON"
BOUND = 120.0
"""Seconds after which the host counts as hung."""

_CHECK = "import sys, gramagent.tools.sandbox; print(sys.version)"


def _as_user(argv: list[str]) -> list[str]:
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *argv]


def _closed_folder(path: str) -> str | None:
    """The first folder above ``path`` that others may not enter, if any."""
    parts = Path(path).parents
    for folder in reversed(parts):
        if not os.stat(folder).st_mode & 0o001:
            return str(folder)
    return None


def user_python() -> str:
    """An interpreter the ordinary user can run with gramagent importable; skips if none."""
    if os.geteuid() != 0:
        pytest.skip("not root: the host-user case already runs as an ordinary user")
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed")
    python = os.environ.get(USER_PYTHON_ENV) or sys.executable
    expected = subprocess.run([python, "-c", _CHECK], capture_output=True, text=True,
                              timeout=BOUND)
    seen = subprocess.run(_as_user([python, "-c", _CHECK]), capture_output=True, text=True,
                          timeout=BOUND, cwd="/")
    if expected.returncode != 0 or seen.returncode != 0 or seen.stdout != expected.stdout:
        closed = _closed_folder(os.path.realpath(python))
        why = (f"{closed} is mode {os.stat(closed).st_mode & 0o777:04o}" if closed else
               (seen.stderr.strip().splitlines() or [f"it ran Python {seen.stdout.strip()}"])[-1])
        pytest.skip(f"uid {NOBODY} cannot run {python} with gramagent ({why}); set "
                    f"{USER_PYTHON_ENV} to an interpreter it can run (.ci/run makes one)")
    return python


def run_host(base: Path, as_user: bool) -> dict[str, Any]:
    """Run the attacked host; its RESULT, with ``exit`` its exit status."""
    secret = secrets.token_hex(8)
    python = user_python() if as_user else sys.executable
    argv = [python, str(HERE / "sandbox_attacks.py"), str(base), secret, f"--api-key={secret}"]
    if as_user:
        os.chown(base, NOBODY, NOBODY)
        argv = _as_user(argv)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAMAGENT_SANDBOX")}
    host = subprocess.run(argv, capture_output=True, text=True, timeout=BOUND, env=env, cwd="/")
    lines = [line for line in host.stdout.splitlines() if line.startswith("RESULT ")]
    assert host.returncode == 0 and lines, (host.returncode, host.stdout, host.stderr[-3000:])
    result: dict[str, Any] = json.loads(lines[-1][len("RESULT "):])
    if "unavailable" in result:
        if os.geteuid() != 0 or as_user:
            pytest.skip(f"no OS isolation for the sandbox here: {result['unavailable']}")
        raise AssertionError(result["unavailable"])
    result["secret"] = secret
    return result


@pytest.fixture(scope="module", params=["host-user", "ordinary-user"])
def attacked(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """The attacked host's results, as the test runner's user and as uid 65534 (in a fresh
    folder of the system's temporary directory, which that user can reach)."""
    pytest.importorskip("pyseccomp")
    base = Path(tempfile.mkdtemp(prefix=f"gramagent-{request.param}-"))
    try:
        os.chmod(base, 0o755)
        yield run_host(base, request.param == "ordinary-user")
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_the_report_names_every_boundary(attacked: dict[str, Any]) -> None:
    """The worker reports its own PID namespace, Landlock and the filter (this machine has
    all three, as root and as an ordinary user)."""
    report = attacked["isolation"]
    for line in ("processes: yes", "landlock: yes", "syscalls: yes", "network: yes",
                 "filesystem: yes"):
        assert line in report, report


# -- class 3: the host and other sessions' workers are out of reach ----------------------------

@pytest.mark.parametrize("attempt", [
    "kill(host, 0)", "kill(victim, SIGKILL)", "kill(0, SIGSTOP)", "pidfd_open(host)",
    "open(/proc/host)", "pidfd_send_signal", "F_SETOWN(host)", "F_SETOWN_EX(host)",
    "F_SETSIG(SIGKILL)", "ioctl(FIOSETOWN, host)", "prlimit(host)", "prlimit(victim)",
])
def test_no_process_outside_the_sandbox_can_be_signalled_or_limited(
        attacked: dict[str, Any], attempt: str) -> None:
    """Each way to signal, open or limit another process fails (EPERM from the filter, or
    ENOENT/ESRCH: the pid does not exist in the worker's PID namespace). The host lived to
    report (its exit status was 0), kept its limits, and the victim kept its state."""
    assert attacked["attacks"]["attempts"][attempt] in ("EPERM", "ESRCH", "ENOENT", "EACCES")
    assert attacked["nofile_kept"] and attacked["victim"] == "42"


def test_the_worker_sees_only_itself(attacked: dict[str, Any]) -> None:
    """Its /proc lists one process, itself (pid 1); its parent is outside (pid 0); it can
    still limit itself."""
    attacks = attacked["attacks"]
    assert attacks["pids"] == [1] and attacks["ppid"] == 0
    assert attacks["attempts"]["prlimit(self)"] == "ok"


# -- class 8: what other processes and the host's listeners would leak -------------------------

def test_no_other_command_line_or_listener_is_visible(attacked: dict[str, Any]) -> None:
    """The host's ``--api-key=...`` argument is in no command line the worker can read; its
    abstract socket and TCP port are in none of the worker's /proc/net tables; the host's
    /proc/<pid>/net and the victim's process name cannot be opened."""
    attacks = attacked["attacks"]
    assert attacks["secret_in_cmdline"] == []
    assert not attacks["abstract_listed"] and not attacks["port_listed"]
    assert attacks["attempts"]["open(/proc/host/net/unix)"] == "ENOENT"
    assert attacks["attempts"]["open(/proc/victim/comm)"] == "ENOENT"


@pytest.mark.parametrize("attempt", ["socketpair(AF_UNIX, SOCK_DGRAM)",
                                     "socket(AF_UNIX, SOCK_DGRAM)", "connect(abstract)",
                                     "write(host FIFO)"])
def test_host_sockets_and_fifos_are_out_of_reach(attacked: dict[str, Any], attempt: str) -> None:
    """A datagram socket (to ``sendto`` the host's socket file), the host's abstract socket
    and a FIFO the host reads in the data directory: refused, and no listener received
    anything."""
    assert attacked["attacks"]["attempts"][attempt] != "ok"
    assert attacked["received"] == {"abstract": False, "tcp": False, "dgram": False,
                                    "fifo": False}


# -- class 2: the host's pipes are not in the worker -------------------------------------------

def test_the_host_pipes_are_not_in_the_worker(attacked: dict[str, Any]) -> None:
    """No descriptor of the worker is one of the host's pipes (compared by inode): what a cell
    writes reaches the supervisor, never the host."""
    assert attacked["worker_fds"], "the cell listed no descriptors"
    assert not set(attacked["host_pipes"]) & set(attacked["worker_fds"])


# -- class 1: nothing runs between calls --------------------------------------------------------

def test_no_code_runs_between_calls(attacked: dict[str, Any]) -> None:
    """A cell installs SIGCONT and SIGALRM handlers, tries a POSIX timer delivering SIGCONT
    and F_SETSIG(SIGCONT), and arms an interval timer. Both ways to continue a stopped process
    are refused; for 1.5 s after the call the worker stays stopped (state T) and uses no CPU
    time, and no handler runs; the pending SIGALRM is handled in the next call."""
    assert attacked["between"] == {"timer_create(SIGCONT)": "EPERM",
                                   "F_SETSIG(SIGCONT)": "EPERM"}
    assert attacked["idle"] == {"cpu_ticks": 0, "state": "T", "marker": False}
    assert attacked["marker_in_next_call"]
