"""The sayHello tool: its greeting and its contract (the hello_world.gram example)."""

from __future__ import annotations

from tools_support import EXAMPLES

from gramagent._spec.gram.text import load_agent
from gramagent._spec.model import ToolSpec
from gramagent.tools import builtin_library
from gramagent.tools._hello import say_hello

SIGNATURE = '(personName::String {default:"world"})==>(::String)'
DESCRIPTION = "Returns a friendly greeting message for the given name"


def test_greets_by_name_and_defaults_to_world() -> None:
    """The greeting names the person; without a name it greets the world."""
    assert say_hello(personName="Alice") == "Hello, Alice! Nice to meet you."
    assert say_hello() == "Hello, world! Nice to meet you."


def test_schema_is_the_one_generated_from_the_signature() -> None:
    """Name, description and schema equal the spec built from the gram signature."""
    spec = ToolSpec.create("sayHello", DESCRIPTION, SIGNATURE)
    assert say_hello.name == "sayHello"
    assert say_hello.description == DESCRIPTION
    assert say_hello.schema == spec.schema
    assert say_hello.schema["properties"]["personName"]["default"] == "world"
    assert "required" not in say_hello.schema or say_hello.schema["required"] == []


def test_hello_world_example_binds_to_the_builtin_library() -> None:
    """examples/hello_world.gram binds to builtin_library() without problems."""
    agent = load_agent(EXAMPLES / "hello_world.gram")
    bound = builtin_library().bind(agent)
    assert list(bound.tools) == ["sayHello"]
    assert bound.tools["sayHello"].invoke(personName="Bob") == "Hello, Bob! Nice to meet you."
