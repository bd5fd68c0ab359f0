"""The agent loop: request, check and run tool calls in parallel, send results, repeat.

:func:`run_agent` runs one user message to a final answer::

    build ModelRequest -> model.request -> tool calls?
        no:  append the answer, return AgentResponse
        yes: for each call, in order: payload size -> JSON object -> known tool -> schema
             -> (repeated?) ; run the valid ones concurrently (sync tools in threads),
             copies of one call within the turn once
             -> one result per call id, in call order -> repeat

The repeat guard (``RunLimits.repeat_guard``, on by default) does not run a call again that
already succeeded in this run, nor copies of one call written in the same reply: they are
answered with the earlier output and the next request asks for the final answer.

Bad calls are not exceptions: they become error results the model sees (and count against the
per-tool retry budget). Limits and transport failures raise :class:`~gramagent.errors.RunError`
subclasses carrying the conversation so far: the user message and every completed tool result
are in ``exc.context``, which continues the conversation like ``AgentResponse.context``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import time
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from gramagent import _json as exact_json
from gramagent._logs import TOOL_LOGGER, USAGE_LOGGER, log_run_error, log_tool_call, log_usage
from gramagent._messages import (
    AssistantMessage,
    Conversation,
    Message,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from gramagent._models.base import Model, ModelRequest, ModelTurn, ToolChoice
from gramagent._runtime.events import (
    UNKNOWN_TOOL_LABEL,
    EventSink,
    ToolCallPlanned,
    ToolCallResult,
    args_preview_hash,
    emit,
    fan_out,
)
from gramagent._runtime.invoke import Outcome, execute
from gramagent._runtime.library import BoundAgent, Tool, ToolContext, ToolLibrary
from gramagent._runtime.limits import INHERIT, RunLimits
from gramagent._spec.calls import (
    INVALID_CALL_TYPES,
    CallRejection,
    ToolErrorType,
    check_parsed,
    parse_arguments,
    rejection,
)
from gramagent._spec.model import Agent, ModelRef
from gramagent.errors import (
    ConfigurationError,
    LimitExceeded,
    ModelAPIError,
    ToolError,
    ValidationError,
)

__all__ = ["AgentResponse", "ToolInvocation", "run_agent", "run_agent_sync"]

_tool_log = logging.getLogger(TOOL_LOGGER)
_usage_log = logging.getLogger(USAGE_LOGGER)

CHARS_PER_TOKEN = 4
"""Token estimate for turns whose server reports no usage."""

_DEFAULT_LIMITS = RunLimits()


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolInvocation:
    """One tool call of a run and how it went."""

    call_id: str
    name: str
    """The tool name the model asked for (possibly unknown)."""
    arguments: dict[str, Any] | str
    """The parsed arguments, or the raw text when they could not be parsed."""
    result: Any = None
    """The tool's return value (``{"ok": true}`` in dry-run mode); None on error."""
    error: str | None = None
    """The error text sent to the model; None on success."""
    error_type: str | None = None
    """``tool_payload_too_large``, ``tool_payload_parse_error``, ``unknown_tool``,
    ``invalid_arguments``, ``tool_exception``, ``tool_timeout`` or ``repeated_call``."""
    latency: float = 0.0
    """Seconds the tool ran (0 for calls that did not run)."""
    seq: int = 0
    """Order of the call within the run, from 1 (the events' ``seq``)."""

    @property
    def ok(self) -> bool:
        return self.error_type is None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {
            "call_id": self.call_id,
            "name": self.name,
            "arguments": self.arguments,
            "result": self.result,
            "error": self.error,
            "error_type": self.error_type,
            "latency": self.latency,
            "seq": self.seq,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentResponse:
    """What a run returns: the answer, the tool calls made, the conversation and usage."""

    content: str
    """The model's final text."""
    tool_invocations: tuple[ToolInvocation, ...] = ()
    """Every tool call of this run, in order."""
    context: Conversation = field(default_factory=Conversation)
    """The whole conversation, this run included; pass it back to continue."""
    usage: Usage = field(default_factory=Usage)
    """Tokens of this run (reported, or estimated where the server reported none)."""
    stopped_by: str | None = None
    """None when the model answered on its own; ``"repeated_call"`` when the loop guard
    answered a repeated call and asked the model for its final answer."""
    run_id: str = ""
    """The run's id (``request_id`` of its events)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (the CLI's ``--json`` output)."""
        return {
            "content": self.content,
            "tool_invocations": [i.to_dict() for i in self.tool_invocations],
            "context": self.context.to_list(),
            "conversation_id": self.context.id,
            "usage": self.usage.to_dict(),
            "stopped_by": self.stopped_by,
            "run_id": self.run_id,
        }


async def run_agent(
    agent: Agent | BoundAgent,
    user_input: str,
    *,
    library: ToolLibrary | None = None,
    context: Conversation | Iterable[Message] | None = None,
    model: Model | str | ModelRef | None = None,
    limits: RunLimits | None = None,
    api: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    events: EventSink | Iterable[EventSink] | None = None,
    dry_run: bool = False,
    tool_choice: ToolChoice = "auto",
    settings: Mapping[str, Any] | None = None,
) -> AgentResponse:
    """Run ``agent`` on one user message until the model answers.

    Args:
        agent: an agent (bound here to ``library``) or an already bound agent.
        user_input: the user's message; must not be empty.
        library: tool implementations, when ``agent`` is not bound. May be omitted for an agent
            without tools, or in dry-run mode (the specs' schemas are then used to check calls).
        context: the conversation so far (``AgentResponse.context`` of the previous turn); not
            modified.
        model: a :class:`~gramagent._models.base.Model` (used as is and not closed), or a model
            reference overriding the agent's (resolved with ``api``, ``base_url`` and
            ``api_key``, and closed at the end of the run).
        limits: guardrails; :class:`RunLimits` defaults when None.
        api: wire format when resolving the model (``chat``, ``functions``, ``responses``,
            ``harmony``).
        base_url: API root when resolving the model.
        api_key: API key when resolving the model.
        events: a sink (any callable taking an event), or several; include a
            :class:`~gramagent._runtime.events.ToolMetrics` to count calls in Prometheus.
        dry_run: check calls as usual but run no tool: every valid call returns
            ``{"ok": true}`` (events and metrics are still emitted).
        tool_choice: for the first request; ``"required"`` or a named tool then falls back to
            ``"auto"`` so the model can answer.
        settings: extra request body fields (``temperature``, ``max_tokens``, ...).

    Returns:
        The answer, the tool invocations, the conversation and the usage of the run.

    Raises:
        ValidationError: ``user_input`` is empty (before any request).
        ToolError: binding ``agent`` to ``library`` failed (before any request).
        ConfigurationError: the model cannot be resolved (before any request).
        ModelAPIError: the model failed after the adapter's retries; carries ``context``.
        LimitExceeded: a run limit was hit; carries ``context`` and ``usage``.
    """
    if not isinstance(user_input, str) or not user_input.strip():
        raise ValidationError("user input must not be empty")
    # The common case (a bound agent, a Model object, a new conversation, no sinks) takes the
    # inline branches: this runs once per run, and every call counts at that rate.
    bound = agent if isinstance(agent, BoundAgent) else _bind(agent, library, dry_run=dry_run)
    # A tuple, not ``str | ModelRef``, which would build a union object on every run.
    owned = model is None or isinstance(model, (str, ModelRef))
    if owned:
        from gramagent._models.registry import resolve_model

        ref = _model_ref(model, bound.agent)
        resolved: Model = resolve_model(ref, api=api, base_url=base_url, api_key=api_key)
    else:
        ref = bound.agent.model
        resolved = model  # type: ignore[assignment]
    run = _Run(
        bound=bound, model=resolved, model_name=ref.name, limits=limits or _DEFAULT_LIMITS,
        sinks=() if events is None else fan_out(events), dry_run=dry_run,
        tool_choice=tool_choice, settings=dict(settings or {}),
        conversation=(Conversation(id=_new_id()) if context is None
                      else _conversation(context)),
        run_id=_new_id(),
        info_logs=_tool_log.isEnabledFor(logging.INFO) or _usage_log.isEnabledFor(logging.INFO),
    )
    try:
        return await run.run(user_input)
    except Exception as exc:
        log_run_error(exc, agent=bound.agent.name)
        raise
    finally:
        if owned:
            await resolved.aclose()


def run_agent_sync(agent: Agent | BoundAgent, user_input: str, **options: Any) -> AgentResponse:
    """:func:`run_agent` for code without an event loop (scripts, the REPL).

    Raises:
        ConfigurationError: called from a running event loop (``await run_agent(...)`` there).
        Everything :func:`run_agent` raises.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(run_agent(agent, user_input, **options))
    raise ConfigurationError(
        "run_agent_sync() cannot run inside a running event loop; use `await run_agent(...)`")


# ---------------------------------------------------------------------------------------------
# One run
# ---------------------------------------------------------------------------------------------

@dataclass(slots=True)
class _Call:
    """A call of the current turn, through its checks and execution."""

    call: ToolCall
    seq: int
    planned_at: float
    arguments: dict[str, Any] | str
    """Parsed arguments, or the raw text when unparseable."""
    tool: Tool | None = None
    rejection: CallRejection | None = None
    outcome: Outcome | None = None
    repeat_key: str | None = None
    earlier_result: Any = None
    """For a repeated call, the result of the call it repeats."""
    copy_of: _Call | None = None
    """For a call identical to an earlier one of the same turn: that call (not run twice)."""
    args_hash: str | None = None


@dataclass(slots=True, kw_only=True, eq=False)
class _Run:
    bound: BoundAgent
    model: Model
    model_name: str
    limits: RunLimits
    sinks: tuple[EventSink, ...]
    dry_run: bool
    tool_choice: ToolChoice
    settings: dict[str, Any]
    conversation: Conversation
    run_id: str
    info_logs: bool
    """Whether INFO records of tool calls or usage are wanted (checked once per run)."""
    input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0
    """Usage so far (see :attr:`usage`)."""
    invocations: list[ToolInvocation] = field(default_factory=list)
    seq: int = 0
    invalid: dict[str, int] = field(default_factory=dict)
    """Invalid calls so far, per tool name."""
    answered: dict[str, tuple[Any, str]] = field(default_factory=dict)
    """Per repeat key, the result and output text of the call that first succeeded with it."""
    force_answer: bool = False
    tools_chars: int = -1
    started: float = 0.0
    deadline: float = math.inf
    """When the wall time runs out (loop clock)."""
    task: asyncio.Task[Any] | None = None
    """The task running this run, which the wall-time timer cancels."""
    awaiting_model: bool = False
    """Whether a model request is in flight (the wall-time timer only cuts those short)."""
    deadline_hit: bool = False
    """Set when the wall-time timer cancelled a model request."""

    @property
    def usage(self) -> Usage:
        """Tokens and requests of the run so far."""
        return Usage(input_tokens=self.input_tokens, output_tokens=self.output_tokens,
                     requests=self.requests)

    async def run(self, user_input: str) -> AgentResponse:
        self.conversation.append(UserMessage(content=user_input))
        limits = self.limits
        loop = asyncio.get_running_loop()
        self.started = loop.time()
        deadline = watcher = None
        if limits.wall_time is not None:
            # The loop's deadline watcher cuts short a model request in flight at the
            # deadline (tool calls get the remaining time as their timeout; the budget check
            # before each request catches the rest).
            deadline = self.deadline = self.started + limits.wall_time
            self.task = asyncio.current_task()
            watcher = _watchers.get(loop)
            if watcher is None:
                watcher = _watchers[loop] = _Deadlines(loop)
            watcher.add(self)
        try:
            tool_choice = self.tool_choice
            requests = 0
            while True:
                now = loop.time()
                if (requests >= limits.max_iterations or limits.max_tokens is not None
                        or (deadline is not None and now >= deadline)):
                    self._check_budget(requests, deadline, now)
                forced = self.force_answer
                request = ModelRequest(
                    model=self.model_name, instruction=self.bound.agent.instruction,
                    messages=self.conversation.messages, tools=self.bound.definitions,
                    tool_choice="none" if forced else tool_choice, settings=self.settings,
                )
                requests += 1
                turn = await self._request(request)
                if not turn.tool_calls:
                    self.conversation.append(AssistantMessage(content=turn.text))
                    usage = self.usage
                    if self.info_logs:
                        log_usage(usage, model=self.model_name, scope="run")
                    return AgentResponse(
                        content=turn.text or "", tool_invocations=tuple(self.invocations),
                        context=self.conversation, usage=usage,
                        stopped_by="repeated_call" if forced else None, run_id=self.run_id,
                    )
                if not isinstance(tool_choice, str) or tool_choice == "required":
                    tool_choice = "auto"  # a forced choice applies to the first request only
                remaining = None if deadline is None else deadline - loop.time()
                await self._run_calls(turn, remaining)
                # Not kept through the next request: a turn holds its whole decoded reply
                # (``raw``). Objects held across an await are what the garbage collector finds
                # in its young generation (a hundred runs' worth at concurrency 100) and they
                # make it run more often: without them, a third fewer gen-0 collections.
                del turn, request
        finally:
            if watcher is not None:
                watcher.discard(self)

    # -- limits ---------------------------------------------------------------------------

    def _check_budget(self, requests: int, deadline: float | None, now: float) -> None:
        """Raise the limit a new request would pass: iterations, wall time, tokens."""
        limits = self.limits
        if requests >= limits.max_iterations:
            raise self._limit("max_iterations", limits.max_iterations, requests,
                              f"the model made {requests} requests without answering")
        if deadline is not None and now >= deadline:
            raise self._wall_time_exceeded(now, "")
        spent = self.input_tokens + self.output_tokens
        if limits.max_tokens is not None and spent >= limits.max_tokens:
            raise self._limit("max_tokens", limits.max_tokens, spent,
                              f"the token budget of {limits.max_tokens} is spent "
                              f"({spent} tokens in {self.requests} requests)")

    def _wall_time_exceeded(self, now: float, where: str) -> LimitExceeded:
        elapsed = round(now - self.started, 3)
        return self._limit("wall_time", self.limits.wall_time, elapsed,
                           f"the run took longer than {self.limits.wall_time:g} s{where}")

    def _limit(self, name: str, value: Any, observed: Any, what: str) -> LimitExceeded:
        return LimitExceeded(
            f"run stopped: {what} (limit {name}={value}, observed {observed}); the "
            "conversation so far is in .context",
            limit=name, value=value, observed=observed, context=self.conversation.copy(),
            usage=self.usage)

    # -- model ----------------------------------------------------------------------------

    async def _request(self, request: ModelRequest) -> ModelTurn:
        task = self.task
        cancelling = task.cancelling() if task is not None else 0
        self.awaiting_model = True
        try:
            turn = await self.model.request(request)
        except asyncio.CancelledError:
            # Ours only if the watcher cancelled and no other cancellation is pending (the
            # rule asyncio.timeout follows).
            if self.deadline_hit and task is not None and task.uncancel() <= cancelling:
                now = asyncio.get_running_loop().time()
                raise self._wall_time_exceeded(now, " (while waiting for the model)") from None
            raise
        except ModelAPIError as exc:
            exc.context = self.conversation.copy()
            exc.usage = self.usage
            raise
        finally:
            self.awaiting_model = False
        usage = turn.usage
        if usage is None:
            usage = self._estimate(request, turn)
        elif self.info_logs:
            log_usage(usage, model=self.model_name)
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.requests += 1
        return turn

    def on_deadline(self) -> None:
        """The wall time ran out: cancel the model request in flight, if any."""
        if self.awaiting_model and self.task is not None:
            self.deadline_hit = True
            self.task.cancel()

    def _estimate(self, request: ModelRequest, turn: ModelTurn) -> Usage:
        if self.tools_chars < 0:
            self.tools_chars = sum(
                len(d.name) + len(d.description) + len(orjson.dumps(d.parameters))
                for d in request.tools)
        chars = len(request.instruction) + self.tools_chars
        for message in request.messages:
            chars += _message_chars(message)
        out = len(turn.text or "") + sum(len(c.name) + len(c.arguments) for c in turn.tool_calls)
        return Usage(input_tokens=-(-chars // CHARS_PER_TOKEN),
                     output_tokens=-(-out // CHARS_PER_TOKEN))

    # -- tool calls -----------------------------------------------------------------------

    async def _run_calls(self, turn: ModelTurn, remaining: float | None) -> None:
        calls = turn.tool_calls
        self.conversation.append(AssistantMessage(content=turn.text, tool_calls=calls))
        limits = self.limits
        if limits.max_tool_calls is not None and self.seq + len(calls) > limits.max_tool_calls:
            for call in calls:
                self.conversation.append(ToolResultMessage(
                    call_id=call.id, name=call.name, is_error=True,
                    content=f"Not run: the run stopped at its limit of {limits.max_tool_calls} "
                            "tool calls."))
            raise self._limit("max_tool_calls", limits.max_tool_calls, self.seq + len(calls),
                              f"the model asked for {self.seq + len(calls)} tool calls")

        if len(calls) == 1:  # the usual turn
            pending = [self._check(calls[0])]
            runnable = pending if pending[0].rejection is None else []
        else:
            pending = [self._check(call) for call in calls]
            runnable = self._first_of_each(pending)
        if len(runnable) == 1:  # nothing to run alongside: no gather
            c = runnable[0]
            assert c.tool is not None
            work = self._execute(c, remaining)
            # An async tool still gets its own task (its own copy of the context variables),
            # as it would among several calls; sync tools run in a copied context anyway.
            c.outcome = await (asyncio.create_task(work) if c.tool.is_async else work)
        elif runnable:
            outcomes = await asyncio.gather(*(self._execute(c, remaining) for c in runnable))
            for c, outcome in zip(runnable, outcomes, strict=True):
                c.outcome = outcome
        for c in pending:
            if c.copy_of is not None:
                self._answer_copy(c)
            self._finish(c)
        if self.invalid:
            self._check_retry_budget(pending)

    def _first_of_each(self, pending: list[_Call]) -> list[_Call]:
        """The calls of a turn to run: the valid ones, each distinct call once.

        A small model may write the same call several times in one reply (dozens, seen with
        the 0.5B in ``text`` mode); with the repeat guard on, copies wait for the first and
        share its outcome instead of running the tool again.
        """
        runnable: list[_Call] = []
        first: dict[str, _Call] = {}
        for c in pending:
            if c.rejection is not None:
                continue
            if c.repeat_key is not None:
                earlier = first.setdefault(c.repeat_key, c)
                if earlier is not c:
                    c.copy_of = earlier
                    continue
            runnable.append(c)
        return runnable

    def _answer_copy(self, c: _Call) -> None:
        """Give a copy the outcome of the call it repeats (run once, earlier in the turn): a
        success answers it as a repeated call (and asks for the final answer next, as across
        turns); a failure is its failure too."""
        original = c.copy_of
        assert original is not None and original.outcome is not None
        outcome = original.outcome
        error_type: ToolErrorType | None
        message: str | None
        if outcome.error_type is None:
            c.rejection = self._answer_repeat(c, outcome.result, outcome.output)
            error_type, message = c.rejection.error_type, c.rejection.event_message
        else:
            c.outcome = outcome
            error_type, message = outcome.error_type, outcome.event_message
        if self.sinks:
            self._emit_result(c, error_type, message)

    def _check(self, call: ToolCall) -> _Call:
        """Parse and check one call. Emits its planned event, and its result if rejected."""
        self.seq += 1
        known = call.name in self.bound.tools
        parsed = parse_arguments(call.arguments, max_bytes=self.limits.max_payload_bytes,
                                 tool=f"tool {call.name!r}" if known else "this call")
        c = _Call(call, self.seq, time.perf_counter(),
                  call.arguments if isinstance(parsed, CallRejection) else parsed)
        if self.sinks or self.info_logs:
            c.args_hash = args_preview_hash(c.arguments)
        if self.sinks:
            emit(self.sinks, ToolCallPlanned(
                request_id=self.run_id, tool=self._label(call.name),
                args_preview_hash=c.args_hash or "", seq=c.seq))
        c.rejection = parsed if isinstance(parsed, CallRejection) else self._inspect(c, parsed)
        if c.rejection is not None and self.sinks:
            self._emit_result(c, c.rejection.error_type, c.rejection.event_message)
        return c

    def _inspect(self, c: _Call, parsed: dict[str, Any]) -> CallRejection | None:
        """The checks after parsing: known tool, schema, implementation, repetition."""
        call, bound = c.call, self.bound
        checked = check_parsed(call.name, parsed, validators=bound.validators,
                               schemas=bound.schemas)
        if isinstance(checked, CallRejection):
            return checked
        c.arguments = checked.arguments
        c.tool = tool = bound.tools[call.name]
        if tool.accepts is not None and not tool.accepts.issuperset(checked.arguments):
            return _unexpected_arguments(tool, checked.arguments)
        if self.limits.repeat_guard:
            c.repeat_key = call.name + "\x00" + _repeat_form(checked.arguments)
            earlier = self.answered.get(c.repeat_key)
            if earlier is not None:
                return self._answer_repeat(c, *earlier)
        return None

    def _answer_repeat(self, c: _Call, result: Any, output: str) -> CallRejection:
        """Answer a repeat of a successful call without running it, and ask for the answer.

        The model gets the earlier output itself, not a note about it (a small model copies
        the last tool message into its answer), and must answer next.
        """
        self.force_answer = True
        c.earlier_result = result
        return CallRejection("repeated_call", output,
                             "repeated call; answered from the earlier result")

    async def _execute(self, c: _Call, remaining: float | None) -> Outcome:
        """Run one checked call; emits its result event as soon as it finishes."""
        tool = c.tool
        assert tool is not None and isinstance(c.arguments, dict)
        timeout = self.limits.tool_timeout if tool.timeout is INHERIT else tool.timeout
        if remaining is not None:
            timeout = max(0.0, remaining) if timeout is None else min(timeout, max(0.0, remaining))
        ctx = None
        if tool.context_param is not None and not self.dry_run:
            ctx = ToolContext(
                conversation_id=self.conversation.id, run_id=self.run_id, call_id=c.call.id,
                tool=tool.name,
                state=self.bound.library.conversation_state(self.conversation.id))
        outcome = await execute(tool, c.arguments, context=ctx, timeout=timeout,
                                dry_run=self.dry_run,
                                max_output_chars=self.limits.max_tool_output_chars)
        if self.sinks:
            self._emit_result(c, outcome.error_type, outcome.event_message)
        return outcome

    def _emit_result(self, c: _Call, error_type: ToolErrorType | None,
                     message: str | None) -> None:
        emit(self.sinks, ToolCallResult(
            request_id=self.run_id, tool=self._label(c.call.name),
            status="ok" if error_type is None else "error",
            latency_ms=(time.perf_counter() - c.planned_at) * 1000.0, seq=c.seq,
            error_type=error_type, message=message))

    def _label(self, name: str) -> str:
        """The tool name for events, metrics and logs: bounded to the agent's tools."""
        return name if name in self.bound.tools else UNKNOWN_TOOL_LABEL

    def _finish(self, c: _Call) -> None:
        """Record one call's result, in call order: conversation, invocation, log."""
        call = c.call
        error_type: ToolErrorType | None
        event_message: str | None
        if c.rejection is not None:
            error_type, text, event_message = (c.rejection.error_type, c.rejection.message,
                                               c.rejection.event_message)
            result, latency = c.earlier_result, 0.0
            if error_type in INVALID_CALL_TYPES:
                self.invalid[call.name] = self.invalid.get(call.name, 0) + 1
        else:
            outcome = c.outcome
            assert outcome is not None
            error_type, text, event_message = (outcome.error_type, outcome.output,
                                               outcome.event_message)
            result, latency = outcome.result, outcome.latency
            if error_type is None and c.repeat_key is not None:
                self.answered[c.repeat_key] = (result, text)
        failed = error_type is not None and error_type != "repeated_call"
        self.conversation.append(ToolResultMessage(
            call_id=call.id, name=call.name, content=text, is_error=failed))
        self.invocations.append(ToolInvocation(
            call_id=call.id, name=call.name, arguments=c.arguments, result=result,
            error=text if failed else None, error_type=error_type,
            latency=latency, seq=c.seq))
        if self.info_logs or error_type is not None:  # errors are WARNING records
            log_tool_call(tool=self._label(call.name), call_id=call.id,
                          latency_ms=latency * 1000.0, error_type=error_type,
                          args_hash=c.args_hash, message=event_message)

    def _check_retry_budget(self, pending: list[_Call]) -> None:
        budget = self.limits.max_invalid_calls_per_tool
        if budget is None:
            return
        for c in pending:
            count = self.invalid.get(c.call.name, 0)
            if count >= budget:
                raise self._limit(
                    "max_invalid_calls_per_tool", budget, count,
                    f"{count} invalid calls to tool {c.call.name[:100]!r} "
                    f"(last: {c.rejection.error_type if c.rejection else 'unknown'})")


class _Deadlines:
    """The wall-time deadlines of the runs on one event loop, behind a single timer.

    A timer per run would cost, per run, a push into the loop's timer heap (ordered by
    Python-level comparisons, and shared with every other timer of the process) and a
    cancelled handle left in it. Instead each loop has one timer, set for the earliest
    deadline: it calls :meth:`_Run.on_deadline` for the runs whose time is up and re-arms
    for the next. Adding or removing a run is a set operation.
    """

    __slots__ = ("_loop", "_runs", "_timer", "_when", "__weakref__")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._runs: set[_Run] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._when = math.inf

    def add(self, run: _Run) -> None:
        self._runs.add(run)
        if run.deadline < self._when:
            if self._timer is not None:
                self._timer.cancel()
            self._when = run.deadline
            self._timer = self._loop.call_at(run.deadline, self._expire)

    def discard(self, run: _Run) -> None:
        self._runs.discard(run)

    def _expire(self) -> None:
        self._timer, self._when = None, math.inf
        now = self._loop.time()
        for run in list(self._runs):
            if run.deadline <= now:
                self._runs.discard(run)
                run.on_deadline()
            elif run.deadline < self._when:
                self._when = run.deadline
        if self._runs:
            self._timer = self._loop.call_at(self._when, self._expire)


_watchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Deadlines] = (
    weakref.WeakKeyDictionary())
"""The deadline watcher of each event loop (created by its first run with a wall time)."""


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------

def _bind(agent: Agent | BoundAgent, library: ToolLibrary | None, *, dry_run: bool
          ) -> BoundAgent:
    if isinstance(agent, BoundAgent):
        return agent
    if library is None:
        if agent.tools and not dry_run:
            names = ", ".join(repr(t.name) for t in agent.tools)
            raise ToolError(f"agent {agent.name!r} declares tools ({names}) but no library was "
                            "given: pass library=... (e.g. gramagent.tools.builtin_library())")
        library = ToolLibrary(_spec_stub(spec) for spec in agent.tools)
    return library.bind(agent)


def _unexpected_arguments(tool: Tool, arguments: dict[str, Any]) -> CallRejection:
    """The schema let extra keys through, but the implementation cannot take them."""
    extra = sorted(set(arguments) - (tool.accepts or frozenset()))
    takes = ", ".join(sorted(tool.accepts or ())) or "no arguments"
    return rejection(
        "invalid_arguments",
        f"tool {tool.name!r} got unexpected arguments: {', '.join(map(repr, extra))}. "
        f"It takes: {takes}.",
        f"{len(extra)} unexpected argument{'s' if len(extra) != 1 else ''}")


def _spec_stub(spec: Any) -> Tool:
    """A tool that only carries a spec's contract; dry runs never call it."""

    def not_run(**_: Any) -> Any:
        raise NotImplementedError(f"{spec.name} has no implementation (dry run)")

    return Tool(spec.name, spec.description, spec.schema, not_run, signature=spec.signature)


def _model_ref(model: Model | str | ModelRef | None, agent: Agent) -> ModelRef:
    if isinstance(model, ModelRef):
        return model
    if isinstance(model, str):
        return ModelRef.parse(model)
    return agent.model


def _new_id() -> str:
    """A random id of 32 hex digits (run and conversation ids)."""
    return os.urandom(16).hex()


def _conversation(context: Conversation | Iterable[Message] | None) -> Conversation:
    if context is None:
        return Conversation(id=_new_id())
    if isinstance(context, Conversation):
        return context.copy()
    return Conversation(context)


def _repeat_form(arguments: dict[str, Any]) -> str:
    """The arguments as sorted-key JSON, to recognise a repeated call (never sent anywhere)."""
    return exact_json.dumps(arguments, sort_keys=True)


def _message_chars(message: Message) -> int:
    match message:
        case UserMessage(content=content) | ToolResultMessage(content=content):
            return len(content)
        case AssistantMessage(content=content, tool_calls=calls):
            return len(content or "") + sum(len(c.name) + len(c.arguments) for c in calls)
    return 0
