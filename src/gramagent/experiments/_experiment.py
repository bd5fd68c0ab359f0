"""An experiment as data: the agent (fixed), the cases, the variants, evaluators and repeats.

Built in Python or read from a gram file (:mod:`gramagent.experiments._gramfile`). Its
:meth:`Experiment.fingerprint` is what a store remembers, so that a changed agent, variant,
dataset or evaluator is noticed before anything runs under an existing store.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from gramagent import Agent, to_gram
from gramagent._limit_values import limit_problem
from gramagent._prices import price_problem
from gramagent.errors import ConfigurationError
from gramagent.experiments._cases import Dataset
from gramagent.experiments._evaluators import DEFAULT_TIME_LIMIT, EvaluatorSpec
from gramagent.experiments._imports import add_search_path
from gramagent.experiments._records import LATENCY, TOKENS, RunKey
from gramagent.experiments._variants import Variant

__all__ = ["Experiment", "canonical", "changes"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Experiment:
    """Everything that defines an experiment's runs (how fast they run is not part of it)."""

    name: str
    agent: Agent
    dataset: Dataset
    variants: tuple[Variant, ...]
    evaluators: tuple[EvaluatorSpec, ...] = ()
    repeats: int = 1
    baseline: str | None = None
    """The variant the others are compared with (default: the first)."""
    alpha: float = 0.05
    """Significance level of the verdicts (after Holm's correction)."""
    seed: int = 0
    """Seed of the bootstrap and permutation resampling (same store, same report)."""
    store: str | None = None
    """Where results go (default ``<name>.sqlite`` in the working directory)."""
    rate_limits: Mapping[str, float] = field(default_factory=dict)
    """Per model (``provider/name``), at most this many requests per second."""
    evaluator_timeout: float | None = DEFAULT_TIME_LIMIT
    """Seconds a custom or judge evaluator has for one run's verdict (None: no limit); past it
    that verdict fails, saying so."""
    stop_when_decided: bool = False
    """Stop as soon as the sequential test of the first evaluator decides every variant
    against the baseline (valid under continuous monitoring; see docs/experiments.md)."""
    prices: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    """Dollars per million input and output tokens, per model (``provider/name``): with a
    price for every variant's model, reports show cost per run and per passed run. Not part
    of the fingerprint: prices may change under a store."""
    source: str | None = None
    """The file it was read from, if any."""
    engine: str | None = None
    """The engine to run on when the caller names none: ``local`` or ``ray``."""

    def __post_init__(self) -> None:
        if not isinstance(self.variants, tuple):
            object.__setattr__(self, "variants", tuple(self.variants))
        if not isinstance(self.evaluators, tuple):
            object.__setattr__(self, "evaluators", tuple(self.evaluators))
        problems = self.problems()
        if problems:
            raise ConfigurationError("; ".join(problems))

    def problems(self) -> list[str]:
        out: list[str] = []
        names = [v.name for v in self.variants]
        if len(names) < 2:
            out.append(f"experiment {self.name!r} needs at least two variants")
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            out.append(f"duplicate variant {', '.join(map(repr, dupes))}")
        for variant in self.variants:
            out.extend(variant.problems())
        evaluator_names = [e.name for e in self.evaluators]
        dupes = sorted({n for n in evaluator_names if evaluator_names.count(n) > 1})
        if dupes:
            out.append(f"duplicate evaluator {', '.join(map(repr, dupes))}")
        out += [f"evaluator name {name!r} is the report's own metric of every run; call the "
                "evaluator something else" for name in evaluator_names if name in (LATENCY, TOKENS)]
        for spec in self.evaluators:
            out.extend(spec.problems())
        if self.baseline is not None and self.baseline not in names:
            out.append(f"baseline {self.baseline!r} is not a variant (variants: "
                       f"{', '.join(names)})")
        if isinstance(self.repeats, bool) or not isinstance(self.repeats, int) or (
                self.repeats < 1):
            out.append("repeats must be a positive integer")
        if not 0.0 < self.alpha < 1.0:
            out.append("alpha must be between 0 and 1")
        out += [problem for model, rate in self.rate_limits.items()
                if (problem := limit_problem(f"rate limit of {model!r}", rate, optional=False))]
        if problem := limit_problem("evaluator_timeout", self.evaluator_timeout):
            out.append(problem)
        if self.engine not in (None, "local", "ray"):
            out.append(f"engine must be local or ray, got {self.engine!r}")
        out += [f"price of {model!r}: {problem}" for model, price in self.prices.items()
                if (problem := price_problem(price))]
        used = sorted({v.model or str(self.agent.model) for v in self.variants})
        out += [f"rate limit of {model!r}: no variant uses that model (they use "
                f"{', '.join(used)}), so it would limit nothing"
                for model in self.rate_limits if model not in used]
        return out

    def add_search_path(self) -> None:
        """Make modules beside the experiment's file importable by their names."""
        if self.source is not None:
            add_search_path(Path(self.source).parent)

    @property
    def baseline_name(self) -> str:
        return self.baseline or self.variants[0].name

    def variant(self, name: str) -> Variant:
        for variant in self.variants:
            if variant.name == name:
                return variant
        raise KeyError(name)

    def run_keys(self) -> Iterator[RunKey]:
        """Every (variant, case, repeat) key, repeats outermost (so a stopped run has whole
        repeats of every variant), variants interleaved per case."""
        for repeat in range(self.repeats):
            for case in self.dataset.cases:
                for variant in self.variants:
                    yield RunKey(variant.name, case.id, repeat)

    def fingerprint(self, implementations: Mapping[str, str]) -> dict[str, Any]:
        """What must not change under an existing store: the agent, each variant (with a hash
        of its tools' source, ``implementations``), the dataset and the evaluators."""
        return {
            "experiment": self.name,
            "agent": _digest(to_gram(self.agent)),
            "dataset": self.dataset.fingerprint,
            "variants": {v.name: {**v.to_dict(), "implementation": implementations.get(v.name)}
                         for v in self.variants},
            "evaluators": [e.to_dict() for e in self.evaluators],
            "repeats": self.repeats,
        }

    def settings(self) -> dict[str, Any]:
        """What reports need beside the runs: baseline, alpha, seed, names in order."""
        return {"experiment": self.name, "baseline": self.baseline_name, "alpha": self.alpha,
                "seed": self.seed, "variants": [v.name for v in self.variants],
                "evaluators": [e.name for e in self.evaluators], "agent": self.agent.name,
                "cases": len(self.dataset), "repeats": self.repeats,
                "dataset": self.dataset.path,
                "models": {v.name: v.model or str(self.agent.model) for v in self.variants},
                "prices": {model: list(price) for model, price in self.prices.items()}}


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What differs between two fingerprints, in words."""
    out = []
    for key in ("experiment", "agent", "dataset", "repeats"):
        if old.get(key) != new.get(key):
            out.append(f"the {key} changed")
    old_v, new_v = old.get("variants", {}), new.get("variants", {})
    for name in sorted(set(old_v) | set(new_v)):
        if name not in new_v:
            out.append(f"variant {name!r} was removed")
        elif name not in old_v:
            out.append(f"variant {name!r} was added")
        elif old_v[name] != new_v[name]:
            fields = sorted(k for k in set(old_v[name]) | set(new_v[name])
                            if old_v[name].get(k) != new_v[name].get(k))
            out.append(f"variant {name!r} changed ({', '.join(fields)})")
    if old.get("evaluators") != new.get("evaluators"):
        out.append("the evaluators changed")
    return out


def canonical(value: Any) -> str:
    """Sorted-key JSON text (how fingerprints are stored and compared)."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()

