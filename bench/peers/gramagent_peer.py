"""gramagent as a contender of ``bench/loop_overhead.py`` (runs in the main environment).

The same agent as every contender (one ``sayHello`` tool, the same instruction), written in
Python with ``@tool``, bound once, and driven through :func:`gramagent.runtime.loop.run_agent`
with the ``chat`` or ``responses`` adapter against the scripted server. Logging stays at its
default (off), as in a library user's process.
"""

from __future__ import annotations

from importlib.metadata import version

from _harness import INSTRUCTION, TOOL_DESCRIPTION, USER_MESSAGE, Contender, main

from gramagent.models.registry import resolve_model
from gramagent.runtime.library import ToolLibrary, tool
from gramagent.runtime.loop import run_agent
from gramagent.spec.model import Agent, ModelRef


@tool(name="sayHello", description=TOOL_DESCRIPTION)
def say_hello(personName: str = "world") -> str:  # noqa: N803  (the tool's wire name)
    """Greets a person by name."""
    return f"Hello, {personName}! Nice to meet you."


async def setup(base_url: str, api: str) -> Contender:
    library = ToolLibrary([say_hello])
    agent = Agent(name="hello", model=ModelRef.parse("openai/gpt-4o-mini"),
                  instruction=INSTRUCTION, tools=(say_hello.spec(),))
    bound = library.bind(agent)
    model = resolve_model(agent.model, api=api, base_url=base_url, api_key="sk-bench-gramagent")

    async def run() -> str:
        response = await run_agent(bound, USER_MESSAGE, model=model)
        return response.content

    return Contender(run=run, close=model.aclose, version=f"gramagent {version('gramagent')}")


if __name__ == "__main__":
    main(setup)
