"""Approval at the edges, over real HTTP: a paused turn with a call the token limit cut off,
decisions on calls whose tool would not have asked (another agent, a dry run), and decision
values checked for every waiting call."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from runtime_support import (
    APIS,
    PARALLEL_APIS,
    ModelFactory,
    script,
    sent_results,
    user_texts,
)
from test_approval import GRAM, Mail

from gramagent._messages import (
    Conversation,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    new_assistant_message,
)
from gramagent._runtime.approval import ApprovalRequest, Decision, Refused, decide_once_each
from gramagent._runtime.events import CaptureSink
from gramagent._runtime.limits import RunLimits
from gramagent._runtime.loop import resume_agent, run_agent
from gramagent._runtime.results import AgentResponse
from gramagent._runtime.sessions import SessionStore
from gramagent._spec.gram.text import load_gram
from gramagent.errors import LimitExceeded, ValidationError
from gramagent.testing import ScriptedServer, call, calls, http_response, reply


def _cut_reply(*calls: tuple[str, str, str]) -> dict[str, Any]:
    """A Chat Completions reply stopped by the token limit, with these (id, tool, arguments)
    calls (the last one's arguments cut short)."""
    message = {"role": "assistant", "content": None, "tool_calls": [
        {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
        for i, n, a in calls]}
    return {"id": "chatcmpl-cut", "object": "chat.completion", "created": 0,
            "model": "scripted",
            "choices": [{"index": 0, "message": message, "finish_reason": "length"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}}


async def test_a_turn_with_a_cut_off_call_pauses_so_that_it_can_be_resumed(
        server: ScriptedServer, model_for: ModelFactory) -> None:
    """The note about a cut-off call would follow the turn's results as a user message: the
    conversation would no longer end with the waiting call, and could not be resumed."""
    mail, mailer = Mail(), load_gram(GRAM).agents[0]
    script(server, http_response(_cut_reply(("send", "sendMail", '{"to": "bob"}'),
                                            ("read", "readMail", '{"folder": "in'))),
           reply("Sent."))
    model = model_for(server, "chat")
    paused = await run_agent(mailer, "Mail Bob", library=mail.library, model=model)
    assert [r.call_id for r in paused.pending_approvals] == ["send"]
    assert [c.id for c in paused.context.unanswered_calls()] == ["send"]
    assert [i.error_type for i in paused.tool_invocations] == ["tool_payload_parse_error"]
    done = await resume_agent(mailer, paused, {"send": True}, library=mail.library,
                              model=model)
    assert done.content == "Sent." and mail.sent == ["bob"]
    body = server.requests[-1].body
    assert sent_results(body) == [("send", "sent to bob")]
    assert body["messages"][-1]["role"] == "tool"  # results follow their calls directly
    assert user_texts(body) == ["Mail Bob"]


def _waiting(calls: list[tuple[str, str]]) -> Conversation:
    """A conversation ending with these (tool, argument) calls, none answered."""
    keys = {"sendMail": "to", "readMail": "folder"}
    return Conversation([UserMessage(content="go"), new_assistant_message(
        content=None, tool_calls=tuple(
            ToolCall(id=f"c{i}", name=tool, arguments=f'{{"{keys[tool]}": "{value}"}}')
            for i, (tool, value) in enumerate(calls)))])


_CHOICES: dict[str, Decision] = {"yes": True, "no": False, "why": Refused("not now")}


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=st.lists(st.tuples(st.sampled_from(["sendMail", "readMail"]),
                               st.sampled_from(sorted(_CHOICES))), min_size=1, max_size=4),
       dry_run=st.booleans(), api=st.sampled_from(["chat", "responses"]))
async def test_a_refused_call_never_runs_whatever_its_tool(
        plan: list[tuple[str, str]], dry_run: bool, api: str,
        model_for: ModelFactory) -> None:
    """A decision given to resume_agent holds for its call even when the agent (or a dry
    run) would not have asked about that tool: a refused call is answered with the refusal,
    an approved one runs."""
    mail, mailer = Mail(), load_gram(GRAM).agents[0]
    context = _waiting([(tool, f"v{i}") for i, (tool, _) in enumerate(plan)])
    decisions = {f"c{i}": _CHOICES[choice] for i, (_, choice) in enumerate(plan)}
    with ScriptedServer() as server:
        script(server, reply("ok"))
        done = await resume_agent(mailer, context, decisions, model=model_for(server, api),
                                  library=None if dry_run else mail.library, dry_run=dry_run)
        results = dict(sent_results(server.requests[0].body))
    assert done.content == "ok"
    approved = [(tool, f"v{i}") for i, (tool, choice) in enumerate(plan) if choice == "yes"]
    if dry_run:
        assert mail.runs.total() == 0
    else:
        assert sorted(mail.sent) == sorted(v for tool, v in approved if tool == "sendMail")
        assert mail.runs["readMail"] == sum(1 for tool, _ in approved if tool == "readMail")
    for i, (_, choice) in enumerate(plan):
        assert ("did not approve" in (results[f"c{i}"] or "")) is (choice != "yes")
    answered = [m.call_id for m in done.context if isinstance(m, ToolResultMessage)]
    assert sorted(answered) == sorted(decisions)


async def test_decision_values_are_checked_for_every_waiting_call(
        server: ScriptedServer, model_for: ModelFactory) -> None:
    """A bad value is refused before any request even for a call the checks reject."""
    mail, mailer = Mail(), load_gram(GRAM).agents[0]
    bad = Conversation([UserMessage(content="go"), new_assistant_message(
        content=None, tool_calls=(ToolCall(id="u", name="nosuchtool", arguments="{}"),))])
    with pytest.raises(ValidationError, match="True, False or Refused"):
        await resume_agent(mailer, bad, {"u": "no"},  # type: ignore[dict-item]
                           library=mail.library, model=model_for(server, "chat"))
    assert server.requests == []


_Step = tuple[str, str | int, str]
"""A model turn of the script: (tool, argument value, the person's decision if asked); an
integer value is an invalid call (the tools take strings), nobody is asked about it."""


async def _with_callback(turns: list[list[_Step]], limits: RunLimits, api: str,
                         model_for: ModelFactory, events: CaptureSink) -> tuple[Any, Mail]:
    """The run with an ``approve`` callback: it never pauses."""
    mail, mailer = Mail(), load_gram(GRAM).agents[0]
    answers = _answers(turns)
    with ScriptedServer() as server:
        script(server, *_turns(turns), reply("ok"))
        try:
            return await run_agent(mailer, "go", library=mail.library, limits=limits,
                                   model=model_for(server, api), events=events,
                                   approve=lambda request: next(answers)), mail
        except LimitExceeded as exc:
            return exc, mail


async def _paused_and_resumed(turns: list[list[_Step]], limits: RunLimits, api: str,
                              model_for: ModelFactory, events: CaptureSink,
                              via: str = "response") -> tuple[Any, Mail]:
    """The same run without a callback: it pauses before each call and is resumed with the
    same decision, from the paused response (``via``: as it is, read back from its JSON, or
    kept by a stored session and read by another store object, as another process would)."""
    mail, mailer = Mail(), load_gram(GRAM).agents[0]
    answers = _answers(turns)
    with ScriptedServer() as server, tempfile.TemporaryDirectory() as folder:
        script(server, *_turns(turns), reply("ok"))
        options: dict[str, Any] = {"library": mail.library, "limits": limits,
                                   "model": model_for(server, api), "events": events}
        store = Path(folder) / "sessions.sqlite3"
        try:
            if via == "session":
                response = await SessionStore(store).open("s").run(mailer, "go", **options)
            else:
                response = await run_agent(mailer, "go", **options)
            while response.paused:
                decisions = _decisions(response.pending_approvals, answers)
                if via == "session":
                    response = await SessionStore(store).open("s").resume(
                        mailer, decisions, **options)
                    continue
                if via == "json":
                    response = AgentResponse.from_dict(json.loads(json.dumps(
                        response.to_dict())))
                response = await resume_agent(mailer, response, decisions, **options)
            return response, mail
        except LimitExceeded as exc:
            return exc, mail


def _answers(turns: list[list[_Step]]) -> Iterator[Decision]:
    """The person's decisions, in the order the calls are asked about: one per distinct call
    of a turn (identical calls of a turn are asked about once)."""
    return iter(_CHOICES[choice] for turn in turns
                for tool, value, choice in _first_of_each(turn)
                if tool == "sendMail" and isinstance(value, str))


def _first_of_each(turn: list[_Step]) -> list[_Step]:
    """The steps of a turn without the later copies of an identical call."""
    seen: dict[tuple[str, str | int], _Step] = {}
    for tool, value, choice in turn:
        seen.setdefault((tool, value), (tool, value, choice))
    return list(seen.values())


def _decisions(pending: Sequence[ApprovalRequest], answers: Iterator[Decision]
               ) -> dict[str, Decision]:
    """A person's decisions on the calls a run paused on: one answer per distinct call, for
    each of its copies (as the CLI decides them)."""
    return decide_once_each(pending, lambda _request: next(answers))


def _turns(turns: list[list[_Step]]) -> list[Any]:
    keys = {"sendMail": "to", "readMail": "folder"}
    return [calls(*(call(tool, {keys[tool]: value}) for tool, value, _ in turn))
            for turn in turns]


def _outcome(result: Any) -> Any:
    if isinstance(result, LimitExceeded):
        return ("limit", result.limit, result.observed)
    return (result.content, [(i.name, i.error_type, i.seq) for i in result.tool_invocations],
            result.usage.requests, result.usage.input_tokens, result.usage.output_tokens)


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(st.sampled_from(["sendMail", "readMail"]),
                                st.sampled_from(["a", "b", "c", 7]),
                                st.sampled_from(sorted(_CHOICES))), min_size=1, max_size=5),
       max_iterations=st.integers(1, 6), max_tool_calls=st.integers(1, 6),
       max_invalid=st.integers(1, 3), repeat_guard=st.booleans(), api=st.sampled_from(APIS),
       via=st.sampled_from(["response", "json", "session"]))
@example(steps=[("readMail", "a", "yes"), ("sendMail", "b", "yes"), ("readMail", "a", "yes")],
         max_iterations=6, max_tool_calls=6, max_invalid=3, repeat_guard=True, api="chat",
         via="response")
@example(steps=[("sendMail", "a", "yes"), ("sendMail", "b", "yes"), ("sendMail", "c", "yes")],
         max_iterations=2, max_tool_calls=6, max_invalid=3, repeat_guard=True, api="chat",
         via="session")
async def test_a_pause_changes_nothing_but_when_the_person_is_asked(
        steps: list[_Step], max_iterations: int, max_tool_calls: int, max_invalid: int,
        repeat_guard: bool, api: str, via: str, model_for: ModelFactory) -> None:
    """Resumed from its paused response, a run is the same run: the same limits stop it at
    the same point (max_iterations, max_tool_calls and the retry budget count the calls
    before each pause), and its answer has every call and the usage of the whole run, as
    the run asking an ``approve`` callback has. The repeat guard knows the calls before
    the pause: a repeat is answered from them, without asking again. So it is when the
    paused response is read back from JSON, or from a stored session by another store."""
    limits = RunLimits(max_iterations=max_iterations, max_tool_calls=max_tool_calls,
                       max_invalid_calls_per_tool=max_invalid, repeat_guard=repeat_guard)
    await _same_outcome([[step] for step in steps], limits, api, via, model_for)


async def _same_outcome(turns: list[list[_Step]], limits: RunLimits, api: str, via: str,
                        model_for: ModelFactory) -> None:
    """The run paused and resumed (``via``) ends as the run asking a callback does: the same
    answer, tool calls (in order, with their seq), usage, tools run and events."""
    asked_events, paused_events = CaptureSink(), CaptureSink()
    asked, asked_mail = await _with_callback(turns, limits, api, model_for, asked_events)
    paused, paused_mail = await _paused_and_resumed(turns, limits, api, model_for,
                                                    paused_events, via)
    assert _outcome(paused) == _outcome(asked)
    assert paused_mail.runs == asked_mail.runs and paused_mail.sent == asked_mail.sent
    assert _event_outcome(paused_events) == _event_outcome(asked_events)


_STEP = st.tuples(st.sampled_from(["sendMail", "readMail"]), st.sampled_from(["a", "b", 7]),
                  st.sampled_from(sorted(_CHOICES)))


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns=st.lists(st.lists(_STEP, min_size=1, max_size=3), min_size=1, max_size=3),
       max_tool_calls=st.integers(2, 9), repeat_guard=st.booleans(),
       api=st.sampled_from(PARALLEL_APIS), via=st.sampled_from(["response", "json", "session"]))
@example(turns=[[("sendMail", "a", "yes"), ("readMail", "b", "yes")]], max_tool_calls=9,
         repeat_guard=True, api="chat", via="response")
# A retry budget used up in the turn that pauses: the waiting call is decided and run first,
# as with a callback, whether the budget is its own tool's or another's.
@example(turns=[[("sendMail", 7, "no"), ("sendMail", 7, "no")],
                [("sendMail", "a", "yes"), ("sendMail", 7, "no")]], max_tool_calls=4,
         repeat_guard=False, api="chat", via="response")
@example(turns=[[("readMail", 7, "yes"), ("readMail", 7, "yes")],
                [("sendMail", "a", "yes"), ("readMail", 7, "yes")]], max_tool_calls=9,
         repeat_guard=False, api="chat", via="json")
async def test_a_pause_among_the_calls_of_a_turn_changes_nothing(
        turns: list[list[_Step]], max_tool_calls: int, repeat_guard: bool, api: str, via: str,
        model_for: ModelFactory) -> None:
    """With several calls in a turn, a waiting call anywhere among them (not only last)
    keeps the seq it was checked with, and the run's tool calls stay in call order: the
    response and the events are those of the run that asked a callback."""
    limits = RunLimits(max_iterations=6, max_tool_calls=max_tool_calls,
                       max_invalid_calls_per_tool=3, repeat_guard=repeat_guard)
    await _same_outcome(turns, limits, api, via, model_for)


def _event_outcome(sink: CaptureSink) -> list[tuple[Any, ...]]:
    """The events of one run (one request id), each call planned once and then given one
    result, whatever pauses the run had: what they say of each call, in seq order."""
    events = sink.events
    assert len({e.request_id for e in events}) <= 1
    by_seq: dict[int, list[str]] = {}
    for e in events:
        by_seq.setdefault(e.seq, []).append(e.kind)
    assert all(kinds == ["tool_call_planned", "tool_call_result"]
               for kinds in by_seq.values()), by_seq
    return sorted((e.seq, e.kind, e.tool, getattr(e, "error_type", None)) for e in events)


_ODD = st.one_of(st.none(), st.integers(), st.text(max_size=5), st.floats(allow_nan=False),
                 st.builds(Refused, st.one_of(st.none(), st.integers(), st.lists(st.text()))),
                 st.lists(st.booleans(), max_size=2))


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(odd=_ODD)
async def test_odd_decisions_are_validation_errors(odd: Any, model_for: ModelFactory) -> None:
    """Anything but True, False or Refused(str) is a ValidationError: before any request
    when given to resume_agent; from the run when an approve callback returns it (None
    excepted: the call then waits, the run pauses)."""
    mail, mailer = Mail(), load_gram(GRAM).agents[0]
    with ScriptedServer() as server:
        script(server, call("sendMail", {"to": "bob"}), reply("ok"))
        model = model_for(server, "chat")
        with pytest.raises(ValidationError, match="True, False or Refused|string reason"):
            await resume_agent(mailer, _waiting([("sendMail", "bob")]), {"c0": odd},
                               library=mail.library, model=model)
        assert server.requests == []
        if odd is None:
            paused = await run_agent(mailer, "go", library=mail.library, model=model,
                                     approve=lambda request: odd)
            assert paused.paused and [r.tool for r in paused.pending_approvals] == [
                "sendMail"]
        else:
            with pytest.raises(ValidationError):
                await run_agent(mailer, "go", library=mail.library, model=model,
                                approve=lambda request: odd)
    assert mail.runs.total() == 0


_PENDING_EDITS = {
    "dropped": lambda ids: ids[1:],
    "foreign": lambda ids: [*ids[:-1], "not-a-call"],
    "doubled": lambda ids: [*ids, ids[0]],
    "reversed": lambda ids: ids[::-1],
    "none": lambda ids: [],
}


@settings(max_examples=10, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edit=st.sampled_from(sorted(_PENDING_EDITS)), via_json=st.booleans())
async def test_a_response_whose_pending_calls_disagree_with_its_conversation_is_refused(
        edit: str, via_json: bool, model_for: ModelFactory) -> None:
    """A paused response whose pending_approvals are not the calls its conversation waits for
    (in call order), as edited JSON may say, is refused with a ValidationError before any
    request or tool runs: resumed, it would give its calls the wrong seq and announce them
    again."""
    mail, mailer = Mail(), load_gram(GRAM).agents[0]
    with ScriptedServer() as server:
        script(server, calls(call("sendMail", {"to": "a"}), call("readMail", {"folder": "x"}),
                             call("sendMail", {"to": "b"})), reply("ok"))
        options: dict[str, Any] = {"library": mail.library, "model": model_for(server, "chat")}
        paused = await run_agent(mailer, "go", **options)
        ids = [r.call_id for r in paused.pending_approvals]
        assert len(ids) == 2 and mail.runs["readMail"] == 1
        data = paused.to_dict()
        by_id = {p["call_id"]: p for p in data["pending_approvals"]}
        data["pending_approvals"] = [by_id.get(i, {**data["pending_approvals"][0], "call_id": i})
                                     for i in _PENDING_EDITS[edit](ids)]
        edited = AgentResponse.from_dict(json.loads(json.dumps(data)) if via_json else data)
        asked = len(server.requests)
        with pytest.raises(ValidationError, match="pending_approvals"):
            await resume_agent(mailer, edited, dict.fromkeys(ids, True), **options)
        assert len(server.requests) == asked and mail.runs["sendMail"] == 0
