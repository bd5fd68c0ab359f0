"""Helpers of the loop tests: test tools, agents, and readers of recorded request bodies."""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from gramagent._messages import AssistantMessage, ToolResultMessage, UserMessage
from gramagent._models.base import Model, ModelRequest, NamedToolChoice
from gramagent._models.harmony_parse import HarmonyMessage, parse_harmony
from gramagent._models.registry import WIRE_FORMATS, api_names
from gramagent._runtime.library import ToolContext, ToolLibrary
from gramagent._spec.model import Agent
from gramagent.testing import ScriptedModel, ScriptedServer, ScriptTurn

APIS = api_names()
"""Every registered wire format: the loop's guarantees hold in each."""
PARALLEL_APIS = tuple(name for name, wire in WIRE_FORMATS.items() if wire.parallel_calls)
"""The formats whose replies carry several calls (legacy functions and Harmony make one)."""
INPROCESS = "inprocess"
"""The ``api`` of a loop test run on the in-process :class:`ScriptedModel` (no HTTP)."""


def _over_http(apis: Sequence[str]) -> tuple[Any, ...]:
    return tuple(pytest.param(api, marks=pytest.mark.slow) for api in apis)


LOOP_APIS = (INPROCESS, *_over_http(APIS))
"""Where a test of the loop's semantics runs: in process (the fast suite), and over real HTTP
in every wire format (marked slow: the full suite)."""
LOOP_PARALLEL_APIS = (INPROCESS, *_over_http(PARALLEL_APIS))
"""As :data:`LOOP_APIS`, for the tests of several calls in one turn."""
GREETING = "Returns a friendly greeting message for the given name."
HELLO = "Hello, Alice! Nice to meet you."
"""What the sayHello of :func:`make_tools` answers for Alice."""


@dataclass
class Tools:
    """A library of test tools that count how often each one actually ran."""

    library: ToolLibrary = field(default_factory=ToolLibrary)
    runs: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)
    """Held while a tool counts its run: blocking tools count from worker threads at once."""

    def ran(self, name: str) -> None:
        with self.lock:
            self.runs[name] += 1


def make_tools() -> Tools:
    tools = Tools()
    lib = tools.library

    @lib.register
    def sayHello(personName: str = "world") -> str:
        """Returns a friendly greeting message for the given name."""
        tools.ran("sayHello")
        return f"Hello, {personName}! Nice to meet you."

    @lib.register
    def fail(reason: str) -> str:
        """Always fails."""
        tools.ran("fail")
        raise ValueError(f"boom: {reason}")

    @lib.register(timeout=0.2)
    async def stall() -> str:
        """Never finishes on its own."""
        tools.ran("stall")
        await asyncio.Event().wait()
        return "unreachable"

    @lib.register
    def lookup(key: str) -> dict[str, Any]:
        """Returns a record."""
        tools.ran("lookup")
        return {"key": key, "values": [1, 2], "ok": True}

    @lib.register
    def visits(ctx: ToolContext) -> int:
        """Counts calls within one conversation."""
        tools.ran("visits")
        ctx.state["visits"] = ctx.state.get("visits", 0) + 1
        return int(ctx.state["visits"])

    return tools


def hello_library(greeting: str = "Hello") -> ToolLibrary:
    """A library holding only sayHello, answering ``"{greeting}, {personName}!"``."""
    library = ToolLibrary()

    @library.register
    def sayHello(personName: str = "world") -> str:
        """Returns a friendly greeting message for the given name."""
        return f"{greeting}, {personName}!"

    return library


def make_agent(library: ToolLibrary, names: Sequence[str] | None = None) -> Agent:
    specs = tuple(t.spec() for t in library if names is None or t.name in names)
    return Agent(name="hello_world_agent", model="openai/scripted",
                 instruction="You are friendly. Greet users with sayHello.", tools=specs)



ModelFactory = Callable[[ScriptedServer, str], Model]


@dataclass(frozen=True)
class Asked:
    """One request the in-process model was asked: ``body`` is the ModelRequest itself (the
    readers below take it as they take a wire body)."""

    body: ModelRequest


class InProcess:
    """What the ``server`` fixture gives a test whose ``api`` is :data:`INPROCESS`: the same
    script, answered by :attr:`model` (the ``model_for`` fixture hands it out)."""

    def __init__(self) -> None:
        self.model = ScriptedModel()

    def add(self, *turns: ScriptTurn) -> None:
        self.model.add(*turns)

    @property
    def remaining(self) -> int:
        return self.model.remaining

    @property
    def requests(self) -> list[Asked]:
        return [Asked(request) for request in self.model.requests]



def script(srv: ScriptedServer, *turns: ScriptTurn) -> ScriptedServer:
    srv.add(*turns)
    return srv


def reference_hash(arguments: object) -> str:
    """``args_preview_hash`` as the ADR defines it, written out independently of the
    implementation: SHA-256 of the first 200 characters of the arguments' canonical JSON
    (sorted keys, compact), or of the raw text when they did not parse (a ``str``)."""
    text = arguments if isinstance(arguments, str) else json.dumps(
        arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text[:200].encode("utf-8")).hexdigest()


# -- reading what the model was sent ---------------------------------------------------------

def _harmony(body: dict[str, Any]) -> list[HarmonyMessage]:
    """The messages of a Harmony prompt (``/v1/completions`` bodies); none for other formats."""
    prompt = body.get("prompt")
    return parse_harmony(prompt) if isinstance(prompt, str) else []


def sent_tools(body: dict[str, Any] | ModelRequest) -> str:
    """The tool declarations of a request body as text, whatever the wire format."""
    if isinstance(body, ModelRequest):
        return json.dumps([[d.name, d.description, d.parameters] for d in body.tools])
    declared = body.get("tools", body.get("functions"))
    if declared is not None:
        return json.dumps(declared)
    return "".join(m.content for m in _harmony(body) if m.role == "developer")


def sent_results(body: dict[str, Any] | ModelRequest) -> list[tuple[str | None, str]]:
    """(call id, content) of every tool result in a request body, whatever the wire format
    (legacy functions and Harmony carry no call ids: None)."""
    if isinstance(body, ModelRequest):
        return [(m.call_id, m.content) for m in body.messages if isinstance(m, ToolResultMessage)]
    out: list[tuple[str | None, str]] = [
        (None, m.content) for m in _harmony(body) if m.role == "tool"
    ]
    for item in body.get("messages", ()):
        if item.get("role") == "tool":
            out.append((item["tool_call_id"], item["content"]))
        elif item.get("role") == "function":
            out.append((None, item["content"]))
    for item in body.get("input", ()):
        if item.get("type") == "function_call_output":
            out.append((item["call_id"], item["output"]))
    return out


def sent_calls(body: dict[str, Any] | ModelRequest) -> list[str]:
    """Names of the tool calls in a request body's history."""
    if isinstance(body, ModelRequest):
        return [c.name for m in body.messages if isinstance(m, AssistantMessage)
                for c in m.tool_calls]
    names: list[str] = []
    for item in body.get("messages", ()):
        names.extend(c["function"]["name"] for c in item.get("tool_calls") or ())
        if item.get("function_call"):
            names.append(item["function_call"]["name"])
    names.extend(i["name"] for i in body.get("input", ()) if i.get("type") == "function_call")
    names.extend(m.name for m in _harmony(body) if m.role == "assistant" and m.name)
    return names


def sent_choice(body: dict[str, Any] | ModelRequest) -> Any:
    """The tool choice of a request body (``function_call`` for legacy functions; for Harmony,
    read back from the prompt: tools left out, or the prefill that forces a call)."""
    if isinstance(body, ModelRequest):
        choice = body.tool_choice
        return {"name": choice.name} if isinstance(choice, NamedToolChoice) else choice
    prompt = body.get("prompt")
    if not isinstance(prompt, str):
        return body.get("tool_choice", body.get("function_call"))
    start, _, prefill = prompt.rpartition("<|start|>assistant")
    if prefill == "<|channel|>commentary to=functions.":
        return "required"
    if prefill:
        return {"name": prefill.split("to=functions.", 1)[1].split(" ", 1)[0]}
    return "auto" if "namespace functions" in start else "none"


def user_texts(body: dict[str, Any] | ModelRequest) -> list[str]:
    if isinstance(body, ModelRequest):
        return [m.content for m in body.messages if isinstance(m, UserMessage)]
    items = body.get("messages", body.get("input", ()))
    texts = [i["content"] for i in items if i.get("role") == "user"]
    return texts + [m.content for m in _harmony(body) if m.role == "user"]


class Barrier:
    """Lets n concurrent tool calls through only once all n have started (async or threads)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.log: list[tuple[str, int]] = []
        self._lock = threading.Lock()
        self._threads = threading.Barrier(n, timeout=10)
        self._count = 0
        self._event: asyncio.Event | None = None

    def _mark(self, what: str, i: int) -> None:
        with self._lock:
            self.log.append((what, i))

    async def wait_async(self, i: int) -> None:
        self._mark("start", i)
        if self._event is None:
            self._event = asyncio.Event()
        self._count += 1
        if self._count == self.n:
            self._event.set()
        await asyncio.wait_for(self._event.wait(), timeout=10)
        self._mark("end", i)

    def wait_sync(self, i: int) -> None:
        self._mark("start", i)
        self._threads.wait()
        self._mark("end", i)


def interrupt_tools(started: asyncio.Event, ran: list[str] | None = None) -> ToolLibrary:
    """Tools of every kind for the interruption tests, each noting its name in ``ran`` when
    it runs: ``send`` (inline), ``quick`` (async), ``block`` (in a thread), which finish,
    and ``wait`` (async), which sets ``started`` and never finishes."""
    done = ran if ran is not None else []
    library = ToolLibrary()

    @library.register(blocking=False)
    def send(n: int) -> str:
        """Inline."""
        done.append("send")
        return "sent"

    @library.register
    async def quick(n: int) -> str:
        """Async, finishes."""
        done.append("quick")
        return "quick done"

    @library.register
    def block(n: int) -> str:
        """In a thread, finishes."""
        done.append("block")
        return "block done"

    @library.register
    async def wait(n: int) -> str:
        """Never finishes."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    return library
