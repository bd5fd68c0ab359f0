"""An experiment of 10,000 runs on the local engine and on Ray (1 and 2 actors): runs/s and CPU.

The experiment: the A/B example's agent (one tool, ``sayHello``) and its 2 variants (the
``formal`` and ``casual`` libraries of ``examples/ab/greeters.py``), 5,000 cases each, two
evaluators, against a scripted OpenAI-compatible server in a process of
its own (its CPU is not counted). Each mode runs in a fresh process:

- ``local``: the in-process :class:`AsyncioEngine`, ``--concurrency`` runs in flight;
- ``ray1`` / ``ray2``: :class:`RayEngine` with 1 or 2 actors, each with ``--concurrency`` runs
  in flight (as ``gramagent experiment run --engine ray --concurrency N`` does: each actor's
  event loop does the local engine's work), on a local Ray the engine starts (and ships the
  experiment's directory to). With ``--shared`` the actors share ``--concurrency`` instead
  (4 each of 8 for two): each event loop then has fewer runs to wake up for at once, which
  costs CPU per run without Ray (compare ``local`` at ``--concurrency 4`` and at 8).

CPU is read from ``/proc`` between the first finished run and the last (so Ray's start, the
actors' imports and the store's opening are left out; they are printed apart): the driver
(this process: the store's writes, Ray's driver side), the worker actors, and Ray's other
processes (raylet, GCS, idle workers). Ray's added CPU per run is everything a Ray mode spends
per run minus what the local engine spends per run; the target is at most 10% of the latter.

Usage::

    python bench/experiment_scale.py                 # 10,000 runs per mode
    python bench/experiment_scale.py --runs 2000 --modes local ray2
    python bench/experiment_scale.py --rounds 2      # interleaved, the least CPU of each
    python bench/experiment_scale.py --shared        # the actors share --concurrency
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "ab"
"""The A/B example: its agent (hello.gram) and its two sayHello libraries (greeters.py)."""

TICK = os.sysconf("SC_CLK_TCK")
SHARD, CHUNK = 200, 100
"""The Ray engine's defaults (gramagent.experiments._ray)."""


def greeter(path: str, body: Any) -> Any:
    """The scripted model: call sayHello with the user's last word, then answer its output."""
    from gramagent.testing import call, reply

    last = body["messages"][-1]
    if last["role"] == "tool":
        return reply(str(last["content"]), usage=(20, 5))
    return call("sayHello", {"personName": str(last["content"]).split()[-1]})


def serve() -> None:
    """(``--serve``) the scripted server, until stopped (Ctrl-C, SIGTERM); prints its base
    URL first."""
    import threading

    from gramagent.testing import ScriptedServer

    with ScriptedServer(greeter, record=False) as server, contextlib.suppress(
            KeyboardInterrupt):
        print(server.base_url, flush=True)
        threading.Event().wait()


def cpu_of(pid: int) -> float:
    """CPU seconds (user + system) of one process; 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


def descendants(root: int) -> set[int]:
    """Every process below ``root``."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int(
                    (entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


class Meter:
    """CPU of the driver, the actors and Ray's other processes, from the first run on."""

    def __init__(self, engine: Any, server: int) -> None:
        self.engine = engine
        self.server = server
        self.runs = 0
        self.first: dict[str, float] | None = None
        self.last: dict[str, float] = {}
        self.clock = (0.0, 0.0)

    def sample(self) -> dict[str, float]:
        stats = getattr(self.engine, "stats", None)
        workers = {w.pid for w in stats.workers} if stats is not None else set()
        others = descendants(os.getpid()) - workers - {self.server}
        return {"driver": cpu_of(os.getpid()), "workers": sum(map(cpu_of, workers)),
                "ray": sum(map(cpu_of, others)), "wall": time.perf_counter()}

    def record(self, record: Any) -> None:
        self.runs += 1
        if self.first is None:
            self.first = self.sample()
            self.first_runs = self.runs
        elif self.runs % 500 == 0:
            self.last, self.last_runs = self.sample(), self.runs


async def measure(mode: str, runs: int, concurrency: int, base_url: str, server: int,
                  shard: int, chunk: int, shared: bool) -> dict[str, Any]:
    from gramagent import load_agent
    from gramagent.experiments import (
        AsyncioEngine,
        EvaluatorSpec,
        Experiment,
        RayEngine,
        Variant,
        load_cases,
        run_experiment,
    )

    with tempfile.TemporaryDirectory() as tmp:
        here = Path(tmp)
        for name in ("hello.gram", "greeters.py"):  # the experiment's directory, no store
            shutil.copy(EXAMPLE / name, here)
        cases = here / "cases.jsonl"
        cases.write_text("".join(json.dumps({"id": f"c{i}", "input": f"Greet person{i}",
                                             "expected": f"person{i}"}) + "\n"
                                 for i in range(runs // 2)))
        experiment = Experiment(
            name="scale", agent=load_agent(here / "hello.gram"), dataset=load_cases(cases),
            variants=tuple(Variant(name=name, library=f"greeters:{name}",
                                   model="openai/scripted", base_url=base_url)
                           for name in ("formal", "casual")),
            evaluators=(EvaluatorSpec(name="named", kind="contains"),
                        EvaluatorSpec(name="called", kind="tool_called",
                                      options={"tool": "sayHello"})),
            source=str(here / "experiment.gram"))
        engine: Any
        if mode == "local":
            engine = AsyncioEngine(concurrency=concurrency)
        else:
            workers = int(mode.removeprefix("ray"))
            each = max(1, concurrency // workers) if shared else concurrency
            engine = RayEngine(workers=workers, concurrency=each, shard=shard, chunk=chunk,
                               on_status=lambda text: None)
        meter = Meter(engine, server)
        start = time.perf_counter()
        summary = await run_experiment(experiment, engine=engine, store=here / "s.sqlite",
                                       on_record=meter.record)
        total = time.perf_counter() - start
    first, last = meter.first, meter.last
    assert first is not None and last, "too few runs to measure"
    counted = meter.last_runs - meter.first_runs
    wall = last["wall"] - first["wall"]
    per_run = {part: (last[part] - first[part]) / counted * 1e6
               for part in ("driver", "workers", "ray")}
    return {"mode": mode, "runs": summary.ran, "counted": counted,
            "runs_per_s": counted / wall, "total_s": total,
            "before_first_s": first["wall"] - start,
            "driver_us": per_run["driver"], "workers_us": per_run["workers"],
            "ray_us": per_run["ray"], "all_us": sum(per_run.values()),
            "chunks": getattr(getattr(engine, "stats", None), "chunks", None),
            "calls": getattr(getattr(engine, "stats", None), "calls", None)}


def run_mode(mode: str, args: argparse.Namespace, base_url: str, server: int
             ) -> dict[str, Any]:
    """One mode in a fresh process."""
    done = subprocess.run(
        [sys.executable, __file__, "--child", mode, "--runs", str(args.runs),
         "--concurrency", str(args.concurrency), "--base-url", base_url,
         "--shard", str(args.shard), "--chunk", str(args.chunk), "--server-pid", str(server),
         *(["--shared"] if args.shared else [])],
        capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"{mode} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--modes", nargs="+", default=["local", "ray1", "ray2"])
    parser.add_argument("--shard", type=int, default=SHARD, help="keys per actor call")
    parser.add_argument("--chunk", type=int, default=CHUNK, help="records per chunk back")
    parser.add_argument("--shared", action="store_true",
                        help="the actors share --concurrency (else each has it)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="run the modes this many times, interleaved; compare the least "
                             "CPU of each (the round least disturbed by other load)")
    parser.add_argument("--serve", action="store_true", help="(internal) the server")
    parser.add_argument("--child", help="(internal) run one mode and print JSON")
    parser.add_argument("--base-url")
    parser.add_argument("--server-pid", type=int, default=0)
    args = parser.parse_args()
    if args.serve:
        serve()
        return
    if args.child:
        result = asyncio.run(measure(args.child, args.runs, args.concurrency, args.base_url,
                                     args.server_pid, args.shard, args.chunk, args.shared))
        print(json.dumps(result), flush=True)
        return
    server = subprocess.Popen([sys.executable, __file__, "--serve"], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        results: dict[str, dict[str, Any]] = {}
        for round_ in range(args.rounds):
            for mode in args.modes:
                r = run_mode(mode, args, base_url, server.pid)
                print(f"{mode:>5}: {r['runs']} runs, {r['runs_per_s']:.0f} runs/s; CPU per "
                      f"run: driver {r['driver_us']:.0f} us, workers {r['workers_us']:.0f} us, "
                      f"Ray's other processes {r['ray_us']:.0f} us, all {r['all_us']:.0f} us; "
                      f"{r['before_first_s']:.1f} s to the first run"
                      + (f"; {r['calls']} calls, {r['chunks']} chunks" if r["calls"] else "")
                      + (f" (round {round_ + 1})" if args.rounds > 1 else ""), flush=True)
                # the least CPU of the rounds: the one least disturbed by other load
                if mode not in results or r["all_us"] < results[mode]["all_us"]:
                    results[mode] = r
        if "local" in results:
            local = results["local"]["all_us"]
            for mode, r in results.items():
                if mode != "local":
                    added = r["all_us"] - local
                    print(f"{mode}: Ray adds {added:+.0f} us of CPU per run = "
                          f"{added / local:+.1%} of a local run's {local:.0f} us "
                          f"(target <= 10%)" + (" (least of each mode's rounds)"
                                                if args.rounds > 1 else ""))
        flight = ("shared by the actors" if args.shared else
                  "in every event loop (each actor's, the local engine's)")
        print(f"load {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs, {args.concurrency} runs "
              f"in flight {flight}")
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
