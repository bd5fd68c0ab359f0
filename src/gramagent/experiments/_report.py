"""The report of a store: per-variant figures, paired comparisons with the baseline, verdicts.

:func:`report` reads a store (or takes records) and computes, deterministically:

- per variant and evaluator: the pass rate with a Wilson interval, or the mean score with a
  bootstrap interval; latency and tokens with bootstrap intervals; tool errors; how runs
  stopped;
- a run that ended on an error (``error:...``, e.g. the model server's 500) fails every
  evaluator but has no cost to compare: latency and tokens leave it (and its pair) out, or a
  variant whose server fails fast would look cheaper;
- per variant against the baseline, on the runs paired by (case, repeat): per metric the mean
  difference with a paired bootstrap interval, the test's p-value (McNemar's exact test for
  pass/fail, the paired permutation test otherwise), Holm's adjusted p-value across the
  metrics of that comparison, and a one-line verdict;
- the disagreements: (case, repeat) pairs where an evaluator's verdict differs, with both
  answers.

The numbers come from :mod:`gramagent.experiments._stats`.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from gramagent._prices import Price, prices_from
from gramagent.experiments import _stats as stats
from gramagent.experiments._records import LATENCY, TOKENS, RunRecord
from gramagent.experiments._sequential import StopInfo
from gramagent.experiments._store import Store
from gramagent.experiments._table import RunTable

__all__ = ["COST", "LATENCY", "NO_PAIRS", "TOKENS", "Comparison", "Disagreement", "MetricSummary",
           "Report", "VariantSummary", "empty_metric", "report"]

COST = "cost_usd"
"""The report's metric of a run's cost in dollars (only when every variant's model has a
price)."""
_COSTS = (LATENCY, TOKENS, COST)
RATE_TESTS = ("mcnemar_exact", "clustered_sign_flip")
"""The tests of pass/fail metrics (their differences are rates: shown in points)."""
MAX_DISAGREEMENTS = 200


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricSummary:
    """One metric of one variant: a rate (pass/fail) or a mean, with its interval."""

    name: str
    kind: str
    """``rate`` or ``mean``."""
    value: float
    low: float
    high: float
    n: int
    passed: int | None = None
    """Passes, for a rate."""
    flip_rate: float | None = None
    """With repeats, for a rate: the share of cases that passed on one repeat and failed on
    another (0: the variant is consistent per case)."""
    flip_cases: int = 0
    """Cases with two repeats or more (the flip rate's denominator)."""


NO_PAIRS = "no pairs"
"""How a comparison without paired runs is shown in place of its difference."""


def empty_metric(runs: int) -> str:
    """How a metric without values is shown: the variant has no runs, or none of its runs
    counts (latency and tokens leave out runs that ended on an error)."""
    return "no runs" if runs == 0 else "none counted"


@dataclass(frozen=True, slots=True, kw_only=True)
class VariantSummary:
    name: str
    runs: int
    metrics: tuple[MetricSummary, ...]
    stops: Mapping[str, int]
    """How runs stopped (``answer``, ``limit:...``, ``error:...``) and how often."""
    tool_calls: int
    tool_errors: Mapping[str, int]
    """Failed tool calls by ``tool:error_type``."""
    latencies: tuple[float, ...] = field(repr=False, default=())
    tokens: tuple[int, ...] = field(repr=False, default=())
    model: str | None = None
    """The variant's model (``provider/name``), when the store knows it."""
    price: tuple[float, float] | None = None
    """Dollars per million input and output tokens of that model, when given."""
    cost_total: float | None = None
    """Dollars spent by all its runs (those that ended on an error too); None without a
    price."""
    cost_per_pass: float | None = None
    """Dollars spent per passed run of the first pass/fail evaluator (None without a price,
    such an evaluator, or a pass)."""
    estimated: int = 0
    """Runs whose tokens were (partly) estimated: their server reported no usage."""

    @property
    def errors(self) -> int:
        """How many runs ended on an error (``error:...``: left out of latency and tokens)."""
        return sum(n for stop, n in self.stops.items() if stop.startswith("error:"))


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    """One metric of one variant against the baseline, on paired runs."""

    variant: str
    metric: str
    test: str
    """``mcnemar_exact`` (pass/fail, one repeat), ``clustered_sign_flip`` (pass/fail with
    repeats: the sign-flip permutation test of the per-case differences, McNemar's test for
    clusters) or ``paired_permutation`` (over cases when there are repeats)."""
    pairs: int
    """Pairs compared (for latency and tokens, those where neither run ended on an error)."""
    baseline_mean: float
    variant_mean: float
    difference: float
    """Mean of (variant - baseline) over the pairs (a rate difference for pass/fail)."""
    low: float
    high: float
    """Interval of the difference (confidence 1 - alpha): Bonett-Price for pass rates, the
    paired bootstrap otherwise."""
    p_value: float
    p_adjusted: float
    """Holm-adjusted over the tested metrics of this variant's comparison."""
    tested: bool = True
    """False when every pair agrees on the metric (no test possible, p is 1): such a metric
    is left out of Holm's correction."""
    higher_is_better: bool
    verdict: str
    outcome: str
    """``better``, ``worse`` or ``no difference``."""
    discordant: tuple[int, int] | None = None
    """For pass/fail: (baseline only passed, variant only passed)."""
    pairs_needed: int | None = None
    """Pairs (case, repeat) a difference of the observed size would need at 80 % power;
    None when no difference was observed."""
    cases: int = 0
    """Cases the pairs cover (the unit of the statistics when ``repeats`` > 1)."""
    repeats: int = 1
    cases_needed: int | None = None
    """Cases (at this many repeats) a difference of the observed size would need at 80 %
    power; None when no difference was observed."""
    design_effect: float | None = None
    """With repeats: the variance of the mean difference over cases divided by what
    independent pairs would give (1: repeats as good as new cases; ``repeats``: worth one
    pair). None with one repeat, or when no pair differs."""
    icc: float | None = None
    """The intra-case correlation of the pairs' differences, from the design effect."""
    wins: int = 0
    ties: int = 0
    losses: int = 0
    """Cases where the variant did better, the same, worse than the baseline (the mean over
    its repeats; lower is better for latency and tokens)."""
    spread: float | None = None
    """Standard deviation of the pairs' differences (what a plan from this store as a pilot
    starts from)."""
    detectable: float | None = None
    """The minimum detectable difference of this comparison: the smallest difference its
    test would find with 80 % power at its number of cases (and their worth, with repeats),
    given the spread (or share of disagreeing pairs) observed. None when it cannot say."""
    wilcoxon_p: float | None = None
    """For scores, latency and tokens: the Wilcoxon signed-rank test's p (over cases), a
    check beside the permutation test (not Holm-adjusted, not used in the verdict)."""

    @property
    def is_rate(self) -> bool:
        """Whether the metric is pass/fail (its difference is a rate: shown in points)."""
        return self.test in RATE_TESTS


@dataclass(frozen=True, slots=True, kw_only=True)
class Disagreement:
    case_id: str
    repeat: int
    evaluator: str
    baseline: str
    variant: str
    baseline_passed: bool
    variant_passed: bool
    baseline_answer: str | None
    variant_answer: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Report:
    """Everything a report shows; :meth:`to_dict` is the ``--json`` form."""

    experiment: str
    baseline: str
    alpha: float
    seed: int
    repeats: int
    cases: int
    variants: tuple[VariantSummary, ...]
    comparisons: tuple[Comparison, ...]
    disagreements: tuple[Disagreement, ...]
    disagreements_total: int
    missing: int
    """Keys of the experiment without a run (stopped before the end)."""
    stopped: StopInfo | None = None
    """Set when the sequential test stopped the experiment early (``--stop-when-decided``):
    its fixed-sample p-values and intervals then do not account for the stop; the
    always-valid p-values of the stop metric in here do."""
    models: Mapping[str, str] = field(default_factory=dict)
    """Each variant's model, when the store knows it."""
    dataset: str | None = None
    agent: str | None = None
    started: float | None = None
    """Unix time the first run started."""
    finished: float | None = None
    """Unix time the last run ended."""

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for variant in data["variants"]:
            variant.pop("latencies")
            variant.pop("tokens")
        out: dict[str, Any] = _finite(data)
        return out

    def comparison(self, variant: str, metric: str) -> Comparison:
        for c in self.comparisons:
            if c.variant == variant and c.metric == metric:
                return c
        raise KeyError((variant, metric))

    def variant(self, name: str) -> VariantSummary:
        for v in self.variants:
            if v.name == name:
                return v
        raise KeyError(name)


def report(source: str | os.PathLike[str] | Store,
           prices: Mapping[str, Price] | None = None) -> Report:
    """The report of a store (a path or an open :class:`Store`).

    Args:
        prices: model prices (``provider/name`` to :class:`~gramagent._prices.Price`), over
            those of the experiment file; with a price for every variant's model, the report
            has a cost metric (``cost_usd``) and cost per passed run.

    Raises:
        ExperimentError: the file is not an experiment store.
    """
    if isinstance(source, Store):
        return _of_store(source, prices)
    with Store.read(source) as store:
        return _of_store(store, prices)


def _of_store(store: Store, prices: Mapping[str, Price] | None) -> Report:
    note = store.stop_note()
    settings = store.settings()
    table = store.table(list(settings.get("evaluators", [])))
    return table_report(table, settings, prices,
                        stopped=None if note is None else StopInfo.from_dict(note))


def build_report(records: Sequence[RunRecord], settings: Mapping[str, Any],
                 prices: Mapping[str, Price] | None = None, *,
                 stopped: StopInfo | None = None) -> Report:
    """The report of ``records`` under ``settings`` (see ``Experiment.settings``)."""
    table = RunTable.of_records(records, list(settings.get("evaluators", [])))
    return table_report(table, settings, prices, stopped=stopped)


def table_report(table: RunTable, settings: Mapping[str, Any],
                 prices: Mapping[str, Price] | None = None, *,
                 stopped: StopInfo | None = None) -> Report:
    """The report of the runs in ``table`` under ``settings`` (see ``Experiment.settings``):
    what :func:`report` and :func:`build_report` compute, over columns."""
    alpha = float(settings.get("alpha", 0.05))
    seed = int(settings.get("seed", 0))
    baseline = str(settings["baseline"])
    names = list(settings.get("variants") or sorted(set(table.variant.tolist())))
    evaluators = list(settings.get("evaluators", []))
    rows_of = {name: np.flatnonzero(table.variant == name) for name in {*names, baseline}}
    kinds = table.kinds
    repeats = int(settings.get("repeats", 1))
    models: Mapping[str, str] = settings.get("models") or {}
    known = {**prices_from(settings.get("prices") or {}), **(prices or {})}
    costs = {name: known[models[name]] for name in names
             if name in models and models[name] in known}
    if len(costs) < len(names):
        costs = {}  # no price, no cost column: a cost of some variants only compares nothing
    view = _View(table, evaluators, kinds, costs)
    summaries = tuple(_summary(view, name, rows_of[name], alpha, seed, repeats,
                               models.get(name))
                      for name in names)
    comparisons: list[Comparison] = []
    disagreements: list[Disagreement] = []
    total = 0
    base_rows = rows_of[baseline]
    partner = dict(zip(zip(table.case_id[base_rows].tolist(), table.repeat[base_rows].tolist(),
                           strict=True), base_rows.tolist(), strict=True))
    for name in names:
        if name == baseline:
            continue
        pairs = [(partner[key], row) for key, row in zip(
            zip(table.case_id[rows_of[name]].tolist(), table.repeat[rows_of[name]].tolist(),
                strict=True), rows_of[name].tolist(), strict=True) if key in partner]
        base = np.array([b for b, _ in pairs], dtype=np.int64)
        var = np.array([v for _, v in pairs], dtype=np.int64)
        comparisons.extend(_compare(view, baseline, name, base, var, alpha, seed, repeats))
        total += _disagreements(view, baseline, name, base, var, disagreements)
    expected = int(settings.get("cases", 0)) * repeats * len(names)
    timed = table.started != 0
    return Report(
        experiment=str(settings.get("experiment", "")), baseline=baseline, alpha=alpha,
        seed=seed, repeats=repeats, cases=int(settings.get("cases", 0)), variants=summaries,
        comparisons=tuple(comparisons), disagreements=tuple(disagreements),
        disagreements_total=total, missing=max(0, expected - len(table)),
        stopped=stopped, models=dict(models), dataset=settings.get("dataset"),
        agent=settings.get("agent"),
        started=float(table.started[timed].min()) if timed.any() else None,
        finished=(float((table.started[timed] + table.wall_ms[timed] / 1000).max())
                  if timed.any() else None))


@dataclass(frozen=True, slots=True)
class _View:
    """The table and what every part of a report reads it with."""

    table: RunTable
    evaluators: list[str]
    kinds: Mapping[str, str]
    costs: Mapping[str, Price]

    def values(self, rows: np.ndarray, metric: str, variant: str) -> np.ndarray:
        """``metric`` of the runs at ``rows`` (all of ``variant``), as floats."""
        t = self.table
        if metric == COST:
            cost = self.costs[variant].cost
            return np.array([cost(i, o) for i, o in zip(
                t.input_tokens[rows].tolist(), t.output_tokens[rows].tolist(), strict=True)],
                dtype=float)
        if metric == LATENCY:
            latency: np.ndarray = t.wall_ms[rows]
            return latency
        if metric == TOKENS:
            tokens: np.ndarray = (t.input_tokens[rows] + t.output_tokens[rows]).astype(float)
            return tokens
        score: np.ndarray = t.scores[metric][rows]
        return score

    @property
    def metrics(self) -> list[str]:
        """The metrics of a report: the evaluators, latency, tokens, and cost when priced."""
        return [*self.evaluators, LATENCY, TOKENS, *([COST] if self.costs else [])]


def _flips(cases: np.ndarray, passed: np.ndarray) -> tuple[float | None, int]:
    """The share of cases (with two repeats or more) that passed on one repeat and failed on
    another, and how many such cases there were; ``cases`` and ``passed`` are per run."""
    if cases.size == 0:
        return None, 0
    _, inverse = np.unique(cases, return_inverse=True)
    runs = np.bincount(inverse)
    passes = np.bincount(inverse, weights=passed.astype(float))
    repeated = int(np.count_nonzero(runs > 1))
    if not repeated:
        return None, 0
    return int(np.count_nonzero((passes > 0) & (passes < runs))) / repeated, repeated


def _summary(view: _View, name: str, rows: np.ndarray, alpha: float, seed: int, repeats: int,
             model: str | None) -> VariantSummary:
    t = view.table
    metrics = []
    confidence = 1 - alpha
    costed = rows[~t.errored[rows]]
    for metric in view.metrics:
        values = view.values(costed if metric in _COSTS else rows, metric, name)
        if view.kinds.get(metric) == "rate":
            passes = values >= 1.0
            passed = int(np.count_nonzero(passes))
            low, high = stats.wilson(passed, int(values.size), confidence)
            flips, flip_cases = (_flips(t.case_id[rows], passes) if repeats > 1
                                 else (None, 0))
            metrics.append(MetricSummary(
                name=metric, kind="rate", value=passed / values.size if values.size else math.nan,
                low=low, high=high, n=int(values.size), passed=passed, flip_rate=flips,
                flip_cases=flip_cases))
        else:
            low, high = stats.bootstrap_mean(values, stats.rng_for(seed, name, metric),
                                             confidence)
            metrics.append(MetricSummary(
                name=metric, kind="mean", value=_mean(values.tolist()),
                low=low, high=high, n=int(values.size)))
    mine = set(rows.tolist())
    errors = Counter(label for run, label in t.tool_failures if run in mine)
    price = view.costs.get(name)
    spent = None if price is None else sum(
        price.cost(i, o) for i, o in zip(t.input_tokens[rows].tolist(),
                                         t.output_tokens[rows].tolist(), strict=True))
    first = next((m for m in metrics if m.kind == "rate"), None)
    return VariantSummary(
        model=model, price=None if price is None else (price.input, price.output),
        cost_total=spent,
        cost_per_pass=(spent / first.passed if spent is not None and first is not None
                       and first.passed else None),
        name=name, runs=int(rows.size), metrics=tuple(metrics),
        stops=dict(sorted(Counter(t.stop[rows].tolist()).items())),
        tool_calls=int(t.tool_calls[rows].sum()), tool_errors=dict(sorted(errors.items())),
        estimated=int(np.count_nonzero(t.estimated[rows])),
        latencies=tuple(t.wall_ms[costed].tolist()),
        tokens=tuple((t.input_tokens[costed] + t.output_tokens[costed]).tolist()))


def _compare(view: _View, baseline: str, name: str, base_rows: np.ndarray,
             var_rows: np.ndarray, alpha: float, seed: int, repeats: int) -> list[Comparison]:
    rows: list[dict[str, Any]] = []
    errored = view.table.errored
    both = ~errored[base_rows] & ~errored[var_rows]
    for metric in view.metrics:
        b, v = (base_rows[both], var_rows[both]) if metric in _COSTS else (base_rows, var_rows)
        data = _Paired(view.values(b, metric, baseline), view.values(v, metric, name),
                       view.table.case_id[b], repeats)
        rows.append(_paired_row(name, metric, view.kinds.get(metric) == "rate", data, alpha,
                                seed))
    # a metric whose pairs all agree (constant in both variants, say) has no test: its p is 1
    # whatever, so it leaves Holm's family instead of halving the power of the others
    tested = [i for i, row in enumerate(rows) if row["tested"]]
    adjusted = dict(zip(tested, stats.holm([rows[i]["p_value"] for i in tested]),
                        strict=True))
    out = []
    for i, row in enumerate(rows):
        p_adj = adjusted.get(i, row["p_value"])
        outcome, verdict = _verdict(row, p_adj, alpha)
        out.append(Comparison(**row, p_adjusted=p_adj, outcome=outcome, verdict=verdict))
    return out


@dataclass(frozen=True, slots=True)
class _Paired:
    """One metric's paired values, and the same averaged per case (the unit of the statistics
    when a case has several repeats: repeats of one case are not independent pairs)."""

    base: np.ndarray
    var: np.ndarray
    cases: np.ndarray
    repeats: int

    @property
    def diffs(self) -> np.ndarray:
        difference: np.ndarray = self.var - self.base
        return difference

    def per_case(self) -> tuple[np.ndarray, np.ndarray]:
        """Baseline and variant means per case (in order of first appearance)."""
        if self.repeats <= 1 or self.base.size == 0:
            return self.base, self.var
        _, first, inverse = np.unique(self.cases, return_index=True, return_inverse=True)
        sizes = np.bincount(inverse)
        order = np.argsort(first)
        base = np.bincount(inverse, weights=self.base) / sizes
        var = np.bincount(inverse, weights=self.var) / sizes
        return base[order], var[order]


def _paired_row(name: str, metric: str, rate: bool, data: _Paired, alpha: float,
                seed: int) -> dict[str, Any]:
    """Everything of one metric's comparison but Holm's correction and the verdict."""
    rng = stats.rng_for(seed, name, metric, "paired")
    higher_is_better = metric not in _COSTS
    diffs = data.diffs
    case_base, case_var = data.per_case()
    case_diffs = case_var - case_base
    clustered = data.repeats > 1
    signs = np.sign(case_diffs) * (1 if higher_is_better else -1)
    row: dict[str, Any] = {
        "variant": name, "metric": metric, "pairs": int(diffs.size),
        "cases": int(case_diffs.size), "repeats": data.repeats,
        "baseline_mean": _mean(data.base.tolist()), "variant_mean": _mean(data.var.tolist()),
        "difference": _mean(diffs.tolist()), "higher_is_better": higher_is_better,
        "tested": bool(np.any(diffs != 0)),
        "wins": int(np.sum(signs > 0)), "ties": int(np.sum(signs == 0)),
        "losses": int(np.sum(signs < 0)),
        "design_effect": None, "icc": None,
        "spread": float(np.std(diffs, ddof=1)) if diffs.size > 1 else None,
    }
    if clustered:
        deff = stats.design_effect(diffs, data.cases)
        row["design_effect"] = deff
        row["icc"] = stats.intra_case_correlation(deff, diffs.size / max(1, case_diffs.size))
    if rate:
        needed = _rate_row(row, data, (case_base, case_var), alpha, rng)
    else:
        low, high = stats.bootstrap_mean(case_diffs, rng, 1 - alpha)
        row.update(test="paired_permutation", low=low, high=high,
                   p_value=stats.paired_permutation(case_var, case_base, rng),
                   wilcoxon_p=stats.wilcoxon_p(case_diffs))
        needed = stats.pairs_needed_paired(case_diffs, alpha)
        row["detectable"] = stats.detectable_mean(
            case_diffs.size, float(np.std(case_diffs, ddof=1)) if case_diffs.size > 1
            else math.nan, alpha)
    row["cases_needed"] = needed
    row["pairs_needed"] = None if needed is None else min(
        stats.MOST_PAIRS, needed * (data.repeats if clustered else 1))
    return row


def _rate_row(row: dict[str, Any], data: _Paired, per_case: tuple[np.ndarray, np.ndarray],
              alpha: float, rng: np.random.Generator) -> int | None:
    """Fill the test, interval and discordant pairs of a pass/fail metric into ``row``;
    returns the cases a difference of the observed size would need."""
    diffs = data.diffs
    b = int(np.sum(data.base > data.var))
    c = int(np.sum(data.var > data.base))
    row["discordant"] = (b, c)
    needed: int | None
    if data.repeats > 1:
        # the pairs' worth in independent pairs (Rao-Scott): the counts divided by the
        # design effect, kept within [1, repeats]; the most when it cannot be estimated
        # (no pairs: the variant's runs have no baseline run yet)
        most = (float(np.max(np.unique(data.cases, return_counts=True)[1])) if diffs.size
                else float(data.repeats))
        deff = row["design_effect"]
        worth = most if deff is None else min(max(1.0, deff), most)
        low, high = stats.paired_rate_interval(b / worth, c / worth, diffs.size / worth,
                                               1 - alpha)
        row.update(test="clustered_sign_flip",
                   p_value=stats.paired_permutation(per_case[1], per_case[0], rng))
        # Connor's count of independent pairs; a case is worth repeats / worth of them
        effective = stats.pairs_needed_mcnemar(b / worth, c / worth, diffs.size / worth, alpha)
        row["detectable"] = _detectable_rate(b, c, diffs.size, diffs.size / worth, alpha)
        needed = None if effective is None else min(
            stats.MOST_PAIRS, math.ceil(effective * worth / data.repeats))
    else:
        low, high = stats.paired_rate_interval(b, c, diffs.size, 1 - alpha)
        row.update(test="mcnemar_exact", p_value=stats.mcnemar_exact(b, c))
        needed = stats.pairs_needed_mcnemar(b, c, diffs.size, alpha)
        row["detectable"] = _detectable_rate(b, c, diffs.size, diffs.size, alpha)
    if diffs.size < 2:  # one pair: no interval
        low = high = math.nan
    row.update(low=low, high=high)
    return needed


def _detectable_rate(b: int, c: int, pairs: int, worth: float, alpha: float) -> float | None:
    """The minimum detectable rate difference with ``pairs`` worth ``worth`` independent
    ones, at the share of disagreeing pairs observed (one of each kind when none disagreed,
    as in Bonett-Price's interval)."""
    share = (b + c) / pairs if b + c else 2 / (pairs + 2)
    return stats.detectable_rate(worth, share, alpha)


def _verdict(row: Mapping[str, Any], p_adjusted: float, alpha: float) -> tuple[str, str]:
    diff = row["difference"]
    shown = _format_difference(row["metric"], diff, row["test"] in RATE_TESTS)
    if row["pairs"] == 0:
        return "no difference", "no paired runs to compare"
    if p_adjusted < alpha and diff != 0:
        good = (diff > 0) == row["higher_is_better"]
        outcome = "better" if good else "worse"
        return outcome, (f"{outcome}: {shown} (p={p_adjusted:.3g} after Holm, alpha={alpha:g})")
    cases = row.get("cases_needed")
    if cases is None:
        tail = "no difference observed"
    else:
        tail = (f"a difference of {shown} would need more than {stats.MOST_PAIRS:,} cases"
                if cases >= stats.MOST_PAIRS else
                f"a difference of {shown} would need about {cases:,} cases")
    detectable = row.get("detectable")
    if detectable:
        could = _format_difference(row["metric"], detectable, row["test"] in RATE_TESTS)
        tail += f"; this run could detect {could.lstrip('+')} with 80% power"
    return "no difference", (f"no detectable difference at alpha={alpha:g} "
                             f"(p={p_adjusted:.3g}; {tail})")


def _format_difference(metric: str, diff: float, rate: bool) -> str:
    if rate:
        return f"{diff * 100:+.1f} points"
    if metric == LATENCY:
        return f"{diff:+.1f} ms"
    if metric == TOKENS:
        return f"{diff:+.1f} tokens"
    if metric == COST:
        return f"{diff:+.3g} dollars per run"
    return f"{diff:+.3f}"


def _disagreements(view: _View, baseline: str, name: str, base_rows: np.ndarray,
                   var_rows: np.ndarray, out: list[Disagreement]) -> int:
    """Append to ``out`` (up to :data:`MAX_DISAGREEMENTS` in all) the pairs whose verdict of a
    pass/fail evaluator differs, pair by pair and evaluator by evaluator; returns how many
    there are."""
    t = view.table
    rated = [e for e in view.evaluators if view.kinds.get(e) == "rate"]
    if not rated or base_rows.size == 0:
        return 0
    base_passed = np.column_stack([t.scores[e][base_rows] >= 1.0 for e in rated])
    var_passed = np.column_stack([t.scores[e][var_rows] >= 1.0 for e in rated])
    pair, which = np.nonzero(base_passed != var_passed)  # pair by pair, then evaluator
    shown = pair[:max(0, MAX_DISAGREEMENTS - len(out))].tolist()
    if shown:
        answers = t.answers([*base_rows[shown].tolist(), *var_rows[shown].tolist()])
        for k, (i, e) in enumerate(zip(shown, which[:len(shown)].tolist(), strict=True)):
            b = int(base_rows[i])
            out.append(Disagreement(
                case_id=t.case_id[b], repeat=int(t.repeat[b]), evaluator=rated[e],
                baseline=baseline, variant=name, baseline_passed=bool(base_passed[i, e]),
                variant_passed=bool(var_passed[i, e]), baseline_answer=answers[k],
                variant_answer=answers[len(shown) + k]))
    return int(pair.size)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def _finite(value: Any) -> Any:
    """NaN and infinities as None, for JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
