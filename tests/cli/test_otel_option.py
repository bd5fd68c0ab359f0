"""``gramagent run --otel console`` writes the run's spans to stderr (never the arguments); an
exporter whose package is missing names its install command."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gramagent.testing import ScriptedServer, call, reply

pytestmark = pytest.mark.slow

pytest.importorskip("opentelemetry.sdk.trace",
                    reason='needs the otel extra: python3 -m pip install -e ".[otel]"')

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "examples" / "hello_world.gram"
NAME = "Zephyrine-Argument-91"


def gramagent(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "OTEL_"))}
    return subprocess.run([sys.executable, "-m", "gramagent", *args], capture_output=True,
                          text=True, env=env, timeout=120, check=False)


def console_spans(stderr: str) -> list[dict[str, object]]:
    """The JSON objects the console exporter wrote (one per span, pretty-printed)."""
    decoder, spans, at = json.JSONDecoder(), [], 0
    while (at := stderr.find("{", at)) >= 0:
        try:
            value, end = decoder.raw_decode(stderr, at)
        except json.JSONDecodeError:
            at += 1
            continue
        if isinstance(value, dict) and "context" in value:
            spans.append(value)
        at = end
    return spans


def test_console_exporter_writes_the_spans() -> None:
    with ScriptedServer([call("sayHello", {"personName": NAME}), reply("Done.")]) as srv:
        done = gramagent("run", str(HELLO), f"I'm {NAME}", "--base-url", srv.base_url,
                         "--otel", "console")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Done."  # spans go to stderr, the answer alone to stdout
    spans = console_spans(done.stderr)
    assert [s["name"] for s in spans] == ["chat qwen2.5-coder-0.5b", "execute_tool sayHello",
                                          "chat qwen2.5-coder-0.5b",
                                          "invoke_agent hello_world_agent"]
    run = spans[-1]
    assert run["attributes"]["gen_ai.agent.name"] == "hello_world_agent"  # type: ignore[index]
    assert NAME not in done.stderr


@pytest.mark.skipif(importlib.util.find_spec("opentelemetry.exporter") is not None,
                    reason="an OTLP exporter is installed")
def test_otlp_without_its_package_names_the_install_command() -> None:
    done = gramagent("run", str(HELLO), "Hi", "--base-url", "http://127.0.0.1:9/v1",
                     "--otel", "otlp")
    assert done.returncode == 1
    assert "pip install opentelemetry-exporter-otlp-proto-http" in done.stderr
    assert "Traceback" not in done.stderr


def test_unknown_exporter() -> None:
    """A bad --otel value is a bad command line: exit 2, like any bad option value."""
    done = gramagent("run", str(HELLO), "Hi", "--base-url", "http://127.0.0.1:9/v1",
                     "--otel", "zipkin")
    assert done.returncode == 2 and "'zipkin' is not one of: console, otlp" in done.stderr


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.skipif(importlib.util.find_spec("opentelemetry.exporter") is None,
                    reason="needs the OTLP exporter: pip install "
                           "opentelemetry-exporter-otlp-proto-http")
def test_otlp_with_no_collector_says_so_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """No collector: the answer as usual, then one line saying the spans were not exported;
    none of the SDK's retry records."""
    from gramagent._cli._otel import OTLP_TIMEOUT, _otlp_timeout

    endpoint = f"http://127.0.0.1:{_closed_port()}"
    with ScriptedServer([reply("Done.")]) as srv:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "OTEL_"))}
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
        done = subprocess.run([sys.executable, "-m", "gramagent", "run", str(HELLO), "Hi",
                               "--base-url", srv.base_url, "--otel", "otlp"],
                              capture_output=True, text=True, env=env, timeout=120,
                              check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Done."
    assert done.stderr.splitlines() == [
        f"--otel otlp: 2 spans not exported: no answer from {endpoint}/v1/traces "
        "(OTEL_EXPORTER_OTLP_ENDPOINT names the collector)"]
    # the exporter's retries are bounded by a short deadline unless the user sets one
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TIMEOUT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", raising=False)
    assert _otlp_timeout() == OTLP_TIMEOUT
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "7")
    assert _otlp_timeout() == 7.0
