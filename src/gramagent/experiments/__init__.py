"""A/B experiments: run one agent over a dataset with several variants and compare them.

An experiment is data: the agent spec (fixed), cases (JSONL, CSV or Parquet), two or more
variants (tool library, model, api, instruction, limits, tool-call mode), evaluators and
repeats. Declare it in a gram file (:func:`load_experiment`, ``docs/experiments.md``) or in
Python::

    from gramagent.experiments import (Experiment, EvaluatorSpec, Variant, load_cases,
                                       run_experiment_sync, report)

    experiment = Experiment(
        name="greetings", agent=load_agent("hello.gram"), dataset=load_cases("cases.jsonl"),
        variants=[Variant(name="A", library="ab_tools:library_a"),
                  Variant(name="B", library="ab_tools:library_b")],
        evaluators=[EvaluatorSpec(name="greets", kind="contains")],
    )
    summary = run_experiment_sync(experiment)
    print(report(summary.store).to_text())

Results go to a crash-safe SQLite store, written as each run ends; running again resumes.
Reports compare each variant with the baseline on paired runs (same case, same repeat).

Engines execute the runs: :class:`AsyncioEngine` (default) in this process, :class:`RayEngine`
on the actors of a Ray cluster (``pip install "gramagent[ray]"``, ``docs/scaling.md``). A
third-party engine implements :class:`Engine` with :class:`CaseRunner` (an experiment made
ready to run in one process) and :func:`run_pool`; the runner stays the store's one writer.
"""

from __future__ import annotations

import asyncio
from typing import Any

from gramagent.experiments._cases import Case, Dataset, load_cases
from gramagent.experiments._engine import (
    AsyncioEngine,
    CaseRunner,
    Engine,
    ModelFactory,
    RateLimited,
    resolve_arm_model,
    run_case,
    run_pool,
)
from gramagent.experiments._evaluators import EvaluatorSpec
from gramagent.experiments._experiment import Experiment
from gramagent.experiments._gramfile import load_experiment
from gramagent.experiments._html import html_report, write_html
from gramagent.experiments._metrics import ExperimentMetrics
from gramagent.experiments._plan import Plan, plan_cases, plan_from_store
from gramagent.experiments._ray import RayEngine, RayStats, ServerInfo, WorkerInfo
from gramagent.experiments._records import EvalResult, RunKey, RunRecord, ToolRecord
from gramagent.experiments._render import render_report
from gramagent.experiments._report import (
    Comparison,
    Disagreement,
    MetricSummary,
    Report,
    VariantSummary,
    report,
)
from gramagent.experiments._runner import RunSummary, Started, run_experiment, store_path
from gramagent.experiments._store import Store
from gramagent.experiments._variants import Arm, ModelKey, Variant

__all__ = [
    "Arm",
    "AsyncioEngine",
    "Case",
    "CaseRunner",
    "Comparison",
    "Dataset",
    "Disagreement",
    "Engine",
    "EvalResult",
    "EvaluatorSpec",
    "Experiment",
    "ExperimentMetrics",
    "MetricSummary",
    "ModelFactory",
    "ModelKey",
    "Plan",
    "RateLimited",
    "RayEngine",
    "RayStats",
    "Report",
    "RunKey",
    "RunRecord",
    "RunSummary",
    "ServerInfo",
    "Started",
    "Store",
    "ToolRecord",
    "Variant",
    "VariantSummary",
    "WorkerInfo",
    "html_report",
    "load_cases",
    "load_experiment",
    "plan_cases",
    "plan_from_store",
    "render_report",
    "report",
    "resolve_arm_model",
    "run_case",
    "run_experiment",
    "run_experiment_sync",
    "run_pool",
    "store_path",
    "write_html",
]


def run_experiment_sync(experiment: Experiment, **options: Any) -> RunSummary:
    """:func:`run_experiment` for code without an event loop."""
    return asyncio.run(run_experiment(experiment, **options))
