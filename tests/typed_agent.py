"""Static types of the public API, as an agent author uses it (checked by ``make typecheck``).

``mypy --strict`` checks every ``assert_type`` below; at run time ``assert_type`` does nothing,
so pytest only imports this file (``tests/test_public_api.py``), which runs the decorators.
Everything comes from the top-level ``gramagent`` namespace, whose names are imported lazily:
these checks also make sure the lazy re-exports keep their precise types (a name that
reached type checkers only through the module ``__getattr__`` would be ``Any`` and fail here).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, assert_type

from gramagent import (
    Agent,
    AgentResponse,
    Conversation,
    GramDocument,
    RunLimits,
    Signature,
    Tool,
    ToolContext,
    ToolInvocation,
    ToolLibrary,
    ToolSpec,
    Usage,
    load_agent,
    load_file,
    parse_signature,
    run_agent,
    run_agent_sync,
    signature_to_schema,
    strict_schema,
    to_gram,
    tool,
)


@tool
def say_hello(personName: str = "world") -> str:
    """Returns a friendly greeting message for the given name."""
    return f"Hello, {personName}!"


@tool(name="lookup", description="Looks a key up.", timeout=2.0)
async def lookup_record(ctx: ToolContext, key: str) -> dict[str, int]:
    """Returns the counts stored under a key."""
    return {key: len(ctx.state)}


assert_type(say_hello, Tool)
assert_type(lookup_record, Tool)
assert_type(tool(name="x"), Callable[[Callable[..., Any]], Tool])

library = ToolLibrary()


@library.register
def shout(text: str) -> str:
    """Upper-cases the text."""
    return text.upper()


@library.register(name="whisper", blocking=False)
def whisper_impl(text: str) -> str:
    """Lower-cases the text."""
    return text.lower()


assert_type(shout, Tool)
assert_type(whisper_impl, Tool)
assert_type(library.register(say_hello, replace=True), Tool)
assert_type(library.register(lookup_record), Tool)
assert_type(say_hello.spec(), ToolSpec)


def run_sync(agent: Agent) -> None:
    """A synchronous run (never called: only type-checked)."""
    response = run_agent_sync(agent, "Hi", library=library, limits=RunLimits(max_iterations=3))
    assert_type(response, AgentResponse)
    assert_type(response.content, str)
    assert_type(response.tool_invocations, tuple[ToolInvocation, ...])
    assert_type(response.context, Conversation)
    assert_type(response.usage, Usage)


async def run_async(path: str) -> None:
    """An asynchronous run continuing a conversation (never called: only type-checked)."""
    agent = load_agent(path)
    assert_type(agent, Agent)
    first = await run_agent(agent, "Hi", library=library)
    second = await run_agent(agent, "Again", library=library, context=first.context)
    assert_type(second, AgentResponse)


def specs(path: str) -> None:
    """Reading and writing specs (never called: only type-checked)."""
    document = load_file(path)
    assert_type(document, GramDocument)
    assert_type(to_gram(document), str)
    signature = parse_signature("(personName::String)==>(::String)")
    assert_type(signature, Signature)
    assert_type(signature_to_schema(signature), dict[str, Any])
    assert_type(strict_schema(signature_to_schema(signature)).schema, dict[str, Any])
