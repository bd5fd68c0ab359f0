"""Tests for gramagent.spec._gramwrite: the canonical writer keeps the user's type names,
file-level types and comments (to_gram, format_gram, format_file)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gramagent.errors import SpecError
from gramagent.spec.gram import format_file, format_gram, load_file, load_gram, to_gram
from gramagent.spec.model import Param, Signature
from gramagent.spec.signature import format_signature, parse_signature

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


@pytest.mark.parametrize(("text", "where"), [
    ('[t:Tool {description: "d"} | (a::String // in\n)==>(::String)]', "1:41: a comment "
     "inside a node (...)"),
    ('[t:Tool {description: "d" // in\n} | ()==>(::String)]', "1:27: a comment inside a "
     "record {...}"),
    ('[t:Tool {description: "d"} // in\n| ()==>(::String)]', "1:28: a comment before the "
     "'|' of a pattern"),
    ('[a:Agent {instruction: // in\n "i", model: "m"}]', "1:24: a comment inside a property "
     "(key: value)"),
    ('[a:Agent {instruction: "i", model: "m"} // in\n]', "1:41: a comment before the '|' of "
     "a pattern"),
])
def test_comments_that_cannot_be_placed_are_reported(text: str, where: str) -> None:
    """A comment the writer has no place for is left out and named, 1-based."""
    formatted = format_gram(text, file="f.gram")
    assert [str(d).split(" cannot be kept")[0] for d in formatted.dropped] == [
        f"f.gram:{where}"]
    assert "// in" not in formatted.text
    assert load_gram(formatted.text) == load_gram(text)


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
