"""Tests for gramagent._spec.gram.patterns: the canonical printer of patterns the agent
vocabulary does not know (experiment files use it), from their syntax, keeping comments."""

from __future__ import annotations

import pytest

from gramagent._spec.gram.comments import ELEMENT, collect_comments
from gramagent._spec.gram.layout import Notes
from gramagent._spec.gram.patterns import WIDTH, write_patterns
from gramagent._spec.gram.syntax import V_LIST, V_MAP, Decoder, Val, parse
from gramagent._spec.gram.text import dropped_comments
from gramagent.errors import SpecError


def write(text: str, **orders: tuple[str, ...]) -> str:
    src = text.encode()
    tree = parse(src)
    assert not tree.root_node.has_error, text
    comments = collect_comments(tree, Decoder(src), by_position=True)
    out = write_patterns(src, tree.root_node, comments, orders=orders, file="p.gram")
    assert dropped_comments(src, "p.gram", comments) == ()
    return out


def decoded(text: str) -> list[object]:
    """Every pattern's name, labels and record values, in document order, as the decoder
    reads them (what a reader of any vocabulary gets)."""
    src = text.encode()
    decoder = Decoder(src, fast=False)
    out: list[object] = []
    stack = [parse(src).root_node]
    while stack:
        node = stack.pop()
        if node.type == "subject_pattern":
            info = decoder.info(node)
            out.append((info.ident, info.labels, sorted(
                (k, repr(_plain(v))) for k, _, v in info.entries or ())))
        stack.extend(reversed(node.named_children))
    return out


def _plain(val: Val) -> object:
    """A decoded value without its offsets."""
    kind, payload, _ = val
    if kind == V_LIST:
        return kind, [_plain(v) for v in payload]
    if kind == V_MAP:
        return kind, [(k, _plain(v)) for k, _, v in payload]
    return kind, type(payload).__name__, payload


@pytest.mark.parametrize(("value", "canonical"), [
    ("'single'", '"single"'),
    ("`ticks`", '"ticks"'),
    ("md`tagged`", '"tagged"'),
    ("0x1F", "31"),
    ("1.50", "1.5"),
    ("-0.250", "-0.25"),
    ("json`{\"a\":  [1, 2]}`", "json`{\"a\":[1,2]}`"),
    ("json`[1e400]`", "json`[1e400]`"),  # compact JSON would read back as [null]: kept
    ("[1, 'a' ,true]", '[1, "a", true]'),
    ("{`p/q`: 1, r :2}", '{"p/q": 1, r: 2}'),
    ("null", "null"),
])
def test_values_are_written_in_one_form_that_reads_back_the_same(value: str,
                                                                 canonical: str) -> None:
    text = f"[x:Thing {{v: {value}}}]"
    out = write(text)
    assert out == f"[x:Thing {{\n  v: {canonical}\n}}]\n"
    assert decoded(out) == decoded(text)
    assert write(out) == out


def test_entries_follow_the_given_order_and_the_others_keep_theirs() -> None:
    text = "[e:Run {z: 1, b: 2, a: 3, y: 4} | [m:Part {c: 1, k: 2, a: 3}]]"
    out = write(text, Run=("a", "b"), Part=("k",))
    assert out == ("[e:Run {\n  a: 3,\n  b: 2,\n  z: 1,\n  y: 4\n} |\n"
                   "  [m:Part {k: 2, c: 1, a: 3}]\n]\n")


def test_a_nested_record_goes_one_entry_a_line_past_the_width() -> None:
    """On one line when ``  [m:Part {...}],`` fits in WIDTH columns, else one entry a line;
    a multi-line string is fenced on a line of its own."""
    fits = "v" * (WIDTH - len('  [m:Part {s: ""}],'))
    text = f'[e:Run | [m:Part {{s: "{fits}"}}], [n:Part {{s: "{fits}x"}}], [o:Part {{s: "a\\nb"}}]]'
    out = write(text)
    lines = out.splitlines()
    assert lines[1] == f'  [m:Part {{s: "{fits}"}}],' and len(lines[1]) == WIDTH
    assert lines[2:5] == ["  [n:Part {", f'    s: "{fits}x"', "  }],"]
    assert lines[5:11] == ["  [o:Part {", "    s: ```", "    a", "    b", "    ```", "  }]"]
    assert decoded(out) == decoded(text)
    assert write(out) == out


def test_comments_stay_with_their_entry_when_entries_move() -> None:
    text = ("// file\n\n[e:Run {\n  b: 2,  // of b\n  // above a\n  a: 1\n} |\n"
            "  [m:Part {x: 1}],  // after m\n  // above n\n  [n:Part]\n]\n")
    out = write(text, Run=("a", "b"))
    assert out == ("// file\n\n[e:Run {\n  // above a\n  a: 1,\n  b: 2  // of b\n} |\n"
                   "  [m:Part {x: 1}],  // after m\n  // above n\n  [n:Part]\n]\n")
    assert write(out, Run=("a", "b")) == out


def test_patterns_of_the_same_name_keep_their_own_comments() -> None:
    """Elements are keyed by position, not by name: two elements named alike (which a
    vocabulary may refuse later) do not swap or merge their comments."""
    text = "[e:Run |\n  // one\n  [m:Part],\n  // two\n  [m:Part]\n]\n"
    assert write(text) == text


def test_a_pattern_without_a_record_has_its_head_comments_above_it() -> None:
    text = "[e:Run |\n  [m // in the head\n  :Part]\n]\n"
    assert write(text) == "[e:Run |\n  // in the head\n  [m:Part]\n]\n"


def test_what_the_printer_cannot_write_is_a_positioned_error() -> None:
    for text, message in [("[e:Run {a: 1, a: 2}]", "p.gram:1:15: duplicate key 'a'"),
                          ("[e:Run | (n)]", "p.gram:1:10: expected a pattern [...] or a "
                                            "pattern's name"),
                          ("(n)", "p.gram:1:1: expected a pattern [...] at the top level")]:
        with pytest.raises(SpecError) as caught:
            write(text)
        assert str(caught.value.diagnostics[0]) == message


def test_a_comment_left_unplaced_is_named_with_its_position() -> None:
    """Should a writer leave a comment where it found it (a layout it does not know), the
    comment is reported, positioned, not lost silently."""
    src = b"[e:Run |\n  [m:Part]  // kept\n]\n"
    tree = parse(src)
    comments = collect_comments(tree, Decoder(src), by_position=True)
    comments.notes[((ELEMENT, 0),)][(ELEMENT, 5)] = Notes(("// nowhere",), None, 12)
    write_patterns(src, tree.root_node, comments)
    dropped = dropped_comments(src, "p.gram", comments)
    assert [str(d) for d in dropped] == ["p.gram:2:4: a comment where the formatter has no "
                                         "place for it cannot be kept"]
