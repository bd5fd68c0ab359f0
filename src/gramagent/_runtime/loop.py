"""The agent loop: one user message, model requests and tool calls, until the model answers.

:func:`run_agent` runs one user message to a final answer (:meth:`_Run.run`);
:func:`resume_agent` continues a paused run from decisions on its waiting calls
(:meth:`_Run.resume`, which runs those calls first). Each turn of :meth:`_Run._turns`::

    prepare the request  the conversation so far, the agent's instruction and tools
    ask the model        the budget checked first (iterations, wall time, tokens:
                         LimitExceeded if one is spent); cut short at the deadline
    no tool calls?       the answer: return AgentResponse (a call cut off by the token
                         limit is a call: the model is told and asked again)
    the tool-call stage  check, approve, run and record them (ToolCalls.run_tool_calls;
                         how each runs: invoke.start_calls), then again

The repeat guard (``RunLimits.repeat_guard``, on by default) does not run a call again that
already succeeded in this run, nor copies of one call written in the same reply: they are
answered with the earlier output and the next request asks for the final answer.

Calls of tools that require approval are asked about first, or left waiting: the run then
pauses, and :func:`resume_agent` continues it with a decision on each (see
:mod:`~gramagent._runtime.approval`).

Bad calls are not exceptions: they become error results the model sees (and count against the
per-tool retry budget). A call the token limit cut off is not replayed as a call: a note tells
the model it was cut off. Limits and transport failures raise
:class:`~gramagent.errors.RunError` subclasses carrying the conversation so far: the user
message and every completed tool result are in ``exc.context``, which continues the
conversation like ``AgentResponse.context``.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, TypedDict

from typing_extensions import Unpack

from gramagent._json import clean_text
from gramagent._logs import TOOL_LOGGER, USAGE_LOGGER, log_run_error, log_usage
from gramagent._messages import (
    Conversation,
    Message,
    Usage,
    new_assistant_message,
    new_user_message,
    unique_call_ids,
)
from gramagent._models.base import (
    Model,
    ModelRequest,
    ModelTurn,
    StreamingModel,
    ToolChoice,
    new_request,
)
from gramagent._runtime import tracing
from gramagent._runtime.approval import Approver, Decision, check_decisions, check_pending
from gramagent._runtime.budget import Budget
from gramagent._runtime.events import EventSink, fan_out
from gramagent._runtime.hooks import RunHooks
from gramagent._runtime.library import BoundAgent, ToolLibrary
from gramagent._runtime.limits import RunLimits
from gramagent._runtime.preparation import (
    bind,
    conversation_for,
    model_for,
    new_id,
    new_ids,
    request_settings,
)
from gramagent._runtime.results import AgentResponse, ToolInvocation, new_response
from gramagent._runtime.tool_calls import ToolCalls
from gramagent._spec.model import Agent, ModelRef
from gramagent.errors import ConfigurationError, LimitExceeded, ModelAPIError, ValidationError

__all__ = ["AgentResponse", "RunAgentOptions", "ToolInvocation", "resume_agent", "run_agent",
           "run_agent_sync"]

_tool_log = logging.getLogger(TOOL_LOGGER)
_usage_log = logging.getLogger(USAGE_LOGGER)

_DEFAULT_LIMITS = RunLimits()


_NO_REASON = frozenset({None, "stop", "tool_calls", "function_call"})
"""Finish reasons that say the model finished: an empty answer with one of them is an error."""


class RunAgentOptions(TypedDict, total=False):
    """The options of :func:`run_agent` and :func:`resume_agent` (keyword arguments)."""

    library: ToolLibrary | None
    """Tool implementations, when the agent is not bound. May be omitted for an agent without
    tools, or in dry-run mode (the specs' schemas are then used to check calls)."""
    model: Model | str | ModelRef | None
    """A :class:`~gramagent._models.base.Model` (used as is and not closed; requests name its
    ``model_name`` if it has one, as the models of ``resolve_model`` do, else the agent's model
    name), or a model reference overriding the agent's (resolved with ``api``, ``base_url``
    and ``api_key``, and closed at the end of the run)."""
    limits: RunLimits | None
    """Guardrails; :class:`RunLimits` defaults when None."""
    api: str | None
    """Wire format when resolving the model (``chat``, ``functions``, ``responses``,
    ``harmony``)."""
    base_url: str | None
    """API root when resolving the model."""
    api_key: str | None
    """API key when resolving the model."""
    events: EventSink | Iterable[EventSink] | None
    """A sink (any callable taking an event), or several; include a
    :class:`~gramagent._runtime.events.ToolMetrics` to count calls in Prometheus."""
    dry_run: bool
    """Check calls as usual but run no tool: every valid call returns ``{"ok": true}``
    (events and metrics are still emitted). Default False."""
    tool_choice: ToolChoice
    """For the first request (default ``"auto"``); ``"required"`` or a named tool then falls
    back to ``"auto"`` so the model can answer."""
    settings: Mapping[str, Any] | None
    """Extra request body fields (``temperature``, ``max_tokens``, ...); and
    ``parallel_tool_calls``: ``False`` asks the model for one call at a time (in the formats
    that have the field) and runs the calls of a turn one after another, in call order,
    whatever the model returns (see docs/tool-calls.md)."""
    hooks: RunHooks | None
    """Told of the model's text as it is generated (the requests are then streamed), the tool
    calls and their results (see :class:`~gramagent.RunHooks`);
    :func:`~gramagent.run_agent_stream` is the async-iterator form."""
    approve: Approver | None
    """Asked about each call of a tool that requires approval, before it runs (returns
    ``True``, ``False`` or ``Refused(reason)``; may be async). Without it such calls wait: the
    run pauses (see :func:`resume_agent`)."""


_OPTIONS = frozenset(RunAgentOptions.__annotations__)


async def run_agent(
    agent: Agent | BoundAgent,
    user_input: str,
    *,
    context: Conversation | Iterable[Message] | None = None,
    **options: Unpack[RunAgentOptions],
) -> AgentResponse:
    """Run ``agent`` on one user message until the model answers (or the run pauses for
    approvals).

    Args:
        agent: an agent (bound here to ``library``) or an already bound agent.
        user_input: the user's message; must not be empty.
        context: the conversation so far (``AgentResponse.context`` of the previous turn); not
            modified.
        **options: ``library``, ``model``, ``limits``, ``api``, ``base_url``, ``api_key``,
            ``events``, ``dry_run``, ``tool_choice``, ``settings``, ``hooks``, ``approve``:
            see :class:`RunAgentOptions`.

    Returns:
        The answer, the tool invocations, the conversation and the usage of the run; or,
        paused, the calls waiting for approval (``pending_approvals``).

    Raises:
        TypeError: an unknown option.
        ValidationError: ``user_input`` is empty or holds a lone surrogate, or ``context``
            ends with calls waiting for approval (before any request).
        ToolError: binding ``agent`` to ``library`` failed (before any request).
        ConfigurationError: the model cannot be resolved (before any request).
        ModelAPIError: the model failed after the adapter's retries, or sent an empty answer
            without a reason; carries ``context``.
        LimitExceeded: a run limit was hit; carries ``context`` and ``usage``.
    """
    if not isinstance(user_input, str) or not user_input.strip():
        raise ValidationError("user input must not be empty")
    if not user_input.isascii() and clean_text(user_input) is not user_input:
        raise ValidationError("user input holds a lone surrogate (U+D800-U+DFFF), which no "
                              "request can carry: decode the text strictly, or replace them")
    run = _new_run(agent, context, options, resumed=False)
    if run.tool_calls.tracer is None:
        return await run.run(user_input)
    return await run.traced(run.run(user_input), _provider(options, run.tool_calls.bound.agent))


async def resume_agent(
    agent: Agent | BoundAgent,
    paused: AgentResponse | Conversation | Iterable[Message],
    decisions: Mapping[str, Decision],
    **options: Unpack[RunAgentOptions],
) -> AgentResponse:
    """Continue a run that paused for approvals: decide on its waiting calls and go on.

    The approved calls run, each refused one is answered with the refusal (the model is told
    the user did not approve it, and the reason of a ``Refused(reason)``), and the run goes on
    as :func:`run_agent` does until the model answers (or pauses again).

    Resumed from the paused :class:`AgentResponse`, it is the same run: the requests, tokens
    and tool calls before the pause count against ``limits`` (all but the wall time: the wait
    for a person is not counted), and the response's ``tool_invocations`` and ``usage`` are
    the whole run's. Resumed from a bare conversation (stored, deserialized), the limits
    start afresh.

    Args:
        agent: the agent, or bound agent, of the paused run.
        paused: the paused run's response (its limits then hold across the pause), or its
            conversation (``response.context``, as stored or deserialized: it ends with the
            waiting calls).
        decisions: per waiting call id (``response.pending_approvals[i].call_id``): ``True``
            to run it, ``False`` or ``Refused(reason)`` to refuse it.
        **options: as for :func:`run_agent` (:class:`RunAgentOptions`).

    Returns:
        What :func:`run_agent` returns.

    Raises:
        ValidationError: the conversation has no waiting calls, a waiting call has no
            decision, or a decision names no waiting call (before any request).
        Everything :func:`run_agent` raises.
    """
    context = paused.context if isinstance(paused, AgentResponse) else paused
    conversation = conversation_for(context)
    waiting = {call.id: call.name for call in conversation.unanswered_calls()}
    check_decisions(decisions, waiting)
    if isinstance(paused, AgentResponse):
        check_pending(paused.pending_approvals, waiting)
    run = _new_run(agent, conversation, options, resumed=True)
    if isinstance(paused, AgentResponse):  # the same run goes on: its limits hold across
        stage = run.tool_calls
        run.budget.carry(paused.usage)
        stage.carry(paused.tool_invocations, [r.call_id for r in paused.pending_approvals])
        stage.run_id = paused.run_id or stage.run_id  # and its events are the same run's
    if run.tool_calls.tracer is None:
        return await run.resume(dict(decisions))
    return await run.traced(run.resume(dict(decisions)),
                            _provider(options, run.tool_calls.bound.agent))


def _new_run(agent: Agent | BoundAgent, context: Conversation | Iterable[Message] | None,
             options: RunAgentOptions, *, resumed: bool) -> _Run:
    """A run continuing ``context`` (None: a new conversation), ``resumed`` from decisions on
    the calls it ends with or not: the agent bound, the model resolved, the conversation
    copied, the tool-call stage and the budget made.

    Raises:
        ValidationError: a run that is not resumed continues a conversation ending with
            calls waiting for approval.
    """
    if not _OPTIONS.issuperset(options):
        unknown = ", ".join(sorted(set(options) - _OPTIONS))
        raise TypeError(f"unknown run option(s): {unknown} (see RunAgentOptions)")
    dry_run = options.get("dry_run", False)
    bound = bind(agent, options.get("library"), dry_run=dry_run)
    if context is None:  # a new conversation, its id and the run's read together
        conversation_id, run_id = new_ids()
        conversation = Conversation((), conversation_id)
    else:
        conversation, run_id = conversation_for(context), new_id()
        if not resumed and conversation.unanswered_calls():
            raise ValidationError(_waiting_message(conversation))
    model, model_name, owned = model_for(options, bound.agent)
    events, hooks = options.get("events"), options.get("hooks")
    sinks = () if events is None else fan_out(events)
    if hooks is not None and type(hooks).on_event is not RunHooks.on_event:
        sinks = (*sinks, hooks.on_event)  # the hooks' events are the sinks' events
    settings, parallel = request_settings(options.get("settings"))
    budget = Budget(options.get("limits") or _DEFAULT_LIMITS, conversation,
                    asyncio.get_running_loop().time())
    # Both made with their fields in order (a class called with keywords packs them into a
    # dict first: docs/performance.md, "The loop").
    tool_calls = ToolCalls(
        bound, budget, conversation, sinks, run_id, dry_run,
        # info_logs: asked once per run, not per call.
        _tool_log.isEnabledFor(logging.INFO) or _usage_log.isEnabledFor(logging.INFO),
        # tracer: off unless the OpenTelemetry module is imported (no import here).
        tracing.run_tracer() if tracing.TRACE_MODULE in sys.modules else None,
        options.get("approve"), parallel)
    return _Run(
        tool_calls, budget, conversation, model, model_name, owned,
        options.get("tool_choice", "auto"), settings, hooks,
        set() if context is None else None)  # call_ids: a new conversation holds none yet


def _waiting_message(conversation: Conversation) -> str:
    calls = ", ".join(f"{c.name} ({c.id})" for c in conversation.unanswered_calls())
    return (f"the conversation ends with tool calls waiting for approval: {calls}; decide on "
            "them with resume_agent(agent, context, {call_id: True | False | Refused(...)}) "
            "before the next message")


def run_agent_sync(agent: Agent | BoundAgent, user_input: str, **options: Any) -> AgentResponse:
    """:func:`run_agent` for code without an event loop (scripts, the REPL).

    Raises:
        ConfigurationError: called from a running event loop (``await run_agent(...)`` there).
        Everything :func:`run_agent` raises.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass  # none: the run gets its own (not run from this handler: its errors' context)
    else:
        raise ConfigurationError("run_agent_sync() cannot run inside a running event loop; "
                                 "use `await run_agent(...)`")
    return asyncio.run(run_agent(agent, user_input, **options))


# ---------------------------------------------------------------------------------------------
# One run
# ---------------------------------------------------------------------------------------------

@dataclass(slots=True, eq=False)
class _Run:
    """One run: the model it asks, its budget, and its tool-call stage (:class:`ToolCalls`),
    which shares the run's bound agent, conversation, budget and tracer."""

    tool_calls: ToolCalls
    """Checks, approves, runs and records each turn's calls."""
    budget: Budget
    """The run's requests, tokens and wall time, against its limits."""
    conversation: Conversation
    """The run's conversation (the tool-call stage's: a copy of the one it continues)."""
    model: Model
    model_name: str
    owned: bool
    """Whether the run resolved its model itself (and closes it at its end)."""
    tool_choice: ToolChoice
    """For the first request; later ones use ``"auto"`` (or ``"none"`` to ask for the answer)."""
    settings: dict[str, Any]
    """The request settings (``parallel_tool_calls`` taken out: the tool-call stage's)."""
    hooks: RunHooks | None = None
    call_ids: set[str] | None = None
    """The ids of the conversation's calls (read from a given conversation on the first reply
    with calls; empty from the start for a new one)."""
    provider: str = ""
    """The model's provider, for the spans."""

    async def run(self, user_input: str) -> AgentResponse:
        """The run from the user message ``user_input``."""
        self.conversation.append(new_user_message(content=user_input))
        return await self._turns(None)

    async def resume(self, decisions: Mapping[str, Decision]) -> AgentResponse:
        """The run resumed with ``decisions`` on the calls its conversation ends with: those
        calls first, then the turns as :meth:`run` has them."""
        self.tool_calls.decisions = decisions
        return await self._turns(ModelTurn(tool_calls=self.conversation.unanswered_calls()))

    async def traced(self, work: Coroutine[object, object, AgentResponse], provider: str
                     ) -> AgentResponse:
        """``work`` (:meth:`run` or :meth:`resume`) inside its ``invoke_agent`` span (whose
        usage is this part's: a run resumed from its paused response carries the earlier
        part's, which its own span recorded)."""
        tracer = self.tool_calls.tracer
        assert tracer is not None
        self.provider = provider
        before = self.budget.usage
        with tracing.agent_span(tracer, agent=self.tool_calls.bound.agent.name,
                                model=self.model_name, provider=provider,
                                conversation_id=self.conversation.id) as span:
            try:
                return await work
            finally:
                usage = self.budget.usage
                tracing.record_usage(span, usage.input_tokens - before.input_tokens,
                                     usage.output_tokens - before.output_tokens)

    async def _turns(self, waiting: ModelTurn | None) -> AgentResponse:
        """The run's turns until the model answers or calls wait for approval (``waiting``:
        the calls of a resumed run, decided first). Logs the error that ends it; closes an
        owned model."""
        hooks = self.hooks
        if hooks is not None:
            hooks.on_start(self.conversation)
        budget = self.budget
        deadline = budget.deadline
        loop = asyncio.get_running_loop()
        deadline.arm(loop)
        try:
            if waiting is not None:
                await self._call_tools(waiting, replay=False)
            choice = self.tool_choice
            send = self._sender()
            conversation, bound = self.conversation, self.tool_calls.bound
            instruction, tools = bound.agent.instruction, bound.definitions
            parallel = self.tool_calls.parallel
            while not self.tool_calls.awaiting:
                # The next request: the conversation so far, the agent's instruction and
                # tools; the final answer asked for when the repeat guard answered a call.
                request = new_request(
                    model=self.model_name, instruction=instruction,
                    messages=conversation.messages, tools=tools,
                    tool_choice="none" if self.tool_calls.force_answer else choice,
                    settings=self.settings, rendered=conversation.rendered,
                    parallel_tool_calls=parallel)
                # Ask the model: the limits checked first, the request cut short at the end
                # of the wall time; the reply counted and logged.
                budget.start_request(loop.time())
                try:
                    turn = await send(request)
                except asyncio.CancelledError:
                    if deadline.cut_short():
                        raise self._out_of_time()  # noqa: B904  (_out_of_time says how)
                    raise
                except (TimeoutError, ModelAPIError) as exc:
                    raise self._failed(exc)  # noqa: B904  (_failed says how it is chained)
                finally:  # not under the deadline any more
                    deadline.settle()
                turn = self._received(request, turn)
                del request  # not held while the tools run
                if not (turn.tool_calls or turn.cut_off_calls):
                    return self._answer(turn)
                if choice == "required" or not isinstance(choice, str):
                    choice = "auto"  # a forced choice applies to the first request only
                if hooks is None:
                    await self.tool_calls.run_tool_calls(turn)
                else:
                    await self._call_tools(turn)
                # Not kept through the next request: a turn holds its whole decoded reply.
                del turn
            return self._paused()
        except Exception as exc:
            log_run_error(exc, agent=self.tool_calls.bound.agent.name)
            raise
        finally:
            deadline.disarm()
            if self.owned:
                await self.model.aclose()

    async def _call_tools(self, turn: ModelTurn, *, replay: bool = True) -> None:
        """The tool-call stage on ``turn``'s calls, the hooks told of the calls and their
        results."""
        hooks, stage = self.hooks, self.tool_calls
        if hooks is None:
            await stage.run_tool_calls(turn, replay=replay)
            return
        answered = len(stage.invocations)
        cut_off = turn.cut_off_calls
        hooks.on_tool_calls(turn.tool_calls + cut_off if cut_off else turn.tool_calls)
        await stage.run_tool_calls(turn, replay=replay)
        hooks.on_tool_results(stage.invocations[answered:])

    def _failed(self, exc: TimeoutError | ModelAPIError) -> Exception:
        """What a model request that failed with ``exc`` raises: a ModelAPIError carrying the
        conversation and usage so far, or LimitExceeded when the run's wall time cut the
        request short (any other timeout as it is)."""
        budget = self.budget
        if isinstance(exc, ModelAPIError):
            exc.context = self.conversation.copy()
            exc.usage = budget.usage
            return exc
        if not budget.deadline.expired:
            return exc
        return self._out_of_time()

    def _out_of_time(self) -> LimitExceeded:
        """What a model request the run's wall time cut short raises (its context, the
        cancellation or timeout it replaces, suppressed)."""
        error = self.budget.wall_time_exceeded(asyncio.get_running_loop().time(),
                                               " (while waiting for the model)")
        error.__suppress_context__ = True
        return error

    def _received(self, request: ModelRequest, turn: ModelTurn) -> ModelTurn:
        """``turn``, the reply to ``request``, counted against the budget and logged; its calls
        with ids unique in the conversation."""
        self.budget.count(request, turn)
        if self.tool_calls.info_logs and turn.usage is not None:
            log_usage(turn.usage, model=self.model_name)
        if turn.tool_calls or turn.cut_off_calls:
            # A model may repeat a call id, within a reply or across turns, or send none: every
            # call gets its own, so each is answered exactly once, whatever the wire format.
            used = self.call_ids
            if used is None:  # the ids of the conversation so far, gathered once per run
                used = self.call_ids = self.conversation.call_ids()
            cut_off = turn.cut_off_calls
            calls = turn.tool_calls + cut_off if cut_off else turn.tool_calls
            unique = unique_call_ids(calls, used)
            if unique is not calls:
                n = len(turn.tool_calls)
                turn = replace(turn, tool_calls=unique[:n], cut_off_calls=unique[n:])
            for c in unique:
                used.add(c.id)
        return turn

    def _sender(self) -> Callable[[ModelRequest], Awaitable[ModelTurn]]:
        """How the run sends its requests: the model's own request (the usual run), streamed
        to the hooks, or inside its span."""
        if self.tool_calls.tracer is not None:
            return self._traced_request
        return self.model.request if self.hooks is None else self._untraced_sender()

    def _untraced_sender(self) -> Callable[[ModelRequest], Awaitable[ModelTurn]]:
        hooks = self.hooks
        if hooks is not None and hooks.streams:
            return partial(_streamed, self.model, hooks=hooks)
        return self.model.request

    async def _traced_request(self, request: ModelRequest) -> ModelTurn:
        tracer = self.tool_calls.tracer
        assert tracer is not None
        with tracing.model_span(tracer, model=self.model_name,
                                provider=self.provider) as span:
            turn = await self._untraced_sender()(request)
            usage = turn.usage or Usage()
            tracing.record_turn(span, usage.input_tokens, usage.output_tokens,
                                turn.finish_reason)
            return turn

    def _answer(self, turn: ModelTurn) -> AgentResponse:
        """The run's result: the model answered (without tool calls).

        Raises:
            ModelAPIError: the answer is empty and the server gave no reason for it.
        """
        finish = turn.finish_reason
        text = turn.text
        if finish is None or finish in _NO_REASON:  # the model finished
            if not text or text.isspace():
                raise ModelAPIError(
                    f"the model sent an empty answer (no text, no tool call) and gave no "
                    f"reason (finish_reason {finish!r}); the conversation so far is in "
                    ".context", model=self.model_name, context=self.conversation.copy(),
                    usage=self.budget.usage)
            finish = "stop"
        self.conversation.append(new_assistant_message(content=text))
        usage = self.budget.usage
        stage = self.tool_calls
        if stage.info_logs:
            log_usage(usage, model=self.model_name, scope="run")
        return new_response(content=text or "", tool_invocations=stage.tool_invocations(),
                            context=self.conversation, usage=usage,
                            stopped_by="repeated_call" if stage.force_answer else None,
                            run_id=stage.run_id, finish_reason=finish)

    def _paused(self) -> AgentResponse:
        """The run's result when calls wait for approval: no answer yet."""
        stage = self.tool_calls
        return AgentResponse(
            content="", tool_invocations=stage.tool_invocations(), context=self.conversation,
            usage=self.budget.usage, run_id=stage.run_id, finish_reason="approval_required",
            pending_approvals=tuple(stage.awaiting or ()))


async def _streamed(model: Model, request: ModelRequest, *, hooks: RunHooks) -> ModelTurn:
    """One request with its text going to ``hooks`` as it is generated (whole, for a model
    that cannot stream)."""
    if isinstance(model, StreamingModel):
        return await model.stream_request(request, hooks.on_text)
    turn = await model.request(request)
    if turn.text:
        hooks.on_text(turn.text)
    return turn


def _provider(options: RunAgentOptions, agent: Agent) -> str:
    """The provider of the model a run uses, for its spans: a model object's ``provider``
    (the HTTP adapters say ``openai``: they speak to an OpenAI-compatible server), else the
    reference's, where a ``local`` model asked of a server at ``base_url`` is ``openai``."""
    model = options.get("model")
    if model is not None and not isinstance(model, (str, ModelRef)):
        return getattr(model, "provider", None) or agent.model.provider
    ref = (agent.model if model is None
           else model if isinstance(model, ModelRef) else ModelRef.parse(model))
    if ref.provider == "local" and options.get("base_url"):
        return "openai"
    return ref.provider
