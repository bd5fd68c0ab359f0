"""PythonSandbox: isolation report, REPL semantics, persistence, limits, restarts."""

from __future__ import annotations

from extras import require

require("tools")

import logging
import math
import os
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tools_support import FAST_LIMITS, fast_config, start_or_skip

import gramagent.tools.sandbox._session as session_module
from gramagent.errors import ConfigurationError
from gramagent.tools.sandbox import (
    SYSCALL_FILTER_ENV,
    WEAK_ISOLATION_ENV,
    Isolation,
    PythonSandbox,
    ReplResult,
    SandboxConfig,
    SandboxError,
    SandboxLimits,
)

pytestmark = pytest.mark.slow


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.geteuid() != 0,
                    reason="the full isolation is checked where it must work: root on Linux")
def test_isolation_is_complete_as_root(sandbox: PythonSandbox) -> None:
    """Network, filesystem, limits and privileges all took effect; uid is unprivileged; the
    seccomp filter is on when pyseccomp is installed."""
    isolation = sandbox.isolation
    assert isolation is not None and isolation.complete, isolation.describe()
    assert set(isolation.features) == {"network", "filesystem", "limits", "privileges",
                                       "processes", "syscalls", "lifetime", "landlock",
                                       "memory"}
    assert isolation.holds("lifetime"), isolation.describe()
    if session_module.binding_path() is not None:
        assert isolation.holds("syscalls"), isolation.describe()
        assert "syscalls: yes (seccomp filter: " in isolation.describe()
    ids = "import os\n0 not in (os.getuid(), os.geteuid(), os.getgid()) and not os.getgroups()"
    assert sandbox.run(ids).value == "True"
    assert "writable: the work directory only" in isolation.features["filesystem"][1]


def test_repl_semantics(sandbox: PythonSandbox) -> None:
    """Output, the last expression's value (not None), and tracebacks of the cell only."""
    result = sandbox.run("print('hello')\n6 * 7")
    assert (result.output, result.value, result.error) == ("hello\n", "42", None)
    assert sandbox.run("x = 1").to_text() == "(no output)"
    assert sandbox.run("None").value is None
    assert sandbox.run("_").value == "42"
    failure = sandbox.run("def f():\n    return 1 / 0\nf()")
    assert failure.error is not None
    assert failure.error.splitlines()[-1] == "ZeroDivisionError: division by zero"
    assert '<cell 5>", line 3' in failure.error and "_worker.py" not in failure.error
    syntax = sandbox.run("def broken(:\n    pass")
    assert syntax.error is not None and "SyntaxError" in syntax.error
    stderr = sandbox.run("import sys, os\nsys.stderr.write('warn\\n')\nos.write(1, b'raw\\n')")
    assert stderr.output == "warn\nraw\n"
    exiting = sandbox.run("raise SystemExit(3)").error
    assert exiting is not None and exiting.splitlines()[-1] == "SystemExit: 3"
    assert sandbox.run("x").value == "1"  # SystemExit did not end the session


def test_state_persists_within_a_session(sandbox: PythonSandbox) -> None:
    sandbox.run("import math\ndef area(r):\n    return math.pi * r * r\ncache = {}")
    sandbox.run("cache['a'] = round(area(2), 3)")
    assert sandbox.run("cache").value == "{'a': 12.566}"


def test_sessions_are_isolated_from_each_other(tmp_path: Path) -> None:
    one = start_or_skip(PythonSandbox(tmp_path / "one", config=fast_config()))
    two = start_or_skip(PythonSandbox(tmp_path / "two", config=fast_config()))
    try:
        one.run("shared = 'one'")
        error = two.run("shared").error
        assert error is not None and "NameError" in error
        assert one.run("shared").value == "'one'"
    finally:
        one.close()
        two.close()


def test_environment_and_working_directory(sandbox: PythonSandbox) -> None:
    """The worker works in its private directory with a minimal environment."""
    value = sandbox.run("import os\n(os.getcwd(), os.environ['HOME'], os.environ['TMPDIR'])").value
    workdir = str(sandbox.workdir)
    assert value == repr((workdir, workdir, workdir))
    sandbox.run("import tempfile\nwith tempfile.NamedTemporaryFile() as f:\n    f.write(b'ok')")
    assert oct(os.stat(sandbox.workdir).st_mode & 0o777) == "0o700"


def test_read_table_helper(sandbox: PythonSandbox, data_dir: Path) -> None:
    """read_table() reads parquet from DATA_DIR single-threaded; list_tables() lists them."""
    pq.write_table(pa.table({"k": ["a", "b"], "v": [1, 2]}), data_dir / "tiny.parquet")
    result = sandbox.run("t = read_table('tiny')\nprint(list_tables())\nt.to_pydict()")
    assert result.error is None, result.error
    assert result.output == "['tiny']\n"
    assert result.value == "{'k': ['a', 'b'], 'v': [1, 2]}"
    error = sandbox.run("read_table('../x')").error
    assert error is not None and "invalid table name" in error


def test_output_is_capped(tmp_path: Path) -> None:
    box = start_or_skip(PythonSandbox(tmp_path / "w", config=fast_config(max_output_chars=100)))
    try:
        result = box.run("print('y' * 5000)")
        assert result.truncated
        assert result.output.startswith("y" * 100)
        assert "[... output truncated: 5001 bytes printed, limit 100 characters]" in result.output
        assert len(box.run("'z' * 10_000").value or "") == 100
    finally:
        box.close()


def test_wall_clock_timeout_restarts_with_lost_state(sandbox: PythonSandbox) -> None:
    """A call past the timeout kills the worker; the next call says the state was lost."""
    sandbox.run("kept = 'before'")
    first_pid = sandbox.worker_pid
    with pytest.raises(SandboxError) as info:
        sandbox.run("import time\ntime.sleep(60)")
    assert info.value.kind == "timeout" and info.value.state_lost
    assert "did not finish within 4 s" in str(info.value)
    assert not sandbox.running and sandbox.restarts == 1
    after = sandbox.run("kept")
    assert after.restarted and after.error is not None and "NameError" in after.error
    assert after.to_text().startswith("[note: this ran in a new Python session")
    sandbox.run("1")
    assert sandbox.worker_pid != first_pid
    assert not sandbox.run("1").restarted  # only the first call after the loss says so


def test_worker_exit_is_reported_and_replaced(sandbox: PythonSandbox) -> None:
    with pytest.raises(SandboxError) as info:
        sandbox.run("import os\nos._exit(7)")
    assert info.value.kind == "crashed"
    assert "exited with status 7" in str(info.value)
    assert sandbox.run("2 + 2").value == "4"


def test_closed_sandbox_refuses_calls(sandbox: PythonSandbox) -> None:
    sandbox.close()
    assert not sandbox.running
    with pytest.raises(SandboxError) as info:
        sandbox.run("1")
    assert info.value.kind == "closed"


def test_result_text() -> None:
    """to_text puts the restart notice, output, value and error in that order."""
    text = ReplResult(output="out\n", value="1", error="Boom\n", restarted=True).to_text()
    assert text.splitlines() == [
        "[note: this ran in a new Python session; variables and imports from earlier calls "
        "were lost]", "out", "1", "Boom"]
    assert ReplResult(output="", value=None, error=None).to_text() == "(no output)"


def test_isolation_report_helpers() -> None:
    weak = Isolation({"network": (False, "unshare failed: EPERM"), "limits": (True, "ok")})
    assert not weak.complete
    assert weak.missing() == ["network: unshare failed: EPERM", "filesystem: not reported",
                              "privileges: not reported", "processes: not reported"]
    full = Isolation({f: (True, "") for f in ("network", "filesystem", "limits", "privileges",
                                             "processes")})
    assert full.complete and full.missing() == []


def test_weak_isolation_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail closed by default; GRAMAGENT_SANDBOX_ALLOW_WEAK=1 relaxes it."""
    monkeypatch.delenv(WEAK_ISOLATION_ENV, raising=False)
    assert SandboxConfig.from_env().require_isolation
    monkeypatch.setenv(WEAK_ISOLATION_ENV, "1")
    assert not SandboxConfig.from_env().require_isolation
    assert SandboxConfig.from_env(require_isolation=True).require_isolation


def test_sandbox_errors_pickle() -> None:
    import pickle

    error = pickle.loads(pickle.dumps(SandboxError("gone", kind="timeout", state_lost=True)))
    assert (str(error), error.kind, error.state_lost) == ("gone", "timeout", True)


@pytest.fixture
def no_pyseccomp(monkeypatch: pytest.MonkeyPatch) -> None:
    """pyseccomp is not importable (as if not installed); the once-only warning is re-armed."""
    monkeypatch.setitem(sys.modules, "pyseccomp", None)
    monkeypatch.setattr(session_module, "_warned_no_filter", False)


def test_missing_filter_is_reported_and_logged_once(
        tmp_path: Path, no_pyseccomp: None, caplog: pytest.LogCaptureFixture) -> None:
    """Without pyseccomp the default ("on") still runs code; the isolation report says the
    filter is off and one warning is logged for all sandboxes of the process."""
    caplog.set_level(logging.WARNING, logger="gramagent.tools.sandbox")
    boxes = [PythonSandbox(tmp_path / name, config=fast_config()) for name in ("a", "b")]
    try:
        for box in boxes:
            isolation = start_or_skip(box).isolation
            assert isolation is not None and not isolation.holds("syscalls")
            assert "syscalls: NO (pyseccomp is not installed" in isolation.describe()
            assert box.run("import socket\nsocket.socket(socket.AF_INET).close()\n1").value \
                == "1"  # no filter: only the empty network namespace stands in the way
    finally:
        for box in boxes:
            box.close()
    warnings = [r.getMessage() for r in caplog.records if "seccomp" in r.getMessage()]
    assert warnings == ["python sandbox: running without the seccomp syscall filter (pyseccomp "
                        "is not installed (pip install pyseccomp)); see docs/sandbox.md"]


def test_required_filter_fails_closed(tmp_path: Path, no_pyseccomp: None) -> None:
    """syscall_filter="required" refuses to run code when the filter cannot be installed."""
    box = PythonSandbox(tmp_path / "w", config=SandboxConfig(limits=FAST_LIMITS,
                                                             syscall_filter="required"))
    try:
        with pytest.raises(SandboxError) as info:
            box.run("1")
    finally:
        box.close()
    message = str(info.value)
    assert info.value.kind == "unavailable" and not box.running
    assert "syscalls: pyseccomp is not installed" in message
    assert "SandboxConfig(syscall_filter='on')" in message


def test_required_filter_runs_when_available(tmp_path: Path) -> None:
    pytest.importorskip("pyseccomp")
    box = PythonSandbox(tmp_path / "w", config=SandboxConfig(limits=FAST_LIMITS,
                                                             syscall_filter="required"))
    try:
        isolation = start_or_skip(box).isolation
        assert isolation is not None and isolation.holds("syscalls")
        assert box.run("6 * 7").value == "42"
    finally:
        box.close()


def test_syscall_filter_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """"on" by default; GRAMAGENT_SANDBOX_SYSCALL_FILTER picks another mode; typos fail."""
    monkeypatch.delenv(SYSCALL_FILTER_ENV, raising=False)
    assert SandboxConfig.from_env().syscall_filter == "on"
    assert SandboxConfig.from_env().required_features() == (
        "network", "filesystem", "limits", "privileges", "processes")
    monkeypatch.setenv(SYSCALL_FILTER_ENV, "Required")
    config = SandboxConfig.from_env()
    assert config.syscall_filter == "required"
    assert config.required_features()[-1] == "syscalls"
    assert SandboxConfig.from_env(require_isolation=False).required_features() == ("syscalls",)
    assert SandboxConfig.from_env(syscall_filter="off").syscall_filter == "off"
    monkeypatch.setenv(SYSCALL_FILTER_ENV, "strict")
    with pytest.raises(ConfigurationError, match="GRAMAGENT_SANDBOX_SYSCALL_FILTER='strict'"):
        SandboxConfig.from_env()
    with pytest.raises(ConfigurationError, match="syscall_filter must be one of on, required"):
        SandboxConfig(syscall_filter="yes")  # type: ignore[arg-type]


@settings(max_examples=120, deadline=None)
@given(name=st.sampled_from(["timeout", "cpu_seconds", "session_cpu_seconds", "memory_bytes",
                             "max_open_files", "max_file_bytes", "max_output_chars"]),
       value=st.one_of(st.none(), st.booleans(), st.integers(-2, 1 << 40),
                       st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=2)))
def test_sandbox_limits_are_positive_finite_numbers(name: str, value: object) -> None:
    """A limit that is not a positive number never reaches the worker: -1 would be
    RLIM_INFINITY to setrlimit (memory_bytes=-1 was no memory limit at all), a nan timeout
    would never fire. Refused when the limits are made, the field named."""
    if name == "timeout":
        good = type(value) in (int, float) and math.isfinite(value) and value > 0  # type: ignore[arg-type, operator]
    else:
        good = type(value) is int and value > 0  # type: ignore[operator]
    if good:
        assert getattr(SandboxLimits(**{name: value}), name) == value  # type: ignore[arg-type]
    else:
        with pytest.raises(ConfigurationError, match=f"^invalid SandboxLimits: {name} must be"):
            SandboxLimits(**{name: value})  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="SandboxConfig.startup_timeout must be"):
        SandboxConfig(startup_timeout=float("nan"))
