"""``gramagent run`` / ``chat`` on a terminal print the answer as it is generated; piped or with
``--json`` they print it whole. The terminal is a real pseudo-terminal (the child's stdout and
stdin are a pty), the model the scripted server streaming SSE."""

from __future__ import annotations

import os
import subprocess
import sys
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_support import on_terminal
from hypothesis import given, settings
from hypothesis import strategies as st

from gramagent._cli._app import terminal_text
from gramagent.testing import ScriptedServer, call, reply

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "examples" / "hello_world.gram"
ANSWER = "Hello Alice! The greeting tool said hello to you, and so do I."
SECRET = "sk-live-Streamed-Secret-0123456789abcdef"


@pytest.fixture
def env() -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    clean["OPENAI_API_KEY"] = SECRET
    return clean


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    script = [call("sayHello", {"personName": "Alice"}), reply(ANSWER + " " + SECRET)]
    with ScriptedServer(script) as srv:
        yield srv


@pytest.mark.slow
def test_run_on_a_terminal_streams_the_answer(server: ScriptedServer, env: dict[str, str]
                                              ) -> None:
    out, err = on_terminal(["run", str(HELLO), "Hi, I'm Alice", "--base-url", server.base_url],
                           env)
    assert ANSWER in out, err
    assert SECRET not in out and SECRET not in err  # masked, though it came in pieces
    assert "→ sayHello" in err
    assert all(r.body.get("stream") is True for r in server.requests)


@pytest.mark.slow
def test_piped_output_is_whole_and_unstreamed(server: ScriptedServer, env: dict[str, str]
                                              ) -> None:
    done = subprocess.run([sys.executable, "-m", "gramagent", "run", str(HELLO),
                           "Hi, I'm Alice", "--base-url", server.base_url],
                          capture_output=True, env=env, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert ANSWER in done.stdout.decode()
    assert all("stream" not in r.body for r in server.requests)


@pytest.mark.slow
def test_chat_on_a_terminal_streams_each_turn(env: dict[str, str]) -> None:
    with ScriptedServer([reply("First answer, streamed."),
                         reply("Second answer, also streamed.")]) as srv:
        out, err = on_terminal(["chat", str(HELLO), "--base-url", srv.base_url], env,
                               stdin=b"hello\nagain\n\x04")
        assert "First answer, streamed." in out and "Second answer, also streamed." in out
        assert len(srv.requests) == 2
        second = srv.requests[1].body["messages"]
        assert [m["role"] for m in second][-3:] == ["user", "assistant", "user"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["[/dim]", "[bold red]sayHello", "say[/]Hello",
                                  "say\x1b[2JHello"])
def test_a_tool_name_is_printed_as_written_never_as_markup(env: dict[str, str],
                                                           name: str) -> None:
    """The model names its calls: the live '→ name' line printed the name as rich markup, so
    a closing tag it never opened stopped the CLI with a MarkupError traceback."""
    with ScriptedServer([call(name, {}), reply("Done.")]) as srv:
        out, err = on_terminal(["run", str(HELLO), "Hi", "--base-url", srv.base_url], env)
    assert "internal error" not in err and "Traceback (most" not in err and "Done." in out, err
    assert f"→ {terminal_text(name)}" in err and "\x1b[2J" not in err


@pytest.mark.slow
@pytest.mark.parametrize("streamed", [True, False])
def test_terminal_control_sequences_of_the_model_are_shown_not_obeyed(
        env: dict[str, str], streamed: bool) -> None:
    """A model's text (a page it read and repeats, say) may hold escape sequences: clear the
    screen, set the clipboard (OSC 52), retitle the window. Written to the terminal as they
    were, the terminal obeyed them; now each control character is shown as \\xNN (newlines,
    tabs and CRLF line ends are text; a C1 code as \\u00NN)."""
    answer = "Safe \x1b[2Jcleared \x1b]52;c;SGk=\x07clip \x9b31mred\r\nnext\tline"
    with ScriptedServer([reply(answer)]) as srv:
        args = ["run", str(HELLO), "Hi", "--base-url", srv.base_url]
        if streamed:
            out, err = on_terminal(args, env)
        else:
            done = subprocess.run([sys.executable, "-m", "gramagent", *args],
                                  capture_output=True, env=env, timeout=60, check=False)
            out, err = done.stdout.decode(), done.stderr.decode()
    assert "Safe" in out and "next" in out and "line" in out, err
    for raw in ("\x1b[2J", "\x1b]52", "\x07", "\x9b"):
        assert raw not in out
    assert "\\x1b[2Jcleared \\x1b]52;c;SGk=\\x07clip \\u009b31mred" in out


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",), max_codepoint=0x2FF)))
def test_terminal_text_leaves_no_control_character_a_terminal_obeys(text: str) -> None:
    shown = terminal_text(text)
    for at, char in enumerate(shown):
        if unicodedata.category(char) == "Cc":
            assert char in "\n\t" or (char == "\r" and shown[at + 1:at + 2] == "\n"), repr(shown)
    if not any(unicodedata.category(c) == "Cc" for c in text.replace("\r\n", "")
               .replace("\n", "").replace("\t", "")):
        assert shown == text  # text without such characters is as it was
