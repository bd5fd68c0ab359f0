"""The cost of one MCP tool call over stdio and over streamable HTTP, against a Python tool.

The same Python function (``get_time``, the time in a timezone) is called four ways, through
the runtime's own call path (:func:`gramagent._runtime.invoke.execute`, what the loop does for
every call):

- ``python``: the plain Python tool, in-process (a worker-thread hop);
- ``mcp stdio``: the same tool served by ``gramagent mcp serve`` in a subprocess, called
  through an MCP library over stdio;
- ``mcp http``: the same tool served over streamable HTTP on 127.0.0.1 (a uvicorn thread of
  this process), called through an MCP library;
- ``sdk client stdio``: the SDK's own client calling the served tool of ``mcp stdio``
  directly on the caller's loop (no gramagent client: what the private loop thread costs);
- ``mcp-server-time stdio``: the third-party server's ``get_current_time``, for reference.

Calls are sequential (one at a time); the figures are per call, after warm-up, and the ratio
is to the Python tool of the same run. Run from the repository root::

    python bench/mcp_call.py --calls 300
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from gramagent import Tool, ToolLibrary, tool
from gramagent._runtime.invoke import execute
from gramagent.mcp import StdioServer, build_server, mcp_library, running_http

ROOT = Path(__file__).resolve().parents[1]


@tool
def get_time(timezone: str) -> str:
    """The current time in a timezone, ISO 8601.

    Args:
        timezone: an IANA timezone name.
    """
    return datetime.now(ZoneInfo(timezone)).isoformat(timespec="seconds")


library = ToolLibrary([get_time])
"""What ``gramagent mcp serve --tools bench.mcp_call:library`` serves."""


async def _per_call(t: Tool, arguments: dict[str, str], calls: int) -> list[float]:
    for _ in range(min(20, calls)):  # warm-up: sessions, threads, caches
        outcome = await execute(t, arguments, context=None, timeout=30)
        assert outcome.error_type is None, outcome.output
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        outcome = await execute(t, arguments, context=None, timeout=30)
        times.append(time.perf_counter() - started)
        assert outcome.error_type is None, outcome.output
    return times


async def _sdk_per_call(served: StdioServer, arguments: dict[str, str], calls: int
                        ) -> list[float]:
    params = StdioServerParameters(command=served.command, args=list(served.args),
                                   env=dict(served.env or {}), cwd=served.cwd)
    async with Client(stdio_client(params), read_timeout_seconds=30) as client:
        for _ in range(min(20, calls)):
            await client.call_tool("get_time", arguments)
        times = []
        for _ in range(calls):
            started = time.perf_counter()
            result = await client.call_tool("get_time", arguments)
            times.append(time.perf_counter() - started)
            assert not result.is_error
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="timed calls per way")
    args = parser.parse_args()
    arguments = {"timezone": "Asia/Tokyo"}
    env = {"PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    served = StdioServer(command=sys.executable,
                         args=("-m", "gramagent", "mcp", "serve", "--tools",
                               "bench.mcp_call:library"), env=env, cwd=ROOT)
    results: dict[str, list[float]] = {}
    results["python"] = asyncio.run(_per_call(get_time, arguments, args.calls))
    with mcp_library(served) as remote:
        results["mcp stdio"] = asyncio.run(
            _per_call(remote.lookup("get_time"), arguments, args.calls))  # type: ignore[arg-type]
    results["sdk client stdio"] = asyncio.run(_sdk_per_call(served, arguments, args.calls))
    with running_http(build_server(library)) as url, mcp_library(url) as remote:
        results["mcp http"] = asyncio.run(
            _per_call(remote.lookup("get_time"), arguments, args.calls))  # type: ignore[arg-type]
    with mcp_library([sys.executable, "-m", "mcp_server_time"]) as remote:
        results["mcp-server-time stdio"] = asyncio.run(
            _per_call(remote.lookup("get_current_time"), arguments, args.calls))  # type: ignore[arg-type]
    base = statistics.median(results["python"])
    print(f"{args.calls} sequential calls per way, Python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print(f"{'way':<24}{'median µs':>12}{'mean µs':>12}{'p90 µs':>12}{'x python':>10}")
    for name, times in results.items():
        ordered = sorted(times)
        median = statistics.median(ordered)
        print(f"{name:<24}{median * 1e6:>12.0f}{statistics.fmean(ordered) * 1e6:>12.0f}"
              f"{ordered[int(len(ordered) * 0.9)] * 1e6:>12.0f}{median / base:>10.1f}")


if __name__ == "__main__":
    main()
