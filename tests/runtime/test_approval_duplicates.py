"""Identical calls of one turn that need approval, over real HTTP: the person is asked once
per distinct call, and a "no" holds for every copy (answering no, yes, yes to three copies
of one mail used to send it anyway)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from runtime_support import PARALLEL_APIS, ModelFactory, script, sent_results
from test_approval import GRAM, Mail

from gramagent._runtime.approval import ApprovalRequest, Decision, Refused, decide_once_each
from gramagent._runtime.limits import RunLimits
from gramagent._runtime.loop import resume_agent, run_agent
from gramagent._spec.gram.text import load_gram
from gramagent.testing import ScriptedServer, call, calls, reply

_DECISIONS = st.sampled_from([True, False, Refused("not now")])


def _turn(copies: int, others: list[str]) -> Any:
    """``copies`` identical calls sending mail to ``a``, with calls mailing each of ``others``
    after the first copy."""
    mails = [call("sendMail", {"to": "a"}, id="c0")]
    mails += [call("sendMail", {"to": to}, id=f"o{i}") for i, to in enumerate(others)]
    mails += [call("sendMail", {"to": "a"}, id=f"c{i}") for i in range(1, copies)]
    return calls(*mails)


def _copies(response: Any) -> list[tuple[str, str | None]]:
    """Per copy of the call mailing ``a``: its id and error type."""
    return [(i.call_id, i.error_type) for i in response.tool_invocations
            if i.arguments == {"to": "a"}]


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(copies=st.integers(1, 4), answers=st.lists(_DECISIONS, min_size=3, max_size=3),
       others=st.lists(st.sampled_from(["b", "c"]), max_size=2, unique=True),
       repeat_guard=st.booleans(), api=st.sampled_from(PARALLEL_APIS))
async def test_identical_calls_are_asked_about_once_and_a_no_holds_for_all(
        copies: int, answers: list[Decision], others: list[str], repeat_guard: bool, api: str,
        model_for: ModelFactory) -> None:
    """An approve callback is asked once per distinct call of the turn, in call order; its
    answer decides every copy of that call: refused, none runs and each gets the refusal;
    approved, the mail goes out (once with the repeat guard, once per copy without it)."""
    mail, mailer = Mail(), load_gram(GRAM).agents[0]
    asked: list[ApprovalRequest] = []

    def approve(request: ApprovalRequest) -> Decision:
        asked.append(request)
        return answers[len(asked) - 1]

    with ScriptedServer() as server:
        script(server, _turn(copies, others), reply("ok"))
        response = await run_agent(mailer, "go", library=mail.library, approve=approve,
                                   model=model_for(server, api),
                                   limits=RunLimits(repeat_guard=repeat_guard))
        sent = dict(sent_results(server.requests[1].body))
    assert response.content == "ok"
    assert [r.arguments["to"] for r in asked] == ["a", *others]
    first = answers[0]
    ids = ["c0", *(f"c{i}" for i in range(1, copies))]
    if first is True:
        assert mail.sent.count("a") == (1 if repeat_guard else copies)
        assert all(error in (None, "repeated_call") for _, error in _copies(response))
    else:
        assert "a" not in mail.sent
        assert _copies(response) == [(i, "approval_refused") for i in ids]
        assert all("did not approve" in (sent[i] or "") for i in ids)
    assert sorted(to for to in mail.sent if to != "a") == sorted(
        to for to, answer in zip(others, answers[1:], strict=False) if answer is True)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(decisions=st.lists(_DECISIONS, min_size=1, max_size=4), repeat_guard=st.booleans(),
       api=st.sampled_from(PARALLEL_APIS))
async def test_a_refusal_of_any_copy_given_on_resume_refuses_them_all(
        decisions: list[Decision], repeat_guard: bool, api: str,
        model_for: ModelFactory) -> None:
    """A run without a callback pauses on every copy (each needs its decision to resume);
    resumed with a refusal for any one of them, none runs and each gets the refusal; with
    every copy approved, the mail goes out."""
    mail, mailer = Mail(), load_gram(GRAM).agents[0]
    copies = len(decisions)
    with ScriptedServer() as server:
        script(server, _turn(copies, []), reply("ok"))
        model = model_for(server, api)
        limits = RunLimits(repeat_guard=repeat_guard)
        paused = await run_agent(mailer, "go", library=mail.library, model=model,
                                 limits=limits)
        ids = [r.call_id for r in paused.pending_approvals]
        assert ids == ["c0", *(f"c{i}" for i in range(1, copies))]
        done = await resume_agent(mailer, paused, dict(zip(ids, decisions, strict=True)),
                                  library=mail.library, model=model, limits=limits)
        sent = dict(sent_results(server.requests[1].body))
    assert done.content == "ok"
    if all(d is True for d in decisions):
        assert mail.sent.count("a") == (1 if repeat_guard else copies)
    else:
        assert mail.sent == []
        assert _copies(done) == [(i, "approval_refused") for i in ids]
        assert all("did not approve" in (sent[i] or "") for i in ids)


@settings(max_examples=50, deadline=None)
@given(targets=st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=6),
       answers=st.lists(_DECISIONS, min_size=3, max_size=3))
def test_decide_once_each_asks_once_per_distinct_call(targets: list[str],
                                                      answers: list[Decision]) -> None:
    """What the CLI decides a paused turn with: one question per distinct call, in call
    order, its answer given to every copy."""
    pending = [ApprovalRequest(call_id=f"c{i}", tool="sendMail", arguments={"to": to})
               for i, to in enumerate(targets)]
    asked: list[str] = []

    def decide(request: ApprovalRequest) -> Decision:
        asked.append(str(request.arguments["to"]))
        return answers[len(asked) - 1]

    decisions = decide_once_each(pending, decide)
    assert asked == list(dict.fromkeys(targets))
    assert decisions == {f"c{i}": answers[asked.index(to)] for i, to in enumerate(targets)}
