"""gramagent._json: exact JSON for model-sent values, and the places that rely on it."""

from __future__ import annotations

import json

import pytest

from gramagent import _json as exact_json
from gramagent._models.harmony_parse import parse_harmony
from gramagent._spec.calls import parse_arguments

BIG = 123456789012345678901234


@pytest.mark.parametrize("value", [{"a": BIG}, {"a": -(2**63) - 1}, [2**64], {"b": 1.5, "c": "é"}])
def test_round_trip_is_exact(value: object) -> None:
    """Integers beyond 64 bits survive loads and dumps; ordinary values take orjson's path."""
    text = exact_json.dumps(value)
    assert text == json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    assert exact_json.loads(text) == value


def test_sorted_keys_and_errors() -> None:
    assert exact_json.dumps({"b": BIG, "a": 1}, sort_keys=True) == f'{{"a":1,"b":{BIG}}}'
    with pytest.raises(ValueError):
        exact_json.loads('{"a": 1')
    with pytest.raises(TypeError):
        exact_json.dumps({"a": object()})


def test_tool_arguments_keep_big_integers() -> None:
    assert parse_arguments(f'{{"n": {BIG}}}') == {"n": BIG}


def test_harmony_stub_call_with_a_big_integer() -> None:
    """The ADR stub form re-encodes its arguments: a big integer must not crash the parser."""
    text = ('<|start|>assistant<|channel|>tool<|message|>'
            f'{{"tool":"f","arguments":{{"n":{BIG}}}}}<|end|>')
    message = parse_harmony(text)[-1]
    assert message.name == "f" and message.error_type is None
    assert json.loads(message.arguments or "") == {"n": BIG}
