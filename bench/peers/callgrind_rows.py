"""Instructions per run (callgrind) of gramagent next to the floor, row by row.

``python bench/peers/callgrind_rows.py`` starts a scripted server in this process, then, for
each row and contender, runs a child process under ``valgrind --tool=callgrind
--instr-atstart=no``: the child sets its contender up and warms it up uninstrumented, switches
instrumentation on (a client request from a tiny C helper, compiled on first use), does
``--runs`` runs, and switches it off. Instruction counts do not depend on the load of the
machine, so the ratio of one row is repeatable to about a percent (``PYTHONHASHSEED=0``).

Rows (every run's answer is checked; both contenders send the same requests):

``call1`` / ``call1-responses``
    the sayHello conversation (one call, then the answer), chat / Responses;
``calls8-inline`` / ``calls8-async`` / ``calls8-thread``
    the first reply asks for 8 calls at once (distinct arguments); gramagent's tool is
    ``blocking=False``, ``async def``, or a plain function in a worker thread; the floor calls
    its plain function 8 times in sequence (the floor the ratio is taken against); the async
    and thread rows also show the floor running its calls concurrently, as gramagent must run
    such tools (``floor-async``: an ``async def`` tool, each call in a task of
    ``asyncio.gather``; ``floor-thread``: the plain function in a thread pool, each call through
    ``run_in_executor``, gathered), and gramagent's ratio to that;
``history-chat`` / ``history-responses``
    every run continues a 100-message conversation (25 rounds of user, call, result, answer);
``tools20``
    as ``call1`` with 20 declared tools (sayHello and 19 that are never called).

``--keep DIR`` keeps each child's callgrind file (``callgrind_annotate DIR/ROW.CONTENDER.out``
gives the C-level cost per function; without it they go to a temporary directory removed at
the end); ``--cprofile ROW`` instead profiles gramagent's runs
of one row with cProfile (no valgrind) and prints the top functions; ``--opcodes ROW`` counts
the bytecodes gramagent's own functions execute per run (``sys.settrace``), and for a row of
several calls, per extra call (the row minus ``call1``, over the extra calls).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import cProfile
import ctypes
import gc
import hashlib
import os
import pstats
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import floor_loop  # noqa: E402
import gramagent_peer  # noqa: E402
from _harness import EXPECTED, Contender  # noqa: E402

from gramagent._messages import (  # noqa: E402
    AssistantMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from gramagent._models.chat_request import chat_messages  # noqa: E402
from gramagent._models.responses import responses_input  # noqa: E402
from gramagent._runtime.library import Tool, ToolLibrary, tool  # noqa: E402
from gramagent._spec.model import Agent, ModelRef  # noqa: E402
from gramagent.testing import ScriptedServer, ScriptTurn, call, calls, reply  # noqa: E402


@dataclass(frozen=True)
class Row:
    api: str
    tool_kind: str = "inline"
    calls: int = 1
    history: int = 0
    tools: int = 1


ROWS = {
    "call1": Row("chat"),
    "call1-responses": Row("responses"),
    "calls8-inline": Row("chat", calls=8),
    "calls8-async": Row("chat", "async", calls=8),
    "calls8-thread": Row("chat", "thread", calls=8),
    "history-chat": Row("chat", history=100),
    "history-responses": Row("responses", history=100),
    "tools20": Row("chat", tools=20),
}
PEOPLE = ("Alice", "Bob", "Carol", "Dan", "Eve", "Frank", "Grace", "Heidi")


# -- the server -------------------------------------------------------------------------------


def _trailing_outputs(path: str, body: Any) -> list[str]:
    """The tool outputs that end the conversation of ``body`` (none: it ends with the user)."""
    if path.endswith("/responses"):
        items, key, kind = body["input"], "output", ("type", "function_call_output")
    else:
        items, key, kind = body["messages"], "content", ("role", "tool")
    out: list[str] = []
    for item in reversed(items):
        if item.get(kind[0]) != kind[1]:
            break
        out.append(item[key])
    return out[::-1]


def answer(path: str, body: Any, *, n: int) -> ScriptTurn:
    """Call sayHello for ``n`` people, or answer quoting every output that ends ``body``."""
    outputs = _trailing_outputs(path, body)
    if outputs:
        return reply("Said: " + " ".join(outputs))
    if n == 1:
        return call("sayHello", {"personName": "Alice"})
    return calls(*(call("sayHello", {"personName": p}, id=f"call_{k}")
                   for k, p in enumerate(PEOPLE[:n])))


# -- contenders -------------------------------------------------------------------------------


def _unused(personName: str = "world") -> str:  # noqa: N803  (the tools' wire name)
    """Never called."""
    return personName


def extra_tools(row: Row) -> list[Tool]:
    return [tool(_unused, name=f"unused{i}", description=f"Unused tool {i}.", blocking=False)
            for i in range(1, row.tools)]


def history(row: Row) -> list[Message]:
    out: list[Message] = []
    for i in range(row.history // 4):
        person = f"Person{i}"
        greeting = f"Hello, {person}! Nice to meet you."
        call_id = f"call_h{i}"
        out += [
            UserMessage(content=f"Hi, I'm {person}"),
            AssistantMessage(tool_calls=(ToolCall(
                id=call_id, name="sayHello", arguments=f'{{"personName": "{person}"}}'),)),
            ToolResultMessage(call_id=call_id, name="sayHello", content=greeting),
            AssistantMessage(content=f"Said: {greeting}"),
        ]
    return out


async def make(contender: str, row: Row, base_url: str) -> Contender:
    tools = extra_tools(row)
    past = history(row)
    if contender.startswith("floor"):  # the same tools and history, in wire form, rendered once
        definitions = ToolLibrary(tools).bind(Agent(
            name="extra", model=ModelRef.parse("openai/gpt-4o-mini"), instruction="unused",
            tools=tuple(t.spec() for t in tools))).definitions if tools else ()
        wire = [{"name": d.name, "description": d.description, "parameters": d.parameters}
                for d in definitions]
        rendered = (chat_messages("", past) if row.api == "chat"
                    else responses_input("", past))
        tools_kind = contender.partition("-")[2] or "sequential"
        return await floor_loop.setup(base_url, row.api, "aiohttp", extra_tools=wire,
                                      history=rendered, tools=tools_kind)
    gramagent_peer.TOOL_KIND = row.tool_kind
    return await gramagent_peer.setup(base_url, row.api, extra_tools=tools, history=past)


def expected(row: Row) -> list[str]:
    return [EXPECTED.replace("Alice", p) for p in PEOPLE[:row.calls]]


async def checked(c: Contender, row: Row) -> None:
    text = await c.run()
    missing = [e for e in expected(row) if e not in text]
    if missing:
        raise SystemExit(f"the run answered {text!r}, without {missing[0]!r}")


# -- the child under callgrind ----------------------------------------------------------------

_HELPER = r"""
#include <valgrind/callgrind.h>
void gramagent_bench_start(void) { CALLGRIND_ZERO_STATS; CALLGRIND_START_INSTRUMENTATION; }
void gramagent_bench_stop(void) { CALLGRIND_STOP_INSTRUMENTATION; }
"""


def _helper() -> ctypes.CDLL:
    """The compiled client-request helper (cached by its source's hash)."""
    tag = hashlib.sha256(_HELPER.encode()).hexdigest()[:12]
    lib = Path(tempfile.gettempdir()) / f"gramagent-callgrind-{tag}.so"
    if not lib.exists():
        src = lib.with_suffix(".c")
        src.write_text(_HELPER)
        tmp = lib.with_suffix(f".{os.getpid()}.so")
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(tmp), str(src)], check=True)
        tmp.replace(lib)
    return ctypes.CDLL(str(lib))


async def measured(contender: str, row: Row, base_url: str, args: argparse.Namespace,
                   start: Callable[[], object], stop: Callable[[], object]) -> None:
    """Warm ``contender`` up on ``row``, then ``start()``, ``args.runs`` runs, ``stop()``."""
    c = await make(contender, row, base_url)
    try:
        for _ in range(args.warmup):
            await checked(c, row)
        # Each contender starts its measured runs with no garbage pending: a run leaves a few
        # tracked objects behind (caches, the event loop's), so whether a young-generation
        # collection (~200k instructions) fell inside the measured runs depended on where the
        # warm-up left the count, and moved a row by ~1% from one invocation to the next.
        gc.collect()
        start()
        for _ in range(args.runs):
            await checked(c, row)
        stop()
    finally:
        await c.close()


async def child(args: argparse.Namespace) -> None:
    helper = _helper()
    await measured(args.contender, ROWS[args.row], args.base_url, args,
                   helper.gramagent_bench_start, helper.gramagent_bench_stop)


def instructions(out_file: Path) -> int:
    for line in out_file.read_text().splitlines():  # "summary:" says 0 after a zeroing
        if line.startswith("totals:"):
            return int(line.split()[1])
    raise SystemExit(f"no totals in {out_file}")


def callgrind(out: Path, script: str, child_args: list[str], what: str) -> int:
    """The instructions ``script --child CHILD_ARGS`` counts under callgrind (the child
    switches the instrumentation on and off itself), its callgrind file written to ``out``;
    ``what`` names it when it fails. The callgrind scripts of bench/peers share it."""
    cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
           f"--callgrind-out-file={out}", sys.executable, script, "--child", *child_args]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{what} failed:\n{done.stderr[-3000:]}")
    return instructions(out)


def measure(row: str, contender: str, base_url: str, args: argparse.Namespace,
            keep: Path) -> float:
    child_args = ["--row", row, "--contender", contender, "--base-url", base_url,
                  "--runs", str(args.runs), "--warmup", str(args.warmup)]
    return callgrind(keep / f"{row}.{contender}.out", __file__, child_args,
                     f"{row} {contender}") / args.runs


def cprofile(args: argparse.Namespace, base_url: str) -> None:
    profile = cProfile.Profile()
    asyncio.run(measured("gramagent", ROWS[args.cprofile], base_url, args, profile.enable,
                         profile.disable))
    pstats.Stats(profile).sort_stats("tottime").print_stats(35)


def opcodes(row: str, args: argparse.Namespace) -> collections.Counter[str]:
    """Bytecodes executed per run in each of gramagent's functions, over ``args.runs`` runs
    of ``row`` (functions made by ``exec``, such as the frozen types' constructors, are named
    with their caller)."""
    counts: collections.Counter[str] = collections.Counter()

    def trace(frame: FrameType, event: str, arg: object) -> Any:
        code = frame.f_code
        if "gramagent" not in code.co_filename and code.co_filename != "<string>":
            return None
        frame.f_trace_opcodes = True
        key = f"{code.co_filename.rpartition('/src/')[2]}:{code.co_name}"
        if code.co_filename == "<string>" and frame.f_back is not None:
            key += f" <- {frame.f_back.f_code.co_name}"

        def local(frame: FrameType, event: str, arg: object) -> Any:
            if event == "opcode":
                counts[key] += 1
            return local
        return local

    with ScriptedServer(partial(answer, n=ROWS[row].calls), record=False) as server:
        asyncio.run(measured("gramagent", ROWS[row], server.base_url, args,
                             lambda: sys.settrace(trace), lambda: sys.settrace(None)))
    return collections.Counter({k: v / args.runs for k, v in counts.items()})


def print_opcodes(row: str, args: argparse.Namespace) -> None:
    counts = opcodes(row, args)
    extra = ROWS[row].calls - 1
    if extra > 0:  # per extra call: the row minus call1, over the extra calls
        one = opcodes("call1", args)
        counts = collections.Counter({k: (counts[k] - one[k]) / extra
                                      for k in counts.keys() | one.keys()})
    what = "per extra call" if extra > 0 else "per run"
    print(f"{sum(counts.values()):,.0f} bytecodes of gramagent's own code {what} ({row})")
    for key, n in counts.most_common():
        if abs(n) >= 1:
            print(f"{n:8.1f}  {key}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", default=",".join(ROWS), help=f"from {', '.join(ROWS)}")
    p.add_argument("--runs", type=int, default=20, help="measured runs per child")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--keep", type=Path, help="keep the callgrind files in this directory")
    p.add_argument("--cprofile", choices=list(ROWS), help="profile one row with cProfile")
    p.add_argument("--opcodes", choices=list(ROWS),
                   help="count gramagent's bytecodes per function (per extra call)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--row", help=argparse.SUPPRESS)
    p.add_argument("--contender", help=argparse.SUPPRESS)
    p.add_argument("--base-url", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        asyncio.run(child(args))
        return
    if args.opcodes:
        print_opcodes(args.opcodes, args)
        return
    if args.cprofile:
        with ScriptedServer(partial(answer, n=ROWS[args.cprofile].calls), record=False) as server:
            cprofile(args, server.base_url)
        return
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        print_rows(args, args.keep)
        return
    with tempfile.TemporaryDirectory(prefix="gramagent-callgrind-") as scratch:
        print_rows(args, Path(scratch))


def print_rows(args: argparse.Namespace, keep: Path) -> None:
    """Measure each row of ``--rows`` and print it beside its floor(s); callgrind files in
    ``keep``."""
    floors: dict[Row, float] = {}
    print(f"{'row':<18} {'floor':>10} {'gramagent':>10} {'ratio':>6}  "
          f"{'concurrent floor':>17} {'ratio':>6}  (instructions/run)")
    for name in args.rows.split(","):
        row = ROWS[name]
        with ScriptedServer(partial(answer, n=row.calls), record=False) as server:
            floor_row = Row(row.api, "inline", row.calls, row.history, row.tools)
            if floor_row not in floors:  # the floor's tool is the same function for every kind
                floors[floor_row] = measure(name, "floor", server.base_url, args, keep)
            floor = floors[floor_row]
            concurrent = (measure(name, f"floor-{row.tool_kind}", server.base_url, args, keep)
                          if row.tool_kind != "inline" else None)
            ours = measure(name, "gramagent", server.base_url, args, keep)
        beside = (f"{concurrent:>17,.0f} {ours / concurrent:>5.2f}x" if concurrent is not None
                  else f"{'-':>17} {'-':>6}")
        print(f"{name:<18} {floor:>10,.0f} {ours:>10,.0f} {ours / floor:>5.2f}x  {beside}",
              flush=True)


if __name__ == "__main__":
    main()
