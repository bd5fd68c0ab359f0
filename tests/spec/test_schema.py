"""Tests for gramagent._spec.schema.strict, gramagent._spec.schema.nulls and
gramagent._spec.calls.validate: strict-mode compilation and compiled validators."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gramagent._spec.calls.validate import compile_validator
from gramagent._spec.schema.nulls import strip_strict_nulls
from gramagent._spec.schema.strict import OPENAI, OPENAI_FINE_TUNED, StrictResult, strict_schema
from gramagent.errors import SchemaError


def obj(properties: dict[str, Any], required: list[str] | None = None, **extra: Any
        ) -> dict[str, Any]:
    """An object schema."""
    out: dict[str, Any] = {"type": "object", "properties": properties, **extra}
    if required is not None:
        out["required"] = required
    return out


def actions(result: StrictResult) -> list[tuple[str, str]]:
    """(path, action) of every change."""
    return [(c.path, c.action) for c in result.changes]


def problem_paths(result: StrictResult) -> list[str]:
    """Paths of every problem."""
    return [p.path for p in result.problems]


def walk(node: Any, path: str = ""):
    """Every (path, schema node) of a schema, depth first."""
    if not isinstance(node, dict):
        return
    yield path, node
    for key in ("properties", "$defs", "definitions"):
        for name, sub in (node.get(key) or {}).items():
            yield from walk(sub, f"{path}/{key}/{name}")
    if isinstance(node.get("items"), dict):
        yield from walk(node["items"], f"{path}/items")
    for i, sub in enumerate(node.get("anyOf") or ()):
        yield from walk(sub, f"{path}/anyOf/{i}")


def assert_strict_invariants(schema: dict[str, Any], profile=OPENAI) -> None:
    """Every object closed and fully required; no keyword the profile refuses."""
    for path, node in walk(schema):
        assert set(node) <= profile.keywords, (path, set(node) - profile.keywords)
        if node.get("type") == "object" or "properties" in node:
            assert node["additionalProperties"] is False, path
            assert set(node.get("required", [])) >= set(node.get("properties", {})), path


# --------------------------------------------------------------------------------------------
# The seed's chart tool
# --------------------------------------------------------------------------------------------

def test_chart_tool_keeps_its_shape_and_moves_defaults_into_descriptions(
    chart_tool: dict[str, Any],
) -> None:
    """The seed schema is already strict except for `default`, which becomes description text."""
    result = strict_schema(chart_tool)
    out = result.schema
    assert result.ok
    assert out["required"] == chart_tool["required"]
    assert out["additionalProperties"] is False
    assert out["properties"]["series"] == chart_tool["properties"]["series"]
    assert out["properties"]["chart_type"] == chart_tool["properties"]["chart_type"]
    for name in ("logical_name", "x_label", "y_label", "title", "note"):
        assert out["properties"][name] == {"type": "string", "description": 'Default: ""'}
    assert actions(result) == [(f"/properties/{n}", "described")
                               for n in ("logical_name", "x_label", "y_label", "title", "note")]
    assert_strict_invariants(out)


def test_chart_tool_calls_validate_the_same_against_both_schemas(
    chart_tool: dict[str, Any],
) -> None:
    """A complete call (empty strings for the optional fields) is valid for both schemas."""
    call = {"df_name": "sales", "logical_name": "", "chart_type": "bar", "x_field": "month",
            "x_label": "", "y_label": "", "series": [{"name": "Revenue", "y_field": "rev"}],
            "title": "", "note": ""}
    original = compile_validator(chart_tool)
    strict = compile_validator(strict_schema(chart_tool).schema)
    assert original.errors(call) == strict.errors(call) == []
    incomplete = {k: v for k, v in call.items() if k != "note"}
    assert original.errors(incomplete) == strict.errors(incomplete) == [
        "'note' is a required property"]
    too_many = {**call, "series": [{"name": "a", "y_field": "b"}] * 11}
    assert not strict.is_valid(too_many)


# --------------------------------------------------------------------------------------------
# Rules, one by one
# --------------------------------------------------------------------------------------------

def test_optional_typed_property_becomes_required_and_nullable() -> None:
    """An optional property joins `required`, its type joins a union with null."""
    result = strict_schema(obj({"a": {"type": "string"}, "b": {"type": "integer"}}, ["a"]))
    assert result.schema["required"] == ["a", "b"]
    assert result.schema["properties"]["a"] == {"type": "string"}
    assert result.schema["properties"]["b"] == {"type": ["integer", "null"]}
    assert ("/properties/b", "nullable") in actions(result)
    assert ("", "required") in actions(result)
    assert "made required: b" in [c.message for c in result.changes if c.action == "required"]


def test_type_list_gets_null_appended_once() -> None:
    """A type list gains null; a list that has null already is left alone."""
    result = strict_schema(obj({"a": {"type": ["string", "integer"]},
                                "b": {"type": ["string", "null"]}}))
    assert result.schema["properties"]["a"]["type"] == ["string", "integer", "null"]
    assert result.schema["properties"]["b"]["type"] == ["string", "null"]
    assert ("/properties/b", "nullable") not in actions(result)


def test_optional_enum_admits_null_as_a_value() -> None:
    """JSON Schema checks enum too: null must be one of its values."""
    result = strict_schema(obj({"unit": {"type": "string", "enum": ["C", "F"]}}))
    unit = result.schema["properties"]["unit"]
    assert unit == {"type": ["string", "null"], "enum": ["C", "F", None]}
    assert compile_validator(result.schema).is_valid({"unit": None})


def test_optional_untyped_enum_and_const() -> None:
    """Without a type, null joins the enum; a const becomes a two-value enum."""
    result = strict_schema(obj({"e": {"enum": [1, "x"]}, "c": {"const": "on"}}))
    assert result.schema["properties"]["e"] == {"enum": [1, "x", None]}
    assert result.schema["properties"]["c"] == {"enum": ["on", None]}


def test_optional_anyof_gets_a_null_branch() -> None:
    """anyOf without a null branch gets one; with one, it is left alone."""
    result = strict_schema(obj({
        "a": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        "b": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    }))
    assert result.schema["properties"]["a"]["anyOf"][-1] == {"type": "null"}
    assert len(result.schema["properties"]["a"]["anyOf"]) == 3
    assert len(result.schema["properties"]["b"]["anyOf"]) == 2


def test_optional_ref_is_wrapped_with_its_annotations_outside() -> None:
    """A $ref cannot take siblings: nullability wraps it in anyOf, description outside."""
    schema = obj({"pt": {"$ref": "#/$defs/Point", "description": "where"}},
                 **{"$defs": {"Point": obj({"x": {"type": "number"}}, ["x"])}})
    result = strict_schema(schema)
    assert result.schema["properties"]["pt"] == {
        "anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}], "description": "where"}
    assert result.schema["$defs"]["Point"]["additionalProperties"] is False
    assert result.ok
    validator = compile_validator(result.schema)
    assert validator.is_valid({"pt": None})
    assert validator.is_valid({"pt": {"x": 1}})
    assert not validator.is_valid({"pt": {"x": 1, "y": 2}})


def test_required_ref_with_description_is_wrapped() -> None:
    """Even when required, a $ref with a sibling description is wrapped in anyOf."""
    schema = obj({"pt": {"$ref": "#/$defs/P", "description": "d"}}, ["pt"],
                 **{"$defs": {"P": obj({"x": {"type": "number"}}, ["x"])}})
    result = strict_schema(schema)
    assert result.schema["properties"]["pt"] == {"anyOf": [{"$ref": "#/$defs/P"}],
                                                 "description": "d"}
    assert ("/properties/pt", "rewritten") in actions(result)


def test_objects_are_closed_everywhere() -> None:
    """additionalProperties false on the root, nested objects, array items and $defs."""
    schema = obj({
        "nested": obj({"deep": obj({"x": {"type": "integer"}}, ["x"])}, ["deep"]),
        "rows": {"type": "array", "items": obj({"k": {"type": "string"}}, ["k"])},
    }, ["nested", "rows"], additionalProperties=True,
        **{"$defs": {"D": obj({"y": {"type": "boolean"}}, ["y"])}})
    result = strict_schema(schema)
    assert_strict_invariants(result.schema)
    closed = {path for path, action in actions(result) if action == "closed"}
    assert closed == {"", "/properties/nested", "/properties/nested/properties/deep",
                      "/properties/rows/items", "/$defs/D"}
    assert result.ok


def test_nested_objects_in_arrays_get_every_rule() -> None:
    """Objects inside array items are made strict like top-level ones."""
    schema = obj({"series": {"type": "array", "minItems": 1, "items": obj(
        {"name": {"type": "string"}, "color": {"type": "string", "default": "red"}},
        ["name"])}}, ["series"])
    item = strict_schema(schema).schema["properties"]["series"]["items"]
    assert item["required"] == ["name", "color"]
    assert item["additionalProperties"] is False
    assert item["properties"]["color"] == {"type": ["string", "null"],
                                           "description": 'Default: "red"'}


def test_unsupported_constraints_are_folded_into_the_description() -> None:
    """The model still sees constraints strict mode cannot enforce."""
    schema = obj({
        "name": {"type": "string", "minLength": 2, "maxLength": 5, "description": "A name"},
        "site": {"type": "string", "format": "uri"},
        "day": {"type": "string", "format": "date"},
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        "n": {"type": "integer", "default": 3, "examples": [1, 2]},
    }, ["name", "site", "day", "tags", "n"])
    result = strict_schema(schema)
    props = result.schema["properties"]
    assert props["name"] == {"type": "string",
                             "description": "A name (at least 2 characters; at most 5 characters)"}
    assert props["site"] == {"type": "string", "description": "Format: uri"}
    assert props["day"] == {"type": "string", "format": "date"}
    assert props["tags"]["description"] == "Items must be unique"
    assert props["n"]["description"] == "Default: 3; examples: 1, 2"
    described = [(c.path, c.message.split()[0]) for c in result.changes
                 if c.action == "described"]
    assert ("/properties/name", "minLength") in described
    assert ("/properties/site", "format") in described
    assert ("/properties/n", "default") in described
    assert result.ok


def test_supported_constraints_are_kept() -> None:
    """pattern, numeric bounds and item counts are supported by current OpenAI models."""
    props = {"s": {"type": "string", "pattern": "^a"},
             "x": {"type": "number", "minimum": 0, "exclusiveMaximum": 1, "multipleOf": 0.5},
             "l": {"type": "array", "items": {"type": "integer"}, "minItems": 1,
                   "maxItems": 3}}
    schema = obj(props, list(props))
    result = strict_schema(schema)
    assert result.schema == {**schema, "additionalProperties": False}
    assert actions(result) == [("", "closed")]


def test_fine_tuned_profile_folds_every_constraint() -> None:
    """Fine-tuned models support no string, number or array constraint."""
    schema = obj({"x": {"type": "number", "minimum": 0, "maximum": 10},
                  "s": {"type": "string", "pattern": "^a", "format": "date"}}, ["x", "s"])
    result = strict_schema(schema, profile=OPENAI_FINE_TUNED)
    assert result.schema["properties"]["x"] == {"type": "number",
                                                "description": "Minimum 0; maximum 10"}
    assert result.schema["properties"]["s"] == {
        "type": "string", "description": 'Matching the pattern "^a"; format: date'}
    assert_strict_invariants(result.schema, OPENAI_FINE_TUNED)


def test_composition_keywords() -> None:
    """oneOf becomes anyOf, an allOf of one merges, other composition is removed."""
    schema = obj({
        "one": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
        "merged": {"allOf": [{"type": "string", "enum": ["a"]}], "description": "m"},
        "two": {"type": "string", "allOf": [{"minLength": 1}, {"maxLength": 3}]},
        "cond": {"type": "integer", "not": {"const": 3}, "if": {"minimum": 1},
                 "then": {"maximum": 9}, "$comment": "x"},
    }, ["one", "merged", "two", "cond"])
    result = strict_schema(schema)
    props = result.schema["properties"]
    assert props["one"] == {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    assert props["merged"] == {"type": "string", "enum": ["a"], "description": "m"}
    assert props["two"] == {"type": "string"}
    assert props["cond"] == {"type": "integer"}
    removed = sorted(c.message.split()[0] for c in result.changes if c.action == "removed")
    assert removed == ["$comment", "allOf", "if", "not", "then"]
    assert ("/properties/one", "rewritten") in actions(result)
    assert ("/properties/merged", "rewritten") in actions(result)


def test_properties_without_a_type_are_typed_object() -> None:
    """`properties` alone marks an object; strict mode wants the type said."""
    result = strict_schema({"properties": {"a": {"type": "string"}}, "required": ["a"]})
    assert result.schema["type"] == "object"
    assert ("", "rewritten") in actions(result)
    assert result.ok


@pytest.mark.parametrize(("schema", "path", "words"), [
    (obj({"free": {"type": "object"}}, ["free"]), "/properties/free", "free-form object"),
    (obj({"map": {"type": "object", "properties": {"a": {"type": "string"}},
                  "additionalProperties": {"type": "integer"}}}, ["map"]),
     "/properties/map", "additionalProperties with a schema"),
    (obj({"any": {"description": "anything"}}, ["any"]), "/properties/any", "without a type"),
    (obj({"yes": True}, ["yes"]), "/properties/yes", "boolean schema"),
    (obj({"arr": {"type": "array"}}, ["arr"]), "/properties/arr", "without items"),
    (obj({"a": {"type": "string"}}, ["a", "ghost"]), "", "ghost"),
    ({"type": "string"}, "", "root must be an object"),
    ({"anyOf": [obj({"a": {"type": "string"}}, ["a"])]}, "", "root must be an object"),
], ids=["free-form", "map", "untyped", "boolean", "array-no-items", "ghost",
        "root-string", "root-anyof"])
def test_what_strict_mode_cannot_express_is_a_problem(schema: dict[str, Any], path: str,
                                                      words: str) -> None:
    """Inexpressible nodes are reported as problems, with their path, and `ok` is False."""
    result = strict_schema(schema)
    assert not result.ok
    assert path in problem_paths(result)
    assert any(words in p.message for p in result.problems), result.problems
    assert all(p.action == "unsupported" for p in result.problems)


@pytest.mark.parametrize(("schema", "keyword", "path"), [
    (obj({"a": "string"}), None, "/properties/a"),
    (obj({"a": {"type": "string"}}, "a"), "required", ""),  # type: ignore[arg-type]
    (obj({"a": {"type": "string"}}, [1]), "required", ""),  # type: ignore[list-item]
    (obj({"a": {"type": 3}}), "type", "/properties/a"),
    (obj({"a": {"anyOf": {"type": "string"}}}), "anyOf", "/properties/a"),
    ({"type": "object", "properties": []}, "properties", ""),
], ids=["schema-is-string", "required-string", "required-number", "type-number",
        "anyOf-object", "properties-list"])
def test_malformed_schemas_raise(schema: dict[str, Any], keyword: str | None,
                                 path: str) -> None:
    """Malformed input is refused with the keyword and place of the fault."""
    with pytest.raises(SchemaError) as info:
        strict_schema(schema)
    assert info.value.keyword == keyword
    assert info.value.path == path


def test_nullable_enum_keeps_null_once() -> None:
    """An enum that lists null already (with a non-null type) does not get a second one."""
    result = strict_schema(obj({"u": {"type": "string", "enum": ["C", None]}}))
    assert result.schema["properties"]["u"] == {"type": ["string", "null"], "enum": ["C", None]}


def test_path_escapes_slash_and_tilde() -> None:
    """Paths are JSON pointers: '/' and '~' in names are escaped."""
    result = strict_schema(obj({"a/b~c": {"type": "string"}}))
    assert ("/properties/a~1b~0c", "nullable") in actions(result)


# --------------------------------------------------------------------------------------------
# Limits
# --------------------------------------------------------------------------------------------

def nest(levels: int) -> dict[str, Any]:
    """An object nested `levels` deep."""
    node: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        node = obj({"x": node}, ["x"])
    return node


def test_nesting_depth_limit() -> None:
    """Ten object levels pass (the current limit); eleven are a problem."""
    assert strict_schema(nest(10)).ok
    result = strict_schema(nest(11))
    assert [p.message for p in result.problems] == [
        "11 levels of object nesting; openai allows 10"]
    older = dataclasses.replace(OPENAI, max_depth=5)
    assert not strict_schema(nest(6), profile=older).ok


def test_property_enum_and_size_limits() -> None:
    """Counts are summed over the whole schema, against the profile's limits."""
    small = dataclasses.replace(OPENAI, max_properties=3, max_enum_values=4,
                                max_string_chars=20, large_enum_values=2,
                                large_enum_chars=5)
    schema = obj({"a": {"type": "string", "enum": ["xx", "yy", "zz"]},
                  "b": obj({"c": {"type": "integer", "enum": [1, 2]},
                            "d": {"type": "string"}}, ["c", "d"])}, ["a", "b"])
    messages = [p.message for p in strict_schema(schema, profile=small).problems]
    assert "4 object properties in total; openai allows 3" in messages
    assert "5 enum values in total; openai allows 4" in messages
    assert "an enum of 3 values has 6 characters; openai allows 5 above 2 values" in messages
    assert strict_schema(schema).ok


# --------------------------------------------------------------------------------------------
# Idempotence, immutability (property-based)
# --------------------------------------------------------------------------------------------

_SCALARS = st.sampled_from([
    {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"},
    {"type": "string", "enum": ["a", "b"]}, {"type": "string", "format": "date"},
    {"type": "string", "format": "uri"}, {"type": "string", "minLength": 1},
    {"type": "integer", "minimum": 0, "default": 1}, {"type": ["string", "null"]},
    {"const": "k"}, {"type": "string", "default": ""},
    {"oneOf": [{"type": "string"}, {"type": "integer"}]},
    {"type": "number", "not": {"const": 0}},
])
_NAMES = st.text("abcxyz_", min_size=1, max_size=6)


def _objects(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        props = draw(st.dictionaries(_NAMES, children, min_size=1, max_size=4))
        required = [n for n in props if draw(st.booleans())]
        out = obj(props, required)
        if draw(st.booleans()):
            out["additionalProperties"] = draw(st.sampled_from([True, False]))
        if draw(st.booleans()):
            out["description"] = draw(st.sampled_from(["d", "an object"]))
        return out
    return build()


_SCHEMAS = st.recursive(
    _SCALARS,
    lambda children: st.one_of(
        _objects(children),
        st.builds(lambda items, n: {"type": "array", "items": items, "maxItems": n},
                  children, st.integers(1, 5)),
    ),
    max_leaves=12,
)
_ROOTS = _objects(_SCHEMAS)


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_ROOTS)
def test_strict_is_idempotent_and_leaves_its_input_alone(schema: dict[str, Any]) -> None:
    """strict(strict(x)) == strict(x) with no changes; x is not mutated; invariants hold."""
    before = copy.deepcopy(schema)
    first = strict_schema(schema)
    assert schema == before
    assert first.ok, first.problems
    assert_strict_invariants(first.schema)
    second = strict_schema(first.schema)
    assert second.schema == first.schema
    assert second.changes == ()
    compile_validator(first.schema)  # the output is valid JSON Schema


@settings(max_examples=100, deadline=None)
@given(_ROOTS, st.data())
def test_nulls_sent_for_optional_properties_are_stripped(schema: dict[str, Any],
                                                         data: st.DataObject) -> None:
    """Nulls a strict model sends for optional properties vanish; other values stay."""
    optional = [n for n in schema["properties"] if n not in schema.get("required", [])]
    args = {n: None for n in optional}
    stripped = strip_strict_nulls(args, schema)
    for name in optional:
        accepts_null = compile_validator(schema["properties"][name]).is_valid(None)
        assert (name in stripped) == accepts_null


# --------------------------------------------------------------------------------------------
# strip_strict_nulls
# --------------------------------------------------------------------------------------------

def test_strip_strict_nulls_nested_items_refs_and_real_nulls() -> None:
    """Only optional, null-refusing properties lose their nulls, at any depth."""
    schema = obj({
        "name": {"type": "string"},
        "maybe": {"type": ["string", "null"]},
        "needed": {"type": "string"},
        "rows": {"type": "array", "items": obj({"k": {"type": "string"},
                                                "v": {"type": "integer"}}, ["k"])},
        "ref": {"$ref": "#/$defs/R"},
    }, ["needed"], **{"$defs": {"R": obj({"z": {"type": "boolean"}})}})
    args = {"name": None, "maybe": None, "needed": None,
            "rows": [{"k": "a", "v": None}, {"k": "b", "v": 2}],
            "ref": {"z": None}, "extra": None}
    assert strip_strict_nulls(args, schema) == {
        "maybe": None, "needed": None, "rows": [{"k": "a"}, {"k": "b", "v": 2}],
        "ref": {}, "extra": None}
    assert args["name"] is None  # input untouched
    errors = compile_validator(schema).errors(strip_strict_nulls(args, schema))
    assert errors == ["needed: None is not of type 'string'"]


def test_strict_round_trip_with_a_model_call() -> None:
    """A call valid for the strict schema, stripped, validates against the original."""
    schema = obj({"city": {"type": "string"},
                  "unit": {"type": "string", "enum": ["C", "F"], "default": "C"},
                  "days": {"type": "integer", "minimum": 1}}, ["city"])
    strict = strict_schema(schema).schema
    call = {"city": "Paris", "unit": None, "days": None}
    assert compile_validator(strict).is_valid(call)
    assert not compile_validator(schema).is_valid(call)
    assert compile_validator(schema).errors(strip_strict_nulls(call, schema)) == []


# --------------------------------------------------------------------------------------------
# Validators
# --------------------------------------------------------------------------------------------

SAY_HELLO = obj({"personName": {"type": "string", "default": "world"}})


def test_error_messages_name_the_path() -> None:
    """Each message starts with the JSON path of the offending value."""
    validator = compile_validator(SAY_HELLO)
    assert validator.errors({"personName": 3}) == ["personName: 3 is not of type 'string'"]
    assert validator.errors({"personName": "Ada"}) == []
    assert validator.is_valid({"personName": "Ada"})
    assert not validator.is_valid({"personName": 3})


def test_nested_paths_root_errors_and_order(chart_tool: dict[str, Any]) -> None:
    """Array indexes use brackets, root-level problems have no prefix, order is by path."""
    validator = compile_validator(chart_tool)
    call = {"df_name": 1, "chart_type": "pie", "x_field": "m",
            "series": [{"name": "a", "y_field": "b"}, {"name": 2}], "surprise": True}
    assert validator.errors(call) == [
        "'logical_name' is a required property",
        "'note' is a required property",
        "'title' is a required property",
        "'x_label' is a required property",
        "'y_label' is a required property",
        "Additional properties are not allowed ('surprise' was unexpected)",
        "chart_type: 'pie' is not one of ['bar', 'column', 'stacked_column', 'line', "
        "'scatter']",
        "df_name: 1 is not of type 'string'",
        "series[1]: 'y_field' is a required property",
        "series[1].name: 2 is not of type 'string'",
    ]


def test_anyof_messages_say_why_each_branch_failed() -> None:
    """A failed anyOf lists the reasons of its alternatives."""
    validator = compile_validator(obj({"v": {"anyOf": [{"type": "string"},
                                                       {"type": "integer"}]}}))
    assert validator.errors({"v": 1.5}) == [
        "v: 1.5 is not valid under any of the given schemas "
        "(1.5 is not of type 'integer'; 1.5 is not of type 'string')"]


def test_odd_keys_are_quoted_and_long_messages_clipped() -> None:
    """Keys that are not identifiers are quoted; huge values do not flood the message."""
    validator = compile_validator(obj({"a b": {"type": "integer"}}))
    [message] = validator.errors({"a b": "x" * 10_000})
    assert message.startswith('["a b"]: \'xxx')
    path, _, text = message.partition(": ")
    assert path == '["a b"]'
    assert len(text) == 300 and text.endswith("…")


def test_cheap_formats_are_checked() -> None:
    """date, email, ipv4 and uuid formats are validated locally."""
    validator = compile_validator(obj({"d": {"type": "string", "format": "date"},
                                       "ip": {"type": "string", "format": "ipv4"}}))
    assert validator.errors({"d": "2024-02-30", "ip": "10.0.0.1"}) == [
        "d: '2024-02-30' is not a 'date'"]
    assert validator.errors({"d": "2024-02-28", "ip": "10.0.0.256"}) == [
        "ip: '10.0.0.256' is not a 'ipv4'"]


def test_validators_are_cached_by_canonical_json() -> None:
    """Equal schemas share a validator whatever their key order; different ones do not."""
    a = {"type": "object", "properties": {"x": {"type": "integer", "minimum": 1}}}
    b = {"properties": {"x": {"minimum": 1, "type": "integer"}}, "type": "object"}
    assert compile_validator(a) is compile_validator(b)
    assert compile_validator(a) is compile_validator(copy.deepcopy(a))
    assert compile_validator(a) is not compile_validator(
        {"type": "object", "properties": {"x": {"type": "integer", "minimum": 2}}})


def test_a_cached_validator_does_not_see_later_mutation() -> None:
    """The validator keeps its own copy of the schema."""
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    validator = compile_validator(schema)
    schema["required"] = []
    assert validator.errors({}) == ["'q' is a required property"]
    assert compile_validator(schema) is not validator


def test_invalid_schemas_raise_schema_error() -> None:
    """A schema that is not valid JSON Schema is refused with its keyword and place."""
    with pytest.raises(SchemaError) as info:
        compile_validator({"type": "object", "properties": {"x": {"type": "strang"}}})
    assert info.value.keyword == "type"
    assert info.value.path == "/properties/x/type"
    assert str(info.value).startswith("invalid JSON Schema at /properties/x/type: 'strang'")
    with pytest.raises(SchemaError, match="not JSON"):
        compile_validator({"type": "object", "default": object()})


# --------------------------------------------------------------------------------------------
# The fast path agrees with jsonschema (differential, property-based)
# --------------------------------------------------------------------------------------------

_KEYS = ["a", "b", "c"]
_FAST_LEAVES = st.sampled_from([
    True, False, {}, {"type": "string"}, {"type": "integer"}, {"type": "number"},
    {"type": "boolean"}, {"type": "null"}, {"type": ["string", "null"]},
    {"type": "array"}, {"type": "object"},
    {"enum": ["a", "b"]}, {"enum": [1, True, None, "1", [1], {"a": 1}]}, {"const": 1},
    {"const": [1.0, {"a": False}]},
    {"type": "string", "minLength": 1, "maxLength": 2}, {"type": "string", "pattern": "^a"},
    {"type": "string", "format": "date"}, {"format": "ipv4"},
    {"minimum": 0}, {"maximum": 1.5}, {"exclusiveMinimum": 0, "exclusiveMaximum": 2},
    {"minItems": 1}, {"maxItems": 1}, {"minProperties": 1}, {"maxProperties": 1},
    {"description": "annotations only", "default": 3},
])


def _fast_schemas(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    props = st.dictionaries(st.sampled_from(_KEYS), children, max_size=3)
    return st.one_of(
        st.builds(lambda p, r, extra: {"type": "object", "properties": p,
                                       "required": sorted(r), **extra},
                  props, st.sets(st.sampled_from(_KEYS)),
                  st.sampled_from([{}, {"additionalProperties": False},
                                   {"additionalProperties": {"type": "integer"}}])),
        st.builds(lambda i: {"type": "array", "items": i}, children),
        st.builds(lambda p, i: {"prefixItems": p, "items": i},
                  st.lists(children, min_size=1, max_size=2),
                  st.sampled_from([False, {"type": "null"}])),
        st.builds(lambda xs: {"anyOf": xs}, st.lists(children, min_size=1, max_size=3)),
        st.builds(lambda xs: {"oneOf": xs}, st.lists(children, min_size=1, max_size=3)),
        st.builds(lambda xs: {"allOf": xs}, st.lists(children, min_size=1, max_size=3)),
        st.builds(lambda x: {"not": x}, children),
    )


_FAST_DEFS = st.recursive(_FAST_LEAVES, _fast_schemas, max_leaves=4)
_FAST_SCHEMAS = st.builds(
    lambda body, d: {"$defs": {"d": d}, "allOf": [body]},
    st.recursive(st.one_of(_FAST_LEAVES, st.just({"$ref": "#/$defs/d"})), _fast_schemas,
                 max_leaves=10),
    _FAST_DEFS)
_INSTANCES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from([0.0, 1.0, 1.5, -0.5]),
              st.sampled_from(["", "a", "ab", "abc", "b", "1", "2024-01-31", "2024-02-30",
                               "10.0.0.1", "10.0.0.300"])),
    lambda children: st.one_of(st.lists(children, max_size=3),
                               st.dictionaries(st.sampled_from([*_KEYS, "z"]), children,
                                               max_size=3)),
    max_leaves=8,
)


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_FAST_SCHEMAS, st.lists(_INSTANCES, min_size=1, max_size=5))
def test_fast_path_agrees_with_jsonschema(schema: Any, instances: list[Any]) -> None:
    """For the keywords it compiles, the fast predicate decides exactly like jsonschema."""
    _agrees_with_jsonschema(schema, instances)


def _agrees_with_jsonschema(schema: Any, instances: list[Any]) -> None:
    """``schema`` compiles to the fast path, which decides each instance as jsonschema
    does (and so do the validator's messages: none exactly when it is valid)."""
    from jsonschema import Draft202012Validator, FormatChecker

    reference = Draft202012Validator(schema, format_checker=FormatChecker(
        ["date", "email", "ipv4", "ipv6", "uuid", "regex"]))
    validator = compile_validator(schema)
    assert validator.fast
    for instance in instances:
        assert validator.is_valid(instance) == reference.is_valid(instance), instance
        assert (validator.errors(instance) == []) == reference.is_valid(instance), instance


_FLAT_OBJECTS = st.builds(
    lambda typed, p, r, extra, notes: {**({"type": "object"} if typed else {}),
                                       "properties": p, "required": sorted(r), **extra,
                                       **notes},
    st.booleans(),
    st.dictionaries(st.sampled_from(_KEYS), _FAST_LEAVES, max_size=3),
    st.sets(st.sampled_from([*_KEYS, "z"]), max_size=2),
    st.sampled_from([{}, {"additionalProperties": False}, {"additionalProperties": True},
                     {"additionalProperties": {}}, {"additionalProperties": {"type": "integer"}}]),
    st.sampled_from([{}, {"description": "the arguments", "title": "args"}]),
)


@settings(max_examples=300, deadline=None)
@given(_FLAT_OBJECTS, st.lists(_INSTANCES, min_size=1, max_size=6))
def test_flat_object_schemas_agree_with_jsonschema(schema: dict[str, Any],
                                                   instances: list[Any]) -> None:
    """The usual arguments schema (an object of properties, required and
    additionalProperties alone, compiled as one predicate) decides exactly like jsonschema,
    on objects and on everything else."""
    _agrees_with_jsonschema(schema, instances)


_TYPE_NAMES = ["string", "integer", "number", "boolean", "null", "array", "object"]
_NOT_KEYWORDS = st.sampled_from([
    "$type", "$$type", "ref", "$enum", "$required", "$properties", "$items", "$not",
    "$anyOf", "x-type"])
"""Names that look like keywords and are not: jsonschema ignores them (an unknown keyword is
an annotation), and so must the fast path."""
_TYPED_LEAVES = st.one_of(
    st.builds(lambda ts: {"type": ts}, st.lists(st.sampled_from(_TYPE_NAMES), min_size=1,
                                                 max_size=3, unique=True)),
    st.builds(lambda t, e: {"type": t, "enum": e}, st.sampled_from(_TYPE_NAMES),
              st.lists(st.sampled_from([0, 1, 1.0, True, False, None, "a", "1", [1], {}]),
                       min_size=1, max_size=3)),
    st.builds(lambda t, c: {"type": t, "const": c}, st.sampled_from(_TYPE_NAMES),
              st.sampled_from([0, 1, 1.0, True, None, "a", [True], {"a": 1}])),
    st.builds(lambda name, value: {name: value}, _NOT_KEYWORDS,
              st.sampled_from(["string", "#/$defs/d", ["a"], [1], {"type": "null"}])),
)
_ODD_NUMBERS = st.sampled_from([2**64, -(2**70), 1e300, -0.0, 2.0, 1e-300, 3.0000000000000004])


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.builds(lambda body, d: {"$defs": {"d": d}, "allOf": [body]},
                 st.recursive(_TYPED_LEAVES, _fast_schemas, max_leaves=6), _TYPED_LEAVES),
       st.lists(st.one_of(_INSTANCES, _ODD_NUMBERS, st.dictionaries(
           st.sampled_from([*_KEYS, "z"]), st.one_of(_INSTANCES, _ODD_NUMBERS), max_size=3)),
           min_size=1, max_size=6))
@example({"$type": "string"}, [5])
@example({"$type": {"type": "null"}}, [{}])  # compiled as "type" with an object: TypeError
@example({"ref": "#/$defs/d", "$defs": {"d": {"type": "string"}}}, [1])
@example({"type": ["integer", "boolean"], "enum": [1, 1.0]}, [True, 1.0, 1])
def test_type_lists_enums_and_lookalike_keywords_agree_with_jsonschema(
        schema: Any, instances: list[Any]) -> None:
    """Type lists, an enum or const beside a type, numbers at the edges (bool against integer,
    floats that are integers, integers beyond 64 bits) and names that only look like keywords
    (``$type``, ``ref``): the validator decides each as jsonschema does, fast path or not."""
    from jsonschema import Draft202012Validator, FormatChecker

    reference = Draft202012Validator(schema, format_checker=FormatChecker(
        ["date", "email", "ipv4", "ipv6", "uuid", "regex"]))
    validator = compile_validator(schema)
    for instance in instances:
        assert validator.is_valid(instance) == reference.is_valid(instance), instance
        assert (validator.errors(instance) == []) == reference.is_valid(instance), instance


@pytest.mark.parametrize("schema", [
    {"type": "number", "multipleOf": 0.1},
    {"type": "array", "uniqueItems": True},
    {"type": "object", "patternProperties": {"^x": {"type": "integer"}}},
    {"if": {"type": "integer"}, "then": {"minimum": 0}},
    {"type": "object", "dependentRequired": {"a": ["b"]}},
], ids=["multipleOf", "uniqueItems", "patternProperties", "if-then", "dependentRequired"])
def test_other_keywords_fall_back_to_jsonschema(schema: dict[str, Any]) -> None:
    """Keywords the fast path does not compile are left to jsonschema, which still decides."""
    from jsonschema import Draft202012Validator

    validator = compile_validator(schema)
    assert not validator.fast
    reference = Draft202012Validator(schema)
    for instance in (None, 0.3, -1, 4, [1, 1], [1, 2], {"a": 1}, {"a": 1, "b": 2}, {"x1": 1.5}):
        assert validator.is_valid(instance) == reference.is_valid(instance), instance


@pytest.mark.parametrize("ref", ["https://example.com/schema", "#/$defs/missing", "other.json"])
def test_refs_outside_the_schema_are_refused(ref: str) -> None:
    """Nothing is fetched: a $ref must point inside the schema."""
    with pytest.raises(SchemaError) as info:
        compile_validator(obj({"x": {"$ref": ref}}))
    assert info.value.keyword == "$ref"
    assert ref in str(info.value)


def test_fallback_still_validates() -> None:
    """A schema outside the fast path validates and explains through jsonschema."""
    validator = compile_validator(obj({"n": {"type": "number", "multipleOf": 2}}))
    assert not validator.fast
    assert validator.is_valid({"n": 4})
    assert validator.errors({"n": 3}) == ["n: 3 is not a multiple of 2"]


@pytest.mark.parametrize("schema", [
    {"$ref": "#"},
    {"type": "object", "allOf": [{"$ref": "#"}]},
    {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"anyOf": [{"type": "string"},
                                                          {"$ref": "#/$defs/a"}]}},
     "type": "object", "properties": {"x": {"$ref": "#/$defs/a"}}},
    {"$defs": {"a": {"not": {"$ref": "#/$defs/a"}}}, "properties": {"x": {"$ref": "#/$defs/a"}}},
], ids=["root", "allOf-root", "defs-through-anyOf", "not"])
def test_ref_loops_that_never_reach_a_part_are_refused(schema: dict[str, Any]) -> None:
    """A $ref that leads back to itself through keywords applied to the same instance
    (allOf, anyOf, oneOf, not, if/then/else) would recurse without end on every call: the
    schema is refused when compiled, with a SchemaError, not a RecursionError per call."""
    with pytest.raises(SchemaError) as info:
        compile_validator(schema)
    assert info.value.keyword == "$ref"


_REF_LEAVES = st.one_of(_FAST_LEAVES, st.sampled_from([{"$ref": "#"}, {"$ref": "#/$defs/d"}]))


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.builds(lambda body, d: {"$defs": {"d": d}, "allOf": [body]},
                 st.recursive(_REF_LEAVES, _fast_schemas, max_leaves=6),
                 st.recursive(_REF_LEAVES, _fast_schemas, max_leaves=4)),
       st.lists(_INSTANCES, min_size=1, max_size=4))
def test_schemas_with_refs_anywhere_compile_to_a_validator_that_ends_or_are_refused(
        schema: Any, instances: list[Any]) -> None:
    """References to the root and to a definition anywhere (in place or under a property or
    an item): the schema is refused with a SchemaError, or every instance is decided."""
    try:
        validator = compile_validator(schema)
    except SchemaError as exc:
        assert exc.keyword == "$ref"
        return
    for instance in instances:
        assert (validator.errors(instance) == []) == validator.is_valid(instance)


def test_recursive_refs_on_the_fast_path() -> None:
    """A recursive schema ($ref to the root and to a definition) compiles and validates."""
    tree = {"type": "object", "properties": {"v": {"type": "integer"},
                                             "kids": {"type": "array", "items": {"$ref": "#"}}},
            "required": ["v"]}
    validator = compile_validator(tree)
    assert validator.fast
    assert validator.is_valid({"v": 1, "kids": [{"v": 2, "kids": [{"v": 3}]}]})
    assert validator.errors({"v": 1, "kids": [{"v": 2, "kids": [{}]}]}) == [
        "kids[0].kids[0]: 'v' is a required property"]
