"""Measurement harness shared by every contender of ``bench/loop_overhead.py``.

Stdlib only: it runs inside the peers' own virtualenvs too (``bench/.venvs/``), where gramagent
is not installed. A contender script defines ``async setup(base_url, api) -> Contender`` and
calls :func:`main`; the harness warms up, then measures

- ``sequential``: ``--runs`` runs one after another;
- ``concurrent``: ``--concurrency`` workers sharing ``--concurrent-runs`` runs,

and prints one JSON object: client CPU per run (``time.process_time()`` of this process only,
all threads; the scripted server runs in another process) and runs per second of wall time.
Every run's final text must contain the greeting the tool produced, so a contender that skips
the tool call cannot post a figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

EXPECTED = "Hello, Alice! Nice to meet you."
"""What sayHello returns for Alice; the scripted server's final answer quotes the tool result."""

USER_MESSAGE = "Hi, I'm Alice"
INSTRUCTION = "You are a friendly agent. Greet people by name using the sayHello tool."
TOOL_NAME = "sayHello"
TOOL_DESCRIPTION = "Greets a person by name."
TOOL_PARAMETERS = {
    "type": "object",
    "properties": {"personName": {"type": "string", "default": "world"}},
    "required": [],
    "additionalProperties": False,
}


def say_hello(personName: str = "world") -> str:  # noqa: N803  (the tool's wire name)
    """The sayHello tool, as every contender implements it."""
    return f"Hello, {personName}! Nice to meet you."


@dataclass
class Contender:
    """One contender, ready to run: ``run()`` does one whole conversation, returns its text."""

    run: Callable[[], Awaitable[str]]
    close: Callable[[], Awaitable[None]]
    version: str = ""


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--base-url", required=True)
    p.add_argument("--api", choices=["chat", "responses"], required=True)
    p.add_argument("--runs", type=int, default=200, help="sequential runs")
    p.add_argument("--concurrency", type=int, default=100)
    p.add_argument("--concurrent-runs", type=int, default=1000)
    p.add_argument("--warmup", type=int, default=20)
    return p.parse_args(argv)


async def _check(run: Callable[[], Awaitable[str]]) -> None:
    text = await run()
    if EXPECTED not in text:
        raise SystemExit(f"contender answered {text!r}, expected it to quote {EXPECTED!r}")


async def _sequential(contender: Contender, runs: int) -> dict[str, float]:
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for _ in range(runs):
        await _check(contender.run)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return {"runs": runs, "cpu_ms_per_run": 1000 * cpu / runs, "runs_per_s": runs / wall}


async def _concurrent(contender: Contender, runs: int, concurrency: int) -> dict[str, float]:
    remaining = runs

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await _check(contender.run)

    cpu0, wall0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return {
        "runs": runs,
        "concurrency": concurrency,
        "cpu_ms_per_run": 1000 * cpu / runs,
        "runs_per_s": runs / wall,
    }


def main(
    setup: Callable[[str, str], Awaitable[Contender]], argv: list[str] | None = None
) -> None:
    """Measure the contender ``setup`` builds and print the figures as one JSON line."""
    args = _parse(argv)

    async def amain() -> dict[str, object]:
        contender = await setup(args.base_url, args.api)
        try:
            for _ in range(args.warmup):
                await _check(contender.run)
            seq = await _sequential(contender, args.runs)
            # Warm the pool up to the concurrency level before measuring.
            await _concurrent(contender, min(args.concurrency, args.concurrent_runs),
                              args.concurrency)
            conc = await _concurrent(contender, args.concurrent_runs, args.concurrency)
        finally:
            await contender.close()
        return {
            "api": args.api,
            "version": contender.version,
            "python": sys.version.split()[0],
            "sequential": seq,
            "concurrent": conc,
        }

    print(json.dumps(asyncio.run(amain())))
