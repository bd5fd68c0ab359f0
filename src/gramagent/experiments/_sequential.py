"""Early stopping with error rates that hold however often one looks: a mixture martingale.

Per case (in dataset order, once every repeat of every variant of it has run) the paired
difference ``d`` of the stop metric (the first evaluator, a score in [0, 1]; ``d`` in
[-1, 1], averaged over repeats) multiplies, for every bet ``lam`` in (-1, 1), a wealth
``prod(1 + lam * d)``. Under no difference (the variants' runs of a case exchangeable) each
factor has mean 1, so the wealth is a nonnegative martingale, and so is its average over a
fixed prior on ``lam`` (a discretised uniform prior on ``(1 + lam) / 2``; for pass/fail and
one repeat this is the Beta-binomial mixture SPRT of McNemar's discordant pairs). Ville's
inequality bounds the chance that it ever reaches ``1 / alpha`` by ``alpha``: the test may be
checked after every batch and stopped at the first crossing. ``1 / max wealth`` is an
always-valid p-value. With several variants, each is tested at ``alpha / (variants - 1)``
(Bonferroni), and the experiment stops when every one is decided.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import special
from scipy import stats as scipy_stats

from gramagent.experiments._records import RunRecord

__all__ = ["Monitor", "StopInfo", "log_wealth"]

_GRID = 64
_PRIOR = (np.arange(_GRID) + 0.5) / _GRID
"""Midpoints of equal bins of (0, 1): the bets are ``2 p - 1``, never -1 or 1."""
_BETS = 2 * _PRIOR - 1
_LOG_WEIGHTS = np.log(np.diff(scipy_stats.uniform.cdf(np.linspace(0, 1, _GRID + 1))))


def log_wealth(differences: np.ndarray) -> np.ndarray:
    """The log of the mixture wealth after each difference, along the last axis (any leading
    axes are independent sequences, e.g. simulated experiments)."""
    d = np.asarray(differences, dtype=float)[..., None]  # (..., n, 1) against the bets
    steps = np.cumsum(np.log1p(_BETS * d), axis=-2)  # (..., n, grid)
    result: np.ndarray = special.logsumexp(steps + _LOG_WEIGHTS, axis=-1)
    return result


@dataclass(frozen=True, slots=True, kw_only=True)
class StopInfo:
    """Why and when an experiment stopped before its end (kept in the store)."""

    metric: str
    cases_done: int
    """Cases complete (every repeat of every variant) when it stopped."""
    cases: int
    runs_not_run: int
    alpha: float
    p_values: Mapping[str, float] = field(default_factory=dict)
    """Always-valid p per variant against the baseline (``1 / max wealth``)."""
    at: float = 0.0
    """Unix time of the stop."""

    def to_dict(self) -> dict[str, object]:
        return {"metric": self.metric, "cases_done": self.cases_done, "cases": self.cases,
                "runs_not_run": self.runs_not_run, "alpha": self.alpha,
                "p_values": dict(self.p_values), "at": self.at}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> StopInfo:
        p_values = data.get("p_values")
        return cls(metric=str(data["metric"]), cases_done=_int(data["cases_done"]),
                   cases=_int(data["cases"]), runs_not_run=_int(data["runs_not_run"]),
                   alpha=float(str(data["alpha"])),
                   p_values={str(k): float(str(v)) for k, v in (
                       p_values.items() if isinstance(p_values, Mapping) else ())},
                   at=float(str(data.get("at", 0.0))))


def _int(value: object) -> int:
    return int(str(value))


class Monitor:
    """Feeds finished runs to the sequential test of each variant against the baseline."""

    def __init__(self, *, metric: str, baseline: str, variants: Sequence[str],
                 cases: Sequence[str], repeats: int, alpha: float) -> None:
        self.metric, self.baseline, self.repeats = metric, baseline, repeats
        self.others = [v for v in variants if v != baseline]
        self.variants = list(variants)
        self.cases = list(cases)
        self.threshold = math.log(max(1, len(self.others)) / alpha)
        self.alpha = alpha
        self._scores: dict[tuple[str, str, int], float] = {}
        self._done = 0  # cases of the dataset order already counted
        self._bets = {v: np.zeros(_GRID) for v in self.others}  # log wealth of each bet
        self._best = dict.fromkeys(self.others, 0.0)

    def feed(self, records: Iterable[RunRecord]) -> None:
        """Take the stop metric's score of each run (a run without it scores 0)."""
        for record in records:
            result = record.evaluation(self.metric)
            score = 0.0 if result is None else result.score
            self._scores[(record.variant, record.case_id, record.repeat)] = score

    def _complete(self, case: str) -> bool:
        return all((v, case, r) in self._scores for v in self.variants
                   for r in range(self.repeats))

    def decided(self) -> bool:
        """Count the newly complete cases (in dataset order); whether every variant's test
        has crossed its threshold."""
        while self._done < len(self.cases) and self._complete(self.cases[self._done]):
            case = self.cases[self._done]
            base = [self._scores[(self.baseline, case, r)] for r in range(self.repeats)]
            for variant in self.others:
                own = [self._scores[(variant, case, r)] for r in range(self.repeats)]
                d = float(np.mean(np.subtract(own, base)))
                self._bets[variant] += np.log1p(_BETS * d)
                wealth = float(special.logsumexp(self._bets[variant] + _LOG_WEIGHTS))
                self._best[variant] = max(self._best[variant], wealth)
            self._done += 1
        return bool(self.others) and all(self._best[v] >= self.threshold for v in self.others)

    def info(self, runs_not_run: int) -> StopInfo:
        """What the stop note of the store says."""
        return StopInfo(metric=self.metric, cases_done=self._done, cases=len(self.cases),
                        runs_not_run=runs_not_run, alpha=self.alpha,
                        p_values={v: min(1.0, math.exp(-self._best[v])) for v in self.others},
                        at=time.time())
