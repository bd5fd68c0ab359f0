"""The hello-world agent, asked something its one tool does not do, answers in text.

Run on the model README recommends for agents that must decline (``local/qwen2.5-coder-1.5b``
with ``decide_first``, the local default): the decision step lets it say that sayHello does not
answer the question. Skipped, naming the pip command, where the 1.5B's weights are not
installed.
"""

from __future__ import annotations

import pytest

from gramagent._models.local import local_model
from gramagent._models.weights import resolve_weights
from gramagent._runtime.library import ToolLibrary
from gramagent._runtime.loop import run_agent
from gramagent._spec.model import Agent
from gramagent.errors import ConfigurationError

pytestmark = pytest.mark.e2e

RECOMMENDED = "qwen2.5-coder-1.5b"


@pytest.fixture(scope="module")
def recommended_weights() -> None:
    try:
        resolve_weights(RECOMMENDED, progress=False)
    except ConfigurationError as exc:  # the message names the pip command
        pytest.skip(str(exc))


async def test_hello_world_answers_an_unrelated_question_without_greeting(
        recommended_weights: None, hello_agent: Agent, hello_library: ToolLibrary) -> None:
    """"What is the capital of France?": no sayHello call, and an answer in text."""
    async with local_model(RECOMMENDED) as model:
        response = await run_agent(hello_agent, "What is the capital of France?",
                                   library=hello_library, model=model)
    assert [i.name for i in response.tool_invocations] == [], response.tool_invocations
    assert response.content.strip()
    assert "Paris" in response.content, response.content
