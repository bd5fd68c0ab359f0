"""Instructions (callgrind) of one model turn's tool calls, without HTTP: the per-call path.

``python bench/peers/callgrind_turn.py`` reads a Chat Completions reply asking for 1, then 8
calls of the sayHello tool (``parse_chat_reply``), and takes the turn through
``ToolCalls.run_tool_calls`` (check, run, record), in a child under ``valgrind --tool=callgrind
--instr-atstart=no`` that counts ``--turns`` turns after a warm-up. Each turn starts from a new
run state (a new conversation, so the repeat guard does not answer the calls), awaited in
one running event loop: a plain function declared ``blocking=False`` never waits, so the loop
does nothing else while the turns are counted. Unlike ``callgrind_rows.py``, whose counts move by
up to 2% from one invocation to the next (the event loop's wake-ups), these repeat to a few
hundred instructions per turn: the figure to judge a change of the per-call path by, before
measuring the rows. It prints the instructions of a turn of one call, of eight, and per extra
call ((eight - one) / 7): reading the call out of the reply, the checks (payload, JSON object,
schema, accepted keywords, repeat guard), the call in its own context, the result message and
the invocation record. The request body and the HTTP exchange are not in it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import gramagent_peer  # noqa: E402
from _harness import INSTRUCTION  # noqa: E402
from callgrind_rows import PEOPLE, _helper, callgrind  # noqa: E402

from gramagent._messages import Conversation  # noqa: E402
from gramagent._models.chat_reply import parse_chat_reply  # noqa: E402
from gramagent._runtime.budget import Budget  # noqa: E402
from gramagent._runtime.library import BoundAgent, ToolLibrary  # noqa: E402
from gramagent._runtime.limits import RunLimits  # noqa: E402
from gramagent._runtime.tool_calls import ToolCalls  # noqa: E402
from gramagent._spec.model import Agent, ModelRef  # noqa: E402


def reply(n: int) -> dict[str, object]:
    """A reply asking for ``n`` calls of sayHello with distinct arguments."""
    return {"id": "chatcmpl-1", "object": "chat.completion", "choices": [{
        "index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None, "tool_calls": [
                {"id": f"call_{i}", "type": "function", "function": {
                    "name": "sayHello", "arguments": json.dumps({"personName": person})}}
                for i, person in enumerate(PEOPLE[:n])]}}],
        "usage": {"prompt_tokens": 60, "completion_tokens": 20, "total_tokens": 80}}


def bound_agent() -> BoundAgent:
    say_hello = gramagent_peer.say_hello_inline
    agent = Agent(name="hello", model=ModelRef.parse("openai/gpt-4o-mini"),
                  instruction=INSTRUCTION, tools=(say_hello.spec(),))
    return ToolLibrary([say_hello]).bind(agent)


async def turn(bound: BoundAgent, data: dict[str, object], limits: RunLimits, n: int) -> None:
    """Read ``data`` and take its calls through check, run and record, as a run does."""
    conversation = Conversation()
    calls = ToolCalls(bound=bound, budget=Budget(limits, conversation, 0.0),
                      conversation=conversation, sinks=(), run_id="run", dry_run=False,
                      info_logs=False)
    await calls.run_tool_calls(parse_chat_reply(data))
    if len(calls.invocations) != n or not all(i.ok for i in calls.invocations):
        raise SystemExit(f"the turn did not run its {n} calls: {calls.invocations}")


async def turns_of(n: int, turns: int, warmup: int) -> None:
    bound, data, limits = bound_agent(), reply(n), RunLimits(wall_time=None)
    for _ in range(warmup):
        await turn(bound, data, limits, n)
    helper = _helper()
    helper.gramagent_bench_start()
    for _ in range(turns):
        await turn(bound, data, limits, n)
    helper.gramagent_bench_stop()


def child(n: int, turns: int, warmup: int) -> None:
    asyncio.run(turns_of(n, turns, warmup))


def measure(n: int, args: argparse.Namespace, keep: Path) -> float:
    child_args = [str(n), "--turns", str(args.turns), "--warmup", str(args.warmup)]
    return callgrind(keep / f"turn{n}.out", __file__, child_args,
                     f"a turn of {n}") / args.turns


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--turns", type=int, default=100, help="measured turns per child")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--keep", type=Path, help="keep the callgrind files in this directory")
    p.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.child, args.turns, args.warmup)
        return
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        one, eight = measure(1, args, args.keep), measure(8, args, args.keep)
    else:
        with tempfile.TemporaryDirectory(prefix="gramagent-callgrind-") as scratch:
            one, eight = measure(1, args, Path(scratch)), measure(8, args, Path(scratch))
    print(f"turn of 1 call: {one:,.0f}  turn of 8 calls: {eight:,.0f}  "
          f"per extra call: {(eight - one) / 7:,.0f}  (instructions)")


if __name__ == "__main__":
    main()
