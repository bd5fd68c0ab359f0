"""The embedded server's lifecycle and the ``local`` provider's options, without real weights.

Start failures are exercised for real: the child process runs xllamacpp on a file that is not
a loadable model, and must come back as a ModelAPIError carrying llama.cpp's reason. Runs on
the real 0.5B model are in ``tests/e2e``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gramagent._models.local import (
    DEFAULT_SETTINGS,
    EmbeddedServer,
    LocalModel,
    ServerConfig,
    acquire_server,
    local_model,
)
from gramagent._models.registry import resolve_model
from gramagent._spec.model import ModelRef
from gramagent.errors import ConfigurationError, ModelAPIError

needs_xllamacpp = pytest.mark.skipif(
    subprocess.run([sys.executable, "-c", "import xllamacpp"], capture_output=True).returncode
    != 0,
    reason="xllamacpp is not installed (pip install 'gramagent[local]')",
)


@pytest.fixture
def broken_gguf(tmp_path: Path) -> Path:
    """A file with the GGUF magic and garbage after it: llama.cpp refuses to load it."""
    path = tmp_path / "broken.gguf"
    path.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\xff" * 64)
    return path


@needs_xllamacpp
def test_the_registry_resolves_local_refs_to_a_local_model() -> None:
    """``local/...`` goes to this module; nothing starts until the first request."""
    model = resolve_model(ModelRef.parse("local/qwen2.5-coder-0.5b"))
    assert isinstance(model, LocalModel)
    assert model.name == "qwen2.5-coder-0.5b"
    assert model.tool_call_mode == "constrained"
    assert model.server is None


@needs_xllamacpp
def test_defaults_and_overrides() -> None:
    """Temperature 0 by default; settings and the tool-call mode can be overridden."""
    model = local_model(ModelRef.parse("local/qwen2.5-coder-1.5b"))
    assert isinstance(model, LocalModel)
    assert model.settings["temperature"] == DEFAULT_SETTINGS["temperature"] == 0.0
    custom = local_model("local/x.gguf", tool_call_mode="text",
                         settings={"max_tokens": 64, "temperature": 0.5})
    assert isinstance(custom, LocalModel)
    assert custom.tool_call_mode == "text"
    assert custom.settings == {"temperature": 0.5, "max_tokens": 64}


@needs_xllamacpp
@pytest.mark.parametrize("option", ["base_url", "api_key"])
def test_a_server_address_or_key_is_refused(option: str) -> None:
    with pytest.raises(ConfigurationError, match=f"{option} cannot be set"):
        local_model("qwen2.5-coder-0.5b", **{option: "http://example.invalid/v1"})


@needs_xllamacpp
def test_only_chat_completions_is_spoken() -> None:
    with pytest.raises(ConfigurationError, match="Chat Completions only"):
        local_model("qwen2.5-coder-0.5b", api="responses")


def test_unknown_model_names_fail_at_construction() -> None:
    """A bad name is reported before any server or request."""
    with pytest.raises(ConfigurationError, match="unknown local model 'gpt-5'"):
        local_model("gpt-5")


def test_the_server_command_line() -> None:
    config = ServerConfig(model_path=Path("/m/x.gguf"), ctx_size=2048, threads=3, parallel=2)
    command = config.command()
    assert command[:3] == [sys.executable, "-m", "gramagent._models.local"]
    assert command[3:] == ["--model", "/m/x.gguf", "--port", "0", "--ctx-size", "2048",
                           "--threads", "3", "--parallel", "2"]
    assert ServerConfig(model_path=Path("/m/x.gguf")).threads >= 1


def test_threads_default_to_the_environment_or_the_cores(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GRAMAGENT_LOCAL_THREADS", "1")
    assert ServerConfig(model_path=Path("x.gguf")).threads == 1
    monkeypatch.setenv("GRAMAGENT_LOCAL_THREADS", "many")
    with pytest.raises(ConfigurationError, match="GRAMAGENT_LOCAL_THREADS"):
        ServerConfig(model_path=Path("x.gguf"))
    monkeypatch.delenv("GRAMAGENT_LOCAL_THREADS")
    from gramagent._models.local import _detected_threads

    # the idle usable cores, decided once per process
    assert 1 <= ServerConfig(model_path=Path("x.gguf")).threads == _detected_threads() <= \
        len(os.sched_getaffinity(0))


def test_the_child_entry_point_documents_itself() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gramagent._models.local", "--help"],
        capture_output=True, text=True, timeout=60, check=True,
    )
    assert "--model" in result.stdout and "stdin closes" in result.stdout


@needs_xllamacpp
def test_a_model_that_fails_to_load_is_a_model_api_error_with_the_reason(
    broken_gguf: Path,
) -> None:
    """The child exits; the error names the exit status and llama.cpp's own error lines."""
    server = EmbeddedServer(ServerConfig(model_path=broken_gguf, ctx_size=512, threads=1))
    with pytest.raises(ModelAPIError) as info:
        server.start(timeout=120)
    message = str(info.value)
    assert "failed to start" in message and str(broken_gguf) in message
    assert "exited with code 1" in message
    assert "failed to load model" in message  # llama.cpp's reason, from the captured log
    assert not server.alive


@needs_xllamacpp
def test_a_start_timeout_stops_the_child(broken_gguf: Path) -> None:
    """Not ready in time: a ModelAPIError, and no child process is left running."""
    server = EmbeddedServer(ServerConfig(model_path=broken_gguf, ctx_size=512, threads=1))
    with pytest.raises(ModelAPIError, match="did not start within 0 s"):
        server.start(timeout=0)
    assert server.pid is not None
    assert not server.alive


@needs_xllamacpp
async def test_a_failed_start_surfaces_from_the_first_request(broken_gguf: Path) -> None:
    """Through the Model protocol: the first request raises the start failure."""
    from gramagent._messages import UserMessage
    from gramagent._models.base import ModelRequest

    model = local_model(str(broken_gguf), ctx_size=512, threads=1, progress=False)
    request = ModelRequest(model="x", instruction="Be brief.",
                           messages=[UserMessage(content="Hi")])
    with pytest.raises(ModelAPIError, match="failed to start"):
        await model.request(request)
    await model.aclose()


@needs_xllamacpp
def test_acquire_server_does_not_keep_a_server_that_failed(broken_gguf: Path) -> None:
    config = ServerConfig(model_path=broken_gguf, ctx_size=512, threads=1)
    for _ in range(2):  # each attempt starts afresh and fails the same way
        with pytest.raises(ModelAPIError, match="failed to start"):
            acquire_server(config, timeout=120, progress=False)


class _Health:
    """A real HTTP server on 127.0.0.1 whose /health answers with ``status``."""

    def __init__(self, status: int) -> None:
        import http.server
        import threading

        outer = self
        self.status = status

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(outer.status if self.path == "/health" else 404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/health"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_the_health_poll_reads_the_status_and_ignores_proxies(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """503 (llama.cpp still loading) and a closed port are "not yet"; 200 is ready. A proxy in
    the environment is not used for the loopback child."""
    from gramagent._models.local import _healthy

    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    server = _Health(503)
    try:
        assert _healthy(server.url) is False
        server.status = 200
        assert _healthy(server.url) is True
    finally:
        server.close()
    assert _healthy(server.url) is False  # closed: connection refused


@pytest.mark.parametrize(("cores", "load", "threads"), [
    (2, 0.0, 2), (2, 0.4, 2), (2, 0.6, 1), (2, 1.0, 1), (2, 12.5, 1), (8, 3.2, 5), (1, 0.0, 1),
    (4, 0.0, 4),
])
def test_threads_leave_out_the_cores_other_work_keeps_busy(
    cores: int, load: float, threads: int,
) -> None:
    """On a busy machine one thread is several times faster than threads that wait for
    busy cores (bench/RESULTS.md): the default leaves the loaded cores out."""
    from gramagent._models.local import threads_for_load

    assert threads_for_load(cores, load) == threads

