"""Tests for gramagent._spec.gram.seedhints: the seed documents' notation gets a hint at the form
gram reads, instead of syntax errors and far-fetched guesses."""

from __future__ import annotations

import pytest

from gramagent._spec.gram.text import load_gram
from gramagent._spec.signature import parse_signature
from gramagent.errors import SpecError


def problems(text: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_signature(text)
    return [f"{d.line}:{d.column}: {d.message}" for d in info.value.diagnostics]


@pytest.mark.parametrize(("text", "expected"), [
    # The seed's own examples, as written there.
    ("(userParams::Object {fields:[...]})==>(::String)",
     "1:22: 'fields' is the seed documents' record notation; gram writes an object's fields as "
     "the members of a type pattern: (userParams::UserParams), with [UserParams:Object | "
     "(name::String), (age::Integer)] after the signature"),
    ("(name: Text) --> IO Text",
     "1:14: '--> IO Text' is the seed documents' Haskell notation; in gram the result is the "
     "path's last, unnamed node, typed with a JSON type: write (name::Text)==>(::Text)"),
    ("(tags::[T])==>(::String)",
     "1:8: '[T]' is the seed documents' list notation; gram writes a list as "
     "(tags::Array {items: T})"),
    # Their neighbours.
    ("(p::Object {fields: {name: Text, age: Int}})==>(::String)",
     "1:13: 'fields' is the seed documents' record notation; gram writes an object's fields as "
     "the members of a type pattern: (p::P), with [P:Object | (name::String), "
     "(age::Integer)] after the signature"),
    ("(p::{name: Text, age: Int})==>(::String)",
     "1:5: '{field: Type}' is the seed documents' record notation; gram writes an object's "
     "fields as the members of a type pattern: (p::P), with [P:Object | (name::String), "
     "(age::Integer)] after the signature"),
    ("(a::Int)==>(b::Bool)==>(::IO Text)",
     "1:27: 'IO' is a Haskell effect, not a type: a result node names the JSON type of the "
     "result, e.g. (::Text)"),
    ("(a::Int)==>(::IO)",
     "1:15: 'IO' is a Haskell effect, not a type: a result node names the JSON type of the "
     "result, e.g. (::String)"),
])
def test_seed_notation_gets_one_hint(text: str, expected: str) -> None:
    """Each seed form is one hint, at the form, naming what to write; no other message."""
    assert problems(text) == [expected]
    assert "did you mean" not in expected


def test_other_problems_are_kept() -> None:
    """Problems outside the seed form are still reported, in text order."""
    text = ('[a:Tool {description: "A"} | (x::Strng)==>(::String)]\n'
            '[b:Tool {description: "B"} | (names::[Text])==>(::String)]\n')
    with pytest.raises(SpecError) as info:
        load_gram(text)
    assert [f"{d.line}:{d.column}: {d.message}" for d in info.value.diagnostics] == [
        "1:34: parameter 'x': unknown type 'Strng'; did you mean 'String'?",
        "2:38: '[Text]' is the seed documents' list notation; gram writes a list as "
        "(names::Array {items: Text})",
    ]


def test_valid_gram_that_looks_like_a_seed_form_gets_no_hint() -> None:
    """A list of type names (anyOf: [...]) or a map value is gram: not mistaken for the seed's
    list or record notation when something else in the text is wrong."""
    found = problems('(a::Strng)==>(b::Object {anyOf: [Object], default: {fields: 1}})'
                     '==>(::String)')
    assert found == ["1:5: parameter 'a': unknown type 'Strng'; did you mean 'String'?"]


def test_seed_forms_in_a_file_are_hinted_with_the_file_position() -> None:
    """The hint reaches load_gram too, positioned in the file."""
    text = ('[getUser:Tool {description: "Find a user"} |\n'
            '  (query::Object {fields: [name]})==>(::String)\n'
            ']\n')
    with pytest.raises(SpecError) as info:
        load_gram(text, file="u.gram")
    assert [str(d) for d in info.value.diagnostics] == [
        "u.gram:2:19: 'fields' is the seed documents' record notation; gram writes an "
        "object's fields as the members of a type pattern: (query::Query), with "
        "[Query:Object | (name::String), (age::Integer)] after the signature"]
