"""Secrets at rest, every way a key arrives (issue 32, item 7): on the command line
(``--api-key``), in ``OPENAI_API_KEY``, on a model object a Python caller made
(``resolve_model(api_key=...)``, no ``api_key=`` run option), or set in the environment after
the process first masked anything. A server echoes the key in its answer and in a tool call's
arguments; the session file holds no byte of it, and ``gramagent sessions show`` (a fresh
process, which knows no key) prints none of it."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from pathlib import Path

import pytest
from cli_support import run_gramagent

from gramagent._logs import redact
from gramagent._models.registry import resolve_model
from gramagent._runtime.library import ToolLibrary
from gramagent._runtime.sessions import SessionStore
from gramagent._spec.gram.text import load_agent
from gramagent.testing import ScriptedServer, call, calls, reply

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "examples" / "hello_world.gram"


def _echoing(key: str) -> list[object]:
    return [calls(call("sayHello", {"personName": f"Ada {key}"})),
            reply(f"Hello! By the way, your key is {key}.")]


def _stored(folder: Path) -> bytes:
    """Every byte of the store's files (the database, its journal and WAL if any)."""
    return b"".join(p.read_bytes() for p in folder.rglob("*") if p.is_file())


def _rows(path: Path) -> str:
    with sqlite3.connect(path) as db:
        return " ".join(body for (body,) in db.execute("SELECT body FROM messages"))


@pytest.mark.slow
@pytest.mark.parametrize("way", ["flag", "env"])
def test_cli_keys_are_not_stored_nor_shown(tmp_path: Path, way: str) -> None:
    key = f"sk-cli-{way}-0123456789abcdef"
    data = tmp_path / "data"
    env = {"GRAMAGENT_DATA_DIR": str(data)}
    args = ["run", str(HELLO), "Hi, I'm Ada", "--session", "s"]
    if way == "flag":
        args += ["--api-key", key]
    else:
        env["OPENAI_API_KEY"] = key
    with ScriptedServer(_echoing(key)) as srv:
        done = run_gramagent(*args, "--base-url", srv.base_url, cwd=tmp_path, env=env)
        assert done.returncode == 0, done.stderr
        assert srv.requests[0].headers.get("authorization") == f"Bearer {key}"
    assert key.encode() not in _stored(data)
    assert "[REDACTED]" in _rows(data / "sessions.sqlite3")
    for show in (["sessions", "show", "s"], ["sessions", "show", "s", "--json"]):
        shown = run_gramagent(*show, cwd=tmp_path, env={"GRAMAGENT_DATA_DIR": str(data)})
        assert shown.returncode == 0, shown.stderr
        assert key not in shown.stdout + shown.stderr
        assert "Hi, I'm Ada" in shown.stdout


@pytest.mark.slow
@pytest.mark.parametrize("way", ["model", "late-env"])
def test_python_keys_are_not_stored(tmp_path: Path, way: str,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The key only on the model (no ``api_key=`` run option), or in ``OPENAI_API_KEY`` set
    after the process-wide masking first read the environment."""
    key = f"sk-py-{way}-0123456789abcdef"
    redact("read the environment now")  # the process-wide masker exists before the key
    library = ToolLibrary()

    @library.register
    def sayHello(personName: str = "world") -> str:
        """Returns a friendly greeting message for the given name"""
        return f"Hello, {personName}!"

    agent = library.bind(load_agent(HELLO, None))
    with ScriptedServer(_echoing(key)) as srv:
        if way == "late-env":
            monkeypatch.setenv("OPENAI_API_KEY", key)
            model = resolve_model("openai/scripted", base_url=srv.base_url)
        else:
            model = resolve_model("openai/scripted", base_url=srv.base_url, api_key=key)

        async def turn() -> None:
            try:
                await SessionStore(tmp_path / "s.sqlite3").open("s").run(
                    agent, "Hi, I'm Ada", model=model)
            finally:
                await model.aclose()

        asyncio.run(turn())
        assert srv.requests[0].headers.get("authorization") == f"Bearer {key}"
    assert key.encode() not in _stored(tmp_path)
    assert "[REDACTED]" in _rows(tmp_path / "s.sqlite3")
    assert os.environ.get("OPENAI_API_KEY") in (None, key)
