"""OpenTelemetry spans of a run, checked with the SDK's in-memory exporter against the scripted
server: names, GenAI attributes, parent/child, error status, and no argument text anywhere."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from runtime_support import ModelFactory, Tools, script
from test_approval import GRAM, Mail
from test_loop_guardrails import _hanging_tools, _stated_timeout, late_start_run

from gramagent import Refused, resume_agent, run_agent
from gramagent._messages import ToolResultMessage
from gramagent._runtime.limits import RunLimits
from gramagent._runtime.tracing import run_tracer
from gramagent._spec.gram.text import load_gram
from gramagent._spec.model import Agent, ModelRef
from gramagent.errors import LimitExceeded, ModelAPIError
from gramagent.testing import ScriptedServer, call, calls, error, reply

trace = pytest.importorskip("opentelemetry.trace",
                            reason='needs the otel extra: python3 -m pip install -e ".[otel]"')
sdk_trace = pytest.importorskip("opentelemetry.sdk.trace",
                                reason='needs the otel extra: python3 -m pip install -e ".[otel]"')
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

SECRET_ARG = "Alice-Secret-Argument-7f3a"


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """A real SDK provider with an in-memory exporter, installed as the global provider."""
    exporter = InMemorySpanExporter()
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    yield exporter
    provider.shutdown()


def _everything(span: Any) -> str:
    """Every text a span carries: name, attributes, status, events."""
    parts = [span.name, repr(dict(span.attributes or {})), repr(span.status.description)]
    parts.extend(repr(e.attributes) for e in span.events)
    return " ".join(parts)


async def test_run_model_and_tool_spans(spans: InMemorySpanExporter, tools: Tools,
                                        agent: Agent, server: ScriptedServer,
                                        model_for: ModelFactory) -> None:
    script(server, call("sayHello", {"personName": SECRET_ARG}, id="call_1", ),
           reply(f"Hi {SECRET_ARG}!", usage=(30, 5)))
    response = await run_agent(agent, f"I'm {SECRET_ARG}", library=tools.library,
                               model=model_for(server, "chat"))
    finished = spans.get_finished_spans()
    names = [s.name for s in finished]
    assert names == ["chat scripted", "execute_tool sayHello", "chat scripted",
                     "invoke_agent hello_world_agent"]
    first_chat, tool, second_chat, run = finished
    assert run.parent is None
    for child in (first_chat, tool, second_chat):
        assert child.parent is not None and child.parent.span_id == run.context.span_id
        assert child.context.trace_id == run.context.trace_id
    assert run.kind == trace.SpanKind.INTERNAL and first_chat.kind == trace.SpanKind.CLIENT
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["gen_ai.agent.name"] == "hello_world_agent"
    assert run.attributes["gen_ai.request.model"] == "scripted"
    assert run.attributes["gen_ai.provider.name"] == "openai"
    assert run.attributes["gen_ai.conversation.id"] == response.context.id
    assert run.attributes["gen_ai.usage.input_tokens"] == response.usage.input_tokens
    assert run.attributes["gen_ai.usage.output_tokens"] == response.usage.output_tokens
    assert second_chat.attributes["gen_ai.operation.name"] == "chat"
    assert second_chat.attributes["gen_ai.usage.input_tokens"] == 30
    assert second_chat.attributes["gen_ai.usage.output_tokens"] == 5
    assert tuple(first_chat.attributes["gen_ai.response.finish_reasons"]) == ("tool_calls",)
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.name"] == "sayHello"
    assert tool.attributes["gen_ai.tool.call.id"] == "call_1"
    assert all(s.status.status_code != trace.StatusCode.ERROR for s in finished)
    assert not any(SECRET_ARG in _everything(s) for s in finished)


async def test_failed_calls_and_model_errors_set_error_status(
        spans: InMemorySpanExporter, tools: Tools, agent: Agent, server: ScriptedServer,
        model_for: ModelFactory) -> None:
    script(server,
           calls(call("fail", {"reason": SECRET_ARG}), call("nope", {"x": SECRET_ARG}),
                 call("sayHello", f'{{"personName": "{SECRET_ARG}"')),
           error(400, f"the server quotes {SECRET_ARG}"))
    with pytest.raises(ModelAPIError):
        await run_agent(agent, "go", library=tools.library, model=model_for(server, "chat"))
    finished = spans.get_finished_spans()
    by_name: dict[str, list[Any]] = {}
    for s in finished:
        by_name.setdefault(s.name, []).append(s)
    errors = {s.attributes.get("gen_ai.tool.name"): s.attributes["error.type"]
              for s in by_name["execute_tool fail"] + by_name["execute_tool <unknown>"]
              + by_name["execute_tool sayHello"]}
    assert errors == {"fail": "tool_exception", "<unknown>": "unknown_tool",
                      "sayHello": "tool_payload_parse_error"}
    failed_chat = by_name["chat scripted"][-1]
    assert failed_chat.status.status_code == trace.StatusCode.ERROR
    assert failed_chat.attributes["error.type"] == "ModelAPIError"
    (run,) = by_name["invoke_agent hello_world_agent"]
    assert run.status.status_code == trace.StatusCode.ERROR
    assert run.attributes["error.type"] == "ModelAPIError"
    assert not any(SECRET_ARG in _everything(s) for s in finished)


def test_no_tracer_without_a_configured_provider() -> None:
    """The default (proxy) provider means tracing is off."""
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    assert run_tracer() is None


@pytest.mark.parametrize("given", ["model object", "base_url"])
async def test_a_local_model_asked_of_a_server_is_named_openai(
        given: str, spans: InMemorySpanExporter, tools: Tools, agent: Agent,
        server: ScriptedServer, model_for: ModelFactory) -> None:
    """An agent whose model is local/NAME, run against an OpenAI-compatible server (the
    CLI's --base-url): the spans name the provider the requests went to, not the embedded
    model."""
    local = dataclasses.replace(agent, model=ModelRef.parse("local/qwen2.5-coder-0.5b"))
    script(server, reply("hi"))
    if given == "model object":
        await run_agent(local, "Hi", library=tools.library, model=model_for(server, "chat"))
    else:
        await run_agent(local, "Hi", library=tools.library, base_url=server.base_url,
                        api_key="sk-test")
    run = spans.get_finished_spans()[-1]
    assert run.name == "invoke_agent hello_world_agent"
    assert run.attributes is not None
    assert run.attributes["gen_ai.provider.name"] == "openai"


async def test_spans_of_a_paused_and_resumed_run(spans: InMemorySpanExporter,
                                                 server: ScriptedServer,
                                                 model_for: ModelFactory) -> None:
    """A pause is not an error; a refused call gets a failed ``execute_tool`` span with the
    type only (neither its arguments nor the person's reason); each part's ``invoke_agent``
    span has the usage of its own requests (summing the spans does not count one twice)."""
    mail, mailer = Mail(), load_gram(GRAM).agents[0]
    reason = "Reason-Secret-91bd"
    script(server, call("sendMail", {"to": SECRET_ARG}, id="call_9"), reply("Not sent."))
    model = model_for(server, "chat")
    paused = await run_agent(mailer, "Mail", library=mail.library, model=model)
    first = spans.get_finished_spans()
    assert [s.name for s in first] == ["chat scripted", "invoke_agent mailer"]
    assert all(s.status.status_code != trace.StatusCode.ERROR for s in first)
    spans.clear()
    done = await resume_agent(mailer, paused, {"call_9": Refused(reason)},
                              library=mail.library, model=model)
    second = spans.get_finished_spans()
    assert [s.name for s in second] == ["execute_tool sendMail", "chat scripted",
                                        "invoke_agent mailer"]
    refused, _, run = second
    assert refused.attributes["error.type"] == "approval_refused"
    assert refused.status.status_code == trace.StatusCode.ERROR
    assert refused.attributes["gen_ai.tool.call.id"] == "call_9"
    assert not any(text in _everything(s) for s in first + second
                   for text in (SECRET_ARG, reason))
    runs = [s for s in first + second if s.name.startswith("invoke_agent")]
    assert sum(s.attributes["gen_ai.usage.input_tokens"] for s in runs) == (
        done.usage.input_tokens)
    assert run.attributes["gen_ai.usage.input_tokens"] == (
        done.usage.input_tokens - paused.usage.input_tokens)


async def test_traced_inline_awaitables_share_the_wall_time(spans: InMemorySpanExporter,
                                                            server: ScriptedServer,
                                                            model_for: ModelFactory) -> None:
    """Traced, inline calls run one after another through their spans: each awaitable is
    bounded by the time left when it starts, as untraced (their timeouts add up to no more
    than the wall time)."""
    library = _hanging_tools()
    agent = Agent(name="hanging", model="openai/scripted", instruction="x",
                  tools=tuple(t.spec() for t in library))
    script(server, calls(call("later", {"n": 1}, id="c1"), call("later", {"n": 2}, id="c2"),
                         call("later", {"n": 3}, id="c3")), reply("done"))
    with pytest.raises(LimitExceeded) as info:
        await run_agent(agent, "Go", library=library, model=model_for(server, "chat"),
                        limits=RunLimits(wall_time=0.3, tool_timeout=60))
    results = [m for m in info.value.context if isinstance(m, ToolResultMessage)]
    assert len(results) == 3 and sum(_stated_timeout(r.content) for r in results) <= 0.3
    assert [s.name for s in spans.get_finished_spans()].count("execute_tool later") == 3


@pytest.mark.parametrize("after", ["quick", "pause"])
async def test_traced_a_call_that_starts_late_is_bounded_by_the_end_of_the_run(
        spans: InMemorySpanExporter, after: str) -> None:
    """Traced, each call alongside others runs in a task of its own that starts after an
    async call held the event loop past the wall time before its first await: an async call,
    or one in a worker thread, is bounded by the end of the run there too (it reads the time
    left when its task starts): the run's time is up by then, so the tool is not run at
    all."""
    ran, late = await late_start_run("hog", after)
    assert ran == "hog"
    assert late.is_error and f"{after!r} was not run: the run's time was up" in late.content
    assert [s.name for s in spans.get_finished_spans()].count(f"execute_tool {after}") == 1
