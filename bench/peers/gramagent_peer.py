"""gramagent as a contender of ``bench/loop_overhead.py`` (runs in the main environment).

The same agent as every contender (one ``sayHello`` tool, the same instruction), written in
Python with ``@tool``, bound once, and driven through :func:`gramagent._runtime.loop.run_agent`
with the ``chat`` or ``responses`` adapter against the scripted server. Logging stays at its
default (off), as in a library user's process.

The tool, chosen by ``$GRAMAGENT_BENCH_TOOL``:

- ``inline`` (default): a plain function declared ``@tool(blocking=False)``, called on the
  event loop (it formats a string: nothing to block on), as the floor calls it;
- ``thread``: the same plain function without the declaration, run in a worker thread;
- ``async``: the same as ``async def``, awaited on the event loop.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from importlib.metadata import version

from _harness import INSTRUCTION, TOOL_DESCRIPTION, USER_MESSAGE, Contender, main

from gramagent._messages import Conversation, Message
from gramagent._models.registry import resolve_model
from gramagent._runtime.library import Tool, ToolLibrary, tool
from gramagent._runtime.limits import RunLimits
from gramagent._runtime.loop import run_agent
from gramagent._spec.model import Agent, ModelRef


def _greet(personName: str = "world") -> str:  # noqa: N803  (the tool's wire name)
    """Greets a person by name."""
    return f"Hello, {personName}! Nice to meet you."


say_hello_inline = tool(_greet, name="sayHello", description=TOOL_DESCRIPTION, blocking=False)
say_hello_thread = tool(_greet, name="sayHello", description=TOOL_DESCRIPTION)


@tool(name="sayHello", description=TOOL_DESCRIPTION)
async def say_hello_async(personName: str = "world") -> str:  # noqa: N803
    """Greets a person by name."""
    return f"Hello, {personName}! Nice to meet you."


TOOLS = {"inline": say_hello_inline, "thread": say_hello_thread, "async": say_hello_async}
TOOL_KIND = os.environ.get("GRAMAGENT_BENCH_TOOL", "inline")
"""Which of :data:`TOOLS` the contender binds (see the module docs)."""
OTEL = os.environ.get("GRAMAGENT_BENCH_OTEL") == "1"
"""Trace the runs with OpenTelemetry (spans made, batched and dropped by the exporter)."""


def _trace_everything() -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    class Drop(SpanExporter):
        def export(self, spans: object) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Drop()))
    trace.set_tracer_provider(provider)


async def setup(base_url: str, api: str, *, wall_time: bool = True,
                extra_tools: Sequence[Tool] = (), history: Sequence[Message] = ()
                ) -> Contender:
    """The contender; ``wall_time=False`` runs without a wall-time limit (no deadline timer).

    ``extra_tools`` are declared after sayHello; ``history`` is the conversation every run
    continues (``context=``).
    """
    if OTEL:
        _trace_everything()
    say_hello = TOOLS[TOOL_KIND]
    limits = None if wall_time else RunLimits(wall_time=None)
    library = ToolLibrary([say_hello, *extra_tools])
    agent = Agent(name="hello", model=ModelRef.parse("openai/gpt-4o-mini"),
                  instruction=INSTRUCTION,
                  tools=(say_hello.spec(), *(t.spec() for t in extra_tools)))
    context = Conversation(history) if history else None
    bound = library.bind(agent)
    model = resolve_model(agent.model, api=api, base_url=base_url, api_key="sk-bench-gramagent")

    async def run() -> str:
        response = await run_agent(bound, USER_MESSAGE, model=model, limits=limits,
                                   context=context)
        return response.content

    return Contender(run=run, close=model.aclose,
                     version=f"gramagent {version('gramagent')}, {TOOL_KIND} tool"
                             + (", OpenTelemetry on" if OTEL else ""))


if __name__ == "__main__":
    main(setup)
