"""Fixtures for the model adapter tests: scripted servers on 127.0.0.1 and a fixed conversation."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from gramagent._messages import AssistantMessage, ToolCall, ToolResultMessage, UserMessage
from gramagent._models.base import ModelRequest
from gramagent._spec.definition import ToolDefinition
from gramagent.testing import ScriptedServer

SAY_HELLO = ToolDefinition(
    name="sayHello",
    description="Returns a friendly greeting message",
    parameters={
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "The name of the person to greet"},
            "greeting": {"type": "string", "default": "Hello"},
        },
        "required": ["name"],
    },
    strict_parameters={
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "The name of the person to greet"},
            "greeting": {"type": "string", "default": "Hello"},
        },
        "required": ["name", "greeting"],
        "additionalProperties": False,
    },
)
GET_TIME = ToolDefinition(
    name="getTime",
    description="The current time in a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}},
                "required": ["city"]},
)
TOOLS = (SAY_HELLO, GET_TIME)

HISTORY = (
    UserMessage(content="Greet Alice and Bob"),
    AssistantMessage(
        content=None,
        tool_calls=(
            ToolCall(id="call_a", name="sayHello", arguments='{"name": "Alice"}'),
            ToolCall(id="call_b", name="sayHello", arguments='{"name": "Bob"}'),
        ),
    ),
    ToolResultMessage(call_id="call_b", name="sayHello", content="Hello, Bob!"),
    ToolResultMessage(call_id="call_a", name="sayHello", content="Hello, Alice!"),
    AssistantMessage(content="Hello, Alice! Hello, Bob!"),
    UserMessage(content="What time is it in Paris?"),
)
"""A fixed two-turn conversation with parallel calls whose results came back out of order."""


def _make_request(**overrides: Any) -> ModelRequest:
    fields: dict[str, Any] = {
        "model": "test-model",
        "instruction": "You greet people.",
        "messages": HISTORY,
        "tools": TOOLS,
    }
    fields.update(overrides)
    return ModelRequest(**fields)


@pytest.fixture
def make_request() -> Callable[..., ModelRequest]:
    """Build the fixed request (instruction, HISTORY, TOOLS) with keyword overrides."""
    return _make_request


@pytest.fixture
def tools() -> tuple[ToolDefinition, ...]:
    """sayHello (with a compiled strict schema) and getTime (without one)."""
    return TOOLS


@pytest.fixture
def history() -> tuple[Any, ...]:
    """The fixed conversation (see HISTORY)."""
    return HISTORY


@pytest.fixture
def serve() -> Iterator[Callable[..., ScriptedServer]]:
    """Start scripted servers (``serve(script, **options)``); all are closed after the test."""
    servers: list[ScriptedServer] = []

    def start(script: Any = (), **options: Any) -> ScriptedServer:
        server = ScriptedServer(script, **options).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()
