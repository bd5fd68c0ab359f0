"""gramagent._json: exact JSON for model-sent values, and the places that rely on it."""

from __future__ import annotations

import json

import pytest

from gramagent import _json as exact_json
from gramagent._models.harmony_parse import parse_harmony
from gramagent._spec.calls.check import parse_arguments

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


# -- one set of rules whichever parser runs (issue 14, item 1) ---------------------------------

LONG = "12345678901234567890"  # forces the standard library's path


@pytest.mark.parametrize("prefix", ["", f'"n": {LONG}, '])
@pytest.mark.parametrize("payload", [
    '"s": "\\ud800"', '"s": "\\udc00x"', '"s": "a\\ud83d"', '"\\ud800": 1',
    '"x": NaN', '"x": Infinity', '"x": -Infinity', '"x": 1e999', '"x": -1e400',
])
def test_loads_refuses_the_same_values_on_both_paths(prefix: str, payload: str) -> None:
    with pytest.raises(ValueError):
        exact_json.loads("{" + prefix + payload + "}")


@pytest.mark.parametrize("prefix", ["", f'"n": {LONG}, '])
def test_loads_keeps_surrogate_pairs_and_refuses_literal_surrogates(prefix: str) -> None:
    assert exact_json.loads("{" + prefix + '"s": "\\ud83d\\ude00"}')["s"] == "\U0001f600"
    with pytest.raises(ValueError):
        exact_json.loads("{" + prefix + '"s": "\ud800"}')


@pytest.mark.parametrize("prefix", ["", f"{LONG}, "])
def test_loads_nesting_limit(prefix: str) -> None:
    deep = exact_json.MAX_DEPTH
    ok = "[" * (deep - 1) + "[" + prefix + "1" + "]" * deep
    assert exact_json.loads(ok) is not None
    with pytest.raises(ValueError, match="nested"):
        exact_json.loads("[" * (deep + 1) + prefix + "1" + "]" * (deep + 1))
    with pytest.raises(ValueError, match="nested"):  # 300 levels, 2 KB: RecursionError once
        exact_json.loads('{"a":' * 300 + prefix.rstrip(", ") + "1" + "}" * 300)
    # brackets inside strings do not count
    assert exact_json.loads(f'["{"[" * 200}"]') == ["[" * 200]


def test_dumps_any_value_as_valid_utf8() -> None:
    """Big integers, nesting beyond orjson's 255 levels and lone surrogates all encode."""
    deep: list[object] = []
    node = deep
    for _ in range(400):
        node.append([])
        node = node[0]  # type: ignore[assignment]
    value = {"n": 2**80, "deep": deep, "s": "a\ud800b"}
    text = exact_json.dumps(value, sort_keys=True)
    text.encode("utf-8")  # never raises
    assert json.loads(text) == value
    assert exact_json.dumps({"a": [1]}, indent=True) == '{\n  "a": [\n    1\n  ]\n}'
    with pytest.raises(ValueError):
        exact_json.dumps({"x": float("nan"), "n": 2**80})


def test_clean_text() -> None:
    assert exact_json.clean_text("ok é") == "ok é"
    assert exact_json.clean_text("a\ud800b\udfff") == "a\ufffdb\ufffd"
