"""Tests for gramagent._spec.gram.docwriter: the canonical writer keeps the user's type names,
file-level types and comments (to_gram, format_gram, format_file)."""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gramagent._spec.gram.syntax import K_COMMENT, K_STRING, K_TAGGED, descendants, parse
from gramagent._spec.gram.text import format_file, format_gram, load_file, load_gram, to_gram
from gramagent._spec.model import Param, Signature
from gramagent._spec.signature import format_signature, parse_signature
from gramagent.errors import SpecError

ROOT = Path(__file__).resolve().parent.parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
GRAM_FILES = sorted([*ROOT.joinpath("examples").glob("*.gram"), *FIXTURES.glob("*.gram")])


def fmt(text: str) -> str:
    """format_gram of a text that must keep every comment."""
    formatted = format_gram(text, file="f.gram")
    assert formatted.dropped == ()
    return formatted.text


def assert_stable(text: str) -> str:
    """fmt(text), checked to read as text does and to be a fixed point."""
    out = format_gram(text).text
    assert load_gram(out) == load_gram(text)
    assert format_gram(out).text == out
    return out


# --------------------------------------------------------------------------------------------
# Type names
# --------------------------------------------------------------------------------------------

def test_user_type_names_are_kept() -> None:
    """A tool's own type patterns keep their names (not Result, ResultDaysItem)."""
    text = to_gram(load_file(FIXTURES / "weather.gram"))
    assert "==>(::Forecast),\n  [Forecast:Object |\n" in text
    assert "(days::Array {items: Day})" in text
    assert "[Day:Object {additionalProperties: false} |" in text
    assert "Result" not in text


def test_file_level_types_are_written_once_at_file_level() -> None:
    """A type pattern shared by several tools stays at the top, once, under its name."""
    text = to_gram(load_file(FIXTURES / "shared_types.gram"))
    assert "//" not in text  # to_gram writes no comments (format_gram keeps a text's)
    assert text.startswith("[Point:Object {additionalProperties: false} |\n")
    assert text.count("[Point:") == 1
    assert "(from::Point)==>(to::Point)==>(::Number)" in text
    assert "(origin::Point)==>(candidates::Array {items: Point, minItems: 1})==>(::Point)" in text


NAMED = """\
[Name:Text {minLength: 1}]
[Address:Object | (street::String), (city::Name)]
[Unused:Object | (x::Int)]
[Shipping:Address:Null {description: "where to"}]

[order:Tool {description: "Order"} |
  (who::Name {description: "buyer"})
  ==>(ship::Address:Null {default: null})
  ==>(bill::Shipping)
  ==>(tags::Array {items: Name})
  ==>(alt::Any {anyOf: [Address, Local]})
  ==>(::Receipt),
  [Receipt:Object | (total::Number), (to::Address)],
  [Local:Object | (id::Integer)],
  [Spare:String]
]

[shadow:Tool {description: "Shadows Name"} |
  (n::Name)==>(::String),
  [Name:Integer]
]

[a:Agent {instruction: "i", model: "m"} |
  order,
  [inline:Tool {description: "inline"} | (a::Address)==>(::String)]
]
"""

NAMED_CANONICAL = """\
[Name:String {minLength: 1}]

[Address:Object |
  (street::String),
  (city::Name)
]

[Unused:Object |
  (x::Integer)
]

[Shipping:Address:Null {description: "where to"}]

[order:Tool {description: "Order"} |
  (who::Name {description: "buyer"})
  ==>(ship::Address:Null {default: null})
  ==>(bill::Shipping)
  ==>(tags::Array {items: Name})
  ==>(alt::Any {anyOf: [Address, Local]})
  ==>(::Receipt),
  [Receipt:Object |
    (total::Number),
    (to::Address)
  ],
  [Local:Object |
    (id::Integer)
  ],
  [Spare:String]
]

[shadow:Tool {description: "Shadows Name"} |
  (n::Name)==>(::String),
  [Name:Integer]
]

[a:Agent {
  instruction: "i",
  model: "openai/m"
} |
  order,
  [inline:Tool {description: "inline"} |
    (a::Address)==>(::String)
  ]
]
"""


def test_every_kind_of_type_use_keeps_its_name() -> None:
    """Aliases of built-in types, unions with Null, a pattern built on another, references
    in items and anyOf, use-site keywords, unused types and a local type shadowing a
    file-level one: all written back under the user's names, in the user's order."""
    assert to_gram(load_gram(NAMED)) == NAMED_CANONICAL
    assert assert_stable(NAMED) == NAMED_CANONICAL


def test_names_are_metadata_outside_equality_and_schema() -> None:
    """Two texts that differ only in type names read as equal specs with equal schemas;
    each still writes its own names."""
    one = parse_signature("(p::Point)==>(::String)\n[Point:Object | (x::Number)]")
    two = parse_signature("(p::Spot)==>(::String)\n[Spot:Object | (x::Number)]")
    assert one == two
    assert one.to_schema() == two.to_schema()
    assert [t.name for t in one.named_types] == ["Point"]
    assert one.type_refs == {"/properties/p": ("Point",)}
    assert "Spot" in format_signature(two) and "Spot" not in format_signature(one)
    assert "named_types" not in repr(one)


def test_a_stale_name_is_not_used() -> None:
    """A name whose schema no longer matches the place it was used at (the spec changed
    after reading) gives way to a generated name, so the text still reads back equal."""
    sig = parse_signature("(p::Point)==>(::String)\n[Point:Object | (x::Number)]")
    other = {"type": "object", "properties": {"y": {"type": "string"}}, "required": ["y"]}
    changed = dataclasses.replace(sig, params=(Param(name="p", schema=other),))
    text = format_signature(changed)
    assert "(p::P)" in text and "[P:Object |\n  (y::String)\n]" in text
    assert "[Point:Object |\n  (x::Number)\n]" in text  # still declared, as it was
    assert parse_signature(text) == changed


def test_to_gram_of_an_agent_writes_its_file_level_types_at_file_level() -> None:
    """An agent alone keeps shared types at file level; its tools are written inline."""
    agent = load_file(FIXTURES / "shared_types.gram").agent()
    text = to_gram(agent)
    assert text.startswith("[Point:Object {additionalProperties: false} |")
    assert text.count("[Point:") == 1
    assert load_gram(text).agent() == agent


def test_to_gram_of_a_tool_is_self_contained() -> None:
    """A tool alone carries the file-level types it uses, inside it."""
    spec = load_file(FIXTURES / "shared_types.gram").tool("nearest")
    text = to_gram(spec)
    assert text.startswith("[nearest:Tool")
    assert "  [Point:Object {additionalProperties: false} |\n" in text
    assert load_gram(text).tool("nearest") == spec


def test_multi_line_tool_descriptions_are_fenced() -> None:
    """A tool description with line breaks (or too long for the head line) gets a record
    of its own; a fence when that reads back exactly."""
    text = ('[t:Tool {description: "one\\ntwo"} | ()==>(::String)]\n'
            f'[u:Tool {{description: "{"x" * 90}"}} | ()==>(::String)]\n')
    out = assert_stable(text)
    assert out.startswith('[t:Tool {\n  description: ```\n  one\n  two\n  ```\n} |\n')
    assert f'[u:Tool {{\n  description: "{"x" * 90}"\n}} |\n' in out


@pytest.mark.parametrize("path", GRAM_FILES, ids=lambda p: p.name)
def test_formatting_files_is_stable_and_lossless(path: Path) -> None:
    """format_file of every example and fixture reads as the file does, keeps the type
    names, and formatting again changes nothing."""
    formatted = format_file(path)
    document = load_file(path)
    again = load_gram(formatted.text)
    assert again == document
    assert [t.name for t in again.types] == [t.name for t in document.types]
    for spec in document.tools:
        assert ([t.name for t in again.tool(spec.name).signature.named_types]
                == [t.name for t in spec.signature.named_types])
    assert format_gram(formatted.text).text == formatted.text


# --------------------------------------------------------------------------------------------
# Comments
# --------------------------------------------------------------------------------------------

COMMENTED = """\
// head
//
// second paragraph

[a:Agent {
  // what the agent is for
  instruction: "x", // the instruction
  model: "openai/m"
  // end of record
} | // after bar
  // lead t
  t, // trail t

  // lead u, after a blank line
  [u:Tool {description: "d"} |
    // before path
    (a::String) // after a
    ==> // mid
    (::T), // after path
    // before T
    [T:Object | // m
      (x::Number), // tx
      (y::Number)
      // end members
    ]
    // end tool
  ]
  // end agent
] // trail agent

[t:Tool {description: "t"} | ()==>(::String)  // after the result
]
// end of file
"""

COMMENTED_CANONICAL = """\
// head
//
// second paragraph

[t:Tool {description: "t"} |
  ()==>(::String)  // after the result
]

[a:Agent {
  // what the agent is for
  instruction: "x",  // the instruction
  model: "openai/m"
  // end of record
} |
  // after bar
  // lead t
  t,  // trail t
  // lead u, after a blank line
  [u:Tool {description: "d"} |
    // before path
    (a::String)  // after a
    // mid
    ==>(::T),  // after path
    // before T
    [T:Object |
      // m
      (x::Number),  // tx
      (y::Number)
      // end members
    ]
    // end tool
  ]
  // end agent
]  // trail agent
// end of file
"""


def test_comments_are_kept_where_they_can_be_placed() -> None:
    """Comments between patterns, list elements, signature nodes and agent properties stay
    with their element (which the canonical order may move); a file header stays on top."""
    out = fmt(COMMENTED)
    assert out == COMMENTED_CANONICAL
    assert load_gram(out) == load_gram(COMMENTED)
    assert fmt(out) == out


def test_comments_move_with_their_pattern() -> None:
    """Agents are written after tools: the comment above an agent goes along with it."""
    text = ('// about a\n[a:Agent {instruction: "i", model: "m"} | t]\n'
            '// about t\n[t:Tool {description: "d"} | ()==>(::String)]\n')
    out = fmt(text)
    assert out.index("// about t\n[t:Tool") < out.index("// about a\n[a:Agent")


def test_blank_lines_between_comments_are_kept() -> None:
    """A blank line inside a comment block, or between it and its pattern, stays (one)."""
    text = ('[t:Tool {description: "d"} | ()==>(::String)]\n\n'
            '// one\n\n\n// two\n\n[u:Tool {description: "d"} | ()==>(::String)]\n')
    assert fmt(text).endswith('// one\n\n// two\n\n[u:Tool {description: "d"} |\n'
                              '  ()==>(::String)\n]\n')


def test_a_file_of_comments_only() -> None:
    """Comments with nothing else are kept as they are."""
    assert fmt("// just\n\n// notes\n") == "// just\n\n// notes\n"


def test_windows_line_ends_and_comments() -> None:
    """CRLF text formats to LF text with the same comments."""
    assert fmt(COMMENTED.replace("\n", "\r\n")) == COMMENTED_CANONICAL


def test_a_comment_after_the_result_node_moves_after_the_comma() -> None:
    """A comment between the last node and the comma goes after the comma (where it can
    stay a comment)."""
    text = ('[t:Tool {description: "d"} |\n  (a::String)\n  ==>(::T) // res\n  , [T:Object | '
            '(x::Number)]\n]\n')
    assert "  (a::String)==>(::T),  // res\n" in fmt(text)


@pytest.mark.parametrize(("text", "expected"), [
    ('[t:Tool {description: "d"} | (a::String // in\n)==>(::String)]',
     '[t:Tool {description: "d"} |\n  // in\n  (a::String)==>(::String)\n]\n'),
    ('[t:Tool {description: "d" // in\n} | ()==>(::String)]',
     '[t:Tool {\n  description: "d"  // in\n} |\n  ()==>(::String)\n]\n'),
    ('[t:Tool {description: "d"} // in\n| ()==>(::String)]',
     '[t:Tool {\n  description: "d"  // in\n} |\n  ()==>(::String)\n]\n'),
    ('[t:Tool {description: "d"}\n// in\n| ()==>(::String)]',
     '[t:Tool {description: "d"} |\n  // in\n  ()==>(::String)\n]\n'),
    ('[t:Tool // in\n{description: "d"} | ()==>(::String)]',
     '[t:Tool {\n  // in\n  description: "d"\n} |\n  ()==>(::String)\n]\n'),
    ('[a:Agent {instruction: // in\n "i", model: "m"}]',
     '[a:Agent {\n  // in\n  instruction: "i",\n  model: "openai/m"\n}]\n'),
    ('[a:Agent {instruction: "i", model: "m"} // in\n]',
     '[a:Agent {\n  instruction: "i",\n  model: "openai/m"  // in\n}]\n'),
    ('[a:Agent {instruction: "i", model: "m"}\n// in\n]',
     '[a:Agent {\n  instruction: "i",\n  model: "openai/m"\n  // in\n}]\n'),
    ('[N:String // in\n {minLength: 1}]', '[N:String {\n  // in\n  minLength: 1\n}]\n'),
    ('[N:String // in\n]', '// in\n[N:String]\n'),
])
def test_comments_inside_patterns_go_with_the_nearest_element(text: str, expected: str
                                                                 ) -> None:
    """Inside a pattern or node, a comment goes with the entry it is inside or precedes,
    the entry ending on its line, or the first element after '|'; a record holding one is
    written one entry a line; with no record written, it goes above the pattern."""
    out = fmt(text)
    assert out == expected
    assert load_gram(out) == load_gram(text)
    assert fmt(out) == out


RECORDS = """[Day:Object {additionalProperties: false // closed
} |
  (date::String {format: "date", // ISO 8601
    description: "the day"}),
  (high::Number {
    // degrees Celsius
    description: "high"
  })
]

[getForecast:Tool {
  description: "Forecast" // shown to the model
} |
  (city::String {description: "City name", // e.g. Paris
    minLength: 1 // no empty names
  })
  ==>(days::Integer {enum: [1, // one day
                            3, 7], default: 3
    // at most a week
  })
  ==>(::Array {items: Day})
]
"""

RECORDS_CANONICAL = """[Day:Object {
  additionalProperties: false  // closed
} |
  (date::String {
    description: "the day",
    format: "date"  // ISO 8601
  }),
  (high::Number {
    // degrees Celsius
    description: "high"
  })
]

[getForecast:Tool {
  description: "Forecast"  // shown to the model
} |
  (city::String {
    description: "City name",  // e.g. Paris
    minLength: 1  // no empty names
  })
  ==>(days::Integer {
    default: 3,
    // one day
    enum: [1, 3, 7]
    // at most a week
  })
  ==>(::Array {items: Day})
]
"""


def test_comments_inside_records_and_nodes_are_kept() -> None:
    """Comments on a tool's description, on parameters' and members' keywords and inside
    a keyword's value stay with their entry, in the canonical entry order."""
    out = fmt(RECORDS)
    assert out == RECORDS_CANONICAL
    assert load_gram(out) == load_gram(RECORDS)
    assert fmt(out) == out


def test_comments_of_left_out_entries_go_to_the_next_one_written() -> None:
    """A keyword the canonical form leaves out (a default required flag, a keyword that
    repeats its named type, an empty arguments node) hands its comments to the next
    element written, or to the lines above the node when no record is written."""
    text = """\
[Vl:String {description: "x"}]
[Dab:Vl {description: "x" // same as Vl
}]
[t:Tool {description: "d"} |
  ( // no arguments
  ) // really none
  ==>(a::String {required: true // the default
  })==>(b::Integer {required: true, // the default too
    minimum: 1})==>(::String)
]
"""
    assert fmt(text) == """\
[Vl:String {description: "x"}]

// same as Vl
[Dab:Vl]

[t:Tool {description: "d"} |
  // no arguments
  // really none
  // the default
  (a::String)
  ==>(b::Integer {
    // the default too
    minimum: 1
  })
  ==>(::String)
]
"""


# --------------------------------------------------------------------------------------------
# Comments anywhere the grammar takes one (hypothesis)
# --------------------------------------------------------------------------------------------

RICH = """\
[Name:Text {minLength: 1, description: "a name"}]
[Addr:Object {additionalProperties: false} |
  (street::String {description: "s", required: true}), (city::Name {minLength: 1})]
[Sh:Addr:Null {description: "where to"}]

[order:Tool {description: "Order\\nthings"} |
  () ==> (who::Name {description: "buyer", default: "me", required: true})
  ==>(ship::Sh {description: "where to", default: null})
  ==>(tags::Array {items: Name, minItems: 1, enum: ["a", "b"]})
  ==>(n::Int {minimum: 0x10, maximum: 100, required: false})
  ==>(::Receipt {description: "r"}),
  [Receipt:Object | (total::Number {required: true}), (meta::Any {default: {a: 1, b: "x"}})]
]

[a:Agent {model: "m", description: "desc", instruction: ```
  multi
  line
  ```} |
  order,
  [inline:Tool {description: "inline"} | (a::Addr)==>(::String)]
]
"""

_BASES = {path.name: path.read_text() for path in GRAM_FILES} | {"rich": RICH}
_ATOMS = frozenset({K_STRING, K_TAGGED, K_COMMENT})


def _comments(text: str) -> list[str]:
    src = text.encode()
    return [src[n.start_byte: n.end_byte].decode() for n in descendants(parse(src).root_node)
            if n.kind_id == K_COMMENT]


@functools.cache
def _base(name: str, canonical: bool) -> tuple[bytes, tuple[int, ...]]:
    """A text (as is, or formatted) and the token ends where a comment leaves its meaning
    alone (not inside an arrow, for one)."""
    text = _BASES[name]
    document = load_gram(text)
    src = (format_gram(text).text if canonical else text).encode()
    ends = set()
    stack = [parse(src).root_node]
    while stack:
        node = stack.pop()
        if node.kind_id in _ATOMS or not node.child_count:
            ends.add(node.end_byte)
        else:
            stack.extend(node.children)
    valid = []
    for end in sorted(e for e in ends if 0 < e < len(src.rstrip())):
        try:
            same = load_gram(src[:end] + b" // c\n" + src[end:]) == document
        except SpecError:
            same = False
        if same:
            valid.append(end)
    return src, tuple(valid)


@st.composite
def commented(draw: st.DrawFn) -> tuple[str, str, bool]:
    """A base text with comments put at token ends: at the end of a line, on a line of
    their own, or followed by a blank line. Also says whether the base was canonical."""
    name = draw(st.sampled_from(sorted(_BASES)))
    canonical = draw(st.booleans())
    src, valid = _base(name, canonical)
    ends = draw(st.lists(st.sampled_from(valid), min_size=1, max_size=8, unique=True))
    for i, end in enumerate(sorted(ends, reverse=True)):
        form = draw(st.sampled_from([" // c{}\n", "  // c{}\n\n", "\n// c{}\n"]))
        src = src[:end] + form.format(len(ends) - i).encode() + src[end:]
    return _BASES[name], src.decode(), canonical


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(_BASES))
def test_a_comment_at_every_token_end_is_kept(name: str) -> None:
    """One comment at each token end of each example (one text per position): fmt keeps
    it, reads as the text and is a fixed point."""
    document = load_gram(_BASES[name])
    src, valid = _base(name, False)
    assert valid
    for end in valid:
        text = (src[:end] + b" // here\n" + src[end:]).decode()
        formatted = format_gram(text)
        assert formatted.dropped == (), text
        assert "// here\n" in formatted.text, text
        assert load_gram(formatted.text) == document
        assert format_gram(formatted.text).text == formatted.text, text


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(commented())
def test_fmt_keeps_every_comment_anywhere(case: tuple[str, str, bool]) -> None:
    """Comments at any token end the grammar accepts: fmt drops none, reads as the text,
    is a fixed point, and keeps every comment; in a text already in canonical order, the
    comments also keep their order."""
    base, text, canonical = case
    formatted = format_gram(text)
    assert formatted.dropped == ()
    out = formatted.text
    assert load_gram(out) == load_gram(base)
    assert format_gram(out).text == out
    if canonical:
        assert _comments(out) == _comments(text)
    else:
        assert Counter(_comments(out)) == Counter(_comments(text))


def test_format_gram_reports_problems_not_text() -> None:
    """An invalid text raises the reader's SpecError; nothing is formatted."""
    with pytest.raises(SpecError, match="unknown type 'Strng'"):
        format_gram('// c\n[t:Tool {description: "d"} | (a::Strng)==>(::String)]')


def test_generated_signature_metadata_is_empty() -> None:
    """Specs built in code carry no names: the writer generates them."""
    sig = Signature(params=(Param(name="p", schema={
        "type": "object", "properties": {"x": {"type": "number"}}}),))
    assert sig.named_types == () and dict(sig.type_refs) == {}
    assert format_signature(sig).startswith("(p::P)==>(::String)\n[P:Object |")
