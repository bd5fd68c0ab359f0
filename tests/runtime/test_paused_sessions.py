"""A stored session keeps a paused turn whatever the run's earlier tools returned: the pause
(the response beside the conversation) holds Python values JSON writes with difficulty or
not at all, and neither the turn nor the run it continues is lost. Over real HTTP."""

from __future__ import annotations

import math
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from runtime_support import ModelFactory
from test_approval import GRAM, Mail

from gramagent._runtime.library import ToolLibrary
from gramagent._runtime.sessions import SessionStore
from gramagent._spec.gram.text import load_gram
from gramagent.testing import ScriptedServer, call, calls, reply


class _Opaque:
    """A value JSON has no form for."""

    def __str__(self) -> str:
        return "opaque"


_AWKWARD = [2**70, -(2**64), math.nan, math.inf, "\ud800", "a\udfff", _Opaque(), {1, 2}]
"""Values orjson does not write as they are (or at all)."""
_LEAVES = st.one_of(
    st.sampled_from(_AWKWARD),
    st.integers(min_value=-(2**80), max_value=2**80),  # beyond 64 bits too
    st.floats(),  # NaN and the infinities too
    st.text(alphabet=st.characters(codec=None), max_size=4),  # lone surrogates too
    st.booleans(), st.none(), st.builds(_Opaque))
_RESULTS = st.recursive(_LEAVES, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)),
    max_leaves=8)


@pytest.mark.slow
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(result=_RESULTS)
@example(result=2**70)
@example(result=["\ud800", math.nan, 2**70])
async def test_a_paused_turn_is_kept_whatever_a_tool_returned(
        result: Any, model_for: ModelFactory) -> None:
    """readMail returns ``result`` (its output text is the tool's affair); sendMail, in the
    same turn, waits. The turn is saved with its pause, and resuming it in another store
    object continues the same run: readMail is not run again and counts as its first call."""
    library, ran = ToolLibrary(), []

    @library.register
    def readMail(folder: str = "inbox") -> Any:
        """Reads the inbox"""
        ran.append(folder)
        return result

    @library.register
    def sendMail(to: str) -> str:
        """Sends an e-mail"""
        return f"sent to {to}"

    agent = load_gram(GRAM).agents[0]
    with ScriptedServer() as server, tempfile.TemporaryDirectory() as folder:
        server.add(calls(call("readMail", {"folder": "x"}), call("sendMail", {"to": "a"})),
                   reply("done"))
        path = Path(folder) / "sessions.sqlite3"
        options: dict[str, Any] = {"library": library, "model": model_for(server, "chat")}
        paused = await SessionStore(path).open("s").run(agent, "go", **options)
        assert paused.paused
        stored = SessionStore(path)
        assert len(stored.load("s") or ()) == len(paused.context)
        turn = stored.load_pause("s", stored.load("s") or ())  # type: ignore[arg-type]
        assert turn is not None and turn.run_id == paused.run_id
        resumed = await stored.open("s").resume(
            agent, {r.call_id: True for r in paused.pending_approvals}, **options)
    assert resumed.content == "done" and ran == ["x"]
    assert [(i.name, i.seq) for i in resumed.tool_invocations] == [("readMail", 1),
                                                                    ("sendMail", 2)]
    assert resumed.run_id == paused.run_id
    kept = resumed.tool_invocations[0].result
    if isinstance(result, float) and math.isnan(result):
        assert kept is None or (isinstance(kept, float) and math.isnan(kept))


_ROW_EDITS: dict[str, str] = {
    "text": "UPDATE pauses SET response = 'not json {'",
    "list": "UPDATE pauses SET response = '[1, 2]'",
    "blob": "UPDATE pauses SET response = x'00ff'",
    "empty": "UPDATE pauses SET response = '{}'",
    "foreign": "UPDATE pauses SET response = json_set(response, "
               "'$.pending_approvals[0].call_id', 'not-a-call')",
    "none waiting": "UPDATE pauses SET response = json_set(response, '$.pending_approvals', "
                    "json('[]'))",
    "negative": "UPDATE pauses SET response = json_set(response, '$.usage.requests', -5)",
    "huge": "UPDATE pauses SET response = json_set(response, '$.tool_invocations[0].latency', "
            "json('1e400'))",
    "length": "UPDATE pauses SET messages = messages + 1",
    "old database": "DROP TABLE pauses",
}
"""Damage done to a stored pause behind the store's back (the row, or its table)."""


@settings(max_examples=len(_ROW_EDITS), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edit=st.sampled_from(sorted(_ROW_EDITS)))
async def test_a_damaged_pause_resumes_from_the_conversation(
        edit: str, model_for: ModelFactory) -> None:
    """A stored pause that is unreadable, disagrees with the session's conversation, or is
    gone with its table (a database of an older version) never stops the session: the turn
    resumes from the conversation alone (a new run, as documented), and the next pause is
    kept again."""
    library, ran = ToolLibrary(), []

    @library.register
    def readMail(folder: str = "inbox") -> str:
        """Reads the inbox"""
        ran.append(folder)
        return "nothing new"

    @library.register
    def sendMail(to: str) -> str:
        """Sends an e-mail"""
        ran.append(to)
        return f"sent to {to}"

    agent = load_gram(GRAM).agents[0]
    with ScriptedServer() as server, tempfile.TemporaryDirectory() as folder:
        server.add(calls(call("readMail", {"folder": "x"}), call("sendMail", {"to": "a"})),
                   reply("done"), call("sendMail", {"to": "b"}), reply("again"))
        path = Path(folder) / "sessions.sqlite3"
        options: dict[str, Any] = {"library": library, "model": model_for(server, "chat")}
        paused = await SessionStore(path).open("s").run(agent, "go", **options)
        with sqlite3.connect(path) as db:
            db.execute(_ROW_EDITS[edit])
        store = SessionStore(path)  # reopened: an old database gets the table back
        resumed = await store.open("s").resume(
            agent, {r.call_id: True for r in paused.pending_approvals}, **options)
        assert resumed.content == "done" and ran == ["x", "a"]
        assert resumed.run_id != paused.run_id  # a new run: the pause was not read
        again = await store.open("s").run(agent, "more", **options)
        assert again.paused
        conversation = store.load("s")
        assert conversation is not None
        kept = store.load_pause("s", conversation)
        assert kept is not None and kept.run_id == again.run_id


async def test_a_deleted_session_takes_its_pause_along(model_for: ModelFactory) -> None:
    """Deleting a paused session deletes its pause: a new session of that name does not
    continue the old run, even at the same length."""
    mail, mailer = Mail(), load_gram(GRAM).agents[0]
    with ScriptedServer() as server, tempfile.TemporaryDirectory() as folder:
        server.add(call("sendMail", {"to": "a"}), call("sendMail", {"to": "b"}))
        path = Path(folder) / "sessions.sqlite3"
        options: dict[str, Any] = {"library": mail.library, "model": model_for(server, "chat")}
        store = SessionStore(path)
        first = await store.open("s").run(mailer, "go", **options)
        assert first.paused and store.delete("s")
        with sqlite3.connect(path) as db:
            assert db.execute("SELECT COUNT(*) FROM pauses").fetchone() == (0,)
        second = await store.open("s").run(mailer, "go", **options)
        conversation = store.load("s")
        assert conversation is not None and len(conversation) == len(first.context)
        kept = store.load_pause("s", conversation)
        assert kept is not None and kept.run_id == second.run_id != first.run_id
