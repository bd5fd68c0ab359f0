"""A report in the terminal: rich tables of the variants, the paired comparisons, verdicts."""

from __future__ import annotations

import math

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from gramagent.experiments._report import (
    COST,
    LATENCY,
    NO_PAIRS,
    TOKENS,
    Comparison,
    MetricSummary,
    Report,
    empty_metric,
)

__all__ = ["ESTIMATED", "estimated_note", "marked", "render_report"]

ESTIMATED = "*"
"""The mark of token (and cost) figures that hold estimated tokens."""
_MARKED = (TOKENS, COST)

_OUTCOME_STYLE = {"better": "green", "worse": "red", "no difference": "dim"}


def render_report(report: Report) -> RenderableType:
    """The report as rich renderables (print them with a rich Console)."""
    parts: list[RenderableType] = [Text.assemble(
        ("Experiment ", "bold"), (report.experiment, "bold cyan"),
        f": {report.cases} cases x {report.repeats} repeat(s), baseline {report.baseline}, "
        f"alpha {report.alpha:g}" + (f", {report.missing} runs missing" if report.missing
                                     else ""))]
    if report.stopped is not None:
        parts.append(_stopped(report))
    parts.append(_variants(report))
    note = estimated_note(report)
    if note is not None:
        parts.append(Text(note, style="dim"))
    if report.comparisons:
        parts.append(_comparisons(report))
        parts.append(_verdicts(report))
    return Group(*parts)


def stop_sentence(report: Report) -> str:
    """The early stop in words (the terminal and the HTML report say the same)."""
    info = report.stopped
    assert info is not None
    p = ", ".join(f"{v} vs {report.baseline} p={p:.2g}" for v, p in info.p_values.items())
    return (f"stopped early when decided: the sequential test of {info.metric} crossed "
            f"1/alpha after {info.cases_done} of {info.cases} cases ({p}, always valid); "
            f"{info.runs_not_run} runs not run. The fixed-sample p-values and intervals below "
            "do not account for the stop.")


def marked(metric: str, estimated: bool) -> str:
    """The mark a figure of ``metric`` gets when tokens behind it were estimated ("")."""
    return ESTIMATED if estimated and metric in _MARKED else ""


def estimated_note(report: Report) -> str | None:
    """The footnote of the marked figures: which variants' runs had estimated tokens (None
    when no run had: every server reported its usage)."""
    counts = [f"{v.name}: {v.estimated} of {v.runs} runs" for v in report.variants
              if v.estimated]
    if not counts:
        return None
    return (f"{ESTIMATED} estimated, the server reported no usage ({'; '.join(counts)}); "
            "tokens counted from the text, about 4 characters a token")


def _stopped(report: Report) -> Text:
    return Text(stop_sentence(report), style="yellow")


def _variants(report: Report) -> Table:
    """One row per metric, one column per variant (narrow for the usual two or three).

    Every cell and header is a Text: names (an evaluator may be called `[/b]`) are never read
    as rich markup."""
    table = Table(title="Per variant (interval at 1 - alpha)", title_justify="left",
                  show_edge=False)
    table.add_column("", style="bold")
    for variant in report.variants:
        table.add_column(Text(variant.name), justify="right")
    table.add_row("runs", *(str(v.runs) for v in report.variants))
    names = [m.name for m in report.variants[0].metrics] if report.variants else []
    for i, name in enumerate(names):
        table.add_row(Text(name), *(_metric(v.metrics[i], v.runs)
                                    + marked(name, v.estimated > 0) for v in report.variants))
    table.add_row("tool errors", *(f"{sum(v.tool_errors.values())}/{v.tool_calls}"
                                   for v in report.variants))
    for i, name in enumerate(names):
        if any(v.metrics[i].flip_cases for v in report.variants):
            table.add_row(Text(f"flips: {name}"), *(_flips(v.metrics[i]) for v in report.variants))
    if any(v.cost_total is not None for v in report.variants):
        table.add_row("cost, all runs", *(_dollars(v.cost_total) + marked(COST, v.estimated > 0)
                                          for v in report.variants))
        table.add_row("cost per pass", *(_dollars(v.cost_per_pass)
                                         + marked(COST, v.estimated > 0)
                                         for v in report.variants))
    stops = sorted({k for v in report.variants for k in v.stops})
    for stop in stops:
        table.add_row(Text(f"stopped: {stop}"),
                      *(str(v.stops.get(stop, 0)) for v in report.variants))
    return table


def _dollars(value: float | None) -> str:
    return "-" if value is None else f"${value:.4g}"


def _flips(m: MetricSummary) -> str:
    """The share of cases whose repeats both passed and failed."""
    if m.flip_rate is None:
        return "-"
    return f"{m.flip_rate:.0%} of {m.flip_cases}"


def _metric(m: MetricSummary, runs: int) -> str:
    if m.n == 0 or math.isnan(m.value):
        return empty_metric(runs)
    if m.kind == "rate":
        return f"{m.value:.0%} {_interval(m.low, m.high, '.0%')}"
    if m.name == COST:
        return f"${m.value:.4g} {_interval(m.low, m.high, '.4g')}"
    digits = 0 if m.name in (LATENCY, TOKENS) else 3
    return f"{m.value:.{digits}f} {_interval(m.low, m.high, f'.{digits}f')}"


def _interval(low: float, high: float, spec: str) -> str:
    """``[low, high]``, or ``(no interval)`` where there is none (a single run or pair)."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return "(no interval)"
    return f"[{low:{spec}}, {high:{spec}}]"


def _comparisons(report: Report) -> Group:
    tables: list[RenderableType] = []
    clustered = report.repeats > 1
    guessed = {v.name for v in report.variants if v.estimated}
    for variant in dict.fromkeys(c.variant for c in report.comparisons):
        rows = [c for c in report.comparisons if c.variant == variant]
        size = (f"{rows[0].cases} cases x {report.repeats} repeats ({rows[0].pairs} pairs; "
                "statistics over cases)" if clustered else f"{rows[0].pairs} pairs")
        table = Table(title=Text(f"{variant} - {report.baseline}, {size} "
                                 "(rates in points; p after Holm)"),
                      title_justify="left", show_edge=False)
        for column, justify in (("metric", "left"), ("difference [CI]", "right"),
                                ("test", "left"), ("p", "right"), ("outcome", "left")):
            table.add_column(column, justify=justify, no_wrap=True)  # type: ignore[arg-type]
        for c in rows:
            outcome = Text(c.outcome, style=_OUTCOME_STYLE.get(c.outcome, ""))
            if c.pairs == 0:
                table.add_row(Text(c.metric), NO_PAIRS, _TESTS.get(c.test, c.test), "-",
                              outcome)
                continue
            table.add_row(Text(c.metric), _difference(c) + marked(c.metric, variant in guessed
                                                                   or report.baseline in guessed),
                          _TESTS.get(c.test, c.test), f"{c.p_adjusted:.2g}", outcome)
        tables.append(table)
        if rows[0].pairs:
            tables.append(_per_case(variant, report, rows))
    return Group(*tables)


def _per_case(variant: str, report: Report, rows: list[Comparison]) -> Table:
    """Cases won, tied, lost; the Wilcoxon check; the design effect; what the run could
    detect (the minimum detectable difference at 80 % power)."""
    table = Table(title=Text(f"{variant} - {report.baseline} per case"), title_justify="left",
                  show_edge=False)
    columns = ["metric", "won/tied/lost", "Wilcoxon p", "could detect"]
    if report.repeats > 1:
        columns.insert(3, "design effect")
    for column in columns:
        table.add_column(column, justify="left" if column == "metric" else "right")
    for c in rows:
        cells: list[RenderableType] = [Text(c.metric), f"{c.wins}/{c.ties}/{c.losses}",
                 "-" if c.wilcoxon_p is None else f"{c.wilcoxon_p:.2g}", _detectable(c)]
        if report.repeats > 1:
            cells.insert(3, _design(c))
        table.add_row(*cells)
    return table


def _detectable(c: Comparison) -> str:
    if c.detectable is None:
        return "-"
    if c.is_rate:
        return f"{c.detectable * 100:.1f} points"
    return f"{c.detectable:.3g}"


def _difference(c: Comparison) -> str:
    if c.metric == COST:
        return f"{c.difference:+.4g} {_interval(c.low, c.high, '+.4g')}"
    scale = 100.0 if c.is_rate else 1.0
    digits = 1 if c.is_rate or abs(c.difference) < 100 else 0
    if c.metric not in (LATENCY, TOKENS) and not c.is_rate:
        digits = 3
    return (f"{c.difference * scale:+.{digits}f} "
            f"{_interval(c.low * scale, c.high * scale, f'+.{digits}f')}")


def _design(c: Comparison) -> str:
    """The design effect and the intra-case correlation, or ``-`` where there is none."""
    if c.design_effect is None:
        return "-"
    icc = "" if c.icc is None else f" (ICC {c.icc:.2f})"
    return f"{c.design_effect:.2f}{icc}"


_TESTS = {"mcnemar_exact": "McNemar", "clustered_sign_flip": "McNemar, cases",
          "paired_permutation": "permutation"}


def _verdicts(report: Report) -> Text:
    text = Text("Verdicts\n", style="bold")
    for c in report.comparisons:
        text.append(f"  {c.variant} vs {report.baseline}, {c.metric}: ")
        text.append(c.verdict, style=_OUTCOME_STYLE.get(c.outcome, ""))
        text.append("\n")
    errors = {v.name: v.errors for v in report.variants}
    if any(errors.values()):
        counts = ", ".join(f"{name} {n}" for name, n in errors.items())
        text.append(f"  runs that ended on an error ({counts}) fail every evaluator and are "
                    "left out of latency and tokens, with their pairs\n", style="dim")
    if report.disagreements_total:
        text.append(f"  {report.disagreements_total} evaluator verdicts differ between "
                    "variants on the same case (see --html or --json)\n", style="dim")
    return text
