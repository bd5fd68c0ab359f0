"""gramagent as a contender of ``bench/loop_overhead.py`` (runs in the main environment).

The same agent as every contender (one ``sayHello`` tool, the same instruction), written in
Python with ``@tool`` (a plain function, like the built-in one), bound once, and driven
through :func:`gramagent.runtime.loop.run_agent` with the ``chat`` or ``responses`` adapter
against the scripted server. Logging stays at its
default (off), as in a library user's process.
"""

from __future__ import annotations

import os
from importlib.metadata import version

from _harness import INSTRUCTION, TOOL_DESCRIPTION, USER_MESSAGE, Contender, main

from gramagent.models.registry import resolve_model
from gramagent.runtime.library import ToolLibrary, tool
from gramagent.runtime.loop import run_agent
from gramagent.spec.model import Agent, ModelRef


@tool(name="sayHello", description=TOOL_DESCRIPTION)
def say_hello_sync(personName: str = "world") -> str:  # noqa: N803  (the tool's wire name)
    """Greets a person by name."""
    return f"Hello, {personName}! Nice to meet you."


@tool(name="sayHello", description=TOOL_DESCRIPTION)
async def say_hello_async(personName: str = "world") -> str:  # noqa: N803
    """Greets a person by name."""
    return f"Hello, {personName}! Nice to meet you."


ASYNC_TOOL = os.environ.get("GRAMAGENT_BENCH_TOOL") == "async"
"""Set by the ``gramagent-async`` contender: the same tool as a coroutine function, which the
loop runs as a task instead of handing it to a worker thread."""


async def setup(base_url: str, api: str) -> Contender:
    say_hello = say_hello_async if ASYNC_TOOL else say_hello_sync
    library = ToolLibrary([say_hello])
    agent = Agent(name="hello", model=ModelRef.parse("openai/gpt-4o-mini"),
                  instruction=INSTRUCTION, tools=(say_hello.spec(),))
    bound = library.bind(agent)
    model = resolve_model(agent.model, api=api, base_url=base_url, api_key="sk-bench-gramagent")

    async def run() -> str:
        response = await run_agent(bound, USER_MESSAGE, model=model)
        return response.content

    kind = "async tool" if ASYNC_TOOL else "sync tool"
    return Contender(run=run, close=model.aclose,
                     version=f"gramagent {version('gramagent')}, {kind}")


if __name__ == "__main__":
    main(setup)
