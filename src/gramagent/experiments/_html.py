"""A self-contained HTML report: no network, plots embedded as PNG data URIs (matplotlib).

Sections: the rate (or mean) of each variant and evaluator with its interval, the paired
difference of each metric against the baseline with its interval and verdict, latency and
token distributions, the tool error breakdown, and the cases where the variants' verdicts
differ, with both answers. Figures are drawn on :class:`matplotlib.figure.Figure` objects (no
pyplot state), with the Agg backend.
"""

from __future__ import annotations

import base64
import io
import math
import os
from collections.abc import Set as AbstractSet
from datetime import UTC, datetime
from html import escape
from typing import Any

from gramagent._install import needs_extra
from gramagent.errors import ConfigurationError
from gramagent.experiments._render import estimated_note, marked, stop_sentence
from gramagent.experiments._report import (
    COST,
    LATENCY,
    NO_PAIRS,
    TOKENS,
    Comparison,
    Report,
    empty_metric,
)

__all__ = ["html_report", "write_html"]

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;
max-width:1100px;color:#1d2430;padding:0 1rem}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{margin-top:2rem;border-bottom:1px solid #dde;
padding-bottom:.2rem}.sub{color:#5b6577}table{border-collapse:collapse;width:100%;
margin:.6rem 0}th,td{padding:.35rem .6rem;border-bottom:1px solid #e5e8ef;text-align:left;
vertical-align:top}th{background:#f5f7fb}td.num{text-align:right;font-variant-numeric:
tabular-nums}.better{color:#137333;font-weight:600}.worse{color:#b3261e;font-weight:600}
.same{color:#5b6577}.pass{color:#137333}.fail{color:#b3261e}img{max-width:100%}
.stop{background:#fff4d6;border-left:4px solid #e0a800;padding:.5rem .8rem}
.note{color:#555;font-size:.9em}
dl.about{display:grid;grid-template-columns:max-content 1fr;gap:.15rem 1rem;margin:.5rem 0}
dl.about dt{color:#5b6577}dl.about dd{margin:0}
.grid{display:grid;grid-template-columns:1fr 1fr;gap:1rem}code{background:#f2f4f8;
padding:0 .25rem;border-radius:3px}
"""


def write_html(report: Report, path: str | os.PathLike[str]) -> None:
    """Write :func:`html_report` to ``path`` (UTF-8)."""
    with open(path, "w", encoding="utf-8") as out:
        out.write(html_report(report))


def html_report(report: Report) -> str:
    """The report as one HTML document with its plots inlined.

    Raises:
        ConfigurationError: matplotlib is not installed (with the install command).
    """
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ConfigurationError(needs_extra("The HTML report", "experiments")) from None
    parts = [
        "<!doctype html><html lang=en><head><meta charset=utf-8>",
        f"<title>{escape(report.experiment)}: A/B report</title><style>{_CSS}</style></head>",
        f"<body><h1>{escape(report.experiment)}</h1>",
        f"<p class=sub>{report.cases} cases &times; {report.repeats} repeat(s) &times; "
        f"{len(report.variants)} variants; baseline <b>{escape(report.baseline)}</b>; "
        f"alpha {report.alpha:g} (Holm-corrected per variant); seed {report.seed}"
        + (f"; {report.missing} runs missing" if report.missing else "") + "</p>",
        _about(report),
    ]
    if report.stopped is not None:
        parts.append(f"<p class=stop>{escape(stop_sentence(report))}</p>")
    parts.append("<h2>Verdicts</h2><ul>")
    for c in report.comparisons:
        parts.append(f"<li><b>{escape(c.variant)}</b> vs {escape(report.baseline)}, "
                     f"<code>{escape(c.metric)}</code>: <span class={_css(c.outcome)}>"
                     f"{escape(c.verdict)}</span></li>")
    parts.append("</ul><h2>Rates and means per variant</h2>")
    parts.append(_img(_rates_figure(report, Figure)))
    parts.append(_variant_table(report))
    note = estimated_note(report)
    if note is not None:
        parts.append(f"<p class=note>{escape(note)}</p>")
    if report.comparisons:
        parts.append("<h2>Paired differences against the baseline</h2>")
        parts.append(_img(_differences_figure(report, Figure)))
        parts.append(_comparison_table(report.comparisons, {
            v.name for v in report.variants if v.estimated}, report.baseline))
        parts.append("<h2>What this run could detect</h2>")
        parts.append(_plan_table(report.comparisons))
    parts.append("<h2>Latency and tokens</h2><div class=grid>")
    parts.append(_img(_distribution(report, Figure, LATENCY)))
    parts.append(_img(_distribution(report, Figure, TOKENS)))
    parts.append("</div><h2>Tool errors</h2>")
    parts.append(_tool_errors(report))
    parts.append("<h2>Cases where the variants disagree</h2>")
    parts.append(_disagreements(report))
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _css(outcome: str) -> str:
    return {"better": "better", "worse": "worse"}.get(outcome, "same")


def _img(figure: Any) -> str:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight",
                   metadata={"Software": None})
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<img alt="plot" src="data:image/png;base64,{data}">'


def _evaluator_names(report: Report) -> list[str]:
    if not report.variants:
        return []
    return [m.name for m in report.variants[0].metrics if m.name not in (LATENCY, TOKENS, COST)]


def _rates_figure(report: Report, figure_type: Any) -> Any:
    names = _evaluator_names(report)
    figure = figure_type(figsize=(9, 0.5 + 0.45 * max(1, len(names)) * len(report.variants)))
    axes = figure.add_subplot()
    labels, values, lows, highs = [], [], [], []
    for name in names:
        for variant in report.variants:
            metric = next(m for m in variant.metrics if m.name == name)
            labels.append(f"{name} · {variant.name}")
            values.append(metric.value)
            lows.append(max(0.0, metric.value - metric.low))
            highs.append(max(0.0, metric.high - metric.value))
    positions = list(range(len(labels)))[::-1]
    colors = [f"C{i % len(report.variants)}" for i in range(len(labels))]
    axes.barh(positions, values, xerr=[lows, highs], color=colors, capsize=3, alpha=0.85)
    axes.set_yticks(positions, labels)
    axes.set_xlim(0, 1.05)
    axes.set_xlabel("rate or mean score, with its interval (Wilson / bootstrap)")
    axes.grid(axis="x", alpha=0.3)
    return figure


_UNITS = ((lambda c: c.is_rate, "pass rates: variant − baseline, points"),
          (lambda c: c.metric == LATENCY, "latency: variant − baseline, ms per run"),
          (lambda c: c.metric == TOKENS, "tokens: variant − baseline, per run"),
          (lambda c: c.metric == COST, "cost: variant − baseline, dollars per run"),
          (lambda c: True, "scores: variant − baseline"))


def _differences_figure(report: Report, figure_type: Any) -> Any:
    """A forest plot: each paired difference with its interval, one panel per unit (a
    difference in ms is never drawn as a share of something else)."""
    groups: list[tuple[str, list[Comparison]]] = []
    left = [c for c in report.comparisons if c.pairs]
    for belongs, title in _UNITS:
        rows = [c for c in left if belongs(c)]
        left = [c for c in left if c not in rows]
        if rows:
            groups.append((title, rows))
    heights = [0.5 + 0.38 * len(rows) for _, rows in groups] or [1.0]
    figure = figure_type(figsize=(9, 0.6 * len(heights) + sum(heights)))
    grid = figure.add_gridspec(len(heights), 1, height_ratios=heights, hspace=0.9)
    for i, (title, rows) in enumerate(groups):
        axes = figure.add_subplot(grid[i])
        positions = list(range(len(rows)))[::-1]
        for y, c in zip(positions, rows, strict=True):
            scale = _scale(c)
            color = {"better": "#137333", "worse": "#b3261e"}.get(c.outcome, "#5b6577")
            if math.isfinite(c.low) and math.isfinite(c.high):
                axes.hlines(y, c.low * scale, c.high * scale, color=color, linewidth=2.2)
            axes.plot(c.difference * scale, y, "s", color=color, markersize=7)
        axes.axvline(0, color="black", linewidth=0.8)
        axes.set_yticks(positions, [f"{c.variant} · {c.metric}" for c in rows])
        axes.set_title(title, fontsize=10, loc="left")
        axes.grid(axis="x", alpha=0.3)
    return figure


def _scale(c: Comparison) -> float:
    return 100.0 if c.is_rate else 1.0


def _num(value: float) -> str:
    """A figure for a table cell: thousands separated when large, 3 digits otherwise (``n/a``
    for none, e.g. the interval of a single run)."""
    if not math.isfinite(value):
        return "n/a"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _signed(value: float) -> str:
    return ("+" if value >= 0 else "") + _num(value)


def _unit(c: Comparison) -> str:
    if c.is_rate:
        return " (pts)"
    return {LATENCY: " (ms)", TOKENS: " (tokens)", COST: " ($)"}.get(c.metric, "")


def _distribution(report: Report, figure_type: Any, metric: str) -> Any:
    figure = figure_type(figsize=(5.2, 3.2))
    axes = figure.add_subplot()
    data = [list(v.latencies if metric == LATENCY else v.tokens) or [0.0]
            for v in report.variants]
    axes.boxplot(data, tick_labels=[v.name for v in report.variants], showmeans=True)
    axes.set_title("wall time per run (ms)" if metric == LATENCY else "tokens per run")
    axes.grid(axis="y", alpha=0.3)
    return figure


def _variant_table(report: Report) -> str:
    if not report.variants:
        return "<p>No runs.</p>"
    names = [m.name for m in report.variants[0].metrics]
    head = "".join(f"<th>{escape(n)}</th>" for n in names)
    rows = []
    for v in report.variants:
        cells = []
        for m in v.metrics:
            if m.n == 0 or math.isnan(m.value):
                cells.append(f"<td class=num>{empty_metric(v.runs)}</td>")
            elif m.kind == "rate":
                cells.append(f"<td class=num>{m.value:.1%}<br><small>[{m.low:.1%}, "
                             f"{m.high:.1%}]</small></td>")
            else:
                cells.append(f"<td class=num>{_num(m.value)}{marked(m.name, v.estimated > 0)}"
                             f"<br><small>[{_num(m.low)}, {_num(m.high)}]</small></td>")
        stops = ", ".join(f"{escape(k)}: {n}" for k, n in v.stops.items())
        rows.append(f"<tr><th>{escape(v.name)}</th><td class=num>{v.runs}</td>"
                    f"{''.join(cells)}<td>{stops}</td></tr>")
    return (f"<table><tr><th>variant</th><th>runs</th>{head}<th>stopped</th></tr>"
            + "".join(rows) + "</table>")


def _comparison_table(rows: tuple[Comparison, ...], estimated: AbstractSet[str] = frozenset(),
                      baseline: str = "") -> str:
    """The paired comparisons; a token or cost row is marked when either side's runs had
    estimated tokens (the variants in ``estimated``)."""
    out = ["<table><tr><th>variant</th><th>metric</th><th>pairs</th><th>baseline</th>"
           "<th>variant</th><th>difference [CI]</th><th>test</th><th>p</th><th>p (Holm)</th>"
           "<th>cases W/T/L</th><th>Wilcoxon p</th><th>design effect</th>"
           "<th>outcome</th></tr>"]
    for c in rows:
        s = _scale(c)
        difference = (f"{_signed(c.difference * s)} [{_signed(c.low * s)}, "
                      f"{_signed(c.high * s)}]{_unit(c)}" if c.pairs else NO_PAIRS)
        p_values = (f"<td class=num>{c.p_value:.3g}</td><td class=num>{c.p_adjusted:.3g}</td>"
                    if c.pairs else "<td class=num>-</td><td class=num>-</td>")
        out.append(
            f"<tr><td>{escape(c.variant)}</td><td>{escape(c.metric)}"
            f"{marked(c.metric, bool(estimated & {c.variant, baseline}))}</td>"
            f"<td class=num>{c.pairs}</td><td class=num>{_num(c.baseline_mean)}</td>"
            f"<td class=num>{_num(c.variant_mean)}</td><td class=num>{difference}</td>"
            f"<td>{c.test}</td>{p_values}"
            f"<td class=num>{c.wins}/{c.ties}/{c.losses}</td>"
            f"<td class=num>{'-' if c.wilcoxon_p is None else f'{c.wilcoxon_p:.3g}'}</td>"
            f"<td class=num>{'-' if c.design_effect is None else _num(c.design_effect)}</td>"
            f"<td class={_css(c.outcome)}>{escape(c.outcome)}</td></tr>")
    out.append("</table>")
    return "".join(out)


def _about(report: Report) -> str:
    """Models, date, duration and inputs of the run; the source of the token counts."""
    rows = []
    if report.models:
        rows.append(("models", ", ".join(f"{escape(v)}: <code>{escape(m)}</code>"
                                          for v, m in report.models.items())))
    if report.started is not None and report.finished is not None:
        start = datetime.fromtimestamp(report.started, UTC)
        end = datetime.fromtimestamp(report.finished, UTC)
        rows.append(("ran", f"{start:%Y-%m-%d %H:%M:%S} to {end:%H:%M:%S} UTC "
                            f"({_duration(report.finished - report.started)})"))
    if report.agent:
        rows.append(("agent", f"<code>{escape(report.agent)}</code>"))
    if report.dataset:
        rows.append(("cases", f"<code>{escape(report.dataset)}</code>"))
    rows.append(("tokens", "as each model server reported them; where a server reported "
                           "none, estimated from the text (about 4 characters a token), so "
                           "compare token figures only between variants on the same server"))
    return "<dl class=about>" + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows) + "</dl>"


def _duration(seconds: float) -> str:
    minutes, rest = divmod(max(0, round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02}:{rest:02}" if hours else f"{minutes}:{rest:02} min"


def _plan_table(rows: tuple[Comparison, ...]) -> str:
    out = ["<table><tr><th>variant</th><th>metric</th><th>cases</th><th>could detect "
           "(80% power)</th><th>observed</th><th>cases the observed difference needs</th>"
           "</tr>"]
    for c in rows:
        s = _scale(c)
        could = "n/a" if c.detectable is None else f"&plusmn;{_num(c.detectable * s)}{_unit(c)}"
        needed = ("-" if c.cases_needed is None else
                  f"more than {c.cases_needed:,}" if c.cases_needed >= 10**9 else
                  f"{c.cases_needed:,}")
        out.append(f"<tr><td>{escape(c.variant)}</td><td>{escape(c.metric)}</td>"
                   f"<td class=num>{c.cases}</td><td class=num>{could}</td>"
                   f"<td class=num>{_signed(c.difference * s)}{_unit(c)}</td>"
                   f"<td class=num>{needed}</td></tr>")
    out.append("</table>")
    return "".join(out)


def _tool_errors(report: Report) -> str:
    kinds = sorted({k for v in report.variants for k in v.tool_errors})
    if not kinds:
        calls = ", ".join(f"{escape(v.name)}: {v.tool_calls} calls" for v in report.variants)
        return f"<p>No tool call failed ({calls}).</p>"
    head = "".join(f"<th>{escape(v.name)}</th>" for v in report.variants)
    rows = "".join(
        f"<tr><td><code>{escape(k)}</code></td>"
        + "".join(f"<td class=num>{v.tool_errors.get(k, 0)}</td>" for v in report.variants)
        + "</tr>" for k in kinds)
    total = "".join(f"<td class=num>{v.tool_calls}</td>" for v in report.variants)
    return (f"<table><tr><th>tool:error type</th>{head}</tr>{rows}"
            f"<tr><td>all tool calls</td>{total}</tr></table>")


def _disagreements(report: Report) -> str:
    if not report.disagreements:
        return "<p>None: every evaluator gave the same verdict to both variants of each case.</p>"
    out = [f"<p class=sub>{report.disagreements_total} differing verdicts"
           + (f" (first {len(report.disagreements)} shown)"
              if report.disagreements_total > len(report.disagreements) else "") + ".</p>",
           "<table><tr><th>case</th><th>repeat</th><th>evaluator</th><th>baseline</th>"
           "<th>baseline answer</th><th>variant</th><th>variant answer</th></tr>"]
    for d in report.disagreements:
        out.append(
            f"<tr><td>{escape(d.case_id)}</td><td class=num>{d.repeat}</td>"
            f"<td>{escape(d.evaluator)}</td>"
            f"<td class={'pass' if d.baseline_passed else 'fail'}>{escape(d.baseline)} "
            f"{'pass' if d.baseline_passed else 'fail'}</td>"
            f"<td>{escape(d.baseline_answer or '(no answer)')}</td>"
            f"<td class={'pass' if d.variant_passed else 'fail'}>{escape(d.variant)} "
            f"{'pass' if d.variant_passed else 'fail'}</td>"
            f"<td>{escape(d.variant_answer or '(no answer)')}</td></tr>")
    out.append("</table>")
    return "".join(out)
