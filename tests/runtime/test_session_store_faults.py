"""Session stores that fail cleanly: a damaged file, rows another program wrote, tables of
another shape, a lock folder that is a file and a full disk each give a ConfigurationError
naming the store (never another exception, which the CLI calls a bug), keep what was stored
before, and one store works from several event loops at once."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from runtime_support import make_agent, make_tools

from gramagent._messages import AssistantMessage, Conversation, UserMessage
from gramagent._models.registry import resolve_model
from gramagent._runtime.sessions import SessionStore
from gramagent.errors import ConfigurationError
from gramagent.testing import ScriptedServer, reply


def _fill(store: SessionStore, sessions: int = 6) -> None:
    for n in range(sessions):
        store.save(f"s{n}", Conversation([UserMessage(content=f"hello {n} " * 40),
                                          AssistantMessage(content=f"hi {n} " * 40)]),
                   agent="a")


def _every_operation(store_path: Path) -> list[str]:
    """Runs every public operation of a store on ``store_path``; what each gave."""
    outcomes = []
    steps = [
        ("open", lambda: SessionStore(store_path)),
        ("list", lambda: SessionStore(store_path).list()),
        ("load", lambda: [SessionStore(store_path).load(f"s{n}") for n in range(6)]),
        ("save", lambda: SessionStore(store_path).save(
            "new", Conversation([UserMessage(content="x")]))),
        ("delete", lambda: SessionStore(store_path).delete("s1")),
    ]
    for what, step in steps:
        try:
            step()
            outcomes.append(f"{what}: ok")
        except ConfigurationError as exc:
            assert str(store_path) in str(exc), exc
            outcomes.append(f"{what}: {exc}")
    return outcomes


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(damage=st.lists(st.tuples(st.integers(0, 2**20), st.binary(min_size=1, max_size=64)),
                       min_size=1, max_size=6))
def test_damaged_pages_give_a_configuration_error(damage: list[tuple[int, bytes]]) -> None:
    """Bytes overwritten anywhere in the database file (header, b-tree pages, cells): every
    operation either works or raises a ConfigurationError naming the file."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "s.sqlite3"
        _fill(SessionStore(path))
        size = path.stat().st_size
        with open(path, "r+b") as handle:
            for offset, data in damage:
                handle.seek(offset % size)
                handle.write(data)
        _every_operation(path)  # asserts inside: only ConfigurationError, naming the file


def test_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    path.write_bytes(b"this is not SQLite, " * 300)
    with pytest.raises(ConfigurationError, match="s.sqlite3"):
        SessionStore(path)


@pytest.mark.parametrize("table", [
    "CREATE TABLE sessions (name TEXT PRIMARY KEY, other TEXT)",
    "CREATE TABLE messages (session TEXT, seq INTEGER, body TEXT, extra INTEGER)",
    "CREATE TABLE pauses (session TEXT)",
])
def test_tables_of_another_shape_are_refused(tmp_path: Path, table: str) -> None:
    path = tmp_path / "s.sqlite3"
    with sqlite3.connect(path) as db:
        db.execute(table)
    with pytest.raises(ConfigurationError, match="not a gramagent session store: its table"):
        SessionStore(path)


@pytest.mark.parametrize(("column", "value"), [
    ("created", "yesterday"), ("updated", b"\x00"), ("agent", b"a"), ("name", b"\x01")])
def test_rows_of_other_types_are_reported_as_damage(tmp_path: Path, column: str,
                                                    value: object) -> None:
    """A session row another program wrote with values of other types (what SQLite's column
    affinity keeps: text in a REAL column, a blob anywhere): list says the store is damaged,
    naming it; the other session stays readable."""
    store = SessionStore(tmp_path / "s.sqlite3")
    _fill(store, 2)
    with sqlite3.connect(store.path) as db:
        db.execute(f"UPDATE sessions SET {column} = ? WHERE name = 's0'", (value,))
    with pytest.raises(ConfigurationError, match="damaged") as raised:
        store.list()
    assert str(store.path) in str(raised.value)
    assert store.load("s1") is not None


def test_a_conversation_id_of_another_type_is_damage(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "s.sqlite3")
    _fill(store, 2)
    with sqlite3.connect(store.path) as db:
        db.execute("UPDATE sessions SET conversation_id = x'00ff' WHERE name = 's0'")
    assert {s.name for s in store.list()} == {"s0", "s1"}
    with pytest.raises(ConfigurationError, match="conversation id of session 's0'"):
        store.load("s0")
    assert store.load("s1") is not None


def test_rows_left_without_their_session(tmp_path: Path) -> None:
    """Messages of a name that has no session (another program deleted the session row with
    foreign keys off): a turn on that name is refused, saying so; delete clears them, and
    the name works again."""
    store = SessionStore(tmp_path / "s.sqlite3")
    with sqlite3.connect(store.path) as db:
        db.execute("INSERT INTO messages VALUES ('ghost', 0, ?)",
                   ('{"kind": "user", "content": "x"}',))
    assert store.load("ghost") is None and store.list() == []
    with pytest.raises(ConfigurationError, match="holds 1 messages where this turn started"):
        store.save("ghost", Conversation([UserMessage(content="new")]))
    assert store.delete("ghost")
    store.save("ghost", Conversation([UserMessage(content="new")]))
    loaded = store.load("ghost")
    assert loaded is not None and [m.content for m in loaded] == ["new"]


def test_a_gap_in_the_messages_is_damage(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "s.sqlite3")
    _fill(store, 1)
    with sqlite3.connect(store.path) as db:
        db.execute("UPDATE messages SET seq = 5 WHERE seq = 1")
    with pytest.raises(ConfigurationError, match="message 1 of session 's0' is missing"):
        store.load("s0")


async def test_a_lock_folder_that_is_a_file(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "s.sqlite3")
    (tmp_path / "s.sqlite3.locks").write_text("not a folder")
    with pytest.raises(ConfigurationError, match="cannot make the lock file of session 'w'"):
        async with store.open("w").turn():
            pass


_FULL_DISK_CHILD = textwrap.dedent("""
    import resource, signal, sys
    from gramagent._messages import Conversation, UserMessage
    from gramagent._runtime.sessions import SessionStore
    from gramagent.errors import ConfigurationError

    store = SessionStore(sys.argv[1])
    conversation = Conversation([UserMessage(content="kept")], id="c")
    store.save("s", conversation)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails instead
    size = sum(p.stat().st_size for p in store.path.parent.iterdir())
    resource.setrlimit(resource.RLIMIT_FSIZE, (size + 65536, size + 65536))
    for turn in range(1000):
        grown = Conversation([*conversation.messages, UserMessage(content="x" * 20000)],
                             id="c")
        try:
            store.save("s", grown, stored=len(conversation))
        except ConfigurationError as exc:
            print("REFUSED", exc)
            break
        conversation = grown
    print("SAVED", len(conversation))
""")


def test_a_full_disk_is_reported_and_keeps_what_was_stored(tmp_path: Path) -> None:
    """Writes fail past a file-size limit (as on a full disk): the save raises a
    ConfigurationError saying nothing of the turn was saved; every earlier turn reads back."""
    path = tmp_path / "s.sqlite3"
    done = subprocess.run([sys.executable, "-c", _FULL_DISK_CHILD, str(path)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    refused = [line for line in done.stdout.splitlines() if line.startswith("REFUSED")]
    assert refused and str(path) in refused[0] and "nothing of this turn was saved" in refused[0]
    saved = int(done.stdout.split("SAVED")[1])
    loaded = SessionStore(path).load("s")
    assert loaded is not None and len(loaded) == saved and loaded[0].content == "kept"


def test_one_store_from_several_event_loops(tmp_path: Path) -> None:
    """Four threads, each with its own asyncio.run, take turns on one session of one store
    object: every turn is saved whole, none fails, none waits forever."""
    threads, turns = 4, 3
    tools = make_tools()
    agent = make_agent(tools.library)
    store = SessionStore(tmp_path / "s.sqlite3")
    failures: list[BaseException] = []
    with ScriptedServer([reply("ok.") for _ in range(threads * turns)]) as srv:

        async def take_turns(worker: int) -> None:
            model = resolve_model("openai/scripted", base_url=srv.base_url)
            try:
                for turn in range(turns):
                    await store.open("shared").run(agent, f"{worker}.{turn}",
                                                   library=tools.library, model=model)
            finally:
                await model.aclose()

        def worker(n: int) -> None:
            try:
                asyncio.run(take_turns(n))
            except BaseException as exc:  # reported below, with the others
                failures.append(exc)

        running = [threading.Thread(target=worker, args=(n,), daemon=True)
                   for n in range(threads)]
        for thread in running:
            thread.start()
        for thread in running:
            thread.join(timeout=120)
        assert not any(t.is_alive() for t in running), "a thread waits forever"
    assert failures == []
    loaded = store.load("shared")
    assert loaded is not None
    assert [m.kind for m in loaded] == ["user", "assistant"] * (threads * turns)
    assert sorted(m.content for m in loaded if m.kind == "user") == sorted(
        f"{w}.{t}" for w in range(threads) for t in range(turns))
