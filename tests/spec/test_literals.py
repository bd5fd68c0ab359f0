"""The gram writer's literals read back as what they were written from, whatever the text."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gramagent._spec.gram.literals import format_key, format_name, format_value, quote_string
from gramagent._spec.gram.syntax import K_SUBJECT, Decoder, NodeInfo, parse

# Any text without NUL, leaning on what gram's lexer treats specially: a text that opens
# with "//" (after blanks) is the case tree-sitter-gram reads as a comment.
_TRICKY = st.sampled_from([" ", "/", "\t", "\n", "\v", "\f", "\r", "\\", '"', "`",
                           "'", "*", "x", "é"])
TEXTS = st.builds(lambda *parts: "".join(parts), st.text(" \t\n\v\f\r", max_size=2),
                  st.sampled_from(["", "/", "//", "///", "/*"]),
                  st.text(st.characters(codec="utf-8", exclude_characters="\0") | _TRICKY,
                          max_size=10))


def read_subject(src: str) -> NodeInfo:
    """The one subject pattern of ``src``, which must parse without an error."""
    data = src.encode()
    tree = parse(data)
    assert not tree.root_node.has_error, src
    (subject,) = tree.root_node.named_children
    assert subject.kind_id == K_SUBJECT, src
    info = Decoder(data, fast=False).info(subject)
    assert info is not None, src
    return info


@given(TEXTS)
def test_a_string_value_reads_back(text: str) -> None:
    for literal in (quote_string(text), format_value(text)):
        entries = read_subject(f"[x:V {{v: {literal}}}]").entries
        assert entries is not None and len(entries) == 1
        assert entries[0][2][1] == text, literal


@given(TEXTS.filter(bool))
def test_a_name_and_a_key_read_back(text: str) -> None:
    assert read_subject(f"[{format_name(text)}:V]").ident == text
    entries = read_subject(f"[x:V {{{format_key(text)}: 1}}]").entries
    assert entries is not None and entries[0][0] == text


def test_a_text_that_opens_like_a_comment_is_written_with_an_escaped_slash() -> None:
    assert quote_string("// not a comment") == '"\\// not a comment"'
    assert quote_string("  //x") == '"  \\//x"'
    assert quote_string("a // b") == '"a // b"'
