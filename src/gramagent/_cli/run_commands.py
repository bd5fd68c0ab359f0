"""CLI commands that run agents: ``gramagent run`` and ``gramagent chat``.

Both open one :class:`~gramagent._agent_session.AgentSession` (the library: agent loaded
from gram, tools bound, model resolved, sinks opened), then feed it user messages, each a turn
of the same conversation. Results go to stdout (rich text, or one JSON object per turn with
``--json``); diagnostics, ``-v`` traffic and log records go to stderr, secrets masked (see
:mod:`gramagent._logs`).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from gramagent._agent_session import AgentSession, SessionOptions, load_library
from gramagent._cli._app import (
    answered_in_json,
    app,
    err_console,
    handle_errors,
    out_console,
    print_error,
    serve_metrics_on,
    terminal_text,
)
from gramagent._cli._lines import read_lines
from gramagent._cli._otel import EXPORTERS
from gramagent._cli._outputs import keep_outputs
from gramagent._cli._terminal import TerminalStream, markup_text
from gramagent._models.registry import api_names
from gramagent.errors import ConfigurationError, RunError

if TYPE_CHECKING:
    import asyncio

    from rich.console import Console
    from rich.live import Live

    from gramagent._prices import Price
    from gramagent._runtime.approval import ApprovalRequest, Decision
    from gramagent._runtime.events import EventSink
    from gramagent._runtime.loop import AgentResponse

__all__ = ["LivePrinter", "MarkdownPrinter", "RunOptions", "chat", "load_library", "run"]



@dataclass(frozen=True, slots=True, kw_only=True)
class RunOptions:
    """What ``run`` and ``chat`` share: the session's options (agent, model, tools, limits)
    and how the command shows and observes it."""

    session_options: SessionOptions
    json: bool = False
    verbose: int = 0
    metrics_port: int | None = None
    otel: str | None = None
    """Export OpenTelemetry spans: ``console`` or ``otlp`` (see :mod:`._otel`)."""
    yes: bool = False
    """Approve every tool call that needs approval, without asking."""
    outputs: Path | None = None
    """Keep the files the built-in tools write (charts, tables) in this directory."""
    price: list[str] | None = None
    """``MODEL=IN,OUT`` dollars per million tokens: each reply's cost is shown."""


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
        self._flush()
        err_console.print(f"[dim]→ {markup_text(name)}[/dim]", highlight=False)

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


class MarkdownPrinter(LivePrinter):
    """Prints an answer on a terminal as it is generated, rendered as Markdown (rich), secrets
    masked: each piece re-renders the answer so far, up to its last whitespace (see
    :class:`LivePrinter`); a tool call ends the block, and the text after it starts another."""

    def __init__(self, console: Console) -> None:
        super().__init__(console)
        self._answer = ""
        self._block: Live | None = None

    def text(self, piece: str) -> None:
        """Render the answer so far, up to its last whitespace."""
        self._answer += piece
        cut = max(self._answer.rfind(" "), self._answer.rfind("\n"),
                  self._answer.rfind("\t")) + 1
        if cut:
            self._render(self._answer[:cut])

    def tool_call(self, name: str) -> None:
        """End the block, then note the call (see :meth:`LivePrinter.tool_call`)."""
        self._finish()
        super().tool_call(name)

    def end(self, *, interrupted: bool = False) -> None:
        """Render the whole answer and end the block."""
        self._finish()
        super().end(interrupted=interrupted)

    def _render(self, text: str) -> None:
        from rich.live import Live
        from rich.markdown import Markdown

        from gramagent._logs import redact

        if self._block is None:
            self._block = Live(console=self.console, auto_refresh=False,
                               vertical_overflow="visible")
            self._block.start()
        self._block.update(Markdown(terminal_text(redact(text))), refresh=True)

    def _finish(self) -> None:
        if self._answer:
            self._render(self._answer)
            self._answer = ""
        if self._block is not None:
            self._block.stop()
            self._block = None


class _Output:
    """Where turn results go: rich text or one JSON object per line on stdout, or the answer
    as it is generated (:class:`LivePrinter`) on a terminal."""

    def __init__(self, json: bool, prices: Sequence[str] | None = None) -> None:
        from gramagent._prices import parse_price

        self.json = json
        self.prices = dict(parse_price(item) for item in prices or ())
        """The ``--price`` options, by model."""
        self.price: Price | None = None
        """The price of the session's model (:meth:`price_model`), None: no cost shown."""
        self.console = out_console(soft_wrap=True)
        self.live = (MarkdownPrinter(self.console)
                     if not json and sys.stdout.isatty() else None)
        """Set when the answer is printed as it is generated, rendered as Markdown: a
        terminal, not ``--json``."""

    def price_model(self, model: str) -> None:
        """Show costs at the ``--price`` of ``model`` (a reference such as
        ``openai/gpt-4o-mini``, found by it or by its name after the provider).

        Raises:
            ConfigurationError: prices were given, none of them for ``model``.
        """
        if not self.prices:
            return
        name = model.partition("/")[2]
        self.price = self.prices.get(model) or self.prices.get(name)
        if self.price is None:
            raise ConfigurationError(
                f"--price names {', '.join(map(repr, self.prices))}, not the model of this "
                f"run ({model!r})")

    def reply(self, response: AgentResponse) -> None:
        """Print one turn's result, secrets masked like every other output (a streamed
        answer was printed already), and its cost when a price is known."""
        price = self.price
        usage = response.usage
        cost = None if price is None else price.cost(usage.input_tokens, usage.output_tokens)
        self._print(response, cost)
        if price is not None and not self.json:
            err_console.print(
                f"[dim]cost: ${cost:.6g} ({usage.input_tokens:,} input and "
                f"{usage.output_tokens:,} output tokens at ${price.input:g} and "
                f"${price.output:g} per million)[/dim]", highlight=False)

    def _print(self, response: AgentResponse, cost: float | None) -> None:
        if self.live is not None or (response.paused and not self.json):
            return

        from gramagent import _json as exact_json
        from gramagent._logs import redact

        if self.json:
            data = redact(response.to_dict())
            if cost is not None and isinstance(data, dict):
                data["cost_usd"] = cost
            sys.stdout.write(terminal_text(exact_json.dumps(data, default=str)) + "\n")
            sys.stdout.flush()
        else:
            self.console.print(terminal_text(redact(response.content or "")), markup=False)
            if response.finish_reason != "stop":
                why = _ENDINGS.get(response.finish_reason, "as the server said")
                ended = markup_text(response.finish_reason)
                err_console.print(f"[yellow](the answer ended: {ended}, {why})[/yellow]",
                                  highlight=False)


def _approved(request: ApprovalRequest) -> Decision:
    err_console.print(f"[dim]✓ {markup_text(request.tool)} approved (--yes)[/dim]",
                      highlight=False)
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
        from rich.prompt import Confirm, Prompt

        from gramagent import _json as exact_json
        from gramagent._logs import redact
        from gramagent._runtime.approval import Refused

        arguments = exact_json.dumps(redact(request.arguments), indent=True, default=str)
        err_console.print(f"[bold yellow]{markup_text(request.tool)}[/bold yellow] needs your "
                          "approval to run with:", highlight=False)
        err_console.print(arguments, markup=False, highlight=False, soft_wrap=True)
        try:
            if Confirm.ask("Run it?", console=err_console, default=False):
                return True
            return Refused(Prompt.ask("Why not? (told to the model; Enter to skip)",
                                      console=err_console, default="", show_default=False))
        except EOFError:
            return False

    def nobody_to_ask(self, pending: tuple[ApprovalRequest, ...],
                      session: AgentSession) -> str:
        """The error of a turn whose calls wait with nobody to ask."""
        import shlex

        calls = ", ".join(f"{p.tool} (call {p.call_id})" for p in pending)
        keep = ""
        if session.stored is not None:
            again = shlex.join(["gramagent", "chat", str(session.options.agent_file),
                                "--session", session.stored.name])
            keep = (f"; they stay waiting in session {session.stored.name}: {again} on a "
                    "terminal, or the same command with --yes, decides")
        return (f"tool calls wait for approval: {calls}; nobody can be asked (stdin is not a "
                f"terminal): pass --yes to approve every call{keep}")


def _converse(runner: asyncio.Runner, session: AgentSession, message: str, out: _Output,
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


def _settle(runner: asyncio.Runner, session: AgentSession, response: AgentResponse | None,
            waiting: tuple[ApprovalRequest, ...], out: _Output, approvals: _Approvals) -> None:
    """Resume a paused run until it answers, then print the answer (with the calls and usage
    of every part of the turn)."""
    while response is None or response.paused:
        pending = waiting if response is None else response.pending_approvals
        decisions = approvals.decide(pending)
        if decisions is None:
            error = ConfigurationError(approvals.nobody_to_ask(pending, session))
            if response is not None:
                out.reply(response)  # with --json, the paused response says why it stopped
                answered_in_json(error)
            raise error
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


API_OPTION = typer.Option(None, "--api", metavar="API", callback=_one_of(api_names),
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
                         help="Model requests per turn (default: 10).")
_TIMEOUT = typer.Option(None, "--timeout", min=0.0, metavar="SECONDS",
                        help="Seconds one turn may take (default: 600; the embedded model's "
                             "loading, before the first turn, is not counted).")
_MAX_TURNS = typer.Option(
    None, "--max-turns", min=1, metavar="N",
    help="User messages one conversation may hold, this turn's included (default: 1000).")
_MAX_CONTEXT = typer.Option(
    None, "--max-context-bytes", min=1, metavar="BYTES",
    help="UTF-8 bytes of messages a request may carry (default: 4194304, 4 MiB).")
_SESSION = typer.Option(
    None, "--session", metavar="NAME",
    help="Keep the conversation in this stored session and resume it if it exists "
         "(see gramagent sessions).")
TOOL_CALL_MODE_OPTION = typer.Option(
    None, "--tool-call-mode", metavar="MODE", callback=_one_of(_tool_call_modes),
    help="How the model writes tool calls (chat wire format and the embedded model): native, "
         "constrained (the embedded model's default), hybrid (the embedded model may also "
         "decline: see the README) or text.")
_OUTPUTS = typer.Option(
    None, "--outputs", metavar="DIR",
    help="Keep the files the built-in tools write (charts, tables, the sandbox's files) in "
         "DIR; without it they are in a temporary directory, removed at exit.")
_PRICE = typer.Option(
    None, "--price", metavar="MODEL=IN,OUT",
    help="Dollars per million input and output tokens of MODEL (repeatable), e.g. --price "
         "openai/gpt-4o-mini=0.15,0.6: each reply's cost is shown on stderr (with --json, "
         "as cost_usd).")
_YES = typer.Option(
    False, "--yes", "-y",
    help="Approve every tool call that needs approval (for scripts); otherwise the terminal "
         "asks, and with no terminal such a call stops the turn.")
_OTEL = typer.Option(
    None, "--otel", metavar="console|otlp", callback=_one_of(lambda: EXPORTERS),
    help="Export OpenTelemetry spans of each run: to stderr (console) or to the OTLP "
         'collector of OTEL_EXPORTER_OTLP_ENDPOINT (otlp). Needs the otel extra.')

_P = inspect.Parameter
_SHARED_OPTIONS = tuple(
    _P(name, _P.KEYWORD_ONLY, annotation=annotation, default=default)
    for name, annotation, default in (
        ("agent", str | None, _AGENT),
        ("model", str | None, _MODEL),
        ("base_url", str | None, _BASE_URL),
        ("api", str | None, API_OPTION),
        ("api_key", str | None, _API_KEY),
        ("tools", str | None, _TOOLS),
        ("json", bool, _JSON),
        ("verbose", int, _VERBOSE),
        ("metrics_port", int | None, _METRICS),
        ("events", Path | None, _EVENTS),
        ("dry_run", bool, _DRY_RUN),
        ("max_iterations", int | None, _MAX_ITER),
        ("timeout", float | None, _TIMEOUT),
        ("max_turns", int | None, _MAX_TURNS),
        ("max_context_bytes", int | None, _MAX_CONTEXT),
        ("otel", str | None, _OTEL),
        ("session", str | None, _SESSION),
        ("yes", bool, _YES),
        ("tool_call_mode", str | None, TOOL_CALL_MODE_OPTION),
        ("outputs", Path | None, _OUTPUTS),
        ("price", list[str] | None, _PRICE),
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
        own_fields = {f.name for f in fields(RunOptions)} - {"session_options"}
        session = SessionOptions(
            agent_file=agent_file, agent_name=shared.pop("agent"),
            **{k: v for k, v in shared.items() if k not in own_fields})
        options = RunOptions(session_options=session,
                             **{k: v for k, v in shared.items() if k in own_fields})
        command(options, **kwargs)

    agent_file = _P("agent_file", _P.POSITIONAL_OR_KEYWORD, annotation=Path, default=_AGENT_FILE)
    params = [agent_file, *own, *_SHARED_OPTIONS]
    wrapper.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in params}
    return wrapper


@contextlib.contextmanager
def _open_session(options: RunOptions, verbose: int
                  ) -> Iterator[tuple[asyncio.Runner, AgentSession]]:
    """An event loop and an open session for one command; logging set up and reset around it.

    Without ``-v`` a failure is one error line: no log records (retries, run errors) beside it.
    """
    import asyncio

    from gramagent._logs import configure_logging, reset_logging

    configure_logging(verbose if verbose > 0 else -1,
                      stream=TerminalStream(sys.stderr))  # type: ignore[arg-type]
    try:
        with asyncio.Runner() as runner:
            session = _open(options)
            try:
                note = keep_outputs(session.library, options.outputs)
                session.on_close(lambda: _print_outputs_note(note()))
                runner.run(session.start_model())
                yield runner, session
            finally:
                runner.run(session.aclose())
    finally:
        reset_logging()


def _open(options: RunOptions) -> AgentSession:
    """The session ``options`` name, with the command's observers: the tracer of ``--otel``,
    the metrics of ``--metrics-port``, the raw exchanges of ``-v``."""
    from gramagent._agent_session import check_options

    check_options(options.session_options)  # a bad value is named before anything starts
    sinks: list[EventSink] = []
    if options.metrics_port is not None:
        metrics = serve_metrics_on(options.metrics_port)
        sinks.append(metrics)
        err_console.print(
            f"[dim]metrics on http://127.0.0.1:{metrics.server_port}/metrics[/dim]",
            highlight=False,
        )
    closers: list[Callable[[], Any]] = []  # AgentSession.open closes them if it fails
    if options.otel is not None:
        from gramagent._cli._otel import setup_tracing

        closers.append(setup_tracing(options.otel))
    return AgentSession.open(options.session_options, sinks=tuple(sinks), closers=tuple(closers),
                             on_exchange=_exchange_printer(err_console) if options.verbose
                             else None)


def _print_outputs_note(text: str | None) -> None:
    """At the end, say on stderr where the tools' files went (see :mod:`._outputs`)."""
    if text:
        err_console.print(f"[dim]{text}[/dim]", highlight=False, soft_wrap=True)


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
    out = _Output(options.json, options.price)
    approvals = _Approvals(options.yes)
    with _open_session(options, options.verbose) as (runner, session):
        out.price_model(options.session_options.model or str(session.agent.model))
        for message in messages:
            _converse(runner, session, message, out, approvals)


@app.command("chat")
@handle_errors
@_with_run_options
def chat(options: RunOptions) -> None:
    """Talk with an agent: each line is a turn of one conversation; Ctrl-D or /exit ends.

    A turn that fails (model unreachable, a limit hit) prints one error line and the session
    goes on; the exit code is then 1.
    """

    out = _Output(options.json, options.price)
    approvals = _Approvals(options.yes)
    failed = False
    with _open_session(options, options.verbose) as (runner, session):
        out.price_model(options.session_options.model or str(session.agent.model))
        waiting = session.pending_approvals()  # an earlier turn of the session paused
        if sys.stdin.isatty():
            resumed = ""
            if session.stored is not None:
                stored = len(session.stored.context)
                resumed = (f" (session {session.stored.name}: {stored} messages"
                           + (f", {len(waiting)} waiting for approval" if waiting else "")
                           + ")" if stored else f" (new session {session.stored.name})")
            err_console.print(
                f"[dim]chatting with {markup_text(session.agent.name + resumed)}; /exit or Ctrl-D "
                "to end[/dim]",
                highlight=False,
            )
        if waiting:
            _settle(runner, session, None, waiting, out, approvals)
        for line in read_lines(err_console):
            try:
                _converse(runner, session, line, out, approvals)
            except RunError as exc:
                failed = True
                print_error(exc, as_json=options.json)
            except KeyboardInterrupt:
                if out.live is None:
                    raise
                # Ctrl-C stops the answer being written, not the chat (the partial answer is
                # kept, marked as interrupted).
                continue
    if failed:
        raise typer.Exit(1)

