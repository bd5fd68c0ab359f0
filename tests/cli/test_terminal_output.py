"""What reaches the user's terminal from outside is shown, never obeyed (issue 31 class 7,
issue 32 item 5): one sanitizer (``gramagent._cli._terminal``) on every CLI path.

Hostile strings mix escape sequences (OSC 52 clipboard, window title, clear screen, OSC 8
hyperlinks, hidden text), C1 codes, BEL, bidi controls and rich markup with ordinary text
(letters of several scripts, emoji, newlines, tabs). For every command that prints outside
text (a tool's result and errors, a CSV's column names and cells, session names and
messages, a model's answer, its JSON, Harmony records, errors quoting their input), nothing
of them reaches stdout or stderr raw, markup is printed as written, and the ordinary text is
kept. The four paths of the issue also run as a user runs them: a subprocess with stdout on a
pty (``gramagent tool python_repl``, ``load_csv``, ``describe_table``, a chart's error).
"""

from __future__ import annotations

import csv
import io
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_support import on_terminal
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from rich.markdown import Markdown
from rich.table import Table
from typer.testing import CliRunner

from gramagent._cli import app
from gramagent._cli._terminal import markup_text, terminal_console, terminal_text
from gramagent._messages import AssistantMessage, Conversation, UserMessage
from gramagent._runtime.sessions import SessionStore
from gramagent.testing import ScriptedServer, reply

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "examples" / "hello_world.gram"

ATTACKS = ["\x1b]52;c;cm0gLXJmIH4=\x07", "\x1b]0;owned\x07", "\x1b[2J\x1b[H",
           "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\", "\x1b[8mhidden\x1b[0m",
           "\x9b2J", "\x9d0;t\x9c", "\x07", "\u202egnp.exe", "\u2066x\u2069", "\u200f",
           "\x7f", "\x08", "a\rb", "\x00", "\x85"]
"""Sequences a terminal obeys: each must be shown, never sent."""
MARKUP = ["[red]", "[/red]", "[bold]x[/bold]", "[link=https://evil.example]y[/link]",
          "[conceal]z[/conceal]", ":smile:", "\\[", "[/]"]
"""Rich markup (and an emoji code): printed as written."""
ORDINARY = ["héllo", "世界", "Ωμέγα", "🎉", "👩‍💻", " ", "\n", "\t", "plain", "42"]
"""Text that must come through as it is."""

FORBIDDEN = {chr(c) for c in [*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20),
                              *range(0x7F, 0xA0), 0x061C, 0x200E, 0x200F,
                              *range(0x202A, 0x202F), *range(0x2066, 0x206A)]}
"""Characters that must never reach the terminal (newline, tab and CR of CRLF aside)."""

_PIECE = st.one_of(st.sampled_from(ATTACKS), st.sampled_from(MARKUP), st.sampled_from(ORDINARY),
                   st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]),
                           max_size=4))
HOSTILE = st.lists(_PIECE, min_size=1, max_size=8).map("".join)
"""A hostile string: attacks, markup, ordinary text and any characters, mixed."""
EVERY_ATTACK = "".join(ATTACKS) + "".join(MARKUP) + "".join(ORDINARY)


def assert_shown_not_obeyed(output: str, where: object = "") -> None:
    """No character a terminal obeys is in ``output`` (a lone CR neither)."""
    raw = sorted({c for c in output if c in FORBIDDEN})
    assert not raw, (where, raw, output[:400])
    assert "\r" not in output.replace("\r\n", ""), (where, output[:400])


# -- the sanitizer itself ----------------------------------------------------------------------

@settings(max_examples=300, deadline=None)
@given(text=HOSTILE)
@example(text=EVERY_ATTACK)
def test_terminal_text_shows_every_control_and_keeps_the_rest(text: str) -> None:
    """Sanitized text holds nothing a terminal obeys; text without such characters is
    unchanged; markup_text's output, printed as markup, is the sanitized text."""
    shown = terminal_text(text)
    assert_shown_not_obeyed(shown)
    if not any(c in FORBIDDEN for c in text.replace("\r\n", "")) and "\r" not in \
            text.replace("\r\n", ""):
        assert shown == text
    console = terminal_console(file=io.StringIO(), width=10_000, color_system=None)
    console.print(markup_text(text), end="")
    printed = console.file.getvalue()  # type: ignore[attr-defined]
    expected = shown.replace("\r\n", "\n")
    trailing = len(expected) - len(expected.rstrip("\\"))
    if trailing:  # doubled, so that they cannot escape a closing tag after them
        expected += "\\" * trailing
    assert printed.replace(" ", "") == expected.replace("\t", "").replace(" ", "")  # rich lays
    # tabs out as spaces, by cell widths


@settings(max_examples=200, deadline=None)
@given(value=st.recursive(st.one_of(HOSTILE, st.integers(), st.none()),
                          lambda inner: st.lists(inner, max_size=3)
                          | st.dictionaries(HOSTILE, inner, max_size=3), max_leaves=8))
def test_json_through_the_sanitizer_is_the_same_json(value: object) -> None:
    """JSON text goes through the same function and stays valid JSON of the same value (the
    escapes it writes outside C0 are JSON's ``\\uNNNN``)."""
    text = terminal_text(json.dumps(value, ensure_ascii=False))
    assert_shown_not_obeyed(text)
    assert json.loads(text) == value


@settings(max_examples=100, deadline=None)
@given(text=HOSTILE)
def test_every_renderable_of_the_consoles_is_sanitized(text: str) -> None:
    """A table, Markdown and plain text printed with markup off through a CLI console: the
    render hook sanitizes every segment, whoever built it."""
    console = terminal_console(file=io.StringIO(), width=200, force_terminal=True)
    table = Table("name", "value")
    table.add_row(text, text)
    console.print(table, markup=False)
    console.print(Markdown(text))
    console.print(text, markup=False, highlight=False)
    # force_terminal: rich's own styles are ESC sequences; remove exactly those
    rendered = console.file.getvalue()  # type: ignore[attr-defined]
    import re
    without_styles = re.sub(r"\x1b\[[0-9;]*m", "", rendered)
    assert_shown_not_obeyed(without_styles)


# -- every CLI command that prints outside text ------------------------------------------------

@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A data directory (uploads and the session store) of this test only."""
    monkeypatch.setenv("GRAMAGENT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    (tmp_path / "data").mkdir()
    return tmp_path / "data"


class _Answer:
    """A scripted model whose answer is set per example."""

    def __init__(self) -> None:
        self.text = ""

    def __call__(self, path: str, body: object) -> object:
        return reply(self.text)


@pytest.fixture(scope="module")
def model() -> Iterator[tuple[_Answer, ScriptedServer]]:
    answer = _Answer()
    with ScriptedServer(answer) as server:
        yield answer, server


def _outputs(*args: str, stdin: str | None = None) -> tuple[str, int]:
    result = CliRunner().invoke(app, list(args), input=stdin)
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        (args, result.exception)
    text = result.stdout + result.stderr
    assert "internal error" not in text and "Traceback" not in text, (args, text)
    return text, result.exit_code


def _csv(folder: Path, name: str, header: str, cell: str) -> None:
    buffer = io.StringIO()
    csv.writer(buffer).writerows([["id", header], ["1", cell]])
    (folder / f"{name}.csv").write_text(buffer.getvalue(), encoding="utf-8")


def _chart_args(x_field: str) -> str:
    return json.dumps({"df_name": "t", "logical_name": "", "chart_type": "line",
                       "x_field": x_field, "x_label": "", "y_label": "",
                       "series": [{"name": "s", "y_field": "id"}], "title": "", "note": ""})


@pytest.mark.slow
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=HOSTILE)
@example(text=EVERY_ATTACK)
def test_data_tools_show_hostile_names_and_cells_as_text(home: Path, text: str) -> None:
    """load_csv and describe_table on a CSV whose column name and cell are hostile, a
    chart whose x_field is hostile (its error quotes it), an unknown tool or path named by
    it: every output is sanitized, and the ordinary words are kept."""
    pytest.importorskip("pyarrow")
    session = home.parent / "session"
    for path in home.glob("t.*"):
        path.unlink()
    _csv(home, "t", text, text)
    runs = [("tool", "load_csv", json.dumps({"path": "t.csv"})),
            ("tool", "load_csv", json.dumps({"path": "t.csv"}), "--json"),
            ("tool", "describe_table", json.dumps({"df_name": "t"}), "--session",
             str(session)),
            ("tool", "chart", _chart_args(text)),
            ("tool", "load_csv", json.dumps({"path": text})),
            ("tool", text, "{}")]
    for args in runs:
        output, _ = _outputs(*args)
        assert_shown_not_obeyed(output, args)
    loaded, code = _outputs("tool", "load_csv", json.dumps({"path": "t.csv"}))
    if code == 0 and "\n" not in text and "\r" not in text:
        assert terminal_text(text) in loaded  # the column name whole, markup as written


@pytest.mark.slow
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=HOSTILE)
@example(text=EVERY_ATTACK)
def test_sessions_and_logs_show_hostile_names_and_messages_as_text(home: Path,
                                                                  text: str) -> None:
    """A session named by a hostile string, holding it as the user's message and the
    answer: sessions list/show and logs/logs show (text and JSON) print it sanitized."""
    store = SessionStore(home / "sessions.sqlite3")
    for old in store.list():
        store.delete(old.name)
    name = text if text.strip() else "x"
    store.save(name, Conversation([UserMessage(content=text),
                                   AssistantMessage(content=text)]), agent=text)
    for args in (["sessions", "list"], ["sessions", "list", "--json"],
                 ["sessions", "show", name], ["sessions", "show", name, "--json"],
                 ["logs"], ["logs", "--json"], ["logs", "show", f"{name}:1"],
                 ["logs", "show", f"{name}:1", "--json"]):
        output, _ = _outputs(*args)
        assert_shown_not_obeyed(output, args)
    shown, code = _outputs("sessions", "show", name)
    assert code == 0
    for word in ORDINARY:
        if word.strip() and word in text:
            assert word in shown


@pytest.mark.slow
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=HOSTILE)
@example(text=EVERY_ATTACK)
def test_model_answers_and_harmony_records_are_sanitized(
        home: Path, model: tuple[_Answer, ScriptedServer], text: str) -> None:
    """A model's answer (text and --json), a gram file that does not parse because of the
    string (the error quotes it), Harmony text on stdin: sanitized; the JSON decodes to the
    answer exactly."""
    answer, server = model
    answer.text = text
    output, code = _outputs("run", str(HELLO), "hi", "--base-url", server.base_url)
    assert_shown_not_obeyed(output, "run")
    as_json, code = _outputs("run", str(HELLO), "hi", "--base-url", server.base_url, "--json")
    assert_shown_not_obeyed(as_json, "run --json")
    if code == 0:
        assert json.loads(as_json.splitlines()[0])["content"] == text
    gram = home.parent / "bad.gram"
    gram.write_text(f"({text}:Agent {{", encoding="utf-8")
    output, _ = _outputs("check", str(gram))
    assert_shown_not_obeyed(output, "check")
    output, _ = _outputs("harmony", "parse", "-", stdin=f"<|channel|>final<|message|>{text}")
    assert_shown_not_obeyed(output, "harmony parse")


# -- the issue's four paths, as a user runs them: stdout on a pty ------------------------------

def _terminal_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.update(GRAMAGENT_DATA_DIR=str(home), TERM="xterm-256color", COLUMNS="200")
    env.pop("NO_COLOR", None)
    return env


@pytest.mark.slow
def test_the_issues_paths_on_a_terminal(home: Path) -> None:
    """``gramagent tool python_repl`` printing every attack, ``load_csv`` and
    ``describe_table`` of a CSV holding them, and a chart's error quoting them, with stdout
    on a pty: the terminal receives none of them raw (only the CLI's own colours), and the
    ordinary text arrives."""
    pytest.importorskip("pyarrow")
    _csv(home, "t", EVERY_ATTACK, EVERY_ATTACK)
    env = _terminal_env(home)
    code = f"print({EVERY_ATTACK!r})"
    runs = [["tool", "python_repl", json.dumps({"code": code})],
            ["tool", "load_csv", json.dumps({"path": "t.csv"})],
            ["tool", "describe_table", json.dumps({"df_name": "t"})],
            ["tool", "chart", _chart_args(EVERY_ATTACK)]]
    import re
    for args in runs:
        out, err = on_terminal(args, env)
        if "no OS isolation" in err:
            continue  # python_repl cannot start here (tested where it can)
        for where, text in (("stdout", out), ("stderr", err)):
            assert_shown_not_obeyed(re.sub(r"\x1b\[[0-9;]*m", "", text), (args[1], where))
            assert "\x1b]" not in text and "\x1b[2J" not in text and "\x1b[8m" not in text
        assert "héllo" in out + err and "🎉" in out + err, (args[1], out, err)


def test_the_sanitizer_is_the_one_the_cli_uses() -> None:
    """The names the command modules import are the sanitizer's (no second copy)."""
    from gramagent._cli import _app, _terminal

    assert _app.terminal_text is _terminal.terminal_text
    assert _app.markup_text is _terminal.markup_text
    assert sys.modules["gramagent._cli._app"].err_console._render_hooks  # type: ignore[attr-defined]
