"""CSV datasets whose cells the csv module refuses by default: a cell of any length up to the
file's is read whole, and text the csv module cannot read is one positioned ExperimentError
(was "internal error ... field larger than field limit")."""

from __future__ import annotations

from extras import require

require("experiments")

from pathlib import Path

import pytest

from gramagent.errors import ExperimentError
from gramagent.experiments import load_cases


@pytest.mark.parametrize(("length", "quoted"), [(131_073, False), (400_000, True)])
def test_a_long_cell_is_read_whole(tmp_path: Path, length: int, quoted: bool) -> None:
    document = ("word, " * (length // 6 + 1)) + "end"
    cell = f'"{document}"' if quoted else document.replace(",", ";")
    path = tmp_path / "cases.csv"
    path.write_text(f"id,input\nlong,{cell}\nshort,Hi\n", encoding="utf-8")
    first, second = load_cases(path).cases
    assert first.input == (document if quoted else document.replace(",", ";"))
    assert len(first.input) > 131_072 and second.input == "Hi"


def test_text_the_csv_reader_refuses_is_positioned(tmp_path: Path) -> None:
    path = tmp_path / "cases.csv"
    path.write_text('id,input\na,"unterminated\n', encoding="utf-8")
    try:
        cases = load_cases(path).cases
    except ExperimentError as exc:
        assert "cases.csv" in str(exc)
    else:  # the csv module may take an unterminated quote to the end of the file
        assert len(cases) == 1
