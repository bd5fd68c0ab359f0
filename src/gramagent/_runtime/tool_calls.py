"""The tool calls of a run: check each turn's calls, run the valid ones, record one result each.

:meth:`ToolCalls.run_tool_calls` takes the calls of one model turn through four stages::

    replay  the assistant message with its whole calls (a call the token limit cut off is
            not sent back as a call: servers that read its partial arguments refuse it)
    check   per call, in order: payload size -> JSON object -> known tool -> schema
            -> accepted keywords -> (repeat guard) already answered?
    approve the valid calls of tools that require approval: asked about in call order, or
            left waiting (the run then pauses after this turn; see approval.py)
    run     the valid calls concurrently (one after another when the run's
            ``parallel_tool_calls`` is false; a call of a tool that runs alone with no other
            call alongside); copies of one call within the turn once
    record  one result per call id, in call order (conversation, invocation, event, log);
            for cut-off calls, a note that tells the model what happened (none when calls
            wait for approval: the conversation must end with the waiting calls)

Bad calls are not exceptions: they become error results the model sees, and count against
the per-tool retry budget. :class:`~gramagent.errors.LimitExceeded` stops the run when the
turn passes ``max_tool_calls`` or a tool's retry budget is spent.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeAlias

import orjson

from gramagent import _json as exact_json
from gramagent._logs import log_tool_call
from gramagent._messages import (
    Conversation,
    Message,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    new_assistant_message,
    new_tool_result,
)
from gramagent._models.base import ModelTurn
from gramagent._runtime import tracing
from gramagent._runtime.approval import ApprovalRequest, Approver, Decision, refusal
from gramagent._runtime.budget import Budget
from gramagent._runtime.deadline import watcher
from gramagent._runtime.events import (
    UNKNOWN_TOOL_LABEL,
    EventSink,
    ToolCallPlanned,
    ToolCallResult,
    args_preview_hash,
    emit,
)
from gramagent._runtime.invoke import (
    CallArgs,
    CallSettings,
    Outcome,
    Running,
    cancelled_itself,
    finished,
    run_inline,
    start_calls,
)
from gramagent._runtime.library import BoundAgent, Tool, ToolContext
from gramagent._runtime.limits import INHERIT
from gramagent._runtime.results import ToolInvocation, new_invocation
from gramagent._spec.calls.check import (
    INVALID_CALL_TYPES,
    CallRejection,
    ToolErrorType,
    check_arguments,
    parse_arguments,
    parse_object,
    rejection,
)
from gramagent.errors import ApprovalError

__all__ = ["ToolCalls"]


_RepeatKey: TypeAlias = tuple[str, bytes]
"""What the repeat guard knows a call by: the tool name and :func:`_repeat_form` of its
arguments (a pair: no string made by joining them, and no decoding of the JSON)."""


@dataclass(slots=True, eq=False)
class _Call:
    """A call of the current turn, through its checks and execution."""

    call: ToolCall
    seq: int
    arguments: dict[str, Any] | str
    """Parsed arguments, or the raw text when unparseable."""
    cut_off: bool
    """Whether the token limit cut the call off (it is not in the conversation)."""
    planned_at: float = 0.0
    """When the call was checked (``time.perf_counter``), for the events' latency; 0 without
    event sinks."""
    tool: Tool | None = None
    rejection: CallRejection | None = None
    outcome: Outcome | None = None
    repeat_key: _RepeatKey | None = None
    earlier_result: object = None
    """For a repeated call, the result of the call it repeats."""
    copy_of: _Call | None = None
    """For a call identical to an earlier one of the same turn: that call (not run twice)."""
    args_hash: str | None = None
    reported: bool = False
    """Whether its result event was emitted."""


_Started: TypeAlias = list[tuple[_Call, CallArgs]]
"""Calls with what each starts with (:meth:`ToolCalls._call_args`)."""


@dataclass(slots=True, eq=False)
class ToolCalls:
    """The tool calls of one run, turn after turn.

    Holds what the run's later turns depend on: the calls so far (``seq``), the invalid calls
    per tool (the retry budget), and the calls already answered (the repeat guard).
    """

    bound: BoundAgent
    budget: Budget
    conversation: Conversation
    sinks: tuple[EventSink, ...]
    run_id: str
    dry_run: bool
    info_logs: bool
    """Whether INFO records of tool calls are wanted (checked once per run)."""
    tracer: tracing.Tracer | None = None
    """The OpenTelemetry tracer when tracing is on (:mod:`~gramagent._runtime.tracing`)."""
    approve: Approver | None = None
    """Asks a person about a call that needs approval; None: such calls wait (the run
    pauses)."""
    parallel: bool = True
    """Whether the calls of a turn may run alongside each other (the run's
    ``parallel_tool_calls``); False: one after another, in call order, however many the
    model asked for at once."""
    invocations: list[ToolInvocation] = field(default_factory=list)
    seq: int = 0
    invalid: dict[str, int] = field(default_factory=dict)
    """Invalid calls so far, per tool name."""
    answered: dict[_RepeatKey, tuple[object, str]] = field(default_factory=dict)
    """Per repeat key, the result and output text of the call that first succeeded with it."""
    force_answer: bool = False
    """Set when the repeat guard answered a call: the next request asks for the answer."""
    decisions: Mapping[str, Decision] | None = None
    """Decisions given in advance, per call id (a resumed run's)."""
    awaiting: list[ApprovalRequest] | None = None
    """The calls of the last turn left waiting for approval (None: none, the usual run; made
    on the first): the run pauses when any are."""
    call_settings: CallSettings | None = None
    """What the calls of a turn share (made on the first turn with calls to run)."""
    announced: dict[str, int] = field(default_factory=dict)
    """Per id of a call the run paused on (its planned event emitted then), the seq it was
    checked with: a run resumed from its paused response gives it that seq again and does
    not announce it twice."""

    def carry(self, invocations: Sequence[ToolInvocation], waiting: Sequence[str] = ()
              ) -> None:
        """Start from the calls of an earlier part of the run (one that paused for approvals):
        they count against ``max_tool_calls`` and the retry budget, the repeat guard knows
        their results, and they are part of the response's ``tool_invocations``. ``waiting``:
        the ids of the calls it paused on, in call order, whose planned events it emitted."""
        self.announced = _waiting_seqs(invocations, waiting)
        self.invocations.extend(invocations)
        self.seq += len(invocations)
        guard = self.budget.limits.repeat_guard
        outputs = ({m.call_id: m.content for m in self.conversation
                    if isinstance(m, ToolResultMessage)} if guard else {})
        for invocation in invocations:
            error_type = invocation.error_type
            if error_type in INVALID_CALL_TYPES:
                self.invalid[invocation.name] = self.invalid.get(invocation.name, 0) + 1
            if not guard or not isinstance(invocation.arguments, dict):
                continue
            if error_type == "repeated_call":
                self.force_answer = True
            elif error_type is None or error_type == "approval_refused":
                output = outputs.get(invocation.call_id)
                if output is not None:  # as _record and _approve remember them
                    key = (invocation.name, _repeat_form(invocation.arguments))
                    self.answered[key] = (invocation.result, output)

    async def run_tool_calls(self, turn: ModelTurn, *, replay: bool = True) -> None:
        """Check, run and record the calls of ``turn``. ``replay=False``: the calls are in the
        conversation already (a resumed run's).

        Raises:
            LimitExceeded: ``max_tool_calls`` or a tool's retry budget stops the run.
        """
        calls, cut_off = turn.tool_calls, turn.cut_off_calls
        if replay:
            self._replay(turn)
        limit = self.budget.limits.max_tool_calls
        if limit is not None and self.seq + len(calls) + len(cut_off) > limit:
            self._stop_at_call_limit(calls, cut_off, limit)
        pending = checked = self._check(calls)
        if cut_off:
            pending.extend(self._check(cut_off, cut_off=True))
        try:
            if self.decisions is not None or (self.bound.approval_required
                                              and not self.dry_run):
                pending = await self._approve(pending)
            runnable = self._runnable(pending)
            try:
                if runnable:
                    for group in self._groups(runnable):
                        await self._run(group)
            except BaseException:  # interrupted: the calls that finished keep their results
                self.conversation.extend(self._record([c for c in pending if _decided(c)]))
                raise
        except BaseException:  # cancelled, or an approve callback failed
            if self.sinks:
                self._report_interrupted(checked)
            raise
        self.conversation.extend(self._record(pending))  # at once, not one call per result
        if cut_off and not self.awaiting:
            # With calls left waiting the note cannot be added: their results, written on
            # resume, must follow the assistant message directly, and a conversation ending
            # with a user message has no waiting calls (it could never be resumed).
            self._note_cut_off(pending)
        if self.invalid and not self.awaiting:
            # Paused: the turn is not over. Its waiting calls are decided and run first, as
            # with an approve callback, and the budget is checked when the turn ends.
            self._check_retry_budget(pending)

    def tool_invocations(self) -> tuple[ToolInvocation, ...]:
        """The run's calls for its response, in call order (seq): a call it resumed after a
        pause was recorded after the calls of its turn that ran before the pause."""
        if self.announced:
            return tuple(sorted(self.invocations, key=_seq))
        return tuple(self.invocations)

    # -- replay ---------------------------------------------------------------------------

    def _replay(self, turn: ModelTurn) -> None:
        """Append the assistant message: its text and its whole calls (never the cut-off ones,
        whose partial arguments a server such as llama.cpp refuses to read back)."""
        calls = turn.tool_calls
        # A reply of one cut-off call leaves neither text nor calls: an empty text keeps the
        # roles alternating for chat templates that require it.
        text = turn.text if turn.text is not None or calls else ""
        self.conversation.append(new_assistant_message(content=text, tool_calls=calls))

    def _stop_at_call_limit(self, calls: Sequence[ToolCall], cut_off: Sequence[ToolCall],
                            limit: int) -> None:
        """The turn's calls pass ``max_tool_calls``: each gets a result saying so, and the run
        stops."""
        asked = self.seq + len(calls) + len(cut_off)
        for call in calls:
            self.conversation.append(new_tool_result(
                call_id=call.id, name=call.name, is_error=True,
                content=f"Not run: the run stopped at its limit of {limit} tool calls."))
        raise self.budget.exceeded("max_tool_calls", limit, asked,
                                   f"the model asked for {asked} tool calls")

    # -- check ----------------------------------------------------------------------------

    def _check(self, calls: Sequence[ToolCall], *, cut_off: bool = False) -> list[_Call]:
        """Parse and check each of ``calls``, in order: payload size, JSON object, known tool,
        schema, accepted keywords, repetition. Emits each one's planned event, and its result
        if rejected.

        One pass over a turn's calls: what is the same for every call (the limits, the
        agent's tools and validators, whether there are event sinks) is read once per turn.
        """
        max_bytes = self.budget.limits.max_payload_bytes
        guard = self.budget.limits.repeat_guard
        bound, sinks, answered = self.bound, self.sinks, self.answered
        tools, validators, schemas = bound.tools, bound.validators, bound.schemas
        announce = bool(sinks or self.info_logs or self.announced)
        checked: list[_Call] = []
        seq = self.seq
        self.seq += len(calls)
        for call in calls:
            seq += 1
            text, name = call.arguments, call.name
            parsed = parse_object(text, max_bytes)
            c = _Call(call, seq, text if parsed is None else parsed, cut_off)
            checked.append(c)
            if announce:
                self._announce(c)
            if cut_off:
                c.rejection = _cut_off_rejection(call)
            elif parsed is None:  # rejected: parse again to say why
                c.rejection = self._parse_rejection(call, max_bytes)
            else:
                arguments = check_arguments(name, parsed, validators, schemas, text)
                if isinstance(arguments, CallRejection):
                    c.rejection = arguments
                else:
                    c.arguments = arguments
                    c.tool = tool = tools[name]
                    accepts = tool.accepts
                    if accepts is not None and not accepts.issuperset(arguments):
                        c.rejection = _unexpected_arguments(tool, arguments)
                    elif guard:
                        c.repeat_key = key = (name, _repeat_form(arguments))
                        earlier = answered.get(key)
                        if earlier is not None:
                            c.rejection = self._answer_repeat(c, *earlier)
            if sinks and c.rejection is not None:
                self._emit_result(c, c.rejection.error_type, c.rejection.event_message)
        return checked

    def _announce(self, c: _Call) -> None:
        """For events and logs: the call's seq as the run paused on it (a resumed run's),
        when it was checked, its arguments' hash; its planned event."""
        announced = self.announced
        if announced:  # resumed: a waiting call keeps the seq it had when the run paused
            c.seq = announced.get(c.call.id, c.seq)
        c.args_hash = args_preview_hash(c.arguments)
        if self.sinks:
            c.planned_at = time.perf_counter()
            if c.call.id not in announced:
                self._emit_planned(c)

    def _parse_rejection(self, call: ToolCall, max_bytes: int) -> CallRejection:
        """Why the arguments of ``call`` could not be parsed (a payload limit or JSON)."""
        known = call.name in self.bound.tools
        parsed = parse_arguments(call.arguments, max_bytes=max_bytes,
                                 tool=f"tool {call.name!r}" if known else "this call")
        assert isinstance(parsed, CallRejection)  # parse_object refused it
        return parsed

    def _answer_repeat(self, c: _Call, result: object, output: str) -> CallRejection:
        """Answer a repeat of a successful call without running it, and ask for the answer.

        The model gets the earlier output itself, not a note about it (a small model copies
        the last tool message into its answer), and must answer next.
        """
        self.force_answer = True
        c.earlier_result = result
        return CallRejection("repeated_call", output,
                             "repeated call; answered from the earlier result")

    # -- approve --------------------------------------------------------------------------

    async def _approve(self, pending: list[_Call]) -> list[_Call]:
        """Decide on the valid calls that need approval, in call order: a refused call gets
        its refusal as its result; a call nobody can decide on now is left out of the turn
        (in :attr:`awaiting`).

        Identical calls of the turn (the same tool and arguments) are decided once: the
        person is asked about the first, and that answer holds for every copy; a refusal
        given in advance (a resumed run's) for any one of them refuses them all. A decision
        given in advance holds for its call whatever the tool: a call refused by a person is
        never run, even if the agent it is resumed with (or a dry run) would not have asked.
        """
        needed = frozenset() if self.dry_run else self.bound.approval_required
        given = self.decisions or {}
        decided = self._refused_in_advance(pending, given)
        kept: list[_Call] = []
        for c in pending:
            if c.rejection is not None or (c.call.name not in needed
                                           and c.call.id not in given):
                kept.append(c)
                continue
            assert isinstance(c.arguments, dict)
            request = ApprovalRequest(call_id=c.call.id, tool=c.call.name,
                                      arguments=c.arguments)
            key = _identity(c)
            decision = decided.get(key)
            if decision is None:
                decision = await self._decide(request)
            if decision is None:
                if self.awaiting is None:
                    self.awaiting = []
                self.awaiting.append(request)
                continue
            decided[key] = decision  # the copies of the call later in the turn: the same
            c.rejection = refused = refusal(c.call.name, decision)
            if refused is not None:
                if c.repeat_key is not None:
                    # Asked again, the same call gets the same refusal, without asking, and
                    # the model must then answer (the repeat guard's rule).
                    self.answered[c.repeat_key] = (None, refused.message)
                if self.sinks:
                    self._emit_result(c, refused.error_type, refused.event_message)
            kept.append(c)
        return kept

    @staticmethod
    def _refused_in_advance(pending: list[_Call], given: Mapping[str, Decision]
                            ) -> dict[_RepeatKey, Decision]:
        """Per identical call of the turn, the first refusal given in advance for any of its
        copies (a resumed run's decisions)."""
        refused: dict[_RepeatKey, Decision] = {}
        for c in pending:
            decision = given.get(c.call.id)
            if decision is not None and decision is not True and c.rejection is None:
                refused.setdefault(_identity(c), decision)
        return refused

    async def _decide(self, request: ApprovalRequest) -> Decision | None:
        """The decision on ``request``: given in advance, or asked of :attr:`approve` (the
        wait is not counted against the wall time); None when nobody can be asked."""
        if self.decisions is not None and request.call_id in self.decisions:
            return self.decisions[request.call_id]
        if self.approve is None:
            return None
        loop = asyncio.get_running_loop()
        asked = loop.time()
        try:
            answer = self.approve(request)
            if inspect.isawaitable(answer):
                answer = await answer
        except Exception as exc:  # the run's state goes with the error, as with any RunError
            error = ApprovalError(
                f"the approve callback raised {type(exc).__name__} on the call to "
                f"{request.tool} ({request.call_id}): {exc}",
                context=self.conversation.copy(), usage=self.budget.usage)
            raise error from exc
        finally:
            self.budget.postpone(loop.time() - asked)
        return answer

    # -- run ------------------------------------------------------------------------------

    def _runnable(self, pending: list[_Call]) -> list[_Call]:
        """The calls of a turn to run: each distinct valid call once, in call order.

        A small model may write the same call several times in one reply (dozens, seen with
        the 0.5B in ``text`` mode); with the repeat guard on, copies wait for the first and
        share its outcome instead of running the tool again.
        """
        runnable: list[_Call] = []
        first: dict[_RepeatKey, _Call] = {}
        for c in pending:
            if c.rejection is not None:
                continue
            key = c.repeat_key
            if key is not None:
                if key in first:
                    c.copy_of = first[key]
                    continue
                first[key] = c
            runnable.append(c)
        return runnable

    def _groups(self, calls: list[_Call]) -> Sequence[list[_Call]]:
        """The calls of a turn to run, in call order, in the groups that run one after
        another (:meth:`_run` runs the calls of a group together): one group of them all,
        unless calls must not overlap. When the run's ``parallel_tool_calls`` is false, each
        call is a group of its own; with tools that run alone (``runs_alone``), each of their
        calls is, and the calls between them make a group. A call of a later group starts
        once every call of the groups before it has ended."""
        if self.parallel and not self.bound.runs_alone:
            return (calls,)
        if not self.parallel:
            return [[c] for c in calls]
        alone = self.bound.runs_alone
        groups: list[list[_Call]] = []
        together: list[_Call] = []
        for c in calls:
            if c.call.name not in alone:
                together.append(c)
                continue
            if together:
                groups.append(together)
                together = []
            groups.append([c])
        if together:
            groups.append(together)
        return groups

    async def _run(self, calls: list[_Call]) -> None:
        """Run checked calls concurrently, each the way its tool runs (the table of
        :mod:`~gramagent._runtime.invoke`).

        The calls that run alongside (async tools in their tasks, blocking functions in worker
        threads) start first (:func:`~gramagent._runtime.invoke.start_calls`); then the inline
        calls (plain functions declared ``blocking=False``, and every call of a dry run) run
        one after another in the run's task (:func:`~gramagent._runtime.invoke.run_inline`);
        then the calls alongside are awaited in call order (they run alongside all the same).
        Each call's timeout is bounded by the end of the run wherever it starts, and each
        reports its result event when it finishes.
        """
        settings = self._call_settings()
        inline, alongside = self._call_args(calls, settings.dry_run)
        run: asyncio.Task[object] | None = None  # the run's task, read before its first await
        cancels = 0  # its count of cancellation requests then
        running: list[tuple[int, Running]] = []
        try:
            if alongside:
                start_calls([args for _, args in alongside], settings, running)
                if inline and any(isinstance(call, asyncio.Task) for _, call in running):
                    await asyncio.sleep(0)  # the tasks take their first steps before inline calls
            for c, args in inline:
                ran = run_inline(args, settings)  # here, now
                if isinstance(ran, Outcome):
                    c.outcome = ran
                    continue
                if run is None:
                    run, cancels = _run_task()
                c.outcome = await ran
                if run.cancelling() > cancels:  # the run's, caught by the tool: it goes on
                    raise asyncio.CancelledError
            if running and run is None:
                run, cancels = _run_task()
            for index, call in running:
                c = alongside[index][0]
                try:
                    c.outcome = await call
                except asyncio.CancelledError as exc:  # the run's, or the tool's own
                    c.outcome = self._cancelled(c, exc)
                if run is not None and run.cancelling() > cancels:
                    raise asyncio.CancelledError
        except BaseException:  # cancelled: so are the calls still running
            for index, call in running:  # those started (a first step may raise before others)
                c = alongside[index][0]
                if c.outcome is None:  # finished unawaited: it keeps its outcome
                    c.outcome = finished(call)
                call.cancel()
            raise

    def _call_args(self, calls: Sequence[_Call], dry_run: bool) -> tuple[_Started, _Started]:
        """What each of ``calls`` starts with (its tool, arguments, context, own timeout,
        result event with event sinks, and id), parted by how it runs: the calls run inline
        (plain functions declared ``blocking=False``; all of them in a dry run, where
        :func:`~gramagent._runtime.invoke.run_inline` runs nothing), and those that run
        alongside, each in call order."""
        report = self._finished if self.sinks else None
        tool_timeout = self.budget.limits.tool_timeout
        inline: _Started = []
        alongside: _Started = []
        for c in calls:
            tool = c.tool
            assert tool is not None and isinstance(c.arguments, dict)
            args: CallArgs = (
                tool, c.arguments, None if tool.context_param is None else self._context(tool, c),
                tool_timeout if tool.timeout is INHERIT else tool.timeout,
                None if report is None else partial(report, c), c.call.id)
            (inline if dry_run or tool.runs_inline else alongside).append((c, args))
        return inline, alongside

    def _call_settings(self) -> CallSettings:
        """What the calls of this turn share, the event loop's deadline watcher among it
        (made again when the end of the run moved: a person was asked for an approval)."""
        settings, until = self.call_settings, self.budget.deadline.when
        if settings is None or settings.until != until:
            settings = self.call_settings = CallSettings(
                dry_run=self.dry_run, tracer=self.tracer, until=until,
                max_output_chars=self.budget.limits.max_tool_output_chars,
                watcher=watcher(asyncio.get_running_loop()))
        return settings

    def _cancelled(self, c: _Call, exc: asyncio.CancelledError) -> Outcome:
        """A call's task ended cancelled: the run was cancelled (``exc`` goes on), or the tool
        cancelled its own task, and that is its failure; its result event is emitted if it
        had none (a tool that cancelled itself and returned had one: its task is cancelled
        all the same, as asyncio does)."""
        assert c.tool is not None
        outcome = cancelled_itself(c.tool, exc)
        if self.sinks and not c.reported:
            self._emit_result(c, outcome.error_type, outcome.event_message)
        return outcome

    def _finished(self, c: _Call, outcome: Outcome) -> None:
        """A call's result event, as it finishes: none if it has one already (abandoned when
        the run was cancelled, its result was ``interrupted``; a tool that caught the
        cancellation still ends later)."""
        if not c.reported:
            self._emit_result(c, outcome.error_type, outcome.event_message)

    def _context(self, tool: Tool, c: _Call) -> ToolContext | None:
        """The context a tool that declares one gets (none in a dry run: nothing runs)."""
        if tool.context_param is None or self.dry_run:
            return None
        return ToolContext(
            conversation_id=self.conversation.id, run_id=self.run_id, call_id=c.call.id,
            tool=tool.name, state=self.bound.library.conversation_state(self.conversation.id))

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

    # -- record ---------------------------------------------------------------------------

    def _record(self, pending: list[_Call]) -> list[Message]:
        """Record each call's result, in call order: its invocation and log record; returns
        their result messages, for the conversation (none for a cut-off call)."""
        results: list[Message] = []
        invocations, answered, info_logs = self.invocations, self.answered, self.info_logs
        for c in pending:
            if c.copy_of is not None:
                self._answer_copy(c)
            call = c.call
            call_id, name = call.id, call.name  # read once (see _check)
            if c.rejection is None:
                outcome = c.outcome
                assert outcome is not None
                error_type = outcome.error_type
                text, result, latency = outcome.output, outcome.result, outcome.latency
                if error_type is None and c.repeat_key is not None:
                    answered[c.repeat_key] = (result, text)
            else:
                error_type, text, result, latency = self._rejected(c)
            failed = error_type is not None and error_type != "repeated_call"
            if not c.cut_off:  # a cut-off call is not in the conversation: a note tells of it
                results.append(new_tool_result(call_id=call_id, name=name, content=text,
                                               is_error=failed))
            error = text if failed else None
            invocations.append(new_invocation(call_id=call_id, name=name, arguments=c.arguments,
                                              result=result, error=error, error_type=error_type,
                                              latency=latency, seq=c.seq))
            if info_logs or error_type is not None:  # errors are WARNING records
                self._log(c, error_type, latency)
        return results

    def _log(self, c: _Call, error_type: ToolErrorType | None, latency: float) -> None:
        """The log record of a call (INFO, or WARNING for an error)."""
        how = c.rejection if c.rejection is not None else c.outcome
        log_tool_call(tool=self._label(c.call.name), call_id=c.call.id,
                      latency_ms=latency * 1000.0, error_type=error_type,
                      args_hash=c.args_hash, message=how.event_message if how else None)

    def _rejected(self, c: _Call) -> tuple[ToolErrorType, str, object, float]:
        """A rejected call's error type, text, result (a repeated call's earlier one) and
        latency (0: it did not run); it counts against the retry budget if invalid."""
        rejected = c.rejection
        assert rejected is not None
        error_type = rejected.error_type
        if self.tracer is not None:
            tracing.rejected_tool_span(self.tracer, tool=self._label(c.call.name),
                                       call_id=c.call.id, error_type=error_type)
        if error_type in INVALID_CALL_TYPES:
            self.invalid[c.call.name] = self.invalid.get(c.call.name, 0) + 1
        return error_type, rejected.message, c.earlier_result, 0.0

    def _note_cut_off(self, pending: list[_Call]) -> None:
        """Tell the model which of its calls the token limit cut off (not run, not replayed)."""
        notes = [c.rejection.message for c in pending if c.cut_off and c.rejection is not None]
        self.conversation.append(UserMessage(content="\n".join(notes)))

    def _check_retry_budget(self, pending: list[_Call]) -> None:
        """Stop the run when a tool has used up its retry budget: the first of the turn's
        tools in call order, then any counted before a pause (a resumed turn's)."""
        budget = self.budget.limits.max_invalid_calls_per_tool
        if budget is None:
            return
        for name in [*(c.call.name for c in pending), *self.invalid]:
            count = self.invalid.get(name, 0)
            if count >= budget:
                last = next((i.error_type for i in reversed(self.invocations)
                             if i.name == name and i.error_type in INVALID_CALL_TYPES), None)
                raise self.budget.exceeded(
                    "max_invalid_calls_per_tool", budget, count,
                    f"{count} invalid calls to tool {name[:100]!r} (last: {last})")

    # -- events ---------------------------------------------------------------------------

    def _emit_planned(self, c: _Call) -> None:
        emit(self.sinks, ToolCallPlanned(
            request_id=self.run_id, tool=self._label(c.call.name),
            args_preview_hash=c.args_hash or "", seq=c.seq))

    def _emit_result(self, c: _Call, error_type: ToolErrorType | None,
                     message: str | None) -> None:
        c.reported = True
        emit(self.sinks, ToolCallResult(
            request_id=self.run_id, tool=self._label(c.call.name),
            status="ok" if error_type is None else "error",
            latency_ms=(time.perf_counter() - c.planned_at) * 1000.0, seq=c.seq,
            error_type=error_type, message=message))

    def _report_interrupted(self, checked: list[_Call]) -> None:
        """The turn ended early (the run was cancelled, an approve callback failed): each of
        its calls with a planned event and no result yet gets its result, ``interrupted``, so
        no call is left half-recorded (a call waiting for approval when the run pauses is not
        over: it gets its result when the run is resumed)."""
        for c in checked:
            if not c.reported:
                self._emit_result(c, "interrupted",
                                  "interrupted: the run ended before this call finished")

    def _label(self, name: str) -> str:
        """The tool name for events, metrics and logs: bounded to the agent's tools."""
        return name if name in self.bound.tools else UNKNOWN_TOOL_LABEL


def _cut_off_rejection(call: ToolCall) -> CallRejection:
    return rejection(
        "tool_payload_parse_error",
        f"your call to tool {call.name[:100]!r} was cut off by the output token limit before "
        "its arguments were complete, so it was not run. Call it again with shorter "
        "arguments, or answer without it.",
        "arguments cut off by the output token limit")


def _unexpected_arguments(tool: Tool, arguments: dict[str, Any]) -> CallRejection:
    """The schema let extra keys through, but the implementation cannot take them."""
    extra = sorted(set(arguments) - (tool.accepts or frozenset()))
    takes = ", ".join(sorted(tool.accepts or ())) or "no arguments"
    return rejection(
        "invalid_arguments",
        f"tool {tool.name!r} got unexpected arguments: {', '.join(map(repr, extra))}. "
        f"It takes: {takes}.",
        f"{len(extra)} unexpected argument{'s' if len(extra) != 1 else ''}")


def _repeat_form(arguments: dict[str, Any]) -> bytes:
    """The arguments as sorted-key JSON (UTF-8), to recognise a repeated call (never sent
    anywhere)."""
    try:
        return orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # a big integer, deep nesting or a lone surrogate
        return exact_json.dumps(arguments, sort_keys=True).encode()


def _run_task() -> tuple[asyncio.Task[object], int]:
    """The running task (the run's) and its count of cancellation requests now.

    A call it awaits may end otherwise than cancelled although the run was asked to cancel
    meanwhile (the tool caught the cancellation and returned or failed): a count above this
    one then says so, and the run is cancelled all the same (it would go on to its next model
    request, and an ``asyncio.timeout`` around it would not end it).
    """
    task = asyncio.current_task()
    assert task is not None  # a run runs in a task
    return task, task.cancelling()


def _identity(c: _Call) -> _RepeatKey:
    """What identical calls share: the tool name and the arguments (as the repeat guard
    knows a call, whether the guard is on or not)."""
    if c.repeat_key is not None:
        return c.repeat_key
    assert isinstance(c.arguments, dict)
    return (c.call.name, _repeat_form(c.arguments))


def _decided(c: _Call) -> bool:
    """Whether a call's result is known: rejected, run to its end, or a copy of one run."""
    return (c.rejection is not None or c.outcome is not None
            or (c.copy_of is not None and c.copy_of.outcome is not None))


def _seq(invocation: ToolInvocation) -> int:
    return invocation.seq


def _waiting_seqs(invocations: Sequence[ToolInvocation], waiting: Sequence[str]
                  ) -> dict[str, int]:
    """The seqs the calls ``waiting`` (in call order) were checked with before the pause.

    Every call checked took the next seq, and got an invocation unless it waits: the waiting
    calls hold the seqs up to the total that no invocation holds, in call order (a waiting
    call need not be the last of its turn). Data that does not add up (a response read back
    from edited JSON) numbers them after the invocations, as a new turn's calls.
    """
    total = len(invocations) + len(waiting)
    taken = {i.seq for i in invocations}
    free = [seq for seq in range(1, total + 1) if seq not in taken]
    if len(free) != len(waiting):
        free = list(range(len(invocations) + 1, total + 1))
    return dict(zip(waiting, free, strict=True))
