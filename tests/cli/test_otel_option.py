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
    done = gramagent("run", str(HELLO), "Hi", "--base-url", "http://127.0.0.1:9/v1",
                     "--otel", "zipkin")
    assert done.returncode == 1 and "expected one of: console, otlp" in done.stderr
