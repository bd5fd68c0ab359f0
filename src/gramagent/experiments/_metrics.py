"""Prometheus metrics of experiments, labelled by experiment and variant.

The tool-call families of the ADR (``tool_calls_total{tool,status}``,
``tool_call_latency_ms{tool}``, :class:`~gramagent.ToolMetrics`) stay as they
are; experiments add their own families, so two arms in one process are told apart:

- ``experiment_runs_total{experiment,variant,stop}``: finished runs by how they stopped
- ``experiment_run_latency_ms{experiment,variant}``: wall time of runs
- ``experiment_tokens_total{experiment,variant}``: tokens spent
- ``experiment_evaluations_total{experiment,variant,evaluator,result}``: pass/fail verdicts
  (``result`` is ``pass``, ``fail`` or ``scored``)
- ``experiment_tool_calls_total{experiment,variant,tool,status}``: tool calls, from the
  events the engine stamps with experiment and variant

Label values are bounded: experiment, variant and evaluator names come from the experiment
file, tools from the agent's spec (the events name a tool the model invented
:data:`~gramagent._runtime.events.UNKNOWN_TOOL_LABEL`, ``<unknown>``), ``stop`` from a fixed
set plus error type names.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from gramagent._runtime.events import LATENCY_BUCKETS_MS, Event, per_registry
from gramagent.experiments._records import RunRecord

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

__all__ = ["ExperimentMetrics"]

_instances: weakref.WeakKeyDictionary[Any, ExperimentMetrics] = weakref.WeakKeyDictionary()


class ExperimentMetrics:
    """The experiment families of one registry; also an event sink for tool calls.

    Build with :meth:`for_registry` (Prometheus refuses a name twice in one registry).
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        from prometheus_client import REGISTRY, Counter, Histogram

        self.registry = REGISTRY if registry is None else registry
        arm = ["experiment", "variant"]
        self.runs = Counter("experiment_runs_total", "Finished experiment runs.",
                            [*arm, "stop"], registry=self.registry)
        self.latency = Histogram("experiment_run_latency_ms",
                                 "Wall time of experiment runs, in milliseconds.", arm,
                                 buckets=LATENCY_BUCKETS_MS, registry=self.registry)
        self.tokens = Counter("experiment_tokens_total", "Tokens spent by experiment runs.",
                              arm, registry=self.registry)
        self.evaluations = Counter("experiment_evaluations_total",
                                   "Evaluator verdicts on experiment runs.",
                                   [*arm, "evaluator", "result"], registry=self.registry)
        self.tool_calls = Counter("experiment_tool_calls_total",
                                  "Tool calls of experiment runs.", [*arm, "tool", "status"],
                                  registry=self.registry)

    @classmethod
    def for_registry(cls, registry: CollectorRegistry | None = None) -> ExperimentMetrics:
        """The instance of ``registry`` (default: the global one), made on first use."""
        return per_registry(cls, registry, _instances)

    def __call__(self, event: Event, /) -> None:
        """Count a stamped tool-call result (events of plain runs are ignored)."""
        if event.kind == "tool_call_result" and event.variant is not None:
            self.tool_calls.labels(event.experiment or "", event.variant, event.tool,
                                   event.status).inc()

    def observe(self, experiment: str, record: RunRecord) -> None:
        """Count one finished run."""
        variant = record.variant
        self.runs.labels(experiment, variant, record.stop).inc()
        self.latency.labels(experiment, variant).observe(record.wall_ms)
        self.tokens.labels(experiment, variant).inc(record.tokens)
        for result in record.evaluations:
            outcome = "scored" if result.passed is None else ("pass" if result.passed
                                                              else "fail")
            self.evaluations.labels(experiment, variant, result.name, outcome).inc()
