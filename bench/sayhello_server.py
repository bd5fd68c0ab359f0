"""The scripted server of ``bench/loop_overhead.py``, answering the sayHello conversation.

A list script (the JSON ``--script FILE --loop`` form of ``python -m gramagent.testing``)
is consumed in arrival order, which pairs turns with runs only when runs are sequential. At
concurrency 100 each request must be answered from its own content, so this runs the same
:class:`~gramagent.testing.ScriptedServer` with a callable script:

- the conversation ends with the user's message: call ``sayHello`` for Alice;
- it ends with the tool's result: answer with a text quoting that result (so a client that did
  not run the tool cannot produce the expected greeting).

``python bench/sayhello_server.py [--port N]`` prints the base URL, then serves until
terminated.
"""

from __future__ import annotations

import argparse
import signal
import threading
from typing import Any

from gramagent.testing import ScriptedServer, ScriptTurn, call, reply


def answer(path: str, body: Any) -> ScriptTurn:
    """The next turn of whichever run sent ``body``."""
    if path.endswith("/responses"):
        last = body["input"][-1]
        if last.get("type") == "function_call_output":
            return reply(f"Said: {last['output']}")
    else:
        last = body["messages"][-1]
        if last.get("role") in ("tool", "function"):
            return reply(f"Said: {last['content']}")
    return call("sayHello", {"personName": "Alice"})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with ScriptedServer(answer, port=args.port, record=False) as server:
        print(server.base_url, flush=True)
        stop.wait()


if __name__ == "__main__":
    main()
