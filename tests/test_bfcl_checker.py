"""The scoring of bench/bfcl_eval.py: BFCL's own ast_checker as the reference verdict on every
category, and the project's checker (BFCL's type rules, by value) as the second column.

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
    lines = out.splitlines()
    assert "accuracy 0/2" in lines[1] and "BFCL's ast_checker" in lines[1]
    assert "accuracy 0/2" in lines[2] and "BFCL's type rules" in lines[2]
    assert "differs from BFCL's on 0" in lines[2]
    assert "accuracy 1/2" in lines[3] and "by value" in lines[3]


@pytest.fixture(scope="module")
def every(be: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for category in ("simple_python", "parallel", "parallel_multiple", "irrelevance"):
        out.update((c["id"], c) for c in be.load_cases(category))
    return out


def test_parallel_needs_every_call_in_any_order(be: Any, every: dict[str, Any]) -> None:
    """parallel_1 asks for the same function twice: both calls pass in either order; one of
    them alone, or a wrong value in one, fails by BFCL's checker."""
    case = every["parallel_1"]
    first = ("calculate_em_force", {"b_field": 5, "area": 2, "d_time": 4})
    second = ("calculate_em_force", {"b_field": 5, "area": 2, "d_time": 10})
    assert be.bfcl_verdict(case, "parallel", [first, second]) is None
    assert be.bfcl_verdict(case, "parallel", [second, first]) is None
    assert "wrong_count" in (be.bfcl_verdict(case, "parallel", [first]) or "")
    wrong = ("calculate_em_force", {"b_field": 5, "area": 2, "d_time": 11})
    assert be.bfcl_verdict(case, "parallel", [first, wrong]) is not None
    assert be.our_verdicts(case, "parallel", [first, second]) == (None, None)


def test_parallel_multiple_checks_each_offered_function(be: Any, every: dict[str, Any]) -> None:
    """parallel_multiple_0 offers several functions and wants two different ones: the
    project's first-function checker does not apply; BFCL's accepts the right pair only."""
    case = every["parallel_multiple_0"]
    sums = ("math_toolkit.sum_of_multiples",
            {"lower_limit": 1, "upper_limit": 1000, "multiples": [3, 5]})
    primes = ("math_toolkit.product_of_primes", {"count": 5})
    assert be.bfcl_verdict(case, "parallel_multiple", [primes, sums]) is None
    assert be.bfcl_verdict(case, "parallel_multiple", [sums, sums]) is not None
    assert be.bfcl_verdict(case, "parallel_multiple", [sums]) is not None


def test_irrelevance_bfcl_counts_any_call_ours_only_offered_ones(
        be: Any, every: dict[str, Any]) -> None:
    """BFCL's irrelevance rule fails a reply holding any call; the project's column fails only
    a call to an offered function (an invented name is not run by the loop)."""
    case = every["irrelevance_0"]  # a triangle's area, offered determine_body_mass_index
    bmi = ("determine_body_mass_index", {"weight": 70.0, "height": 1.8})
    invented = ("calculate_triangle_area", {"base": 10, "height": 5})
    assert be.bfcl_verdict(case, "irrelevance", []) is None
    assert be.bfcl_verdict(case, "irrelevance", [invented]) is not None
    assert be.bfcl_verdict(case, "irrelevance", [bmi]) is not None
    assert be.our_verdicts(case, "irrelevance", [invented]) == (True, None)
    assert be.our_verdicts(case, "irrelevance", [bmi]) == (False, None)


def test_simple_verdicts_agree_and_malformed_arguments_fail(
        be: Any, every: dict[str, Any]) -> None:
    """On simple_python both checkers accept the right call and reject a wrong value; a
    truncated call (arguments kept as text) fails without BFCL's checker raising."""
    case = every["simple_python_0"]
    right = ("calculate_triangle_area", {"base": 10, "height": 5})
    wrong = ("calculate_triangle_area", {"base": 10, "height": 6})
    assert be.score(case, "simple_python", [right]) == (None, True, True)
    reason, ours, by_value = be.score(case, "simple_python", [wrong])
    assert reason is not None and "value" in reason and ours is False and by_value is False
    assert be.bfcl_verdict(case, "simple_python", [("calculate_triangle_area", '{"base": 1')])


def test_report_summarizes_each_category(
        be: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--report over a file holding several categories prints one summary per category, with
    the verdicts recomputed from the saved calls (the saved "ok" is ignored)."""
    rows = [
        {"id": "parallel_1", "ok": False, "reason": "", "seconds": 2.0, "text": None,
         "calls": [{"name": "calculate_em_force",
                    "arguments": {"b_field": 5, "area": 2, "d_time": d}} for d in (10, 4)]},
        {"id": "parallel_0", "ok": True, "reason": "", "seconds": 2.0, "text": None,
         "calls": [{"name": "spotify.play", "arguments": {"artist": "Taylor Swift",
                                                           "duration": 20}}]},
        {"id": "irrelevance_0", "ok": True, "reason": "", "seconds": 1.0, "text": None,
         "calls": [{"name": "calculate_triangle_area", "arguments": {"base": 10}}]},
    ]
    saved = tmp_path / "run.jsonl"
    saved.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert be.main(["--report", str(saved)]) == 0
    irrelevance, parallel = capsys.readouterr().out.split("\n\n")  # in case-id order
    assert "category parallel " in parallel and "accuracy 1/2 = 50.0%" in parallel
    assert "call count x1" in parallel
    assert "category irrelevance " in irrelevance
    assert "accuracy 0/1" in irrelevance.splitlines()[1]
    assert "accuracy 1/1" in irrelevance.splitlines()[2]


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



def _expected_calls(case: dict[str, Any]) -> list[tuple[str, Any]]:
    """The case's expected calls, each with the first of its possible values."""
    return [(name, {k: v[0] for k, v in params.items() if v and v[0] != ""})
            for answer in case["answer"] for name, params in answer.items()]


def test_matched_calls_counts_each_expected_call_once(be: Any) -> None:
    case = next(c for c in be.load_cases("parallel") if c["id"] == "parallel_1")
    right = _expected_calls(case)
    assert len(right) == 2
    assert be.matched_calls(case, right) == 2
    # The first call twice: it matches one expected call, not both.
    assert be.matched_calls(case, [right[0], right[0]]) == 1
    # A wrong value in the second call: one of two matched.
    wrong = (right[1][0], {k: "nowhere" for k in right[1][1]})
    assert be.matched_calls(case, [right[0], wrong]) == 1


def test_the_summary_counts_the_calls_of_cases_that_expect_several(be: Any) -> None:
    case = next(c for c in be.load_cases("parallel") if c["id"] == "parallel_1")
    right = _expected_calls(case)
    outcome = be.Outcome(id="parallel_1", ok=False, reason="x", seconds=1.0,
                         calls=[{"name": right[0][0], "arguments": right[0][1]}], text=None)
    summary = be.summarize([outcome], "m")
    assert "calls: 2 expected (2 x1 per case), 1 written, 1 matched one by one (50.0%)" in summary
    simple = be.Outcome(id="simple_python_0", ok=True, reason="ok", seconds=1.0, calls=[],
                        text=None)
    assert "calls:" not in be.summarize([simple], "m")


def test_a_report_of_a_damaged_file_names_the_file_and_line(be: Any, tmp_path: Path) -> None:
    saved = tmp_path / "run.jsonl"
    good = {"id": "simple_python_0", "ok": True, "reason": "ok", "seconds": 1.0, "calls": [],
            "text": None}
    saved.write_text(json.dumps(good) + "\n\n" + '{"id": "simple_python_1"}\n', encoding="utf-8")
    with pytest.raises(SystemExit, match=r"run\.jsonl:3: not a saved outcome"):
        be.read_outcomes([saved])
    with pytest.raises(SystemExit, match="No such file"):
        be.read_outcomes([tmp_path / "missing.jsonl"])
    saved.write_text(json.dumps(good) + "\n", encoding="utf-8")
    assert [o.id for o in be.read_outcomes([saved, saved])] == ["simple_python_0"]
