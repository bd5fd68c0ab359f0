"""``gramagent fmt`` of experiment files (issue 33, item 6): the canonical form reads as the
same experiment, is a fixed point and keeps every comment; ``check`` and ``fmt`` agree on
what a file is."""

from __future__ import annotations

from extras import require

require("experiments")

import dataclasses
import os
import stat
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gramagent._cli import app
from gramagent._models.chat import TOOL_CALL_MODES
from gramagent._spec.gram.syntax import (
    K_COMMENT,
    K_DQ_NAME,
    K_QUOTED_NAME,
    K_STRING,
    K_TAGGED,
    descendants,
    parse,
)
from gramagent.errors import ExperimentError
from gramagent.experiments import Experiment, load_experiment
from gramagent.experiments._gramformat import format_experiment, format_experiment_file

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "ab" / "experiment.gram"
AGENT = '''[sayHello:Tool {description: "Greets."} | (personName::String)==>(::String)]

[greeter:Agent {instruction: "Greet.", model: "openai/scripted"} | sayHello]
'''
CASES = '{"id": "a", "input": "Hi, I am Ann", "expected": "Ann"}\n'

runner = CliRunner()


@pytest.fixture(scope="module")
def directory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with the agent and the cases the generated experiments name."""
    path = tmp_path_factory.mktemp("experiments")
    (path / "agent.gram").write_text(AGENT)
    (path / "cases.jsonl").write_text(CASES)
    return path


def read(directory: Path, text: str, name: str = "e.gram") -> Experiment:
    """The experiment of ``text`` (its source left out: the file names differ)."""
    path = directory / name
    path.write_text(text)
    return dataclasses.replace(load_experiment(path), source=None)


def comments(text: str) -> list[str]:
    src = text.encode()
    return [src[n.start_byte: n.end_byte].decode() for n in descendants(parse(src).root_node)
            if n.kind_id == K_COMMENT]


# --------------------------------------------------------------------------------------------
# Generated experiment files: every value in several spellings, any layout, comments anywhere
# --------------------------------------------------------------------------------------------

_WORDS = st.text("abcdefghij XYZ0123456789:/.-_", min_size=1, max_size=12).filter(str.strip)
_SEPARATORS = st.sampled_from([", ", ",\n  ", " ,\n", ",", ",\n\n    "])


@st.composite
def string(draw: st.DrawFn, text: str | None = None, *, lines: bool = False) -> str:
    """A gram string literal (of ``text``, or of a drawn one) in one of its spellings."""
    if text is None:
        text = draw(_WORDS)
        if lines and draw(st.booleans()):
            text = text.strip() + "\n" + draw(_WORDS).strip()
            if text.strip() and all(part.strip() for part in text.split("\n")):
                text = "\n".join(part.strip() for part in text.split("\n"))
                if draw(st.booleans()):  # fenced, its lines indented
                    return "```\n" + "".join(f"    {p}\n" for p in text.split("\n")) + "  ```"
            return '"' + opening_slash_escaped(text.replace("\n", "\\n")) + '"'
    quote = draw(st.sampled_from(['"{}"', "'{}'", "`{}`", "md`{}`"]))
    return quote.format(opening_slash_escaped(text))


def opening_slash_escaped(text: str) -> str:
    """``text`` as a user writes it in quotes: a "//" that opens it would read as a comment,
    so its first slash is written ``\\/``."""
    stripped = text.lstrip(" ")
    if stripped.startswith("//"):
        return text[: len(text) - len(stripped)] + "\\" + stripped
    return text


@st.composite
def integer(draw: st.DrawFn, low: int, high: int) -> str:
    value = draw(st.integers(low, high))
    return hex(value) if draw(st.booleans()) else str(value)


@st.composite
def decimal(draw: st.DrawFn) -> str:
    return draw(st.sampled_from(["0.05", "0.050", "0.1", "0.25", "0.5", "0.01"]))


def boolean() -> st.SearchStrategy[str]:
    return st.sampled_from(["true", "false"])


@st.composite
def key(draw: st.DrawFn, name: str) -> str:
    if "/" in name:
        return draw(st.sampled_from([f"`{name}`", f'"{name}"']))
    return draw(st.sampled_from([name, f"`{name}`", f'"{name}"']))


@st.composite
def mapping(draw: st.DrawFn, entries: dict[str, st.SearchStrategy[str]]) -> str:
    names = draw(st.lists(st.sampled_from(sorted(entries)), min_size=1, unique=True))
    parts = [f"{draw(key(n))}: {draw(entries[n])}" for n in names]
    return "{" + draw(st.sampled_from([", ", ",", " , "])).join(parts) + "}"


@st.composite
def record(draw: st.DrawFn, required: dict[str, str], optional: dict[str, st.SearchStrategy[str]]
           ) -> str:
    """A record: the required entries and some optional ones, in any order and layout."""
    names = draw(st.lists(st.sampled_from(sorted(optional)), unique=True)) if optional else []
    entries = [f"{draw(key(k))}: {v}" for k, v in required.items()]
    entries += [f"{draw(key(k))}: {draw(optional[k])}" for k in names]
    entries = draw(st.permutations(entries))
    if not entries:
        return "{}"
    return "{" + draw(st.sampled_from(["", "\n  ", " "])) + draw(_SEPARATORS).join(entries) + "}"


def name(text: str) -> st.SearchStrategy[str]:
    return st.sampled_from([text, f"`{text}`"])


_MODEL = "openai/scripted"

_VARIANT_VALUES: dict[str, st.SearchStrategy[str]] = {
    "library": string("ab_libs:polite"),
    "model": string(_MODEL),
    "api": st.sampled_from(["chat", "functions", "responses", "harmony"]).flatmap(string),
    "base_url": string("http://127.0.0.1:9/v1"),
    "instruction": string(lines=True),
    "limits": mapping({"max_iterations": integer(1, 9), "wall_time": integer(1, 60)}),
    "tool_call_mode": st.sampled_from(TOOL_CALL_MODES).flatmap(string),
    "settings": mapping({"temperature": decimal(), "seed": integer(0, 9),
                         "stop": string()}),
}

_EVALUATORS: dict[str, tuple[dict[str, st.SearchStrategy[str]],
                             dict[str, st.SearchStrategy[str]]]] = {
    # kind: (required options, optional ones)
    "contains": ({}, {"value": string(), "ignore_case": boolean()}),
    "exact": ({}, {"expected": string("answer"), "ignore_case": boolean()}),
    "regex": ({"pattern": string("[a-z]+")}, {"ignore_case": boolean()}),
    "tool_called": ({"tool": string("sayHello")},
                    {"arguments": mapping({"personName": string()})}),
    "no_tool_errors": ({}, {}),
    "latency_under": ({"ms": integer(1, 9999)}, {}),
    "json_schema": ({"schema": st.sampled_from(['json`{"type": "object"}`',
                                                'json`{"type":"string",  "minLength": 1}`'])},
                    {}),
}


@st.composite
def experiment_text(draw: st.DrawFn) -> str:
    """An experiment file that loads, in any spelling and layout."""
    variants = draw(st.lists(st.sampled_from(["A", "B", "base-line", "v_2"]), min_size=2,
                             max_size=3, unique=True))
    optional: dict[str, st.SearchStrategy[str]] = {
        "repeats": integer(1, 3), "baseline": st.sampled_from(variants).flatmap(string),
        "alpha": decimal(), "seed": integer(0, 99), "store": string("x.sqlite"),
        "rate_limits": mapping({_MODEL: integer(1, 9)}), "evaluator_timeout": integer(1, 60),
        "engine": string("local"), "stop_when_decided": boolean(),
        "prices": mapping({_MODEL: string("0.15,0.6")}),
    }
    head = draw(record({"agent": draw(string("agent.gram")),
                        "cases": draw(string("cases.jsonl"))}, optional))
    members = []
    for variant in variants:
        body = draw(record({}, _VARIANT_VALUES))
        members.append(f"[{draw(name(variant))}:Variant {body}]"
                       if body != "{}" or draw(st.booleans()) else f"[{variant}:Variant]")
    for evaluator in draw(st.lists(st.sampled_from(["greets", "called", "clean", "quick"]),
                                   max_size=3, unique=True)):
        kind = draw(st.sampled_from(sorted(_EVALUATORS)))
        required, optional = _EVALUATORS[kind]
        body = draw(record({"kind": draw(string(kind)),
                            **{k: draw(v) for k, v in required.items()}}, optional))
        members.append(f"[{draw(name(evaluator))}:Evaluator {body}]")
    members = draw(st.permutations(members))
    bar = draw(st.sampled_from([" |", " |\n  ", "\n| "]))
    return (f"[{draw(name('greetings'))}:Experiment {head}{bar}"
            + draw(_SEPARATORS).join(members) + draw(st.sampled_from(["]", "\n]", " ]"]))
            + "\n")


_ATOMS = frozenset({K_STRING, K_TAGGED, K_COMMENT, K_QUOTED_NAME, K_DQ_NAME})


def token_ends(text: str) -> list[int]:
    """Where a comment may go: after every token (strings whole)."""
    src = text.encode()
    ends = set()
    stack = [parse(src).root_node]
    while stack:
        node = stack.pop()
        if node.kind_id in _ATOMS or not node.child_count:
            ends.add(node.end_byte)
        else:
            stack.extend(node.children)
    return sorted(e for e in ends if 0 < e < len(src.rstrip()))


@st.composite
def commented(draw: st.DrawFn, base: str) -> str:
    """``base`` with comments at token ends: at the end of a line, on a line of their own,
    or followed by a blank line (also a header, and comments after the last pattern)."""
    src = base.encode()
    ends = draw(st.lists(st.sampled_from(token_ends(base)), min_size=1, max_size=10,
                         unique=True))
    for i, end in enumerate(sorted(ends, reverse=True)):
        form = draw(st.sampled_from([" // c{}\n", "  // c{}\n\n", "\n// c{}\n"]))
        src = src[:end] + form.format(len(ends) - i).encode() + src[end:]
    text = src.decode()
    if draw(st.booleans()):
        text = "// header\n\n" + text
    if draw(st.booleans()):
        text += "// the end\n"
    return text


@st.composite
def experiment_files(draw: st.DrawFn) -> tuple[str, str, bool]:
    """A generated experiment text, the same with comments, and whether the first was in
    canonical form already."""
    base = draw(experiment_text())
    canonical = draw(st.booleans())
    if canonical:
        base = format_experiment(base).text
    return base, draw(commented(base)), canonical


@pytest.mark.slow
@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(experiment_files())
def test_fmt_of_any_experiment_file_reads_the_same_is_a_fixed_point_and_keeps_comments(
        directory: Path, case: tuple[str, str, bool]) -> None:
    base, text, canonical = case
    experiment = read(directory, base)
    assert read(directory, text) == experiment  # the comments change nothing
    formatted = format_experiment(text, file="e.gram")
    assert formatted.dropped == ()
    out = formatted.text
    assert read(directory, out, "f.gram") == experiment
    assert format_experiment(out).text == out
    assert Counter(comments(out)) == Counter(comments(text))
    if canonical:
        assert comments(out) == comments(text)


@pytest.mark.slow
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(experiment_text())
def test_fmt_of_any_experiment_file_without_comments(directory: Path, text: str) -> None:
    """The canonical form: one layout whatever the spelling, the top-level record one entry
    a line, nested ones on a line of their own up to 100 columns."""
    out = format_experiment(text).text
    assert read(directory, out, "f.gram") == read(directory, text)
    assert format_experiment(out).text == out
    lines = out.splitlines()
    assert lines[0].startswith("[greetings:Experiment {") and lines[-1] == "]"
    assert lines[1].startswith("  agent: ") and lines[2].startswith("  cases: ")
    assert all(len(line) <= 100 for line in lines if "```" not in line)


def test_a_comment_at_every_token_end_of_the_shipped_example_is_kept(tmp_path: Path) -> None:
    """One comment at each token end of examples/ab/experiment.gram (one text each)."""
    for name in ("hello.gram", "cases.jsonl", "greeters.py"):
        (tmp_path / name).write_bytes((EXAMPLE.parent / name).read_bytes())
    base = EXAMPLE.read_text()
    experiment = read(tmp_path, base)
    src = base.encode()
    ends = token_ends(base)
    assert len(ends) > 100
    for end in ends:
        text = (src[:end] + b" // here\n" + src[end:]).decode()
        formatted = format_experiment(text)
        assert formatted.dropped == (), text
        assert "// here\n" in formatted.text, text
        assert read(tmp_path, formatted.text, "f.gram") == experiment, text
        assert format_experiment(formatted.text).text == formatted.text, text


# --------------------------------------------------------------------------------------------
# The shipped example and the command
# --------------------------------------------------------------------------------------------

def test_the_shipped_experiment_is_canonical() -> None:
    """``fmt`` prints examples/ab/experiment.gram unchanged and ``--check`` passes quietly."""
    assert format_experiment_file(EXAMPLE).text == EXAMPLE.read_text()
    done = runner.invoke(app, ["fmt", str(EXAMPLE)])
    assert (done.exit_code, done.stdout, done.stderr) == (0, EXAMPLE.read_text(), "")
    checked = runner.invoke(app, ["fmt", "--check", str(EXAMPLE)])
    assert (checked.exit_code, checked.stdout, checked.stderr) == (0, "", "")


MESSY = """// A/B
[greetings:Experiment {cases: 'cases.jsonl', alpha: 0.050,
  agent: "agent.gram",  // beside this file
  rate_limits: {`openai/scripted`: 0x4}} |
  // the baseline
  [A:Variant {settings: {temperature: 0}, library: "ab_libs:polite"}], [B:Variant
  {library: "ab_libs:terse"}],
  [greets:Evaluator {value: "Hello", kind: "contains"}]]
"""

MESSY_FORMATTED = """// A/B
[greetings:Experiment {
  agent: "agent.gram",  // beside this file
  cases: "cases.jsonl",
  alpha: 0.05,
  rate_limits: {"openai/scripted": 4}
} |
  // the baseline
  [A:Variant {library: "ab_libs:polite", settings: {temperature: 0}}],
  [B:Variant {library: "ab_libs:terse"}],
  [greets:Evaluator {kind: "contains", value: "Hello"}]
]
"""


@pytest.fixture
def messy(directory: Path, tmp_path: Path) -> Iterator[Path]:
    for name in ("agent.gram", "cases.jsonl"):
        (tmp_path / name).write_bytes((directory / name).read_bytes())
    path = tmp_path / "greetings.gram"
    path.write_text(MESSY)
    yield path


def test_fmt_prints_the_canonical_form_of_an_experiment_file(messy: Path) -> None:
    done = runner.invoke(app, ["fmt", str(messy)])
    assert (done.exit_code, done.stdout, done.stderr) == (0, MESSY_FORMATTED, "")
    assert read(messy.parent, MESSY_FORMATTED, "f.gram") == read(messy.parent, MESSY)
    checked = runner.invoke(app, ["fmt", "--check", str(messy)])
    assert (checked.exit_code, checked.stdout) == (1, "")
    assert checked.stderr == f"{messy}: not in canonical form\n"


def test_fmt_write_rewrites_an_experiment_file_atomically(messy: Path) -> None:
    """--write replaces the file with what fmt prints (same permissions, no leftovers);
    --check then passes; writing again says it is canonical."""
    os.chmod(messy, 0o640)
    result = runner.invoke(app, ["fmt", "--write", str(messy)])
    assert (result.exit_code, result.stderr) == (0, f"{messy}: formatted\n")
    assert messy.read_text() == MESSY_FORMATTED
    assert stat.S_IMODE(messy.stat().st_mode) == 0o640
    assert sorted(p.name for p in messy.parent.iterdir()) == [
        "agent.gram", "cases.jsonl", "greetings.gram"]
    assert runner.invoke(app, ["fmt", "--check", str(messy)]).exit_code == 0
    again = runner.invoke(app, ["fmt", "--write", str(messy)])
    assert (again.exit_code, again.stderr) == (0, f"{messy}: already canonical\n")


def test_fmt_reports_an_experiment_files_own_problems_and_formats_nothing(messy: Path) -> None:
    """Problems of the file itself are reported as check reports them; the agent and cases
    it names are not read (formatting one file reads one file)."""
    messy.write_text(MESSY.replace("alpha: 0.050", "alpha: 2, colour: 1"))
    done = runner.invoke(app, ["fmt", "--write", str(messy)])
    assert done.exit_code == 1 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"{messy}:2:53: experiment: alpha must be a number between 0 and 1",
        f"{messy}:2:56: experiment: unknown property 'colour' (expected agent, agent_name, "
        "cases, repeats, baseline, alpha, seed, store, rate_limits, evaluator_timeout, engine, "
        "stop_when_decided, prices)",
        "2 problems found"]
    assert "colour" in messy.read_text()
    messy.write_text(MESSY.replace("cases.jsonl", "missing.jsonl"))
    assert runner.invoke(app, ["fmt", "--check", str(messy)]).exit_code == 1  # not canonical
    assert runner.invoke(app, ["fmt", str(messy)]).stdout == MESSY_FORMATTED.replace(
        "cases.jsonl", "missing.jsonl")
    with pytest.raises(ExperimentError, match="missing.jsonl"):
        load_experiment(messy)


def test_the_example_of_docs_format_md_is_what_fmt_prints(tmp_path: Path) -> None:
    """docs/format.md shows a file (``$ cat ab.gram``) and what ``fmt`` prints for it."""
    doc = (ROOT / "docs" / "format.md").read_text()
    shown = doc[doc.index("$ cat ab.gram\n"):]
    given_text = shown[len("$ cat ab.gram\n"): shown.index("$ gramagent fmt ab.gram\n")]
    printed = shown[shown.index("$ gramagent fmt ab.gram\n") + len("$ gramagent fmt ab.gram\n"):
                    shown.index("$ gramagent fmt --check ab.gram\n")]
    path = tmp_path / "ab.gram"
    path.write_text(given_text)
    done = runner.invoke(app, ["fmt", str(path)])
    assert (done.exit_code, done.stdout) == (0, printed)
    for name in ("hello.gram", "cases.jsonl", "greeters.py"):
        (tmp_path / name).write_bytes((EXAMPLE.parent / name).read_bytes())
    assert read(tmp_path, printed, "f.gram") == read(tmp_path, given_text)


NESTED = MESSY.replace('[greets:Evaluator {value: "Hello", kind: "contains"}]',
                      '[greets:Evaluator {value: "Hello", kind: "contains"} | (x), [y:Z]]')


def test_a_variant_or_evaluator_with_elements_is_refused_by_check_and_fmt(messy: Path
                                                                          ) -> None:
    """Elements after a variant's or an evaluator's '|' mean nothing: both commands say so
    (the reader used to pass over them, and fmt could not have written them)."""
    messy.write_text(NESTED)
    message = (f"{messy}:8:58: an evaluator has no elements after '|': its settings go in "
               "its record {...}")
    for command in ("check", "fmt"):
        done = runner.invoke(app, [command, str(messy)])
        assert (done.exit_code, done.stderr.splitlines()) == (1, [message, "1 problem found"])


AGENT_WITH_A_TYPO = '[a:Agnet {instruction: "i", model: "openai/x"}]\n'
BOTH = AGENT + "\n" + MESSY
BROKEN = MESSY.replace("alpha: 0.050,", "alpha: 0.050,,")


@pytest.mark.parametrize("text", [AGENT, MESSY, AGENT_WITH_A_TYPO, BOTH, BROKEN,
                                  MESSY.replace("agent.gram", "nowhere.gram"),
                                  MESSY.replace('kind: "contains"', 'kind: "contain"'),
                                  "// nothing but a comment\n",
                                  "[x:Experiment]\n", NESTED])
def test_check_and_fmt_agree_on_what_a_file_is(messy: Path, text: str) -> None:
    """Whatever check accepts, fmt formats, reading it the same way (an agent file as one,
    an experiment file as one); every problem fmt reports, check reports too."""
    messy.write_text(text)
    checked = runner.invoke(app, ["check", str(messy)])
    formatted = runner.invoke(app, ["fmt", str(messy)])
    assert "Traceback" not in checked.output + formatted.output
    if checked.exit_code == 0:
        assert formatted.exit_code == 0, formatted.stderr
        assert ("[greetings:Experiment {\n" in formatted.stdout) == (
            "1 experiment" in checked.stdout)
    fmt_problems = set(formatted.stderr.splitlines()[:-1]) if formatted.exit_code else set()
    assert fmt_problems <= set(checked.stderr.splitlines()), (checked.stderr, formatted.stderr)
    assert "unknown type 'Experiment'" not in checked.stderr + formatted.stderr
