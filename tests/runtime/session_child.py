"""A process that runs turns of a stored session (used by test_sessions.py, which kills it).

Usage: session_child.py STORE BASE_URL MESSAGE... -- prints ``SAVED n`` after each turn.
Or: session_child.py --hold-lock STORE NAME -- takes the session's lock, prints ``LOCKED``,
and waits forever.
"""

from __future__ import annotations

import asyncio
import sys

from runtime_support import make_agent, make_tools

from gramagent._models.registry import resolve_model
from gramagent._runtime.sessions import SessionStore


async def turns(store: str, base_url: str, messages: list[str]) -> None:
    tools = make_tools()
    agent = make_agent(tools.library)
    session = SessionStore(store).open("demo")
    model = resolve_model("openai/scripted", base_url=base_url, max_retries=0)
    for n, message in enumerate(messages, 1):
        await session.run(agent, message, library=tools.library, model=model)
        print(f"SAVED {n}", flush=True)
    await model.aclose()


async def hold(store: str, name: str) -> None:
    async with SessionStore(store).lock(name):
        print("LOCKED", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    if sys.argv[1] == "--hold-lock":
        asyncio.run(hold(sys.argv[2], sys.argv[3]))
    else:
        asyncio.run(turns(sys.argv[1], sys.argv[2], sys.argv[3:]))
