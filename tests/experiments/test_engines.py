"""The public engine seam: an engine written only against ``gramagent.experiments``' public
names runs an experiment into the same store as the default engine (up to timings)."""

from __future__ import annotations

from extras import require

require("experiments")

import ast
import asyncio
import re
import sqlite3
import sys
from collections.abc import AsyncGenerator, Sequence
from pathlib import Path

import pytest
from experiments_support import write_experiment

from gramagent.errors import ConfigurationError, ExperimentError
from gramagent.experiments import (
    AsyncioEngine,
    CaseRunner,
    Engine,
    Experiment,
    RunKey,
    RunRecord,
    Store,
    load_experiment,
    run_experiment,
    run_pool,
)
from gramagent.testing import ScriptedServer

NAMES = [f"person{i}" for i in range(12)]


class OneAtATime:
    """A third-party engine: every key in turn on one CaseRunner, each record yielded alone."""

    def __init__(self) -> None:
        self.seen: list[RunKey] = []

    async def run(self, experiment: Experiment, keys: Sequence[RunKey]
                  ) -> AsyncGenerator[list[RunRecord], None]:
        async with CaseRunner(experiment) as runner:
            for key in keys:
                self.seen.append(key)
                yield [await runner.run(key)]


class TwoPools:
    """A third-party engine: two CaseRunners (as two workers would build), each with its own
    pool over half the keys, their batches merged as they come."""

    async def run(self, experiment: Experiment, keys: Sequence[RunKey]
                  ) -> AsyncGenerator[list[RunRecord], None]:
        queue: asyncio.Queue[list[RunRecord] | None] = asyncio.Queue()

        async def half(part: Sequence[RunKey]) -> None:
            try:
                async with CaseRunner(experiment) as runner:
                    async for batch in run_pool(runner, part, 2):
                        queue.put_nowait(batch)
            finally:
                queue.put_nowait(None)

        tasks = [asyncio.create_task(half(keys[0::2])), asyncio.create_task(half(keys[1::2]))]
        running = len(tasks)
        while running:
            batch = await queue.get()
            if batch is None:
                running -= 1
            else:
                yield batch
        for task in tasks:
            await task


def comparable(store: Path) -> list[tuple[object, ...]]:
    """The runs of a store without their timings."""
    with Store.read(store) as db:
        return [(r.variant, r.case_id, r.repeat, r.answer, r.stop, r.error, r.input_tokens,
                 r.output_tokens, r.requests,
                 tuple((t.name, t.status, t.error_type, t.arguments) for t in r.tools),
                 r.evaluations) for r in db.records()]


@pytest.mark.parametrize("engine", [OneAtATime, TwoPools])
async def test_an_engine_of_public_names_fills_the_store_as_the_default_one(
        tmp_path: Path, greeter_server: ScriptedServer, engine: type) -> None:
    path = write_experiment(tmp_path, names=NAMES, base_url=greeter_server.base_url,
                            repeats=2)
    experiment = load_experiment(path)
    custom: Engine = engine()
    summary = await run_experiment(experiment, store=tmp_path / "custom.sqlite",
                                   engine=custom)
    assert (summary.ran, summary.duplicates) == (len(NAMES) * 2 * 2, 0)
    await run_experiment(experiment, store=tmp_path / "local.sqlite",
                         engine=AsyncioEngine(concurrency=3))
    mine = comparable(tmp_path / "custom.sqlite")
    assert len(mine) == len(NAMES) * 2 * 2
    assert mine == comparable(tmp_path / "local.sqlite")
    assert any(r[3] == "Hi person0." for r in mine)  # variant B's planted difference


async def test_a_resumed_custom_engine_gets_only_the_missing_keys(
        tmp_path: Path, greeter_server: ScriptedServer) -> None:
    path = write_experiment(tmp_path, names=NAMES, base_url=greeter_server.base_url)
    experiment = load_experiment(path)
    await run_experiment(experiment, engine=AsyncioEngine(concurrency=2),
                         store=tmp_path / "s.sqlite")
    with sqlite3.connect(tmp_path / "s.sqlite") as db:
        db.execute("DELETE FROM runs WHERE case_id IN ('person3', 'person7')")
    engine = OneAtATime()
    summary = await run_experiment(experiment, engine=engine, store=tmp_path / "s.sqlite")
    assert sorted(engine.seen) == sorted(RunKey(v, c, 0) for v in "AB"
                                         for c in ("person3", "person7"))
    assert (summary.ran, summary.skipped) == (4, len(NAMES) * 2 - 4)


async def test_duplicate_records_of_a_key_are_stored_once_and_counted(
        tmp_path: Path, greeter_server: ScriptedServer) -> None:
    """At-least-once delivery: a record yielded twice changes nothing the second time."""

    class Twice:
        async def run(self, experiment: Experiment, keys: Sequence[RunKey]
                      ) -> AsyncGenerator[list[RunRecord], None]:
            async with CaseRunner(experiment) as runner:
                for key in keys:
                    record = await runner.run(key)
                    yield [record, record]
                    yield [record]

    path = write_experiment(tmp_path, names=NAMES[:3], base_url=greeter_server.base_url)
    summary = await run_experiment(load_experiment(path), engine=Twice(),
                                   store=tmp_path / "t.sqlite")
    assert (summary.ran, summary.duplicates) == (6, 12)
    with Store.read(tmp_path / "t.sqlite") as db:
        assert len(db) == 6


async def test_engines_by_name_and_the_experiment_files_engine_key(
        tmp_path: Path, greeter_server: ScriptedServer) -> None:
    path = write_experiment(tmp_path, names=NAMES[:2], base_url=greeter_server.base_url,
                            extra=',\n  engine: "local"')
    experiment = load_experiment(path)
    assert experiment.engine == "local"
    summary = await run_experiment(experiment)
    assert summary.ran == 4
    with pytest.raises(ConfigurationError, match="unknown engine 'spark'"):
        await run_experiment(experiment, engine="spark", store=tmp_path / "x.sqlite")
    path = write_experiment(tmp_path, names=NAMES[:2], base_url=greeter_server.base_url,
                            extra=',\n  engine: "spark"')
    with pytest.raises(ExperimentError, match="engine must be local or ray"):
        load_experiment(path)


def test_the_engines_here_import_only_public_names() -> None:
    """This module's engines use nothing private of gramagent (a third party could write
    them)."""
    tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
    private = [f"{node.module}: {alias.name}" for node in ast.walk(tree)
               if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                   "gramagent") for alias in node.names
               if any(part.startswith("_") for part in [*(node.module or "").split("."),
                                                        alias.name])]
    assert not private


async def test_the_ray_engine_without_ray_names_the_install_command(
        tmp_path: Path, greeter_server: ScriptedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray fails, as where it is missing
    path = write_experiment(tmp_path, names=NAMES[:2], base_url=greeter_server.base_url)
    with pytest.raises(ConfigurationError) as caught:
        await run_experiment(load_experiment(path), engine="ray")
    # the command for how gramagent is installed here: a checkout, pip install -e
    assert re.fullmatch(r"The Ray engine needs the 'ray' extra, which is not installed: "
                        r'pip install -e "\S+\[ray\]"', str(caught.value))
