"""CLI of A/B experiments: ``gramagent experiment run|report`` and ``gramagent ab``.

``experiment run FILE`` runs an experiment file into its store (resuming what is missing)
with a progress bar (ETA, live pass rate per variant), then prints the report.
``experiment report STORE`` prints the report of a store (``--json``, ``--html FILE``,
``--export FILE.parquet|.csv``). ``ab AGENT.gram --variant A=mod:lib_a --variant
B=mod:lib_b --cases cases.jsonl`` is the one-line form for two (or more) tool libraries.
Ctrl-C stops cleanly: finished runs are saved, and the same command resumes.
"""

from __future__ import annotations

import dataclasses
import sys
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from gramagent._cli._app import (
    app,
    err_console,
    handle_errors,
    out_console,
    serve_metrics_on,
)
from gramagent._cli._conventions import Group
from gramagent._cli._eta import MeanRateRemainingColumn
from gramagent._cli._terminal import markup_text, terminal_console, terminal_text
from gramagent._cli.run_commands import API_OPTION, TOOL_CALL_MODE_OPTION
from gramagent._limit_values import limit_problem
from gramagent.errors import ConfigurationError

if TYPE_CHECKING:
    from gramagent._prices import Price
    from gramagent.experiments import Experiment, RunRecord, Started

__all__ = ["ab", "experiment_plan", "experiment_report", "experiment_run"]

experiment_app = typer.Typer(cls=Group, help="Run and report A/B experiments.",
                             no_args_is_help=True)
app.add_typer(experiment_app, name="experiment")

_STORE = typer.Option(None, "--store", help="SQLite results file (default: the experiment's "
                      "store, else NAME.sqlite).")
_CONCURRENCY = typer.Option(4, "--concurrency", "-c", min=1,
                            help="Runs in flight at once.")
_RATE = typer.Option(None, "--rate", metavar="MODEL=PER_SECOND",
                     help="At most this many requests per second to MODEL (repeatable), e.g. "
                          "--rate openai/gpt-4o-mini=5.")
_JSON = typer.Option(False, "--json", help="Print the report as JSON.")
_HTML = typer.Option(None, "--html", help="Also write a self-contained HTML report here.")
_RETRY = typer.Option(False, "--retry-errors",
                      help="Run again the runs that ended on an error (a server that was "
                           "down, a dropped connection), replacing them.")
_PRICE = typer.Option(None, "--price", metavar="MODEL=IN,OUT",
                      help="Dollars per million input and output tokens of MODEL "
                           "(repeatable; over the file's prices), e.g. "
                           "--price openai/gpt-4o-mini=0.15,0.6: the report shows cost.")
_STOP = typer.Option(False, "--stop-when-decided",
                     help="Stop as soon as the sequential test of the first evaluator decides "
                          "every variant (valid however often it looks); runs case by case.")
_METRICS = typer.Option(None, "--metrics-port",
                        help="Serve Prometheus metrics on 127.0.0.1:PORT while running.")
_ENGINE = typer.Option(None, "--engine", metavar="local|ray",
                       help="Where the runs happen: local (this process, the default) or ray "
                            "(actors of a Ray cluster; needs the ray extra). Default: the "
                            "experiment's engine key, else local.")
_RAY_ADDRESS = typer.Option(None, "--ray-address", metavar="auto|HOST:PORT|ray://HOST:PORT",
                            help="The Ray cluster (--engine ray); default: start a local Ray.")
_WORKERS = typer.Option(None, "--workers", min=1,
                        help="Ray worker actors (--engine ray); default one per CPU of the "
                             "cluster. --concurrency is then per worker.")


@experiment_app.command("run")
@handle_errors
def experiment_run(
    file: Annotated[Path, typer.Argument(help="The experiment file (.gram).")],
    store: Path | None = _STORE,
    concurrency: int = _CONCURRENCY,
    rate: list[str] | None = _RATE,
    json: bool = _JSON,
    html: Path | None = _HTML,
    metrics_port: int | None = _METRICS,
    retry_errors: bool = _RETRY,
    engine: str | None = _ENGINE,
    ray_address: str | None = _RAY_ADDRESS,
    workers: int | None = _WORKERS,
    price: list[str] | None = _PRICE,
    stop_when_decided: bool = _STOP,
) -> None:
    """Run an experiment file (only the runs its store lacks), then print its report."""
    from gramagent.experiments import load_experiment

    prices = _prices(price)
    experiment = load_experiment(file)
    if stop_when_decided:
        experiment = dataclasses.replace(experiment, stop_when_decided=True)
    _execute(_with_rates(experiment, rate), store=store, concurrency=concurrency, json=json,
             html=html, metrics_port=metrics_port, retry_errors=retry_errors, prices=prices,
             engine=_chosen_engine(engine or experiment.engine, ray_address, workers,
                                   concurrency))


@experiment_app.command("report")
@handle_errors
def experiment_report(
    store: Annotated[Path, typer.Argument(help="The experiment's SQLite store.")],
    json: bool = _JSON,
    html: Path | None = _HTML,
    export: Annotated[Path | None, typer.Option(
        "--export", help="Write every run as a .parquet or .csv table.")] = None,
    price: list[str] | None = _PRICE,
) -> None:
    """Print the report of a store (and write HTML or a table of the runs)."""
    from gramagent.experiments import Store, report

    prices = _prices(price)
    with Store.read(store) as db:
        result = report(db, prices)
        if export is not None:
            count = _guard(lambda: db.export(export), f"cannot write {export}")
            err_console.print(f"wrote {count} runs to {markup_text(str(export))}")
    _show(result, json=json, html=html)


@experiment_app.command("plan")
@handle_errors
def experiment_plan(
    difference: Annotated[float, typer.Option(
        "--difference", "-d", help="The difference to detect: a rate difference as a fraction "
        "(0.1 is 10 points), or a mean difference with --sd or for a pilot's scores.")],
    baseline_rate: Annotated[float | None, typer.Option(
        "--baseline-rate", help="The baseline's expected pass rate (0 to 1).")] = None,
    discordant: Annotated[float | None, typer.Option(
        "--discordant", help="The expected share of pairs whose verdicts differ (default: "
        "as if the variants failed independently).")] = None,
    sd: Annotated[float | None, typer.Option(
        "--sd", help="Standard deviation of the paired differences (scores, latency).")
        ] = None,
    pilot: Annotated[Path | None, typer.Option(
        "--pilot", help="An existing store to take discordance, spread and design effect "
        "from.")] = None,
    metric: Annotated[str | None, typer.Option(
        "--metric", help="With --pilot: only this metric.")] = None,
    alpha: Annotated[float | None, typer.Option(
        "--alpha", help="Significance level (default 0.05, or the pilot's).")] = None,
    power: Annotated[float, typer.Option("--power", help="Power wanted.")] = 0.8,
    repeats: Annotated[int | None, typer.Option(
        "--repeats", min=1, help="Repeats per case (default 1, or the pilot's).")] = None,
    icc: Annotated[float, typer.Option(
        "--icc", help="Intra-case correlation of the repeats (0: independent, 1: copies).")
        ] = 0.0,
    json: bool = _JSON,
) -> None:
    """Cases an experiment needs to detect a difference, before spending anything."""
    import orjson

    from gramagent.experiments import plan_cases, plan_from_store

    if pilot is not None:
        plans = plan_from_store(pilot, difference, alpha=alpha, power=power,
                                repeats=repeats, metric=metric)
    else:
        plans = [plan_cases(difference, baseline_rate=baseline_rate, discordant=discordant,
                            sd=sd, alpha=0.05 if alpha is None else alpha, power=power,
                            repeats=repeats or 1, icc=icc,
                            metric="mean" if sd is not None else "pass rate")]
    if json:
        sys.stdout.write(terminal_text(orjson.dumps([dataclasses.asdict(p) for p in plans],
                                                    option=orjson.OPT_INDENT_2).decode()) + "\n")
        return
    out = terminal_console(soft_wrap=True, highlight=False)
    for p in plans:
        shown = (f"{p.difference * 100:+.1f} points" if p.metric == "pass rate" or
                 "disagreeing" in p.basis else f"{p.difference:+g}")
        who = f"{markup_text(p.variant)}, " if p.variant else ""
        out.print(f"{who}{markup_text(p.metric)}: {p.cases:,} cases x {p.repeats} repeat(s) "
                  f"to detect {shown} at alpha {p.alpha:g} with {p.power:.0%} power "
                  f"({p.pairs:,} independent pairs; {markup_text(p.basis)})")


@app.command("ab")
@handle_errors
def ab(
    agent_file: Annotated[Path, typer.Argument(metavar="AGENT.gram", help="The agent file.")],
    variant: Annotated[list[str], typer.Option(
        "--variant", "-V", metavar="NAME=MODULE:LIBRARY",
        help="A variant and its tool library (two or more; the first is the baseline).")],
    cases: Annotated[Path, typer.Option("--cases", help="Cases: .jsonl, .csv or .parquet.")],
    evaluate: Annotated[list[str] | None, typer.Option(
        "--evaluate", "-e", metavar="KIND[=ARG]",
        help="An evaluator (repeatable): exact, contains=TEXT, regex=PATTERN, "
             "tool_called=TOOL, no_tool_errors, latency_under=MS, custom=MODULE:FUNCTION. "
             "Default: contains (the case's expected answer, when the cases have one) and "
             "no_tool_errors.")] = None,
    agent: Annotated[str | None, typer.Option(
        "--agent", metavar="NAME", help="Agent name, when the file has several.")] = None,
    model: Annotated[str | None, typer.Option(
        "--model", metavar="PROVIDER/NAME", help="The model of every variant.")] = None,
    base_url: Annotated[str | None, typer.Option(
        "--base-url", metavar="URL", help="API root for every variant.")] = None,
    api: str | None = API_OPTION,
    tool_call_mode: str | None = TOOL_CALL_MODE_OPTION,
    repeats: Annotated[int, typer.Option("--repeats", min=1,
                                         help="Runs per case and variant.")] = 1,
    store: Path | None = _STORE,
    concurrency: int = _CONCURRENCY,
    rate: list[str] | None = _RATE,
    json: bool = _JSON,
    html: Path | None = _HTML,
    retry_errors: bool = _RETRY,
    engine: str | None = _ENGINE,
    ray_address: str | None = _RAY_ADDRESS,
    workers: int | None = _WORKERS,
    price: list[str] | None = _PRICE,
    stop_when_decided: bool = _STOP,
) -> None:
    """Compare tool libraries on one agent and one dataset (the one-line A/B test)."""
    from gramagent._spec.gram.text import load_agent
    from gramagent.experiments import Experiment, Variant, load_cases

    variants = []
    for item in variant:
        name, sep, library = item.partition("=")
        if not sep or not name or not library:
            raise ConfigurationError(f"--variant {item!r}: expected NAME=MODULE:LIBRARY")
        variants.append(Variant(name=name, library=library, model=model, base_url=base_url,
                                api=api, tool_call_mode=tool_call_mode))
    dataset = load_cases(cases)
    spec = load_agent(agent_file, agent)
    specs = [_evaluator(e) for e in evaluate or ()] or _default_evaluators(dataset)
    # source: modules beside the agent file (its libraries) are importable by name
    experiment = Experiment(name=f"{spec.name}_ab", agent=spec, dataset=dataset,
                            variants=tuple(variants), evaluators=tuple(specs), repeats=repeats,
                            source=str(agent_file), stop_when_decided=stop_when_decided)
    _execute(_with_rates(experiment, rate), store=store, concurrency=concurrency, json=json,
             html=html, metrics_port=None, retry_errors=retry_errors, prices=_prices(price),
             engine=_chosen_engine(engine, ray_address, workers, concurrency))


def _default_evaluators(dataset: Any) -> list[Any]:
    """The evaluators of ``ab`` without ``-e``, said on stderr: ``contains`` of the cases'
    expected value (``answer``, else the one key every case's expected values share) and
    ``no_tool_errors``; expected values no default can score are named, with the ``-e``
    that would."""
    from gramagent.experiments import EvaluatorSpec

    keys = [set(c.expected) for c in dataset.cases if c.expected]
    shared = set.intersection(*keys) if keys else set()
    key = "answer" if "answer" in shared else next(iter(shared)) if len(shared) == 1 else None
    specs = [EvaluatorSpec(name="no_tool_errors", kind="no_tool_errors")]
    if key is not None:
        specs.insert(0, EvaluatorSpec(name=f"contains_{key}", kind="contains",
                                      options={"expected": key}))
    names = ", ".join(s.name if s.kind != "contains" else f"{s.name} (the answer contains "
                      f"the case's expected {key!r})" for s in specs)
    err_console.print(f"evaluators (no -e given): {markup_text(names)}", highlight=False,
                      soft_wrap=True)
    if keys and key is None:
        found = ", ".join(sorted(set().union(*keys)))
        err_console.print(f"[yellow]warning[/yellow]: no default evaluator scores the cases' "
                          f"expected values ({markup_text(found)}); name one with -e, e.g. -e "
                          "exact or -e custom=MODULE:FUNCTION", highlight=False, soft_wrap=True)
    return specs


_PRIMARY = {"exact": "value", "contains": "value", "regex": "pattern", "tool_called": "tool",
            "latency_under": "ms", "custom": "function"}


def _evaluator(text: str) -> Any:
    from gramagent.experiments import EvaluatorSpec

    kind, sep, arg = text.partition("=")
    options: dict[str, Any] = {}
    if sep:
        key = _PRIMARY.get(kind)
        if key is None:
            raise ConfigurationError(f"--evaluate {text!r}: {kind} takes no argument")
        options[key] = float(arg) if kind == "latency_under" and _is_number(arg) else arg
    name = kind if not sep else f"{kind}:{arg}"
    return EvaluatorSpec(name=name, kind=kind, options=options)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _with_rates(experiment: Experiment, rates: list[str] | None) -> Experiment:
    if not rates:
        return experiment
    limits = dict(experiment.rate_limits)
    for item in rates:
        model, sep, value = item.rpartition("=")
        if (not sep or not model or not _is_number(value)
                or limit_problem("rate", float(value), optional=False)):
            raise ConfigurationError(f"--rate {item!r}: expected MODEL=PER_SECOND, e.g. "
                                     "openai/gpt-4o-mini=5")
        limits[model] = float(value)
    return dataclasses.replace(experiment, rate_limits=limits)


def _chosen_engine(name: str | None, address: str | None, workers: int | None,
                   concurrency: int) -> Any:
    """The engine --engine (or the experiment's engine key) names; None: the local one.
    --ray-address and --workers belong to the Ray engine."""
    from gramagent.experiments import RayEngine

    if name not in (None, "local", "ray"):
        raise ConfigurationError(f"--engine {name!r}: expected local or ray")
    if name != "ray":
        if address is not None or workers is not None:
            raise ConfigurationError("--ray-address and --workers need --engine ray")
        return None
    return RayEngine(address=address, workers=workers, concurrency=concurrency,
                     on_status=lambda text: err_console.print(markup_text(text), highlight=False))


def _ray_stats(engine: Any, duplicates: int) -> None:
    """What the Ray engine did beside the runs: workers, lost ones, keys sent again."""
    stats = engine.stats
    nodes = len({w.node for w in stats.workers})
    line = (f"ray: {len(stats.workers)} workers on {nodes} node(s), {stats.calls} calls, "
            f"{stats.chunks} chunks back")
    if stats.lost or stats.resent or duplicates:
        line += (f"; {stats.lost} calls lost with their worker, {stats.resent} keys sent "
                 f"again (runs made twice, each stored once)")
    throttled = {model: count for model, count in stats.throttled.items() if count}
    if throttled:
        line += "; 429s: " + ", ".join(f"{m} {n}" for m, n in sorted(throttled.items()))
    err_console.print(markup_text(line), highlight=False)
def _prices(items: list[str] | None) -> dict[str, Price]:
    """``--price MODEL=IN,OUT`` options as prices by model."""
    from gramagent._prices import parse_price

    return dict(parse_price(item) for item in items or ())


def _execute(experiment: Experiment, *, store: Path | None, concurrency: int, json: bool,
             html: Path | None, metrics_port: int | None, retry_errors: bool,
             engine: Any = None, prices: dict[str, Price] | None = None) -> None:
    import asyncio  # where a command runs: --help stays free of them
    import sqlite3

    from gramagent.experiments import ExperimentMetrics, report, run_experiment, store_path

    metrics = tool_metrics = None
    if metrics_port is not None:
        # the ADR's tool_calls_total/tool_call_latency_ms are served: fill them, as run does
        tool_metrics = serve_metrics_on(metrics_port)
        metrics = ExperimentMetrics.for_registry()
    live = _Live(experiment, err_console)
    path = store_path(experiment, store)
    try:
        with live.progress:
            summary = asyncio.run(run_experiment(
                experiment, store=path, concurrency=concurrency, metrics=metrics,
                events=tool_metrics if engine is None else None,
                on_start=live.start, on_record=live.record, retry_errors=retry_errors,
                engine=engine or "local"))
    except KeyboardInterrupt:
        err_console.print(f"[yellow]stopped[/yellow]: {live.saved} runs saved in "
                          f"{markup_text(path)}; run the same command again to resume.")
        raise typer.Exit(130) from None
    except (OSError, sqlite3.Error) as exc:
        raise ConfigurationError(f"{path}: {exc}") from None
    err_console.print(f"{summary.ran} runs done, {summary.skipped} already in "
                      f"{markup_text(summary.store)}")
    if engine is not None:
        _ray_stats(engine, summary.duplicates)
    result = report(summary.store, prices)
    errors = sum(v.errors for v in result.variants)
    if errors:
        err_console.print(f"{errors} runs ended on an error; --retry-errors runs them again")
    _show(result, json=json, html=html)


class _Live:
    """The progress bar: ETA and the live pass rate of each variant (first evaluator)."""

    def __init__(self, experiment: Experiment, console: Console) -> None:
        self.evaluator = experiment.evaluators[0].name if experiment.evaluators else None
        self.progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), TextColumn("ETA"), MeanRateRemainingColumn(),
            TextColumn("{task.fields[rates]}", markup=False), console=console,
            transient=False, disable=not console.is_terminal)
        self.task = self.progress.add_task(markup_text(experiment.name), total=None, rates="",
                                           resumed=0)
        self.passes: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        self.saved = 0

    def start(self, started: Started) -> None:
        """The store is open: say where it is and warn (before the first run), then show the
        runs already saved."""
        where = "resuming" if started.done else "writing"
        say = self.progress.console.print
        say(f"{where} {markup_text(str(Path(started.store).resolve()))}", highlight=False,
            soft_wrap=True)
        for warning in started.warnings:
            # a warning quotes docstrings ("Returns [a, b]"): text, never markup
            say(f"[yellow]warning[/yellow]: {markup_text(warning)}", highlight=False,
                soft_wrap=True)
        self.saved = started.done
        self.progress.update(self.task, total=started.total, completed=started.done,
                             resumed=started.done)

    def record(self, record: RunRecord) -> None:
        self.saved += 1
        if self.evaluator is not None:
            result = record.evaluation(self.evaluator)
            tally = self.passes[record.variant]
            tally[0] += 1 if result is not None and result.score >= 1.0 else 0
            tally[1] += 1
        rates = "  ".join(f"{v} {p / n:.0%}" for v, (p, n) in sorted(self.passes.items()))
        label = f"{self.evaluator}: {rates}" if rates else ""
        self.progress.update(self.task, advance=1, rates=terminal_text(label))


def _show(result: Any, *, json: bool, html: Path | None) -> None:
    import orjson

    from gramagent.experiments import render_report

    if html is not None:
        from gramagent.experiments import write_html

        _guard(lambda: write_html(result, html), f"cannot write {html}")
        err_console.print(f"wrote {markup_text(str(html))}")
    if json:
        sys.stdout.write(terminal_text(orjson.dumps(result.to_dict(),
                                                    option=orjson.OPT_INDENT_2).decode()) + "\n")
    else:
        out_console().print(render_report(result))


def _guard(action: Any, what: str) -> Any:
    try:
        return action()
    except OSError as exc:
        raise ConfigurationError(f"{what}: {exc.strerror or exc}") from None
