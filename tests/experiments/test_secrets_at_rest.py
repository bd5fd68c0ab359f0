"""A model server that echoes the API key (in its answer, in a tool call's arguments, in an
argument's name) never gets the key into the experiment store or its exports: the store's
writer masks it, whatever the key looks like, given by ``OPENAI_API_KEY`` or to the engine."""

from __future__ import annotations

from extras import require

require("experiments")

import asyncio
import string
import tempfile
from pathlib import Path
from typing import Any

import pytest
from experiments_support import write_experiment
from hypothesis import given, settings
from hypothesis import strategies as st

from gramagent.experiments import (
    AsyncioEngine,
    EvalResult,
    RunRecord,
    Store,
    ToolRecord,
    load_experiment,
    run_experiment,
)
from gramagent.testing import ScriptedServer, ScriptTurn, call, reply

KEY_CHARACTERS = string.ascii_letters + string.digits + "-_.~+/=!#$%&*@^|\"\\"


def echoing(key: str) -> Any:
    """A server that calls sayHello with the key as the name, then answers with the tool's
    greeting and the key once more."""

    def script(path: str, body: Any) -> ScriptTurn:
        last = (body.get("messages") or [])[-1]
        if last.get("role") == "tool":
            return reply(f"{last.get('content')} (your key: {key})", usage=(20, 5))
        return call("sayHello", {"personName": key})

    return script


def _bytes_under(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in directory.iterdir() if p.is_file()
            and p.suffix in (".sqlite", ".csv", ".parquet", ".sqlite-wal", ".sqlite-shm")}


@pytest.mark.slow
@settings(max_examples=12, deadline=None)
@given(key=st.text(KEY_CHARACTERS, min_size=8, max_size=48),
       prefix=st.sampled_from(["", "sk-", "sk-proj-"]), by_env=st.booleans())
def test_an_echoed_key_is_in_no_stored_or_exported_byte(key: str, prefix: str,
                                                        by_env: bool) -> None:
    key = prefix + key
    with tempfile.TemporaryDirectory() as tmp, ScriptedServer(echoing(key)) as server, \
            pytest.MonkeyPatch.context() as env:
        directory = Path(tmp)
        env.chdir(directory)
        path = write_experiment(directory, names=["Ann", "Bob"], base_url=server.base_url,
                                variant_b="ab_libs:polite")
        experiment = load_experiment(path)
        if by_env:
            env.setenv("OPENAI_API_KEY", key)
            engine = AsyncioEngine()
        else:
            env.delenv("OPENAI_API_KEY", raising=False)
            engine = AsyncioEngine(model_options={"api_key": key})
        summary = asyncio.run(run_experiment(experiment, engine=engine))
        assert summary.ran == 4
        # the key went out and came back: the server saw it, and echoed it
        assert any(key in value for r in server.requests for value in r.headers.values())
        with Store.read(summary.store) as db:
            records = db.records()
            db.export(directory / "runs.csv")
            db.export(directory / "runs.parquet")
        assert all(r.answer is not None and "[REDACTED]" in r.answer for r in records)
        assert all(r.tools and r.tools[0].arguments == {"personName": "[REDACTED]"}
                   for r in records)
        files = _bytes_under(directory)
        assert {"greetings.sqlite", "runs.csv", "runs.parquet"} <= set(files)
        for name, data in files.items():
            assert key.encode() not in data, name


@settings(max_examples=40, deadline=None)
@given(key=st.text(KEY_CHARACTERS, min_size=8, max_size=48),
       around=st.text(max_size=5), deep=st.booleans())
def test_a_key_anywhere_in_a_run_is_masked_before_it_is_written(key: str, around: str,
                                                                deep: bool) -> None:
    """The answer, the error, tool arguments (values and names, nested) and an evaluator's
    reason: the store's file holds none of them with the key."""
    echoed = f"{around}{key}{around}"
    arguments: Any = {key: echoed, "list": [echoed, {"inner": echoed}]}
    if deep:
        arguments = {"a": [arguments]}
    run = RunRecord(variant="A", case_id="c", repeat=0, answer=echoed, stop="error:X",
                    error=f"server said {echoed}",
                    tools=(ToolRecord(name="t", status="ok", error_type=None, latency_ms=1.0,
                                      arguments=arguments),),
                    evaluations=(EvalResult(name="e", score=0.0, passed=False,
                                            reason=f"expected Hello, got {echoed}"),))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.sqlite"
        with Store.create(path, fingerprint={"e": 1}, settings={"baseline": "A"},
                          secrets=[key]) as db:
            db.write([run])
            db.export(Path(tmp) / "runs.csv")
        stored = Store.read(path)
        (back,) = stored.records()
        stored.close()
        for name, data in _bytes_under(Path(tmp)).items():
            assert key.encode() not in data, name
    assert back.answer is not None and "[REDACTED]" in back.answer
    assert "[REDACTED]" in str(back.tools[0].arguments)
