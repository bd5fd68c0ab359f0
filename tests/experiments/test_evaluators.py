"""Evaluators: the built-ins, custom functions and the LLM judge (on the scripted server)."""

from __future__ import annotations

from extras import require

require("experiments")

import asyncio
from typing import Any

import ab_libs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gramagent import ConfigurationError
from gramagent._limit_values import limit_problem
from gramagent.experiments import Case, EvalResult, EvaluatorSpec, RunRecord, ToolRecord
from gramagent.experiments._evaluators import build_evaluators, evaluate
from gramagent.experiments._judge import read_verdict
from gramagent.testing import ScriptedServer, reply

CASE = Case(id="a", inputs=("Greet Alice",), expected={"answer": "Hello, Alice!", "n": 2})


def record(answer: str | None = "Hello, Alice!", **fields: Any) -> RunRecord:
    values: dict[str, Any] = {"variant": "A", "case_id": "a", "repeat": 0, "answer": answer,
                              "stop": "answer" if answer is not None else "limit:max_tokens",
                              "wall_ms": 120.0}
    values.update(fields)
    return RunRecord(**values)


async def verdicts(spec: EvaluatorSpec, *records: RunRecord) -> list[EvalResult]:
    evaluators = build_evaluators([spec])
    try:
        return [(await evaluate(evaluators, CASE, r))[0] for r in records]
    finally:
        await evaluators[0].aclose()


async def test_text_evaluators() -> None:
    exact = EvaluatorSpec(name="exact", kind="exact")
    passed, failed, none = await verdicts(exact, record(), record("hello, alice!"), record(None))
    assert (passed.passed, failed.passed, none.passed) == (True, False, False)
    assert none.reason == "no answer (limit:max_tokens)"
    folded = EvaluatorSpec(name="e", kind="exact", options={"ignore_case": True})
    assert (await verdicts(folded, record("hello, alice!")))[0].passed
    contains = EvaluatorSpec(name="c", kind="contains", options={"value": "ALICE"})
    assert [r.passed for r in await verdicts(contains, record(), record("Bob"))] == [True, False]
    named = EvaluatorSpec(name="n", kind="contains", options={"expected": "n"})
    assert (await verdicts(named, record("2 people")))[0].passed
    missing = EvaluatorSpec(name="m", kind="exact", options={"expected": "nope"})
    assert (await verdicts(missing, record()))[0].reason == "case 'a' has no expected 'nope'"
    regex = EvaluatorSpec(name="r", kind="regex", options={"pattern": r"^Hello, \w+!$"})
    assert [r.passed for r in await verdicts(regex, record(), record("Hi Alice"))] == [
        True, False]


async def test_structure_evaluators() -> None:
    schema = EvaluatorSpec(name="s", kind="json_schema", options={"schema": {
        "type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}})
    ok, bad, not_json = await verdicts(schema, record('{"name": "Alice"}'),
                                       record('{"name": 3}'), record("Alice"))
    assert (ok.passed, bad.passed, not_json.passed) == (True, False, False)
    assert "violates the schema" in bad.reason and not_json.reason == "answer is not JSON"

    call = ToolRecord(name="sayHello", status="ok", error_type=None, latency_ms=1.0,
                      arguments={"personName": "Alice"})
    failed = ToolRecord(name="sayHello", status="error", error_type="tool_exception",
                        latency_ms=1.0, arguments={"personName": "Bob"})
    called = EvaluatorSpec(name="t", kind="tool_called",
                           options={"tool": "sayHello", "arguments": {"personName": "Alice"}})
    results = await verdicts(called, record(tools=(call,)), record(tools=(failed,)),
                             record(tools=()))
    assert [r.passed for r in results] == [True, False, False]
    clean = EvaluatorSpec(name="c", kind="no_tool_errors")
    results = await verdicts(clean, record(tools=(call,)), record(tools=(call, failed)))
    assert [r.passed for r in results] == [True, False]
    assert results[1].reason == "1 tool error(s): sayHello:tool_exception"
    fast = EvaluatorSpec(name="f", kind="latency_under", options={"ms": 100})
    assert [r.passed for r in await verdicts(fast, record(wall_ms=99.0), record())] == [
        True, False]


async def test_custom_evaluators() -> None:
    custom = EvaluatorSpec(name="polite", kind="custom",
                           options={"function": "ab_libs:greets_politely"})
    ok, no = await verdicts(custom, record(), record("Hi"))
    assert (ok.passed, ok.reason, no.passed) == (True, "starts with Hello", False)
    broken = EvaluatorSpec(name="b", kind="custom", options={"function": "ab_libs:PLANTED"})
    with pytest.raises(ConfigurationError, match="is not callable"):
        build_evaluators([broken])
    with pytest.raises(ConfigurationError, match="cannot import 'nowhere'"):
        build_evaluators([EvaluatorSpec(name="x", kind="custom",
                                        options={"function": "nowhere:f"})])


def test_bad_specs_are_named() -> None:
    problems = EvaluatorSpec(name="x", kind="regex", options={"pattern": "(", "flags": 1}
                             ).problems()
    assert problems[0] == "evaluator 'x': regex has no option 'flags' (it takes ignore_case, "\
        "pattern)"
    assert problems[1].startswith("evaluator 'x': bad pattern:")
    assert EvaluatorSpec(name="y", kind="latency_under", options={"ms": -1}).problems() == [
        "evaluator 'y': ms must be positive (got -1)"]
    assert EvaluatorSpec(name="y", kind="latency_under", options={"ms": float("nan")}
                         ).problems() == ["evaluator 'y': ms must be finite (got nan)"]


async def test_the_judge_grades_through_a_model() -> None:
    turns = [reply('Sure! ```json\n{"score": 0.75, "reason": "warm but long"}\n```'),
             reply("I cannot grade this.")]
    with ScriptedServer(turns) as server:
        spec = EvaluatorSpec(name="judge", kind="judge", options={
            "model": "openai/judge", "rubric": "Is it a warm greeting?",
            "base_url": server.base_url, "pass_score": 0.5})
        graded, unreadable = await verdicts(spec, record(), record())
        prompt = server.requests[0].body["messages"][-1]["content"]
    # pass/fail: a pass scores 1 (a rate counts scores of 1), the judge's score is quoted
    assert (graded.score, graded.passed, graded.reason) == (1.0, True,
                                                            "score 0.75: warm but long")
    assert (unreadable.score, unreadable.passed) == (0.0, False)
    assert unreadable.reason.startswith("score 0: unreadable judge reply")
    assert "Is it a warm greeting?" in prompt and "Hello, Alice!" in prompt


def test_read_verdict_clamps_and_skips_non_scores() -> None:
    assert read_verdict('{"x": 1} then {"score": 7, "reason": "r"}') == (1.0, "r")
    assert read_verdict('{"score": true}')[0] == 0.0


_hostile = (st.floats() | st.integers() | st.booleans() | st.none() | st.text(max_size=5)
            | st.builds(EvalResult, name=st.text(max_size=3), score=st.floats(),
                        passed=st.none() | st.booleans() | st.text(max_size=2),
                        reason=st.text(max_size=5))
            | st.tuples(st.floats() | st.booleans(), st.text(max_size=5))
            | st.builds(ValueError, st.text(max_size=5)))


@settings(max_examples=60, deadline=None)
@given(value=_hostile)
async def test_whatever_a_custom_evaluator_gives_the_verdict_is_well_formed(
        value: object) -> None:
    ab_libs.RETURNED[0] = value
    spec = EvaluatorSpec(name="any", kind="custom",
                         options={"function": "ab_libs:returns_what_it_is_told"})
    (result,) = await verdicts(spec, record())
    assert result.name == "any"
    assert isinstance(result.score, float) and 0.0 <= result.score <= 1.0
    assert result.passed is None or result.passed == (result.score == 1.0)
    if result.passed is None:  # only a number in [0, 1] (or an EvalResult of one) scores
        assert not isinstance(value, (bool, BaseException))


@pytest.mark.parametrize(("value", "score", "passed"), [
    (np.bool_(True), 1.0, True), (np.isclose(1.0, 2.0), 0.0, False),
    (np.float32(0.25), 0.25, None), (np.int64(1), 1.0, None),
    ((np.bool_(True), "close enough"), 1.0, True)])
async def test_numpy_scalars_count_as_python_ones(value: object, score: float,
                                                 passed: bool | None) -> None:
    ab_libs.RETURNED[0] = value
    spec = EvaluatorSpec(name="np", kind="custom",
                         options={"function": "ab_libs:returns_what_it_is_told"})
    (result,) = await verdicts(spec, record())
    assert (result.score, result.passed) == (score, passed), result.reason


def test_option_types_are_checked_before_anything_runs() -> None:
    def problems(kind: str, **options: Any) -> list[str]:
        return EvaluatorSpec(name="e", kind=kind, options=options).problems()

    assert problems("tool_called", tool="sayHello", arguments="Alice") == [
        "evaluator 'e': arguments must be an object of argument values"]
    assert problems("judge", model="openai/j", rubric="r", pass_score="high") == [
        "evaluator 'e': pass_score must be a number in [0, 1]"]
    assert problems("exact", ignore_case="no") == ["evaluator 'e': ignore_case must be true "
                                                   "or false"]
    assert problems("json_schema", schema="object") == [
        "evaluator 'e': schema must be a JSON Schema (an object)"]
    assert problems("contains", value=3) == []


async def test_a_judge_that_cannot_work_at_all_stops_the_experiment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    spec = EvaluatorSpec(name="judge", kind="judge", options={
        "model": "openai/judge", "rubric": "r", "base_url": "https://judge.invalid/v1"})
    with pytest.raises(ConfigurationError, match="no API key"):
        await verdicts(spec, record())


@pytest.mark.parametrize("function", ["ab_libs:never_returns", "ab_libs:never_answers"])
async def test_an_evaluator_that_never_returns_fails_its_verdict_at_the_time_limit(
        function: str) -> None:
    spec = EvaluatorSpec(name="stuck", kind="custom", options={"function": function})
    (evaluator,) = build_evaluators([spec], time_limit=0.2)
    # the guard only turns a hang (before time limits) into a failure of this test
    (result,) = await asyncio.wait_for(evaluate([evaluator], CASE, record()), 30)
    assert (result.name, result.score, result.passed) == ("stuck", 0.0, False)
    assert result.reason == ("evaluator gave no verdict within its time limit (0.2 s, "
                             "evaluator_timeout)")


async def test_a_blocking_custom_evaluator_leaves_the_event_loop_free() -> None:
    ab_libs.RELEASED.clear()
    spec = EvaluatorSpec(name="blocks", kind="custom",
                         options={"function": "ab_libs:waits_for_the_loop"})
    evaluators = build_evaluators([spec])

    async def release() -> None:  # another run's work, on the loop, while the evaluator waits
        await asyncio.sleep(0)
        ab_libs.RELEASED.set()

    (result,), _ = await asyncio.gather(evaluate(evaluators, CASE, record()), release())
    assert (result.passed, result.reason) == (True, "the loop ran meanwhile")


@settings(max_examples=25, deadline=None)
@given(limit=st.none() | st.booleans() | st.integers(-3, 3) | st.floats()
       | st.text(max_size=3))
def test_an_evaluator_time_limit_is_checked_like_every_limit(limit: object) -> None:
    problem = limit_problem("evaluator_timeout", limit)
    spec = EvaluatorSpec(name="c", kind="custom", options={"function": "ab_libs:greets_politely"})
    if problem is None:
        assert len(build_evaluators([spec], time_limit=limit)) == 1  # type: ignore[arg-type]
    else:
        with pytest.raises(ConfigurationError) as raised:
            build_evaluators([spec], time_limit=limit)  # type: ignore[arg-type]
        assert str(raised.value) == f"evaluators: {problem}"
