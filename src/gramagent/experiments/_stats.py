"""The statistics of reports, on scipy.stats (no hand-written formula where scipy has one).

- a rate (pass/fail): Wilson score interval (``binomtest(...).proportion_ci("wilson")``);
- a mean (scores, latency, tokens): bootstrap interval (``scipy.stats.bootstrap``, BCa, falling
  back to percentile where BCa is undefined);
- paired pass/fail, variant vs baseline on the same (case, repeat): McNemar's exact test, the
  two-sided binomial test of the discordant pairs (``binomtest(c, b + c, 0.5)``);
- paired scores, latency, tokens: a bootstrap interval of the mean difference and a paired
  permutation test (``scipy.stats.permutation_test``, ``permutation_type="samples"``: the sign
  of each pair is flipped, exact when the pairs are few);
- Holm's step-down correction over the metrics of one comparison (scipy has none; it is the
  few lines of :func:`holm`);
- the interval of a paired difference of pass rates: Bonett and Price's (2012) adjusted Wald
  interval, honest with few or no discordant pairs (a paired bootstrap of pairs that all agree
  cannot move, and would claim ``[0, 0]``);
- the pairs a difference of the observed size would need at 80 % power: the normal
  approximation for paired means, Connor's (1987) for McNemar (at most :data:`MOST_PAIRS`);
- above :data:`LARGE` values, the bootstrap and the permutation test give way to their
  large-sample limits, the t interval (``ttest_1samp(...).confidence_interval``) and the
  paired t test (``ttest_rel``): the resampling methods hold arrays of resamples times values
  (BCa's jackknife, values squared), while at that size they agree with the t methods to
  within their own Monte Carlo error.

Every resampling is seeded from the experiment's seed and the metric's name, so the same
store always gives the same report.
"""

from __future__ import annotations

import math
import warnings
import zlib
from collections.abc import Sequence

from gramagent._install import needs_extra
from gramagent.errors import ConfigurationError

try:
    import numpy as np
    from scipy import optimize, stats
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ConfigurationError(
        needs_extra(f"Experiment statistics ({exc.name} is missing)", "experiments")) from None

__all__ = [
    "bootstrap_mean",
    "detectable_mean",
    "detectable_rate",
    "t_power",
    "design_effect",
    "intra_case_correlation",
    "wilcoxon_p",
    "fewest_pairs",
    "holm",
    "mcnemar_exact",
    "no_difference",
    "paired_rate_interval",
    "paired_permutation",
    "pairs_needed_mcnemar",
    "pairs_needed_paired",
    "rng_for",
    "wilson",
]

RESAMPLES = 9999
POWER = 0.8
LARGE = 2000
"""Values (or pairs) above which the t methods stand in for resampling (linear memory)."""
MOST_PAIRS = 10**9
"""The cap of a "pairs needed" figure: a difference that small is no difference in practice,
and the figure stays an integer every JSON encoder takes."""
RELATIVE_ZERO = 1e-9
"""A mean difference below this share of the mean absolute difference is rounding (equal
latencies summed in another order give about 1e-18), not a difference."""


def rng_for(seed: int, *names: str) -> np.random.Generator:
    """A generator seeded by ``seed`` and names (stable across processes, unlike ``hash``)."""
    return np.random.default_rng([seed, *(zlib.crc32(n.encode("utf-8")) for n in names)])


def wilson(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a proportion (``(nan, nan)`` when ``n`` is 0)."""
    if n == 0:
        return math.nan, math.nan
    ci = stats.binomtest(successes, n).proportion_ci(confidence_level=confidence,
                                                     method="wilson")
    return float(ci.low), float(ci.high)


def bootstrap_mean(values: Sequence[float] | np.ndarray, rng: np.random.Generator,
                   confidence: float = 0.95) -> tuple[float, float]:
    """Bootstrap interval of the mean (BCa; percentile where BCa is undefined).

    All-equal values give the point interval; fewer than two values give ``(nan, nan)`` (one
    value says nothing of the spread: a point interval would claim certainty).
    """
    data = np.asarray(values, dtype=float)
    if data.size < 2:
        return math.nan, math.nan
    if np.all(data == data[0]):
        return float(data[0]), float(data[0])
    if data.size > LARGE:
        ci = stats.ttest_1samp(data, 0.0).confidence_interval(confidence_level=confidence)
        return float(ci.low), float(ci.high)
    state = rng.bit_generator.state
    for method in ("BCa", "percentile"):
        rng.bit_generator.state = state  # the same resamples whichever method answers
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # BCa's degenerate-data warning: we fall back
            result = stats.bootstrap((data,), np.mean, n_resamples=RESAMPLES,
                                     confidence_level=confidence, method=method, rng=rng)
        low, high = float(result.confidence_interval.low), float(
            result.confidence_interval.high)
        if math.isfinite(low) and math.isfinite(high):
            return low, high
    return math.nan, math.nan


def mcnemar_exact(b: int, c: int) -> float:
    """McNemar's exact p-value (two-sided) from the discordant pair counts ``b`` (baseline
    passed, variant failed) and ``c`` (the reverse); 1 when there are none."""
    if b + c == 0:
        return 1.0
    return float(stats.binomtest(c, b + c, 0.5).pvalue)


def paired_permutation(variant: Sequence[float] | np.ndarray,
                       baseline: Sequence[float] | np.ndarray,
                       rng: np.random.Generator) -> float:
    """Two-sided p-value of the paired permutation test of the mean difference (1 for fewer
    than two pairs: both signs of one difference are as extreme, the exact p is 1)."""
    x = np.asarray(variant, dtype=float)
    y = np.asarray(baseline, dtype=float)
    if x.size < 2 or np.all(x == y):
        return 1.0
    if x.size > LARGE:
        return float(stats.ttest_rel(x, y).pvalue)

    def mean_difference(a: np.ndarray, b: np.ndarray, axis: int) -> np.ndarray:
        difference: np.ndarray = np.mean(a - b, axis=axis)  # typed whether numpy is or not
        return difference

    result = stats.permutation_test((x, y), mean_difference, permutation_type="samples",
                                    vectorized=True, n_resamples=RESAMPLES,
                                    alternative="two-sided", rng=rng)
    return float(min(1.0, result.pvalue))


def wilcoxon_p(differences: Sequence[float] | np.ndarray) -> float:
    """Two-sided p of the Wilcoxon signed-rank test of paired differences
    (``scipy.stats.wilcoxon``; exact for few pairs, normal beyond); 1 when none differs."""
    d = np.asarray(differences, dtype=float)
    if np.count_nonzero(d) == 0:
        return 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy's notes on ties and zeros: expected here
        return float(stats.wilcoxon(d).pvalue)


def design_effect(values: Sequence[float] | np.ndarray, cases: Sequence[object] | np.ndarray
                  ) -> float | None:
    """How much wider the mean of ``values`` is for their being grouped by case: the
    cluster-robust variance of the mean (cases as clusters, the ratio estimator's
    ``sum((t_k - m_k * mean)**2) / n**2``) over the variance of independent values
    (``var / n``; both without small-sample factors, so that repeats that copy each other
    give exactly their number). 1: repeats as good as new cases; the repeats per case: a case's
    repeats are worth one value. None for fewer than two cases or values that do not vary.
    """
    x = np.asarray(values, dtype=float)
    _, inverse = np.unique(np.asarray(cases, dtype=object), return_inverse=True)
    groups = int(inverse.max()) + 1 if x.size else 0
    if groups < 2 or x.size < 2:
        return None
    variance = float(np.var(x))
    if variance == 0.0:
        return None
    totals = np.bincount(inverse, weights=x)
    sizes = np.bincount(inverse)
    clustered = float(np.sum((totals - sizes * x.mean()) ** 2)) / x.size ** 2
    return clustered / (variance / x.size)


def intra_case_correlation(design: float | None, mean_repeats: float) -> float | None:
    """The intra-case correlation a design effect implies (``deff = 1 + (m - 1) * icc``)."""
    if design is None or mean_repeats <= 1:
        return None
    return (design - 1) / (mean_repeats - 1)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (same order as given).

    The k-th smallest p (from 0) is multiplied by ``m - k``; adjusted values are made
    non-decreasing in that order and capped at 1.
    """
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def paired_rate_interval(b: int | float, c: int | float, n: int | float,
                         confidence: float = 0.95) -> tuple[float, float]:
    """Interval of a paired difference of pass rates, ``(c - b) / n``: Bonett and Price's
    (2012) adjusted Wald interval (one pass-only pair of each kind added before the Wald
    formula; Fagerland, Lydersen and Laake 2014 recommend it for every sample size).

    Unlike a bootstrap of the pairs, it is wide when few pairs disagree (``b = c = 0`` out of
    40 pairs gives about +-6.6 points, not ``[0, 0]``). The counts may be fractional: divided
    by a design effect, they are the pairs' worth in independent pairs. ``(nan, nan)`` for
    ``n`` 0."""
    if n <= 0:
        return math.nan, math.nan
    total = n + 2
    p12, p21 = (b + 1) / total, (c + 1) / total
    centre = p21 - p12
    spread = float(stats.norm.ppf(0.5 + confidence / 2)) * math.sqrt(
        max(0.0, p12 + p21 - centre ** 2) / total)
    return max(-1.0, centre - spread), min(1.0, centre + spread)


def no_difference(differences: Sequence[float] | np.ndarray) -> bool:
    """Whether the mean of ``differences`` is zero, up to rounding (:data:`RELATIVE_ZERO`)."""
    d = np.asarray(differences, dtype=float)
    if d.size == 0:
        return True
    scale = float(np.mean(np.abs(d)))
    return scale == 0.0 or abs(float(np.mean(d))) <= RELATIVE_ZERO * scale


def pairs_needed_paired(differences: Sequence[float] | np.ndarray, alpha: float,
                        power: float = POWER) -> int | None:
    """Pairs for a paired test to detect the observed mean difference (normal approximation,
    two-sided; at most :data:`MOST_PAIRS`); None when the observed difference is zero, up to
    rounding."""
    d = np.asarray(differences, dtype=float)
    if no_difference(d):
        return None
    mean = float(np.mean(d))
    sd = float(np.std(d, ddof=1)) if d.size > 1 else 0.0
    fewest = fewest_pairs(alpha)
    if sd == 0.0:
        return fewest
    z = stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)
    return _capped(max(fewest, float(z * sd / abs(mean)) ** 2))


def _capped(pairs: float) -> int:
    return MOST_PAIRS if not pairs < MOST_PAIRS else max(1, math.ceil(pairs))


def pairs_needed_mcnemar(b: float, c: float, n: float, alpha: float,
                         power: float = POWER) -> int | None:
    """Pairs for McNemar's test to detect the observed difference (Connor 1987); None when
    the observed difference is zero."""
    if n == 0 or b == c:
        return None
    discordant = (b + c) / n
    delta = abs(c - b) / n
    # the test sees only the discordant pairs: it needs fewest_pairs of them at the least
    return _capped(max(fewest_pairs(alpha) / discordant,
                       connor_pairs(delta, discordant, alpha, power)))


def mcnemar_power(n: int, discordant: float, delta: float, alpha: float) -> float:
    """Exact power of McNemar's exact test with ``n`` pairs when a share ``discordant`` of
    pairs disagree and the variant's pass rate is ``delta`` higher: the disagreeing pairs are
    ``Binomial(n, discordant)``, the variant's share of them ``(discordant + delta) /
    (2 discordant)``, and the test rejects where ``binomtest`` gives p < alpha."""
    d = np.arange(1, n + 1)
    weights = stats.binom.pmf(d, n, discordant)
    share = (discordant + delta) / (2 * discordant)
    # the largest count in the lower tail with 2 * cdf < alpha (the test is symmetric)
    low = stats.binom.ppf(alpha / 2, d, 0.5) - 1
    power = stats.binom.cdf(low, d, share) + stats.binom.sf(d - low - 1, d, share)
    return float(np.sum(weights * np.where(low >= 0, power, 0.0)))


def connor_pairs(delta: float, discordant: float, alpha: float,
                 power: float = POWER) -> float:
    """Connor's (1987) pairs for McNemar's test to detect a rate difference ``delta`` when a
    share ``discordant`` of the pairs disagree (not rounded)."""
    z_a, z_b = stats.norm.ppf(1 - alpha / 2), stats.norm.ppf(power)
    root = z_a * math.sqrt(discordant) + z_b * math.sqrt(max(0.0, discordant - delta ** 2))
    ratio = float(root / delta)
    return ratio * ratio  # inf past the largest float (``**`` would raise OverflowError)


def t_power(n: int, effect: float, alpha: float) -> float:
    """Power of the two-sided paired t test with ``n`` pairs at standardized ``effect``."""
    df = n - 1
    critical = stats.t.ppf(1 - alpha / 2, df)
    shift = effect * math.sqrt(n)
    return float(stats.nct.sf(critical, df, shift) + stats.nct.cdf(-critical, df,
                                                                               shift))


def detectable_rate(pairs: float, discordant: float, alpha: float,
                    power: float = POWER) -> float | None:
    """The smallest rate difference McNemar's test detects with ``pairs`` independent pairs
    at ``power``, given the share of disagreeing pairs (Connor's formula solved for the
    difference); None for fewer pairs than any difference needs."""
    if pairs < 2 or not discordant > 0:
        return None

    def gap(delta: float) -> float:
        return connor_pairs(delta, discordant, alpha, power) - pairs

    top = discordant  # a difference is at most the share of pairs that disagree
    if gap(top) > 0 or pairs * discordant < fewest_pairs(alpha):
        return None
    return float(optimize.brentq(gap, 1e-9, top))


def detectable_mean(cases: int, sd: float, alpha: float,
                    power: float = POWER) -> float | None:
    """The smallest mean difference the paired t test detects over ``cases`` units with
    differences of this ``sd`` at ``power`` (the noncentral t, solved for the effect)."""
    if cases < 2 or not math.isfinite(sd):
        return None
    if sd == 0:
        return 0.0
    z = float(stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power))
    high = 2 * z / math.sqrt(cases)  # about twice the normal approximation's effect
    while not t_power(cases, high, alpha) >= power:  # NaN too: nct far in its tail
        high *= 2
        if high > 1e3:  # too few cases for any effect (a degenerate t distribution)
            return None
    try:
        effect = optimize.brentq(lambda e: t_power(cases, e, alpha) - power, 1e-9, high)
    except ValueError:  # nct gave NaN inside the bracket
        return None
    return float(effect * sd)


def fewest_pairs(alpha: float) -> int:
    """The fewest pairs with which an exact two-sided sign test (McNemar's on discordant
    pairs, the paired permutation test) can give p < ``alpha`` at all: its smallest p is
    ``2 / 2**n`` (6 pairs at alpha 0.05), whatever the size of the difference."""
    return math.floor(math.log2(2 / alpha)) + 1
