"""A ToolLibrary served as an MCP server (``gramagent mcp serve``).

:func:`build_server` makes an SDK server whose tools are a library's tools: with an agent,
its gram specs (bound to the library first, so every mismatch is reported before serving);
without, every tool of the library with the schema of its Python signature. Optionally the
agent itself is one more tool (``input`` in, the agent's answer out).

A call is checked against the tool's schema, then run like a call of the loop (worker thread
or task, the tool's timeout, exceptions become results): a bad call or a failing tool is an
``isError`` result, never a broken connection.

Per-session state: tools that keep state per conversation (the sandboxed ``python_repl``)
get one conversation per MCP session: the stdio connection (one client per process), or the
``mcp-session-id`` of a streamable HTTP session. The 2026-07-28 protocol has no sessions: such
a request names one with ``_meta: {"gramagent/session": "<id>"}``, or gets a state of its own,
dropped after the call.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
import mcp_types as types
import uvicorn
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server

from gramagent._messages import Conversation
from gramagent._models.base import Model
from gramagent._runtime.approval import Refused
from gramagent._runtime.invoke import execute
from gramagent._runtime.library import BoundAgent, Tool, ToolContext, ToolLibrary
from gramagent._runtime.limits import INHERIT, RunLimits
from gramagent._runtime.loop import resume_agent, run_agent
from gramagent._spec.calls.validate import compile_validator
from gramagent._spec.model import Agent
from gramagent.errors import ConfigurationError, GramagentError

__all__ = ["AGENT_INPUT", "SESSION_META", "build_server", "running_http", "serve_http",
           "serve_stdio"]

AGENT_INPUT: Final = "input"
"""The parameter of the agent-as-a-tool: the user message."""
STDIO_SESSION: Final = "mcp-stdio"
"""The conversation of a stdio connection (a stdio server has exactly one client)."""
SESSION_META: Final = "gramagent/session"
"""The ``_meta`` key by which a sessionless (2026-07-28) HTTP request names its session."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _Entry:
    """One served tool: what clients are told, how a call is checked, what runs it."""

    listed: types.Tool
    check: Callable[[object], Sequence[str]]
    """The schema violations of a call's arguments (none when they are valid)."""
    tool: Tool | None = None
    """The implementation; None for the agent-as-a-tool."""


@dataclass(slots=True)
class _Service:
    library: ToolLibrary
    entries: dict[str, _Entry]
    limits: RunLimits
    bound: BoundAgent | None = None
    model: Model | None = None
    conversations: OrderedDict[str, Conversation] = field(default_factory=OrderedDict)
    """The agent-as-a-tool's conversation per session, least recently used first."""

    async def list_tools(self, ctx: ServerRequestContext[Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[e.listed for e in self.entries.values()])

    async def call_tool(self, ctx: ServerRequestContext[Any],
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        entry = self.entries.get(params.name)
        if entry is None:
            return _error(f"unknown tool {params.name!r}; this server has: "
                          f"{', '.join(self.entries) or 'no tools'}")
        arguments = dict(params.arguments or {})
        problems = entry.check(arguments)
        if problems:
            return _error(f"invalid arguments for {params.name!r}: " + "; ".join(problems))
        session, keep = _session_key(ctx)
        try:
            if entry.tool is None:
                return await self._run_agent(session, arguments[AGENT_INPUT])
            state = self.library.conversation_state(session)
            context = ToolContext(conversation_id=session, run_id=uuid.uuid4().hex,
                                  call_id=str(ctx.request_id), tool=params.name, state=state)
            timeout = entry.tool.timeout
            outcome = await execute(
                entry.tool, arguments, context=context,
                timeout=self.limits.tool_timeout if timeout is INHERIT else timeout,
                max_output_chars=self.limits.max_tool_output_chars)
            return _result(outcome.output, error=outcome.error_type is not None)
        finally:
            if not keep:
                self.library.forget(session)
                self.conversations.pop(session, None)

    async def _run_agent(self, session: str, message: str) -> types.CallToolResult:
        assert self.bound is not None and self.model is not None
        try:
            response = await run_agent(self.bound, message, library=self.library,
                                       context=self.conversations.get(session),
                                       model=self.model, limits=self.limits)
            while response.paused:  # nobody here can approve: the agent hears so and answers
                response = await resume_agent(
                    self.bound, response, dict.fromkeys(
                        (p.call_id for p in response.pending_approvals), _NO_APPROVER),
                    library=self.library, model=self.model, limits=self.limits)
        except GramagentError as exc:
            return _error(f"{type(exc).__name__}: {exc}")
        self.conversations[session] = response.context
        self.conversations.move_to_end(session)
        while len(self.conversations) > self.library.max_conversations:
            self.conversations.popitem(last=False)
        return _result(response.content or "")


_NO_APPROVER = Refused("nobody can approve tool calls through this MCP server")
"""The decision on an agent's call that needs approval, when the agent is served over MCP."""


def _result(text: str, *, error: bool = False) -> types.CallToolResult:
    content: list[types.ContentBlock] = [types.TextContent(type="text", text=text)]
    return types.CallToolResult(content=content, is_error=error)


def _error(text: str) -> types.CallToolResult:
    return _result(text, error=True)


def _session_key(ctx: ServerRequestContext[Any]) -> tuple[str, bool]:
    """The conversation of a call, and whether it outlives the call."""
    request = ctx.request
    if request is None:  # stdio: one connection, one client
        return STDIO_SESSION, True
    headers = getattr(request, "headers", None)
    session_id = headers.get("mcp-session-id") if headers is not None else None
    if session_id:
        return f"mcp-http-{session_id}", True
    named = (ctx.meta or {}).get(SESSION_META)
    if isinstance(named, str) and named:
        return f"mcp-named-{named}", True
    return f"mcp-call-{uuid.uuid4().hex}", False


def build_server(
    library: ToolLibrary, agent: Agent | None = None, *,
    agent_tool: bool = False, model: Model | None = None, limits: RunLimits | None = None,
    name: str = "gramagent", check_description: bool = True,
) -> Server[Any]:
    """An MCP server (the SDK's low-level ``Server``) offering ``library``'s tools.

    Args:
        library: the implementations.
        agent: serve its tools, with the schemas of its gram specs (bound to ``library``
            first); without it, every tool of the library with its Python signature's schema.
        agent_tool: also serve the agent itself as a tool named after it (needs ``agent`` and
            ``model``): ``input`` is a user message, the result the agent's answer; an MCP
            session is one conversation.
        model: the model the agent-as-a-tool runs on.
        limits: run limits (the tools' timeout and output cut, the agent's runs).
        name: the server's name in the handshake.
        check_description: compare descriptions when binding ``agent``.

    Raises:
        ToolError: the agent's specs do not bind to ``library`` (every problem listed).
        ConfigurationError: ``agent_tool`` without an agent or a model, or a tool name clash.
    """
    limits = limits or RunLimits()
    entries: dict[str, _Entry] = {}
    bound = None
    if agent is not None:
        bound = library.bind(agent, check_description=check_description)
        for spec in agent.tools:
            entries[spec.name] = _Entry(
                listed=types.Tool(name=spec.name, description=spec.description,
                                  input_schema=spec.schema),
                check=bound.validators[spec.name], tool=bound.tools[spec.name])
    else:
        for tool in library:
            entries[tool.name] = _Entry(
                listed=types.Tool(name=tool.name, description=tool.description,
                                  input_schema=tool.schema),
                check=compile_validator(tool.schema).errors, tool=tool)
    if agent_tool:
        if agent is None or model is None:
            raise ConfigurationError("serving the agent as a tool needs an agent and a model")
        if agent.name in entries:
            raise ConfigurationError(f"the agent {agent.name!r} has a tool of its own name; "
                                     "it cannot also be served as a tool")
        schema = {"type": "object", "properties": {AGENT_INPUT: {
            "type": "string", "description": "The user's message to the agent."}},
            "required": [AGENT_INPUT]}
        entries[agent.name] = _Entry(
            listed=types.Tool(name=agent.name, description=agent.description
                              or agent.instruction, input_schema=schema),
            check=compile_validator(schema).errors)
    service = _Service(library=library, entries=entries, limits=limits, bound=bound,
                       model=model)
    return Server(name, on_list_tools=service.list_tools, on_call_tool=service.call_tool)


def serve_stdio(server: Server[Any]) -> None:
    """Serve ``server`` on this process's stdin and stdout until stdin closes."""

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)


def _uvicorn(server: Server[Any], host: str, port: int) -> uvicorn.Server:
    app = server.streamable_http_app(host=host)
    return uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning",
                                         lifespan="on"))


def serve_http(server: Server[Any], *, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serve ``server`` over streamable HTTP at ``http://HOST:PORT/mcp`` until interrupted."""
    _uvicorn(server, host, port).run()


@contextlib.contextmanager
def running_http(server: Server[Any], *, host: str = "127.0.0.1", port: int = 0,
                 start_timeout: float = 20.0) -> Iterator[str]:
    """Serve ``server`` over streamable HTTP in a background thread; yields its URL.

    Port 0 picks a free port. Stops the server when the block ends.

    Raises:
        ConfigurationError: the server did not start within ``start_timeout`` seconds.
    """
    web = _uvicorn(server, host, port)
    thread = threading.Thread(target=web.run, name="gramagent-mcp-http", daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout
    while not web.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            web.should_exit = True
            raise ConfigurationError(f"the MCP HTTP server on {host}:{port} did not start")
        time.sleep(0.02)
    bound_port = web.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://{host}:{bound_port}/mcp"
    finally:
        web.should_exit = True
        thread.join(timeout=10)
