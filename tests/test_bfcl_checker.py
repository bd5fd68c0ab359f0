"""The BFCL checker of bench/bfcl_eval.py: BFCL's type rules and the by-value verdict.

The bench script is loaded by path (its name would shadow the ``bfcl_eval`` package). The
cases come from the installed bfcl-eval data, as the bench reads them.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from extras import needs_bfcl

pytestmark = needs_bfcl

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bfcl_eval.py"


@pytest.fixture(scope="module")
def be() -> Any:
    spec = importlib.util.spec_from_file_location("bfcl_eval_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while building
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def cases(be: Any) -> dict[str, Any]:
    return {case["id"]: case for case in be.load_cases("simple_python")}


def _check(be: Any, case: dict[str, Any], args: dict[str, Any], **kw: Any) -> str | None:
    name = next(iter(case["answer"][0]))
    return be.check_simple_call(case["function"][0], [(name, args)], case["answer"][0], **kw)


def test_ints_in_a_float_list_fail_bfcl_rules_but_match_by_value(be: Any,
                                                                  cases: dict[str, Any]) -> None:
    case = cases["simple_python_13"]  # interval: array of float, answer [1.0, 3.0]
    args = {"function": "x**2", "interval": [1, 3]}
    assert "items of" in (_check(be, case, args) or "")
    assert _check(be, case, args, json_numbers=True) is None
    assert _check(be, case, {"function": "x**2", "interval": [1.0, 3.0]}) is None


def test_by_value_still_rejects_a_wrong_number(be: Any, cases: dict[str, Any]) -> None:
    case = cases["simple_python_13"]
    problem = _check(be, case, {"function": "x**2", "interval": [1, 4]}, json_numbers=True)
    assert problem is not None and "not among" in problem


def test_a_top_level_int_for_a_float_passes_both_ways(be: Any) -> None:
    function = {"name": "f", "parameters": {"type": "dict", "required": ["x"],
                                            "properties": {"x": {"type": "float"}}}}
    answer = {"f": {"x": [2.0]}}
    for json_numbers in (False, True):
        assert be.check_simple_call(function, [("f", {"x": 2})], answer,
                                    json_numbers=json_numbers) is None
        assert be.check_simple_call(function, [("f", {"x": 3})], answer,
                                    json_numbers=json_numbers) is not None


def test_by_value_does_not_turn_an_int_parameter_into_a_float(be: Any) -> None:
    function = {"name": "f", "parameters": {"type": "dict", "required": ["n"],
                                            "properties": {"n": {"type": "integer"}}}}
    answer = {"f": {"n": [2]}}
    assert be.check_simple_call(function, [("f", {"n": 2})], answer, json_numbers=True) is None
    assert be.check_simple_call(function, [("f", {"n": 2.5})], answer,
                                json_numbers=True) is not None


def test_report_prints_both_verdicts_and_the_recorded_model(
        be: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [
        {"id": "simple_python_13", "ok": False, "reason": "", "seconds": 1.0, "text": None,
         "model": "local/some-model",
         "calls": [{"name": "calculate_area_under_curve",
                    "arguments": {"function": "x**2", "interval": [1, 3]}}]},
        {"id": "simple_python_0", "ok": True, "reason": "", "seconds": 1.0, "text": None,
         "calls": [{"name": "calculate_triangle_area", "arguments": {"base": 10, "height": 4}}]},
    ]
    saved = tmp_path / "run.jsonl"
    saved.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert be.main(["--report", str(saved)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("model local/some-model ")
    assert "accuracy 0/2" in out and "BFCL's type rules" in out
    assert "accuracy 1/2" in out and "by value" in out


def test_an_empty_list_for_an_optional_list_is_right_as_bfcl_has_it(
        be: Any, cases: dict[str, Any]) -> None:
    """BFCL's list check reads the optional marker ``""`` as an empty list, so ``[]`` passes
    where the answer allows leaving the parameter out; a non-empty list still fails."""
    case = cases["simple_python_353"]  # ingredients: [""]
    base = {"diet": "gluten-free", "meal_type": "dinner"}
    for json_numbers in (False, True):
        assert _check(be, case, {**base, "ingredients": []}, json_numbers=json_numbers) is None
        assert _check(be, case, {**base, "ingredients": ["rice"]},
                      json_numbers=json_numbers) is not None
