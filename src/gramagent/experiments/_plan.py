"""Plan an experiment before the money is spent: the cases a difference of interest needs.

- pass/fail (McNemar's test): Connor's (1987) formula, raised to the smallest n whose exact
  power (``_stats.mcnemar_power``, binomial sums) is enough, from the share of disagreeing pairs,
  given, or implied by a baseline rate when the variants fail independently
  (``p0 (1 - p1) + p1 (1 - p0)``, the most discordance two such rates allow without
  correlation);
- scores, latency, tokens (the paired test of a mean): the smallest n whose paired t test
  reaches the power, from the noncentral t distribution (``scipy.stats.nct``);
- repeats: ``r`` repeats of a case with intra-case correlation ``icc`` are worth
  ``r / (1 + (r - 1) icc)`` independent pairs (the design effect);
- a pilot: the same figures from an existing store (its discordance, spread and design
  effect per variant and metric);
- after a run, the report's ``detectable`` is the minimum detectable difference of what was
  run (at 80 % power; ``_stats.detectable_rate`` and ``_stats.detectable_mean``).
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass

from scipy import stats as scipy_stats

from gramagent.errors import ConfigurationError
from gramagent.experiments import _stats as stats
from gramagent.experiments._report import report

__all__ = ["Plan", "plan_cases", "plan_from_store"]

EXACT_UP_TO = 5000
"""Pairs up to which a rate plan checks Connor's figure by the exact power."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """How many cases a difference needs, and what that was computed from."""

    metric: str
    difference: float
    cases: int
    """Cases to run (each with ``repeats`` repeats per variant)."""
    repeats: int
    pairs: int
    """Independent pairs the test needs (cases times their worth)."""
    alpha: float
    power: float
    basis: str
    """What the figure rests on, in words (``discordant share 0.21``, ``sd 0.3``...)."""
    variant: str | None = None


def _check(difference: float, alpha: float, power: float, repeats: int, icc: float) -> None:
    if not (math.isfinite(difference) and difference != 0):
        raise ConfigurationError("the difference to detect must be a non-zero number")
    if not 0 < alpha < 1 or not 0 < power < 1:
        raise ConfigurationError("alpha and power must be between 0 and 1")
    if repeats < 1 or not 0 <= icc <= 1:
        raise ConfigurationError("repeats must be at least 1 and icc between 0 and 1")


def _cases(pairs: float, repeats: int, icc: float) -> int:
    """Cases that make ``pairs`` independent pairs at ``repeats`` with ``icc``."""
    return max(1, math.ceil(pairs * (1 + (repeats - 1) * icc) / repeats))


def plan_cases(difference: float, *, baseline_rate: float | None = None,
               discordant: float | None = None, sd: float | None = None,
               alpha: float = 0.05, power: float = stats.POWER, repeats: int = 1,
               icc: float = 0.0, metric: str = "pass rate") -> Plan:
    """Cases needed to detect ``difference`` (a rate difference, 0.1 for 10 points, with
    ``baseline_rate`` or ``discordant``; a mean difference with ``sd``, the standard deviation
    of the paired differences).

    Raises:
        ConfigurationError: neither a rate nor an sd is given, or a figure is out of range.
    """
    _check(difference, alpha, power, repeats, icc)
    if sd is not None:
        pairs = _pairs_for_mean(abs(difference), sd, alpha, power)
        basis = f"sd of the paired differences {sd:g}"
    else:
        if discordant is None:
            if baseline_rate is None or not 0 <= baseline_rate <= 1:
                raise ConfigurationError("give a baseline rate (0 to 1), a share of "
                                         "disagreeing pairs, or an sd")
            other = baseline_rate + difference
            if not 0 <= other <= 1:
                raise ConfigurationError(f"baseline rate {baseline_rate:g} plus the difference "
                                         f"{difference:+g} is not a rate")
            discordant = baseline_rate * (1 - other) + other * (1 - baseline_rate)
        if not abs(difference) <= discordant <= 1:
            raise ConfigurationError(f"a difference of {difference:+g} needs at least that "
                                     f"share of disagreeing pairs (got {discordant:g})")
        pairs = _pairs_for_rate(abs(difference), discordant, alpha, power)
        basis = f"share of disagreeing pairs {discordant:.3g}"
    if repeats > 1:
        basis += f", {repeats} repeats at intra-case correlation {icc:g}"
    return Plan(metric=metric, difference=difference, cases=_cases(pairs, repeats, icc),
                repeats=repeats, pairs=pairs, alpha=alpha, power=power, basis=basis)


def _pairs_for_rate(delta: float, discordant: float, alpha: float, power: float) -> int:
    """Connor's approximation, then up to the smallest n whose exact power is enough (Connor
    is a little optimistic for the exact test; beyond a few thousand pairs it is exact)."""
    needed = stats.pairs_needed_mcnemar((discordant - delta) / 2, (discordant + delta) / 2,
                                        1.0, alpha, power)
    n = stats.fewest_pairs(alpha) if needed is None else needed
    while n < EXACT_UP_TO and stats.mcnemar_power(n, discordant, delta, alpha) < power:
        n += 1
    return n


def _pairs_for_mean(delta: float, sd: float, alpha: float, power: float) -> int:
    if not sd > 0:
        return stats.fewest_pairs(alpha)
    effect = delta / sd
    z = scipy_stats.norm.ppf(1 - alpha / 2) + scipy_stats.norm.ppf(power)
    n = max(2, stats.fewest_pairs(alpha), math.ceil(float(z / effect) ** 2))
    while n < stats.MOST_PAIRS and stats.t_power(n, effect, alpha) < power:
        n += 1 if n < 10_000 else max(1, n // 1000)
    return min(n, stats.MOST_PAIRS)


def plan_from_store(path: str | os.PathLike[str], difference: float, *,
                    alpha: float | None = None, power: float = stats.POWER,
                    repeats: int | None = None, metric: str | None = None) -> list[Plan]:
    """Cases needed for ``difference`` per variant and metric, with an existing store as the
    pilot: its share of disagreeing pairs (pass/fail), the spread of its paired differences
    (scores, latency, tokens) and its design effect (with repeats).

    Raises:
        ExperimentError: the file is not an experiment store.
        ConfigurationError: ``metric`` is not one of the store's metrics.
    """
    pilot = report(path)
    alpha = pilot.alpha if alpha is None else alpha
    repeats = pilot.repeats if repeats is None else repeats
    rows = [c for c in pilot.comparisons if metric is None or c.metric == metric]
    if not rows:
        raise ConfigurationError(f"no comparison of metric {metric!r} in {path}")
    out = []
    for c in rows:
        if not c.pairs:
            continue
        icc = min(1.0, max(0.0, c.icc or 0.0))
        if c.is_rate:
            b, d = c.discordant or (0, 0)
            # no disagreeing pair in the pilot: one of each kind (Bonett-Price's adjustment)
            share = (b + d) / c.pairs if b + d else 2 / (c.pairs + 2)
            share = max(share, abs(difference))
            plan = plan_cases(difference, discordant=share, alpha=alpha, power=power,
                              repeats=repeats, icc=icc, metric=c.metric)
        else:
            plan = plan_cases(difference, sd=c.spread, alpha=alpha, power=power,
                              repeats=repeats, icc=icc, metric=c.metric)
        out.append(dataclasses.replace(plan, variant=c.variant))
    return out
