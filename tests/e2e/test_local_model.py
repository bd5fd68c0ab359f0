"""The hello-world agent on the embedded 0.5B model, through ``run_agent``, for real.

The model is small: these tests check what must hold for a user (the tool is called with the
name, the greeting names the person, the conversation carries over), not exact wording.
Temperature is 0, so a run is repeatable on one machine.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from gramagent._messages import UserMessage
from gramagent._models.base import ModelRequest
from gramagent._models.local import LocalModel, local_model
from gramagent._models.weights import resolve_weights
from gramagent._runtime.library import ToolLibrary
from gramagent._runtime.loop import AgentResponse, run_agent
from gramagent._spec.model import Agent
from gramagent.errors import ConfigurationError, ModelAPIError

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _greetings(response: AgentResponse, name: str) -> list[str]:
    """Results of successful sayHello calls for ``name`` in this run."""
    return [
        str(i.result) for i in response.tool_invocations
        if i.name == "sayHello" and i.ok and isinstance(i.arguments, dict)
        and i.arguments.get("personName") == name
    ]


def _check_answer_names(response: AgentResponse, name: str) -> None:
    """The user-visible answer names the person, and is the model's own: the run ended on
    its answer (a repeat of the call is read as the answer step, issue 33), not on the
    loop's repeat guard copying the earlier result over."""
    assert name in response.content, f"answer {response.content!r} does not name {name}"
    assert response.stopped_by is None, f"stopped by {response.stopped_by}"
    assert response.finish_reason == "stop"
    repeated = [i for i in response.tool_invocations if i.error_type == "repeated_call"]
    assert not repeated, f"the loop answered repeated calls: {repeated}"


async def test_hello_world_greets_alice(hello_agent: Agent, hello_library: ToolLibrary) -> None:
    """``Hi, I'm Alice``: sayHello is called with Alice, recorded, and the greeting names her."""
    response = await run_agent(hello_agent, "Hi, I'm Alice", library=hello_library)
    greetings = _greetings(response, "Alice")
    assert greetings, f"no sayHello(personName='Alice') call in {response.tool_invocations}"
    assert all("Alice" in g for g in greetings)
    assert response.usage.requests >= 2 and response.usage.input_tokens > 0
    _check_answer_names(response, "Alice")


async def test_a_two_turn_conversation(hello_agent: Agent, hello_library: ToolLibrary) -> None:
    """The second turn continues the first: its history is kept and the new friend greeted."""
    first = await run_agent(hello_agent, "Hi, I'm Alice", library=hello_library)
    second = await run_agent(
        hello_agent, "My friend Bob just arrived. Please greet him too.",
        library=hello_library, context=first.context,
    )
    before = first.context.messages
    assert second.context.messages[: len(before)] == before
    assert UserMessage(content="My friend Bob just arrived. Please greet him too.") in (
        second.context.messages[len(before):])
    assert _greetings(second, "Bob"), f"Bob was not greeted: {second.tool_invocations}"
    assert not _greetings(second, "Alice") or _greetings(first, "Alice")
    assert second.usage.input_tokens > first.usage.input_tokens / 2
    _check_answer_names(second, "Bob")


async def test_one_server_serves_every_run() -> None:
    """Models of the same weights share one running server (one child process)."""
    a, b = local_model("qwen2.5-coder-0.5b"), local_model("qwen2.5-coder-0.5b")
    assert isinstance(a, LocalModel) and isinstance(b, LocalModel)
    server_a, server_b = await a.start(), await b.start()
    assert server_a is server_b and server_a.alive
    await a.aclose()
    await b.aclose()


async def test_a_crashed_server_is_a_model_api_error_then_a_fresh_server() -> None:
    """Killing the server's process turns the next request into a ModelAPIError naming the
    signal; the request after that starts a new server and succeeds."""
    model = local_model("qwen2.5-coder-0.5b", settings={"max_tokens": 16})
    assert isinstance(model, LocalModel)
    server = await model.start()
    assert server.pid is not None
    os.kill(server.pid, signal.SIGKILL)
    request = ModelRequest(model="qwen2.5-coder-0.5b", instruction="Answer briefly.",
                           messages=[UserMessage(content="Say yes.")])
    with pytest.raises(ModelAPIError, match="killed by SIGKILL"):
        await model.request(request)
    turn = await model.request(request)
    assert model.server is not None and model.server.pid != server.pid
    assert turn.text is not None and turn.text.strip()
    await model.aclose()


def test_the_server_does_not_outlive_its_parent(tmp_path) -> None:
    """A parent that dies without cleaning up (``os._exit``) leaves no server behind."""
    script = textwrap.dedent("""
        import asyncio, os
        from gramagent._models.local import local_model
        server = asyncio.run(local_model("qwen2.5-coder-0.5b").start())
        print(server.pid, flush=True)
        os._exit(0)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=600, check=True)
    pid = int(result.stdout.split()[-1])
    deadline = time.monotonic() + 60
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _running(pid), f"server process {pid} survived its parent"


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie has exited; it only waits for init to reap it
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][:1] != "Z"
    except OSError:
        return False



async def test_hello_world_answers_an_unrelated_question_on_the_recommended_model(
        hello_agent: Agent, hello_library: ToolLibrary) -> None:
    """On the model and mode the README recommends for agents that must decline (the 1.5B,
    ``tool_call_mode="hybrid"``), the hello-world agent answers a question sayHello has
    nothing to do with in text and greets nobody; it still greets a user who greets it."""
    try:
        resolve_weights("qwen2.5-coder-1.5b", progress=False)
    except ConfigurationError as exc:  # the 1.5B is optional: its parts may not be installed
        pytest.skip(str(exc))
    model = local_model("qwen2.5-coder-1.5b", tool_call_mode="hybrid")
    try:
        answer = await run_agent(hello_agent, "What is the capital of France?",
                                 library=hello_library, model=model)
        greeted = await run_agent(hello_agent, "Hi, I'm Alice", library=hello_library,
                                  model=model)
    finally:
        await model.aclose()
    assert not answer.tool_invocations, f"called {answer.tool_invocations}"
    assert "Paris" in answer.content, f"answer {answer.content!r}"
    assert _greetings(greeted, "Alice"), f"Alice was not greeted: {greeted.tool_invocations}"
