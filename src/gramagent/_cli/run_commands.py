"""CLI commands that run agents: ``gramagent run`` and ``gramagent chat``.

Both build one :class:`Session` (agent loaded from gram, tools bound, model resolved, sinks
opened), then feed it user messages, each a turn of the same conversation. Results go to stdout
(rich text, or one JSON object per turn with ``--json``); diagnostics, ``-v`` traffic and log
records go to stderr, secrets masked (see :mod:`gramagent._logs`).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from gramagent._cli._app import (
    app,
    err_console,
    handle_errors,
    print_error,
    require_file,
    serve_metrics_on,
    terminal_text,
)
from gramagent._limit_values import limit_problem
from gramagent._models.registry import api_names
from gramagent.errors import ConfigurationError, RunError, ToolError

if TYPE_CHECKING:
    import asyncio

    from rich.console import Console

    from gramagent._messages import Conversation
    from gramagent._models.base import Model
    from gramagent._runtime.approval import ApprovalRequest, Decision
    from gramagent._runtime.events import EventSink
    from gramagent._runtime.library import BoundAgent, ToolLibrary
    from gramagent._runtime.limits import RunLimits
    from gramagent._runtime.loop import AgentResponse
    from gramagent._runtime.sessions import StoredSession
    from gramagent._spec.model import Agent

__all__ = ["LivePrinter", "RunOptions", "Session", "chat", "load_library", "run"]

DEFAULT_TOOLS = "gramagent.tools:builtin_library"
EXIT_COMMANDS = frozenset({"/exit", "/quit"})


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOptions:
    """What ``run`` and ``chat`` share: where the agent, model, tools and sinks come from."""

    agent_file: Path
    agent_name: str | None = None
    model: str | None = None
    """``provider/name`` overriding the agent's model."""
    base_url: str | None = None
    api: str | None = None
    api_key: str | None = None
    tools: str | None = None
    """``module:attribute`` of a ToolLibrary or a zero-argument factory of one."""
    json: bool = False
    verbose: int = 0
    metrics_port: int | None = None
    events: Path | None = None
    max_iterations: int | None = None
    timeout: float | None = None
    """Wall-time limit of one turn, in seconds."""
    dry_run: bool = False
    """Call the model but run no tool: each valid call answers ``{"ok": true}``."""
    otel: str | None = None
    """Export OpenTelemetry spans: ``console`` or ``otlp`` (see :mod:`._otel`)."""
    session: str | None = None
    """Keep the conversation in this stored session (resumed if it exists)."""
    yes: bool = False
    """Approve every tool call that needs approval, without asking."""
    tool_call_mode: str | None = None
    """How the model writes tool calls (``tool_call_mode`` of the chat adapter and the
    embedded model): ``native``, ``constrained``, ``hybrid`` or ``text``."""


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


def _exchange_printer(console: Console) -> Callable[[Mapping[str, Any], Any, int | None], None]:
    """The adapters' exchange hook for ``-v``: raw request and response, secrets masked."""
    from gramagent import _json as exact_json
    from gramagent._logs import redact

    def show(request: Mapping[str, Any], response: Any, status: int | None) -> None:
        def dump(data: Any) -> str:
            data = redact(data)
            if isinstance(data, str):
                return data
            return exact_json.dumps(data, indent=True, default=str)

        console.print("[dim]── request ──[/dim]", highlight=False)
        console.print(dump(dict(request)), markup=False, highlight=False, soft_wrap=True)
        answer = f"HTTP {status}" if status is not None else "no answer"
        console.print(f"[dim]── response ({answer}) ──[/dim]", highlight=False)
        console.print(dump(response), markup=False, highlight=False, soft_wrap=True)

    return show


@dataclass
class Session:
    """One conversation with one agent; each :meth:`turn` continues it.

    Everything that can fail before a request (the gram file, the agent name, the tool
    binding, the model configuration) fails in :meth:`open`.
    """

    options: RunOptions
    agent: Agent = field(init=False)
    target: Agent | BoundAgent = field(init=False)
    """The bound agent (the bare agent in dry-run mode, where no tool runs)."""
    library: ToolLibrary | None = field(init=False)
    model: Model = field(init=False)
    limits: RunLimits = field(init=False)
    sinks: list[EventSink] = field(default_factory=list, init=False)
    context: Any = field(default=None, init=False)
    stored: StoredSession | None = field(default=None, init=False)
    """The stored session the conversation is kept in (``--session``)."""
    _closers: list[Callable[[], Any]] = field(default_factory=list, init=False)

    @classmethod
    def open(cls, options: RunOptions) -> Session:
        """Load, bind and resolve everything ``options`` names."""
        from gramagent._logs import add_secret, env_secrets
        from gramagent._runtime.limits import RunLimits
        from gramagent._spec.gram import load_agent

        session = cls(options)
        if options.session is not None:
            from gramagent._runtime.sessions import SessionStore

            session.stored = SessionStore().open(options.session)
        if options.otel is not None:
            from gramagent._cli._otel import setup_tracing

            session._closers.append(setup_tracing(options.otel))
        # The key given on the command line and the environment as it is now.
        add_secret(options.api_key, *env_secrets(os.environ))
        require_file(options.agent_file, "an agent's .gram file")
        session.agent = load_agent(options.agent_file, options.agent_name)
        if options.dry_run:
            # No tool runs: the specs' schemas check the calls, no implementation is needed.
            session.library = load_library(options.tools) if options.tools else None
            _close_with(session, session.library)
            session.target = session.agent
        else:
            session.library = load_library(options.tools)
            _close_with(session, session.library)
            # Every binding problem at once, before any request.
            try:
                session.target = session.library.bind(session.agent)
            except ToolError as exc:
                raise ToolError(exc.problems, hint=_BIND_HINT) from None
        session.model = _session_model(options, session.agent)
        overrides: dict[str, Any] = {}
        if options.max_iterations is not None:
            overrides["max_iterations"] = options.max_iterations
        if options.timeout is not None:
            if problem := limit_problem("--timeout", options.timeout):  # named as typed
                raise ConfigurationError(problem)
            overrides["wall_time"] = options.timeout
        session.limits = RunLimits(**overrides)
        if options.events is not None:
            from gramagent._runtime.events import JSONLSink

            jsonl = JSONLSink(options.events)
            session._closers.append(jsonl.close)
            session.sinks.append(jsonl)
        if options.metrics_port is not None:
            metrics = serve_metrics_on(options.metrics_port)
            session.sinks.append(metrics)
            err_console.print(
                f"[dim]metrics on http://127.0.0.1:{metrics.server_port}/metrics[/dim]",
                highlight=False,
            )
        return session

    async def start_model(self) -> None:
        """Start the model now if it starts at all (the embedded model loads its weights and
        server), so that loading is not part of the first turn and its ``--timeout``."""
        start = getattr(self.model, "start", None)
        if start is not None and inspect.iscoroutinefunction(start):
            await start()

    async def turn(self, message: str, live: LivePrinter | None = None) -> AgentResponse:
        """Run one user message; the conversation continues from the previous turn.

        With ``live``, the answer is streamed to it as it is generated; a turn cancelled
        (Ctrl-C) keeps its partial answer, marked, and the conversation goes on from there.
        With a stored session, the turn starts from what the store holds (another process may
        have added turns) and what it adds is saved when it ends, however it ends.
        """
        return await self._held(message, live)

    async def resume(self, decisions: Mapping[str, Decision],
                     live: LivePrinter | None = None, paused: AgentResponse | None = None
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

    async def _held(self, start: str | dict[str, Decision], live: LivePrinter | None,
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

    async def _run(self, start: str | dict[str, Decision], live: LivePrinter | None,
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

    async def _streamed_run(self, start: str | dict[str, Decision], live: LivePrinter,
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

    async def aclose(self) -> None:
        """Release the model's connections and close the sinks."""
        with suppress(Exception):
            await self.model.aclose()
        for close in self._closers:
            close()


def _session_model(options: RunOptions, agent: Agent) -> Model:
    """The model the options name (``--model``, else the agent's), resolved with the
    options' wire format, server, key and tool-call mode.

    Raises:
        ConfigurationError: an empty or unresolvable model, or a tool-call mode the wire
            format does not have.
    """
    from gramagent._models.registry import resolve_model
    from gramagent._spec.model import ModelRef

    if options.model is not None and not options.model.strip():
        raise ConfigurationError(f"--model must not be empty; {_MODEL_FORMS}")
    ref = ModelRef.parse(options.model) if options.model else agent.model
    model_options: dict[str, Any] = {}
    if options.tool_call_mode is not None:
        model_options["tool_call_mode"] = options.tool_call_mode
    if options.verbose:
        model_options["on_exchange"] = _exchange_printer(err_console)
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
            f"{ref}; {_MODEL_FORMS}") from None


def _close_with(session: Session, library: ToolLibrary | None) -> None:
    """Close ``library`` with the session if it can close (MCP server sessions)."""
    close = getattr(library, "close", None)
    if callable(close):
        session._closers.append(close)


class LivePrinter:
    """Prints an answer on stdout as it is generated, secrets masked.

    Text is written up to its last whitespace and the rest held back until more comes, so a
    secret (which has no whitespace) is always masked whole. Tool calls are noted on stderr.
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self._held = ""
        self._wrote = False

    def text(self, piece: str) -> None:
        """Write ``piece`` (up to its last whitespace, see above)."""
        text = self._held + piece
        cut = max(text.rfind(" "), text.rfind("\n"), text.rfind("\t")) + 1
        self._held = text[cut:]
        if cut:
            self._write(text[:cut])

    def tool_call(self, name: str) -> None:
        """Note a call the model asked for (after the text it wrote before it); the model
        chose the name: printed as written, never read as markup."""
        from rich.markup import escape

        self._flush()
        err_console.print(f"[dim]→ {escape(terminal_text(name))}[/dim]", highlight=False)

    def end(self, *, interrupted: bool = False) -> None:
        """The answer is over (or was stopped): write the rest and end the line."""
        self._flush()
        if interrupted:
            err_console.print("[dim]… (interrupted)[/dim]", highlight=False)
        self._wrote = False

    def _flush(self) -> None:
        if self._held:
            self._write(self._held)
            self._held = ""
        if self._wrote:
            sys.stdout.write("\n")
            sys.stdout.flush()
            self._wrote = False

    def _write(self, text: str) -> None:
        from gramagent._logs import redact

        sys.stdout.write(terminal_text(redact(text)))
        sys.stdout.flush()
        self._wrote = True


class _Output:
    """Where turn results go: rich text or one JSON object per line on stdout, or the answer
    as it is generated (:class:`LivePrinter`) on a terminal."""

    def __init__(self, json: bool) -> None:
        from rich.console import Console

        self.json = json
        self.console = Console(highlight=False, soft_wrap=True)
        self.live = (LivePrinter(self.console)
                     if not json and sys.stdout.isatty() else None)
        """Set when the answer is printed as it is generated: a terminal, not ``--json``."""

    def reply(self, response: AgentResponse) -> None:
        """Print one turn's result, secrets masked like every other output (a streamed
        answer was printed already)."""
        if self.live is not None or (response.paused and not self.json):
            return
        from rich.markup import escape

        from gramagent import _json as exact_json
        from gramagent._logs import redact

        if self.json:
            data = redact(response.to_dict())
            sys.stdout.write(exact_json.dumps(data, default=str) + "\n")
            sys.stdout.flush()
        else:
            self.console.print(terminal_text(redact(response.content or "")), markup=False)
            if response.finish_reason != "stop":
                why = _ENDINGS.get(response.finish_reason, "as the server said")
                err_console.print(f"[yellow](the answer ended: {escape(response.finish_reason)}"
                                  f", {why})[/yellow]", highlight=False)


def _approved(request: ApprovalRequest) -> Decision:
    err_console.print(f"[dim]✓ {request.tool} approved (--yes)[/dim]", highlight=False)
    return True


class _Approvals:
    """Decides on the tool calls a turn waits for: all approved (``--yes``), asked of the
    person at the terminal, or, with nobody to ask, none (the turn stops with an error)."""

    def __init__(self, yes: bool) -> None:
        self.yes = yes
        self.interactive = sys.stdin.isatty()

    def decide(self, pending: tuple[ApprovalRequest, ...]) -> dict[str, Decision] | None:
        """A decision per call, or None when nobody can decide."""
        from gramagent._runtime.approval import decide_once_each

        if self.yes:
            return decide_once_each(pending, _approved)
        if not self.interactive:
            return None
        return decide_once_each(pending, self._ask)

    @staticmethod
    def _ask(request: ApprovalRequest) -> Decision:
        """Show the call and ask whether it may run (a refusal may give the model a reason;
        end of input refuses)."""
        from rich.markup import escape
        from rich.prompt import Confirm, Prompt

        from gramagent import _json as exact_json
        from gramagent._logs import redact
        from gramagent._runtime.approval import Refused

        arguments = exact_json.dumps(redact(request.arguments), indent=True, default=str)
        err_console.print(f"[bold yellow]{escape(request.tool)}[/bold yellow] needs your "
                          "approval to run with:", highlight=False)
        err_console.print(arguments, markup=False, highlight=False, soft_wrap=True)
        try:
            if Confirm.ask("Run it?", console=err_console, default=False):
                return True
            return Refused(Prompt.ask("Why not? (told to the model; Enter to skip)",
                                      console=err_console, default="", show_default=False))
        except EOFError:
            return False

    def nobody_to_ask(self, pending: tuple[ApprovalRequest, ...], session: str | None) -> str:
        """The error of a turn whose calls wait with nobody to ask."""
        calls = ", ".join(f"{p.tool} (call {p.call_id})" for p in pending)
        keep = (f"; they stay waiting in session {session}: run again on a terminal, or with "
                "--yes, to decide" if session is not None else "")
        return (f"tool calls wait for approval: {calls}; nobody can be asked (stdin is not a "
                f"terminal): pass --yes to approve every call{keep}")


def _converse(runner: asyncio.Runner, session: Session, message: str, out: _Output,
              approvals: _Approvals) -> None:
    """One turn of ``message``, after the calls an earlier turn (of a stored session: maybe
    another process's) left waiting, deciding on every call that waits for approval; prints
    the replies.

    Raises:
        ConfigurationError: calls wait for approval and nobody can decide.
    """
    waiting = session.pending_approvals()
    if waiting:
        _settle(runner, session, None, waiting, out, approvals)
    _settle(runner, session, runner.run(session.turn(message, out.live)), (), out, approvals)


def _settle(runner: asyncio.Runner, session: Session, response: AgentResponse | None,
            waiting: tuple[ApprovalRequest, ...], out: _Output, approvals: _Approvals) -> None:
    """Resume a paused run until it answers, then print the answer (with the calls and usage
    of every part of the turn)."""
    while response is None or response.paused:
        pending = waiting if response is None else response.pending_approvals
        decisions = approvals.decide(pending)
        if decisions is None:
            if response is not None:
                out.reply(response)
            raise ConfigurationError(approvals.nobody_to_ask(
                pending, None if session.stored is None else session.stored.name))
        # Resumed from the paused response, the run goes on: its limits hold across the
        # pause, and the answer has the tool calls and usage of the whole turn.
        response = runner.run(session.resume(decisions, out.live, response))
    out.reply(response)


_ENDINGS = {
    "length": "cut off at the token limit: it may be incomplete",
    "content_filter": "cut by the server's content filter",
    "refusal": "the model declined",
}
"""What the CLI says after an answer that did not simply end."""




_MODEL_FORMS = ("give PROVIDER/NAME: openai/NAME (any OpenAI-compatible server, with "
                "--base-url) or local/NAME (the embedded model: local/qwen2.5-coder-0.5b, "
                "local/qwen2.5-coder-1.5b, local/path/to/model.gguf)")
_BIND_HINT = ("--tools MODULE:LIBRARY names a library that has these tools; --dry-run calls the "
              "model without running any tool")


# -- shared option declarations ---------------------------------------------------------------

_AGENT_FILE = typer.Argument(..., help="The agent's gram file.", show_default=False,
                             metavar="AGENT.gram")
_AGENT = typer.Option(None, "--agent", metavar="NAME",
                      help="Which agent of a file that declares several.")
_MODEL = typer.Option(None, "--model", metavar="PROVIDER/NAME",
                      help="Override the model, e.g. openai/gpt-4o-mini.")
_BASE_URL = typer.Option(
    None, "--base-url", metavar="URL",
    help="API root of an OpenAI-compatible server (else OPENAI_BASE_URL); an agent whose "
         "model is local/NAME then asks that server for NAME.")


def _one_of(names: Callable[[], Sequence[str]]) -> Callable[[str | None], str | None]:
    """An option callback accepting one of ``names()`` (asked only when the option is given),
    in any case."""

    def choice(value: str | None) -> str | None:
        if value is None:
            return None
        allowed = names()
        if value.lower() in allowed:
            return value.lower()
        raise typer.BadParameter(f"{value!r} is not one of: {', '.join(allowed)}")

    return choice


def _tool_call_modes() -> Sequence[str]:
    """The chat adapter's tool-call modes (imported only when ``--tool-call-mode`` is given:
    the adapter is not part of the start-up of every command)."""
    from gramagent._models.chat import TOOL_CALL_MODES

    return TOOL_CALL_MODES


_API = typer.Option(None, "--api", metavar="API", callback=_one_of(api_names),
                    help=f"Wire format: {', '.join(api_names())} (default: chat).")
_API_KEY = typer.Option(None, "--api-key", metavar="KEY", help="API key (else OPENAI_API_KEY).",
                        show_default=False)
_TOOLS = typer.Option(None, "--tools", metavar="MODULE:LIBRARY",
                      help="A ToolLibrary or a factory of one (default: the built-in tools); "
                           "'mcp:stdio:COMMAND ARGS' or 'mcp:http://HOST:PORT/PATH' for an MCP "
                           "server; several sources separated by ';'.")
_JSON = typer.Option(False, "--json", help="Print each turn's AgentResponse as one JSON line.")
_VERBOSE = typer.Option(0, "-v", "--verbose", count=True, show_default=False,
                        help="Raw requests and responses and log records on stderr "
                             "(secrets masked); -vv for debug records.")
_METRICS = typer.Option(None, "--metrics-port", metavar="PORT",
                        help="Serve Prometheus metrics on this port.")
_EVENTS = typer.Option(None, "--events", metavar="FILE",
                       help="Append tool-call events to this JSONL file.")
_DRY_RUN = typer.Option(False, "--dry-run",
                        help='Call the model but run no tool (each call answers {"ok": true}).')
_MAX_ITER = typer.Option(None, "--max-iterations", min=1, metavar="N",
                         help="Model requests per turn.")
_TIMEOUT = typer.Option(None, "--timeout", min=0.0, metavar="SECONDS",
                        help="Seconds one turn may take (the embedded model's loading, "
                             "before the first turn, is not counted).")
_SESSION = typer.Option(
    None, "--session", metavar="NAME",
    help="Keep the conversation in this stored session and resume it if it exists "
         "(see gramagent sessions).")
_TOOL_CALL_MODE = typer.Option(
    None, "--tool-call-mode", metavar="MODE", callback=_one_of(_tool_call_modes),
    help="How the model writes tool calls (chat wire format and the embedded model): native, "
         "constrained (the embedded model's default), hybrid (the embedded model may also "
         "decline: see the README) or text.")
_YES = typer.Option(
    False, "--yes", "-y",
    help="Approve every tool call that needs approval (for scripts); otherwise the terminal "
         "asks, and with no terminal such a call stops the turn.")
_OTEL = typer.Option(
    None, "--otel", metavar="console|otlp",
    help="Export OpenTelemetry spans of each run: to stderr (console) or to the OTLP "
         'collector of OTEL_EXPORTER_OTLP_ENDPOINT (otlp). Needs the otel extra.')

_P = inspect.Parameter
_SHARED_OPTIONS = tuple(
    _P(name, _P.KEYWORD_ONLY, annotation=annotation, default=default)
    for name, annotation, default in (
        ("agent", str | None, _AGENT),
        ("model", str | None, _MODEL),
        ("base_url", str | None, _BASE_URL),
        ("api", str | None, _API),
        ("api_key", str | None, _API_KEY),
        ("tools", str | None, _TOOLS),
        ("json", bool, _JSON),
        ("verbose", int, _VERBOSE),
        ("metrics_port", int | None, _METRICS),
        ("events", Path | None, _EVENTS),
        ("dry_run", bool, _DRY_RUN),
        ("max_iterations", int | None, _MAX_ITER),
        ("timeout", float | None, _TIMEOUT),
        ("otel", str | None, _OTEL),
        ("session", str | None, _SESSION),
        ("yes", bool, _YES),
        ("tool_call_mode", str | None, _TOOL_CALL_MODE),
    )
)
"""The options of ``run`` and ``chat``, declared once (added by :func:`_with_run_options`)."""


def _with_run_options(command: Callable[..., None]) -> Callable[..., None]:
    """Give ``command`` the agent file argument and the options ``run`` and ``chat`` share.

    ``command`` takes a :class:`RunOptions` as its first parameter, then its own parameters;
    Typer sees the agent file, the command's own parameters, then the shared options.
    """
    own = list(inspect.signature(command, eval_str=True).parameters.values())[1:]

    @functools.wraps(command)
    def wrapper(agent_file: Path, **kwargs: Any) -> None:
        shared = {p.name: kwargs.pop(p.name) for p in _SHARED_OPTIONS}
        options = RunOptions(agent_file=agent_file, agent_name=shared.pop("agent"), **shared)
        command(options, **kwargs)

    agent_file = _P("agent_file", _P.POSITIONAL_OR_KEYWORD, annotation=Path, default=_AGENT_FILE)
    params = [agent_file, *own, *_SHARED_OPTIONS]
    wrapper.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in params}
    return wrapper


@contextlib.contextmanager
def _open_session(options: RunOptions, verbose: int) -> Iterator[tuple[asyncio.Runner, Session]]:
    """An event loop and an open session for one command; logging set up and reset around it.

    Without ``-v`` a failure is one error line: no log records (retries, run errors) beside it.
    """
    import asyncio

    from gramagent._logs import configure_logging, reset_logging

    configure_logging(verbose if verbose > 0 else -1)
    try:
        with asyncio.Runner() as runner:
            session = Session.open(options)
            try:
                runner.run(session.start_model())
                yield runner, session
            finally:
                runner.run(session.aclose())
    finally:
        reset_logging()


@app.command("run")
@handle_errors
@_with_run_options
def run(
    options: RunOptions,
    messages: list[str] = typer.Argument(  # noqa: B008
        ..., help="User messages, each a turn of one conversation.", show_default=False,
        metavar="MESSAGE"),
) -> None:
    """Run an agent on one or more messages and print each reply."""
    out = _Output(options.json)
    approvals = _Approvals(options.yes)
    with _open_session(options, options.verbose) as (runner, session):
        for message in messages:
            _converse(runner, session, message, out, approvals)


def _read_lines(console: Console) -> Iterator[str]:
    """User lines: prompted with rich on a terminal, read plainly from piped stdin."""
    interactive = sys.stdin.isatty()
    while True:
        try:
            if interactive:
                line = console.input("[bold green]you>[/bold green] ")
            else:
                line = sys.stdin.readline()
                if not line:
                    return
        except EOFError:
            return
        except UnicodeDecodeError as exc:
            raise ConfigurationError(f"<stdin>: not valid UTF-8 ({exc.reason})") from None
        line = line.strip()
        if not line:
            continue
        if line in EXIT_COMMANDS:
            return
        yield line


@app.command("chat")
@handle_errors
@_with_run_options
def chat(options: RunOptions) -> None:
    """Talk with an agent: each line is a turn of one conversation; Ctrl-D or /exit ends.

    A turn that fails (model unreachable, a limit hit) prints one error line and the session
    goes on; the exit code is then 1.
    """
    from rich.markup import escape

    out = _Output(options.json)
    approvals = _Approvals(options.yes)
    failed = False
    with _open_session(options, options.verbose) as (runner, session):
        waiting = session.pending_approvals()  # an earlier turn of the session paused
        if sys.stdin.isatty():
            resumed = ""
            if session.stored is not None:
                stored = len(session.stored.context)
                resumed = (f" (session {session.stored.name}: {stored} messages"
                           + (f", {len(waiting)} waiting for approval" if waiting else "")
                           + ")" if stored else f" (new session {session.stored.name})")
            err_console.print(
                f"[dim]chatting with {session.agent.name}{escape(resumed)}; /exit or Ctrl-D "
                "to end[/dim]",
                highlight=False,
            )
        if waiting:
            _settle(runner, session, None, waiting, out, approvals)
        for line in _read_lines(err_console):
            try:
                _converse(runner, session, line, out, approvals)
            except RunError as exc:
                failed = True
                print_error(exc)
            except KeyboardInterrupt:
                if out.live is None:
                    raise
                # Ctrl-C stops the answer being written, not the chat (the partial answer is
                # kept, marked as interrupted).
                continue
    if failed:
        raise typer.Exit(1)

