"""The ``chart`` tool: a PNG chart of a parquet table, drawn with matplotlib (Agg backend).

Its arguments follow the strict schema of the design notes exactly: every property is
required, and the optional ones (``logical_name``, ``x_label``, ``y_label``, ``title``,
``note``) accept an empty string. Chart types: ``bar`` (horizontal bars), ``column`` (vertical
bars), ``stacked_column``, ``line`` and ``scatter``; each series plots one numeric column
against ``x_field``. Rows sharing an ``x_field`` value are summed (every kind but scatter,
which plots each row).

The figure is drawn on a :class:`matplotlib.figure.Figure` without pyplot, so concurrent calls
do not share global state. The work done in the host process is bounded: the table's size is
checked from its parquet footer before it is read, every text drawn (title, labels, note,
series names, category labels) is cut to :data:`MAX_TEXT_CHARS` and drawn as plain text (no
math text, whose layout grows with every character; docs/performance.md), the number of
bars and scatter points is capped, and a line of more than ``2 * LINE_BUCKETS`` points is
downsampled (the lowest and highest point of each run of rows, so peaks stay; the result says
so). Needs ``matplotlib`` and ``pyarrow`` (the ``tools`` extra).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gramagent._runtime.library import Tool, ToolContext
from gramagent.tools._data import ensure_table, plan_table, read_table
from gramagent.tools._tables import DataError

# pyarrow and matplotlib are imported where they are used, not here: building the tool
# (to list or bind it) does not load them, only drawing a chart does.
if TYPE_CHECKING:
    import pyarrow as pa
    from matplotlib.figure import Figure

    from gramagent.tools._workspace import WorkspaceProvider

__all__ = ["CHART_DESCRIPTION", "CHART_SCHEMA", "CHART_TYPES", "ChartRequest", "make_chart",
           "render_chart"]

CHART_TYPES = ("bar", "column", "stacked_column", "line", "scatter")
MAX_CATEGORIES = 200
"""Most distinct x values a bar, column or stacked column chart draws."""
MAX_POINTS = 100_000
"""Most points a scatter chart plots."""
LINE_BUCKETS = 2_000
"""A line of more than twice this many points is drawn through the lowest and highest point of
each of this many runs of consecutive x values (at most 4,000 points per series)."""
MAX_MARKED_POINTS = 500
"""Most points of a line that are drawn with a marker each."""
MAX_TICK_LABELS = 40
"""Most category labels written on the x axis (every n-th one beyond that)."""
MAX_TEXT_CHARS = 200
"""Longest title, label, note, series name or category label drawn (longer text is cut)."""

CHART_DESCRIPTION = (
    "Draw a chart of a table as a PNG image and return its path. chart_type: bar (horizontal "
    "bars), column (vertical bars), stacked_column, line or scatter. Each series plots one "
    "numeric column (y_field) against x_field. Always send every field; use an empty string "
    "for logical_name, x_label, y_label, title and note when not needed."
)

CHART_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "df_name": {"type": "string"},
        "logical_name": {"type": "string", "default": ""},
        "chart_type": {"type": "string", "enum": list(CHART_TYPES)},
        "x_field": {"type": "string"},
        "x_label": {"type": "string", "default": ""},
        "y_label": {"type": "string", "default": ""},
        "series": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "y_field": {"type": "string"}},
                "required": ["name", "y_field"],
                "additionalProperties": False,
            },
            "minItems": 1,
            "maxItems": 10,
        },
        "title": {"type": "string", "default": ""},
        "note": {"type": "string", "default": ""},
    },
    "required": ["df_name", "logical_name", "chart_type", "x_field", "x_label", "y_label",
                 "series", "title", "note"],
    "additionalProperties": False,
}
"""The strict arguments schema of the design notes (every property required)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ChartRequest:
    """The arguments of one chart call."""

    df_name: str
    chart_type: str
    x_field: str
    series: tuple[tuple[str, str], ...]
    """(name, y_field) per series."""
    logical_name: str = ""
    x_label: str = ""
    y_label: str = ""
    title: str = ""
    note: str = ""

    @classmethod
    def from_arguments(cls, arguments: dict[str, Any]) -> ChartRequest:
        """Build from the tool's arguments, checking what the schema cannot.

        Raises:
            DataError: a series entry is malformed, or the chart type is unknown.
        """
        series = []
        for i, item in enumerate(arguments.get("series") or ()):
            if not isinstance(item, dict) or not isinstance(item.get("y_field"), str):
                raise DataError(f"series[{i}] must be an object with name and y_field")
            series.append((_cut(str(item.get("name") or item["y_field"])), item["y_field"]))
        if not 1 <= len(series) <= 10:
            raise DataError(f"series must have 1 to 10 entries, got {len(series)}")
        chart_type = str(arguments.get("chart_type", ""))
        if chart_type not in CHART_TYPES:
            raise DataError(f"unknown chart_type {chart_type!r}; use one of "
                            f"{', '.join(CHART_TYPES)}")
        text = {k: _cut(str(arguments.get(k) or "")) for k in
                ("logical_name", "x_label", "y_label", "title", "note")}
        return cls(df_name=str(arguments.get("df_name", "")), chart_type=chart_type,
                   x_field=str(arguments.get("x_field", "")), series=tuple(series), **text)


def _cut(text: str) -> str:
    """``text`` as drawn: at most :data:`MAX_TEXT_CHARS`, each control or format character
    (no glyph draws it) as U+FFFD."""
    if not text.isprintable():
        text = "".join(c if c.isprintable() or c == "\n" else "\ufffd" for c in text)
    return text if len(text) <= MAX_TEXT_CHARS else text[: MAX_TEXT_CHARS - 1] + "…"


def _check_columns(table_name: str, schema: pa.Schema, request: ChartRequest) -> None:
    import pyarrow as pa

    names = schema.names
    problems = []
    if request.x_field not in names:
        problems.append(f"x_field {request.x_field!r} is not a column")
    elif pa.types.is_nested(schema.field(request.x_field).type):
        problems.append(f"x_field {request.x_field!r} is a nested column "
                        f"({schema.field(request.x_field).type}), not charted")
    for name, y_field in request.series:
        if y_field not in names:
            problems.append(f"series {name!r}: y_field {y_field!r} is not a column")
            continue
        kind = schema.field(y_field).type
        if not (pa.types.is_integer(kind) or pa.types.is_floating(kind)
                or pa.types.is_decimal(kind)):
            problems.append(f"series {name!r}: column {y_field!r} is {kind}, not numeric")
    if problems:
        raise DataError(f"cannot chart table {table_name!r}: " + "; ".join(problems)
                        + f". Columns: {', '.join(f'{f.name} ({f.type})' for f in schema)}")


def _aggregate(table: pa.Table, x_field: str, y_fields: Sequence[str]) -> pa.Table:
    """Sum the y columns per distinct x value, keeping the order of first appearance."""
    import numpy as np
    import pyarrow as pa

    keyed = table.append_column("__order", pa.array(np.arange(table.num_rows, dtype="int64")))
    grouped = keyed.group_by(x_field, use_threads=False).aggregate(
        [("__order", "min"), *((y, "sum") for y in y_fields)])
    if grouped.num_rows == table.num_rows:
        return table
    grouped = grouped.sort_by("__order_min")
    return pa.table({x_field: grouped[x_field],
                     **{y: grouped[f"{y}_sum"] for y in y_fields}})


def render_chart(table: pa.Table, request: ChartRequest, target: Path) -> str:
    """Draw ``request`` from ``table`` into the PNG ``target``; returns a one-line summary
    (which says so when a line chart was downsampled)."""
    import matplotlib

    y_fields = list(dict.fromkeys(y for _, y in request.series))
    data = table.select(list(dict.fromkeys([request.x_field, *y_fields])))
    summed = False
    if request.chart_type != "scatter":
        aggregated = _aggregate(data, request.x_field, y_fields)
        summed = aggregated.num_rows != data.num_rows
        data = aggregated
        if request.chart_type != "line" and data.num_rows > MAX_CATEGORIES:
            raise DataError(f"{data.num_rows} distinct values of {request.x_field!r} are too "
                            f"many for a {request.chart_type} chart (at most {MAX_CATEGORIES});"
                            " aggregate the table first or use a line chart")
    elif data.num_rows > MAX_POINTS:
        raise DataError(f"{data.num_rows} rows are too many to plot (at most {MAX_POINTS})")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.partial")
    with matplotlib.rc_context({"text.parse_math": False, "text.usetex": False}):
        figure, drawn = _draw(data, request)
        figure.savefig(partial, format="png")
    partial.replace(target)
    series_text = ", ".join(f"{name} ({y})" for name, y in request.series)
    shown = (f"; downsampled to at most {drawn} points per series, the lowest and highest "
             f"y of each of {LINE_BUCKETS} runs of consecutive x values"
             if drawn < data.num_rows else "")
    return (f"{request.chart_type} chart of table {request.df_name}: x = {request.x_field} "
            f"({data.num_rows} values{', summed per value' if summed else ''}{shown}), "
            f"series: {series_text}")


def _draw(data: pa.Table, request: ChartRequest) -> tuple[Figure, int]:
    """The figure of ``request`` and the most points drawn per series (plain text only: the
    caller turns math text off)."""
    import numpy as np
    import pyarrow as pa
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    kind = data.schema.field(request.x_field).type
    x_numeric = pa.types.is_integer(kind) or pa.types.is_floating(kind)
    figure = Figure(figsize=(9, 5.5), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    xs = _numbers(data[request.x_field]) if x_numeric else np.arange(data.num_rows, dtype=float)
    drawn = _plot_series(axes, data, request, xs)
    _label_axes(axes, request, data[request.x_field], x_numeric)
    if request.note:
        figure.text(0.01, 0.005, request.note, fontsize=8, color="0.35", ha="left", va="bottom")
    return figure, drawn


def _plot_series(axes: Any, data: pa.Table, request: ChartRequest, xs: Any) -> int:
    """Bars, lines or points of every series (``xs``: positions, or numeric x values);
    returns the most points drawn per series."""
    import numpy as np

    positions = np.arange(len(xs), dtype=float)
    count = len(request.series)
    drawn = len(xs)
    if request.chart_type in ("bar", "column"):
        width = 0.8 / count
        for i, (name, y_field) in enumerate(request.series):
            offsets = positions - 0.4 + width * (i + 0.5)
            if request.chart_type == "column":
                axes.bar(offsets, _numbers(data[y_field]), width=width, label=name)
            else:
                axes.barh(offsets, _numbers(data[y_field]), height=width, label=name)
    elif request.chart_type == "stacked_column":
        bottom = np.zeros(len(positions))
        for name, y_field in request.series:
            values = _numbers(data[y_field])
            axes.bar(positions, values, width=0.7, bottom=bottom, label=name)
            bottom = bottom + np.nan_to_num(values)
    elif request.chart_type == "line":
        drawn = 0
        for name, y_field in request.series:
            ys = _numbers(data[y_field])
            keep = extremes_per_run(ys, LINE_BUCKETS) if len(ys) > 2 * LINE_BUCKETS else None
            if keep is not None:
                xs_drawn, ys = xs[keep], ys[keep]
            else:
                xs_drawn = xs
            drawn = max(drawn, len(ys))
            marked = len(ys) <= MAX_MARKED_POINTS
            axes.plot(xs_drawn, ys, marker="o" if marked else None, markersize=3, label=name)
    else:  # scatter
        for name, y_field in request.series:
            axes.scatter(xs, _numbers(data[y_field]), s=16, label=name)
    if count > 1:
        axes.legend()
    return drawn


def extremes_per_run(values: Any, runs: int) -> Any:
    """Indices, in order, of the lowest and the highest value of each of ``runs`` runs of
    consecutive ``values`` (a float array; NaN is skipped): a line through them has the shape
    of the whole line at a chart's resolution, with every peak and trough kept."""
    import numpy as np

    size = -(-len(values) // runs)
    padded = np.full(size * -(-len(values) // size), np.nan)
    padded[: len(values)] = values
    grid = padded.reshape(-1, size)
    valid = ~np.isnan(grid)
    seen = valid.any(axis=1)
    starts = np.arange(grid.shape[0]) * size
    lowest = starts + np.argmin(np.where(valid, grid, np.inf), axis=1)
    highest = starts + np.argmax(np.where(valid, grid, -np.inf), axis=1)
    return np.unique(np.concatenate([lowest[seen], highest[seen]]))


def _label_axes(axes: Any, request: ChartRequest, x_column: pa.ChunkedArray,
                x_numeric: bool) -> None:
    """Tick labels, axis labels, grid and title (only the labels written are made)."""
    count = len(request.series)
    total = len(x_column)
    if request.chart_type == "bar":
        axes.set_yticks(list(range(total)), _labels(x_column, range(total)))
        axes.invert_yaxis()
    elif not (x_numeric and request.chart_type in ("line", "scatter")):
        step = max(1, -(-total // MAX_TICK_LABELS))
        ticks = range(0, total, step)
        labels = _labels(x_column, ticks)
        axes.set_xticks(list(ticks), labels)
        if max((len(s) for s in labels), default=0) * len(labels) > 90:
            axes.tick_params(axis="x", labelrotation=45)
            for tick in axes.get_xticklabels():
                tick.set_horizontalalignment("right")
    value_label = request.y_label or (request.series[0][0] if count == 1 else "")
    category_label = request.x_label or request.x_field
    if request.chart_type == "bar":
        axes.set_xlabel(value_label)
        axes.set_ylabel(category_label)
        axes.grid(axis="x", alpha=0.3)
    else:
        axes.set_xlabel(category_label)
        axes.set_ylabel(value_label)
        axes.grid(axis="y", alpha=0.3)
    axes.set_axisbelow(True)
    title = request.title or request.logical_name
    if title:
        axes.set_title(title)


def _labels(column: pa.ChunkedArray, rows: range) -> list[str]:
    import pyarrow as pa

    values = column.take(pa.array(rows, type=pa.int64())).to_pylist()
    return ["" if v is None else _cut(str(v)) for v in values]


def _numbers(column: pa.ChunkedArray) -> Any:
    """The column as a float array, NaN for a missing value."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    floats = pc.cast(column, pa.float64()).fill_null(float("nan"))
    return np.asarray(floats.to_numpy(), dtype=float)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "_", text.strip()).strip("_")[:60]


def _free_name(folder: Path, stem: str) -> Path:
    """The first ``stem_N.png`` of ``folder`` that does not exist, reserved by creating it."""
    folder.mkdir(parents=True, exist_ok=True)
    n = 1
    while True:
        target = folder / f"{stem}_{n}.png"
        try:
            target.touch(exist_ok=False)
            return target
        except FileExistsError:
            n += 1


def make_chart(workspaces: WorkspaceProvider) -> Tool:
    """The ``chart`` tool, drawing into the charts folder of each conversation's workspace."""
    naming = threading.Lock()

    def chart(ctx: ToolContext = None, **arguments: Any) -> str:  # type: ignore[assignment]
        request = ChartRequest.from_arguments(arguments)
        workspace = workspaces.get(ctx)
        path = ensure_table(workspace.data_dir, request.df_name,
                            max_bytes=workspace.settings.max_upload_bytes,
                            tables_dir=workspace.tables_dir,
                            max_table_bytes=workspace.settings.max_table_bytes)
        limit = workspace.settings.max_table_bytes
        _check_columns(request.df_name, plan_table(path, max_bytes=limit).schema, request)
        table = read_table(path, [request.x_field, *(y for _, y in request.series)],
                           max_bytes=limit)
        stem = _slug(request.logical_name)
        if stem:  # a logical name identifies the chart: drawing it again replaces it
            target = workspace.charts_dir / f"{stem}.png"
        else:
            with naming:
                target = _free_name(workspace.charts_dir,
                                    f"{request.df_name}_{request.chart_type}")
        summary = render_chart(table, request, target)
        return f"Chart saved to {target}: {summary}"

    return Tool("chart", CHART_DESCRIPTION, CHART_SCHEMA, chart, context_param="ctx")
