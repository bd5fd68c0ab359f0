"""``gramagent sessions`` on hostile names and damaged stores: a clear one-line error or the
listing, never "internal error" (exit 70), and nothing from a name reaches the terminal as
markup or as a control sequence."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gramagent._cli import app
from gramagent._messages import Conversation, UserMessage
from gramagent._runtime.sessions import SessionStore

_HOSTILE = st.one_of(
    st.sampled_from(["[/red] boom", "[bold]x", "\x1b]52;c;aGk=\x07", "\x1b[2J\x1b[H", "a\rb",
                     "[link=file:///etc/passwd]x[/link]", "\x9b31m"]),
    st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=12),
).filter(lambda name: name.strip() != "")


@pytest.fixture
def data(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("GRAMAGENT_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@pytest.mark.slow
@given(name=_HOSTILE)
def test_hostile_session_names_are_listed_as_text(data: Path, name: str) -> None:
    store = SessionStore(data / "sessions.sqlite3")
    for old in store.list():
        store.delete(old.name)
    store.save(name, Conversation([UserMessage(content="hi")]), agent=name)
    # "--" as a user would type it: a name such as "-0" is otherwise read as an option
    for args in (["sessions", "list"], ["sessions", "delete", "--", name]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, (args, result.output)
        assert "\x1b" not in result.output and "\x9b" not in result.output
        assert "internal error" not in result.output


@pytest.mark.parametrize("damage", ["schema", "pages", "lock"])
def test_a_damaged_store_is_one_clear_line(data: Path, damage: str) -> None:
    path = data / "sessions.sqlite3"
    store = SessionStore(path)
    for n in range(5):
        store.save(f"s{n}", Conversation([UserMessage(content="x" * 3000)]))
    if damage == "schema":
        with sqlite3.connect(path) as db:
            db.execute("DROP TABLE pauses")
            db.execute("CREATE TABLE pauses (other TEXT)")
    elif damage == "pages":
        with open(path, "r+b") as handle:
            handle.seek(4096)
            handle.write(b"\xff" * 4096)
    else:
        (data / "sessions.sqlite3.locks").write_text("a file")
    for args in (["sessions", "list"], ["sessions", "show", "s1"]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code != 70 and "internal error" not in result.output, result.output
        if result.exit_code != 0:
            assert str(path) in result.output.replace("\n", "")
