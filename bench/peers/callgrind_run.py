"""Instructions (callgrind) of whole sayHello runs without HTTP: the per-run path.

``python bench/peers/callgrind_run.py`` drives ``run_agent`` as ``callgrind_rows.py``'s
``call1`` (and, with ``--history``, ``history-chat``) row does (the same bound agent, chat
adapter, limits and context), except that the adapter's HTTP client is replaced by a stand-in
that encodes the request body with orjson and decodes a canned reply (a call of sayHello, or
the answer once the conversation ends with its result) as the real client's ``post_read``
does. Nothing waits, so the event loop never polls: the counts repeat to a few hundred
instructions per run, where the rows move by up to 2% with the loop's wake-ups. It is the
figure to judge a change of the loop, run setup, body building, reply reading or the deadline
by, before measuring the rows; aiohttp's share (the same for the floor) is not in it.

``--own-messages``: each run continues the context with a message of its own (the rows repeat
one message, which a memo may then take for the one before it): an experiment of many
questions over one context.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import tempfile
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import gramagent_peer  # noqa: E402
from _harness import EXPECTED, INSTRUCTION, USER_MESSAGE  # noqa: E402
from callgrind_rows import ROWS, _helper, build, callgrind, history  # noqa: E402

from gramagent._messages import Conversation  # noqa: E402
from gramagent._models.chat import ChatCompletionsModel  # noqa: E402
from gramagent._runtime.library import ToolLibrary  # noqa: E402
from gramagent._runtime.loop import run_agent  # noqa: E402
from gramagent._spec.model import Agent, ModelRef  # noqa: E402

_USAGE = {"prompt_tokens": 60, "completion_tokens": 20, "total_tokens": 80}
CALL = orjson.dumps({"id": "chatcmpl-1", "object": "chat.completion", "choices": [{
    "index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": None, "tool_calls": [{
            "id": "call_1", "type": "function", "function": {
                "name": "sayHello", "arguments": '{"personName": "Alice"}'}}]}}],
    "usage": _USAGE})
ANSWER = orjson.dumps({"id": "chatcmpl-2", "object": "chat.completion", "choices": [{
    "index": 0, "finish_reason": "stop", "message": {
        "role": "assistant", "content": f"Said: {EXPECTED}"}}], "usage": _USAGE})


class CannedHTTP:
    """The HTTP client's ``post_read`` without the network: the body encoded, a canned
    reply decoded and read."""

    def post_read(self, path: str, body: Mapping[str, Any],
                  read: Callable[[dict[str, Any]], Any]) -> Coroutine[Any, Any, Any]:
        return self._exchange(body, read)

    async def _exchange(self, body: Mapping[str, Any],
                        read: Callable[[dict[str, Any]], Any]) -> Any:
        orjson.dumps(body)
        answered = body["messages"][-1]["role"] == "tool"
        return read(orjson.loads(ANSWER if answered else CALL))


async def runs(with_history: bool, count: int, warmup: int, own_messages: bool) -> None:
    say_hello = gramagent_peer.say_hello_inline
    agent = Agent(name="hello", model=ModelRef.parse("openai/gpt-4o-mini"),
                  instruction=INSTRUCTION, tools=(say_hello.spec(),))
    bound = ToolLibrary([say_hello]).bind(agent)
    model = ChatCompletionsModel("http://127.0.0.1:9/v1", "sk-bench-gramagent")
    model.http = CannedHTTP()  # type: ignore[assignment]  # the stand-in, duck-typed
    context = Conversation(history(ROWS["history-chat"])) if with_history else None

    asked = 0

    async def run() -> None:
        nonlocal asked
        asked += 1
        message = f"{USER_MESSAGE} (question {asked})" if own_messages else USER_MESSAGE
        response = await run_agent(bound, message, model=model, context=context)
        if EXPECTED not in response.content:
            raise SystemExit(f"the run answered {response.content!r}")

    for _ in range(warmup):
        await run()
    gc.collect()  # as callgrind_rows.py: no collection left pending by the warm-up
    helper = _helper()
    helper.gramagent_bench_start()
    for _ in range(count):
        await run()
    helper.gramagent_bench_stop()


def measure(with_history: bool, args: argparse.Namespace, keep: Path) -> float:
    child_args = ["--runs", str(args.runs), "--warmup", str(args.warmup)]
    if with_history:
        child_args.append("--history")
    if args.own_messages:
        child_args.append("--own-messages")
    out = keep / f"run{'-history' if with_history else ''}.out"
    return callgrind(out, __file__, child_args, "the runs") / args.runs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=200, help="measured runs per child")
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--history", action="store_true",
                   help="only the runs continuing the 100-message history")
    p.add_argument("--own-messages", action="store_true",
                   help="each run asks a question of its own (the rows repeat one)")
    p.add_argument("--keep", type=Path, help="keep the callgrind files in this directory")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        asyncio.run(runs(args.history, args.runs, args.warmup, args.own_messages))
        return
    shown = [True] if args.history else [False, True]

    def figures(keep: Path) -> list[str]:
        return [f"{'100-message history' if h else 'call1'}: {measure(h, args, keep):,.0f}"
                for h in shown]

    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        printed = figures(args.keep)
    else:  # the callgrind files in a directory removed at the end
        with tempfile.TemporaryDirectory(prefix="gramagent-callgrind-") as scratch:
            printed = figures(Path(scratch))
    print("  ".join(printed) + f"  (instructions per run, HTTP stubbed; {build()})")


if __name__ == "__main__":
    main()
