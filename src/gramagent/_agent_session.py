"""One conversation with one agent, opened from names: an agent file, a tool library reference,
a model reference, limits, a stored session. What ``gramagent run`` and ``gramagent chat`` do
below their printing, as a library: :class:`AgentSession` checks every option value, then loads,
binds and resolves what the options name, then runs turns of one conversation (streamed to a
:class:`LiveOutput` where one is given), keeping it in the session store where one is named.

A feature on top of the runtime (it names MCP servers through :mod:`gramagent.mcp`); the CLI
prints what it returns.
"""

from __future__ import annotations

import importlib
import inspect
import os
import stat
import sys
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from gramagent._limit_values import limit_problem
from gramagent.errors import ConfigurationError, RunError, ToolError

if TYPE_CHECKING:
    from gramagent._messages import Conversation
    from gramagent._models.base import Model
    from gramagent._runtime.approval import ApprovalRequest, Decision
    from gramagent._runtime.events import EventSink
    from gramagent._runtime.library import BoundAgent, ToolLibrary
    from gramagent._runtime.limits import RunLimits
    from gramagent._runtime.loop import AgentResponse
    from gramagent._runtime.sessions import StoredSession
    from gramagent._spec.model import Agent

__all__ = ["DEFAULT_TOOLS", "AgentSession", "LiveOutput", "SessionOptions", "check_options",
           "load_library", "require_file"]

DEFAULT_TOOLS = "gramagent.tools:builtin_library"

MODEL_FORMS = ("give PROVIDER/NAME: openai/NAME (any OpenAI-compatible server, with "
               "--base-url) or local/NAME (the embedded model: local/qwen2.5-coder-0.5b, "
               "local/qwen2.5-coder-1.5b, local/path/to/model.gguf)")
BIND_HINT = ("--tools MODULE:LIBRARY names a library that has these tools; --dry-run calls the "
             "model without running any tool")

ExchangeHook = Callable[[Mapping[str, Any], Any, "int | None"], None]
"""The adapters' ``on_exchange``: raw request, response and HTTP status of each exchange."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionOptions:
    """Where a session's agent, model, tools, limits and stored conversation come from (the
    options ``run`` and ``chat`` share, as the command line names them)."""

    agent_file: Path
    """The agent's gram file."""
    agent_name: str | None = None
    """Which agent of a file that declares several."""
    model: str | None = None
    """``provider/name`` overriding the agent's model."""
    base_url: str | None = None
    """API root of an OpenAI-compatible server."""
    api: str | None = None
    """Wire format (a name of the registry; default: chat)."""
    api_key: str | None = None
    """The server's API key (else the environment's)."""
    tools: str | None = None
    """``module:attribute`` of a ToolLibrary or a zero-argument factory of one."""
    events: Path | None = None
    """Append tool-call events to this JSONL file."""
    max_iterations: int | None = None
    """Model requests per turn."""
    timeout: float | None = None
    """Wall-time limit of one turn, in seconds."""
    max_turns: int | None = None
    """User messages the conversation may hold (``RunLimits.max_turns``)."""
    max_context_bytes: int | None = None
    """UTF-8 bytes of messages a request may carry (``RunLimits.max_context_bytes``)."""
    dry_run: bool = False
    """Call the model but run no tool: each valid call answers ``{"ok": true}``."""
    session: str | None = None
    """Keep the conversation in this stored session (resumed if it exists)."""
    tool_call_mode: str | None = None
    """How the model writes tool calls (``tool_call_mode`` of the chat adapter and the
    embedded model): ``native``, ``constrained``, ``hybrid`` or ``text``."""


class LiveOutput(Protocol):
    """Where a streamed turn goes as it is generated."""

    def text(self, piece: str) -> None:
        """A piece of the answer."""

    def tool_call(self, name: str) -> None:
        """The model asked for a call of ``name``."""

    def end(self, *, interrupted: bool = False) -> None:
        """The answer is over (or was stopped)."""


def check_options(options: SessionOptions) -> None:
    """Refuse option values that are wrong whatever the agent and the model are, before
    anything is loaded or resolved.

    Raises:
        ConfigurationError: a limit that is not a positive number, an empty model, an empty
            session name (the message names the option as typed).
    """
    problems = [limit_problem("--timeout", options.timeout),  # named as typed
                limit_problem("--max-iterations", options.max_iterations, whole=True),
                limit_problem("--max-turns", options.max_turns, whole=True),
                limit_problem("--max-context-bytes", options.max_context_bytes, whole=True)]
    if options.model is not None and not options.model.strip():
        problems.append(f"--model must not be empty; {MODEL_FORMS}")
    if options.session is not None and not options.session.strip():
        problems.append("--session must not be empty")
    found = [p for p in problems if p is not None]
    if found:
        raise ConfigurationError("; ".join(found))


def load_library(reference: str | None = None) -> ToolLibrary:
    """The ToolLibrary named by ``module:attribute`` (default: the built-in tools).

    ``mcp:stdio:COMMAND ARGS...`` and ``mcp:http://HOST:PORT/PATH`` name MCP servers, and
    several sources separated by ``;`` are combined (see :mod:`gramagent.mcp._sources`).

    The attribute is either a ToolLibrary or a callable taking no arguments that returns one.
    Modules are looked up in the working directory too, as ``python -m`` does.

    Raises:
        ConfigurationError: the reference is malformed, cannot be imported, or does not
            give a ToolLibrary.
    """
    from gramagent._runtime.library import ToolLibrary
    from gramagent.mcp._sources import is_tool_sources, load_tool_sources

    reference = reference or DEFAULT_TOOLS
    if is_tool_sources(reference):  # MCP servers, or several sources separated by ';'
        return load_tool_sources(reference, load_library)
    module_name, sep, attr = reference.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigurationError(
            f"--tools {reference!r}: expected 'module:attribute', e.g. {DEFAULT_TOOLS!r}"
        )
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # like `python -m`: modules of the working directory
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(
            f"--tools {reference!r}: cannot import {module_name!r}: {exc}"
        ) from exc
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigurationError(
                f"--tools {reference!r}: module {module_name!r} has no attribute {attr!r}"
            ) from None
    if not isinstance(obj, ToolLibrary) and callable(obj):
        try:
            inspect.signature(obj).bind()
        except TypeError:
            raise ConfigurationError(
                f"--tools {reference!r} is a callable that needs arguments; expected a "
                "ToolLibrary or a zero-argument function returning one"
            ) from None
        except ValueError:  # no signature to inspect (some builtins): just try it
            pass
        obj = obj()
    if not isinstance(obj, ToolLibrary):
        raise ConfigurationError(
            f"--tools {reference!r} gave a {type(obj).__name__}, expected a ToolLibrary "
            "or a zero-argument function returning one"
        )
    return obj


@dataclass
class AgentSession:
    """One conversation with one agent; each :meth:`turn` continues it.

    Everything that can fail before a request (an option's value, the gram file, the agent
    name, the tool binding, the model configuration) fails in :meth:`open`, in that order.
    """

    options: SessionOptions
    agent: Agent = field(init=False)
    target: Agent | BoundAgent = field(init=False)
    """The bound agent (the bare agent in dry-run mode, where no tool runs)."""
    library: ToolLibrary | None = field(init=False)
    model: Model = field(init=False)
    limits: RunLimits = field(init=False)
    sinks: list[EventSink] = field(default_factory=list, init=False)
    context: Conversation | None = field(default=None, init=False)
    stored: StoredSession | None = field(default=None, init=False)
    """The stored session the conversation is kept in (``options.session``)."""
    _closers: list[Callable[[], Any]] = field(default_factory=list, init=False)

    @classmethod
    def open(cls, options: SessionOptions, *, sinks: tuple[EventSink, ...] = (),
             on_exchange: ExchangeHook | None = None,
             closers: tuple[Callable[[], Any], ...] = ()) -> AgentSession:
        """Check ``options``, then load, bind and resolve everything they name.

        Args:
            options: What to open.
            sinks: Event sinks every run of the session is given (beside ``options.events``).
            on_exchange: Shown each raw exchange with the model server (``-v``).
            closers: Called when the session closes (or fails to open), e.g. a tracer's shutdown.

        Raises:
            ConfigurationError: a bad option value, a missing file, an unresolvable model.
            ToolError: the agent's tools do not bind to the library.
        """
        check_options(options)
        session = cls(options)
        session._closers.extend(closers)
        try:
            session._open(on_exchange)
        except BaseException:
            for close in session._closers:  # what was opened before the failure
                with suppress(Exception):
                    close()
            raise
        session.sinks.extend(sinks)
        return session

    def _open(self, on_exchange: ExchangeHook | None) -> None:
        """The limits, the stored session, the agent, its tools, the model, the sinks."""
        from gramagent._logs import add_secret, env_secrets
        from gramagent._runtime.limits import RunLimits
        from gramagent._spec.gram.text import load_agent

        options = self.options
        overrides: dict[str, Any] = {}
        if options.max_iterations is not None:
            overrides["max_iterations"] = options.max_iterations
        if options.timeout is not None:
            overrides["wall_time"] = options.timeout
        for name in ("max_turns", "max_context_bytes"):
            if getattr(options, name) is not None:
                overrides[name] = getattr(options, name)
        self.limits = RunLimits(**overrides)
        if options.session is not None:
            from gramagent._runtime.sessions import SessionStore

            self.stored = SessionStore().open(options.session)
        # The key given on the command line and the environment as it is now.
        add_secret(options.api_key, *env_secrets(os.environ))
        require_file(options.agent_file, "an agent's .gram file")
        self.agent = load_agent(options.agent_file, options.agent_name)
        self._bind()
        self.model = _session_model(options, self.agent, on_exchange)
        if options.events is not None:
            from gramagent._runtime.events import JSONLSink

            jsonl = JSONLSink(options.events)
            jsonl.open()
            self._closers.append(jsonl.close)
            self.sinks.append(jsonl)

    def _bind(self) -> None:
        """Load the library and bind the agent to it (in dry-run mode only load it, if named:
        the specs' schemas check the calls, no implementation is needed)."""
        tools = self.options.tools
        self.library = load_library(tools) if tools or not self.options.dry_run else None
        close = getattr(self.library, "close", None)
        if callable(close):  # MCP server sessions
            self._closers.append(close)
        if self.options.dry_run or self.library is None:
            self.target = self.agent
            return
        try:  # every binding problem at once, before any request
            self.target = self.library.bind(self.agent)
        except ToolError as exc:
            raise ToolError(exc.problems, hint=BIND_HINT) from None

    async def start_model(self) -> None:
        """Start the model now if it starts at all (the embedded model loads its weights and
        server), so that loading is not part of the first turn and its ``--timeout``."""
        start = getattr(self.model, "start", None)
        if start is not None and inspect.iscoroutinefunction(start):
            await start()

    async def turn(self, message: str, live: LiveOutput | None = None) -> AgentResponse:
        """Run one user message; the conversation continues from the previous turn.

        With ``live``, the answer is streamed to it as it is generated; a turn cancelled
        (Ctrl-C) keeps its partial answer, marked, and the conversation goes on from there.
        With a stored session, the turn starts from what the store holds (another process may
        have added turns) and what it adds is saved when it ends, however it ends.
        """
        return await self._held(message, live)

    async def resume(self, decisions: Mapping[str, Decision],
                     live: LiveOutput | None = None, paused: AgentResponse | None = None
                     ) -> AgentResponse:
        """Continue a turn that paused for approvals, with a decision on each waiting call
        (stored as :meth:`turn` stores). ``paused``: the response the turn paused with, so
        that its limits hold across the pause (None: a stored turn of an earlier process)."""
        return await self._held(dict(decisions), live, paused)

    def pending_approvals(self) -> tuple[ApprovalRequest, ...]:
        """The tool calls the conversation waits for a person to approve (a stored session's
        from an earlier process too)."""
        from gramagent._runtime.approval import waiting_requests

        if self.stored is not None:
            return self.stored.pending_approvals
        return () if self.context is None else waiting_requests(self.context)

    async def _held(self, start: str | dict[str, Decision], live: LiveOutput | None,
                    paused: AgentResponse | None = None) -> AgentResponse:
        """:meth:`_run`, holding the stored session (if any) from loading to saving.

        Raises:
            ValidationError: the calls decided on were decided by another process meanwhile.
        """
        from gramagent._runtime.approval import check_still_waiting

        if self.stored is None:
            return await self._run(start, live, paused)
        async with self.stored.turn(self.agent.name) as held:
            if held.context is not None:
                self.context = held.context
                if not isinstance(start, str):  # decided on the response, or as read
                    check_still_waiting(start, held.context, self.stored.name,
                                        self.stored.last_read if paused is None
                                        else paused.context)
            before = self.context
            response = None
            try:
                # A turn an earlier process paused continues from what the store kept of it.
                response = await self._run(start, live, paused or held.paused)
                return response
            finally:
                if self.context is not None and self.context is not before:
                    held.save(self.context, response)

    async def _run(self, start: str | dict[str, Decision], live: LiveOutput | None,
                   paused: AgentResponse | None) -> AgentResponse:
        """A run from user message ``start``, or resumed with decisions."""
        from gramagent._runtime.loop import resume_agent, run_agent

        if live is not None:
            return await self._streamed_run(start, live, paused)
        options = self._run_options()
        try:
            if isinstance(start, str):
                response = await run_agent(self.target, start, context=self.context, **options)
            else:
                response = await resume_agent(self.target, self._paused(paused), start,
                                              **options)
        except RunError as exc:
            if exc.context is not None:
                self.context = exc.context
            raise
        self.context = response.context
        return response

    def _paused(self, paused: AgentResponse | None) -> AgentResponse | Conversation:
        """What a resumed run continues: ``paused`` on the conversation as it is now (stored
        sessions are reloaded), or the bare conversation when it moved on since."""
        import dataclasses

        from gramagent._messages import Conversation

        context = self.context if self.context is not None else Conversation()
        if paused is None or paused.context != context:
            return context
        return dataclasses.replace(paused, context=context)

    async def _streamed_run(self, start: str | dict[str, Decision], live: LiveOutput,
                            paused: AgentResponse | None) -> AgentResponse:
        from gramagent._runtime.stream import (
            FinalResponse,
            TextDelta,
            ToolCallRequested,
            resume_agent_stream,
            run_agent_stream,
        )

        options = self._run_options()
        stream = (run_agent_stream(self.target, start, context=self.context, **options)
                  if isinstance(start, str)
                  else resume_agent_stream(self.target, self._paused(paused), start,
                                           **options))
        try:
            async with stream:
                async for event in stream:
                    if isinstance(event, TextDelta):
                        live.text(event.text)
                    elif isinstance(event, ToolCallRequested) and (
                            isinstance(start, str) or event.call.id not in start):
                        live.tool_call(event.call.name)  # (a resumed call was shown already)
                    elif isinstance(event, FinalResponse):
                        self.context = event.response.context
                        live.end()
                        return event.response
        except RunError as exc:
            live.end()
            if exc.context is not None:
                self.context = exc.context
            raise
        finally:
            if stream.interrupted:
                live.end(interrupted=True)
                self.context = stream.context
        raise AssertionError("the stream ended without a response")  # pragma: no cover

    def _run_options(self) -> dict[str, Any]:
        """What every run of the session is given besides its start and context."""
        return {"library": self.library, "model": self.model, "limits": self.limits,
                "events": self.sinks or None, "dry_run": self.options.dry_run}

    def on_close(self, close: Callable[[], Any]) -> None:
        """Call ``close`` when the session closes (after what ``open`` was given)."""
        self._closers.append(close)

    async def aclose(self) -> None:
        """Release the model's connections and close the sinks (and what ``open`` was given
        to close)."""
        model = getattr(self, "model", None)
        if model is not None:
            with suppress(Exception):
                await model.aclose()
        for close in self._closers:
            close()


def _session_model(options: SessionOptions, agent: Agent,
                   on_exchange: ExchangeHook | None) -> Model:
    """The model the options name (``--model``, else the agent's), resolved with the
    options' wire format, server, key and tool-call mode.

    Raises:
        ConfigurationError: an unresolvable model, or a tool-call mode the wire format does
            not have.
    """
    from gramagent._models.registry import resolve_model
    from gramagent._spec.model import ModelRef

    ref = ModelRef.parse(options.model) if options.model else agent.model
    model_options: dict[str, Any] = {}
    if options.tool_call_mode is not None:
        model_options["tool_call_mode"] = options.tool_call_mode
    if on_exchange is not None:
        model_options["on_exchange"] = on_exchange
    try:
        return resolve_model(ref, api=options.api, base_url=options.base_url,
                             api_key=options.api_key, **model_options)
    except ConfigurationError as exc:
        if options.tool_call_mode is not None and "tool_call_mode" in str(exc):
            raise ConfigurationError(
                f"--tool-call-mode applies to the chat and functions wire formats and the "
                f"embedded model, not --api {options.api}") from None
        if options.model is None or "/" in options.model:
            raise
        raise ConfigurationError(
            f"{exc}\n--model {options.model!r} names no provider, so it was read as "
            f"{ref}; {MODEL_FORMS}") from None


def require_file(path: Path, expected: str) -> None:
    """Refuse a ``path`` that is not a regular file, saying what it is instead.

    Args:
        path: The file named on the command line.
        expected: What the command wanted there (``"an agent's .gram file"``), for the message.

    Raises:
        ConfigurationError: ``path`` does not exist, is a directory, is not a regular file
            (a device, a pipe), or cannot even be looked up (a name longer than the system
            allows, a NUL byte, a parent that cannot be read).
    """
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        raise ConfigurationError(f"{path}: no such file; expected {expected}") from None
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigurationError(f"{_short(str(path))}: cannot be read as a file ({reason}); "
                                 f"expected {expected}") from None
    if stat.S_ISREG(mode):
        return
    what = "is a directory" if stat.S_ISDIR(mode) else "is not a regular file"
    raise ConfigurationError(f"{path}: {what}; expected {expected}")


def _short(text: str, limit: int = 80) -> str:
    """``text`` cut to ``limit`` characters, marked where it was cut."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"
