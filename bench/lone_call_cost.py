"""What asking a lone call whether more calls follow costs a single-call reply.

The embedded model continues a constrained reply that is one call (``continue_lone_calls``,
bench/RESULTS.md "BFCL", issue 19): one more request whose schema is a list opening with that
call, so the model chooses between ``]`` and ``,``. A reply that is one call, like the
hello-world agent's ``sayHello``, pays for that request. This runs the hello-world agent on
"Hi, I'm Alice" with the continuation on and off, alternating, on one embedded server (both
models share it), and prints the median seconds of a run with the ratio on/off, and the
steps, calls and tokens of a run.

Usage::

    python bench/lone_call_cost.py --rounds 5 --threads 1
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path
from typing import Any

from gramagent._models.local import LocalModel, local_model
from gramagent._runtime.loop import run_agent
from gramagent._spec.gram.text import load_agent
from gramagent.tools import builtin_library

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "hello_world.gram"


async def one_run(agent: Any, model: LocalModel) -> tuple[float, str]:
    """Seconds of the whole run, and what it did (steps, calls, tokens)."""
    start = time.perf_counter()
    response = await run_agent(agent, "Hi, I'm Alice", library=builtin_library(), model=model)
    seconds = time.perf_counter() - start
    usage = response.usage
    return seconds, (f"{usage.requests} model steps, {len(response.tool_invocations)} tool "
                     f"calls, {usage.input_tokens} + {usage.output_tokens} tokens")


async def main_async(args: argparse.Namespace) -> None:
    agent = load_agent(EXAMPLE)
    models = {
        "on": local_model(agent.model, threads=args.threads),
        "off": local_model(agent.model, threads=args.threads, continue_lone_calls=False),
    }
    times: dict[str, list[float]] = {"on": [], "off": []}
    shape: dict[str, str] = {}
    try:
        for model in models.values():
            await model.start()
            await one_run(agent, model)  # warm the prompt cache and the pages
        for _ in range(args.rounds):
            for name, model in models.items():
                seconds, shape[name] = await one_run(agent, model)
                times[name].append(seconds)
    finally:
        for model in models.values():
            await model.aclose()
    for name in ("off", "on"):
        print(f"continuation {name:<3}: median {statistics.median(times[name]):.2f} s per run "
              f"({args.rounds} runs; the last: {shape[name]})")
    ratio = statistics.median(times["on"]) / statistics.median(times["off"])
    print(f"ratio on/off: {ratio:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
