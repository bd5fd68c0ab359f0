"""Tests for gramagent._spec.gram.text: reading gram files into spec objects, and every error."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gramagent._spec.gram.docreader import DocumentReader
from gramagent._spec.gram.literals import quote_string
from gramagent._spec.gram.text import has_comments, load_agent, load_file, load_gram, to_gram
from gramagent._spec.model import Agent, ModelRef
from gramagent.errors import SpecError

ROOT = Path(__file__).resolve().parent.parent.parent
FIXTURES = ROOT / "tests" / "fixtures"

ISSUE_EXAMPLE = '''[hello_world_agent:Agent {
  description: "A friendly agent that uses the sayHello tool to greet users",
  instruction: ```
  You are a friendly assistant. When the user greets you, use the sayHello tool.
  ```,
  model: "openai/gpt-4o-mini"
} |
  [sayHello:Tool {description: "Returns a friendly greeting message for the given name"} |
    (personName::String {default:"world"})==>(::String)
  ]
]
'''


def problems(text: str, file: str = "f.gram") -> list[str]:
    """The diagnostics of an invalid text, as strings."""
    with pytest.raises(SpecError) as info:
        load_gram(text, file=file)
    return [str(d) for d in info.value.diagnostics]


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------

def test_issue_example() -> None:
    """The agent of the issue reads into the expected spec objects."""
    agent = load_gram(ISSUE_EXAMPLE).agent()
    assert agent.name == "hello_world_agent"
    assert agent.description == "A friendly agent that uses the sayHello tool to greet users"
    assert agent.instruction == ("You are a friendly assistant. When the user greets you, "
                                 "use the sayHello tool.")
    assert agent.model == ModelRef(provider="openai", name="gpt-4o-mini")
    (tool,) = agent.tools
    assert tool.name == "sayHello"
    assert tool.description == "Returns a friendly greeting message for the given name"
    assert tool.schema == {"type": "object", "properties": {
        "personName": {"type": "string", "default": "world"}}}


def test_hello_world_example(examples_dir: Path) -> None:
    """examples/hello_world.gram runs offline by default: a local model."""
    agent = load_agent(examples_dir / "hello_world.gram")
    assert str(agent.model) == "local/qwen2.5-coder-0.5b"
    assert agent.tool("sayHello").signature.to_gram() == \
        '(personName::String {default: "world"})==>(::String)'


def test_hello_goodbye_example_references_stand_alone_tools(examples_dir: Path) -> None:
    """Two stand-alone tools, referenced by name from the agent."""
    document = load_file(examples_dir / "hello_goodbye.gram")
    assert [t.name for t in document.tools] == ["sayHello", "sayGoodbye"]
    (agent,) = document.agents
    assert agent.tools == document.tools
    assert "sayGoodbye tool" in agent.instruction


def test_several_agents_share_a_tool_defined_once() -> None:
    """A stand-alone tool used by several agents is the same spec in each."""
    document = load_file(FIXTURES / "weather.gram")
    weather, travel = document.agents
    assert weather.tool("getForecast") is travel.tool("getForecast")
    assert [t.name for t in travel.tools] == ["getForecast", "bookTrain"]
    assert [t.name for t in document.tools] == ["getForecast", "getAlerts"]
    assert document.agent("travel_agent") is travel


def test_nested_types_in_a_tool() -> None:
    """Type patterns in a tool give nested objects and arrays of objects."""
    forecast = load_file(FIXTURES / "weather.gram").tool("getForecast")
    day = forecast.signature.returns["properties"]["days"]["items"]
    assert day["additionalProperties"] is False
    assert day["required"] == ["date", "high", "low"]
    assert day["properties"]["summary"] == {"type": ["string", "null"]}


def test_file_level_types_are_shared_by_tools() -> None:
    """A top-level type pattern is usable from every tool of the file."""
    document = load_file(FIXTURES / "shared_types.gram")
    point = document.tool("distance").schema["properties"]["from"]
    assert point["required"] == ["lat", "lon"]
    nearest = document.tool("nearest")
    assert nearest.schema["properties"]["candidates"]["items"] == point
    assert nearest.signature.returns == point


def test_fenced_instruction_is_dedented() -> None:
    """Common indentation and the closing fence's line are removed; inner indents stay."""
    agent = load_file(FIXTURES / "weather.gram").agent("weather_agent")
    assert agent.instruction == ("You answer weather questions.\n"
                                 "  - Use getForecast for forecasts.\n"
                                 "  - Use getAlerts for warnings.\n"
                                 "Keep answers short.")


def test_literals_escapes_and_comments() -> None:
    """Single-quoted, backticked and tagged strings, escapes, hex/octal, comments."""
    document = load_file(FIXTURES / "literals.gram")
    tool = document.tool("literals")
    assert tool.description == "single \"quoted\" 'text'"
    props = tool.schema["properties"]
    assert props["flags"]["examples"] == [[True], []]
    assert props["mask"] == {"type": "integer", "default": 31, "maximum": 0o777}
    assert props["label"]["description"] == "back`ticked"
    assert props["label"]["default"] == "tab\tnew\nline \"q\" \\ /"
    assert props["meta"] == {"type": "object", "properties": {},
                             "default": {"a": 1, "b c": "d", "e": True}}
    assert props["unicode"]["default"] == "héllo wörld ✓ 😀"
    assert document.agent().instruction == "# Role\nTest **every** literal."


def test_windows_line_ends() -> None:
    """A file with CRLF line ends reads like the LF one, fenced instructions included."""
    crlf = (FIXTURES / "weather.gram").read_text().replace("\n", "\r\n")
    assert load_gram(crlf) == load_file(FIXTURES / "weather.gram")


def test_both_label_separators_on_patterns() -> None:
    """[a::Agent ...] and [t::Tool ...] read like the single-colon forms."""
    text = ISSUE_EXAMPLE.replace(":Agent", "::Agent").replace(":Tool", "::Tool")
    assert load_gram(text) == load_gram(ISSUE_EXAMPLE)


def test_tool_free_agent_and_agent_without_description() -> None:
    """Tools and the description are optional."""
    agent = load_gram('[a:Agent {instruction: "Chat.", model: "gpt-4o"}]').agent()
    assert agent == Agent(name="a", model=ModelRef.parse("openai/gpt-4o"),
                          instruction="Chat.")


def test_load_agent_by_name_from_text_and_path(tmp_path: Path) -> None:
    """load_agent takes gram text or a path, and a name when there are several agents."""
    text = (FIXTURES / "weather.gram").read_text()
    assert load_agent(text, "travel_agent").name == "travel_agent"
    path = tmp_path / "w.gram"
    path.write_text(text)
    assert load_agent(path, "weather_agent").name == "weather_agent"
    assert load_agent(str(path), "weather_agent").name == "weather_agent"
    with pytest.raises(SpecError, match=r"w\.gram: the file declares 2 agents "
                       r"\(weather_agent, travel_agent\)"):
        load_agent(path)
    with pytest.raises(SpecError, match=r"^\S*w\.gram: no agent named 'nope'"):
        load_agent(path, "nope")


def test_load_file_problems(tmp_path: Path) -> None:
    """Missing files, invalid UTF-8 (positioned) and a byte order mark."""
    with pytest.raises(SpecError, match="cannot read the file"):
        load_file(tmp_path / "missing.gram")
    bad = tmp_path / "bad.gram"
    bad.write_bytes(b'[a:Agent {instruction: "ok",\n  model: "x\xff"}]')
    with pytest.raises(SpecError, match=r"bad.gram:2:12: the file is not valid UTF-8"):
        load_file(bad)
    bom = tmp_path / "bom.gram"
    bom.write_bytes(b"\xef\xbb\xbf" + ISSUE_EXAMPLE.encode())
    assert load_file(bom) == load_gram(ISSUE_EXAMPLE)


def test_has_comments() -> None:
    """Comments are found; '//' inside a string is not a comment."""
    assert has_comments("// note\n[a:Agent {instruction: \"x\", model: \"m\"}]")
    assert not has_comments('[a:Agent {instruction: "see http://x", model: "m"}]')


# --------------------------------------------------------------------------------------------
# Syntax errors: every one reported, with file:line:col and what was expected
# --------------------------------------------------------------------------------------------

def test_unclosed_brackets_at_end_of_file() -> None:
    """Each unclosed opener is reported where it opens."""
    assert problems('[a:Agent {description: "x"') == [
        "f.gram:1:1: '[' is never closed: expected ']' before the end of the text",
        "f.gram:1:10: '{' is never closed: expected '}' before the end of the text",
    ]


def test_missing_closing_bracket_names_its_opener() -> None:
    """A missing ']' points at where it was expected and at the pattern (or node, or
    record) it closes, by name."""
    text = ('[a:Agent {instruction: "i", model: "m"} |\n'
            '  [t:Tool {description: "d"} | (p::String)==>(::String)\n'
            ']\n')
    assert problems(text) == ["f.gram:3:2: expected ']' to close the pattern 'a' opened at 1:1"]
    assert problems("[t:Tool {description: \"d\"} | (p::String ==>(::String)]") == [
        "f.gram:1:40: expected ')' to close the node 'p' opened at 1:30"]
    assert problems('[t:Tool {description: "d"} | (p::String {default: "x")==>(::String)]') == [
        "f.gram:1:54: expected '}' to close the '{' at 1:41"]


def test_missing_bar_is_one_problem() -> None:
    """A pattern without its '|' is reported once, at the place the '|' belongs, not again
    for its elements and its ']'."""
    text = ('[t:Tool {description: "d"}\n'
            '  (p::String)==>(::String)\n'
            ']\n')
    assert problems(text) == ["f.gram:1:27: expected '|' before the elements of the pattern "
                              "'t' opened at 1:1 (or ']' to close it here)"]


def test_trailing_comma_says_so() -> None:
    """A trailing comma is named as such (not 'expected ,')."""
    assert problems('[t:Tool {description: "d", } | ()==>(::String)]') == [
        "f.gram:1:26: unexpected ',' before '}': gram has no trailing commas; remove it"]
    assert problems('[t:Tool {description: "d"} | ()==>(::String),]') == [
        "f.gram:1:45: unexpected ',' before ']': gram has no trailing commas; remove it"]


def test_misspelt_agent_or_tool_label() -> None:
    """A top-level label close to Agent or Tool is reported as that typo, not as an unknown
    type (whose nearest built-in name would be misleading: Tol -> Bool)."""
    assert problems('[a:Agnet {instruction: "i", model: "m"}]\n'
                    '[t:Tol {description: "d"} | ()==>(::String)]\n') == [
        "f.gram:1:4: unknown label 'Agnet'; did you mean 'Agent'? (a top-level pattern is "
        "an agent [name:Agent ...], a tool [name:Tool ...] or a type pattern "
        "[Name:Object ...])",
        "f.gram:2:4: unknown label 'Tol'; did you mean 'Tool'? (a top-level pattern is an "
        "agent [name:Agent ...], a tool [name:Tool ...] or a type pattern [Name:Object ...])"]


def test_signature_without_a_result() -> None:
    """A path of one named node lacks its result: the message says so and shows the fix."""
    assert problems('[t:Tool {description: "d"} | (a::String:Null)]') == [
        "f.gram:1:30: a signature ends with its result, an unnamed node: write "
        "(a::String:Null)==>(::String)"]


def test_several_syntax_errors_are_all_reported() -> None:
    """Errors in different patterns are all listed, in order."""
    text = ('[t:Tool {description: "d" x: 1} | ()==>(::String)]\n'
            '[u:Tool {description: } | ()==>(::String)]\n'
            '[v:Tool {description: "d"} | (p::String {enum: []})==>(::String)]\n')
    assert problems(text) == [
        "f.gram:1:27: unexpected 'x': expected ',' or '}'",
        "f.gram:2:22: expected a value after ':'",
        "f.gram:3:49: expected a value: gram lists cannot be empty (write json`[]` for an "
        "empty list)",
    ]


def test_a_missing_comma_is_reported_where_the_comma_belongs() -> None:
    """After several properties, or between a number and the next key, the problem is the
    next key (a missing ','), not the first property tree-sitter could not place."""
    assert problems('[a:Agent {model: "m", description: "d"\n  instruction: "i"}]') == [
        "f.gram:2:3: unexpected 'instruction': expected ',' or '}'"]
    assert problems('[a:Agent {model: "m", n: 2\n  instruction: "i"}]') == [
        "f.gram:2:3: unexpected 'instruction': expected ',' or '}'"]


def test_unterminated_string() -> None:
    """A string without its closing quote is reported at its opening quote."""
    assert problems('[t:Tool {description: "abc} | ()==>(::String)]\n') == [
        'f.gram:1:23: unterminated string: expected a closing " on the same line']
    assert problems('[a:Agent {\n  instruction: ```\n  never closed\n  model: "m"\n}]\n') == [
        "f.gram:2:16: unterminated fenced string: expected a closing ``` on a line of its own"]


def test_a_string_that_opens_with_two_slashes_says_how_to_write_it() -> None:
    """tree-sitter-gram reads ``"// x"`` as a quote and a comment: the message says so and
    gives the spelling that reads (``\\//``), and that spelling means the same text."""
    for quote in ('"', "'", "`"):
        for text in ("// x", "  //", "//"):
            source = f"[a:Agent {{model: \"m\", instruction: {quote}{text}{quote}}}]\n"
            assert problems(source) == [
                "f.gram:1:36: a string cannot open with // (gram reads a comment there and "
                "the string as never closed): write \\// instead"], source
    fixed = load_gram('[a:Agent {model: "m", instruction: "\\// x"}]')
    assert fixed.agents[0].instruction == "// x"


def test_a_name_without_its_type_separator() -> None:
    """Inside a node, what may follow a name is said in gram terms."""
    assert problems('[t:Tool {description: "d"} | (b String)==>(::String)]') == [
        "f.gram:1:33: unexpected 'String': expected '{...}', '::Type' or ')'"]


def test_invalid_escape() -> None:
    """Only the escapes of the grammar are allowed."""
    assert problems('[t:Tool {description: "a\\qb"} | ()==>(::String)]')[0].startswith(
        "f.gram:1:25: invalid escape in a string")


def test_columns_count_characters_not_bytes() -> None:
    """Columns are 1-based characters, also after non-ASCII text on the line."""
    text = '[t:Tool {description: "héllo ✓"} | (p::Strng)==>(::String)]'
    assert problems(text)[0].startswith("f.gram:1:40: parameter 'p': unknown type 'Strng'")


# --------------------------------------------------------------------------------------------
# Semantic errors, positioned
# --------------------------------------------------------------------------------------------

def test_unknown_types_everywhere() -> None:
    """Unknown type names in labels and in type references, each at its name, with the
    nearest name when there is one (and only then the list of what is allowed)."""
    text = ('[t:Tool {description: "d"} |\n'
            '  (p::Strng)==>(q::Array {items: Integr})==>(::Txt)\n'
            ']')
    assert problems(text) == [
        "f.gram:2:7: parameter 'p': unknown type 'Strng'; did you mean 'String'?",
        "f.gram:2:34: parameter 'q': unknown type 'Integr'; did you mean 'Integer'?",
        "f.gram:2:48: the result: unknown type 'Txt'; did you mean 'Text'?",
    ]
    assert problems('[t:Tool {description: "d"} | (p::Widget)==>(::String)]') == [
        "f.gram:1:34: parameter 'p': unknown type 'Widget' (expected a built-in type: String, "
        "Integer, Number, Boolean, Array, Object, Null or Any; or a type pattern's name: "
        "define [Widget:Object | ...])"]


def test_duplicate_tools() -> None:
    """Two stand-alone tools with one name, and one tool twice in an agent."""
    text = ('[t:Tool {description: "d"} | ()==>(::String)]\n'
            '[t:Tool {description: "e"} | ()==>(::String)]\n'
            '[a:Agent {instruction: "i", model: "m"} | t,\n'
            '  [t:Tool {description: "f"} | ()==>(::String)]]\n')
    assert problems(text) == [
        "f.gram:2:2: duplicate tool 't' (first defined at 1:2)",
        "f.gram:4:4: agent 'a': duplicate tool 't' (first at 3:43)",
    ]


def test_empty_names_descriptions_and_instructions() -> None:
    """Empty names, descriptions and instructions are each reported."""
    text = ('[``:Tool {description: " "} | (``::String)==>(::String)]\n'
            '[a:Agent {instruction: "", model: "m", description: ""}]\n')
    assert problems(text) == [
        "f.gram:1:2: tool name must not be empty",
        "f.gram:1:24: tool: description must not be empty",
        "f.gram:1:32: parameter name must not be empty",
        "f.gram:2:24: agent 'a': instruction must not be empty",
        "f.gram:2:53: agent 'a': description must not be empty (leave it out instead)",
    ]


def test_missing_parts() -> None:
    """Missing name, model, instruction, description and signature."""
    text = ('[:Agent {description: "x"}]\n'
            "[t:Tool]\n"
            '[u:Tool {description: "d"}]\n')
    assert problems(text) == [
        "f.gram:1:1: agent needs a name, e.g. [name:Agent ...]",
        "f.gram:1:1: agent: missing instruction",
        "f.gram:1:1: agent: missing model, e.g. model: \"openai/gpt-4o-mini\"",
        "f.gram:2:1: tool 't': missing description",
        "f.gram:2:1: tool 't': missing signature, e.g. [t:Tool {...} | ()==>(::String)]",
        "f.gram:3:1: tool 'u': missing signature, e.g. [u:Tool {...} | ()==>(::String)]",
    ]


def test_defaults_that_do_not_match_their_type_are_kept() -> None:
    """A default is an annotation (as in JSON Schema): one that does not match its type is
    kept as written, makes its parameter optional, and survives writing and reading."""
    text = ('[t:Tool {description: "d"} |\n'
            '  (n::Integer {default: 2.5})\n'
            '  ==>(b::Boolean {default: "yes"})\n'
            '  ==>(s::String:Null {default: 3})\n'
            '  ==>(l::Array {default: {}})\n'
            '  ==>(o::Object {default: null})\n'
            '  ==>(::String)\n'
            ']')
    spec = load_gram(text).tool("t")
    assert spec.schema["properties"] == {
        "n": {"type": "integer", "default": 2.5},
        "b": {"type": "boolean", "default": "yes"},
        "s": {"type": ["string", "null"], "default": 3},
        "l": {"type": "array", "default": {}},
        "o": {"type": "object", "default": None},
    }
    assert "required" not in spec.schema
    assert load_gram(to_gram(spec)).tool("t") == spec


def test_unknown_tool_reference_suggests_a_near_name() -> None:
    """A reference to an undefined tool is positioned and suggests the closest name."""
    text = ('[a:Agent {instruction: "i", model: "m"} | sayHelo]\n'
            '[sayHello:Tool {description: "d"} | ()==>(::String)]\n')
    assert problems(text) == ["f.gram:1:43: agent 'a': unknown tool 'sayHelo'; did you mean "
                              "'sayHello'?"]
    assert problems('[a:Agent {instruction: "i", model: "m"} | other]') == [
        "f.gram:1:43: agent 'a': unknown tool 'other' (define it as a top-level "
        "[other:Tool {...} | ...] pattern)"]


def test_invalid_values_and_properties() -> None:
    """Unknown properties, wrong value kinds, a bad model."""
    text = ('[a:Agent {instructions: "i", model: "openai/", description: 3}]\n'
            '[t:Tool {description: "d"} | (p::Integer {minimum: "0", maxItems: 1.5})'
            "==>(::String)]\n")
    assert problems(text) == [  # the misspelt instruction is not also reported missing
        "f.gram:1:11: agent 'a': unknown property 'instructions' (expected description, "
        "instruction, model); did you mean 'instruction'?",
        "f.gram:1:37: agent 'a': invalid model 'openai/': expected 'provider/name'",
        "f.gram:1:61: agent 'a': description must be a string",
        "f.gram:2:52: parameter 'p': minimum must be a number, not \"0\"",
        "f.gram:2:67: parameter 'p': maxItems must be a non-negative integer, not 1.5",
    ]


def test_structure_errors() -> None:
    """Top-level paths, unlabeled patterns, non-tool agent elements, duplicate agents."""
    text = ("{root: 1}\n"
            "(x::String)==>(::String)\n"
            "[thing {a: 1}]\n"
            '[a:Agent {instruction: "i", model: "m"} | (x::String), [y:Other]]\n'
            '[a:Agent {instruction: "i", model: "m"}]\n')
    assert problems(text) == [
        "f.gram:1:1: a file-level record is not part of an agent file",
        "f.gram:2:1: expected an agent [name:Agent {...} | tools], a tool [name:Tool {...} | "
        "signature] or a type pattern at the top level",
        "f.gram:3:1: a top-level pattern needs a label: [name:Agent ...], [name:Tool ...] or "
        "[Name:Object ...]",
        "f.gram:4:43: agent 'a': expected a tool pattern [name:Tool {...} | signature] or a "
        "tool name",
        "f.gram:4:56: agent 'a': expected a tool pattern [name:Tool {...} | signature] or a "
        "tool name",
        "f.gram:5:2: duplicate agent 'a' (first defined at 4:2)",
    ]


def test_type_pattern_errors() -> None:
    """Duplicate and built-in type names, members on non-objects, unused broken types."""
    text = ("[P:Object | (x::Number)]\n"
            "[P:Object | (y::Number)]\n"
            "[Integer:Object | (z::Number)]\n"
            "[Q:String | (w::Number)]\n"
            "[R:Object | (v::Nope)]\n")
    found = problems(text)
    assert found[0] == "f.gram:2:2: duplicate type 'P' (first defined at 1:1)"
    assert found[1] == "f.gram:3:2: 'Integer' is a built-in type; choose another name"
    assert found[2].startswith("f.gram:4:1: type 'Q': members (properties) need an Object")
    assert found[3].startswith("f.gram:5:17: member 'v': unknown type 'Nope'")


def test_semantic_errors_and_syntax_errors_together() -> None:
    """A file with a syntax error in one pattern still reports the others' problems."""
    text = ('[t:Tool {description: "d"} | (p::Strng)==>(::String)]\n'
            '[u:Tool {description: "d" | ()==>(::String)]\n')
    found = problems(text)
    assert found[0].startswith("f.gram:1:34: parameter 'p': unknown type 'Strng'")
    assert len(found) >= 2 and all(f.startswith("f.gram:2:") for f in found[1:])


# --------------------------------------------------------------------------------------------
# The text route and the tree route agree
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.gram")), ids=lambda p: p.name)
def test_fast_and_tree_routes_agree_on_fixtures(path: Path) -> None:
    """Reading with the regex fast route and with the tree walk gives equal documents."""
    src = path.read_bytes()
    fast = DocumentReader(src, None, fast=True).document()
    assert fast == DocumentReader(src, None, fast=False).document()


def test_fast_and_tree_routes_agree_on_errors() -> None:
    """Positions of semantic errors are the same on both routes."""
    text = (b'[t:Tool {description: "d"} |\n'
            b'  (p::Strng {default: 1})==>(q  ::  Intger:Null {default: "x", minimum: "0"})'
            b"==>(::Txt)\n]")
    messages = []
    for fast in (True, False):
        reader = DocumentReader(text, None, fast=fast)
        with pytest.raises(SpecError) as info:
            reader.document()
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    assert "<string>:2:37: parameter 'q': unknown type 'Intger'" in messages[0]


_words = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
                 max_size=12)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.from_regex(r"[a-z][a-zA-Z0-9_]{0,6}", fullmatch=True),
                          st.sampled_from(["String", "Integer", "Number:Null", "Boolean"]),
                          _words, st.booleans()),
                min_size=1, max_size=4, unique_by=lambda t: t[0]))
def test_fast_and_tree_routes_agree_on_generated_tools(
        params: list[tuple[str, str, str, bool]]) -> None:
    """Generated tools with arbitrary descriptions read the same on both routes."""
    nodes = []
    for name, jtype, description, optional in params:
        record = [f"description: {to_gram_string(description)}"]
        if optional:
            record.append("required: false")
        nodes.append(f"({name}::{jtype} {{{', '.join(record)}}})")
    text = ('[t:Tool {description: "d"} | ' + "==>".join(nodes) + "==>(::String)]").encode()
    fast = DocumentReader(text, None, fast=True).document()
    assert fast == DocumentReader(text, None, fast=False).document()
    assert load_gram(to_gram(fast)) == fast


def to_gram_string(text: str) -> str:
    """A gram double-quoted string literal."""
    return quote_string(text)
