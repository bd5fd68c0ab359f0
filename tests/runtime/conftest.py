"""Fixtures for the loop tests: test tools, agents, adapters over the scripted HTTP server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from runtime_support import INPROCESS, InProcess, ModelFactory, Tools, make_agent, make_tools

from gramagent._models.base import Model
from gramagent._models.registry import resolve_model
from gramagent._spec.model import Agent
from gramagent.testing import ScriptedServer


@pytest.fixture
def tools() -> Tools:
    return make_tools()


@pytest.fixture
def agent(tools: Tools) -> Agent:
    return make_agent(tools.library)


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[ScriptedServer | InProcess]:
    """The scripted server; for a test whose ``api`` is INPROCESS, the in-process model's."""
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and callspec.params.get("api") == INPROCESS:
        yield InProcess()
        return
    with ScriptedServer() as srv:
        yield srv


@pytest.fixture
async def model_for() -> AsyncIterator[ModelFactory]:
    """Builds adapters (fast retries) pointing at a scripted server; closes them after."""
    made: list[Model] = []

    def build(srv: ScriptedServer | InProcess, api: str) -> Model:
        if isinstance(srv, InProcess):
            return srv.model
        model = resolve_model("openai/scripted", api=api, base_url=srv.base_url,
                              max_retries=3, backoff_base=0.001)
        made.append(model)
        return model

    yield build
    for model in made:
        await model.aclose()


