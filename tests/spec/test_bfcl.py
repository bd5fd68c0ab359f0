"""Tests for gramagent._spec.bfcl, and the BFCL round trip through gram signatures.

The corpus tests read every unique function of the installed ``bfcl-eval`` package
(``pip install --no-deps bfcl-eval==2026.3.23``); they are skipped, saying so, only when it is
not installed.
"""

from __future__ import annotations

import copy
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator, FormatChecker

from gramagent._spec.bfcl import (
    bfcl_data_dir,
    iter_bfcl_functions,
    normalize_bfcl_function,
    normalize_bfcl_schema,
)
from gramagent._spec.calls.validate import compile_validator
from gramagent._spec.schema.strict import strict_schema
from gramagent.errors import ConfigurationError, SchemaError

README = Path(__file__).resolve().parents[2] / "README.md"
EXPECTED_UNIQUE_FUNCTIONS = 3258
"""Unique function documents in bfcl-eval 2026.3.23 (the version the README pins)."""


def fn(properties: dict[str, Any], required: list[str] | None = None, **extra: Any
       ) -> dict[str, Any]:
    """A BFCL function document."""
    params: dict[str, Any] = {"type": "dict", "properties": properties, **extra}
    if required is not None:
        params["required"] = required
    return {"name": "f", "description": "d", "parameters": params}


def norm(node: dict[str, Any]) -> dict[str, Any]:
    """Normalize one BFCL property schema."""
    return normalize_bfcl_schema(node)


# --------------------------------------------------------------------------------------------
# The dialect, rule by rule
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("bfcl", "expected"), [
    ("string", {"type": "string"}), ("String", {"type": "string"}),
    ("char", {"type": "string", "minLength": 1, "maxLength": 1}),
    ("integer", {"type": "integer"}), ("long", {"type": "integer"}),
    ("float", {"type": "number"}), ("double", {"type": "number"}),
    ("number", {"type": "number"}),
    ("boolean", {"type": "boolean"}), ("Boolean", {"type": "boolean"}),
    ("array", {"type": "array"}), ("Array", {"type": "array"}),
    ("ArrayList", {"type": "array"}), ("tuple", {"type": "array"}),
    ("dict", {"type": "object"}), ("HashMap", {"type": "object"}),
    ("object", {"type": "object"}),
    ("any", {}), ("", {}),
])
def test_type_names(bfcl: str, expected: dict[str, Any]) -> None:
    """Python, Java and JavaScript type names map to JSON Schema types."""
    assert norm({"type": bfcl}) == expected


def test_function_document_shape() -> None:
    """name and description are kept; parameters become a JSON Schema object."""
    doc = fn({"base": {"type": "integer", "description": "The base."},
              "unit": {"type": "string"}}, ["base"])
    assert normalize_bfcl_function(doc) == {
        "name": "f", "description": "d",
        "parameters": {"type": "object",
                       "properties": {"base": {"type": "integer", "description": "The base."},
                                      "unit": {"type": "string"}},
                       "required": ["base"]}}


def test_nested_dicts_arrays_and_tuples() -> None:
    """Nesting is normalized at every level; tuples become arrays."""
    doc = fn({
        "pos": {"type": "tuple", "items": {"type": "float"}},
        "pair": {"type": "tuple", "items": [{"type": "string"}, {"type": "integer"}]},
        "rows": {"type": "array", "items": {"type": "dict", "properties": {
            "k": {"type": "string"}, "v": {"type": "any"}}, "required": ["k"]}},
        "free": {"type": "dict"},
    }, ["pos"])
    props = normalize_bfcl_function(doc)["parameters"]["properties"]
    assert props["pos"] == {"type": "array", "items": {"type": "number"}}
    assert props["pair"] == {"type": "array", "prefixItems": [{"type": "string"},
                                                              {"type": "integer"}],
                             "items": False, "minItems": 2, "maxItems": 2}
    assert props["rows"] == {"type": "array", "items": {
        "type": "object", "properties": {"k": {"type": "string"}, "v": {}},
        "required": ["k"]}}
    assert props["free"] == {"type": "object"}


@pytest.mark.parametrize("flag", [True, "true", "True", "yes"])
def test_optional_flag_leaves_a_property_optional(flag: Any) -> None:
    """A property flagged optional (in any spelling) is not required."""
    doc = fn({"a": {"type": "string"}, "b": {"type": "integer", "optional": flag}}, ["a"])
    assert normalize_bfcl_function(doc)["parameters"]["required"] == ["a"]
    assert normalize_bfcl_function(doc)["parameters"]["properties"]["b"] == {"type": "integer"}


def test_optional_false_and_optional_lists() -> None:
    """`optional: false` makes a property required; an object-level list is accepted."""
    doc = fn({"a": {"type": "string", "optional": "false"}, "b": {"type": "string"}},
             [], optional=["b"])
    params = normalize_bfcl_function(doc)["parameters"]
    assert params["required"] == ["a"]
    assert "optional" not in params


def test_required_wins_over_optional() -> None:
    """The BFCL checker reads `required`, so it wins over a conflicting flag."""
    doc = fn({"n": {"type": "integer", "optional": True}}, ["n"])
    assert normalize_bfcl_function(doc)["parameters"]["required"] == ["n"]


def test_required_name_without_property_gets_an_open_property() -> None:
    """`required` alone means "present, any value": an unconstrained property is added."""
    node = {"type": "dict", "description": "population", "required": ["adults", "kids"]}
    assert norm(node) == {"type": "object", "description": "population",
                          "properties": {"adults": {}, "kids": {}},
                          "required": ["adults", "kids"]}


def test_required_keeps_property_order_and_drops_duplicates() -> None:
    """`required` lists names in property order, once."""
    doc = fn({"a": {"type": "string"}, "b": {"type": "string"}}, ["b", "a", "b"])
    assert normalize_bfcl_function(doc)["parameters"]["required"] == ["a", "b"]


def test_enum_literals_are_read_with_the_declared_type() -> None:
    """Python literals written as strings become values of the declared type."""
    assert norm({"type": "integer", "enum": ["1", "2", "3"]}) == {
        "type": "integer", "enum": [1, 2, 3]}
    assert norm({"type": "float", "enum": ["0.5", "1"]}) == {"type": "number",
                                                             "enum": [0.5, 1]}


def test_enum_values_outside_the_type_widen_it() -> None:
    """Values that are no literal of the type stay verbatim; their type joins the union."""
    node = {"type": "boolean", "enum": ["True", "False", "dontcare"], "default": "dontcare"}
    assert norm(node) == {"type": ["boolean", "string"], "enum": [True, False, "dontcare"],
                          "default": "dontcare"}
    assert norm({"type": "integer", "enum": ["Group A", "Group B"]}) == {
        "type": "string", "enum": ["Group A", "Group B"]}


def test_enum_on_an_array_applies_to_its_items() -> None:
    """An enum written on an array lists the allowed items."""
    node = {"type": "array", "items": {"type": "string"}, "enum": ["a", "b"], "default": []}
    assert norm(node) == {"type": "array", "items": {"type": "string", "enum": ["a", "b"]},
                          "default": []}


@pytest.mark.parametrize(("node", "expected"), [
    ({"type": "string", "default": None},
     {"type": ["string", "null"], "default": None}),
    ({"type": "integer", "default": "None"},
     {"type": ["integer", "null"], "default": None}),
    ({"type": "string", "default": "null"},
     {"type": ["string", "null"], "default": None}),
    ({"type": "dict", "default": "None"},
     {"type": ["object", "null"], "default": None}),
    ({"type": "string", "enum": ["a", "b"], "default": None},
     {"type": ["string", "null"], "enum": ["a", "b", None], "default": None}),
    ({"type": "any", "default": None}, {"default": None}),
    ({"type": "boolean", "default": "false"}, {"type": "boolean", "default": False}),
    ({"type": "boolean", "default": "True"}, {"type": "boolean", "default": True}),
    ({"type": "integer", "default": "5"}, {"type": "integer", "default": 5}),
    ({"type": "float", "default": "1.2"}, {"type": "number", "default": 1.2}),
    ({"type": "array", "items": {"type": "string"}, "default": "[]"},
     {"type": "array", "items": {"type": "string"}, "default": []}),
    ({"type": "string", "default": "None at all"},
     {"type": "string", "default": "None at all"}),
], ids=["null", "None-string", "null-string", "dict-None", "enum-null", "any-null",
        "false", "True", "int", "float", "json-array", "plain-string"])
def test_defaults(node: dict[str, Any], expected: dict[str, Any]) -> None:
    """Python-ish defaults become JSON values of the type; None makes the type nullable."""
    assert norm(node) == expected


@pytest.mark.parametrize(("node", "expected"), [
    ({"type": "integer", "description": "Periods", "default": "5 years"},
     {"type": "integer", "description": 'Periods (default: "5 years")'}),
    ({"type": "boolean", "default": "dontcare"},
     {"type": "boolean", "description": '(default: "dontcare")'}),
    ({"type": "string", "enum": ["a"], "default": "b"},
     {"type": "string", "enum": ["a"], "description": '(default: "b")'}),
    ({"type": "string", "default": ["x", "y"]},
     {"type": "string", "description": '(default: ["x", "y"])'}),
], ids=["int-text", "bool-text", "not-in-enum", "list-on-string"])
def test_defaults_that_do_not_fit_move_into_the_description(
        node: dict[str, Any], expected: dict[str, Any]) -> None:
    """A default that is not a valid value is kept as text, not dropped."""
    assert norm(node) == expected


def test_array_constraints_on_items_move_to_the_array() -> None:
    """minItems/maxItems written on the item schema are meant for the array."""
    node = {"type": "array", "items": {"type": "integer", "minItems": 5, "maxItems": 100}}
    assert norm(node) == {"type": "array", "minItems": 5, "maxItems": 100,
                          "items": {"type": "integer"}}
    both = {"type": "array", "minItems": 1, "items": {"type": "integer", "minItems": 5}}
    assert norm(both) == {"type": "array", "minItems": 1,
                          "items": {"type": "integer", "minItems": 5}}


def test_standard_constraints_pass_through() -> None:
    """format, maximum and friends are JSON Schema already."""
    assert norm({"type": "string", "format": "date"}) == {"type": "string", "format": "date"}
    assert norm({"type": "integer", "maximum": 400}) == {"type": "integer", "maximum": 400}


@pytest.mark.parametrize(("doc", "keyword"), [
    (fn({"a": {"type": "string", "nullable": True}}), "nullable"),
    (fn({"a": {"type": "str"}}), "type"),
    (fn({"a": {"type": ["string", "null"]}}), "type"),
    (fn({"a": {"type": "string", "properties": {}}}), "properties"),
    (fn({"a": {"type": "integer", "items": {"type": "string"}}}), "items"),
    (fn({"a": {"type": "integer", "optional": "maybe"}}), "optional"),
    (fn({"a": {"type": "integer", "enum": []}}), "enum"),
    (fn({"a": {"type": "integer", "description": 3}}), "description"),
    (fn({}, "a"), "required"),
    ({**fn({}), "response": {}}, "response"),
    ({"name": "f", "description": "d", "parameters": {"type": "string"}}, "type"),
    ({"name": "", "description": "d", "parameters": {"type": "dict"}}, "name"),
    ({"name": "f", "description": "d"}, "parameters"),
], ids=["unknown-keyword", "unknown-type", "type-list", "props-on-string", "items-on-int",
        "bad-optional", "empty-enum", "bad-description", "bad-required", "unknown-top-key",
        "params-not-dict", "no-name", "no-parameters"])
def test_outside_the_dialect_raises_naming_the_keyword(doc: dict[str, Any],
                                                       keyword: str) -> None:
    """Anything outside the dialect is a SchemaError whose `keyword` names it."""
    with pytest.raises(SchemaError) as info:
        normalize_bfcl_function(doc)
    assert info.value.keyword == keyword
    assert keyword in str(info.value) or keyword in ("type", "name", "parameters")


def test_error_paths_point_into_the_parameters() -> None:
    """The error says where the bad keyword stands."""
    doc = fn({"outer": {"type": "dict", "properties": {"inner": {"type": "vector"}}}})
    with pytest.raises(SchemaError) as info:
        normalize_bfcl_function(doc)
    assert info.value.path == "/properties/outer/properties/inner"
    assert "'vector'" in str(info.value)


def test_input_is_not_mutated() -> None:
    """Normalization builds new dicts."""
    doc = fn({"b": {"type": "boolean", "enum": ["True", "False"], "default": "False",
                    "optional": True},
              "l": {"type": "array", "items": {"type": "integer", "minItems": 1}}}, [])
    before = copy.deepcopy(doc)
    normalize_bfcl_function(doc)
    assert doc == before


# --------------------------------------------------------------------------------------------
# Reading the corpus files
# --------------------------------------------------------------------------------------------

def test_iter_reads_json_lines_dedupes_and_skips_other_files(tmp_path: Path) -> None:
    """Functions come from JSON-lines entries (one or a list), each unique one once."""
    a = {"name": "a", "description": "", "parameters": {"type": "dict", "properties": {}}}
    b = {"name": "b", "description": "", "parameters": {"type": "dict", "properties": {}}}
    a_reordered = {"parameters": {"properties": {}, "type": "dict"}, "description": "",
                   "name": "a"}
    (tmp_path / "1.json").write_text("\n".join(json.dumps(e) for e in [
        {"id": "x", "function": [a, b]},
        {"id": "y", "function": a_reordered},
        {"id": "z", "question": "no functions here"},
    ]) + "\n\n")
    (tmp_path / "2.json").write_text(json.dumps({"index": ["x", "y"]}, indent=2))
    (tmp_path / "3.txt").write_text(json.dumps({"function": [{"name": "c"}]}))
    assert [f["name"] for f in iter_bfcl_functions(tmp_path)] == ["a", "b"]


def test_missing_package_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without bfcl_eval installed the error says how to install it."""
    import importlib.util
    from importlib import metadata

    def not_installed(name: str) -> None:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "distribution", not_installed)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ConfigurationError, match="pip install --no-deps bfcl-eval"):
        bfcl_data_dir()


# --------------------------------------------------------------------------------------------
# The whole corpus
# --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def corpus() -> list[dict[str, Any]]:
    """Every unique BFCL function document of the installed bfcl-eval."""
    try:
        return list(iter_bfcl_functions())
    except ConfigurationError as exc:
        pytest.skip(f"BFCL corpus unavailable: {exc}")


@pytest.fixture(scope="module")
def normalized(corpus: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The corpus, normalized to JSON Schema."""
    return [normalize_bfcl_function(doc) for doc in corpus]


def test_corpus_size(corpus: list[dict[str, Any]]) -> None:
    """bfcl-eval 2026.3.23 holds 3,258 unique functions."""
    assert len(corpus) == EXPECTED_UNIQUE_FUNCTIONS


@pytest.mark.slow
def test_whole_corpus_normalizes_to_valid_json_schema(
        corpus: list[dict[str, Any]], normalized: list[dict[str, Any]]) -> None:
    """Every function normalizes; every schema is valid and every default validates."""
    assert len(normalized) == len(corpus)
    for doc, out in zip(corpus, normalized, strict=True):
        assert out["name"] == doc["name"]
        compile_validator(out["parameters"])
        for path, node in _nodes(out["parameters"]):
            if "default" in node:
                sub = {k: v for k, v in node.items() if k != "default"}
                # the whole schema was checked above, so the sub-schema needs no check
                valid = Draft202012Validator(sub).is_valid(node["default"])
                assert valid, (doc["name"], path)
            assert set(node) <= _JSON_SCHEMA_KEYWORDS, (doc["name"], path, set(node))


_JSON_SCHEMA_KEYWORDS = frozenset({
    "type", "description", "properties", "required", "items", "prefixItems", "enum",
    "default", "format", "pattern", "minLength", "maxLength", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems",
    "uniqueItems",
})


def _nodes(node: Any, path: str = ""):
    if not isinstance(node, dict):
        return
    yield path, node
    for name, sub in (node.get("properties") or {}).items():
        yield from _nodes(sub, f"{path}/properties/{name}")
    yield from _nodes(node.get("items"), f"{path}/items")
    for i, sub in enumerate(node.get("prefixItems") or ()):
        yield from _nodes(sub, f"{path}/prefixItems/{i}")


@pytest.mark.slow
def test_whole_corpus_compiles_for_strict_mode(normalized: list[dict[str, Any]]) -> None:
    """Every corpus schema compiles for strict mode, idempotently; what cannot be expressed
    is only what the dialect leaves open (`any` values and free-form dicts)."""
    for doc in normalized:
        params = doc["parameters"]
        first = strict_schema(params)
        second = strict_schema(first.schema)
        assert second.changes == () and second.schema == first.schema, doc["name"]
        for problem in first.problems:
            node = _at(params, problem.path)
            untyped = "type" not in node
            types = node.get("type")
            free_form = "object" in (types if isinstance(types, list) else [types]) \
                and not node.get("properties")
            assert untyped or free_form, (doc["name"], str(problem))


@pytest.mark.slow
def test_whole_corpus_validates_on_the_fast_path(normalized: list[dict[str, Any]]) -> None:
    """Every corpus schema compiles to the fast validator, which agrees with jsonschema on a
    sample call and on broken variants of it."""
    for doc in normalized:
        params = doc["parameters"]
        validator = compile_validator(params)
        assert validator.fast, doc["name"]
        reference = Draft202012Validator(params, format_checker=FormatChecker(["date"]))
        call = _sample(params)
        variants = [call, {**call, "unexpected": 1}, {k: [] for k in call}, []]
        variants += [{k: v for k, v in call.items() if k != name} for name in list(call)[:1]]
        for instance in variants:
            assert validator.is_valid(instance) == reference.is_valid(instance), (
                doc["name"], instance)
        assert validator.is_valid(call), (doc["name"], validator.errors(call))


def _sample(schema: dict[str, Any]) -> Any:
    """A value valid for a normalized BFCL schema."""
    if "default" in schema:
        return schema["default"]
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "object":
        props = schema.get("properties", {})
        return {name: _sample(sub) for name, sub in props.items()}
    if kind == "array":
        items = schema.get("items")
        count = schema.get("minItems", 1)
        return [_sample(items) for _ in range(count)] if isinstance(items, dict) else []
    if schema.get("format") == "date":
        return "2024-01-31"
    samples = {"string": "x", "integer": 1, "number": 1.5, "boolean": True, "null": None}
    return samples.get(kind, "anything")


def _at(schema: dict[str, Any], pointer: str) -> dict[str, Any]:
    node: Any = schema
    for part in pointer.split("/")[1:]:
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def canonical(schema: Any) -> Any:
    """A comparable form: key order ignored except the order of properties (parameter order
    matters in a signature); `required` compared as a set."""
    if isinstance(schema, dict):
        out = {}
        for key, value in schema.items():
            if key == "properties" and isinstance(value, dict):
                out[key] = [(name, canonical(sub)) for name, sub in value.items()]
            elif key == "required" and isinstance(value, list):
                out[key] = sorted(value)
            else:
                out[key] = canonical(value)
        return json.dumps(out, sort_keys=True)
    if isinstance(schema, list):
        return [canonical(v) for v in schema]
    return schema


def documented_share() -> float:
    """The supported share the README's "BFCL coverage" section reports, in percent."""
    text = README.read_text(encoding="utf-8")
    section = text.partition("## BFCL coverage")[2].split("\n## ")[0]
    match = re.search(r"supported share[^\n]*?(\d+(?:\.\d+)?)\s*%", section, re.IGNORECASE)
    assert match, "README.md needs a '## BFCL coverage' section giving the supported share"
    return float(match.group(1))


def test_round_trip_through_gram_signatures(normalized: list[dict[str, Any]]) -> None:
    """schema -> signature -> gram text -> signature -> schema gives back the same schema,
    or schema_to_signature refuses with a SchemaError naming the keyword; never anything
    else. The supported share is at least what the README reports."""
    from gramagent._spec.signature import (
        format_signature,
        parse_signature,
        schema_to_signature,
        signature_to_schema,
    )

    refused: Counter[str] = Counter()
    mismatched: list[str] = []
    crashed: list[str] = []
    for doc in normalized:
        params = doc["parameters"]
        try:
            signature = schema_to_signature(params)
        except SchemaError as exc:
            if not exc.keyword:
                crashed.append(f"{doc['name']}: SchemaError without keyword: {exc}")
            refused[exc.keyword or "?"] += 1
            continue
        except Exception as exc:  # noqa: BLE001 - any other exception is the failure
            crashed.append(f"{doc['name']}: schema_to_signature: {type(exc).__name__}: {exc}")
            continue
        try:
            text = format_signature(signature)
            back = signature_to_schema(parse_signature(text))
        except Exception as exc:  # noqa: BLE001
            crashed.append(f"{doc['name']}: {type(exc).__name__}: {exc}")
            continue
        if canonical(back) != canonical(params):
            mismatched.append(f"{doc['name']}:\n  in:  {json.dumps(params)[:400]}\n"
                              f"  out: {json.dumps(back)[:400]}\n  gram: {text[:400]}")
    assert not crashed, f"{len(crashed)} unexpected errors:\n" + "\n".join(crashed[:10])
    assert not mismatched, f"{len(mismatched)} round trips differ:\n" + "\n".join(
        mismatched[:5])
    share = 100.0 * (len(normalized) - sum(refused.values())) / len(normalized)
    assert share >= documented_share(), (share, refused.most_common())
