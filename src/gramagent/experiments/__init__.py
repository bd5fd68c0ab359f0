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
"""

from __future__ import annotations

import asyncio
from typing import Any

from gramagent.experiments.cases import Case, Dataset, load_cases
from gramagent.experiments.engine import AsyncioEngine, Engine, run_case
from gramagent.experiments.evaluators import EvaluatorSpec
from gramagent.experiments.experiment import Experiment
from gramagent.experiments.gramfile import load_experiment
from gramagent.experiments.metrics import ExperimentMetrics
from gramagent.experiments.records import EvalResult, RunKey, RunRecord, ToolRecord
from gramagent.experiments.report import Report, report
from gramagent.experiments.runner import RunSummary, Started, run_experiment, store_path
from gramagent.experiments.store import Store
from gramagent.experiments.variants import Variant

__all__ = [
    "AsyncioEngine",
    "Case",
    "Dataset",
    "Engine",
    "EvalResult",
    "EvaluatorSpec",
    "Experiment",
    "ExperimentMetrics",
    "Report",
    "RunKey",
    "RunRecord",
    "RunSummary",
    "Started",
    "Store",
    "ToolRecord",
    "Variant",
    "load_cases",
    "load_experiment",
    "report",
    "run_case",
    "run_experiment",
    "run_experiment_sync",
    "store_path",
]


def run_experiment_sync(experiment: Experiment, **options: Any) -> RunSummary:
    """:func:`run_experiment` for code without an event loop."""
    return asyncio.run(run_experiment(experiment, **options))
