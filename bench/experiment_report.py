"""Time and memory of the report of a large store (the report must be linear in runs).

Writes a store of ``--runs`` synthetic runs (two variants, ``--repeats`` repeats, four
evaluators, a tool call each, latencies drawn from a gamma distribution), then, in a fresh
process, times ``report(store)`` (importing gramagent and reading the store included) and
reads that process's peak RSS (``ru_maxrss``); with ``--cli``, the same for the command
``gramagent experiment report STORE --json`` (the report as the user asks for it). The store
is made once per size and kept in ``--dir``.

Usage::

    python bench/experiment_report.py                        # 100,000 runs
    python bench/experiment_report.py --cli                  # through the command
    python bench/experiment_report.py --runs 20000 --repeats 5
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def make_store(path: Path, runs: int, repeats: int) -> None:
    import numpy as np

    from gramagent.experiments import EvalResult, RunRecord, Store, ToolRecord

    cases = runs // (2 * repeats)
    rng = np.random.default_rng(0)
    settings = {"experiment": "bench", "baseline": "A", "variants": ["A", "B"],
                "evaluators": ["exact", "hello", "called", "clean"], "cases": cases,
                "repeats": repeats, "alpha": 0.05, "seed": 0}
    with Store.create(path, fingerprint={"experiment": "bench"}, settings=settings) as db:
        batch = []
        for repeat in range(repeats):
            for case in range(cases):
                for variant, rate in (("A", 0.7), ("B", 0.72)):
                    passed = bool(rng.random() < rate)
                    batch.append(RunRecord(
                        variant=variant, case_id=f"case{case:06}", repeat=repeat,
                        answer=f"Hello, case{case}!", stop="answer",
                        tools=(ToolRecord(name="sayHello", status="ok", error_type=None,
                                          latency_ms=1.0, arguments={"personName": "x"}),),
                        input_tokens=int(rng.integers(100, 200)), output_tokens=20,
                        requests=2, wall_ms=float(rng.gamma(2.0, 400.0)),
                        started=1.8e9 + case,
                        evaluations=tuple(EvalResult(name=n, score=float(passed),
                                                     passed=passed)
                                          for n in settings["evaluators"])))
                    if len(batch) >= 5000:
                        db.write(batch)
                        batch.clear()
        db.write(batch)


def measure(path: Path) -> dict[str, float]:
    """Run in a child process: seconds of ``report`` and the peak RSS in MB."""
    start = time.perf_counter()
    from gramagent.experiments import report

    result = report(path)
    seconds = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_SELF)
    peak_mb = usage.ru_maxrss / 1024
    return {"seconds": round(seconds, 2), "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2),
            "peak_rss_mb": round(peak_mb, 1),
            "pairs": result.comparisons[0].pairs, "cases": result.cases}


def measure_cli(path: Path) -> dict[str, float]:
    """Seconds and peak RSS (MB) of ``gramagent experiment report PATH --json``."""
    command = Path(sys.executable).with_name("gramagent")
    start = time.perf_counter()
    out = subprocess.run([str(command), "experiment", "report", str(path), "--json"],
                         check=True, capture_output=True)
    seconds = time.perf_counter() - start
    result = json.loads(out.stdout)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    peak_mb = usage.ru_maxrss / 1024
    return {"seconds": round(seconds, 2), "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2),
            "peak_rss_mb": round(peak_mb, 1),
            "pairs": result["comparisons"][0]["pairs"], "cases": result["cases"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--cli", action="store_true",
                        help="time `gramagent experiment report --json` instead")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(measure(args.child)))
        return
    path = args.dir / f"bench_report_{args.runs}_{args.repeats}.sqlite"
    if not path.exists():
        made = time.perf_counter()
        make_store(path, args.runs, args.repeats)
        print(f"made {path} in {time.perf_counter() - made:.1f} s", file=sys.stderr)
    if args.cli:
        figures = measure_cli(path)
    else:
        out = subprocess.run([sys.executable, __file__, "--child", str(path)], check=True,
                             capture_output=True, text=True)
        figures = json.loads(out.stdout)
    what = "gramagent experiment report" if args.cli else "report"
    print(f"{what} of {args.runs:,} runs ({figures['cases']:,} cases x {args.repeats} "
          f"repeat(s), {figures['pairs']:,} pairs): {figures['seconds']} s "
          f"({figures['cpu_seconds']} s CPU), peak RSS "
          f"{figures['peak_rss_mb']} MB")


if __name__ == "__main__":
    main()
