"""The engine seam: what executes an experiment's runs, behind one small interface.

An :class:`Engine` takes the experiment (data only: variants, libraries and evaluators are
named by import path) and the keys still to run, and yields one :class:`RunRecord` per
finished run. It never writes the store: the runner, the one writer, does. A
:class:`CaseRunner` is an experiment made ready to run in one process (arms bound,
evaluators built, one model adapter per distinct model); every engine runs its keys with
one. The in-process :class:`AsyncioEngine` runs keys on a pool of ``concurrency`` tasks
(:func:`run_pool`) sharing one runner (the embedded model gets as many llama.cpp parallel
slots, so concurrent runs are batched), optionally rate-limited per model. The Ray engine
(:mod:`gramagent.experiments._ray`) ships keys to workers that each build their own
:class:`CaseRunner`; a third-party engine does the same with the public names.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from gramagent import (
    Conversation,
    EventSink,
    GramagentError,
    LimitExceeded,
    Model,
    ModelRequest,
    ModelTurn,
    RunLimits,
    ToolResultMessage,
    resolve_model,
    run_agent,
)
from gramagent._install import needs_extra
from gramagent._runtime.events import fan_out, tag_events
from gramagent.errors import ConfigurationError
from gramagent.experiments._cases import Case
from gramagent.experiments._evaluators import Evaluator, build_evaluators, evaluate
from gramagent.experiments._experiment import Experiment
from gramagent.experiments._records import RunKey, RunRecord, ToolRecord
from gramagent.experiments._variants import Arm, ModelKey, prepare

__all__ = ["LOCAL_SLOTS", "AsyncioEngine", "CaseRunner", "Engine", "ModelFactory", "RateLimited",
           "cancel_all", "queued_batches", "resolve_arm_model", "run_case", "run_pool"]

LOCAL_SLOTS = 4
"""Most llama.cpp parallel slots the embedded model is started with (each takes a share of
the context; more slots than cores only queue)."""


class Engine(Protocol):
    """Runs keys of an experiment and yields each finished run.

    Write one to run an experiment's keys elsewhere (a pool, a cluster): take the keys, run
    each with a :class:`CaseRunner` (or :func:`run_case`) where the work happens, and yield
    the :class:`RunRecord` of each as it finishes. The runner (:func:`run_experiment`) is the
    one writer of the store: it saves what the engine yields, shows progress and resumes.
    """

    def run(self, experiment: Experiment, keys: Sequence[RunKey]
            ) -> AsyncGenerator[list[RunRecord], None]:
        """Yield finished runs, in completion order, in batches of those that finished while
        the consumer was busy (so the store commits them together); one record per key.
        Closing the iterator (or cancelling its consumer) stops the runs in flight. A record
        yielded twice for one key (a distributed engine delivers at least once) is stored
        once: the first stands."""
        ...


ModelFactory = Callable[[ModelKey, "float | None"], Model]
"""Makes the model adapter of a :class:`ModelKey`, given the experiment's rate limit of that
model (requests per second, or None)."""


def resolve_arm_model(key: ModelKey, *, local_slots: int = LOCAL_SLOTS,
                      options: Mapping[str, Any] | None = None) -> Model:
    """The model adapter variants with ``key`` run on (no rate limit): ``key.ref`` resolved
    with its api, base URL and tool-call mode; an embedded (``local/...``) model gets
    ``local_slots`` parallel slots. ``options`` go to every adapter (e.g. ``max_retries``)."""
    extra: dict[str, Any] = dict(options or {})
    if key.tool_call_mode is not None:
        extra["tool_call_mode"] = key.tool_call_mode
    if key.ref.startswith("local/") and key.base_url is None:
        extra["parallel"] = local_slots
    return resolve_model(key.ref, api=key.api, base_url=key.base_url, **extra)


class CaseRunner:
    """An experiment made ready to run its keys in this process: every variant bound to its
    tool library (by import path), the evaluators built, one model adapter per distinct model.

    What every engine runs keys with: the in-process :class:`AsyncioEngine`, each worker of
    the Ray engine, a third-party engine. Runs may overlap (it is safe to call :meth:`run`
    from many tasks of one event loop)::

        async with CaseRunner(experiment) as runner:
            record = await runner.run(key)

    Args:
        experiment: what to run (its libraries, evaluators and models are rebuilt here).
        events: sinks receiving every tool-call event, stamped with experiment and variant.
        models: makes each model adapter; default :func:`resolve_arm_model` with
            ``local_slots`` and ``model_options``, spaced by a :class:`RateLimited` where the
            experiment limits that model's rate.
        local_slots: parallel slots of an embedded (``local/...``) model.
        model_options: extra options of every model adapter (default factory only).

    Raises (on entering):
        ConfigurationError: a variant, library or evaluator cannot be loaded.
        ToolError: a variant's library does not fit the agent's tool specs.
    """

    def __init__(self, experiment: Experiment, *,
                 events: EventSink | Iterable[EventSink] | None = None,
                 models: ModelFactory | None = None, local_slots: int = LOCAL_SLOTS,
                 model_options: Mapping[str, Any] | None = None) -> None:
        self.experiment = experiment
        self._sinks = fan_out(events)
        self._factory = models
        self._local_slots = local_slots
        self._model_options = dict(model_options or {})
        self.arms: dict[str, Arm] = {}
        self._models: dict[ModelKey, Model] = {}
        self._evaluators: list[Evaluator] = []
        self._tagged: dict[str, tuple[EventSink, ...]] = {}
        self._cases: dict[str, Case] = {}

    async def __aenter__(self) -> CaseRunner:
        experiment = self.experiment
        experiment.add_search_path()
        try:
            self.arms = {v.name: prepare(v, experiment.agent) for v in experiment.variants}
            self._evaluators = build_evaluators(experiment.evaluators,
                                                time_limit=experiment.evaluator_timeout)
            for arm in self.arms.values():
                if arm.model not in self._models:
                    self._models[arm.model] = self._make(
                        arm.model, experiment.rate_limits.get(arm.model.ref))
        except BaseException:
            await self.aclose()
            raise
        self._tagged = {name: (tag_events(self._sinks, experiment=experiment.name,
                                          variant=name),) if self._sinks else ()
                        for name in self.arms}
        self._cases = experiment.dataset.by_id()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _make(self, key: ModelKey, rate: float | None) -> Model:
        if self._factory is not None:
            return self._factory(key, rate)
        model = resolve_arm_model(key, local_slots=self._local_slots,
                                  options=self._model_options)
        return model if rate is None else RateLimited(model, rate)

    async def run(self, key: RunKey) -> RunRecord:
        """Run one key (never raises for a failed run: see :func:`run_case`).

        Raises:
            KeyError: the key's variant or case is not in the experiment.
        """
        arm = self.arms[key.variant]
        return await run_case(arm, self._models[arm.model], self._cases[key.case_id],
                              key.repeat, self._evaluators, self._tagged[key.variant])

    async def aclose(self) -> None:
        """Close the evaluators and model adapters (idempotent)."""
        evaluators, self._evaluators = self._evaluators, []
        models, self._models = self._models, {}
        for evaluator in evaluators:
            await evaluator.aclose()
        for model in models.values():
            await model.aclose()


class AsyncioEngine:
    """The in-process engine: ``concurrency`` worker tasks on the running event loop.

    Args:
        concurrency: runs in flight at once.
        events: sinks receiving every tool-call event, stamped with experiment and variant.
        local_slots: parallel slots of an embedded (``local/...``) model; default
            ``min(concurrency, LOCAL_SLOTS)``.
        model_options: extra options of every resolved model adapter (e.g. ``max_retries``).
    """

    def __init__(self, *, concurrency: int = 4,
                 events: EventSink | Iterable[EventSink] | None = None,
                 local_slots: int | None = None,
                 model_options: Mapping[str, Any] | None = None) -> None:
        if concurrency < 1:
            raise ConfigurationError("concurrency must be at least 1")
        self.concurrency = concurrency
        self.sinks = fan_out(events)
        self.local_slots = local_slots or min(concurrency, LOCAL_SLOTS)
        self.model_options = dict(model_options or {})

    async def run(self, experiment: Experiment, keys: Sequence[RunKey]
                  ) -> AsyncGenerator[list[RunRecord], None]:
        async with CaseRunner(experiment, events=self.sinks, local_slots=self.local_slots,
                              model_options=self.model_options) as runner:
            workers = min(self.concurrency, max(1, len(keys)))
            # closed before the runner: a consumer that stops early (a decided experiment,
            # Ctrl-C) cancels the runs in flight before their models are closed, so no run
            # opens a connection pool after that
            async with contextlib.aclosing(run_pool(runner, keys, workers)) as batches:
                async for batch in batches:
                    yield batch


async def run_pool(runner: CaseRunner, keys: Iterable[RunKey], concurrency: int
                   ) -> AsyncGenerator[list[RunRecord], None]:
    """Run ``keys`` on ``runner`` with ``concurrency`` tasks of this event loop, yielding the
    finished records in batches of those that finished while the consumer was busy. Closing
    the iterator cancels the runs in flight."""
    queue: asyncio.Queue[RunRecord | BaseException | None] = asyncio.Queue()
    pending = iter(keys)

    async def worker() -> None:
        try:
            for key in pending:
                queue.put_nowait(await runner.run(key))
        except BaseException as exc:  # delivered to the consumer, raised there
            queue.put_nowait(exc)
            raise
        finally:
            queue.put_nowait(None)

    workers = [asyncio.create_task(worker()) for _ in range(concurrency)]
    try:
        async for batch in queued_batches(queue, len(workers)):
            yield batch
    finally:
        await cancel_all(workers)


async def cancel_all(tasks: Iterable[asyncio.Task[Any]]) -> None:
    """Cancel ``tasks`` and wait for each to end (whatever it ends with)."""
    tasks = list(tasks)
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(BaseException):
            await task


async def queued_batches(queue: asyncio.Queue[RunRecord | BaseException | None], workers: int
                         ) -> AsyncGenerator[list[RunRecord], None]:
    """The records the workers put on ``queue``, grouped as they finished while the consumer
    was busy, until every worker has signed off (None); a worker's exception is raised."""
    running = workers
    while running:
        batch: list[RunRecord] = []
        item = await queue.get()
        while True:
            if item is None:
                running -= 1
            elif isinstance(item, BaseException):
                if not isinstance(item, asyncio.CancelledError):
                    raise item
            else:
                batch.append(item)
            if queue.empty():
                break
            item = queue.get_nowait()
        if batch:
            yield batch


class RateLimited:
    """A model whose requests are spaced to at most ``per_second`` (a leaky bucket)."""

    def __init__(self, model: Model, per_second: float) -> None:
        try:
            from aiolimiter import AsyncLimiter
        except ImportError:
            raise ConfigurationError(needs_extra("Rate limits", "experiments")) from None

        self.model = model
        # A bucket of one: requests are spaced evenly, never bursting past the rate.
        self._limiter = AsyncLimiter(1, 1.0 / per_second)

    async def request(self, request: ModelRequest) -> ModelTurn:
        async with self._limiter:
            pass
        return await self.model.request(request)

    async def aclose(self) -> None:
        await self.model.aclose()


async def run_case(arm: Arm, model: Model, case: Case, repeat: int,
                   evaluators: Sequence[Evaluator], sinks: tuple[EventSink, ...] = ()
                   ) -> RunRecord:
    """Run one case (every user message of it, in one conversation) on one arm, and score it.

    Never raises for a failed run: a limit or a model error is recorded as how the run
    stopped (the conversation so far is kept: its tool results are in the record).
    """
    started = time.time()
    clock = time.perf_counter()
    context: Conversation | None = None
    tools: list[ToolRecord] = []
    answer: str | None = None
    stop, error = "answer", None
    input_tokens = output_tokens = requests = 0
    estimated = False
    try:
        for message in case.inputs:
            limits = _turn_limits(arm.limits, time.perf_counter() - clock, context)
            try:
                response = await run_agent(
                    arm.bound, message, model=model, context=context, limits=limits,
                    events=sinks or None, settings=arm.settings or None)
            except LimitExceeded as exc:
                if limits is arm.limits or exc.limit != "wall_time":
                    raise
                raise _conversation_late(arm.limits, time.perf_counter() - clock,
                                         exc) from None
            context = response.context
            input_tokens += response.usage.input_tokens
            output_tokens += response.usage.output_tokens
            requests += response.usage.requests
            estimated = estimated or response.usage.estimated
            tools.extend(ToolRecord(
                name=i.name, status="ok" if i.error_type in (None, "repeated_call") else "error",
                error_type=i.error_type, latency_ms=i.latency * 1000.0, arguments=i.arguments)
                for i in response.tool_invocations)
            if response.paused:  # unattended: nobody can approve, so the case ends here
                answer, stop = None, "approval_required"
                error = ("tool calls wait for approval ("
                         + ", ".join(p.tool for p in response.pending_approvals)
                         + "), and an experiment has nobody to ask")
                break
            answer = response.content
            stop = response.stopped_by or "answer"
    except GramagentError as exc:
        answer = None
        stop = f"limit:{exc.limit}" if isinstance(exc, LimitExceeded) else (
            f"error:{type(exc).__name__}")
        error = str(exc)[:1000]
        usage = getattr(exc, "usage", None)
        if usage is not None:
            input_tokens += usage.input_tokens
            output_tokens += usage.output_tokens
            requests += usage.requests
            estimated = estimated or usage.estimated
        tools.extend(_tools_in(getattr(exc, "context", None), already=len(tools)))
    except Exception as exc:  # a bug below must cost one run, not the experiment
        answer, stop, error = None, f"error:{type(exc).__name__}", str(exc)[:1000]
    wall_ms = (time.perf_counter() - clock) * 1000.0
    record = RunRecord(
        variant=arm.name, case_id=case.id, repeat=repeat, answer=answer, stop=stop,
        error=error, tools=tuple(tools), input_tokens=input_tokens,
        output_tokens=output_tokens, requests=requests, wall_ms=wall_ms, started=started,
        estimated_tokens=estimated)
    if evaluators:
        # the record is not shared yet: completing it in place saves a copy per run
        object.__setattr__(record, "evaluations", await evaluate(evaluators, case, record))
    return record


def _turn_limits(limits: RunLimits, elapsed: float, context: Conversation | None
                 ) -> RunLimits:
    """The limits of a case's next turn, ``elapsed`` seconds into it: its ``wall_time`` cut
    to what ``max_conversation_time`` leaves.

    Raises:
        LimitExceeded: nothing is left (carrying ``context``, the conversation so far).
    """
    total = limits.max_conversation_time
    if total is None:
        return limits
    left = total - elapsed
    if left <= 0:
        raise _conversation_late(limits, elapsed, None, context)
    if limits.wall_time is not None and limits.wall_time <= left:
        return limits
    return dataclasses.replace(limits, wall_time=left)


def _conversation_late(limits: RunLimits, elapsed: float, cut: LimitExceeded | None,
                       context: Conversation | None = None) -> LimitExceeded:
    """The error of a case whose turns took longer than ``max_conversation_time`` together
    (``cut``: the error of the turn it cut short, whose conversation and usage it keeps)."""
    total = limits.max_conversation_time
    return LimitExceeded(
        f"run stopped: the turns of the conversation took longer than {total:g} s together "
        f"(limit max_conversation_time={total}, observed {round(elapsed, 3)})",
        limit="max_conversation_time", value=total, observed=round(elapsed, 3),
        context=cut.context if cut is not None else context,
        usage=cut.usage if cut is not None else None)


def _tools_in(context: Any, *, already: int) -> list[ToolRecord]:
    """Tool results of a stopped run's conversation (beyond the ``already`` recorded ones);
    their latency and error type are not known there."""
    if not isinstance(context, Conversation):
        return []
    results = [m for m in context.messages if isinstance(m, ToolResultMessage)]
    return [ToolRecord(name=m.name, status="error" if m.is_error else "ok",
                       error_type="unknown" if m.is_error else None, latency_ms=0.0)
            for m in results[already:]]
