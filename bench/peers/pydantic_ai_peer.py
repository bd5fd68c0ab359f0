"""pydantic-ai as a contender of ``bench/loop_overhead.py`` (runs in ``bench/.venvs/pydantic-ai``).

The same agent as every contender: one ``sayHello`` tool, the same instruction, driven through
``Agent.run`` with ``OpenAIChatModel`` (``--api chat``) or ``OpenAIResponsesModel``
(``--api responses``) against the scripted server.
"""

from __future__ import annotations

from importlib.metadata import version

from _harness import INSTRUCTION, TOOL_DESCRIPTION, TOOL_NAME, USER_MESSAGE, Contender, main
from pydantic_ai import Agent, Tool
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.openai import OpenAIProvider


def say_hello(personName: str = "world") -> str:  # noqa: N803  (the tool's wire name)
    """Greets a person by name."""
    return f"Hello, {personName}! Nice to meet you."


async def setup(base_url: str, api: str) -> Contender:
    provider = OpenAIProvider(base_url=base_url, api_key="sk-bench-pydantic-ai")
    model_cls = OpenAIChatModel if api == "chat" else OpenAIResponsesModel
    model = model_cls("gpt-4o-mini", provider=provider)
    tool = Tool(say_hello, name=TOOL_NAME, description=TOOL_DESCRIPTION, takes_ctx=False)
    agent = Agent(model, instructions=INSTRUCTION, tools=[tool])

    async def run() -> str:
        result = await agent.run(USER_MESSAGE)
        return str(result.output)

    async def close() -> None:
        await provider.client.close()

    return Contender(run=run, close=close,
                     version=f"pydantic-ai-slim {version('pydantic-ai-slim')}")


if __name__ == "__main__":
    main(setup)
