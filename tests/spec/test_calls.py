"""Tests of the pure call checks: payload size, JSON parsing, tool names, schema validation."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gramagent._spec.calls.check import (
    MAX_PAYLOAD_BYTES,
    TOOL_ERROR_TYPES,
    CallRejection,
    PreparedCall,
    check_arguments,
    check_call,
    near_names,
    parse_arguments,
    parse_object,
)
from gramagent._spec.calls.validate import compile_validator

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"personName": {"type": "string"}, "times": {"type": "integer"}},
    "required": ["personName"],
    "additionalProperties": False,
}
VALIDATORS = {"sayHello": compile_validator(SCHEMA).errors}
SCHEMAS = {"sayHello": SCHEMA}


def check(name: str, raw: str) -> PreparedCall | CallRejection:
    return check_call(name, raw, validators=VALIDATORS, schemas=SCHEMAS)


def test_valid_call_is_prepared() -> None:
    """A known tool with schema-valid arguments passes every check."""
    result = check("sayHello", '{"personName": "Alice"}')
    assert result == PreparedCall("sayHello", {"personName": "Alice"})


def test_blank_arguments_mean_an_empty_object() -> None:
    """Servers that send "" for argument-less calls get {} (then validated)."""
    assert parse_arguments("") == {}
    assert parse_arguments("  \n") == {}


def test_oversized_payload_is_rejected_before_parsing() -> None:
    """Arguments over the byte limit are rejected even when they are not JSON at all."""
    raw = "{" + "x" * MAX_PAYLOAD_BYTES  # not JSON: a parse would fail differently
    result = parse_arguments(raw)
    assert isinstance(result, CallRejection)
    assert result.error_type == "tool_payload_too_large"
    assert str(MAX_PAYLOAD_BYTES) in result.message


def test_payload_limit_counts_utf8_bytes_not_characters() -> None:
    """3000 three-byte characters are 9000 bytes: over the 8 KB limit."""
    raw = json.dumps({"personName": "€" * 3000}, ensure_ascii=False)
    assert len(raw) < MAX_PAYLOAD_BYTES < len(raw.encode())
    result = parse_arguments(raw)
    assert isinstance(result, CallRejection) and result.error_type == "tool_payload_too_large"
    ascii_raw = json.dumps({"personName": "e" * 3000})
    assert parse_arguments(ascii_raw) == {"personName": "e" * 3000}


def test_malformed_json_is_a_parse_error() -> None:
    """Truncated JSON gives tool_payload_parse_error with a hint to send an object."""
    result = check("sayHello", '{"personName": "Al')
    assert isinstance(result, CallRejection)
    assert result.error_type == "tool_payload_parse_error"
    assert "not valid JSON" in result.message and "JSON object" in result.message


def test_non_object_json_is_a_parse_error() -> None:
    """A JSON array is valid JSON but not an arguments object."""
    result = check("sayHello", '["Alice"]')
    assert isinstance(result, CallRejection)
    assert result.error_type == "tool_payload_parse_error"
    assert "got an array" in result.message


def test_unknown_tool_suggests_near_names() -> None:
    """A misspelt name is answered with the likely intended tool and the available ones."""
    result = check("sayHelo", '{"personName": "Alice"}')
    assert isinstance(result, CallRejection)
    assert result.error_type == "unknown_tool"
    assert "Did you mean 'sayHello'?" in result.message
    assert "sayHelo" not in result.event_message


def test_near_names_prefers_case_insensitive_matches() -> None:
    """SAYHELLO matches sayHello first."""
    assert near_names("SAYHELLO", ["sayHello", "sayGoodbye"])[0] == "sayHello"
    assert near_names("zzz", ["sayHello"]) == []


def test_schema_violation_lists_problems_and_the_schema() -> None:
    """invalid_arguments names each violation and quotes the expected schema."""
    result = check("sayHello", '{"personName": 3, "extra": true}')
    assert isinstance(result, CallRejection)
    assert result.error_type == "invalid_arguments"
    assert "personName" in result.message and "extra" in result.message
    assert '"required":["personName"]' in result.message
    assert "2 problems" in result.event_message


def test_event_messages_never_echo_argument_values() -> None:
    """Whatever the failure, the event message leaves the argument values out."""
    secret = "s3cr3t-value"
    cases = [
        ("sayHello", json.dumps({"personName": 1, "times": secret})),
        ("sayHello", '{"personName": "' + secret),
        ("sayHello", json.dumps([secret])),
        ("nope", json.dumps({"personName": secret})),
        ("sayHello", json.dumps({"personName": secret * 2000})),
    ]
    for name, raw in cases:
        result = check(name, raw)
        assert isinstance(result, CallRejection)
        assert secret not in result.event_message


json_values = st.recursive(
    st.none() | st.booleans() | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(raw=st.text(max_size=300), name=st.sampled_from(["sayHello", "other", ""]))
def test_fuzz_random_text_never_raises(raw: str, name: str) -> None:
    """Random text (lone surrogates included) yields a prepared call or a typed rejection."""
    result = check(name, raw)
    if isinstance(result, CallRejection):
        assert result.error_type in TOOL_ERROR_TYPES
        assert result.message.startswith(f"Error ({result.error_type})")
    else:
        assert isinstance(result.arguments, dict)


@settings(max_examples=300, deadline=None)
@given(value=json_values, cut=st.integers(min_value=0, max_value=400))
def test_fuzz_truncated_json_never_raises(value: Any, cut: int) -> None:
    """Any prefix of a JSON document is parsed or rejected, never an exception."""
    raw = json.dumps({"personName": "x", "v": value})[:cut]
    result = check("sayHello", raw)
    if isinstance(result, PreparedCall):
        assert result.arguments == (json.loads(raw) if raw.strip() else {})
    else:
        assert result.error_type in {"tool_payload_parse_error", "invalid_arguments"}


@settings(max_examples=200, deadline=None)
@given(value=json_values)
def test_fuzz_valid_json_roundtrips(value: Any) -> None:
    """Whole JSON objects parse to what was encoded; other JSON values are rejected."""
    raw = json.dumps(value)
    result = parse_arguments(raw, max_bytes=1 << 20)
    if isinstance(value, dict):
        assert result == json.loads(raw)
    else:
        assert isinstance(result, CallRejection)
        assert result.error_type == "tool_payload_parse_error"


@settings(max_examples=200, deadline=None)
@given(raw=st.one_of(st.text(max_size=60),
                     json_values.map(json.dumps),
                     st.dictionaries(st.text(max_size=8), json_values, max_size=4).map(json.dumps),
                     st.sampled_from(["", " \t\n", "\u3000", "{}", " {} ", "[1]", "null",
                                      '{"a": 1e999}', '{"a": 12345678901234567890123}'])),
       max_bytes=st.sampled_from([4, 16, 64, MAX_PAYLOAD_BYTES]))
def test_parse_object_agrees_with_parse_arguments(raw: str, max_bytes: int) -> None:
    """The fast path accepts exactly what parse_arguments accepts, with the same value."""
    fast = parse_object(raw, max_bytes)
    full = parse_arguments(raw, max_bytes=max_bytes)
    if isinstance(full, CallRejection):
        assert fast is None
    else:
        assert fast == full and isinstance(fast, dict)


_OPTIONAL: dict[str, Any] = {  # a strict-mode schema: optional properties sent as null
    "type": "object",
    "properties": {"a": {"type": ["string", "null"]}, "b": {"type": ["array", "null"]},
                   "c": {"type": ["object", "null"]}},
    "required": [],
}


@settings(max_examples=200, deadline=None)
@given(arguments=st.dictionaries(st.sampled_from(["a", "b", "c", "null"]), json_values,
                                 max_size=4),
       spaced=st.booleans())
def test_argument_text_without_null_holds_no_null(arguments: dict[str, Any],
                                                  spaced: bool) -> None:
    """Checking with the argument text (a text without ``null`` is not searched for one)
    gives what checking without it gives: the same arguments, nulls stripped, or the same
    rejection, whatever strings hold "null" or values are null at any depth."""
    raw = json.dumps(arguments, indent=1 if spaced else None)
    parsed = parse_object(raw, 1 << 20)
    assert parsed is not None
    validators = {"t": compile_validator(_OPTIONAL).errors}
    with_text = check_arguments("t", parsed, validators=validators, schemas={"t": _OPTIONAL},
                                text=raw)
    without = check_arguments("t", parsed, validators=validators, schemas={"t": _OPTIONAL})
    assert with_text == without
