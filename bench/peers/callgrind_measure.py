"""Instructions (callgrind) of the conversation bound's count, without HTTP or a run.

``python bench/peers/callgrind_measure.py`` counts, in a child under ``valgrind
--tool=callgrind --instr-atstart=no``, what :meth:`Conversation.measure` costs as a run's two
requests call it: once on a conversation holding one user message, then once more after an
assistant message with N calls and their N results were added. It prints the instructions per
such pair of measures, for one call and for eight (each turn of the loop made again without the
measures and taken off, so the conversations' making is not counted). Like
``callgrind_turn.py``, it repeats to within a few instructions.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from callgrind_rows import PEOPLE, _helper, callgrind  # noqa: E402

from gramagent._messages import (  # noqa: E402
    AssistantMessage,
    Conversation,
    Message,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)


def messages(n: int) -> tuple[list[Message], list[Message]]:
    """The first request's messages, and what the turn of ``n`` calls adds to them."""
    calls = tuple(ToolCall(id=f"call_{i}", name="sayHello",
                           arguments=f'{{"personName": "{person}"}}')
                  for i, person in enumerate(PEOPLE[:n]))
    added: list[Message] = [AssistantMessage(content=None, tool_calls=calls)]
    added += [ToolResultMessage(call_id=c.id, name=c.name, content=f"Hello, {person}!")
              for c, person in zip(calls, PEOPLE, strict=False)]
    return [UserMessage(content="Say hello to my friends.")], added


def child(n: int, rounds: int, measured: bool) -> None:
    first, added = messages(n)
    helper = _helper()
    helper.gramagent_bench_start()
    for _ in range(rounds):
        conversation = Conversation(first, id="bench")
        if measured:
            conversation.measure()
        conversation.extend(added)
        if measured:
            conversation.measure()
    helper.gramagent_bench_stop()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=2000, help="pairs of measures per child")
    p.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        calls, measured = args.child
        child(int(calls), args.rounds, measured == "yes")
        return
    with tempfile.TemporaryDirectory(prefix="gramagent-callgrind-") as scratch:
        for n in (1, 8):
            counts = {
                measured: callgrind(Path(scratch) / f"measure{n}.{measured}.out", __file__,
                                    [str(n), measured, "--rounds", str(args.rounds)],
                                    f"the measures of {n} calls")
                for measured in ("yes", "no")}
            per = (counts["yes"] - counts["no"]) / args.rounds
            print(f"two measures, a turn of {n} call{'s' if n > 1 else ''}: {per:,.0f} "
                  "instructions")


if __name__ == "__main__":
    main()
