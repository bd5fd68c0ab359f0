"""The sandbox worker: a persistent Python session behind a pipe, run as ``python -I -S``.

Started by :class:`gramagent.tools.sandbox.PythonSandbox`; not imported by gramagent. Startup:

1. the process the host started is the supervisor (:mod:`_supervisor`): it reads the
   configuration frame, enters new namespaces (PID included), forks the worker and from then
   on only relays frames between the host's pipes and the worker's, stopping the worker after
   each frame it sends;
2. the worker (process 1 of the new PID namespace) keeps its protocol pipes on private
   descriptors; fd 0 becomes ``/dev/null``, fds 1 and 2 an in-memory file that collects
   everything the user's code prints (Python or C level);
3. it builds the seccomp filter (:mod:`_seccomp`; loading its binding starts ``ldconfig``,
   so this comes first), isolates itself (:mod:`_isolate`), then loads the filter, which
   from then on covers the user's code and all its children;
4. answers with a ``ready`` frame carrying the isolation report;
5. serves ``exec`` requests until the pipe closes; each reply carries its request's ``id``.

An ``exec`` runs a cell like the interactive interpreter: statements run, and the value of a
final expression is reported (and kept in ``_``). Exceptions are answered as traceback text;
the session survives them. A CPU-time overrun raises ``CPUTimeExceeded`` inside the cell.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import io
import linecache
import math
import os
import resource
import signal
import sys
import traceback
from typing import Any

_THIS_FILE = os.path.abspath(__file__)
_HERE = os.path.dirname(_THIS_FILE)
sys.path.insert(0, _HERE)
try:
    import _isolate  # type: ignore[import-not-found]
    import _landlock  # type: ignore[import-not-found]
    import _protocol  # type: ignore[import-not-found]
    import _seccomp  # type: ignore[import-not-found]
    import _supervisor  # type: ignore[import-not-found]
finally:
    sys.path.remove(_HERE)

MAX_REQUEST_BYTES = 16 << 20
MAX_FD = 1 << 16


class CPUTimeExceeded(Exception):
    """The cell used more CPU seconds than one call may."""


def _on_sigxcpu(signum: int, frame: object) -> None:
    raise CPUTimeExceeded("CPU time limit of this call exceeded")


_PRELUDE = '''
def read_table(name):
    """Read the parquet table ``name`` of the data directories as a pyarrow Table.

    Reads on this thread only: the sandbox cannot start threads.
    """
    import os
    import pyarrow.parquet as _pq
    if not name.isidentifier():
        raise ValueError(f"invalid table name {name!r}")
    paths = [os.path.join(folder, name + ".parquet") for folder in DATA_DIRS]
    path = next((p for p in paths if os.path.isfile(p)), None)
    if path is None:
        raise FileNotFoundError(f"no table {name!r}; tables: {list_tables()}")
    with open(path, "rb") as f:
        return _pq.ParquetFile(f, pre_buffer=False).read(use_threads=False)


def list_tables():
    """Names of the parquet tables in the data directories."""
    import os
    return sorted({n[:-8] for folder in DATA_DIRS if os.path.isdir(folder)
                   for n in os.listdir(folder) if n.endswith(".parquet")})
'''


class Session:
    """The user's namespace and the cells run in it."""

    def __init__(self, capture_fd: int, data_dirs: list[str], limits: dict[str, int]) -> None:
        self.capture_fd = capture_fd
        self.limits = limits
        self.cells = 0
        self.namespace: dict[str, object] = {"__name__": "__main__", "__builtins__": builtins,
                                          "DATA_DIR": data_dirs[0] if data_dirs else None,
                                          "DATA_DIRS": tuple(data_dirs)}
        exec(compile(_PRELUDE, "<sandbox prelude>", "exec"), self.namespace)

    def _arm_cpu_limit(self) -> None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        used = math.ceil(usage.ru_utime + usage.ru_stime)
        _, hard = resource.getrlimit(resource.RLIMIT_CPU)
        soft = used + self.limits["cpu_seconds"]
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))

    def _disarm_cpu_limit(self) -> None:
        try:
            _, hard = resource.getrlimit(resource.RLIMIT_CPU)
            resource.setrlimit(resource.RLIMIT_CPU, (hard, hard))
        except CPUTimeExceeded:  # the signal may land here; the cell is over anyway
            pass

    def run(self, code: str, request_id: object) -> dict[str, Any]:
        self.cells += 1
        name = f"<cell {self.cells}>"
        linecache.cache[name] = (len(code), None, code.splitlines(True), name)
        value_text: str | None = None
        error: str | None = None
        try:
            self._arm_cpu_limit()
            tree = ast.parse(code, name, "exec")
            last = tree.body[-1] if tree.body else None
            if isinstance(last, ast.Expr):
                tree.body.pop()
            else:
                last = None
            exec(compile(tree, name, "exec"), self.namespace)
            if last is not None:
                value = eval(compile(ast.Expression(last.value), name, "eval"), self.namespace)
                if value is not None:
                    self.namespace["_"] = value
                    value_text = _repr(value, self.limits["max_output_chars"])
        except BaseException as exc:  # noqa: BLE001 - every failure of the cell is reported
            error = _format_error(exc)
        finally:
            self._disarm_cpu_limit()
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):  # a broken stream must not kill the session
                    stream.flush()
        output, total = self._take_output()
        return {"op": "result", "id": request_id, "output": output, "output_bytes": total,
                "value": value_text, "error": error}

    def _take_output(self) -> tuple[str, int]:
        limit = self.limits["max_output_chars"] * 4  # bytes; the parent cuts to characters
        total = os.fstat(self.capture_fd).st_size
        data = os.pread(self.capture_fd, min(total, limit), 0)
        os.ftruncate(self.capture_fd, 0)
        os.lseek(self.capture_fd, 0, os.SEEK_SET)
        return data.decode("utf-8", "replace"), total


def _repr(value: object, limit: int) -> str:
    try:
        text = repr(value)
    except Exception as exc:  # noqa: BLE001
        text = f"<repr failed: {type(exc).__name__}: {exc}>"
    return text if len(text) <= limit else text[:limit]


def _format_error(exc: BaseException) -> str:
    """Traceback text of the cell's exception, without the worker's own frames."""
    try:
        if isinstance(exc, SyntaxError):
            return "".join(traceback.format_exception_only(type(exc), exc))
        report = traceback.TracebackException.from_exception(exc)
        report.stack = traceback.StackSummary.from_list(
            [f for f in report.stack if f.filename != _THIS_FILE])
        return "".join(report.format())
    except Exception:  # noqa: BLE001 - a hostile exception object
        return f"{type(exc).__name__}: <unprintable exception>"


def _redirect_stdio() -> tuple[int, int, int]:
    """Keep the protocol pipes private; route fds 1 and 2 into a memory file."""
    proto_in, proto_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    capture = os.memfd_create("sandbox-output", 0)
    os.dup2(capture, 1)
    os.dup2(capture, 2)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115
    sys.stdout = io.TextIOWrapper(open(1, "wb", buffering=0, closefd=False),  # noqa: SIM115
                                  encoding="utf-8", errors="backslashreplace", write_through=True)
    sys.stderr = io.TextIOWrapper(open(2, "wb", buffering=0, closefd=False),  # noqa: SIM115
                                  encoding="utf-8", errors="backslashreplace", write_through=True)
    return proto_in, proto_out, capture


def _serve(proto_in: int, proto_out: int, capture: int, config: dict[str, Any],
           entered: dict[str, Any]) -> None:
    """The worker (the supervisor's child): isolate, then run cells until the pipe closes."""
    decoder = _protocol.FrameDecoder(max_bytes=MAX_REQUEST_BYTES)
    for path in config.get("python_paths", ()):
        if path not in sys.path:
            sys.path.append(path)
    syscall_filter = _seccomp.prepare(config.get("syscall_filter"))  # its own pid: after fork
    try:
        report = _isolate.isolate(config, entered)
        report["landlock"] = _landlock.restrict(config["workdir"])
        report["syscalls"] = _seccomp.install(syscall_filter)
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which gives up
        _protocol.write_frame(proto_out, {"op": "ready", "ok": False,
                                          "error": f"{type(exc).__name__}: {exc}"})
        return
    signal.signal(signal.SIGXCPU, _on_sigxcpu)
    builtins.CPUTimeExceeded = CPUTimeExceeded  # type: ignore[attr-defined]
    session = Session(capture, list(config.get("data_dirs") or ()), config["limits"])
    _protocol.write_frame(proto_out, {"op": "ready", "ok": True, "isolation": report,
                                      "uid": os.getuid()})
    while True:  # the supervisor stops this process after each frame it sends
        try:
            request = _protocol.read_frame(proto_in, decoder)
        except _protocol.FrameError:
            return  # the parent went away
        if request.get("op") != "exec" or not isinstance(request.get("code"), str):
            _protocol.write_frame(proto_out, {"op": "result", "id": request.get("id"),
                                              "output": "", "output_bytes": 0, "value": None,
                                              "error": "bad request"})
        else:
            _protocol.write_frame(proto_out, session.run(request["code"], request.get("id")))


def main() -> None:
    """The supervisor: read the configuration, enter namespaces, fork the worker, relay."""
    host_in, host_out = 0, 1
    config = _protocol.read_frame(host_in, _protocol.FrameDecoder(max_bytes=MAX_REQUEST_BYTES))
    _supervisor.die_with_parent(config.get("parent_pid"))
    entered = _isolate.enter_namespaces()
    request_r, request_w = os.pipe()
    reply_r, reply_w = os.pipe()
    worker = os.fork()
    if worker == 0:
        try:
            os.setsid()  # its own process group: kill(0) and killpg cannot reach the supervisor
            os.dup2(request_r, 0)
            os.dup2(reply_w, 1)
            os.closerange(3, MAX_FD)  # nothing of the host's pipes stays in the worker
            config["parent_pid"] = os.getppid()  # 0 in a new PID namespace
            _serve(*_redirect_stdio(), config, entered)
        finally:
            os._exit(0)
    for fd in (request_r, reply_w):
        os.close(fd)
    relay = _supervisor.Relay(worker, host_in, host_out, request_w, reply_r,
                              max_request=MAX_REQUEST_BYTES,
                              max_reply=int(config.get("max_reply_bytes", 1 << 24)))
    relay.start()
    relay.serve()


if __name__ == "__main__":
    main()
