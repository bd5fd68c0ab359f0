"""The command line's conventions (issue 33 item 7), each through the installed console script
(a pty where it is about the terminal), against the scripted server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import typer
from cli_support import gramagent_command, on_terminal, run_gramagent
from hypothesis import given
from hypothesis import strategies as st

from gramagent._cli import app
from gramagent._runtime.limits import RunLimits
from gramagent._runtime.sessions import SessionStore
from gramagent.mcp._sources import split_sources
from gramagent.testing import ScriptedServer, call, error, reply

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "examples" / "hello_world.gram"
TYPE_PLACEHOLDER = re.compile(r"<(?:bool|int|float|str|path|list\[[^>]*\]|[a-z]+ range)>")


def _commands() -> list[list[str]]:
    """Every command and group of the app, as the words that name it."""
    found: list[list[str]] = []

    def walk(command: typer.core.TyperGroup | typer.core.TyperCommand, words: list[str]) -> None:
        found.append(words)
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, [*words, name])

    walk(typer.main.get_command(app), [])  # type: ignore[arg-type]
    return found


COMMANDS = _commands()


def test_every_command_is_walked() -> None:
    assert ["run"] in COMMANDS and ["sessions", "list"] in COMMANDS and ["ab"] in COMMANDS
    assert len(COMMANDS) > 20


FAST_HELP = ([], ["run"], ["sessions", "list"])
"""The commands whose help the fast suite checks (two subprocesses each); the others are slow."""


@pytest.mark.parametrize("words", [w if w in FAST_HELP else pytest.param(w, marks=pytest.mark.slow)
                                   for w in COMMANDS], ids=lambda w: " ".join(w) or "gramagent")
def test_help_shows_metavars_not_python_types_and_h_is_help(words: list[str],
                                                           tmp_path: Path) -> None:
    """``-h`` prints the help ``--help`` prints; no line of it names a Python type."""
    long = run_gramagent(*words, "--help", cwd=tmp_path)
    short = run_gramagent(*words, "-h", cwd=tmp_path)
    assert long.returncode == short.returncode == 0, long.stderr + short.stderr
    assert short.stdout == long.stdout
    for line in long.stdout.splitlines():
        assert not TYPE_PLACEHOLDER.search(line), line


def test_command_summaries_are_whole(tmp_path: Path) -> None:
    """The command list shows each summary whole (wrapped), never cut with "..."."""
    done = run_gramagent("-h", cwd=tmp_path)
    listing = done.stdout.split("Commands:", 1)[1]
    assert "..." not in listing
    flat = " ".join(listing.split())
    assert "Compare tool libraries on one agent and one dataset (the one- line A/B test)." \
        in flat or "(the one-line A/B test)." in flat
    assert "Ctrl-D or /exit ends." in flat


def test_the_limits_help_shows_their_defaults(tmp_path: Path) -> None:
    text = " ".join(run_gramagent("run", "-h", cwd=tmp_path).stdout.split())
    limits = RunLimits()
    assert f"Model requests per turn (default: {limits.max_iterations})." in text
    assert limits.wall_time is not None
    assert f"(default: {limits.wall_time:g};" in text


@pytest.mark.slow
def test_debug_after_the_subcommand_shows_the_traceback(tmp_path: Path) -> None:
    plain = run_gramagent("run", "missing.gram", "Hi", cwd=tmp_path)
    late = run_gramagent("run", "missing.gram", "Hi", "--debug", cwd=tmp_path)
    assert plain.returncode == late.returncode == 1
    assert "Traceback" not in plain.stderr
    assert "Traceback (most recent call last)" in late.stderr
    assert "ConfigurationError: missing.gram: no such file" in late.stderr
    # after "--" it is a message, not the option
    quoted = run_gramagent("run", "missing.gram", "--", "--debug", cwd=tmp_path)
    assert "Traceback" not in quoted.stderr


def test_shell_completion_is_typers(tmp_path: Path) -> None:
    """The script ``--install-completion`` installs (``source_bash``: what it evaluates), and
    the completion it computes."""
    script = run_gramagent(cwd=tmp_path, env={"_GRAMAGENT_COMPLETE": "source_bash"})
    assert script.returncode == 0 and "_gramagent_completion" in script.stdout
    assert "--install-completion" in run_gramagent("-h", cwd=tmp_path).stdout
    done = run_gramagent(cwd=tmp_path, env={"_GRAMAGENT_COMPLETE": "complete_bash",
                                            "COMP_WORDS": "gramagent sess", "COMP_CWORD": "1"})
    assert done.stdout.split() == ["sessions"]


def _ab(tmp_path: Path, srv: ScriptedServer, *more: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "cases.jsonl").write_text('{"input": "Hi, I\'m Ada"}\n')
    store = str(tmp_path / f"ab{srv.port}.sqlite")
    return run_gramagent("ab", str(HELLO), "-V", "A=gramagent.tools:builtin_library",
                         "-V", "B=gramagent.tools:builtin_library", "--cases", "cases.jsonl",
                         "--model", "openai/m", "--base-url", srv.base_url, "--json",
                         "--store", store, *more,
                         cwd=tmp_path, env={"OPENAI_API_KEY": "sk-test-key"})


@pytest.mark.slow
def test_ab_takes_the_api_and_the_tool_call_mode(tmp_path: Path) -> None:
    """``ab --api responses``: every run's requests go to /responses; ``--tool-call-mode
    constrained``: every request carries its schema (as with ``run``)."""
    with ScriptedServer(lambda path, body: reply("Hello!")) as srv:
        done = _ab(tmp_path, srv, "--api", "responses")
        assert done.returncode == 0, done.stderr
        assert {r.path for r in srv.requests} == {"/v1/responses"}
    with ScriptedServer(lambda path, body: reply("Hello!")) as srv:
        native = _ab(tmp_path, srv)
        assert native.returncode == 0, native.stderr
        assert srv.requests and not any("response_format" in r.body for r in srv.requests)
    with ScriptedServer(lambda path, body: reply('{"answer": "Hello!"}')) as srv:
        constrained = _ab(tmp_path, srv, "--tool-call-mode", "constrained")
        assert constrained.returncode == 0, constrained.stderr
        assert srv.requests and all("response_format" in r.body for r in srv.requests)
    bad = run_gramagent("ab", str(HELLO), "-V", "A=x:y", "--cases", "c.jsonl", "--api",
                        "nope", cwd=tmp_path)
    assert bad.returncode == 2 and "'nope' is not one of" in bad.stderr


def test_a_bad_otel_exporter_is_a_usage_error(tmp_path: Path) -> None:
    done = run_gramagent("run", str(HELLO), "Hi", "--otel", "jaeger", cwd=tmp_path)
    assert done.returncode == 2
    assert "'jaeger' is not one of: console, otlp" in done.stderr


def test_json_prints_a_json_error_object_on_failure(tmp_path: Path) -> None:
    done = run_gramagent("run", "missing.gram", "Hi", "--json", cwd=tmp_path)
    assert done.returncode == 1
    assert json.loads(done.stdout) == {"error": {
        "type": "ConfigurationError",
        "message": "missing.gram: no such file; expected an agent's .gram file"}}
    assert done.stderr.startswith("ConfigurationError: missing.gram")  # and the line
    shown = run_gramagent("sessions", "show", "nope", "--json", cwd=tmp_path,
                          env={"GRAMAGENT_DATA_DIR": str(tmp_path)})
    assert json.loads(shown.stdout)["error"]["type"] == "ConfigurationError"


def test_the_401_hint_is_not_masked_and_json_says_it_too(tmp_path: Path) -> None:
    with ScriptedServer([error(401, "Incorrect API key provided")]) as srv:
        done = run_gramagent("run", str(HELLO), "Hi", "--model", "openai/m", "--base-url",
                             srv.base_url, "--api-key", "sk-wrong-0123456789", "--json",
                             cwd=tmp_path)
    assert done.returncode == 1
    assert "(or api_key=)" in done.stderr and "[REDACTED])" not in done.stderr
    reported = json.loads(done.stdout)["error"]
    assert reported["type"] == "AuthenticationError" and "(or api_key=)" in reported["message"]
    assert "sk-wrong-0123456789" not in done.stdout + done.stderr


def test_the_session_hint_names_the_agent_file(tmp_path: Path) -> None:
    gram = tmp_path / "mail.gram"
    gram.write_text(HELLO.read_text().replace(
        '{description: "Returns', '{requiresApproval: true, description: "Returns').replace(
        "hello_world_agent", "mailer"))
    env = {"GRAMAGENT_DATA_DIR": str(tmp_path / "data"), "OPENAI_API_KEY": "sk-test-key"}
    with ScriptedServer([call("sayHello", {"personName": "Bo"}, id="c1")]) as srv:
        done = run_gramagent("run", "mail.gram", "Greet Bo", "--base-url", srv.base_url,
                             "--session", "s1", cwd=tmp_path, env=env)
    assert done.returncode == 1
    assert "gramagent chat mail.gram --session s1 on a terminal" in done.stderr
    shown = run_gramagent("sessions", "show", "s1", cwd=tmp_path, env=env)
    assert "gramagent chat AGENT.gram --session s1 (the file of agent mailer)" in shown.stdout


@given(st.lists(st.tuples(st.text("abc:. _-", min_size=1, max_size=8),
                          st.sampled_from(["", "'x; y'", '"a;b"', "'p;'"])),
                min_size=1, max_size=4))
def test_a_separator_inside_quotes_does_not_split_the_tools(
        parts: list[tuple[str, str]]) -> None:
    """Sources joined by ``;`` come back as written, quoted ``;`` and all."""
    sources = [word + quoted for word, quoted in parts]
    assert split_sources(";".join(sources)) == sources


@pytest.mark.slow
def test_a_quoted_separator_reaches_the_mcp_command(tmp_path: Path) -> None:
    """The quoted ``;`` stays in the server's command: the error names the whole command,
    not a half of it read as a Python module."""
    done = run_gramagent("tools", "--tools",
                         "mcp:stdio:python3 -c 'import sys; sys.exit(3)'", cwd=tmp_path)
    assert done.returncode == 1
    assert "sys.exit(3)" in done.stderr and "cannot import" not in done.stderr


def test_harmony_parse_on_a_terminal_says_it_reads_stdin(tmp_path: Path) -> None:
    env = {**os.environ, "NO_COLOR": "1"}
    out, err = on_terminal(["harmony", "parse"], env, stdin=b"\x04", cwd=tmp_path)
    assert "reading Harmony text from stdin" in err and "Ctrl-D" in err


def test_a_non_utf8_argument_is_named(tmp_path: Path) -> None:
    done = subprocess.run([*gramagent_command(), "run", b"agent\xff.gram", "Hi"],
                          capture_output=True, cwd=tmp_path, timeout=60, check=False)
    err = done.stderr.decode()
    assert done.returncode == 2
    assert 'argument 2: "agent\\xff.gram" is not valid UTF-8 (byte 0xff at offset 5)' in err
    assert "surrogate" not in err


def test_piped_output_is_not_wrapped_at_80_columns(tmp_path: Path) -> None:
    name = "a-session-whose-name-is-long-" * 5
    store = SessionStore(tmp_path / "sessions.sqlite3")
    from gramagent._messages import Conversation, UserMessage

    store.save(name, Conversation([UserMessage(content="x " * 120)]), agent="greeter")
    env = {"GRAMAGENT_DATA_DIR": str(tmp_path)}
    environ = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    listed = subprocess.run([*gramagent_command(), "sessions", "list"], capture_output=True,
                            text=True, cwd=tmp_path, env={**environ, **env}, timeout=60,
                            check=False)
    assert listed.returncode == 0, listed.stderr
    assert any(name in line and "greeter" in line for line in listed.stdout.splitlines())
    shown = subprocess.run([*gramagent_command(), "sessions", "show", name],
                           capture_output=True, text=True, cwd=tmp_path,
                           env={**environ, **env}, timeout=60, check=False)
    assert len(shown.stdout.splitlines()) == 1


@given(key=st.sampled_from(["api_key", "api-key", "password", "access_token"]),
       value=st.text(st.characters(min_codepoint=33, max_codepoint=126,
                                   blacklist_characters="\"',;}&)]"), min_size=6),
       closing=st.sampled_from([")", "]", ") for the key", "], see the docs"]))
def test_the_masker_masks_values_and_leaves_a_hints_closing_bracket(
        key: str, value: str, closing: str) -> None:
    """A secret after ``key=`` is masked whatever it is; ``key=`` followed by a closing
    bracket (a hint naming the argument, "(or api_key=)") has no secret to mask."""
    from gramagent._logs import MASK, redact

    assert redact(f"check {key}={value} now") == f"check {key}={MASK} now"
    hint = f"(or {key}={closing}"
    assert redact(hint) == hint
