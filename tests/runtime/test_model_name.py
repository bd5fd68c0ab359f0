"""The model name a run sends is the model's it was given (issue 12, item 1).

``run_agent(agent, model=resolve_model("openai/x", ...))`` asks the server for ``x``, not for
the agent file's model; against the scripted server over real HTTP.
"""

from __future__ import annotations

import pytest

from gramagent import ToolLibrary, load_agent, resolve_model, run_agent
from gramagent.testing import ScriptedServer, reply
from gramagent.tools import say_hello

AGENT = """
[a:Agent {instruction: "Greet.", model: "local/qwen2.5-coder-0.5b"} |
  [sayHello:Tool {description: "Returns a friendly greeting message for the given name"} |
    (personName::String {default: "world"})==>(::String)]
]
"""


@pytest.mark.parametrize("api", ["chat", "functions", "responses", "harmony"])
async def test_a_resolved_model_object_names_its_own_model(api: str) -> None:
    agent = load_agent(AGENT)
    with ScriptedServer([reply("hi")]) as srv:
        model = resolve_model("openai/gpt-4o-mini", api=api, base_url=srv.base_url)
        async with model:  # type: ignore[attr-defined]
            response = await run_agent(agent, "Hi", library=ToolLibrary([say_hello]),
                                       model=model)
        assert response.content == "hi"
        assert [r.body["model"] for r in srv.requests] == ["gpt-4o-mini"]


async def test_a_model_object_without_a_name_sends_the_agents() -> None:
    """A hand-made adapter (no ``model_name``) keeps the agent's model name."""
    from gramagent._models.chat import ChatCompletionsModel

    agent = load_agent(AGENT)
    with ScriptedServer([reply("hi")]) as srv:
        async with ChatCompletionsModel(srv.base_url) as model:
            await run_agent(agent, "Hi", library=ToolLibrary([say_hello]), model=model)
        assert [r.body["model"] for r in srv.requests] == ["qwen2.5-coder-0.5b"]


def test_the_embedded_model_names_the_model_it_serves() -> None:
    pytest.importorskip("xllamacpp",
                        reason='needs the local extra: python3 -m pip install -e ".[local]"')
    model = resolve_model("local/qwen2.5-coder-1.5b")
    assert model.model_name == "qwen2.5-coder-1.5b"  # type: ignore[attr-defined]
