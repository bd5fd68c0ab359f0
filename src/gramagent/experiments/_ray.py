"""The Ray engine: an experiment's runs spread over the async actors of a Ray cluster.

The driver (the process that runs :func:`~gramagent.experiments.run_experiment`) stays the one
writer of the store. :class:`RayEngine` starts ``workers`` async actors; each rebuilds the
experiment's arms from their import paths (a :class:`~gramagent.experiments.CaseRunner`),
with the experiment's directory shipped to every node as the actor's ``runtime_env``
working directory, and runs keys on its own event loop, ``concurrency`` at a time. Keys go out
in shards (up to 200 per actor call, two calls in flight per actor so it never idles) and
finished records stream back in chunks of plain tuples (a Ray streaming generator) as they
finish, so Ray's
per-call cost is shared by many runs.

Faults: an actor whose process dies is restarted by Ray (``max_restarts``); the keys of its
shards that had not come back are put in front of the queue, so the other actors pick them
up while it restarts. Ray delivers at least once: a key may be run twice (its first run was
lost with the worker, or its record comes twice); the store's key keeps the first record, and
:attr:`RayEngine.stats` counts the keys sent again.

The embedded model (``local/...`` without a base URL): one llama.cpp server per node, in a
:class:`_NodeServer` actor that reserves the server's threads as the node's Ray resource
``CPU`` (the workers of such an experiment reserve none: they mostly wait for it); the node's
workers find it by name and send their requests to it, so the weights are loaded once per
node, not once per worker.

Rate limits hold across actors: one :class:`_Limiter` actor per limited model hands out
leases of request slots in blocks (the slots of all leases evenly spaced at the rate), and a
429 from the server, reported by any actor, halves that model's rate for all (it climbs back
while no 429 comes).

Ray is imported only when a :class:`RayEngine` runs (the ``ray`` extra: from a clone,
``python3 -m pip install ".[ray]"``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import math
import os
import socket
import sys
import time
import uuid
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from gramagent import Model, ModelRequest, ModelTurn
from gramagent._install import needs_extra
from gramagent.errors import ConfigurationError, ExperimentError
from gramagent.experiments._engine import (
    LOCAL_SLOTS,
    CaseRunner,
    cancel_all,
    queued_batches,
    resolve_arm_model,
)
from gramagent.experiments._experiment import Experiment
from gramagent.experiments._records import EvalResult, RunKey, RunRecord, ToolRecord
from gramagent.experiments._variants import ModelKey

__all__ = ["RayEngine", "RayStats", "ServerInfo", "WorkerInfo"]

SHARD = 200
"""Most keys per actor call."""
CHUNK = 100
"""Most records per streamed chunk."""
LINGER = 0.2
"""Seconds an actor waits for more finished runs before sending a chunk that is not full."""
MAX_RESTARTS = 3
"""Times Ray restarts a worker whose process died, before it is given up."""
CLOSE_TIMEOUT = 5.0
"""Seconds the actors have to close their model connections at the end."""
CONNECT_TIMEOUT = 5.0
"""Seconds an address given with ``--ray-address`` has to answer."""
EXCLUDES = ("*.sqlite", "*.sqlite-wal", "*.sqlite-shm", ".git", "__pycache__", "*.gguf",
            ".venv", "node_modules")
"""What the experiment's directory ships without (stores, weights, caches)."""


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigurationError(needs_extra("The Ray engine", "ray")) from None
    return ray


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """Where one worker actor runs."""

    pid: int
    node: str
    """The node's IP address."""
    host: str
    node_id: str = ""
    """Ray's id of the node."""


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """One node's embedded llama.cpp server (shared by that node's workers)."""

    model: str
    node_id: str
    pid: int
    """The llama.cpp server's process (a child of its node's server actor)."""
    threads: int
    """Its threads, reserved on the node as Ray's ``CPU`` resource."""


@dataclass(slots=True)
class RayStats:
    """What a :meth:`RayEngine.run` did beside the runs."""

    workers: list[WorkerInfo] = field(default_factory=list)
    """The actors as they were first started (a restarted one gets a new process)."""
    calls: int = 0
    """Shards sent (actor calls)."""
    chunks: int = 0
    """Chunks of records received."""
    lost: int = 0
    """Actor calls that failed because their worker died."""
    resent: int = 0
    """Keys sent again after their worker died (each may have been run twice: a model call
    paid twice, one record stored)."""
    throttled: dict[str, int] = field(default_factory=dict)
    """Per rate-limited model, the 429 answers reported to its limiter."""
    servers: list[ServerInfo] = field(default_factory=list)
    """The embedded model's servers the driver started, one per node and model."""


class RayEngine:
    """Runs an experiment's keys on Ray actors; the driver writes the store.

    Args:
        address: the cluster (``auto``, ``HOST:PORT`` or ``ray://HOST:PORT``); None: use the
            Ray this process is connected to, else start a local one sized to this machine
            (without the dashboard), saying so.
        workers: actors to start; default one per CPU of the cluster.
        concurrency: runs in flight at once in each actor.
        shard: most keys per actor call.
        chunk: most records per chunk streamed back.
        runtime_env: the job's ``runtime_env`` when this engine starts or connects Ray
            (e.g. ``env_vars``, ``pip``); the experiment's directory is its ``working_dir``
            unless given here. A process already connected to Ray keeps its own (pass the
            directory to ``ray.init(runtime_env={"working_dir": ...})`` then).
        model_options: extra options of every model adapter (e.g. ``max_retries``).
        on_status: receives what the engine says it is doing (starting Ray, workers lost);
            default: printed to stderr.
    """

    def __init__(self, *, address: str | None = None, workers: int | None = None,
                 concurrency: int = 4, shard: int = SHARD, chunk: int = CHUNK,
                 runtime_env: Mapping[str, Any] | None = None,
                 model_options: Mapping[str, Any] | None = None,
                 on_status: Callable[[str], None] | None = None) -> None:
        for name, value in (("workers", workers), ("concurrency", concurrency),
                            ("shard", shard), ("chunk", chunk)):
            if value is not None and (isinstance(value, bool) or value < 1):
                raise ConfigurationError(f"{name} must be at least 1")
        self.address = address
        self.workers = workers
        self.concurrency = concurrency
        self.shard = shard
        self.chunk = chunk
        self.runtime_env = dict(runtime_env or {})
        self.model_options = dict(model_options or {})
        self.on_status = on_status or _to_stderr
        self.stats = RayStats()

    async def run(self, experiment: Experiment, keys: Sequence[RunKey]
                  ) -> AsyncGenerator[list[RunRecord], None]:
        ray = _ray()
        self.stats = RayStats()
        started_here = self._connect(ray, self._job_env(experiment))
        actors: list[Any] = []
        limiters: dict[str, Any] = {}
        servers: list[Any] = []
        try:
            limiters = {model: _limiter_class(ray).remote(rate)
                        for model, rate in experiment.rate_limits.items()}
            embedded = _embedded_models(experiment)
            places = {ref: _ServerPlace(f"gramagent-llama-{uuid.uuid4().hex[:12]}", ref,
                                        slots=LOCAL_SLOTS)
                      for ref in embedded}
            actors = self._start(ray, experiment, limiters, places)
            self.stats.workers = await _check_workers(ray, actors)
            servers = await self._start_servers(ray, places)
            shards = _Shards(keys, _shard_size(len(keys), len(actors), self.shard))
            queue: asyncio.Queue[RunRecord | BaseException | None] = asyncio.Queue()
            feeders = [asyncio.create_task(self._feed(ray, actor, shards, queue))
                       for actor in actors for _ in range(2)]
            try:
                async for batch in _gather(queue, len(feeders), shards, len(keys)):
                    yield batch
            finally:
                await cancel_all(feeders)
            for model, limiter in limiters.items():
                self.stats.throttled[model] = await limiter.throttles.remote()
        finally:
            await _close(ray, actors)
            for handle in [*actors, *limiters.values(), *servers]:
                with contextlib.suppress(Exception):
                    ray.kill(handle, no_restart=True)
            if started_here:
                ray.shutdown()

    def _job_env(self, experiment: Experiment) -> dict[str, Any]:
        """The job's ``runtime_env``: the caller's, with the experiment's directory as the
        working directory of every worker (its libraries and evaluators are found there)."""
        env = dict(self.runtime_env)
        if experiment.source is not None and "working_dir" not in env:
            env["working_dir"] = str(Path(experiment.source).resolve().parent)
            env["excludes"] = [*env.get("excludes", ()), *EXCLUDES]
        return env

    def _connect(self, ray: Any, env: Mapping[str, Any]) -> bool:
        """Connect to (or start) Ray with ``env`` as the job's runtime_env (Ray ships a local
        directory only for a whole job); whether this call did (and must shut it down). A
        process already connected keeps its job's runtime_env."""
        if ray.is_initialized():
            return False
        address = self.address or os.environ.get("RAY_ADDRESS") or None
        options = {"log_to_driver": False, "logging_level": "ERROR",
                   "runtime_env": dict(env) or None}
        if address is None:
            cpus = os.cpu_count() or 1
            self.on_status(f"starting a local Ray ({cpus} CPUs, no dashboard); this takes "
                           "some seconds (--ray-address to use a cluster)")
            ray.init(num_cpus=cpus, include_dashboard=False, **options)
            return True
        _probe(address)
        self.on_status(f"connecting to Ray at {address}")
        try:
            ray.init(address=address, **options)
        except (ConnectionError, TimeoutError, RuntimeError) as exc:
            raise ConfigurationError(
                f"Ray address {address!r}: cannot connect: {exc}. Is the cluster up "
                "(`ray status` on its head node; `ray start --head` starts one)?") from None
        return True

    def _start(self, ray: Any, experiment: Experiment, limiters: Mapping[str, Any],
               places: Mapping[str, _ServerPlace]) -> list[Any]:
        cpus = float(ray.cluster_resources().get("CPU", 1.0))
        count = self.workers or max(1, int(cpus))
        options: dict[str, Any] = {
            # with the embedded model the node's CPUs go to its server
            "num_cpus": 0.0 if places else min(1.0, cpus / count),
            "max_restarts": MAX_RESTARTS,
            "max_task_retries": 0, "max_concurrency": self.concurrency + 8,
            "scheduling_strategy": "SPREAD"}
        worker = _worker_class(ray).options(**options)
        return [worker.remote(experiment, concurrency=self.concurrency, chunk=self.chunk,
                              limiters=dict(limiters), model_options=self.model_options,
                              servers=dict(places))
                for _ in range(count)]

    async def _start_servers(self, ray: Any, places: Mapping[str, _ServerPlace]
                             ) -> list[Any]:
        """One embedded server per node of the workers and embedded model, started now
        (loading the weights takes seconds; a problem shows before any run)."""
        nodes = sorted({w.node_id for w in self.stats.workers})
        if not places:
            return []
        self.on_status(f"starting the embedded model on {len(nodes)} node(s), one llama.cpp "
                       "server each, shared by the node's workers")
        handles: list[Any] = []
        pending: list[tuple[str, str, int, Any]] = []
        for place in places.values():
            for node in nodes:
                handle, threads = place.actor(ray, node)
                handles.append(handle)
                pending.append((place.ref, node, threads, handle.address.remote()))
        try:
            for ref, node, threads, answer in pending:
                pid = (await answer)[2]
                self.stats.servers.append(ServerInfo(model=ref, node_id=node, pid=pid,
                                                     threads=threads))
        except ray.exceptions.RayTaskError as exc:
            for handle in handles:
                with contextlib.suppress(Exception):
                    ray.kill(handle, no_restart=True)
            raise _node_error(exc) from None
        return handles

    async def _feed(self, ray: Any, actor: Any, shards: _Shards,
                    queue: asyncio.Queue[RunRecord | BaseException | None]) -> None:
        """Send shards to one actor until none is left, putting their records on ``queue``;
        a shard whose worker died goes back (its missing keys) for any actor to take."""
        lost = ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError
        try:
            while (shard := await shards.take()) is not None:
                missing = dict.fromkeys(shard)
                self.stats.calls += 1
                try:
                    async for ref in actor.run_shard.options(
                            num_returns="streaming").remote(shard):
                        chunk: list[_Packed] = await ref
                        self.stats.chunks += 1
                        for packed in chunk:
                            record = _unpack(packed)
                            missing.pop(record.key, None)
                            queue.put_nowait(record)
                except lost:
                    self.stats.lost += 1
                    self.stats.resent += len(missing)
                    shards.back(missing)
                    self.on_status(f"a worker was lost; {len(missing)} of its keys go to "
                                   "the other workers")
                    if not await _restarted(ray, actor):
                        return  # given up by Ray: the other actors finish
                    continue
                except ray.exceptions.RayTaskError as exc:
                    shards.back(())
                    raise ExperimentError(f"a Ray worker failed: {exc}") from None
                shards.back(missing)  # none, unless a worker skipped keys
        except BaseException as exc:  # delivered to the consumer, raised there
            queue.put_nowait(exc)
            raise
        finally:
            queue.put_nowait(None)


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _probe(address: str) -> None:
    """Fail within :data:`CONNECT_TIMEOUT` when nothing answers at ``address``."""
    if address == "auto" or address.startswith("local"):
        return
    parts = urlsplit(address if "://" in address else f"ray://{address}")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port = None, None
    if not host or port is None:
        raise ConfigurationError(f"Ray address {address!r}: expected auto, HOST:PORT or "
                                 "ray://HOST:PORT")
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT).close()
    except OSError as exc:
        reason = "no answer" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise ConfigurationError(
            f"Ray address {address!r} does not answer ({reason}, waited at most "
            f"{CONNECT_TIMEOUT:g} s): is the cluster up (`ray status` on its head node)?"
        ) from None


def _embedded_models(experiment: Experiment) -> list[str]:
    """The embedded (``local/...``, no base URL) models the experiment's variants run on."""
    refs = (v.model or str(experiment.agent.model) for v in experiment.variants
            if v.base_url is None)
    return sorted({ref for ref in refs if ref.startswith("local/")})


@dataclass(frozen=True, slots=True)
class _ServerPlace:
    """Where the workers find one embedded model's server on their node: the named actor
    ``{prefix}-{node id}``, made by the driver for the workers' nodes before any run, else by
    the first worker that needs it (one restarted on another node)."""

    prefix: str
    ref: str
    slots: int

    def actor(self, ray: Any, node_id: str) -> tuple[Any, int]:
        """The node's server actor (made now unless it exists) and its threads."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        threads = _server_threads(ray.nodes(), node_id)
        handle = _server_class(ray).options(
            name=f"{self.prefix}-{node_id}", get_if_exists=True, num_cpus=threads,
            max_concurrency=1000,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
        ).remote(self.ref, parallel=self.slots, threads=threads)
        return handle, threads


def _server_threads(nodes: list[dict[str, Any]], node_id: str) -> int:
    """Threads of a node's embedded server: ``$GRAMAGENT_LOCAL_THREADS``, else the node's
    CPUs (the server is what the node is for); never more than the node's CPUs, which Ray
    could never grant (the server's actor would wait for them forever).

    Args:
        nodes: what ``ray.nodes()`` returns.
        node_id: the node's id.
    """
    cpus = next((max(1, int(node.get("Resources", {}).get("CPU", 1))) for node in nodes
                 if node.get("NodeID") == node_id), 1)
    if env := os.environ.get("GRAMAGENT_LOCAL_THREADS"):
        with contextlib.suppress(ValueError):
            return min(cpus, max(1, int(env)))
    return cpus


def _shard_size(keys: int, actors: int, most: int) -> int:
    """Keys per call: at most ``most``, small enough that every actor gets two calls."""
    return max(1, min(most, math.ceil(keys / (2 * actors))))


async def _check_workers(ray: Any, actors: Sequence[Any]) -> list[WorkerInfo]:
    """Have every actor build its arms; the problems of those that cannot, in one error
    naming each worker's node (a library that imports here but not there)."""
    infos: list[WorkerInfo] = []
    problems: list[str] = []
    for reply in await asyncio.gather(*(actor.ready.remote() for actor in actors)):
        infos.append(WorkerInfo(pid=reply["pid"], node=reply["node"], host=reply["host"],
                                node_id=reply["node_id"]))
        if reply["problem"] is not None:
            problems.append(f"on node {reply['node']} ({reply['host']}): {reply['problem']}")
    if problems:
        unique = list(dict.fromkeys(problems))
        raise ConfigurationError("a Ray worker cannot prepare the experiment "
                                 + "; ".join(unique))
    return infos


async def _close(ray: Any, actors: Sequence[Any]) -> None:
    """Let the actors close their model connections (briefly: a dead one is not waited for)."""
    if actors:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.gather(*(a.close.remote() for a in actors),
                                                  return_exceptions=True), CLOSE_TIMEOUT)


async def _restarted(ray: Any, actor: Any) -> bool:
    """Wait for a restarted actor; False when Ray gave it up."""
    try:
        await actor.ready.remote()
    except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError):
        return False
    return True


class _Shards:
    """The keys still to send, taken in shards; a shard's missing keys come back in front.
    :meth:`take` waits while keys are out (they may come back) and gives None at the end."""

    def __init__(self, keys: Iterable[RunKey], size: int) -> None:
        self._keys = collections.deque(keys)
        self._size = size
        self._out = 0
        self._changed = asyncio.Event()

    async def take(self) -> list[RunKey] | None:
        while not self._keys:
            if self._out == 0:
                return None
            self._changed.clear()
            await self._changed.wait()
        size = min(self._size, len(self._keys))
        self._out += 1
        return [self._keys.popleft() for _ in range(size)]

    def back(self, missing: Iterable[RunKey]) -> None:
        """A shard ended; ``missing`` are its keys that gave no record."""
        self._keys.extendleft(reversed(list(missing)))
        self._out -= 1
        self._changed.set()

    @property
    def left(self) -> int:
        return len(self._keys)


async def _gather(queue: asyncio.Queue[RunRecord | BaseException | None], feeders: int,
                  shards: _Shards, expected: int) -> AsyncGenerator[list[RunRecord], None]:
    """The records on ``queue`` in batches until every feeder signed off; the first feeder
    error is raised. Keys no worker could run (every worker given up) are an error."""
    received: set[RunKey] = set()
    async for batch in queued_batches(queue, feeders):
        received.update(record.key for record in batch)
        yield batch
    if shards.left or len(received) < expected:
        raise ExperimentError(f"every Ray worker died; {expected - len(received)} runs were "
                              "not made (run the same command again to resume)")


# -- what runs in the actors --------------------------------------------------------------------


class _Worker:
    """One worker actor: the experiment's arms rebuilt here, ``concurrency`` runs at a time on
    its own event loop, records streamed back in chunks."""

    def __init__(self, experiment: Experiment, *, concurrency: int, chunk: int,
                 limiters: Mapping[str, Any], model_options: Mapping[str, Any],
                 servers: Mapping[str, _ServerPlace]) -> None:
        self.experiment = experiment
        self.servers = dict(servers)
        self.concurrency = concurrency
        self.chunk = chunk
        self.limiters = dict(limiters)
        self.model_options = dict(model_options)
        self.runner: CaseRunner | None = None
        self.problem: str | None = None
        self.keys: asyncio.Queue[tuple[RunKey, asyncio.Queue[Any]]] | None = None
        self.tasks: list[asyncio.Task[None]] = []
        self.lock: asyncio.Lock | None = None

    async def ready(self) -> dict[str, Any]:
        """Build the arms (once); where this worker runs, and what stops it, if anything."""
        ray = _ray()
        if self.lock is None:
            self.lock = asyncio.Lock()
        async with self.lock:
            if self.runner is None and self.problem is None:
                await self._prepare()
        return {"pid": os.getpid(), "node": ray.util.get_node_ip_address(),
                "node_id": ray.get_runtime_context().get_node_id(),
                "host": socket.gethostname(), "problem": self.problem}

    async def _prepare(self) -> None:
        runner = CaseRunner(self.experiment, models=self._model)
        try:
            await runner.__aenter__()
        except ConfigurationError as exc:
            self.problem = str(exc)
            return
        except Exception as exc:  # a ToolError, a library that fails on import here
            self.problem = f"{type(exc).__name__}: {exc}"
            return
        self.runner = runner
        self.keys = asyncio.Queue()
        self.tasks = [asyncio.create_task(self._work()) for _ in range(self.concurrency)]

    def _model(self, key: ModelKey, rate: float | None) -> Model:
        options = dict(self.model_options)
        limiter = self.limiters.get(key.ref) if rate is not None else None
        embedded = key.ref.startswith("local/") and key.base_url is None
        if limiter is not None and not embedded:
            options["on_exchange"] = _ThrottleReporter(limiter)
        if embedded and key.ref in self.servers:
            options["acquire"] = _NodeServerLookup(self.servers[key.ref])
        model = resolve_arm_model(key, local_slots=min(self.concurrency, LOCAL_SLOTS),
                                  options=options)
        return model if limiter is None else LeasedRate(model, limiter)

    async def _work(self) -> None:
        assert self.keys is not None and self.runner is not None
        while True:
            key, out = await self.keys.get()
            try:
                out.put_nowait(await self.runner.run(key))
            except Exception as exc:  # a bug below run_case: the driver raises it
                out.put_nowait(exc)

    async def close(self) -> None:
        """Stop the runs and close the model connections."""
        tasks, self.tasks = self.tasks, []
        await cancel_all(tasks)
        if self.runner is not None:
            await self.runner.aclose()

    async def run_shard(self, keys: list[RunKey]) -> AsyncGenerator[list[_Packed], None]:
        """Run ``keys``, yielding their records in chunks as they finish: a chunk waits
        :data:`LINGER` seconds for more records unless it is full at once."""
        await self.ready()
        if self.keys is None:
            raise ConfigurationError(self.problem or "the worker is not ready")
        out: asyncio.Queue[Any] = asyncio.Queue()
        for key in keys:
            self.keys.put_nowait((key, out))
        left = len(keys)
        while left:
            first = await out.get()
            size = min(self.chunk, left)
            if out.qsize() + 1 < size:
                await asyncio.sleep(LINGER)
            items = [first, *(out.get_nowait() for _ in range(min(size - 1, out.qsize())))]
            for item in items:
                if isinstance(item, Exception):
                    raise item
            left -= len(items)
            yield [_pack(item) for item in items]


_Packed = tuple[Any, ...]
"""A record as plain tuples (what crosses the network: cheaper to pickle than the classes)."""


def _pack(r: RunRecord) -> _Packed:
    return (r.variant, r.case_id, r.repeat, r.answer, r.stop, r.error,
            tuple((t.name, t.status, t.error_type, t.latency_ms, t.arguments) for t in r.tools),
            r.input_tokens, r.output_tokens, r.requests, r.wall_ms, r.started,
            tuple((e.name, e.score, e.passed, e.reason) for e in r.evaluations),
            int(r.estimated_tokens))


def _unpack(p: _Packed) -> RunRecord:
    (variant, case_id, repeat, answer, stop, error, tools, input_tokens, output_tokens,
     requests, wall_ms, started, evaluations, estimated) = p
    return RunRecord(
        variant=variant, case_id=case_id, repeat=repeat, answer=answer, stop=stop,
        error=error, input_tokens=input_tokens, output_tokens=output_tokens,
        requests=requests, wall_ms=wall_ms, started=started, estimated_tokens=bool(estimated),
        tools=tuple(ToolRecord(name=n, status=s, error_type=e, latency_ms=ms, arguments=a)
                    for n, s, e, ms, a in tools),
        evaluations=tuple(EvalResult(name=n, score=sc, passed=ok, reason=why)
                          for n, sc, ok, why in evaluations))


class _NodeServerLookup:
    """A worker's embedded model finds its node's server (the ``acquire`` of its
    :class:`~gramagent._models.local.LocalModel`; runs in a thread of the worker)."""

    def __init__(self, place: _ServerPlace) -> None:
        self.place = place

    def __call__(self) -> _NodeServerHandle:
        ray = _ray()
        handle, _ = self.place.actor(ray, ray.get_runtime_context().get_node_id())
        base_url, root_url, pid = ray.get(handle.address.remote())
        return _NodeServerHandle(base_url, root_url, pid)


@dataclass(frozen=True, slots=True)
class _NodeServerHandle:
    """The node's llama.cpp server as its workers see it (it runs on their node, so whether
    it is alive is whether its process is)."""

    base_url: str
    root_url: str
    pid: int

    @property
    def alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def exit_reason(self) -> str:
        return (f"it is not running (process {self.pid}, the llama.cpp server of this node's "
                "server actor)" if not self.alive else "it is still running")


class _NodeServer:
    """The actor holding one node's embedded llama.cpp server for the node's workers."""

    def __init__(self, ref: str, *, parallel: int, threads: int) -> None:
        self.model: Any = resolve_arm_model(  # a LocalModel: its server is what is shared
            ModelKey(ref, None, None, None), local_slots=parallel,
            options={"threads": threads, "progress": False})

    async def address(self) -> tuple[str, str, int]:
        """The server's base URL, root URL and process id (started on the first call)."""
        server = await self.model.start()
        return server.base_url, server.root_url, server.pid


class _ThrottleReporter:
    """An ``on_exchange`` hook telling the model's limiter of every 429 answer."""

    def __init__(self, limiter: Any) -> None:
        self.limiter = limiter

    def __call__(self, request: Mapping[str, Any], response: Any, status: int | None) -> None:
        if status == 429:
            self.limiter.throttled.remote()


class LeasedRate:
    """A model whose requests take slots leased from the cluster's limiter of that model.

    Slots are leased in blocks (one actor call per block); a block's slots are evenly spaced
    at the rate, and the limiter never hands out overlapping blocks, so all workers together
    stay at the rate."""

    def __init__(self, model: Model, limiter: Any) -> None:
        self.model = model
        self._limiter = limiter
        self._slots: collections.deque[float] = collections.deque()
        self._lock = asyncio.Lock()

    async def request(self, request: ModelRequest) -> ModelTurn:
        loop = asyncio.get_running_loop()
        async with self._lock:
            if not self._slots:
                delay, interval, count = await self._limiter.lease.remote()
                start = loop.time() + delay
                self._slots.extend(start + i * interval for i in range(count))
            slot = self._slots.popleft()
        wait = slot - loop.time()
        if wait > 0:
            await asyncio.sleep(wait)
        return await self.model.request(request)

    async def aclose(self) -> None:
        await self.model.aclose()


class _Limiter:
    """One model's rate across the cluster: leases of evenly spaced request slots.

    A 429 reported by any worker halves the rate (at most once per ``QUIET`` seconds: the
    429s of one burst count once; never below 1/64 of the limit); after ``QUIET`` seconds
    without one it climbs back by a quarter per lease, up to the limit."""

    BLOCK = 20
    """Most slots per lease."""
    SPAN = 0.05
    """Seconds of the rate one lease covers at most (a slow rate leases one slot at once)."""
    QUIET = 1.0

    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = rate
        self.rate = rate
        self.clock = clock
        self.next = clock()
        self.last_throttle = -math.inf
        self.count = 0

    def lease(self) -> tuple[float, float, int]:
        """(seconds until the first slot, seconds between slots, slots)."""
        now = self.clock()
        if self.rate < self.limit and now - self.last_throttle > self.QUIET:
            self.rate = min(self.limit, self.rate * 1.25)
        count = max(1, min(self.BLOCK, int(self.rate * self.SPAN)))
        interval = 1.0 / self.rate
        start = max(now, self.next)
        self.next = start + count * interval
        return start - now, interval, count

    def throttled(self) -> None:
        """A worker got a 429 from this model's server."""
        now = self.clock()
        self.count += 1
        if now - self.last_throttle > self.QUIET:
            self.rate = max(self.limit / 64, self.rate / 2)
        self.last_throttle = now

    def throttles(self) -> int:
        return self.count

    def current(self) -> float:
        return self.rate


_CLASSES: dict[str, Any] = {}


def _worker_class(ray: Any) -> Any:
    if "worker" not in _CLASSES:
        _CLASSES["worker"] = ray.remote(_Worker)
    return _CLASSES["worker"]


def _server_class(ray: Any) -> Any:
    if "server" not in _CLASSES:
        _CLASSES["server"] = ray.remote(_NodeServer)
    return _CLASSES["server"]


def _limiter_class(ray: Any) -> Any:
    if "limiter" not in _CLASSES:
        _CLASSES["limiter"] = ray.remote(num_cpus=0)(_Limiter)
    return _CLASSES["limiter"]


def _node_error(exc: BaseException) -> Exception:
    """What a failed start of a node's embedded model raises on the driver: a gramagent
    configuration or experiment error as itself (its type, message and fields, without the
    remote traceback), anything else as an ExperimentError naming it."""
    cause = getattr(exc, "cause", None) or exc
    if isinstance(cause, ConfigurationError | ExperimentError):
        return cause.with_traceback(None)
    return ExperimentError(f"the embedded model could not start on a Ray node: {cause}")
