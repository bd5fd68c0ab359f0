"""Tests for the spec commands of the CLI: check, fmt, schema, signature."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from cli_support import run_gramagent
from extras import needs
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gramagent._cli import app
from gramagent._spec.gram.text import load_file, load_gram

ROOT = Path(__file__).resolve().parent.parent.parent
EXAMPLES = ROOT / "examples"
FIXTURES = ROOT / "tests" / "fixtures"

runner = CliRunner()

BROKEN = ('[t:Tool {description: "d"} | (p::Strng)==>(::String)]\n'
          '[a:Agent {instruction: "i"} | t, t]\n'
          '[u:Tool {description: "d" x: 1} | ()==>(::String)]\n')


# --------------------------------------------------------------------------------------------
# check
# --------------------------------------------------------------------------------------------

def test_check_ok() -> None:
    """Valid files: exit 0 and one OK line with counts."""
    result = runner.invoke(app, ["check", str(EXAMPLES / "hello_world.gram"),
                                 str(EXAMPLES / "hello_goodbye.gram")])
    assert result.exit_code == 0, result.output
    assert result.stdout == "OK: 2 files, 2 agents, 3 tools\n"


def test_check_reports_every_problem_of_every_file(tmp_path: Path) -> None:
    """Invalid files: exit 1 and one file:line:col: message line per problem."""
    broken = tmp_path / "broken.gram"
    broken.write_text(BROKEN)
    other = tmp_path / "other.gram"
    other.write_text('[a:Agent {instruction: "i", model: "m"} | nope]\n')
    result = runner.invoke(app, ["check", str(broken), str(EXAMPLES / "hello_world.gram"),
                                 str(other)])
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert lines[0].startswith(f"{broken}:1:34: parameter 'p': unknown type 'Strng'")
    assert lines[1] == f'{broken}:2:1: agent \'a\': missing model, e.g. model: ' \
                       '"openai/gpt-4o-mini"'
    assert lines[2] == f"{broken}:2:34: agent 'a': duplicate tool 't' (first at 2:31)"
    assert lines[3] == f"{broken}:3:27: unexpected 'x': expected ',' or '}}'"
    assert lines[4].startswith(f"{other}:1:43: agent 'a': unknown tool 'nope'")
    assert lines[5] == "5 problems found"
    assert result.stdout == ""


def test_check_missing_file(tmp_path: Path) -> None:
    """A file that cannot be read is a problem like any other."""
    result = runner.invoke(app, ["check", str(tmp_path / "none.gram")])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"{tmp_path / 'none.gram'}: cannot read the file")


# --------------------------------------------------------------------------------------------
# fmt
# --------------------------------------------------------------------------------------------

def test_fmt_prints_canonical_gram() -> None:
    """fmt prints the canonical form; the canonical example is unchanged."""
    path = EXAMPLES / "hello_goodbye.gram"
    result = runner.invoke(app, ["fmt", str(path)])
    assert result.exit_code == 0, result.output
    assert result.stdout == path.read_text()
    assert runner.invoke(app, ["fmt", "--check", str(path)]).exit_code == 0


NOT_CANONICAL = (EXAMPLES / "hello_world.gram").read_text().replace(
    '{default: "world"}', '{default:"world"}')
"""hello_world.gram with the spacing fmt changes: the same agent, not in canonical form."""


def test_fmt_check_flags_non_canonical_files(tmp_path: Path) -> None:
    """--check exits 1 when formatting would change the file, naming it on stderr only."""
    path = tmp_path / "hello.gram"
    path.write_text(NOT_CANONICAL)
    result = runner.invoke(app, ["fmt", "--check", str(path)])
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == f"{path}: not in canonical form\n"


def test_fmt_write_rewrites_atomically_and_keeps_the_mode(tmp_path: Path) -> None:
    """--write replaces the file (same content as printed, same permissions, no leftovers)."""
    path = tmp_path / "hello.gram"
    path.write_text(NOT_CANONICAL)
    os.chmod(path, 0o640)
    printed = runner.invoke(app, ["fmt", str(path)]).stdout
    result = runner.invoke(app, ["fmt", "--write", str(path)])
    assert result.exit_code == 0, result.output
    assert path.read_text() == printed
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hello.gram"]
    assert load_file(path) == load_file(EXAMPLES / "hello_world.gram")
    again = runner.invoke(app, ["fmt", "--write", str(path)])
    assert "already canonical" in again.stderr


COMMENTED = """\
// Weather tools.

[weather:Agent {
  // the model to use
  model: "openai/gpt-4o-mini",
  instruction: "Answer weather questions."
} |
  getForecast  // the only tool
]

// One tool.
[getForecast:Tool {description: "Forecast"} |
  (city::String)==>(::Forecast),  // a named result type
  // the result
  [Forecast:Object |
    (summary::String)  // one line
  ]
]
"""


def test_fmt_keeps_comments_and_names(tmp_path: Path) -> None:
    """fmt --write keeps comments and the user's type names; the result is stable."""
    path = tmp_path / "c.gram"
    path.write_text(COMMENTED)
    result = runner.invoke(app, ["fmt", "--write", str(path)])
    assert result.exit_code == 0, result.output
    assert path.read_text() == """\
// Weather tools.

[getForecast:Tool {description: "Forecast"} |
  (city::String)==>(::Forecast),  // a named result type
  // the result
  [Forecast:Object |
    (summary::String)  // one line
  ]
]

[weather:Agent {
  instruction: "Answer weather questions.",
  // the model to use
  model: "openai/gpt-4o-mini"
} |
  getForecast  // the only tool
]
""".replace("[getForecast:Tool", "// One tool.\n[getForecast:Tool")
    assert load_file(path) == load_gram(COMMENTED)
    assert runner.invoke(app, ["fmt", "--check", str(path)]).exit_code == 0


def test_fmt_write_keeps_comments_inside_nodes_and_records(tmp_path: Path) -> None:
    """A comment inside a parameter's node and one on a tool's description are kept by
    --write without --force, each next to its entry; nothing is reported."""
    path = tmp_path / "c.gram"
    path.write_text('// kept\n[t:Tool {description: "d" // shown to the model\n} |\n'
                    '  (a::String {default: "x" // when not given\n  })==>(::String)\n]\n')
    result = runner.invoke(app, ["fmt", "--write", str(path)])
    assert result.exit_code == 0, result.output
    assert result.stderr == f"{path}: formatted\n"
    assert path.read_text() == """\
// kept
[t:Tool {
  description: "d"  // shown to the model
} |
  (a::String {
    default: "x"  // when not given
  })
  ==>(::String)
]
"""
    assert runner.invoke(app, ["fmt", "--check", str(path)]).exit_code == 0
    printed = runner.invoke(app, ["fmt", str(path)])
    assert (printed.exit_code, printed.stderr, printed.stdout) == (0, "", path.read_text())


# --------------------------------------------------------------------------------------------
# schema and signature
# --------------------------------------------------------------------------------------------

def test_schema_prints_json_schema() -> None:
    """schema prints the arguments schema of a signature."""
    result = runner.invoke(app, ["schema", '(a::String)==>(b::Integer {default:3})==>(::String)'])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "integer", "default": 3}},
        "required": ["a"],
    }


def test_schema_strict() -> None:
    """--strict prints the strict-mode schema; what changed goes to stderr."""
    result = runner.invoke(app, ["schema", "--strict",
                                 '(a::String)==>(b::Integer {default:3})==>(::String)'])
    assert result.exit_code == 0, result.output
    schema = json.loads(result.stdout)
    assert schema["required"] == ["a", "b"]
    assert schema["additionalProperties"] is False
    assert "strict:" in result.stderr


def test_schema_rejects_a_bad_signature() -> None:
    """Errors are positioned in the signature text."""
    result = runner.invoke(app, ["schema", "(a::Strng)==>(::String)"])
    assert result.exit_code == 1
    assert "<signature>:1:5: parameter 'a': unknown type 'Strng'" in result.stderr


def test_signature_of_a_schema_file(tmp_path: Path) -> None:
    """signature prints gram that reads back to the same schema."""
    result = runner.invoke(app, ["signature", str(FIXTURES / "chart_tool.json")])
    assert result.exit_code == 0, result.output
    assert "(series::Array {items: SeriesItem, minItems: 1, maxItems: 10})" in result.stdout
    schema = json.loads((FIXTURES / "chart_tool.json").read_text())
    back = runner.invoke(app, ["schema", result.stdout])
    assert json.loads(back.stdout) == schema


def test_signature_of_a_function_definition_as_a_tool(tmp_path: Path) -> None:
    """An OpenAI tool definition (from stdin) becomes a whole tool pattern with --tool."""
    definition = {"type": "function", "function": {
        "name": "get_weather", "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}}
    result = runner.invoke(app, ["signature", "-", "--tool"], input=json.dumps(definition))
    assert result.exit_code == 0, result.output
    assert result.stdout == ('[get_weather:Tool {description: "Weather for a city"} |\n'
                             "  (city::String)==>(::String)\n]\n")
    plain = runner.invoke(app, ["signature", "-"], input=json.dumps(definition))
    assert plain.stdout == "(city::String)==>(::String)\n"


@pytest.mark.parametrize(("content", "expected"), [
    ('{"type": "object", "properties": {"a": {"$ref": "#/x"}}}',
     "unsupported keyword '$ref'"),
    ('{"type": "object",\n "properties": {,}}', "<in>:2:17: invalid JSON"),
])
def test_signature_errors(tmp_path: Path, content: str, expected: str) -> None:
    """Unsupported keywords and invalid JSON are one clear line each."""
    path = tmp_path / "in.json"
    path.write_text(content)
    result = runner.invoke(app, ["signature", str(path)])
    assert result.exit_code == 1
    assert expected.replace("<in>", str(path)) in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("example", [
    pytest.param(name, marks=needs("experiments")) if name.endswith("experiment.gram") else name
    for name in sorted(str(p.relative_to(EXAMPLES)) for p in EXAMPLES.rglob("*.gram"))])
def test_every_example_is_canonical_and_check_prints_nothing(example: str,
                                                            tmp_path: Path) -> None:
    """The examples (hello_world is the README's showcase; agent, tool and experiment files,
    examples/ab/ included) are what ``fmt`` writes; for a canonical file ``fmt --check``
    prints nothing, as its help says."""
    done = run_gramagent("fmt", "--check", str(EXAMPLES / example), cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    help_text = run_gramagent("fmt", "--help", cwd=tmp_path).stdout
    assert "Print nothing if the file is canonical" in " ".join(help_text.split())


CHART_SIGNATURE_WITH_COMMAS = (
    '(series::Array {items: SeriesItem})==>(::String), '
    '[SeriesItem:Object | (name::String), (y_field::String)]')
"""A signature followed by its type pattern as written inside a tool pattern: a comma."""


@pytest.mark.slow
def test_schema_takes_type_patterns_separated_by_commas(tmp_path: Path) -> None:
    with_commas = run_gramagent("schema", CHART_SIGNATURE_WITH_COMMAS, cwd=tmp_path)
    assert with_commas.returncode == 0, with_commas.stderr
    with_space = run_gramagent("schema", CHART_SIGNATURE_WITH_COMMAS.replace("), [", ") ["),
                               cwd=tmp_path)
    assert json.loads(with_commas.stdout) == json.loads(with_space.stdout)
    items = json.loads(with_commas.stdout)["properties"]["series"]["items"]
    assert set(items["properties"]) == {"name", "y_field"}


def test_a_problem_in_comma_separated_text_points_into_the_text_as_given() -> None:
    from gramagent._spec.signature import parse_signature
    from gramagent.errors import SpecError

    text = CHART_SIGNATURE_WITH_COMMAS.replace("(y_field::String)", "(y_field::Strin)")
    with pytest.raises(SpecError) as info:
        parse_signature(text, file="<signature>")
    [problem] = info.value.diagnostics
    assert (problem.line, problem.column) == (1, text.index("Strin)") + 1)
    assert "did you mean 'String'" in problem.message


@pytest.mark.slow
def test_schema_of_a_file_prints_its_tools_schemas(tmp_path: Path) -> None:
    from gramagent._spec.gram.text import load_file

    tools = {t.name: t.schema for t in load_file(EXAMPLES / "tools.gram").tools}
    every = run_gramagent("schema", str(EXAMPLES / "tools.gram"), cwd=tmp_path)
    assert every.returncode == 0, every.stderr
    assert json.loads(every.stdout) == tools
    one = run_gramagent("schema", str(EXAMPLES / "tools.gram"), "--tool", "chart", cwd=tmp_path)
    assert json.loads(one.stdout) == tools["chart"]
    wrong = run_gramagent("schema", str(EXAMPLES / "tools.gram"), "--tool", "chrat",
                          cwd=tmp_path)
    assert wrong.returncode == 1
    assert "did you mean 'chart'" in wrong.stderr
    folder = run_gramagent("schema", str(EXAMPLES), cwd=tmp_path)
    assert folder.returncode == 1 and "is a directory" in folder.stderr


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["String", "Integer", "Number", "Boolean"]), min_size=1,
                max_size=4),
       st.sampled_from([",", ", ", ",\n", " ", "\n"]))
def test_separators_between_type_patterns_do_not_change_the_schema(
    fields: list[str], separator: str,
) -> None:
    """A path and up to four type patterns: commas (the file's way), spaces or newlines
    between them read the same."""
    from gramagent._spec.signature import parse_signature, signature_to_schema

    names = [f"T{i}" for i in range(len(fields))]
    path = "==>".join(f"(p{i}::Array {{items: {n}}})" for i, n in enumerate(names))
    patterns = [f"[{n}:Object | (v::{kind})]" for n, kind in zip(names, fields, strict=True)]
    schema = signature_to_schema(parse_signature(separator.join([path + "==>(::String)",
                                                                 *patterns])))
    assert schema == signature_to_schema(parse_signature(" ".join([path + "==>(::String)",
                                                                   *patterns])))
    assert [schema["properties"][f"p{i}"]["items"]["properties"]["v"] for i in
            range(len(fields))] == [{"type": k.lower()} for k in fields]
