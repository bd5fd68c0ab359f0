"""Datasets: JSONL, CSV and Parquet cases; every bad row reported at once, positioned."""

from __future__ import annotations

from extras import require

require("experiments")

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gramagent.errors import ExperimentError
from gramagent.experiments import load_cases


def test_jsonl_cases_single_and_multi_turn(tmp_path: Path) -> None:
    path = tmp_path / "cases.jsonl"
    path.write_text(
        '{"id": "a", "input": "Greet Alice", "expected": "Hello, Alice!", "lang": "en"}\n'
        "\n"
        '{"id": 7, "input": ["Hi", "Greet Bob"], "expected": {"answer": "Hello, Bob!"},'
        ' "metadata": {"tier": 2}}\n')
    dataset = load_cases(path)
    a, b = dataset.cases
    assert (a.id, a.inputs, dict(a.expected), dict(a.metadata), a.line) == (
        "a", ("Greet Alice",), {"answer": "Hello, Alice!"}, {"lang": "en"}, 1)
    assert (b.id, b.inputs, b.input, dict(b.metadata), b.line) == (
        "7", ("Hi", "Greet Bob"), "Greet Bob", {"tier": 2}, 3)
    assert len(dataset.fingerprint) == 64


def test_every_bad_jsonl_row_is_reported_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(
        '{"id": "a", "input": "ok"}\n'
        '{"id": "b"}\n'
        '{"id": "a", "input": "dup"}\n'
        '{"id": "c", "input": 5}\n'
        "not json\n"
        '["a list"]\n'
        '{"id": "d", "input": "x", "metadata": 3}\n'
        '{"id": true, "input": "x"}\n')
    with pytest.raises(ExperimentError) as info:
        load_cases(path)
    lines = str(info.value).splitlines()
    assert [line.split(": ", 1)[0] for line in lines] == [
        f"{path}:{n}" for n in (2, 3, 4, 5, 6, 7, 8)]
    text = str(info.value)
    assert f"{path}:2: missing input" in text
    assert f"{path}:3: duplicate id 'a' (first at line 1)" in text
    assert f"{path}:4: input must be a non-empty string" in text
    assert f"{path}:5: invalid JSON" in text
    assert f"{path}:6: expected a JSON object per line, got a list" in text
    assert f"{path}:7: metadata must be an object" in text
    assert f"{path}:8: id must be a non-empty string or an integer" in text


def test_csv_cases_and_positions_of_multiline_rows(tmp_path: Path) -> None:
    path = tmp_path / "cases.csv"
    path.write_text('id,input,expected,lang\n'
                    'a,"Greet\nAlice","Hello, Alice!",en\n'
                    'b,,x,en\n'
                    'c,"[""Hi"", ""Greet Carol""]",,fr\n'
                    'a,again,,en\n')
    with pytest.raises(ExperimentError) as info:
        load_cases(path)
    assert str(info.value).splitlines() == [
        f"{path}:4: missing input", f"{path}:6: duplicate id 'a' (first at line 2)"]
    path.write_text('id,input,expected,lang\n'
                    'a,"Greet\nAlice","Hello, Alice!",en\n'
                    'c,"[""Hi"", ""Greet Carol""]",,fr\n')
    a, c = load_cases(path).cases
    assert a.inputs == ("Greet\nAlice",) and dict(a.metadata) == {"lang": "en"}
    assert c.inputs == ("Hi", "Greet Carol") and c.line == 4


def test_parquet_cases(tmp_path: Path) -> None:
    path = tmp_path / "cases.parquet"
    pq.write_table(pa.table({"id": ["a", "b"], "input": ["Greet Alice", None],
                             "expected": ["Hello, Alice!", "x"]}), path)
    with pytest.raises(ExperimentError, match=r"cases\.parquet:2: missing input"):
        load_cases(path)
    pq.write_table(pa.table({"id": ["a"], "input": ["Greet Alice"]}), path)
    assert load_cases(path).cases[0].input == "Greet Alice"


def test_unknown_format_and_empty_file(tmp_path: Path) -> None:
    (tmp_path / "cases.txt").write_text("x")
    with pytest.raises(ExperimentError, match="unknown dataset format '.txt'"):
        load_cases(tmp_path / "cases.txt")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(ExperimentError, match="has no cases"):
        load_cases(tmp_path / "empty.jsonl")
    with pytest.raises(ExperimentError, match="cannot read"):
        load_cases(tmp_path / "missing.jsonl")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.none(), st.integers(-1000, 1000), st.text(max_size=5),
                          st.lists(st.text(max_size=3), max_size=2)), max_size=6))
def test_any_jsonl_rows_load_or_fail_positioned(tmp_path_factory: pytest.TempPathFactory,
                                                 inputs: list[object]) -> None:
    """Whatever the rows hold, loading returns cases or raises one positioned error."""
    import orjson

    path = tmp_path_factory.mktemp("prop") / "cases.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps({"id": i, "input": v})
                                for i, v in enumerate(inputs)) + b"\n")
    try:
        dataset = load_cases(path)
    except ExperimentError as exc:
        for diagnostic in exc.diagnostics:
            assert diagnostic.file == str(path)
            assert diagnostic.line is not None or "no cases" in diagnostic.message
    else:
        assert len(dataset) == len(inputs)


def test_a_byte_order_mark_is_not_part_of_the_first_row(tmp_path: Path) -> None:
    for suffix in (".jsonl", ".csv"):
        path = tmp_path / f"bom{suffix}"
        text = ('{"id": "a", "input": "hi"}\n' if suffix == ".jsonl" else "id,input\na,hi\n")
        path.write_bytes(b"\xef\xbb\xbf" + text.encode())
        (case,) = load_cases(path).cases
        assert (case.id, case.inputs) == ("a", ("hi",))


def test_a_csv_column_named_twice_is_refused_not_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "twice.csv"
    path.write_text("id,input,expected,input\na,Greet Alice,Hello,Greet Bob\n")
    with pytest.raises(ExperimentError) as info:
        load_cases(path)
    assert str(info.value) == f"{path}:1: column 'input' appears more than once"


@settings(max_examples=40, deadline=None)
@given(case_id=st.integers(), expected=st.integers())
def test_an_integer_of_any_size_is_read_exactly(tmp_path_factory: pytest.TempPathFactory,
                                                case_id: int, expected: int) -> None:
    """A 30-digit id is that id (not a float, nor "a number" refused), and an expected value
    of 30 digits stays exact, so an exact evaluator can match it."""
    path = tmp_path_factory.mktemp("ints") / "cases.jsonl"
    path.write_text(f'{{"id": {case_id}, "input": "hi", "expected": {expected}}}\n')
    (case,) = load_cases(path).cases
    assert (case.id, case.expected["answer"]) == (str(case_id), expected)


def test_a_fractional_id_is_refused_showing_it(tmp_path: Path) -> None:
    path = tmp_path / "cases.jsonl"
    path.write_text('{"id": 1.5, "input": "hi"}\n')
    with pytest.raises(ExperimentError) as info:
        load_cases(path)
    assert str(info.value) == (f"{path}:1: id must be a non-empty string or an integer, got "
                               "the number 1.5")
