"""Run an experiment into its store: check, resume, execute through an engine, write each run.

:func:`run_experiment` binds every variant first (a missing tool or a schema mismatch stops
everything before a single request), opens the store (refusing one that holds a different
experiment), works out the keys still missing and hands them to the engine. The runner is the
store's one writer: each record is committed as it arrives (runs that finished together
in one transaction), then passed to ``on_record``
(progress display) and to the metrics. Cancelling (Ctrl-C) stops the runs in flight; every
finished run is already saved, and the next call resumes with the rest.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from gramagent import EventSink
from gramagent._runtime.events import fan_out
from gramagent.errors import ConfigurationError
from gramagent.experiments._engine import AsyncioEngine, Engine
from gramagent.experiments._experiment import Experiment
from gramagent.experiments._metrics import ExperimentMetrics
from gramagent.experiments._ray import RayEngine
from gramagent.experiments._records import RunKey, RunRecord
from gramagent.experiments._sequential import Monitor
from gramagent.experiments._store import Store
from gramagent.experiments._variants import prepare

__all__ = ["ENGINES", "RunSummary", "Started", "named_engine", "run_experiment", "store_path"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Started:
    """What the runner knows once the store is open, before the first run."""

    store: str
    total: int
    """Keys of the whole experiment."""
    done: int
    """Keys already in the store (skipped)."""
    warnings: tuple[str, ...]
    """Binding warnings (differing descriptions), per variant."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSummary:
    """How a call of :func:`run_experiment` went."""

    store: str
    ran: int
    """Runs executed and saved by this call (not those another runner of the same store
    saved first)."""
    skipped: int
    """Keys already in the store when it started."""
    total: int
    warnings: tuple[str, ...] = ()
    duplicates: int = 0
    """Records the engine delivered for a key already stored (a distributed engine delivers
    at least once): not stored again, the first record of a key stands."""


def store_path(experiment: Experiment, store: str | os.PathLike[str] | None = None) -> str:
    """The store an experiment writes to: ``store``, else the experiment's own setting,
    else ``<name>.sqlite``; a relative path is in the working directory, as every file a
    command writes (not beside the experiment file: that may be an installed example, in
    site-packages)."""
    if store is not None:
        return str(store)
    return experiment.store if experiment.store is not None else f"{experiment.name}.sqlite"


async def run_experiment(
    experiment: Experiment,
    *,
    store: str | os.PathLike[str] | None = None,
    engine: Engine | str | None = None,
    concurrency: int = 4,
    events: EventSink | Iterable[EventSink] | None = None,
    metrics: ExperimentMetrics | None = None,
    on_start: Callable[[Started], None] | None = None,
    on_record: Callable[[RunRecord], None] | None = None,
    retry_errors: bool = False,
    stop_when_decided: bool | None = None,
) -> RunSummary:
    """Run every (variant, case, repeat) key of ``experiment`` not yet in its store.

    Args:
        experiment: what to run.
        store: the SQLite file (see :func:`store_path` for the default).
        engine: executes the runs: an :class:`Engine`, or by name ``local`` (an
            :class:`AsyncioEngine` with ``concurrency`` workers, sending tool-call events to
            ``events`` and ``metrics``) or ``ray`` (a :class:`RayEngine` with
            ``concurrency`` runs per worker); default the experiment's ``engine``, else
            ``local``.
        concurrency: runs in flight at once (for the default engine).
        events: sinks of tool-call events, stamped with experiment and variant.
        metrics: Prometheus families to count runs, verdicts and tool calls in.
        on_start: called once the store is open (total and skipped keys, warnings).
        on_record: called with each finished (and saved) run.
        retry_errors: run again the keys whose saved run ended on an error (``error:...``,
            e.g. the model server was down), replacing those runs.
        stop_when_decided: stop once the sequential test of the first evaluator decides
            every variant (default: the experiment's ``stop_when_decided``); the keys run
            case by case, and the store notes the stop (reports say so).

    Raises:
        ConfigurationError: a variant, library or evaluator cannot be loaded.
        ToolError: a variant's library does not fit the agent's tool specs (names, schemas).
        ExperimentError: the store holds a different experiment.
    """
    experiment.add_search_path()
    arms = [prepare(v, experiment.agent) for v in experiment.variants]
    warnings = tuple(f"variant {arm.name!r}: {w}" for arm in arms for w in arm.warnings)
    fingerprint = experiment.fingerprint({arm.name: arm.implementation for arm in arms})
    path = store_path(experiment, store)
    if engine is None or isinstance(engine, str):
        name = engine or experiment.engine or "local"
        # tool-call metrics come from the events of the runs, which only a local engine sees
        sinks = [*fan_out(events), *([metrics] if metrics is not None and name == "local"
                                     else [])]
        engine = named_engine(name, concurrency=concurrency, events=sinks or None)
    # an API key given to the engine's models is never stored (the store masks it)
    options = getattr(engine, "model_options", None) or {}
    with Store.create(path, fingerprint=fingerprint, settings=experiment.settings(),
                      cases=experiment.dataset.cases, secrets=[options.get("api_key")]) as db:
        if retry_errors:
            db.forget_errors()
        done = db.done()
        keys = [key for key in experiment.run_keys() if key not in done]
        total = len(done) + len(keys)
        if on_start is not None:
            on_start(Started(store=path, total=total, done=len(done), warnings=warnings))
        ran = delivered = 0
        monitor = None
        if experiment.stop_when_decided if stop_when_decided is None else stop_when_decided:
            monitor, keys = _sequential(experiment, db, keys)
        else:
            db.set_stop_note(None)
        if keys:
            async with contextlib.aclosing(engine.run(experiment, keys)) as batches:
                async for batch in batches:
                    ran += db.write(batch)
                    delivered += len(batch)
                    for record in batch:
                        if metrics is not None:
                            metrics.observe(experiment.name, record)
                        if on_record is not None:
                            on_record(record)
                    if monitor is not None:
                        monitor.feed(batch)
                        if monitor.decided():
                            db.set_stop_note(monitor.info(total - len(db.done())).to_dict())
                            break
    return RunSummary(store=path, ran=ran, skipped=len(done), total=total, warnings=warnings,
                      duplicates=delivered - ran)



ENGINES = ("local", "ray")
"""The engines :func:`run_experiment` knows by name."""


def named_engine(name: str, *, concurrency: int = 4,
                 events: EventSink | Iterable[EventSink] | None = None) -> Engine:
    """The engine called ``name``: ``local`` (an :class:`AsyncioEngine`) or ``ray`` (a
    :class:`RayEngine` on the Ray this process is connected to, else a local one).

    Raises:
        ConfigurationError: an unknown name.
    """
    if name == "local":
        return AsyncioEngine(concurrency=concurrency, events=events)
    if name == "ray":
        if events is not None:
            raise ConfigurationError("the Ray engine sends no tool-call events to this "
                                     "process (its runs happen in the workers)")
        return RayEngine(concurrency=concurrency)
    raise ConfigurationError(f"unknown engine {name!r} (expected {' or '.join(ENGINES)})")


def _sequential(experiment: Experiment, db: Store, keys: list[RunKey]
                ) -> tuple[Monitor | None, list[RunKey]]:
    """The sequential monitor, fed with the runs already saved, and the keys to run case by
    case (so cases complete in dataset order); no keys left when it is already decided."""
    if not experiment.evaluators:
        return None, keys
    cases = [case.id for case in experiment.dataset.cases]
    monitor = Monitor(metric=experiment.evaluators[0].name, baseline=experiment.baseline_name,
                      variants=[v.name for v in experiment.variants], cases=cases,
                      repeats=experiment.repeats, alpha=experiment.alpha)
    monitor.feed(db.records())
    if monitor.decided():
        if db.stop_note() is None and keys:
            db.set_stop_note(monitor.info(len(keys)).to_dict())
        return monitor, []
    db.set_stop_note(None)
    order = {case: i for i, case in enumerate(cases)}
    variants = {v.name: i for i, v in enumerate(experiment.variants)}
    keys = sorted(keys, key=lambda k: (order[k.case_id], k.repeat, variants[k.variant]))
    return monitor, keys

