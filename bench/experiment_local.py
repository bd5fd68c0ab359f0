"""Runs per minute of an experiment on the embedded model: one at a time vs parallel slots.

The experiment is ``examples/ab/experiment.gram`` cut to its first ``--cases`` cases (both
variants, so ``2 x cases`` runs). Each mode runs in its own process with its own embedded
llama.cpp server:

- ``sequential``: concurrency 1, the server started with 1 slot;
- ``parallel``: concurrency ``--slots``, the server started with as many slots (llama.cpp
  decodes the concurrent requests together: continuous batching).

The wall time counts from the first run to the last (the server is started and warmed by one
run before the clock starts). Prints runs per minute of each mode and their ratio.

Usage::

    python bench/experiment_local.py --cases 6 --slots 4
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "ab" / "experiment.gram"


async def measure(cases: int, concurrency: int) -> dict[str, float]:
    from gramagent._models.local import shutdown_servers
    from gramagent.experiments import (
        AsyncioEngine,
        Dataset,
        load_experiment,
        report,
        run_experiment,
    )

    full = load_experiment(EXAMPLE)
    subset = Dataset(path=full.dataset.path, cases=full.dataset.cases[:cases + 1],
                     fingerprint=f"{full.dataset.fingerprint}:{cases + 1}")
    experiment = dataclasses.replace(full, dataset=subset)
    engine = AsyncioEngine(concurrency=concurrency, local_slots=concurrency)
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store.sqlite"
        warm = dataclasses.replace(experiment, dataset=dataclasses.replace(
            subset, cases=subset.cases[:1], fingerprint="warm"))
        await run_experiment(warm, store=Path(tmp) / "warm.sqlite", engine=engine)
        # the timed experiment: the other cases (the first one warmed the server)
        timed = dataclasses.replace(experiment, dataset=dataclasses.replace(
            subset, cases=subset.cases[1:], fingerprint="timed"))
        start = time.perf_counter()
        summary = await run_experiment(timed, store=store, engine=engine)
        wall = time.perf_counter() - start
        result = report(store)
    shutdown_servers()
    answered = sum(v.stops.get("answer", 0) + v.stops.get("repeated_call", 0)
                   for v in result.variants)
    return {"runs": summary.ran, "wall_s": wall, "runs_per_minute": summary.ran / wall * 60,
            "answered": answered}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=6)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--child", type=int, help="(internal) run one mode at this "
                                                  "concurrency and print JSON")
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(asyncio.run(measure(args.cases, args.child))))
        return
    results = {}
    for mode, concurrency in (("sequential", 1), ("parallel", args.slots)):
        done = subprocess.run([sys.executable, __file__, "--cases", str(args.cases),
                               "--child", str(concurrency)], capture_output=True, text=True,
                              check=False)
        if done.returncode != 0:
            sys.exit(f"{mode} failed:\n{done.stderr[-3000:]}")
        results[mode] = json.loads(done.stdout.strip().splitlines()[-1])
        r = results[mode]
        print(f"{mode:>10} (concurrency {concurrency}): {r['runs']} runs in {r['wall_s']:.1f} s"
              f" = {r['runs_per_minute']:.2f} runs/min ({r['answered']} answered)", flush=True)
    ratio = results["parallel"]["runs_per_minute"] / results["sequential"]["runs_per_minute"]
    print(f"parallel slots / sequential: {ratio:.2f}x; load {os.getloadavg()[0]:.1f}, "
          f"{os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
