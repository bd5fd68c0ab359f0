"""openai-agents as a contender of ``bench/loop_overhead.py`` (runs in
``bench/.venvs/openai-agents``).

The same agent as every contender: one ``sayHello`` function tool, the same instruction, driven
through ``Runner.run`` with ``OpenAIChatCompletionsModel`` (``--api chat``) or
``OpenAIResponsesModel`` (``--api responses``) against the scripted server. Tracing is off (it
would try to export to the network).
"""

from __future__ import annotations

from importlib.metadata import version

from _harness import INSTRUCTION, TOOL_NAME, USER_MESSAGE, Contender, main
from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI  # noqa: TID251  (the peer under test, in its own venv)


@function_tool(name_override=TOOL_NAME)
def say_hello(personName: str = "world") -> str:  # noqa: N803  (the tool's wire name)
    """Greets a person by name."""
    return f"Hello, {personName}! Nice to meet you."


async def setup(base_url: str, api: str) -> Contender:
    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=base_url, api_key="sk-bench-openai-agents")
    model_cls = OpenAIChatCompletionsModel if api == "chat" else OpenAIResponsesModel
    model = model_cls(model="gpt-4o-mini", openai_client=client)
    agent = Agent(name="hello", instructions=INSTRUCTION, tools=[say_hello], model=model)

    async def run() -> str:
        result = await Runner.run(agent, USER_MESSAGE)
        return str(result.final_output)

    return Contender(run=run, close=client.close,
                     version=f"openai-agents {version('openai-agents')}")


if __name__ == "__main__":
    main(setup)
