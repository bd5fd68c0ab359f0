"""The embedded local model: llama.cpp's server (via xllamacpp) on 127.0.0.1, offline.

``local_model(ref)`` returns a :class:`LocalModel`: a Chat Completions adapter (with
grammar-constrained tool calling and temperature 0 by default) pointed at an embedded server
that is started lazily on first use and shared by every run in the process (one server per
weights file and settings). Weights are resolved and verified by
:mod:`gramagent._models.weights`.

The server runs in a **child process** (``python -m gramagent._models.local --model PATH``),
not in the caller's process, because:

- a llama.cpp abort (``GGML_ASSERT``, out of memory) kills its process: in a child it
  becomes a :class:`~gramagent.errors.ModelAPIError` naming the exit status and the server's
  last log lines, instead of taking the caller down;
- stopping is clean and certain: the child exits when its stdin closes, which also happens
  when the parent dies without running its exit handlers, so no server is left behind;
- llama.cpp logs to file descriptor 2; in a child its log is captured (the tail is kept for
  error messages) instead of flooding the caller's terminal.

The child binds port 0, so the operating system picks a free port with no race, and prints
the address it listens on; the parent then waits for ``/health`` to answer 200, with a
timeout. Servers are stopped at interpreter exit (``atexit``) or with
:func:`shutdown_servers`.

The server uses the cores this process may use that other work leaves idle (by the load
average), unless ``threads`` or ``$GRAMAGENT_LOCAL_THREADS`` says otherwise: on a machine busy
with other work, one thread is several times faster than two (bench/RESULTS.md, "Embedded
model").
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import collections
import contextlib
import dataclasses
import functools
import importlib.util
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from gramagent._install import needs_extra
from gramagent._models._wire import usage_sum
from gramagent._models.answering import repeats_answered_calls
from gramagent._models.base import ModelRequest, ModelTurn, TextSink
from gramagent._models.weights import check_model_name, progress_enabled, resolve_weights
from gramagent._spec.model import ModelRef
from gramagent.errors import ConfigurationError, ModelAPIError

if TYPE_CHECKING:
    import urllib.request

    from gramagent._models.chat import ChatCompletionsModel, ToolCallMode

__all__ = [
    "DEFAULT_CTX_SIZE",
    "DEFAULT_MODEL",
    "EmbeddedServer",
    "LocalModel",
    "ServerConfig",
    "ServerHandle",
    "acquire_server",
    "local_model",
    "main",
    "shutdown_servers",
    "threads_for_load",
]

DEFAULT_MODEL = "qwen2.5-coder-0.5b"
"""The model ``local/`` agents get when they name no other."""
DEFAULT_CTX_SIZE = 8192
"""Context window (tokens) of the embedded server."""
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]
"""The directory holding this ``gramagent`` package: the child imports the same copy."""
DEFAULT_START_TIMEOUT = 180.0
"""Seconds to wait for the server to load the model and answer ``/health``."""
DEFAULT_SETTINGS: dict[str, Any] = {"temperature": 0.0, "max_tokens": 1024}
"""Request settings the local model uses unless a request sets them."""

_READY = "GRAMAGENT-LLAMA-SERVER-LISTENING"
_LOG_TAIL = 40


@functools.cache
def _direct() -> urllib.request.OpenerDirector:
    """An opener that ignores proxies from the environment: the child listens on loopback.

    Built on first use, so the child process (which imports this module) never loads urllib.
    """
    import urllib.request

    return urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _healthy(url: str) -> bool:
    """Whether a GET of ``url`` (the child's ``/health``, on 127.0.0.1) answers 200 now."""
    try:
        with _direct().open(url, timeout=5.0) as answer:
            return bool(answer.status == 200)
    except OSError:  # URLError (and HTTPError: 503 while loading) are OSErrors
        return False


def _default_threads() -> int:
    """``$GRAMAGENT_LOCAL_THREADS``, else the cores this process may use that are idle.

    On a machine busy with other work, fewer threads are much faster: llama.cpp's threads
    wait for each other at every step, and one waiting for a busy core stalls them all (see
    bench/RESULTS.md, "Embedded model"). So the cores other work keeps busy, by the
    one-minute load average, are left out (:func:`threads_for_load`).
    """
    if env := os.environ.get("GRAMAGENT_LOCAL_THREADS"):
        try:
            return max(1, int(env))
        except ValueError:
            raise ConfigurationError(
                f"GRAMAGENT_LOCAL_THREADS must be a number of threads, not {env!r}") from None
    return _detected_threads()


@functools.cache
def _detected_threads() -> int:
    """The idle usable cores, decided once per process: models made later share a server."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except OSError:  # pragma: no cover - no load average here
        return cores
    return threads_for_load(cores, load)


def threads_for_load(cores: int, load: float) -> int:
    """Threads for generation on ``cores`` usable cores under a load average of ``load``.

    The cores left idle by the load, rounded to the nearest whole core, at least one: 2 on
    an idle 2-core machine, 1 when another process keeps one core (or more) busy.
    """
    return max(1, min(cores, round(cores - load)))


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerConfig:
    """How to run one embedded server. Equal configs share one server in a process."""

    model_path: Path
    """The verified GGUF file."""
    ctx_size: int = DEFAULT_CTX_SIZE
    """Context window in tokens."""
    threads: int = dataclasses.field(default_factory=_default_threads)
    """CPU threads for generation and prompt processing (default: the usable cores)."""
    parallel: int = 1
    """Requests decoded concurrently (slots); the context is split between them."""

    def command(self) -> list[str]:
        """The child-process command line that runs this server on a free port."""
        return [
            sys.executable, "-m", "gramagent._models.local",
            "--model", str(self.model_path),
            "--port", "0",
            "--ctx-size", str(self.ctx_size),
            "--threads", str(self.threads),
            "--parallel", str(self.parallel),
        ]


class EmbeddedServer:
    """One llama.cpp server in a child process. Use :func:`acquire_server` to share them."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self._proc: subprocess.Popen[bytes] | None = None
        self._address: str | None = None
        self._announced = threading.Event()
        self._log: collections.deque[str] = collections.deque(maxlen=_LOG_TAIL)
        self._readers: list[threading.Thread] = []

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL, ``http://127.0.0.1:PORT/v1``."""
        if self._address is None:
            raise RuntimeError("the embedded server has not been started")
        return self._address + "/v1"

    @property
    def root_url(self) -> str:
        """The server's root, ``http://127.0.0.1:PORT`` (llama.cpp's own endpoints)."""
        if self._address is None:
            raise RuntimeError("the embedded server has not been started")
        return self._address

    @property
    def pid(self) -> int | None:
        """The child's process id, None before start."""
        return None if self._proc is None else self._proc.pid

    @property
    def alive(self) -> bool:
        """Whether the child process is running."""
        return self._proc is not None and self._proc.poll() is None

    def log_tail(self, errors_first: bool = True) -> str:
        """The server's last log lines, for error messages.

        With ``errors_first``, only the error lines (llama.cpp marks them `` E ``) when there
        are any, else the last ten lines.
        """
        lines = list(self._log)
        if errors_first:
            errors = [line for line in lines if " E " in line or line.startswith("error")]
            lines = errors[-10:] if errors else lines[-10:]
        return "\n".join(lines)

    def exit_reason(self) -> str:
        """How the child ended (code or signal), with its last log lines."""
        if self._proc is None or self._proc.returncode is None:
            return "it is still running"
        code = self._proc.returncode
        if code < 0:
            try:
                how = f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"was killed by signal {-code}"
        else:
            how = f"exited with code {code}"
        tail = self.log_tail()
        return f"{how}; last log lines:\n{tail}" if tail else how

    def start(self, timeout: float = DEFAULT_START_TIMEOUT) -> None:
        """Start the child and wait until ``/health`` answers 200.

        Raises:
            ModelAPIError: the child exited while starting, or was not ready within
                ``timeout`` seconds (it is then stopped).
        """
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(_PACKAGE_ROOT), env.get("PYTHONPATH")) if p)
        self._proc = subprocess.Popen(
            self.config.command(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,  # the address line only: a channel of its own, because
            stderr=subprocess.PIPE,  # llama.cpp's log lines may interleave mid-line on fd 2
            env=env,
            start_new_session=True,  # a terminal's Ctrl+C reaches the caller, who stops us
        )
        pid = self._proc.pid
        self._readers = [
            threading.Thread(target=self._read_address, name=f"llama-server-{pid}-out",
                             daemon=True),
            threading.Thread(target=self._read_log, name=f"llama-server-{pid}-log",
                             daemon=True),
        ]
        for reader in self._readers:
            reader.start()
        deadline = time.monotonic() + timeout
        try:
            closed = self._announced.wait(timeout)
            if self._address is None:
                if closed:  # stdout closed without an address: the child is exiting
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        self._proc.wait(10)
                self._fail_start(timeout)
            self._wait_healthy(deadline, timeout)
        except BaseException:
            self.stop()
            raise

    def _fail_start(self, timeout: float) -> None:
        assert self._proc is not None
        if self._proc.poll() is None:
            raise ModelAPIError(
                f"the embedded llama.cpp server for {self.config.model_path} did not start "
                f"within {timeout:g} s; last log lines:\n{self.log_tail()}")
        self._proc.wait()
        for reader in self._readers:
            reader.join(5)
        raise ModelAPIError(
            f"the embedded llama.cpp server for {self.config.model_path} failed to start: "
            f"it {self.exit_reason()}")

    def _wait_healthy(self, deadline: float, timeout: float) -> None:
        assert self._proc is not None and self._address is not None
        while True:
            if self._proc.poll() is not None:
                raise ModelAPIError(
                    f"the embedded llama.cpp server stopped while loading: "
                    f"it {self.exit_reason()}")
            if _healthy(self._address + "/health"):
                return
            if time.monotonic() > deadline:
                raise ModelAPIError(
                    f"the embedded llama.cpp server at {self._address} was not healthy "
                    f"within {timeout:g} s")
            time.sleep(0.1)

    def _read_address(self) -> None:
        """Read the child's stdout: the line announcing the address it listens on."""
        assert self._proc is not None and self._proc.stdout is not None
        for raw in self._proc.stdout:
            line = raw.decode("utf-8", "replace").strip()
            if self._address is None and line.startswith(_READY + " "):
                self._address = line.split(" ", 1)[1].strip().rstrip("/")
                self._announced.set()
        self._announced.set()  # EOF: the child is gone; wake a waiting start()

    def _read_log(self) -> None:
        """Drain the child's stderr (llama.cpp's log), keeping the last lines."""
        assert self._proc is not None and self._proc.stderr is not None
        for raw in self._proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip()
            if line:
                self._log.append(line)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the child: close its stdin, then terminate, then kill. Idempotent."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            try:
                if proc.stdin is not None:
                    proc.stdin.close()
                proc.wait(timeout)
            except (subprocess.TimeoutExpired, OSError):
                proc.terminate()
                try:
                    proc.wait(timeout / 2)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        elif proc.stdin is not None:
            proc.stdin.close()
        for reader in self._readers:
            reader.join(5)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


class ServerHandle(Protocol):
    """What a :class:`LocalModel` needs of its server: an :class:`EmbeddedServer` of this
    process, or one another process runs (the Ray engine's server of a node)."""

    @property
    def base_url(self) -> str: ...

    @property
    def root_url(self) -> str: ...

    @property
    def alive(self) -> bool: ...

    def exit_reason(self) -> str: ...


_servers: dict[ServerConfig, EmbeddedServer] = {}
_servers_lock = threading.Lock()
_atexit_registered = False


def acquire_server(
    config: ServerConfig,
    *,
    timeout: float = DEFAULT_START_TIMEOUT,
    progress: bool | None = None,
    label: str | None = None,
) -> EmbeddedServer:
    """The running server for ``config``, started now if there is none (or it died).

    Thread-safe; blocks while a server starts.
    """
    global _atexit_registered
    with _servers_lock:
        server = _servers.get(config)
        if server is not None and server.alive:
            return server
        if server is not None:
            server.stop()
        server = EmbeddedServer(config)
        if not _atexit_registered:
            atexit.register(shutdown_servers)
            _atexit_registered = True
        threads = f"{config.threads} thread{'s' if config.threads != 1 else ''}"
        with _status(f"Loading {label or config.model_path.name} on {threads}",
                     progress_enabled(progress)):
            server.start(timeout)
        _servers[config] = server
        return server


def shutdown_servers() -> None:
    """Stop every embedded server this process started (also run at exit)."""
    with _servers_lock:
        servers = list(_servers.values())
        _servers.clear()
    for server in servers:
        server.stop()


class LocalModel:
    """A :class:`~gramagent._models.base.Model` on the embedded server.

    Resolves (and if needed assembles) the weights and starts the shared server on the first
    request, then delegates to a :class:`~gramagent._models.chat.ChatCompletionsModel`.
    """

    provider = "local"
    """What the spans name as ``gen_ai.provider.name``: the embedded model."""

    def __init__(
        self,
        name: str,
        *,
        ctx_size: int = DEFAULT_CTX_SIZE,
        threads: int | None = None,
        parallel: int = 1,
        tool_call_mode: ToolCallMode = "constrained",
        settings: dict[str, Any] | None = None,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        progress: bool | None = None,
        cache_dir: Path | None = None,
        chat_options: dict[str, Any] | None = None,
        acquire: Callable[[], ServerHandle] | None = None,
    ) -> None:
        self.name = name
        self.tool_call_mode: ToolCallMode = tool_call_mode
        self.settings = {**DEFAULT_SETTINGS, **(settings or {})}
        self._server_options = {"ctx_size": ctx_size, "parallel": parallel,
                                "threads": threads or _default_threads()}
        self._start_timeout = start_timeout
        self._progress = progress
        self._cache_dir = cache_dir
        self._chat_options = dict(chat_options or {})
        self._acquire_hook = acquire
        self._server: ServerHandle | None = None
        self._chat: ChatCompletionsModel | None = None
        self._chat_url: str | None = None

    @property
    def model_name(self) -> str:
        """The model this serves (``local/`` left out); a run given this model names it."""
        return self.name

    @property
    def server(self) -> ServerHandle | None:
        """The server in use, None before the first request."""
        return self._server

    async def start(self) -> ServerHandle:
        """Resolve the weights and start (or reuse) the server; idempotent.

        The blocking work (hashing, assembling, loading) runs in a worker thread; concurrent
        first requests share one server (:func:`acquire_server` is serialized).
        """
        server = self._server
        if server is None or not server.alive:
            server = self._server = await asyncio.to_thread(self._acquire)
        return server

    def _acquire(self) -> ServerHandle:
        if self._acquire_hook is not None:
            return self._acquire_hook()
        path = resolve_weights(self.name, cache_dir=self._cache_dir, progress=self._progress)
        config = ServerConfig(model_path=path, **self._server_options)
        return acquire_server(config, timeout=self._start_timeout, progress=self._progress,
                              label=self.name)

    async def request(self, request: ModelRequest) -> ModelTurn:
        """Send ``request`` to the embedded server (starting it first if needed).

        Raises:
            ModelAPIError: the server failed to start, stopped, or answered with an error.
            ConfigurationError: the weights are missing or fail verification.
        """
        return await self._send(request, None)

    async def stream_request(self, request: ModelRequest, on_text: TextSink) -> ModelTurn:
        """:meth:`request`, streamed (see ``ChatCompletionsModel.stream_request``).

        Raises:
            As :meth:`request`.
        """
        return await self._send(request, on_text)

    async def _send(self, request: ModelRequest, on_text: TextSink | None) -> ModelTurn:
        server = await self.start()
        chat = await self._chat_for(server)
        request = dataclasses.replace(request, settings={**self.settings, **request.settings})
        try:
            turn = await self._exchange(chat, request, on_text)
            if repeats_answered_calls(request, turn):  # done calling: the answer step
                answer_step = dataclasses.replace(request, tool_choice="none")
                answer = await self._exchange(chat, answer_step, on_text)
                turn = dataclasses.replace(answer, usage=usage_sum(turn.usage, answer.usage))
            return turn
        except ModelAPIError as exc:
            if server.alive:
                raise
            raise ModelAPIError(
                f"the embedded llama.cpp server stopped: it {server.exit_reason()}",
                status=exc.status, body=exc.body, model=self.name,
                context=exc.context, usage=exc.usage,
            ) from exc

    @staticmethod
    async def _exchange(chat: ChatCompletionsModel, request: ModelRequest,
                        on_text: TextSink | None) -> ModelTurn:
        if on_text is None:
            return await chat.request(request)
        return await chat.stream_request(request, on_text)

    async def _chat_for(self, server: ServerHandle) -> ChatCompletionsModel:
        """The adapter for ``server`` (made anew when a dead server was replaced)."""
        from gramagent._models.chat import ChatCompletionsModel

        if self._chat is None or self._chat_url != server.base_url:
            await self.aclose()
            options = {"continue_lone_calls": True, "llama_server_root": server.root_url,
                       **self._chat_options}
            self._chat = ChatCompletionsModel(
                server.base_url, None, tool_call_mode=self.tool_call_mode, **options)
            self._chat_url = server.base_url
        return self._chat

    async def aclose(self) -> None:
        """Release this model's connections; the shared server keeps running for other runs."""
        if self._chat is not None:
            chat, self._chat, self._chat_url = self._chat, None, None
            await chat.aclose()

    async def __aenter__(self) -> LocalModel:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        where = self._server.base_url if self._server and self._server.alive else "not started"
        return f"LocalModel({self.name!r}, {where})"


_REJECTED = ("base_url", "api_key")


def local_model(ref: ModelRef | str, **options: Any) -> LocalModel:
    """The ``local`` provider: a model on the embedded llama.cpp server.

    Args:
        ref: ``local/qwen2.5-coder-0.5b`` (the default), ``local/qwen2.5-coder-1.5b``, or
            ``local/path/to/model.gguf``; a :class:`ModelRef` or its name part.
        **options: ``ctx_size``, ``threads``, ``parallel``, ``tool_call_mode``
            (``constrained`` by default; ``hybrid`` lets the model decline the offered tools,
            see :mod:`gramagent._models.hybrid`), ``settings`` (request defaults, e.g.
            ``{"max_tokens": 256}``; temperature is 0 unless set), ``start_timeout``,
            ``progress``, ``cache_dir``, ``acquire`` (where the server comes from: a callable
            returning a :class:`ServerHandle`, run in a worker thread; default this process's
            shared server for the weights and settings); any other option goes to the Chat
            Completions adapter (``continue_lone_calls`` is on unless set to False: a lone
            call is asked whether more calls follow; a reply llama.cpp's chat parser rejects
            is generated again raw, see :mod:`gramagent._models.unparsed`).

    Raises:
        ConfigurationError: an unknown model name, a base URL or API key (the server is
            embedded), an unsupported ``api``, or the ``local`` extra (xllamacpp) is not installed.
    """
    name = ref.name if isinstance(ref, ModelRef) else (ref or DEFAULT_MODEL)
    if isinstance(ref, str) and name.startswith("local/"):
        name = ModelRef.parse(name).name
    check_model_name(name)
    if importlib.util.find_spec("xllamacpp") is None:  # before any weights are joined
        raise ConfigurationError(needs_extra(f"local/{name} (the embedded llama.cpp runtime)",
                                             "local"))
    api = options.pop("api", None)
    if api not in (None, "chat"):
        raise ConfigurationError(
            f"the local provider speaks Chat Completions only, not api={api!r}")
    for key in _REJECTED:
        if options.pop(key, None) is not None:
            raise ConfigurationError(
                f"the local provider runs its own embedded server; {key} cannot be set "
                "(use provider 'openai' for another server)")
    own = {k: options.pop(k) for k in (
        "ctx_size", "threads", "parallel", "tool_call_mode", "settings", "start_timeout",
        "progress", "cache_dir", "acquire") if k in options}
    return LocalModel(name, chat_options=options, **own)


class _NoStatus:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _status(message: str, enabled: bool) -> Any:
    """A rich spinner on stderr while the model loads, or nothing."""
    if not enabled:
        return _NoStatus()
    from rich.console import Console

    return Console(stderr=True).status(message + "…")


def main(argv: Sequence[str] | None = None) -> int:
    """Run one llama.cpp server until stdin closes or SIGTERM (the child-process side)."""
    parser = argparse.ArgumentParser(
        prog="python -m gramagent._models.local",
        description="Serve a GGUF model with llama.cpp on 127.0.0.1 (OpenAI-compatible). "
        "Prints the listening address, then serves until stdin closes.")
    parser.add_argument("--model", required=True, help="path of the GGUF file")
    parser.add_argument("--port", type=int, default=0, help="port (0: a free one)")
    parser.add_argument("--ctx-size", type=int, default=DEFAULT_CTX_SIZE)
    parser.add_argument("--threads", type=int, default=_default_threads())
    parser.add_argument("--parallel", type=int, default=1)
    args = parser.parse_args(argv)
    try:
        import xllamacpp
    except ImportError:
        print(needs_extra("the embedded model (xllamacpp)", "local"), file=sys.stderr)
        return 2

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.hostnames = ["127.0.0.1"]
    params.port = args.port
    params.n_ctx = args.ctx_size
    params.n_parallel = args.parallel
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.use_jinja = True
    params.ui = False
    params.cache_ram_mib = 1024

    def _terminate(signum: int, frame: object) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, _terminate)
    try:
        server = xllamacpp.Server(params)
    except RuntimeError as exc:  # the reason is in llama.cpp's log lines above
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 1
    print(f"{_READY} {server.listening_address}", flush=True)
    try:
        sys.stdin.buffer.read()  # returns when the parent closes stdin or exits
    except KeyboardInterrupt:
        pass
    finally:
        del server
    return 0




if __name__ == "__main__":
    sys.exit(main())
