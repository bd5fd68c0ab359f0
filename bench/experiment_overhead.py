"""Experiment runner overhead: CPU per run and RSS growth of run_experiment vs bare run_agent.

The conversation is the sayHello one of ``bench/loop_overhead.py`` (a user message, one tool
call, a final text: two model requests per run), answered by ``bench/sayhello_server.py`` in
its own process. Each contender runs in its own process too, so ``time.process_time()`` (all
threads of that process) is the client's CPU alone:

- ``run_agent``: ``--runs`` calls of ``run_agent`` on one bound agent and one model adapter,
  ``--concurrency`` at a time (worker tasks pulling from a counter);
- ``experiment``: ``run_experiment`` over the same number of runs (``--runs / 2`` cases x two
  variants with the same tool code), ``--concurrency`` in flight, every run committed to a
  fresh SQLite store as it ends, with ``--evaluators`` cheap evaluators (``contains``) per run.

RSS growth is the process's peak RSS (``ru_maxrss``) minus its RSS just before the first run.
The two contenders alternate for ``--rounds`` rounds; the table shows each round and the ratio
of the medians.

Usage::

    python bench/experiment_overhead.py                     # 10,000 runs, concurrency 100
    python bench/experiment_overhead.py --runs 2000 --rounds 1
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
AGENT = """
[sayHello:Tool {description: "Returns a friendly greeting message for the given name"} |
  (personName::String {default: "world"})==>(::String)
]
[hello_agent:Agent {instruction: "Greet the user with sayHello.", model: "openai/scripted"} |
  sayHello
]
"""


def library() -> Any:
    """The tool library of both contenders (and both variants)."""
    from gramagent import ToolLibrary

    lib = ToolLibrary()

    @lib.register(blocking=False)
    def sayHello(personName: str = "world") -> str:
        """Returns a friendly greeting message for the given name"""
        return f"Hello, {personName}! Nice to meet you."

    return lib


def library_b() -> Any:
    """The same tools under another name (the second variant)."""
    return library()


def rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


async def bench_run_agent(base_url: str, runs: int, concurrency: int, work: Path) -> None:
    from gramagent import resolve_model, run_agent

    agent = load_agent_text(work)
    bound = library().bind(agent)
    model = resolve_model("openai/scripted", base_url=base_url)
    remaining = iter(range(runs))
    answers = 0

    async def worker() -> None:
        nonlocal answers
        for _ in remaining:
            response = await run_agent(bound, "Hi, I'm Alice", model=model)
            answers += response.content.startswith("Said: Hello")

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    await model.aclose()
    assert answers == runs, answers


async def bench_experiment(base_url: str, runs: int, concurrency: int, evaluators: int,
                           work: Path) -> None:
    from gramagent.experiments import (
        EvaluatorSpec,
        Experiment,
        Store,
        Variant,
        load_cases,
        run_experiment,
    )

    cases = work / "cases.jsonl"
    with cases.open("w") as out:
        for i in range(runs // 2):
            out.write(json.dumps({"id": f"c{i}", "input": "Hi, I'm Alice",
                                  "expected": "Hello, Alice"}) + "\n")
    experiment = Experiment(
        name="overhead", agent=load_agent_text(work), dataset=load_cases(cases),
        variants=(Variant(name="A", library="experiment_overhead:library", base_url=base_url),
                  Variant(name="B", library="experiment_overhead:library_b",
                          base_url=base_url)),
        evaluators=tuple(EvaluatorSpec(name=f"contains{i}", kind="contains")
                         for i in range(evaluators)))
    summary = await run_experiment(experiment, store=work / "store.sqlite",
                                   concurrency=concurrency)
    assert summary.ran == 2 * (runs // 2), summary
    with Store.read(work / "store.sqlite") as store:
        assert len(store) == summary.ran


def load_agent_text(work: Path) -> Any:
    from gramagent import load_agent

    path = work / "agent.gram"
    if not path.exists():
        path.write_text(AGENT)
    return load_agent(path)


def child(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(BENCH))
    import gramagent.experiments  # noqa: F401 - imports are not part of the figure
    from gramagent import run_agent  # noqa: F401

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        load_agent_text(work)
        start_rss = rss_mb()
        cpu, wall = time.process_time(), time.perf_counter()
        if args.child == "run_agent":
            asyncio.run(bench_run_agent(args.base_url, args.runs, args.concurrency, work))
        else:
            asyncio.run(bench_experiment(args.base_url, args.runs, args.concurrency,
                                         args.evaluators, work))
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps({"cpu_s": cpu, "wall_s": wall, "rss_start_mb": start_rss,
                          "rss_growth_mb": peak - start_rss}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--evaluators", type=int, default=1)
    parser.add_argument("--child", choices=("run_agent", "experiment"))
    parser.add_argument("--base-url")
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    server = subprocess.Popen([sys.executable, str(BENCH / "sayhello_server.py")],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        results: dict[str, list[dict[str, float]]] = {"run_agent": [], "experiment": []}
        for round_ in range(args.rounds):
            for mode in ("run_agent", "experiment"):
                done = subprocess.run(
                    [sys.executable, __file__, "--child", mode, "--base-url", base_url,
                     "--runs", str(args.runs), "--concurrency", str(args.concurrency),
                     "--evaluators", str(args.evaluators)],
                    capture_output=True, text=True, check=False)
                if done.returncode != 0:
                    sys.exit(f"{mode} failed:\n{done.stderr}")
                figures = json.loads(done.stdout.strip().splitlines()[-1])
                results[mode].append(figures)
                print(f"round {round_ + 1} {mode:>10}: CPU {figures['cpu_s']:.2f} s "
                      f"({figures['cpu_s'] / args.runs * 1e6:.0f} us/run), wall "
                      f"{figures['wall_s']:.2f} s, RSS growth "
                      f"{figures['rss_growth_mb']:.1f} MB", flush=True)
    finally:
        server.terminate()
        server.wait()
    base = statistics.median(r["cpu_s"] for r in results["run_agent"])
    exp = statistics.median(r["cpu_s"] for r in results["experiment"])
    growth = max(r["rss_growth_mb"] for r in results["experiment"])
    print(f"\n{args.runs} runs, concurrency {args.concurrency}, {args.evaluators} evaluator(s); "
          f"Python {platform.python_version()}, {os.cpu_count()} CPUs, load "
          f"{os.getloadavg()[0]:.1f}")
    print(f"CPU per run: run_agent {base / args.runs * 1e6:.0f} us, experiment "
          f"{exp / args.runs * 1e6:.0f} us, ratio {exp / base:.3f} (target <= 1.15)")
    print(f"experiment RSS growth (worst round): {growth:.1f} MB (target < 50)")


if __name__ == "__main__":
    main()
