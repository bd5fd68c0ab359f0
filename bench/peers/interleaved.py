"""Floor vs gramagent in one process, batches interleaved: a ratio that load elsewhere on the
machine cannot skew (each contender sees the same conditions, batch after batch).

``python bench/peers/interleaved.py --base-url URL --api chat`` against
``bench/sayhello_server.py``; prints the CPU ms per run of each contender, sequentially and at
``--concurrency`` (100; 0 skips it), and each one's ratio to the floor. The order of the
contenders rotates from round to round, so none always runs right after another. Contenders:
``floor`` (aiohttp, the client gramagent uses), ``floor-httpx``, ``gramagent`` (the tool
declared non-blocking, called inline), ``gramagent-thread`` (a plain function in a worker
thread), ``gramagent-async`` (``async def``) and ``gramagent-nowall`` (as ``gramagent``, without
a wall-time limit: what the deadline of the default limit costs). ``--gc`` also counts the
garbage collections (per generation, and their time) during each contender's concurrent
batches: load elsewhere on the machine does not change those counts.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import floor_loop  # noqa: E402
import gramagent_peer  # noqa: E402
from _harness import EXPECTED, Contender  # noqa: E402

CONTENDERS = ("floor", "floor-httpx", "gramagent", "gramagent-thread", "gramagent-async",
              "gramagent-nowall")
DEFAULT = "floor,gramagent,gramagent-thread,gramagent-async"


async def make(name: str, base_url: str, api: str) -> Contender:
    if name == "floor":
        return await floor_loop.setup(base_url, api, "aiohttp")
    if name == "floor-httpx":
        return await floor_loop.setup(base_url, api, "httpx")
    if name == "gramagent-nowall":
        gramagent_peer.TOOL_KIND = "inline"
        return await gramagent_peer.setup(base_url, api, wall_time=False)
    gramagent_peer.TOOL_KIND = name.partition("-")[2] or "inline"
    return await gramagent_peer.setup(base_url, api)


async def checked(name: str, c: Contender) -> None:
    if EXPECTED not in await c.run():
        raise SystemExit(f"{name} did not quote the tool's greeting")


async def concurrently(name: str, c: Contender, runs: int, concurrency: int) -> None:
    remaining = runs

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await checked(name, c)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


class Collections:
    """Garbage collections (count per generation, seconds) while :attr:`owner` runs."""

    def __init__(self, names: list[str]) -> None:
        self.owner: str | None = None
        self.counts = {name: [0, 0, 0] for name in names}
        self.seconds = dict.fromkeys(names, 0.0)
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if self.owner is None:
            return
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.counts[self.owner][info["generation"]] += 1
            self.seconds[self.owner] += time.perf_counter() - self._started


async def measure(args: argparse.Namespace,
                  collections: Collections | None = None) -> dict[str, dict[str, float]]:
    names = [n for n in args.contenders.split(",") if n]
    cs = {name: await make(name, args.base_url, args.api) for name in names}
    seq = dict.fromkeys(cs, 0.0)
    conc = dict.fromkeys(cs, 0.0)
    try:
        for name, c in cs.items():  # warm up, the pools to the concurrency level included
            for _ in range(args.batch):
                await checked(name, c)
            if args.concurrency:
                await concurrently(name, c, args.concurrency, args.concurrency)
        order = list(cs.items())
        for round_ in range(args.rounds):
            shift = round_ % len(order)
            for name, c in order[shift:] + order[:shift]:
                started = time.process_time()
                for _ in range(args.batch):
                    await checked(name, c)
                seq[name] += time.process_time() - started
                if args.concurrency:
                    if collections is not None:
                        collections.owner = name
                    started = time.process_time()
                    await concurrently(name, c, args.concurrent_batch, args.concurrency)
                    conc[name] += time.process_time() - started
                    if collections is not None:
                        collections.owner = None
    finally:
        for c in cs.values():
            await c.close()
    out = {"sequential": {n: 1000 * t / (args.rounds * args.batch) for n, t in seq.items()}}
    if args.concurrency:
        out[f"c{args.concurrency}"] = {
            n: 1000 * t / (args.rounds * args.concurrent_batch) for n, t in conc.items()}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base-url", required=True)
    p.add_argument("--api", choices=["chat", "responses"], default="chat")
    p.add_argument("--contenders", default=DEFAULT, help=f"from {', '.join(CONTENDERS)}")
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--batch", type=int, default=50, help="sequential runs per batch")
    p.add_argument("--concurrency", type=int, default=100, help="0: sequential only")
    p.add_argument("--concurrent-batch", type=int, default=300,
                   help="runs per concurrent batch")
    p.add_argument("--gc", action="store_true",
                   help="also print the garbage collections of the concurrent batches")
    args = p.parse_args()
    collections = None
    if args.gc:
        collections = Collections([n for n in args.contenders.split(",") if n])
        gc.callbacks.append(collections)
    figures = asyncio.run(measure(args, collections))
    for mode, by_name in figures.items():
        floor = by_name.get("floor") or next(iter(by_name.values()))
        print(args.api, mode, " ".join(f"{n}={ms:.3f}ms ({ms / floor:.2f}x)"
                                       for n, ms in by_name.items()))
    if collections is not None:
        runs = args.rounds * args.concurrent_batch / 1000
        print(args.api, f"c{args.concurrency} gc per 1000 runs (gen0/gen1/gen2, ms):", " ".join(
            f"{n}={'/'.join(f'{k / runs:.1f}' for k in counts)}, "
            f"{1000 * collections.seconds[n] / runs:.1f}ms"
            for n, counts in collections.counts.items()))


if __name__ == "__main__":
    main()
