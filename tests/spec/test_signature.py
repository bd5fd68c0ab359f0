"""Tests for gramagent._spec.signature: gram type signatures <-> Signature <-> JSON Schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gramagent._spec.gram.literals import format_value
from gramagent._spec.model import Param, Signature
from gramagent._spec.signature import (
    format_signature,
    parse_signature,
    schema_to_signature,
    signature_to_schema,
)
from gramagent._spec.vocabulary import TYPE_NAMES
from gramagent.errors import SchemaError, SpecError

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def args_schema(text: str) -> dict[str, Any]:
    """The arguments schema of a signature text."""
    return signature_to_schema(parse_signature(text))


def param_schema(text: str) -> dict[str, Any]:
    """The schema of the only parameter of a signature text."""
    sig = parse_signature(text)
    assert len(sig.params) == 1
    return sig.params[0].schema


def round_trip(schema: dict[str, Any]) -> str:
    """schema -> signature -> text -> signature -> schema; asserts equality, returns text."""
    sig = schema_to_signature(schema)
    text = format_signature(sig)
    again = parse_signature(text)
    assert again == sig, text
    assert signature_to_schema(again) == schema, text
    return text


# --------------------------------------------------------------------------------------------
# Type names, both directions
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "jtype"), [
    ("String", "string"), ("Text", "string"),
    ("Integer", "integer"), ("Int", "integer"),
    ("Number", "number"), ("Double", "number"), ("Float", "number"),
    ("Boolean", "boolean"), ("Bool", "boolean"),
    ("Array", "array"), ("Object", "object"), ("Null", "null"),
])
def test_type_name_maps_to_json_type(name: str, jtype: str) -> None:
    """Every built-in type name gives its JSON Schema type, in a parameter and as result."""
    sig = parse_signature(f"(x::{name})==>(::{name})")
    assert sig.params[0].schema == {"type": jtype}
    assert sig.returns == {"type": jtype}


def test_any_means_no_type_constraint() -> None:
    """Any gives a schema without 'type'."""
    assert param_schema('(x::Any {description: "anything"})==>(::String)') == {
        "description": "anything"}


@pytest.mark.parametrize(("jtype", "canonical"), [
    ("string", "String"), ("integer", "Integer"), ("number", "Number"),
    ("boolean", "Boolean"), ("array", "Array"), ("object", "Object"), ("null", "Null"),
])
def test_json_type_is_written_with_its_canonical_name(jtype: str, canonical: str) -> None:
    """schema -> gram uses String/Integer/Number/Boolean/Array/Object/Null."""
    text = round_trip({"type": "object", "properties": {"x": {"type": jtype}},
                       "required": ["x"]})
    assert text == f"(x::{canonical})==>(::String)"


def test_aliases_read_as_the_canonical_type_and_write_canonically() -> None:
    """Text/Int/Double/Bool are read, and written back as String/Integer/Number/Boolean."""
    sig = parse_signature("(a::Text)==>(b::Int)==>(c::Double)==>(d::Bool)==>(::Text)")
    assert format_signature(sig) == (
        "(a::String)==>(b::Integer)==>(c::Number)==>(d::Boolean)==>(::String)")


def test_both_label_separators_mean_the_same() -> None:
    """':' and '::' are the same separator."""
    assert parse_signature("(a:String)==>(:Integer)") == \
        parse_signature("(a::String)==>(::Integer)")


@pytest.mark.parametrize("arrow", ["-->", "==>", "~~>"])
def test_every_arrow_family_reads(arrow: str) -> None:
    """Single, double and squiggle right arrows are all accepted."""
    sig = parse_signature(f"(a::String){arrow}(b::Integer){arrow}(::Boolean)")
    assert [p.name for p in sig.params] == ["a", "b"]
    assert sig.returns == {"type": "boolean"}


def test_a_type_pattern_in_a_union_joins_its_type() -> None:
    """(x::Point:Null) is Point's schema with type [object, null]."""
    schema = param_schema("(p::Point:Null {default: null})==>(::String)\n"
                          "[Point:Object | (x::Number), (y::Number)]")
    assert schema == {"type": ["object", "null"], "default": None,
                      "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                      "required": ["x", "y"]}


def test_union_labels_make_a_type_list_and_nullable() -> None:
    """Several labels are a union; Null among them makes the value nullable."""
    assert param_schema("(x::String:Null)==>(::String)") == {"type": ["string", "null"]}
    assert param_schema("(x::Integer::String)==>(::String)") == {"type": ["integer", "string"]}
    assert round_trip({"type": "object", "properties": {
        "x": {"type": ["number", "null"], "default": None}}}) == \
        "(x::Number:Null {default: null})==>(::String)"


# --------------------------------------------------------------------------------------------
# Parameters: arity, required, defaults, descriptions
# --------------------------------------------------------------------------------------------

def test_curried_signature_of_any_arity() -> None:
    """n parameters give n properties in order; the last node is the result."""
    names = [f"p{i}" for i in range(12)]
    text = "==>".join(f"({n}::Integer)" for n in names) + "==>(::Number)"
    schema = args_schema(text)
    assert list(schema["properties"]) == names
    assert schema["required"] == names
    assert parse_signature(text).returns == {"type": "number"}


def test_no_parameters() -> None:
    """()==>(::String) and a lone result node are tools without parameters."""
    for text in ("()==>(::String)", "(::String)"):
        sig = parse_signature(text)
        assert sig.params == ()
        assert signature_to_schema(sig) == {"type": "object", "properties": {}}
    assert format_signature(Signature()) == "()==>(::String)"


def test_the_issue_example() -> None:
    """(a::String)==>(b::Integer {default:3})==>(::String)."""
    assert args_schema("(a::String)==>(b::Integer {default:3})==>(::String)") == {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "integer", "default": 3}},
        "required": ["a"],
    }


def test_parameter_with_default_is_optional() -> None:
    """A default makes a parameter optional, and the default is in the schema."""
    sig = parse_signature('(personName::String {default:"world"})==>(::String)')
    assert sig.params == (Param(name="personName", schema={"type": "string",
                                                            "default": "world"},
                                required=False),)
    assert "required" not in signature_to_schema(sig)


def test_optional_without_default_and_required_with_default() -> None:
    """required: false / true override the default rule, both ways."""
    sig = parse_signature('(a::String {required: false})==>(b::String {default: "", '
                          'required: true})==>(::String)')
    assert [p.required for p in sig.params] == [False, True]
    assert signature_to_schema(sig)["required"] == ["b"]
    assert format_signature(sig).split("\n") == [
        "(a::String {required: false})", '==>(b::String {default: "", required: true})',
        "==>(::String)"]


def test_description_per_parameter_and_on_the_result() -> None:
    """description is an ordinary keyword of a parameter or of the result."""
    sig = parse_signature('(city::String {description: "City name"})'
                          '==>(::String {description: "The forecast"})')
    assert sig.params[0].schema == {"type": "string", "description": "City name"}
    assert sig.returns == {"type": "string", "description": "The forecast"}


def test_parameter_names_that_are_not_symbols_are_backticked() -> None:
    """Names gram cannot write bare (spaces, non-ASCII, digits first) use `backticks`."""
    schema = {"type": "object", "properties": {
        "año vehículo": {"type": "string"}, "1st": {"type": "integer"},
        "true": {"type": "boolean"}, "a`b": {"type": "string"}},
        "required": ["año vehículo", "1st", "true", "a`b"]}
    text = round_trip(schema)
    assert "(`año vehículo`::String)" in text
    assert "(`1st`::Integer)" in text
    assert "(`true`::Boolean)" in text
    assert "(`a\\`b`::String)" in text


# --------------------------------------------------------------------------------------------
# Constraints and other keywords
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("record", "expected"), [
    ('{enum: ["a", "b"]}', {"enum": ["a", "b"]}),
    ('{const: "x"}', {"const": "x"}),
    ("{minLength: 1, maxLength: 5}", {"minLength": 1, "maxLength": 5}),
    ('{pattern: "^[a-z]+$"}', {"pattern": "^[a-z]+$"}),
    ('{format: "date-time"}', {"format": "date-time"}),
    ('{title: "T", examples: ["a", "b"]}', {"title": "T", "examples": ["a", "b"]}),
    ('{deprecated: true, "x-origin": "bfcl"}', {"deprecated": True, "x-origin": "bfcl"}),
])
def test_string_keywords(record: str, expected: dict[str, Any]) -> None:
    """String constraints and annotations read into the schema and write back."""
    schema = param_schema(f"(x::String {record})==>(::String)")
    assert schema == {"type": "string", **expected}
    round_trip({"type": "object", "properties": {"x": schema}, "required": ["x"]})


@pytest.mark.parametrize(("record", "expected"), [
    ("{minimum: 0, maximum: 10}", {"minimum": 0, "maximum": 10}),
    ("{exclusiveMinimum: -1.5, exclusiveMaximum: 2.25}",
     {"exclusiveMinimum": -1.5, "exclusiveMaximum": 2.25}),
    ("{multipleOf: 0.5}", {"multipleOf": 0.5}),
])
def test_number_keywords(record: str, expected: dict[str, Any]) -> None:
    """Number bounds read and write back."""
    schema = param_schema(f"(x::Number {record})==>(::String)")
    assert schema == {"type": "number", **expected}
    round_trip({"type": "object", "properties": {"x": schema}, "required": ["x"]})


def test_array_of_a_builtin_type_with_item_constraints() -> None:
    """items takes a type name; minItems/maxItems/uniqueItems are keywords."""
    schema = param_schema("(tags::Array {items: String, minItems: 1, maxItems: 10, "
                          "uniqueItems: true})==>(::String)")
    assert schema == {"type": "array", "items": {"type": "string"}, "minItems": 1,
                      "maxItems": 10, "uniqueItems": True}


def test_array_of_arrays_uses_a_type_pattern() -> None:
    """Nested arrays: the inner array is a named type pattern."""
    schema = {"type": "object", "properties": {"matrix": {
        "type": "array", "items": {"type": "array", "items": {"type": "number"},
                                   "minItems": 2}}}, "required": ["matrix"]}
    text = round_trip(schema)
    assert text == ("(matrix::Array {items: MatrixItem})==>(::String)\n"
                    "[MatrixItem:Array {items: Number, minItems: 2}]")


def test_nested_objects_use_type_patterns() -> None:
    """An object parameter's properties are the members of a type pattern."""
    text = ('(user::User {description: "Who"})==>(::String)\n'
            '[User:Object {additionalProperties: false} |\n'
            '  (name::String),\n'
            '  (age::Integer {minimum: 0, required: false}),\n'
            '  (address::Address)\n'
            ']\n'
            '[Address:Object | (city::String), (zip::String {default: "00000"})]')
    assert param_schema(text) == {
        "type": "object", "additionalProperties": False, "description": "Who",
        "properties": {
            "name": {"type": "string"},
            "age": {"type": "integer", "minimum": 0},
            "address": {"type": "object",
                        "properties": {"city": {"type": "string"},
                                       "zip": {"type": "string", "default": "00000"}},
                        "required": ["city"]},
        },
        "required": ["name", "address"],
    }


def test_generated_names_come_from_property_names() -> None:
    """Patterns for JSON Schema sub-schemas are named after their property (items add
    ``Item``); a name already taken by another shape gets its parent's name in front."""
    meta = {"type": "object", "properties": {"k": {"type": "string"}}, "required": ["k"]}
    other_meta = {"type": "object", "properties": {"z": {"type": "string"}}, "required": ["z"]}
    schema = {"type": "object", "properties": {
        "series": {"type": "array", "items": {
            "type": "object", "properties": {"name": {"type": "string"}, "meta": meta},
            "required": ["name", "meta"]}},
        "user": {"type": "object", "properties": {"meta": other_meta}, "required": ["meta"]},
    }, "required": ["series", "user"]}
    text = round_trip(schema)
    assert text == ("(series::Array {items: SeriesItem})==>(user::User)==>(::String)\n"
                    "[SeriesItem:Object |\n  (name::String),\n  (meta::Meta)\n]\n"
                    "[Meta:Object |\n  (k::String)\n]\n"
                    "[User:Object |\n  (meta::UserMeta)\n]\n"
                    "[UserMeta:Object |\n  (z::String)\n]")


def test_equal_nested_schemas_share_one_type_pattern() -> None:
    """Two parameters of the same shape are written with one pattern."""
    point = {"type": "object", "properties": {"x": {"type": "number"},
                                              "y": {"type": "number"}},
             "required": ["x", "y"]}
    text = round_trip({"type": "object", "properties": {"a": point, "b": point},
                       "required": ["a", "b"]})
    assert text.count("[A:Object") == 1
    assert "(b::A)" in text


def test_chart_tool_of_the_notes_round_trips(chart_tool: dict[str, Any]) -> None:
    """The strict chart tool schema of seed 004 is expressible and comes back equal."""
    text = round_trip(chart_tool)
    assert text.startswith("({additionalProperties: false})\n==>(df_name::String)")
    assert "(series::Array {items: SeriesItem, minItems: 1, maxItems: 10})" in text
    assert "[SeriesItem:Object {additionalProperties: false} |" in text


def test_schema_valued_keywords_take_type_references() -> None:
    """anyOf/oneOf/allOf take lists of types; additionalProperties/not/if... take one."""
    schema = param_schema(
        "(x::Any {anyOf: [String, Shape], not: Null})==>(::String)\n"
        "[Shape:Object {additionalProperties: Number} | (kind::String)]")
    assert schema == {"anyOf": [{"type": "string"}, {
        "type": "object", "additionalProperties": {"type": "number"},
        "properties": {"kind": {"type": "string"}}, "required": ["kind"]}],
        "not": {"type": "null"}}
    round_trip({"type": "object", "properties": {"x": schema}})


@pytest.mark.parametrize("sub", [
    {"prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False,
     "minItems": 2, "maxItems": 2, "type": "array"},
    {"type": "object", "patternProperties": {"^x-": {"type": "string"}},
     "propertyNames": {"pattern": "^[a-z-]+$"}},
    {"type": "array", "contains": {"type": "integer", "minimum": 3}, "minContains": 1},
    {"if": {"type": "string"}, "then": {"minLength": 1}, "else": {"type": "number"}},
    {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
    {"allOf": [{"minimum": 0}, {"maximum": 9}], "type": "integer"},
    {"type": "object", "dependentRequired": {"a": ["b"]},
     "dependentSchemas": {"a": {"required": ["c"]}}, "minProperties": 1},
    {"type": "array", "items": [{"type": "string"}, True]},
])
def test_more_json_schema_keywords_round_trip(sub: dict[str, Any]) -> None:
    """The less common keywords (tuples, pattern properties, conditionals...) round trip."""
    round_trip({"type": "object", "properties": {"x": sub}, "required": ["x"]})


def test_values_gram_cannot_write_use_json_tagged_strings() -> None:
    """Nested lists, nulls in lists, empty lists, NUL, exponents: json`...`."""
    value = [[1, 2], None, [], {"a": [1]}, "a\0b", 1e-7, "back`tick\\"]
    schema = {"type": "object", "properties": {"x": {"default": value, "enum": [value]}}}
    text = round_trip(schema)
    assert "json`" in text


@pytest.mark.parametrize(("value", "text"), [
    (None, "null"), (True, "true"), (3, "3"), (-2.5, "-2.5"), ("a\"b\n", '"a\\"b\\n"'),
    (["a", 1, False], '["a", 1, false]'), ({"k": 1, "two words": "v"},
                                           '{k: 1, "two words": "v"}'),
    ({}, "{}"), ([], "json`[]`"), ([[1]], "json`[[1]]`"), (1e-07, "json`1e-07`"),
])
def test_format_value(value: Any, text: str) -> None:
    """JSON values are written as gram literals, or json`...` when gram has none."""
    assert format_value(value) == text


def test_explicit_required_list_when_order_or_names_differ() -> None:
    """A required list that flags cannot say is written verbatim on the arguments node."""
    text = round_trip({"type": "object", "properties": {"a": {"type": "string"},
                                                        "b": {"type": "string"}},
                       "required": ["b", "a", "ghost"]})
    assert text.startswith('({required: ["b", "a", "ghost"]})==>(a::String)==>(b::String)')
    text = round_trip({"type": "object", "properties": {"a": {"type": "string"}},
                       "required": []})
    assert text.startswith("({required: json`[]`})")


def test_nested_required_and_properties_edge_cases() -> None:
    """Object without properties but with required, and explicitly empty properties."""
    round_trip({"type": "object", "properties": {
        "population": {"type": "object", "required": ["adults", "children"]},
        "settings": {"type": "object", "properties": {}},
        "both": {"type": "object", "required": ["x"], "default": {}},
    }, "required": ["population"]})


def test_arguments_node_holds_object_keywords() -> None:
    """The leading unnamed node's record goes to the arguments object."""
    sig = parse_signature('({additionalProperties: false, description: "Args"})'
                          "==>(a::String)==>(::String)")
    assert sig.keywords == {"additionalProperties": False, "description": "Args"}
    assert signature_to_schema(sig) == {
        "type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
        "additionalProperties": False, "description": "Args"}


def test_long_signatures_break_before_arrows() -> None:
    """A path longer than 80 characters is written one node per line."""
    sig = Signature(params=tuple(Param(name=f"parameter_{i}", schema={"type": "string"})
                                 for i in range(5)))
    text = format_signature(sig)
    assert text.split("\n")[1] == "==>(parameter_1::String)"
    assert parse_signature(text) == sig


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("(a::Strng)==>(::String)", "<string>:1:5: parameter 'a': unknown type 'Strng'"),
    ("(a::String)==>(::Txt)", "<string>:1:18: the result: unknown type 'Txt'"),
    ("(a::String)==>\n  (b::Integr)==>(::String)", "<string>:2:7: parameter 'b': unknown type"),
    ("(a::String)==>(a::String)==>(::String)", "<string>:1:16: duplicate parameter 'a'"),
    ("(a)==>(::String)", "<string>:1:1: parameter 'a' needs a type"),
    ("(::String)==>(::String)", "<string>:1:1: a parameter needs a name"),
    ("(a::String)==>(r::String)", "<string>:1:16: the result node takes no name"),
    ("(a::String)<==(::String)", "<string>:1:12: a signature reads left to right"),
    ("(a::String)-[x]->(::String)", "<string>:1:12: an arrow in a signature carries no"),
    ("(a::String {minimun: 1})==>(::String)", "did you mean 'minimum'?"),
    ('(a::String {type: "string"})==>(::String)', "write the type as a label"),
    ("(a::Array {items: Strin})==>(::String)", "<string>:1:19: parameter 'a': unknown type"),
    ("(a::String {minLength: -1})==>(::String)",
     "minLength must be a non-negative integer, not -1"),
    ('(a::String {pattern: "("})==>(::String)', "is not a valid regular expression"),
    ("(a::Any:String)==>(::String)", "'Any' cannot be part of a union"),
    ("(a::String:String)==>(::String)", "type 'String' is listed twice"),
    ("(a::P:Q)==>(::String)\n[P:Object | (x::String)]\n[Q:Object | (y::String)]",
     "<string>:1:7: parameter 'a': 'Q': a union holds at most one type pattern"),
    ("(a::P:Null)==>(::String)\n[P:Any {minimum: 1}]", "'P' has no type (Any)"),
    ("(a::P:Object)==>(::String)\n[P:Object | (x::String)]", "type 'Object' is listed twice"),
    ("(a::P)==>(::String)\n[P:Object | (q::P)]",
     "<string>:2:17: member 'q': type 'P' refers to itself"),
    ("(a::P)==>(::String)\n[P:String | (q::String)]", "members (properties) need an Object"),
    ("(a::P)==>(::String)\n[String:Object | (q::String)]", "'String' is a built-in type"),
    ("(a::String {default: 10px})==>(::String)", "'10px' is not a JSON value"),
    ("(a::String {default: bare})==>(::String)", "unexpected name 'bare'"),
    ("(a::String {default: json`{bad`})==>(::String)", "invalid JSON in json`...`"),
])
def test_signature_errors_are_positioned(text: str, expected: str) -> None:
    """Every signature problem names its position and what was expected."""
    with pytest.raises(SpecError) as info:
        parse_signature(text)
    assert expected in str(info.value)


def test_all_signature_errors_are_reported_together() -> None:
    """Several problems give several diagnostics, in text order."""
    with pytest.raises(SpecError) as info:
        parse_signature('(a::Strng)==>(b::Integer {minimum: "x"})==>(::Txt)')
    lines = str(info.value).splitlines()
    assert [line.split(": ")[0] for line in lines] == [
        "<string>:1:5", "<string>:1:36", "<string>:1:47"]


def test_signature_syntax_error() -> None:
    """An unclosed node is a syntax error with its position."""
    with pytest.raises(SpecError, match=r"<string>:1:\d+: expected '\)' to close the node 'a' "
                                        r"opened at 1:1"):
        parse_signature("(a::String ==>(::String)")


@pytest.mark.parametrize(("schema", "keyword", "path"), [
    ({"type": "object", "properties": {"a": {"$ref": "#/x"}}}, "$ref", "/properties/a"),
    ({"type": "object", "properties": {"a": {"type": "string", "nullable": True}}},
     "nullable", "/properties/a"),
    ({"type": "object", "properties": {"a": {"type": "array", "items": {
        "type": "object", "properties": {"b": {"typo": 1}}}}}}, "typo",
     "/properties/a/items/properties/b"),
    ({"type": "object", "properties": {"a": {"type": "strng"}}}, "type", "/properties/a"),
    ({"type": "object", "properties": {"a": {"type": "integer", "minimum": "x"}}},
     "minimum", "/properties/a"),
    ({"type": "object", "properties": {"a": {"minItems": -1}}}, "minItems", "/properties/a"),
    ({"type": "object", "properties": {"a": {"anyOf": []}}}, "anyOf", "/properties/a"),
    ({"type": "object", "properties": {"a": True}}, "properties", "/properties/a"),
    ({"type": "object", "properties": {}, "required": "a"}, "required", ""),
    ({"type": "object", "properties": {"": {"type": "string"}}}, "properties", ""),
    ({"type": "object", "properties": {"a\0": {}}}, "properties", ""),
    ({"type": "object", "properties": {"a": {"patternProperties": {"\0": {}}}}},
     "patternProperties", "/properties/a"),
    ({"type": "object", "properties": {"a": {"type": "string", "properties": {"b": {}}}}},
     "properties", "/properties/a"),
    ({"type": "string"}, "type", ""),
])
def test_schema_to_signature_names_the_unsupported_keyword(
        schema: dict[str, Any], keyword: str, path: str) -> None:
    """SchemaError carries the keyword and the JSON pointer of the schema holding it."""
    with pytest.raises(SchemaError) as info:
        schema_to_signature(schema)
    assert info.value.keyword == keyword
    assert info.value.path == path


def test_schema_to_signature_does_not_share_the_input() -> None:
    """Changing the input schema afterwards does not change the signature."""
    schema = {"type": "object", "properties": {"a": {"type": "string", "enum": ["x"]}}}
    sig = schema_to_signature(schema)
    schema["properties"]["a"]["enum"].append("y")
    assert sig.params[0].schema["enum"] == ["x"]


def test_type_names_table_is_the_documented_one() -> None:
    """The built-in names are exactly those docs/signatures.md lists."""
    assert set(TYPE_NAMES) == {"String", "Text", "Integer", "Int", "Number", "Double", "Float",
                               "Boolean", "Bool", "Array", "Object", "Null", "Any"}


# --------------------------------------------------------------------------------------------
# Property-based round trips
# --------------------------------------------------------------------------------------------

_TYPES = ["string", "integer", "number", "boolean", "array", "object", "null"]
_names = st.one_of(
    st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,8}", fullmatch=True),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
            min_size=1, max_size=6),
)
_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70),
                     st.floats(allow_nan=False, allow_infinity=False), _text)
_json = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(_text, inner, max_size=3)), max_leaves=6)


def _value_of(jtype: str) -> st.SearchStrategy[Any]:
    return {
        "string": _text, "integer": st.integers(-(10**6), 10**6),
        "number": st.floats(allow_nan=False, allow_infinity=False, width=32),
        "boolean": st.booleans(), "null": st.none(),
        "array": st.lists(_scalars, max_size=3),
        "object": st.dictionaries(_text, _scalars, max_size=2),
    }[jtype]


@st.composite
def schemas(draw: st.DrawFn, depth: int = 2) -> dict[str, Any]:
    """JSON Schemas in the subset the notation expresses."""
    kinds = ["scalar", "union", "any"] + (["array", "object", "anyof"] if depth else [])
    kind = draw(st.sampled_from(kinds))
    schema: dict[str, Any] = {}
    if kind == "scalar":
        schema["type"] = draw(st.sampled_from(["string", "integer", "number", "boolean"]))
    elif kind == "union":
        schema["type"] = draw(st.lists(st.sampled_from(_TYPES), min_size=2, max_size=3,
                                       unique=True))
    elif kind == "array":
        schema["type"] = "array"
        if draw(st.booleans()):
            schema["items"] = draw(schemas(depth - 1))
        if draw(st.booleans()):
            schema["minItems"] = draw(st.integers(0, 5))
    elif kind == "object":
        schema["type"] = "object"
        props = draw(st.dictionaries(_names, schemas(depth - 1), max_size=3))
        if props or draw(st.booleans()):
            schema["properties"] = props
        required = draw(st.lists(st.sampled_from(sorted(props)), unique=True)) if props else []
        if required or draw(st.booleans()):
            schema["required"] = required
        if draw(st.booleans()):
            schema["additionalProperties"] = draw(st.booleans() | schemas(0))
    elif kind == "anyof":
        schema["anyOf"] = draw(st.lists(schemas(depth - 1), min_size=1, max_size=3))
    return _annotated(draw, schema)


def _annotated(draw: st.DrawFn, schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with, maybe, a description, an enum or a minimum, and a default."""
    if draw(st.booleans()):
        schema["description"] = draw(_text)
    if schema.get("type") == "string" and draw(st.booleans()):
        schema["enum"] = draw(st.lists(_text, min_size=1, max_size=3))
    if schema.get("type") in ("integer", "number") and draw(st.booleans()):
        schema["minimum"] = draw(st.integers(-100, 100))
    if draw(st.booleans()):
        jtype = schema.get("type")
        if jtype is None or draw(st.booleans()):  # an annotation: need not match the type
            schema["default"] = draw(_json)
        else:
            types = [jtype] if isinstance(jtype, str) else jtype
            schema["default"] = draw(_value_of(draw(st.sampled_from(types))))
    return schema


@st.composite
def argument_schemas(draw: st.DrawFn) -> dict[str, Any]:
    """Arguments schemas: type object, properties, maybe required and object keywords."""
    props = draw(st.dictionaries(_names, schemas(), max_size=4))
    schema: dict[str, Any] = {"type": "object", "properties": props}
    required = draw(st.lists(st.sampled_from(sorted(props)), unique=True)) if props else []
    if required or draw(st.booleans()):
        schema["required"] = required
    if draw(st.booleans()):
        schema["additionalProperties"] = False
    return schema


@pytest.mark.slow
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(argument_schemas())
def test_generated_schemas_round_trip_through_gram(schema: dict[str, Any]) -> None:
    """schema -> signature -> gram text -> signature -> schema gives an equal schema."""
    round_trip(schema)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_names, schemas(), st.booleans()), max_size=4,
                unique_by=lambda t: t[0]), schemas(1))
def test_generated_signatures_survive_write_then_read(
        params: list[tuple[str, dict[str, Any], bool]], returns: dict[str, Any]) -> None:
    """format_signature then parse_signature gives back the same Signature."""
    sig = Signature(params=tuple(Param(name=n, schema=s, required=r) for n, s, r in params),
                    returns=returns)
    assert parse_signature(format_signature(sig)) == sig


# --------------------------------------------------------------------------------------------
# The documentation's examples
# --------------------------------------------------------------------------------------------

def _doc_blocks() -> list[tuple[str, str]]:
    text = (Path(__file__).resolve().parent.parent.parent / "docs" / "signatures.md").read_text()
    parts = text.split("```")
    return [(parts[i].split("\n", 1)[0], parts[i].split("\n", 1)[1])
            for i in range(1, len(parts), 2)]


def _doc_schema(block: str, types: list[str]) -> dict[str, Any]:
    """The schema of a documentation block; ``types`` collects the blocks of type patterns."""
    from gramagent._spec.gram.text import load_gram

    if ":Tool" in block:
        (tool,) = load_gram(block).tools
        return tool.schema
    if block.startswith("["):
        types.append(block)
        block = "(x::Any)==>(::String)"
    return signature_to_schema(parse_signature(block + "\n" + "\n".join(types)))


def test_documentation_examples_read_and_match_their_json() -> None:
    """Every gram block of docs/signatures.md reads; a JSON block after one is its schema."""
    blocks = _doc_blocks()
    types: list[str] = []
    checked = 0
    for index, (lang, body) in enumerate(blocks):
        if lang != "gram":
            continue
        schema = _doc_schema(body, types)
        following = blocks[index + 1] if index + 1 < len(blocks) else ("", "")
        if following[0] == "json":
            assert schema == json.loads(following[1]), body
            checked += 1
    assert checked == 3
