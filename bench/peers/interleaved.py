"""Floor vs gramagent in one process, batches interleaved: a ratio that load elsewhere on the
machine cannot skew (each contender sees the same conditions, batch after batch).

``python bench/peers/interleaved.py --base-url URL --api chat`` against
``bench/sayhello_server.py``; prints CPU ms per run of ``floor``, ``gramagent`` (sync tool) and
``gramagent-async`` (async tool), and each one's ratio to the floor.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import floor_loop  # noqa: E402
import gramagent_peer  # noqa: E402
from _harness import EXPECTED, Contender  # noqa: E402


async def contenders(base_url: str, api: str) -> dict[str, Contender]:
    out = {"floor": await floor_loop.setup(base_url, api)}
    gramagent_peer.ASYNC_TOOL = False
    out["gramagent"] = await gramagent_peer.setup(base_url, api)
    gramagent_peer.ASYNC_TOOL = True
    out["gramagent-async"] = await gramagent_peer.setup(base_url, api)
    return out


async def measure(args: argparse.Namespace) -> dict[str, float]:
    cs = await contenders(args.base_url, args.api)
    cpu = dict.fromkeys(cs, 0.0)
    try:
        for c in cs.values():
            for _ in range(args.batch):
                await c.run()
        for _ in range(args.rounds):
            for name, c in cs.items():
                started = time.process_time()
                for _ in range(args.batch):
                    if EXPECTED not in await c.run():
                        raise SystemExit(f"{name} did not quote the tool's greeting")
                cpu[name] += time.process_time() - started
    finally:
        for c in cs.values():
            await c.close()
    runs = args.rounds * args.batch
    return {name: 1000 * total / runs for name, total in cpu.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base-url", required=True)
    p.add_argument("--api", choices=["chat", "responses"], default="chat")
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--batch", type=int, default=50)
    args = p.parse_args()
    figures = asyncio.run(measure(args))
    floor = figures["floor"]
    print(args.api, " ".join(f"{n}={ms:.3f}ms ({ms / floor:.2f}x)" for n, ms in figures.items()))


if __name__ == "__main__":
    main()
