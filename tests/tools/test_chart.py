"""The chart tool: the exact strict schema, each chart type drawn, clear errors."""

from __future__ import annotations

from extras import require

require("tools")

import copy
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib import image
from tools_support import invoke_tool

from gramagent._runtime.library import ToolLibrary
from gramagent._spec.calls.validate import compile_validator
from gramagent._spec.schema.strict import strict_schema
from gramagent.tools import DataError, builtin_library
from gramagent.tools._chart import CHART_SCHEMA, LINE_BUCKETS, extremes_per_run

SEED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "df_name": {"type": "string"},
        "logical_name": {"type": "string", "default": ""},
        "chart_type": {"type": "string",
                       "enum": ["bar", "column", "stacked_column", "line", "scatter"]},
        "x_field": {"type": "string"},
        "x_label": {"type": "string", "default": ""},
        "y_label": {"type": "string", "default": ""},
        "series": {"type": "array", "items": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "y_field": {"type": "string"}},
            "required": ["name", "y_field"], "additionalProperties": False},
            "minItems": 1, "maxItems": 10},
        "title": {"type": "string", "default": ""},
        "note": {"type": "string", "default": ""},
    },
    "required": ["df_name", "logical_name", "chart_type", "x_field", "x_label", "y_label",
                 "series", "title", "note"],
    "additionalProperties": False,
}
"""Copied from the design notes (seed 004, "Strict tool schemas")."""

BLUE = np.array([0x1F, 0x77, 0xB4]) / 255  # matplotlib's first colour (C0)
ORANGE = np.array([0xFF, 0x7F, 0x0E]) / 255  # C1


@pytest.fixture
def library(data_dir: Path) -> ToolLibrary:
    lib = builtin_library(data_dir=data_dir, session_dir=data_dir.parent / "session")
    call(lib, "load_csv", path="sales.csv")
    yield lib
    lib.forget()


def call(library: ToolLibrary, name: str, **arguments: Any) -> Any:
    return invoke_tool(library, name, **arguments)


def args(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "df_name": "sales", "logical_name": "", "chart_type": "column", "x_field": "month",
        "x_label": "", "y_label": "", "series": [{"name": "Revenue", "y_field": "revenue"}],
        "title": "", "note": "",
    }
    return {**base, **overrides}


def png_path(answer: str) -> Path:
    assert answer.startswith("Chart saved to ")
    return Path(answer.removeprefix("Chart saved to ").split(": ", 1)[0])


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def colour_share(path: Path, colour: np.ndarray) -> float:
    pixels = image.imread(path)[..., :3]
    return float((np.abs(pixels - colour).max(axis=-1) < 0.02).mean())


def test_schema_is_exactly_the_seed_strict_schema() -> None:
    """Every property required, optional ones defaulting to "", no extra properties."""
    assert CHART_SCHEMA == SEED_SCHEMA
    strict = strict_schema(CHART_SCHEMA)
    assert strict.ok  # usable in OpenAI strict mode as is: only defaults become descriptions
    assert strict.schema["required"] == SEED_SCHEMA["required"]
    assert strict.schema["additionalProperties"] is False
    assert {c.action for c in strict.changes} == {"described"}


def test_schema_validation_rejects_what_the_notes_forbid() -> None:
    validate = compile_validator(CHART_SCHEMA).errors
    assert validate(args()) == []
    missing = args()
    del missing["note"]
    assert validate(missing)
    assert validate(args(chart_type="pie"))
    assert validate(args(series=[]))
    assert validate(args(series=[{"name": "a", "y_field": "b"}] * 11))
    assert validate(args(series=[{"name": "a", "y_field": "b", "colour": "red"}]))
    assert validate({**args(), "extra": 1})


@pytest.mark.parametrize("chart_type", ["bar", "column", "stacked_column", "line", "scatter"])
def test_each_chart_type_draws_a_png(library: ToolLibrary, chart_type: str) -> None:
    """A 900x550 PNG with the series drawn in the first two colours."""
    answer = call(library, "chart", **args(
        chart_type=chart_type, logical_name=f"sales {chart_type}", title="Sales",
        series=[{"name": "Revenue", "y_field": "revenue"}, {"name": "Units", "y_field": "units"}]))
    path = png_path(answer)
    assert path.name == f"sales_{chart_type}.png" and path.parent.name == "charts"
    assert png_size(path) == (900, 550)
    assert colour_share(path, BLUE) > 0.0005
    assert colour_share(path, ORANGE) > 0.00005
    assert f"{chart_type} chart of table sales: x = month" in answer
    assert "series: Revenue (revenue), Units (units)" in answer


def test_bars_sum_rows_sharing_an_x_value(library: ToolLibrary) -> None:
    """48 rows, 4 regions: a column chart by region has 4 columns of summed revenue."""
    answer = call(library, "chart", **args(x_field="region", chart_type="column"))
    assert "x = region (4 values, summed per value)" in answer
    line = call(library, "chart", **args(x_field="month", chart_type="line"))
    assert "x = month (12 values, summed per value)" in line
    scatter = call(library, "chart", **args(x_field="units", chart_type="scatter"))
    assert "x = units (48 values)" in scatter


def test_unknown_columns_are_a_clear_error(library: ToolLibrary) -> None:
    """Every unknown or non-numeric column is named, with the table's columns."""
    with pytest.raises(DataError) as info:
        call(library, "chart", **args(
            x_field="monht", series=[{"name": "R", "y_field": "revenu"},
                                     {"name": "Where", "y_field": "region"}]))
    message = str(info.value)
    assert "x_field 'monht' is not a column" in message
    assert "series 'R': y_field 'revenu' is not a column" in message
    assert "series 'Where': column 'region' is string, not numeric" in message
    assert "Columns: month (string), region (string), units (int64), revenue (double)" in message


def test_unknown_table_is_a_clear_error(library: ToolLibrary) -> None:
    with pytest.raises(DataError, match="unknown table 'sails'; known tables: sales"):
        call(library, "chart", **args(df_name="sails"))


def test_logical_name_replaces_unnamed_charts_accumulate(library: ToolLibrary) -> None:
    """The same logical name redraws one file; charts without one get new files."""
    first = png_path(call(library, "chart", **args(logical_name="revenue")))
    second = png_path(call(library, "chart", **args(logical_name="revenue", title="again")))
    assert first == second
    unnamed = {png_path(call(library, "chart", **args())) for _ in range(3)}
    assert len(unnamed) == 3
    assert all(p.name.startswith("sales_column_") for p in unnamed)


def test_too_many_categories(library: ToolLibrary, data_dir: Path) -> None:
    (data_dir / "wide.csv").write_text("k,v\n" + "".join(f"k{i},{i}\n" for i in range(300)))
    call(library, "load_csv", path="wide.csv")
    with pytest.raises(DataError, match="300 distinct values of 'k' are too many"):
        call(library, "chart", **args(df_name="wide", x_field="k",
                                      series=[{"name": "v", "y_field": "v"}]))
    answer = call(library, "chart", **args(df_name="wide", x_field="k", chart_type="line",
                                           series=[{"name": "v", "y_field": "v"}]))
    assert "(300 values)" in answer


def test_bad_series_entries_from_direct_calls(library: ToolLibrary) -> None:
    """Direct calls skip schema validation; the tool still checks its arguments."""
    broken = copy.deepcopy(args())
    broken["series"] = [{"name": "x"}]
    with pytest.raises(DataError, match="series\\[0\\] must be an object"):
        call(library, "chart", **broken)
    with pytest.raises(DataError, match="unknown chart_type 'pie'"):
        call(library, "chart", **args(chart_type="pie"))


# -- issue 31, class 6: a line of many points is downsampled, not drawn point by point ----------

@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.one_of(st.floats(-1e9, 1e9), st.just(float("nan"))), min_size=1,
                       max_size=400),
       runs=st.integers(1, 50))
def test_extremes_per_run_keep_each_runs_lowest_and_highest(values: list[float],
                                                             runs: int) -> None:
    """The indices kept are in order, at most two per run, and hold the lowest and highest
    value of every run of consecutive values (so every peak and trough of the line)."""
    ys = np.array(values)
    kept = extremes_per_run(ys, runs)
    assert list(kept) == sorted(set(kept.tolist()))
    size = -(-len(ys) // runs)
    starts = range(0, len(ys), size)
    assert len(kept) <= 2 * len(starts)
    for start in starts:
        run = ys[start:start + size]
        chosen = ys[kept[(kept >= start) & (kept < start + size)]]
        if np.isnan(run).all():
            assert len(chosen) == 0
        else:
            assert np.nanmin(run) in chosen and np.nanmax(run) in chosen


@pytest.mark.slow
def test_a_long_line_is_downsampled_and_says_so(data_dir: Path) -> None:
    """A line chart of 1.5 million rows draws at most 2 * LINE_BUCKETS points per series and
    its result says it was downsampled; the PNG is drawn."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = 1_500_000
    day = np.arange(rows)
    pq.write_table(pa.table({"t": day, "v": np.sin(day / 5000.0) + (day == 777_777) * 50.0}),
                   data_dir / "long.parquet")
    library = builtin_library(data_dir=data_dir, session_dir=data_dir.parent / "session")
    try:
        answer = call(library, "chart", **args(df_name="long", chart_type="line", x_field="t",
                                               series=[{"name": "v", "y_field": "v"}]))
    finally:
        library.forget()
    assert f"({rows} values; downsampled to at most {2 * LINE_BUCKETS} points per series" in answer
    assert png_size(png_path(answer)) == (900, 550)


def test_a_short_line_is_drawn_whole(library: ToolLibrary) -> None:
    """A line within the cap is drawn point by point and the result says nothing of
    downsampling."""
    answer = call(library, "chart", **args(chart_type="line"))
    assert "downsampled" not in answer
