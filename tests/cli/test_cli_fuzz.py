"""Hostile gram text and signatures through the CLI (issue 14), and random and hostile command
lines for every command (issue 32): exit codes as documented, never a traceback.

Hypothesis mutates the fixture gram files and writes random text, signatures and JSON Schemas
into ``check``, ``fmt``, ``schema``, ``signature`` and ``harmony parse``: each ends with exit
code 0 (accepted) or 1 (your input is wrong, one stderr line per problem), never with a Python
exception escaping the command. Nesting stays moderate here (the spec parsers' limits on deep
nesting are another item); beyond it, the CLI still ends in a documented exit code.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
import typer.main
from cli_fuzz_support import (
    Playground,
    command_line,
    fifo_writer,
    fresh_process,
    fuzz_environ,
    leaf_commands,
    outcome,
    special_lines,
    stdin_bytes,
)
from cli_fuzz_support import invoke as invoke_line
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gramagent._cli._app import EXIT_ERROR, EXIT_INTERNAL, app
from gramagent.testing import ScriptedServer, reply

FIXTURES = Path(__file__).parent.parent / "fixtures"
GRAM_FILES = sorted(FIXTURES.glob("*.gram"))
SIGNATURES = ["(name::String)==>(::String)", "(a::Integer {minimum: 1})==>(::Array {items: "
              "String})", "(x::String:Null {required: false})~~>(::Boolean)", "()==>(::String)"]
PIECES = ["[", "]", "(", ")", "{", "}", "|", ":", "::", "==>", "~~>", '"', "`", "```", "\\",
          ",", "\n", "// c", "/*", "*/", "-", "1e999", "NaN", "\ud800", "\x00", "é", "Tool",
          "Agent", "String", "Object", "{a: [1, {b: 2}]}"]

runner = CliRunner()
OK_CODES = {0, EXIT_ERROR}


@st.composite
def mutated(draw: st.DrawFn, sources: list[str]) -> str:
    text = draw(st.sampled_from(sources))
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        at = draw(st.integers(min_value=0, max_value=len(text)))
        cut = draw(st.integers(min_value=0, max_value=8))
        piece = draw(st.sampled_from(PIECES) | st.text(max_size=4))
        text = text[:at] + piece + text[at + cut:]
    return text


@st.composite
def nested(draw: st.DrawFn) -> str:
    depth = draw(st.integers(min_value=1, max_value=40))
    return ("(a::Object {x: " + "[" * depth + "1" + "]" * depth + "})==>(::String)")


def invoke(args: list[str], stdin: str | bytes | None = None) -> int:
    result = runner.invoke(app, args, input=stdin)
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{args}: {result.exception!r}")
    assert "Traceback" not in result.output
    return result.exit_code


_SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                     suppress_health_check=[HealthCheck.function_scoped_fixture])
_GRAMS = [p.read_text("utf-8") for p in GRAM_FILES]


@pytest.mark.slow
@_SETTINGS
@given(text=mutated(_GRAMS) | st.text(max_size=200))
def test_gram_text_through_check_and_fmt(text: str, tmp_path: Path) -> None:
    path = tmp_path / "fuzz.gram"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    assert invoke(["check", str(path)]) in OK_CODES
    assert invoke(["fmt", str(path)]) in OK_CODES


@pytest.mark.slow
@_SETTINGS
@given(text=mutated(SIGNATURES) | nested() | st.text(max_size=80))
def test_signatures_through_schema(text: str) -> None:
    if "\x00" in text:  # an argv entry cannot hold NUL
        text = text.replace("\x00", "")
    assert invoke(["schema", text]) in OK_CODES
    assert invoke(["schema", "--strict", text]) in OK_CODES


_schemas = st.recursive(
    st.sampled_from([{"type": "string"}, {"type": "integer"}, {"type": "null"}, {}, True,
                     {"type": "number", "minimum": 1e308}, {"enum": [1, "a", None]}]),
    lambda inner: st.fixed_dictionaries({"type": st.just("object"),
                                         "properties": st.dictionaries(st.text(max_size=5),
                                                                       inner, max_size=3)})
    | st.fixed_dictionaries({"type": st.just("array"), "items": inner})
    | st.dictionaries(st.sampled_from(["type", "anyOf", "items", "$ref", "required"]),
                      inner, max_size=2),
    max_leaves=8)


@pytest.mark.slow
@_SETTINGS
@given(text=_schemas.map(json.dumps) | st.text(max_size=80)
       | _schemas.map(lambda s: json.dumps({"name": "f", "description": "d", "parameters": s})))
def test_json_schemas_through_signature(text: str) -> None:
    assert invoke(["signature", "-"], stdin=text.encode("utf-8", "surrogatepass")) in OK_CODES
    assert invoke(["signature", "--tool", "-"],
                  stdin=text.encode("utf-8", "surrogatepass")) in OK_CODES


@pytest.mark.slow
@_SETTINGS
@given(data=st.binary(max_size=120) | st.text(max_size=120).map(str.encode)
       | st.sampled_from([b"<|start|>assistant<|channel|>commentary to=functions.f"
                          b"<|message|>{\"a\": NaN}<|call|>", b"\xff\xfe", b"<|end|>"]))
def test_harmony_parse_of_any_bytes(data: bytes) -> None:
    assert invoke(["harmony", "parse", "-"], stdin=data) in OK_CODES
    assert invoke(["harmony", "parse", "--check", "-"], stdin=data) in OK_CODES


@pytest.mark.parametrize("depth", [500, 5000])
def test_deep_nesting_ends_in_a_documented_exit_code(depth: int, tmp_path: Path) -> None:
    """Whatever the spec parsers do with it, the CLI prints no traceback."""
    path = tmp_path / "deep.gram"
    path.write_text("[t:Tool {description: " + "[" * depth + "]" * depth + "} | ()==>(::String)]")
    assert invoke(["check", str(path)]) in OK_CODES | {EXIT_INTERNAL}
    signature = "(a::Object {x: " + "[" * depth + "]" * depth + "})==>(::String)"
    assert invoke(["schema", signature]) in OK_CODES | {EXIT_INTERNAL}
    assert invoke(["signature", "-"], stdin="[" * depth + "]" * depth) in OK_CODES


# -- every command, random and hostile command lines (issue 32) ------------------------------

COMMANDS = leaf_commands()
_IDS = [" ".join(words) for words, _ in COMMANDS]


@pytest.fixture(scope="module")
def playground(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Playground]:
    """Hostile files, a scripted model server as OPENAI_BASE_URL, the data, cache and home
    directories in a temporary folder, which is the working directory."""
    root = tmp_path_factory.mktemp("fuzz")
    (root / "home").mkdir()
    with ScriptedServer([reply("ok")], loop=True, record=False) as server, \
            pytest.MonkeyPatch.context() as patch:
        patch.delenv("OPENAI_API_KEY", raising=False)
        for name, value in fuzz_environ(root, server.base_url).items():
            patch.setenv(name, value)
        patch.chdir(root)
        yield Playground(root / "play")


def test_every_command_is_fuzzed() -> None:
    """The commands come from the application itself: a group's commands are walked, so a
    command added later is fuzzed without a change to this file."""
    assert {"run", "chat", "check", "sessions show", "experiment run", "mcp serve",
            "models list", "logs show", "harmony parse"} <= set(_IDS)
    extra = typer.Typer()
    group = typer.Typer()
    group.command("leaf")(lambda: None)
    group.command("other")(lambda: None)
    extra.add_typer(group, name="grp")
    extra.command("top")(lambda: None)
    assert [w for w, _ in leaf_commands(typer.main.get_command(extra))] == [
        ("grp", "leaf"), ("grp", "other"), ("top",)]


def _fuzz_one(words: tuple[str, ...], command: object, rng: random.Random,
              play: Playground) -> None:
    args = command_line(words, command, rng, play.paths())
    result = invoke_line(args, stdin_bytes(rng))
    problem = outcome(result.exit_code, result.exception, result.stdout, result.stderr)
    assert problem is None, f"gramagent {args!r}: {problem}"


@pytest.mark.parametrize(("words", "command"), COMMANDS, ids=_IDS)
@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(rng=st.randoms(use_true_random=False))
def test_hostile_command_lines_a_few(words: tuple[str, ...], command: object,
                                     rng: random.Random, playground: Playground) -> None:
    """The fast suite's share: a dozen command lines per command."""
    _fuzz_one(words, command, rng, playground)


@pytest.mark.slow
@pytest.mark.parametrize(("words", "command"), COMMANDS, ids=_IDS)
@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(rng=st.randoms(use_true_random=False))
def test_hostile_command_lines(words: tuple[str, ...], command: object, rng: random.Random,
                               playground: Playground) -> None:
    """200 random and hostile command lines per command, in process: no exception escapes,
    no traceback, no "internal error", only the documented exit codes."""
    _fuzz_one(words, command, rng, playground)


_SPECIAL_COMMANDS = ("check", "fmt", "signature", "harmony parse", "experiment run",
                     "mcp serve", "run", "ab", "experiment report")


@pytest.mark.slow
@pytest.mark.parametrize("name", _SPECIAL_COMMANDS)
def test_special_files_in_a_fresh_process(name: str, tmp_path: Path) -> None:
    """/dev/zero (read without end), /proc/self/mem (unreadable where it starts) and a FIFO
    (fed by a writer) as an argument and as each path option: each run ends, with a
    documented exit code and no traceback."""
    (tmp_path / "home").mkdir()
    play = Playground(tmp_path / "play")
    words, command = next((w, c) for w, c in COMMANDS if " ".join(w) == name)
    with ScriptedServer([reply("ok")], loop=True, record=False) as server, \
            fifo_writer(play.root / "fifo"):
        environ = fuzz_environ(tmp_path, server.base_url)
        for special, args in special_lines(words, command, play):
            problem = fresh_process(args, environ, timeout=60)
            assert problem is None, f"gramagent {args!r} ({special}): {problem}"
