"""The Ray engine against a real local Ray (``ray.init(num_cpus=2)``, started once for the
module): the same store as the local engine, a worker killed mid-experiment, a library the
workers cannot import, a rate limit shared by all workers, the CLI's ``--engine ray``.

Marked ``ray`` and ``slow``; skipped, naming the install command, without the ``ray`` extra.
"""

from __future__ import annotations

from extras import require

require("experiments")
require("ray")

import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray
from experiments_support import (
    AGENT_GRAM,
    greeter_script,
    stored_runs,
    write_cases,
    write_experiment,
)
from extras import needs
from test_engines import comparable

from gramagent._models.weights import WeightsVerificationError
from gramagent.errors import ConfigurationError, Diagnostic, ExperimentError
from gramagent.experiments import (
    AsyncioEngine,
    RayEngine,
    RunRecord,
    Store,
    load_experiment,
    run_experiment,
)
from gramagent.experiments._ray import _embedded_models, _node_error
from gramagent.testing import ScriptedServer, ScriptTurn, error

pytestmark = [pytest.mark.ray, pytest.mark.slow]

HERE = Path(__file__).parent
NAMES = [f"person{i}" for i in range(30)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One local Ray for the module; its job ships a directory holding ``ab_libs.py`` to
    the workers (the test experiments' own directories do not hold it)."""
    job = tmp_path_factory.mktemp("ray_job")
    shutil.copy(HERE / "ab_libs.py", job)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"working_dir": str(job),
                          "env_vars": {"AB_CALL_LOG": str(job / "calls.log")}})
    try:
        yield job
    finally:
        ray.shutdown()


def _calls(job: Path) -> int:
    try:
        return len((job / "calls.log").read_text().splitlines())
    except FileNotFoundError:
        return 0


def _slow(path: str, body: Any) -> ScriptTurn:
    return dataclasses.replace(greeter_script(path, body), delay=0.02)


async def test_ray_runs_fill_the_store_as_the_local_engine_does(
        cluster: Path, tmp_path: Path, greeter_server: ScriptedServer) -> None:
    path = write_experiment(tmp_path, names=NAMES, base_url=greeter_server.base_url,
                            repeats=2)
    experiment = load_experiment(path)
    engine = RayEngine(workers=2, concurrency=3, shard=10, chunk=5)
    summary = await run_experiment(experiment, engine=engine, store=tmp_path / "ray.sqlite")
    runs = len(NAMES) * 2 * 2
    assert (summary.ran, summary.duplicates, summary.total) == (runs, 0, runs)
    assert len({w.pid for w in engine.stats.workers}) == 2
    assert all(w.pid != os.getpid() for w in engine.stats.workers)
    # keys went out in shards and came back in chunks, not one call per run
    assert engine.stats.calls == runs // 10
    assert runs // 5 <= engine.stats.chunks < runs
    await run_experiment(experiment, engine=AsyncioEngine(concurrency=3),
                         store=tmp_path / "local.sqlite")
    assert comparable(tmp_path / "ray.sqlite") == comparable(tmp_path / "local.sqlite")
    # a second call resumes: nothing is missing, nothing runs
    again = await run_experiment(experiment, engine=engine, store=tmp_path / "ray.sqlite")
    assert (again.ran, again.skipped) == (0, runs)


async def test_a_worker_killed_mid_experiment_loses_no_key_and_stores_none_twice(
        cluster: Path, tmp_path: Path, greeter_server: ScriptedServer) -> None:
    with ScriptedServer(_slow, record=False) as slow:
        path = write_experiment(tmp_path, names=NAMES, base_url=slow.base_url, repeats=2)
        experiment = load_experiment(path)
        engine = RayEngine(workers=2, concurrency=4, shard=8, chunk=2)
        killed: list[int] = []
        before = _calls(cluster)

        def kill_one(record: RunRecord) -> None:
            if not killed and engine.stats.chunks >= 6:
                killed.append(engine.stats.workers[0].pid)
                os.kill(killed[0], signal.SIGKILL)

        summary = await run_experiment(experiment, engine=engine, on_record=kill_one,
                                       store=tmp_path / "ray.sqlite")
    runs = len(NAMES) * 2 * 2
    assert killed, "the experiment ended before a worker could be killed"
    assert engine.stats.lost >= 1 and engine.stats.resent >= 1
    assert summary.ran == runs
    with Store.read(tmp_path / "ray.sqlite") as db:
        keys = [r.key for r in db.records()]
    assert sorted(keys) == sorted(set(experiment.run_keys()))
    # the keys sent again ran a second time (a tool call each), and were stored once
    assert _calls(cluster) - before >= runs
    # the same experiment on the local engine, its server answering at once: the records
    # are equal up to timings
    path = write_experiment(tmp_path, names=NAMES, base_url=greeter_server.base_url,
                            repeats=2)
    await run_experiment(load_experiment(path), engine=AsyncioEngine(concurrency=4),
                         store=tmp_path / "local.sqlite")
    assert comparable(tmp_path / "ray.sqlite") == comparable(tmp_path / "local.sqlite")


async def test_a_library_the_workers_cannot_import_names_module_and_node(
        cluster: Path, tmp_path: Path, greeter_server: ScriptedServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    here_only = tmp_path / "driver_only"
    here_only.mkdir()
    shutil.copy(HERE / "ab_libs.py", here_only / "driver_only_libs.py")
    monkeypatch.syspath_prepend(str(here_only))  # importable here, not on the workers
    path = write_experiment(tmp_path, names=NAMES[:2], base_url=greeter_server.base_url,
                            variant_b="driver_only_libs:planted")
    with pytest.raises(ConfigurationError) as caught:
        await run_experiment(load_experiment(path), engine=RayEngine(workers=1),
                             store=tmp_path / "x.sqlite")
    message = str(caught.value)
    node = ray.util.get_node_ip_address()
    assert f"a Ray worker cannot prepare the experiment on node {node}" in message
    assert "cannot import 'driver_only_libs'" in message
    assert "No module named 'driver_only_libs'" in message


def test_an_address_that_does_not_answer_is_named_within_bounded_time(
        tmp_path: Path, greeter_server: ScriptedServer) -> None:
    """Through the CLI, in a process of its own (not connected to the module's Ray)."""
    path = write_experiment(tmp_path, names=NAMES[:2], base_url=greeter_server.base_url)
    (tmp_path / "ab_libs.py").write_bytes((HERE / "ab_libs.py").read_bytes())
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "gramagent", "experiment", "run", str(path), "--engine", "ray",
         "--ray-address", "127.0.0.1:9"], capture_output=True, text=True, timeout=120,
        env={**os.environ, "RAY_ADDRESS": ""})
    assert time.monotonic() - started < 60
    assert done.returncode != 0
    assert "Ray address '127.0.0.1:9' does not answer" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_cli_runs_an_experiment_on_a_cluster_by_address(
        cluster: Path, tmp_path: Path, greeter_server: ScriptedServer) -> None:
    """``--engine ray --ray-address`` from another process: its job ships the experiment's
    directory (``ab_libs.py`` beside the experiment file) to the workers."""
    path = write_experiment(tmp_path, names=NAMES[:6], base_url=greeter_server.base_url)
    (tmp_path / "ab_libs.py").write_bytes((HERE / "ab_libs.py").read_bytes())
    address = ray.get_runtime_context().gcs_address
    done = subprocess.run(
        [sys.executable, "-m", "gramagent", "experiment", "run", str(path), "--engine", "ray",
         "--ray-address", address, "--workers", "2", "--json"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={**os.environ, "RAY_ADDRESS": ""})
    assert done.returncode == 0, done.stderr
    assert f"connecting to Ray at {address}" in done.stderr
    assert "12 runs done, 0 already in" in done.stderr
    assert "ray: 2 workers on 1 node(s)" in done.stderr
    with Store.read(tmp_path / "greetings.sqlite") as db:
        assert len(db) == 12


async def test_a_rate_limit_holds_across_workers_and_a_429_lowers_it_for_all(
        cluster: Path, tmp_path: Path) -> None:
    times: list[float] = []
    refused: set[str] = set()
    lock = threading.Lock()

    def script(path: str, body: Any) -> ScriptTurn:
        # The first request of three different runs is refused as too many. (Refusing the
        # first three requests whatever they are could refuse one run's retries each time:
        # they skip the limiter, so they can come before the other runs' first requests, and
        # that run fails once its retries are spent.)
        with lock:
            first = body["messages"][-1]
            if first["role"] == "user" and len(refused) < 3 and first["content"] not in refused:
                refused.add(first["content"])
                return error(429, "slow down", retry_after=0.01)
            times.append(time.monotonic())
        return greeter_script(path, body)

    rate = 40.0
    with ScriptedServer(script, record=False) as server:
        path = write_experiment(tmp_path, names=NAMES[:15], base_url=server.base_url,
                                extra=f",\n  rate_limits: {{`openai/scripted`: {rate}}}")
        engine = RayEngine(workers=2, concurrency=4)
        summary = await run_experiment(load_experiment(path), engine=engine,
                                       store=tmp_path / "r.sqlite")
    assert summary.ran == 30
    assert engine.stats.throttled == {"openai/scripted": 3}
    assert len(refused) == 3
    assert len(times) == 30 * 2  # every run's two requests answered: each refusal retried once
    # the requests answered are spaced (the three retries skip the limiter): no second holds
    # more than the rate allows, and a loaded machine only spaces them more
    worst = max(sum(1 for t in times if start <= t < start + 1.0) for start in times)
    assert worst <= rate + 1 + 3


def test_ctrl_c_keeps_the_finished_runs_and_the_same_command_completes_the_store(
        cluster: Path, tmp_path: Path) -> None:
    """SIGINT to the CLI mid-run: the runs saved so far stay, no traceback, and running the
    same command again makes only the missing ones."""
    with ScriptedServer(_slow, record=False) as slow:
        path = write_experiment(tmp_path, names=NAMES, base_url=slow.base_url, repeats=2)
        (tmp_path / "ab_libs.py").write_bytes((HERE / "ab_libs.py").read_bytes())
        store = tmp_path / "greetings.sqlite"
        command = [sys.executable, "-m", "gramagent", "experiment", "run", str(path),
                   "--engine", "ray", "--ray-address", ray.get_runtime_context().gcs_address,
                   "--workers", "1", "--concurrency", "2", "--json"]
        env = {**os.environ, "RAY_ADDRESS": ""}
        child = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 180
            while stored_runs(store) < 10 and child.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
            assert child.poll() is None, "the run ended before it could be interrupted"
            child.send_signal(signal.SIGINT)
            _, stderr = child.communicate(timeout=120)
        finally:
            if child.poll() is None:
                child.kill()
        assert child.returncode == 130, stderr
        assert "Traceback" not in stderr
        saved = stored_runs(store)
        assert f"stopped: {saved} runs saved" in stderr
        again = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                               timeout=300)
    runs = len(NAMES) * 2 * 2
    assert again.returncode == 0, again.stderr
    assert f"{runs - saved} runs done, {saved} already in" in again.stderr
    assert stored_runs(store) == runs


def _llama_servers() -> set[int]:
    """The embedded llama.cpp servers running on this machine now (their processes)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"gramagent._models.local" in command:
                found.add(int(entry.name))
    return found


@pytest.mark.e2e
@needs("local")
async def test_the_embedded_model_is_one_llama_server_per_node_shared_by_its_workers(
        cluster: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two workers on the one node of the module's Ray, both variants on the embedded model:
    one llama.cpp server (one copy of the weights) answers both workers' runs."""
    monkeypatch.setenv("GRAMAGENT_LOCAL_THREADS", "1")  # reserved as 1 CPU of the node's 2
    (tmp_path / "greeter.gram").write_text(
        AGENT_GRAM.replace("openai/scripted", "local/qwen2.5-coder-0.5b"))
    names = [f"person{i}" for i in range(3)]
    write_cases(tmp_path / "cases.jsonl", names)
    path = tmp_path / "local.gram"
    path.write_text('''[local_greetings:Experiment {agent: "greeter.gram", cases: "cases.jsonl"} |
  [A:Variant {library: "ab_libs:polite"}],
  [B:Variant {library: "ab_libs:planted"}],
  [called:Evaluator {kind: "tool_called", tool: "sayHello"}]
]
''')
    experiment = load_experiment(path)
    assert _embedded_models(experiment) == ["local/qwen2.5-coder-0.5b"]
    before = _llama_servers()
    seen: set[int] = set()
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            seen.update(_llama_servers() - before)
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    engine = RayEngine(workers=2, concurrency=2, shard=1, chunk=1)
    try:
        summary = await run_experiment(experiment, engine=engine,
                                       store=tmp_path / "local.sqlite")
    finally:
        stop.set()
        watcher.join()
    assert summary.ran == len(names) * 2
    # both workers ran keys (one key per call, two calls in flight each), on one server
    assert len({w.pid for w in engine.stats.workers}) == 2
    assert len(seen) == 1, f"{len(seen)} llama.cpp servers for one node"
    assert [(s.model, s.threads) for s in engine.stats.servers] == [
        ("local/qwen2.5-coder-0.5b", 1)]
    assert seen == {engine.stats.servers[0].pid}
    with Store.read(tmp_path / "local.sqlite") as db:
        records = db.records()
    assert {r.stop for r in records} == {"answer"}, [r.error for r in records]
    assert all(r.requests >= 1 for r in records)
    # the server goes with the run (its actor killed, it sees its stdin close)
    deadline = time.monotonic() + 60
    while _llama_servers() & seen and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not (_llama_servers() & seen)


def _state(err: BaseException) -> tuple[Any, ...]:
    fields = ("what", "expected", "actual", "diagnostics")
    return type(err), str(err), {f: getattr(err, f) for f in fields if hasattr(err, f)}


@pytest.mark.parametrize("raised", [
    WeightsVerificationError("chunk p1 has 0 bytes, expected 9", what="p1", expected="9",
                             actual="0"),
    ExperimentError([Diagnostic("no such model", file="e.gram", line=2, column=5)]),
    ConfigurationError("the embedded model needs the local extra"),
], ids=lambda e: type(e).__name__)
def test_a_nodes_start_error_reaches_the_driver_as_itself(
        cluster: Path, raised: Exception) -> None:
    """What a node's embedded model raised as it started comes back through Ray with its
    type, message and fields (a WeightsVerificationError was rebuilt from its message alone,
    which its keyword-only fields made a TypeError)."""
    def start() -> None:
        raise raised

    with pytest.raises(ray.exceptions.RayTaskError) as caught:
        ray.get(ray.remote(start).remote())
    assert _state(_node_error(caught.value)) == _state(raised)


def test_any_other_start_error_is_an_experiment_error_naming_it(cluster: Path) -> None:
    def start() -> None:
        raise OSError("llama-server: no such file")

    with pytest.raises(ray.exceptions.RayTaskError) as caught:
        ray.get(ray.remote(start).remote())
    err = _node_error(caught.value)
    assert type(err) is ExperimentError
    assert str(err).startswith("the embedded model could not start on a Ray node: ")
    assert "llama-server: no such file" in str(err)
