"""Human approval of tool calls, over real HTTP in every wire format: the run pauses before a
call that needs approval, resumes with decisions (also from a stored session), asks an
``approve`` callback when there is one, and tells the model of a refusal."""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from runtime_support import (
    LOOP_APIS,
    LOOP_PARALLEL_APIS,
    PARALLEL_APIS,
    ModelFactory,
    script,
    sent_results,
)

from gramagent._messages import AssistantMessage, Conversation, ToolResultMessage
from gramagent._runtime.approval import ApprovalRequest, Decision, Refused
from gramagent._runtime.events import CaptureSink
from gramagent._runtime.library import ToolLibrary
from gramagent._runtime.limits import RunLimits
from gramagent._runtime.loop import resume_agent, run_agent
from gramagent._runtime.sessions import SessionStore
from gramagent._runtime.stream import FinalResponse, run_agent_stream
from gramagent._spec.gram.text import load_gram
from gramagent._spec.model import Agent
from gramagent.errors import ApprovalError, ValidationError
from gramagent.testing import ScriptedServer, call, calls, reply

GRAM = """
[mailer:Agent {instruction: "Help with mail.", model: "openai/scripted"} |
  [sendMail:Tool {description: "Sends an e-mail", requiresApproval: true} |
    (to::String)==>(::String)
  ],
  [readMail:Tool {description: "Reads the inbox"} |
    (folder::String {default: "inbox"})==>(::String)
  ]
]
"""


class Mail:
    """The mail tools, counting what actually ran."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.runs: Counter[str] = Counter()
        self.library = ToolLibrary()

        @self.library.register
        def sendMail(to: str) -> str:
            """Sends an e-mail"""
            self.runs["sendMail"] += 1
            self.sent.append(to)
            return f"sent to {to}"

        @self.library.register
        def readMail(folder: str = "inbox") -> str:
            """Reads the inbox"""
            self.runs["readMail"] += 1
            return f"3 new in {folder}"


@pytest.fixture
def mail() -> Mail:
    return Mail()


@pytest.fixture
def mailer() -> Agent:
    return load_gram(GRAM).agents[0]


def _refusals(body: dict[str, Any]) -> list[str]:
    return [content for _, content in sent_results(body) if "did not approve" in content]


@pytest.mark.parametrize("api", LOOP_APIS)
async def test_pauses_then_resumes_approved(api: str, mail: Mail, mailer: Agent,
                                            server: ScriptedServer,
                                            model_for: ModelFactory) -> None:
    """Without an approve callback the run pauses before the call; approved, it runs and the
    model gets its result."""
    script(server, call("sendMail", {"to": "bob@example.com"}), reply("Sent it."))
    model = model_for(server, api)
    paused = await run_agent(mailer, "Mail Bob", library=mail.library, model=model)
    assert paused.paused and paused.finish_reason == "approval_required"
    assert paused.content == "" and mail.runs["sendMail"] == 0
    (request,) = paused.pending_approvals
    assert request.tool == "sendMail" and request.arguments == {"to": "bob@example.com"}
    assert len(server.requests) == 1
    assert paused.to_dict()["pending_approvals"] == [request.to_dict()]
    last = paused.context[-1]
    assert isinstance(last, AssistantMessage) and last.tool_calls[0].id == request.call_id

    done = await resume_agent(mailer, paused, {request.call_id: True}, library=mail.library,
                              model=model)
    assert done.content == "Sent it." and not done.paused
    assert mail.sent == ["bob@example.com"]
    (invocation,) = done.tool_invocations
    assert invocation.ok and invocation.call_id == request.call_id
    assert [content for _, content in sent_results(server.requests[1].body)] == [
        "sent to bob@example.com"]
    assert [m.kind for m in done.context] == ["user", "assistant", "tool_result", "assistant"]


@pytest.mark.parametrize("api", LOOP_APIS)
@pytest.mark.parametrize("decision", [False, Refused("not to Bob, he left")])
async def test_refusal_is_a_result_the_model_sees(api: str, decision: bool | Refused,
                                                  mail: Mail, mailer: Agent,
                                                  server: ScriptedServer,
                                                  model_for: ModelFactory) -> None:
    script(server, call("sendMail", {"to": "bob@example.com"}), reply("I did not send it."))
    model = model_for(server, api)
    paused = await run_agent(mailer, "Mail Bob", library=mail.library, model=model)
    sink = CaptureSink()
    done = await resume_agent(mailer, paused.context,
                              {paused.pending_approvals[0].call_id: decision},
                              library=mail.library, model=model, events=sink)
    assert done.content == "I did not send it." and mail.runs["sendMail"] == 0
    (invocation,) = done.tool_invocations
    assert invocation.error_type == "approval_refused"
    (refusal,) = _refusals(server.requests[1].body)
    assert "sendMail" in refusal
    if isinstance(decision, Refused):
        assert decision.reason in refusal
    result = [e for e in sink.events if e.kind == "tool_call_result"]
    assert [(e.status, e.error_type) for e in result] == [("error", "approval_refused")]


@pytest.mark.parametrize("api", LOOP_APIS)
@pytest.mark.parametrize("answer", [True, False])
@pytest.mark.parametrize("flavour", ["sync", "async"])
async def test_approve_callback_is_asked(api: str, answer: bool, flavour: str, mail: Mail,
                                         mailer: Agent, server: ScriptedServer,
                                         model_for: ModelFactory) -> None:
    """With a callback the run does not pause: it asks, then runs or refuses the call."""
    asked: list[ApprovalRequest] = []

    def decide(request: ApprovalRequest) -> bool:
        asked.append(request)
        return answer

    async def decide_async(request: ApprovalRequest) -> bool:
        await asyncio.sleep(0)
        return decide(request)

    script(server, call("sendMail", {"to": "eve@example.com"}), reply("Done."))
    response = await run_agent(mailer, "Mail Eve", library=mail.library,
                               model=model_for(server, api),
                               approve=decide if flavour == "sync" else decide_async)
    assert response.content == "Done." and not response.paused
    assert [(r.tool, r.arguments) for r in asked] == [("sendMail", {"to": "eve@example.com"})]
    assert mail.sent == (["eve@example.com"] if answer else [])
    assert response.tool_invocations[0].ok is answer


@pytest.mark.parametrize("api", LOOP_PARALLEL_APIS)
@pytest.mark.parametrize("flavour", ["sync", "async"])
async def test_a_raising_callback_keeps_the_conversation(api: str, flavour: str, mail: Mail,
                                                        mailer: Agent, server: ScriptedServer,
                                                        model_for: ModelFactory) -> None:
    """A callback that raises stops the run with an ApprovalError carrying the conversation
    (the turn's calls not run, the callback's exception as cause), which resumes."""

    def broken(request: ApprovalRequest) -> bool:
        raise ConnectionError("approval service down")

    async def broken_async(request: ApprovalRequest) -> bool:
        await asyncio.sleep(0)
        return broken(request)

    script(server, calls(call("readMail", {}), call("sendMail", {"to": "eve@example.com"})),
           reply("Done."))
    model = model_for(server, api)
    with pytest.raises(ApprovalError, match="ConnectionError on the call to sendMail") as info:
        await run_agent(mailer, "Mail Eve", library=mail.library, model=model,
                        approve=broken if flavour == "sync" else broken_async)
    error = info.value
    assert isinstance(error.__cause__, ConnectionError)
    assert error.usage is not None and error.usage.requests == 1
    assert mail.runs == Counter()  # nothing of the turn ran
    waiting = error.context.unanswered_calls()
    assert [c.name for c in waiting] == ["readMail", "sendMail"]
    done = await resume_agent(mailer, error.context, {c.id: True for c in waiting},
                              library=mail.library, model=model)
    assert done.content == "Done." and mail.sent == ["eve@example.com"]
    assert mail.runs == Counter(readMail=1, sendMail=1)


@pytest.mark.parametrize("api", LOOP_APIS)
async def test_a_refused_call_asked_again_is_not_asked_again(
        api: str, mail: Mail, mailer: Agent, server: ScriptedServer,
        model_for: ModelFactory) -> None:
    """A model that repeats a refused call gets the refusal again without the person being
    asked, and is then asked for its answer (seen with the 0.5B model)."""
    asked: list[ApprovalRequest] = []

    def refuse(request: ApprovalRequest) -> Refused:
        asked.append(request)
        return Refused("Bob is away")

    bob = {"to": "bob@example.com"}
    script(server, call("sendMail", bob), call("sendMail", bob), reply("I did not send it."))
    response = await run_agent(mailer, "Mail Bob", library=mail.library,
                               model=model_for(server, api), approve=refuse)
    assert response.content == "I did not send it." and len(asked) == 1
    assert [i.error_type for i in response.tool_invocations] == ["approval_refused",
                                                                 "repeated_call"]
    assert response.stopped_by == "repeated_call" and mail.runs["sendMail"] == 0
    last = server.requests[-1].body
    assert len(_refusals(last)) == 2 and all("Bob is away" in r for r in _refusals(last))


@pytest.mark.parametrize("api", LOOP_PARALLEL_APIS)
async def test_other_calls_of_the_turn_run_while_one_waits(
        api: str, mail: Mail, mailer: Agent, server: ScriptedServer,
        model_for: ModelFactory) -> None:
    script(server, calls(call("readMail", {}), call("sendMail", {"to": "bob@example.com"})),
           reply("Read and sent."))
    model = model_for(server, api)
    paused = await run_agent(mailer, "Read my mail and mail Bob", library=mail.library,
                             model=model)
    assert mail.runs == Counter(readMail=1)
    assert [i.name for i in paused.tool_invocations] == ["readMail"]
    assert [r.tool for r in paused.pending_approvals] == ["sendMail"]
    assert [c.name for c in paused.context.unanswered_calls()] == ["sendMail"]
    done = await resume_agent(mailer, paused,
                              {paused.pending_approvals[0].call_id: True},
                              library=mail.library, model=model)
    assert done.content == "Read and sent." and mail.runs == Counter(readMail=1, sendMail=1)
    results = sent_results(server.requests[1].body)
    assert sorted(content for _, content in results) == ["3 new in inbox",
                                                         "sent to bob@example.com"]


async def test_resumes_from_a_stored_session(tmp_path: Path, mail: Mail, mailer: Agent,
                                             server: ScriptedServer,
                                             model_for: ModelFactory) -> None:
    """The paused conversation is stored; another store object (as another process would)
    finds the waiting call and resumes it."""
    script(server, call("sendMail", {"to": "bob@example.com"}), reply("Sent."))
    path = tmp_path / "sessions.sqlite3"
    model = model_for(server, "chat")
    paused = await SessionStore(path).open("work").run(mailer, "Mail Bob",
                                                       library=mail.library, model=model)
    assert paused.paused

    later = SessionStore(path).open("work")
    (waiting,) = later.pending_approvals
    assert waiting == paused.pending_approvals[0]
    with pytest.raises(ValidationError, match="waiting for approval"):
        await later.run(mailer, "And Carol?", library=mail.library, model=model)
    assert len(server.requests) == 1
    done = await later.resume(mailer, {waiting.call_id: True}, library=mail.library,
                              model=model)
    assert done.content == "Sent." and mail.sent == ["bob@example.com"]
    stored = SessionStore(path).load("work")
    assert stored is not None and [m.kind for m in stored] == [
        "user", "assistant", "tool_result", "assistant"]
    assert later.pending_approvals == ()


async def test_calls_decided_meanwhile_by_another_process(
        tmp_path: Path, mail: Mail, mailer: Agent, server: ScriptedServer,
        model_for: ModelFactory) -> None:
    """Two processes read the same waiting call; the first to decide goes on, the second is
    told its calls were decided meanwhile, and nothing runs twice."""
    script(server, call("sendMail", {"to": "bob@example.com"}), reply("Sent."))
    path = tmp_path / "sessions.sqlite3"
    model = model_for(server, "chat")
    await SessionStore(path).open("work").run(mailer, "Mail Bob", library=mail.library,
                                              model=model)
    first, second = SessionStore(path).open("work"), SessionStore(path).open("work")
    (waiting,) = first.pending_approvals
    assert second.pending_approvals == (waiting,)  # both read it before either decides
    await first.resume(mailer, {waiting.call_id: True}, library=mail.library, model=model)
    with pytest.raises(ValidationError, match="another process decided"):
        await second.resume(mailer, {waiting.call_id: False}, library=mail.library,
                            model=model)
    assert mail.sent == ["bob@example.com"] and len(server.requests) == 2
    stored = SessionStore(path).load("work")
    assert stored is not None and [m.kind for m in stored] == [
        "user", "assistant", "tool_result", "assistant"]


async def test_a_call_decided_on_a_session_replaced_meanwhile_is_not_run(
        tmp_path: Path, mail: Mail, mailer: Agent, model_for: ModelFactory) -> None:
    """A person decides on the call they were shown. If the session was deleted and made
    again meanwhile, its waiting call may have the same id (servers number their calls) and
    other arguments: the decision is refused as one on calls decided meanwhile, nothing runs;
    read again, the new call can be decided on."""
    path = tmp_path / "sessions.sqlite3"
    reader = SessionStore(path).open("work")
    with ScriptedServer() as first:
        script(first, call("sendMail", {"to": "bob@example.com"}))
        await SessionStore(path).open("work").run(mailer, "Mail Bob", library=mail.library,
                                                  model=model_for(first, "chat"))
    (shown,) = reader.pending_approvals
    assert SessionStore(path).delete("work")
    with ScriptedServer() as second:
        script(second, call("sendMail", {"to": "mallory@example.com"}), reply("Sent."))
        model = model_for(second, "chat")
        await SessionStore(path).open("work").run(mailer, "Mail Mallory",
                                                  library=mail.library, model=model)
        (now,) = SessionStore(path).open("work").pending_approvals
        assert now.call_id == shown.call_id and now.arguments != shown.arguments
        with pytest.raises(ValidationError, match="another process decided"):
            await reader.resume(mailer, {shown.call_id: True}, library=mail.library,
                                model=model)
        assert mail.sent == [] and len(second.requests) == 1
        (again,) = reader.pending_approvals
        assert again == now
        done = await reader.resume(mailer, {again.call_id: True}, library=mail.library,
                                   model=model)
    assert done.content == "Sent." and mail.sent == ["mallory@example.com"]


async def test_paused_context_round_trips_through_json(mail: Mail, mailer: Agent,
                                                       server: ScriptedServer,
                                                       model_for: ModelFactory) -> None:
    script(server, call("sendMail", {"to": "bob@example.com"}), reply("Sent."))
    model = model_for(server, "responses")
    paused = await run_agent(mailer, "Mail Bob", library=mail.library, model=model)
    restored = Conversation.from_list(paused.to_dict()["context"])
    done = await resume_agent(mailer, restored, {paused.pending_approvals[0].call_id: True},
                              library=mail.library, model=model)
    assert done.content == "Sent." and mail.runs["sendMail"] == 1


async def test_bad_decisions_are_refused_before_any_request(
        mail: Mail, mailer: Agent, server: ScriptedServer, model_for: ModelFactory) -> None:
    script(server, call("sendMail", {"to": "bob@example.com"}))
    model = model_for(server, "chat")
    paused = await run_agent(mailer, "Mail Bob", library=mail.library, model=model)
    call_id = paused.pending_approvals[0].call_id
    with pytest.raises(ValidationError, match="no decision for sendMail"):
        await resume_agent(mailer, paused, {}, library=mail.library, model=model)
    with pytest.raises(ValidationError, match="no waiting call has the id 'nope'"):
        await resume_agent(mailer, paused, {call_id: True, "nope": True},
                           library=mail.library, model=model)
    with pytest.raises(ValidationError, match="True, False or Refused"):
        await resume_agent(mailer, paused, {call_id: "yes"},  # type: ignore[dict-item]
                           library=mail.library, model=model)
    with pytest.raises(ValidationError, match="nothing to resume"):
        await resume_agent(mailer, Conversation(), {}, library=mail.library, model=model)
    with pytest.raises(ValidationError, match="waiting for approval"):
        await run_agent(mailer, "next", context=paused.context, library=mail.library,
                        model=model)
    assert len(server.requests) == 1 and mail.runs["sendMail"] == 0


async def test_decorator_flag_requires_approval_too(server: ScriptedServer,
                                                    model_for: ModelFactory) -> None:
    """``@tool(requires_approval=True)`` asks for approval though the spec does not."""
    library = ToolLibrary()

    @library.register(requires_approval=True)
    def wipe(path: str) -> str:
        """Deletes a file."""
        return "gone"

    spec = dataclasses.replace(wipe.spec(), requires_approval=False)
    agent = Agent(name="a", model="openai/scripted", instruction="x", tools=(spec,))
    assert not agent.tools[0].requires_approval
    script(server, call("wipe", {"path": "/tmp/x"}))
    paused = await run_agent(agent, "wipe it", library=library,
                             model=model_for(server, "chat"))
    assert [r.tool for r in paused.pending_approvals] == ["wipe"]


async def test_invalid_calls_and_dry_runs_ask_nobody(mail: Mail, mailer: Agent,
                                                     server: ScriptedServer,
                                                     model_for: ModelFactory) -> None:
    asked: list[ApprovalRequest] = []

    def ask(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    script(server, call("sendMail", {"to": 42}), reply("Bad call."),
           call("sendMail", {"to": "bob@example.com"}), reply("Dry."))
    model = model_for(server, "chat")
    bad = await run_agent(mailer, "Mail 42", library=mail.library, model=model,
                          approve=ask)
    assert bad.tool_invocations[0].error_type == "invalid_arguments"
    dry = await run_agent(mailer, "Mail Bob", model=model, dry_run=True, approve=ask)
    assert dry.content == "Dry." and dry.tool_invocations[0].ok
    assert asked == [] and mail.runs["sendMail"] == 0


@pytest.mark.slow
async def test_waiting_for_a_person_is_not_wall_time(mail: Mail, mailer: Agent,
                                                     server: ScriptedServer,
                                                     model_for: ModelFactory) -> None:
    """A person who takes longer than the run's wall time to answer does not stop the run."""

    async def slow_person(request: ApprovalRequest) -> bool:
        await asyncio.sleep(2.5)
        return True

    script(server, call("sendMail", {"to": "bob@example.com"}), reply("Sent."))
    response = await run_agent(mailer, "Mail Bob", library=mail.library,
                               model=model_for(server, "chat"),
                               limits=RunLimits(wall_time=2.0), approve=slow_person)
    assert response.content == "Sent." and mail.sent == ["bob@example.com"]


async def test_stream_ends_with_the_paused_response(mail: Mail, mailer: Agent,
                                                    server: ScriptedServer,
                                                    model_for: ModelFactory) -> None:
    script(server, call("sendMail", {"to": "bob@example.com"}))
    finals = [event async for event in run_agent_stream(
        mailer, "Mail Bob", library=mail.library, model=model_for(server, "chat"))
        if isinstance(event, FinalResponse)]
    (final,) = finals
    assert final.response.paused and mail.runs["sendMail"] == 0


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=st.lists(st.tuples(st.booleans(), st.sampled_from(["yes", "no", "reason"])),
                     min_size=1, max_size=5),
       api=st.sampled_from(PARALLEL_APIS))
async def test_every_call_is_answered_once_whatever_the_decisions(
        plan: list[tuple[bool, str]], api: str, model_for: ModelFactory) -> None:
    """A turn of calls, some needing approval, decided at random: after the resume every call
    id has exactly one result, only approved and unguarded calls ran, and each refusal reached
    the model."""
    mail = Mail()
    mailer = load_gram(GRAM).agents[0]
    turn = [call("sendMail", {"to": f"p{i}@example.com"}) if needs
            else call("readMail", {"folder": f"f{i}"}) for i, (needs, _) in enumerate(plan)]
    with ScriptedServer() as server:
        script(server, calls(*turn), reply("ok"))
        model = model_for(server, api)
        paused = await run_agent(mailer, "go", library=mail.library, model=model,
                                 limits=RunLimits(repeat_guard=False))
        needing = [i for i, (needs, _) in enumerate(plan) if needs]
        assert len(paused.pending_approvals) == len(needing)
        if not needing:
            assert paused.content == "ok"
            return
        choices: dict[str, Decision] = {"yes": True, "no": False, "reason": Refused("because")}
        decisions = {r.call_id: choices[plan[i][1]]
                     for r, i in zip(paused.pending_approvals, needing, strict=True)}
        done = await resume_agent(mailer, paused, decisions, library=mail.library,
                                  model=model)
    assert done.content == "ok"
    (assistant,) = [m for m in done.context if isinstance(m, AssistantMessage)
                    and m.tool_calls]
    answered = Counter(m.call_id for m in done.context if isinstance(m, ToolResultMessage))
    assert answered == Counter(c.id for c in assistant.tool_calls)
    approved = [f"p{i}@example.com" for i, (needs, choice) in enumerate(plan)
                if needs and choice == "yes"]
    assert sorted(mail.sent) == sorted(approved)
    refused = sum(1 for needs, choice in plan if needs and choice != "yes")
    assert len(_refusals(server.requests[-1].body)) == refused
