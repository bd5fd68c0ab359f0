"""Loop overhead: client CPU per run and runs/s of gramagent against a floor and two peers.

The conversation is the sayHello one: a user message, one tool call, a final text (two model
requests per run). The scripted server runs in its own process; each contender runs in its own
process too (the peers in their own virtualenvs under ``bench/.venvs/``), so the CPU time each
reports (``time.process_time()``, all threads of that process) is the client's alone.

Contenders:

- ``floor``: ``bench/floor_loop.py``, a minimal hand-written loop on bare aiohttp (the client
  gramagent uses, configured and called as gramagent calls it), sending the same requests;
  ``floor-httpx``: the same loop on httpx (gramagent's client before), for comparison;
- ``gramagent``: ``bench/peers/gramagent_peer.py``, ``run_agent`` with ``sayHello`` written as
  a plain function declared ``@tool(blocking=False)`` (called inline on the event loop, as the
  floor calls it); ``gramagent-thread``: the same function without that declaration (run in a
  worker thread, the default for plain functions); ``gramagent-async``: the tool written
  ``async def``; ``gramagent-otel``: ``gramagent`` with OpenTelemetry tracing on (an SDK
  provider, a batch processor, an exporter that drops the spans: the cost of making them);
- ``openai-agents`` and ``pydantic-ai``: ``bench/peers/*_peer.py`` in their own venvs
  (created on first use, or with ``--setup``: ``pip install openai-agents`` and
  ``pip install "pydantic-ai-slim[openai]"``).

Each is measured sequentially (``--runs``) and at concurrency 100 (``--concurrent-runs``), for
the ``chat`` and ``responses`` wire formats. Then the parallel-calls check: one turn with 8
tool calls whose tools each sleep 200 ms, timed end to end through ``run_agent``.

Usage::

    python bench/loop_overhead.py                 # everything, prints a table
    python bench/loop_overhead.py --setup         # only create the peers' venvs
    python bench/loop_overhead.py --contenders floor,gramagent --apis chat
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import venv
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
VENVS = BENCH / ".venvs"
PEERS = BENCH / "peers"

PEER_VENVS: dict[str, tuple[str, tuple[str, ...]]] = {
    # venv name: (module that must import, pip requirements)
    "openai-agents": ("agents", ("openai-agents",)),
    "pydantic-ai": ("pydantic_ai", ("pydantic-ai-slim[openai]",)),
}
SCRIPTS = {
    "floor": BENCH / "floor_loop.py",
    "floor-httpx": BENCH / "floor_loop.py",
    "gramagent": PEERS / "gramagent_peer.py",
    "gramagent-thread": PEERS / "gramagent_peer.py",
    "gramagent-async": PEERS / "gramagent_peer.py",
    "gramagent-otel": PEERS / "gramagent_peer.py",
    "openai-agents": PEERS / "openai_agents_peer.py",
    "pydantic-ai": PEERS / "pydantic_ai_peer.py",
}
CONTENDERS = tuple(SCRIPTS)
APIS = ("chat", "responses")


# -- the peers' virtualenvs -------------------------------------------------------------------


def venv_python(name: str) -> Path:
    return VENVS / name / "bin" / "python"


def ensure_venv(name: str) -> Path | None:
    """The peer's venv python, created and installed on first use; None if that failed."""
    module, requirements = PEER_VENVS[name]
    python = venv_python(name)
    if python.exists() and _imports(python, module):
        return python
    print(f"[setup] preparing {VENVS / name} (pip install {' '.join(requirements)})",
          file=sys.stderr)
    VENVS.mkdir(parents=True, exist_ok=True)
    (VENVS / ".gitignore").write_text("*\n")
    if not python.exists():
        venv.EnvBuilder(with_pip=True).create(VENVS / name)
    done = subprocess.run([str(python), "-m", "pip", "install", "-q", *requirements],
                          check=False)
    if done.returncode != 0 or not _imports(python, module):
        print(f"[setup] installing {name} failed; skipping it", file=sys.stderr)
        return None
    return python


def _imports(python: Path, module: str) -> bool:
    done = subprocess.run([str(python), "-c", f"import {module}"], capture_output=True,
                          check=False)
    return done.returncode == 0


# -- the scripted server ----------------------------------------------------------------------


class Server:
    """The scripted server in its own process, answering the sayHello conversation."""

    def __init__(self) -> None:
        self.process: subprocess.Popen[str] | None = None
        self.base_url = ""

    def __enter__(self) -> Server:
        self.process = subprocess.Popen(
            [sys.executable, str(BENCH / "sayhello_server.py"), "--port", "0"],
            stdout=subprocess.PIPE, text=True, cwd=ROOT,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if not line.startswith("http"):
            self.process.kill()
            raise SystemExit(f"the scripted server did not start (said {line!r})")
        self.base_url = line
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)


# -- measuring --------------------------------------------------------------------------------


def measure(contender: str, python: Path, base_url: str, api: str,
            args: argparse.Namespace) -> dict[str, Any] | None:
    """Run one contender's script in its own process; its JSON figures, or None on failure."""
    cmd = [
        str(python), str(SCRIPTS[contender]), "--base-url", base_url, "--api", api,
        "--runs", str(args.runs), "--concurrent-runs", str(args.concurrent_runs),
        "--concurrency", str(args.concurrency), "--warmup", str(args.warmup),
    ]
    # A PYTHONPATH already set (a worktree's src) comes after the peers' folder, so the
    # gramagent measured is the one the caller chose, not only the installed one.
    inherited = os.environ.get("PYTHONPATH")
    env = {**os.environ,
           "PYTHONPATH": str(PEERS) + (os.pathsep + inherited if inherited else "")}
    env.pop("OPENAI_API_KEY", None)
    if contender == "floor-httpx":
        env["GRAMAGENT_BENCH_CLIENT"] = "httpx"
    if contender == "gramagent-otel":
        env["GRAMAGENT_BENCH_TOOL"] = "inline"
        env["GRAMAGENT_BENCH_OTEL"] = "1"
    elif contender.startswith("gramagent"):
        env["GRAMAGENT_BENCH_TOOL"] = contender.partition("-")[2] or "inline"
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-8:])
        print(f"[{contender}/{api}] failed (exit {done.returncode}):\n{tail}", file=sys.stderr)
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def median_figures(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """One contender's figures: the median of each measure over its samples."""
    out = dict(samples[0])
    for mode in ("sequential", "concurrent"):
        out[mode] = dict(samples[0][mode])
        for key in ("cpu_ms_per_run", "runs_per_s"):
            out[mode][key] = statistics.median(s[mode][key] for s in samples)
    out["samples"] = len(samples)
    return out


def table(results: dict[tuple[str, str], dict[str, Any]]) -> str:
    """A markdown table: CPU ms/run and runs/s per contender, wire format and mode."""
    lines = [
        "| api | contender | seq CPU ms/run | seq runs/s | c100 CPU ms/run | c100 runs/s "
        "| CPU vs floor (seq / c100) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for (api, contender), r in results.items():
        floor = results.get((api, "floor"))
        seq, conc = r["sequential"], r["concurrent"]
        if floor:
            ratio = (f"{seq['cpu_ms_per_run'] / floor['sequential']['cpu_ms_per_run']:.2f}x / "
                     f"{conc['cpu_ms_per_run'] / floor['concurrent']['cpu_ms_per_run']:.2f}x")
        else:
            ratio = "n/a"
        lines.append(
            f"| {api} | {contender} ({r['version']}) | {seq['cpu_ms_per_run']:.3f} | "
            f"{seq['runs_per_s']:.0f} | {conc['cpu_ms_per_run']:.3f} | {conc['runs_per_s']:.0f} "
            f"| {ratio} |"
        )
    return "\n".join(lines)


def verdicts(results: dict[tuple[str, str], dict[str, Any]]) -> list[str]:
    """The targets: within 1.3x of the floor, at least 4x below openai-agents."""
    out = []
    for api in APIS:
        ours, floor = results.get((api, "gramagent")), results.get((api, "floor"))
        oa = results.get((api, "openai-agents"))
        for mode in ("sequential", "concurrent"):
            if ours and floor:
                r = ours[mode]["cpu_ms_per_run"] / floor[mode]["cpu_ms_per_run"]
                out.append(f"{api}/{mode}: gramagent CPU = {r:.2f}x floor "
                           f"({'meets' if r <= 1.3 else 'MISSES'} the 1.3x target)")
            if ours and oa:
                r = oa[mode]["cpu_ms_per_run"] / ours[mode]["cpu_ms_per_run"]
                out.append(f"{api}/{mode}: openai-agents CPU = {r:.1f}x gramagent "
                           f"({'meets' if r >= 4 else 'MISSES'} the 4x target)")
    return out


# -- parallel tool calls ----------------------------------------------------------------------


def parallel_calls(kind: str, n: int = 8, sleep: float = 0.2) -> float:
    """Seconds one run takes when the model asks for ``n`` tools that each sleep ``sleep`` s.

    The scripted server (in this process: only wall time matters here) answers the first
    request with ``n`` parallel calls and the second with a text; ``kind`` is ``async`` (tools
    ``await asyncio.sleep``) or ``sync`` (tools call ``time.sleep``, run in worker threads).
    The whole run is timed (both model requests included), warm, best of three.
    """
    from gramagent._models.registry import resolve_model
    from gramagent._runtime.library import ToolLibrary, tool
    from gramagent._runtime.loop import run_agent
    from gramagent._spec.model import Agent, ModelRef
    from gramagent.testing import ScriptedServer, call, calls, reply

    def make(i: int) -> Any:
        if kind == "async":
            async def nap() -> str:
                await asyncio.sleep(sleep)
                return "done"
        else:
            def nap() -> str:
                time.sleep(sleep)
                return "done"
        nap.__doc__ = f"Sleeps {sleep} s, then says done."
        return tool(name=f"nap{i}")(nap)

    library = ToolLibrary([make(i) for i in range(n)])
    agent = Agent(
        name="napper", model=ModelRef.parse("openai/gpt-4o-mini"),
        instruction="Call every nap tool at once.",
        tools=tuple(t.spec() for t in library),
    )
    script = [calls(*(call(f"nap{i}", {}) for i in range(n))), reply("all done")]
    bound = library.bind(agent)
    with ScriptedServer(script, loop=True) as server:
        model = resolve_model(ModelRef.parse("openai/gpt-4o-mini"), api="chat",
                              base_url=server.base_url, api_key="sk-bench-parallel")

        async def once() -> float:
            started = time.perf_counter()
            response = await run_agent(bound, "nap", model=model)
            elapsed = time.perf_counter() - started
            assert len(response.tool_invocations) == n, response.tool_invocations
            assert all(i.error_type is None for i in response.tool_invocations)
            return elapsed

        async def best_of(rounds: int) -> float:
            await once()  # warm: imports, connection, worker threads
            try:
                return min([await once() for _ in range(rounds)])
            finally:
                await model.aclose()

        return asyncio.run(best_of(3))


# -- main -------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--setup", action="store_true", help="only create the peers' venvs")
    p.add_argument("--contenders", default=",".join(CONTENDERS))
    p.add_argument("--apis", default=",".join(APIS))
    p.add_argument("--runs", type=int, default=300, help="sequential runs per contender")
    p.add_argument("--concurrent-runs", type=int, default=1000)
    p.add_argument("--concurrency", type=int, default=100)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--repeat", type=int, default=3,
                   help="measure each contender this many times; report the medians")
    p.add_argument("--no-parallel", action="store_true", help="skip the parallel-calls check")
    args = p.parse_args(argv)

    contenders = [c for c in args.contenders.split(",") if c]
    pythons: dict[str, Path] = {}
    for name in contenders:
        if name in PEER_VENVS:
            python = ensure_venv(name)
            if python is not None:
                pythons[name] = python
        elif name in SCRIPTS:
            pythons[name] = Path(sys.executable)
        else:
            raise SystemExit(f"unknown contender {name!r} (known: {', '.join(CONTENDERS)})")
    if args.setup:
        return

    print(f"# {platform.python_implementation()} {platform.python_version()} on "
          f"{platform.machine()}, {os.cpu_count()} CPUs; commit {_commit()}")
    samples: dict[tuple[str, str], list[dict[str, Any]]] = {}
    with Server() as server:
        # Round-robin over the contenders, --repeat times: a burst of load from elsewhere on
        # the machine then spoils one sample of each rather than all samples of one.
        for round_ in range(args.repeat):
            for api in [a for a in args.apis.split(",") if a]:
                for name in contenders:
                    if name not in pythons:
                        continue
                    print(f"[{name}/{api}] round {round_ + 1}/{args.repeat}...",
                          file=sys.stderr, flush=True)
                    figures = measure(name, pythons[name], server.base_url, api, args)
                    if figures is not None:
                        samples.setdefault((api, name), []).append(figures)
    results = {key: median_figures(runs) for key, runs in samples.items()}
    print(table(results))
    for line in verdicts(results):
        print(line)
    if not args.no_parallel:
        for kind in ("async", "sync"):
            elapsed = parallel_calls(kind)
            print(f"parallel calls ({kind} tools): 8 tools x 200 ms in one turn: "
                  f"{elapsed * 1000:.0f} ms for the whole run "
                  f"({'meets' if elapsed < 0.3 else 'MISSES'} the < 300 ms target)")


def _commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, cwd=ROOT, check=False)
    return done.stdout.strip() or "unknown"


if __name__ == "__main__":
    main()
