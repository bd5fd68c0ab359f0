"""Stored sessions: a turn resumes from SQLite, turns of one session are serialized (tasks and
processes), and a process killed with SIGKILL between turns loses only the turn in flight."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from runtime_support import ModelFactory, Tools, user_texts

from gramagent._messages import AssistantMessage, Conversation, UserMessage
from gramagent._runtime.sessions import SessionStore, default_store_path
from gramagent._spec.model import Agent
from gramagent.errors import ConfigurationError, ModelAPIError
from gramagent.testing import ScriptedServer, error, reply

CHILD = Path(__file__).with_name("session_child.py")


def child(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(CHILD.parent), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, str(CHILD), *args], stdout=subprocess.PIPE,
                            text=True, env=env)


def kinds(conversation: Conversation | None) -> list[str]:
    return [m.kind for m in conversation or ()]


async def test_turns_resume_from_the_store(tmp_path: Path, tools: Tools, agent: Agent,
                                           server: ScriptedServer,
                                           model_for: ModelFactory) -> None:
    server.add(reply("One."), reply("Two."))
    model = model_for(server, "chat")
    session = SessionStore(tmp_path / "s.db").open("work")
    assert kinds(session.context) == []
    first = await session.run(agent, "first", library=tools.library, model=model)
    # Another store object on the same file: what a new process sees.
    again = SessionStore(tmp_path / "s.db").open("work")
    assert again.context == first.context and again.context.id == first.context.id
    second = await again.run(agent, "second", library=tools.library, model=model)
    assert second.content == "Two."
    assert user_texts(server.requests[1].body) == ["first", "second"]
    (info,) = SessionStore(tmp_path / "s.db").list()
    assert (info.name, info.agent, info.messages) == ("work", agent.name, 4)


async def test_a_failed_turn_keeps_its_user_message(tmp_path: Path, tools: Tools,
                                                    agent: Agent, server: ScriptedServer,
                                                    model_for: ModelFactory) -> None:
    server.add(error(400, "no"))
    store = SessionStore(tmp_path / "s.db")
    with pytest.raises(ModelAPIError):
        await store.open("x").run(agent, "hello", library=tools.library,
                                  model=model_for(server, "chat"))
    assert kinds(store.load("x")) == ["user"]


async def test_concurrent_turns_of_one_session_are_serialized(
        tmp_path: Path, tools: Tools, agent: Agent, model_for: ModelFactory) -> None:
    """Two turns started together: the second starts from the first's whole turn."""
    with ScriptedServer([reply("A.", delay=0.3), reply("B.")]) as srv:
        model = model_for(srv, "chat")
        store = SessionStore(tmp_path / "s.db")
        await asyncio.gather(*(store.open("shared").run(agent, text, library=tools.library,
                                                         model=model)
                               for text in ("first", "second")))
        assert kinds(store.load("shared")) == ["user", "assistant", "user", "assistant"]
        assert len(user_texts(srv.requests[1].body)) == 2  # the first turn was in it


def test_the_lock_is_released_when_its_holder_is_killed(tmp_path: Path) -> None:
    holder = child("--hold-lock", str(tmp_path / "s.db"), "demo")
    assert holder.stdout is not None and holder.stdout.readline().strip() == "LOCKED"

    async def try_lock(wait: float) -> bool:
        try:
            async with asyncio.timeout(wait):
                async with SessionStore(tmp_path / "s.db").lock("demo"):
                    return True
        except TimeoutError:
            return False

    try:
        assert not asyncio.run(try_lock(0.5))  # held by the other process
        assert asyncio.run(_other_session(tmp_path))  # another session does not wait
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        holder.stdout.close()
    assert asyncio.run(try_lock(30))


async def _other_session(tmp_path: Path) -> bool:
    async with asyncio.timeout(30), SessionStore(tmp_path / "s.db").lock("another"):
        return True


@pytest.mark.slow
def test_kill_9_between_turns_loses_only_the_turn_in_flight(tmp_path: Path, tools: Tools,
                                                            agent: Agent) -> None:
    """The child saves turn 1, then is killed with SIGKILL while turn 2 waits for the model;
    the store holds turn 1 whole, and the session resumes from it."""
    store_path = tmp_path / "s.db"
    with ScriptedServer([reply("Turn one answered."), reply("never sent", delay=120),
                         reply("Resumed.")]) as srv:
        proc = child(str(store_path), srv.base_url, "first message", "second message")
        assert proc.stdout is not None and proc.stdout.readline().strip() == "SAVED 1"
        for _ in range(600):  # until turn 2's request has reached the server
            if len(srv.requests) >= 2:
                break
            asyncio.run(asyncio.sleep(0.05))
        assert len(srv.requests) == 2
        proc.send_signal(signal.SIGKILL)
        assert proc.wait() == -signal.SIGKILL
        proc.stdout.close()

        stored = SessionStore(store_path).load("demo")
        assert stored is not None
        assert [(m.kind, getattr(m, "content", None)) for m in stored] == [
            ("user", "first message"), ("assistant", "Turn one answered.")]

        async def resume() -> Any:
            from gramagent._models.registry import resolve_model

            model = resolve_model("openai/scripted", base_url=srv.base_url)
            try:
                return await SessionStore(store_path).open("demo").run(
                    agent, "second message", library=tools.library, model=model)
            finally:
                await model.aclose()

        response = asyncio.run(resume())
        assert response.content == "Resumed."
        assert user_texts(srv.requests[2].body) == ["first message", "second message"]
        assert isinstance(response.context[1], AssistantMessage)
        assert isinstance(response.context[2], UserMessage)


def test_list_show_delete_and_bad_names(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "s.db")
    store.save("a", Conversation([UserMessage(content="hi")]), agent="x")
    assert [s.name for s in store.list()] == ["a"]
    assert store.delete("a") and not store.delete("a")
    assert store.load("a") is None and store.list() == []
    with pytest.raises(ConfigurationError):
        store.open("  ")


def test_default_path_follows_the_environment(monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path) -> None:
    monkeypatch.delenv("GRAMAGENT_DATA_DIR", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_store_path() == tmp_path / "gramagent" / "sessions.sqlite3"
    monkeypatch.setenv("GRAMAGENT_DATA_DIR", str(tmp_path / "d"))
    assert default_store_path() == tmp_path / "d" / "sessions.sqlite3"


_INT64 = st.integers(-(2**63), 2**63 - 1)  # what orjson and SQLite take
_JSON_LEAF = st.none() | st.booleans() | _INT64 | st.floats(allow_nan=False) | st.text(max_size=5)
_JSON = st.recursive(_JSON_LEAF, lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.sampled_from(
                         ["kind", "content", "tool_calls", "call_id", "name", "id", "arguments",
                          "x"]), inner, max_size=4), max_leaves=10)
_BODIES = st.one_of(
    _JSON.map(lambda v: orjson.dumps(v).decode()),
    st.sampled_from(["{", "", "not json", '{"kind": "user"}', '{"kind": "user", "content": 5}',
                     '{"kind": "assistant", "tool_calls": [{"id": 1}]}']),
    st.binary(max_size=8), _INT64)


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(body=_BODIES)
def test_a_damaged_message_is_a_configuration_error(body: Any) -> None:
    """Whatever a stored message row holds, loading the session gives its conversation or a
    ConfigurationError naming the store, the session and the message: never another error
    (the CLI would call it a bug in gramagent)."""
    with tempfile.TemporaryDirectory() as folder:
        store = SessionStore(Path(folder) / "s.sqlite3")
        store.save("s", Conversation([UserMessage(content="Hi")], id="c"))
        with sqlite3.connect(store.path) as db:
            db.execute("INSERT INTO messages VALUES ('s', 1, ?)", (body,))
        try:
            loaded = store.load("s")
        except ConfigurationError as exc:
            assert "message 1 of session 's' cannot be read" in str(exc)
            assert str(store.path) in str(exc)
            return
        assert loaded is not None and len(loaded) == 2
