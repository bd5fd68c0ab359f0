"""Tabular data: CSV uploads become parquet tables; tools read parquet only.

:func:`convert_csv` converts a CSV file of the upload directory into the parquet table
``<name>`` of the tables directory (the conversation's own ``data/`` folder, never the shared
upload directory), ``name`` being the file's stem (an identifier). Paths are confined to the
upload directory (:mod:`._tables`), files over the upload cap are not read, and the table is
written through a new file created exclusively and without following symlinks, then renamed
into place. :func:`describe` reports a table's schema, simple statistics and its first rows.
What a file may take once decoded is bounded before it is decoded: a CSV file's parsed
size is bounded before it is parsed whole (:func:`read_csv`), and a parquet table is
read as :mod:`._parquet` allows (flat columns, footer estimate first, then a running count), so
a small file cannot make the host decode gigabytes. Needs ``pyarrow`` (the ``tools`` extra).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from gramagent._runtime.library import Tool, ToolContext, tool
from gramagent.tools._parquet import (
    MAX_TABLE_BYTES,
    MAX_TABLE_COLUMNS,
    TablePlan,
    check_table,
    count_distinct,
    decoded_size,
    plan_table,
    read_table,
)
from gramagent.tools._tables import DataError, check_table_name, confined_path, find_table

# pyarrow is imported where it is used, not here: building the tools (to list or bind
# them) does not load it, only running them does.
if TYPE_CHECKING:
    import pyarrow as pa

    from gramagent.tools._workspace import WorkspaceProvider

__all__ = [
    "MAX_TABLE_BYTES",
    "MAX_TABLE_COLUMNS",
    "check_table",
    "convert_csv",
    "decoded_size",
    "describe",
    "ensure_table",
    "make_data_tools",
    "plan_table",
    "read_csv",
    "read_table",
]

SAMPLE_ROWS = 5
MAX_CELL_CHARS = 40
FIRST_VALUES_SCANNED = 10_000
"""Rows of a column scanned for the distinct values its summary shows."""


# ---------------------------------------------------------------------------------------------
# Writing and reading tables
# ---------------------------------------------------------------------------------------------

def convert_csv(upload_dir: Path, relative: str, *, max_bytes: int,
                tables_dir: Path | None = None,
                max_table_bytes: int = MAX_TABLE_BYTES) -> tuple[str, pa.Table]:
    """Convert the CSV file ``relative`` of ``upload_dir`` to the parquet table of its stem.

    Args:
        upload_dir: where uploaded CSV files are (read only).
        relative: the file, relative to ``upload_dir``.
        max_bytes: the largest CSV file read.
        tables_dir: where the table is written; default: ``upload_dir``.
        max_table_bytes: the most bytes the parsed table may take (:func:`read_csv`).

    Returns:
        The table name and the table.

    Raises:
        DataError: bad path or name, not a ``.csv`` file, too large, or unparsable.
        FileNotFoundError: no such file.
    """
    path = confined_path(upload_dir, relative)
    if not path.is_file():
        raise DataError(f"{relative!r} is not a file")
    if path.suffix.lower() != ".csv":
        raise DataError(f"{relative!r} is not a .csv file")
    size = path.stat().st_size
    if size > max_bytes:
        raise DataError(f"{relative!r} has {size} bytes, over the upload limit of {max_bytes}")
    name = check_table_name(PurePosixPath(relative.strip().replace("\\", "/")).stem)
    table = read_csv(path, relative, max_table_bytes=max_table_bytes)
    _write_table(table, (tables_dir or upload_dir).resolve(), name)
    return name, table


CSV_BLOCK_BYTES = 1 << 20
"""Bytes of CSV text parsed at a time (a row, the header included, must fit in one block)."""
CSV_EXPANSION = 9
"""Most bytes one byte of CSV takes once parsed: a cell takes at least one byte of text (its
delimiter) and at most 8 bytes and a validity bit once parsed (a number, a timestamp), or an
offset and its own bytes (a string)."""
TYPED_OVER_TEXT = 2
"""Most bytes a parsed column takes per byte of the same column parsed as strings (an int64
"1": 8 bytes against an offset and one byte)."""


def read_csv(path: Path, shown: str, *, max_table_bytes: int = MAX_TABLE_BYTES) -> pa.Table:
    """The CSV file ``path`` as a table, if it has at most :data:`MAX_TABLE_COLUMNS` columns
    and takes at most ``max_table_bytes`` once parsed, which is known before it is parsed
    whole: the header is read from the first block of :data:`CSV_BLOCK_BYTES`; a file
    small enough that even :data:`CSV_EXPANSION` times its size is within the limit is then
    read, and a larger one is first parsed block by block as strings while the bytes (times
    :data:`TYPED_OVER_TEXT`) are counted, and refused at the limit. Column types are inferred
    from the whole file. ``shown`` names the file in errors.

    Raises:
        DataError: unparsable, no columns, too many columns, or too large once parsed.
    """
    import pyarrow as pa
    import pyarrow.csv as pacsv

    options = pacsv.ReadOptions(block_size=CSV_BLOCK_BYTES, use_threads=False)
    try:
        names = pacsv.open_csv(path, read_options=options).schema.names
        if len(names) > MAX_TABLE_COLUMNS:
            raise DataError(f"{shown!r} has {len(names)} columns; at most "
                            f"{MAX_TABLE_COLUMNS} are read")
        if path.stat().st_size * CSV_EXPANSION > max_table_bytes:
            as_text = pacsv.ConvertOptions(column_types=dict.fromkeys(names, pa.string()))
            held = 0
            for batch in pacsv.open_csv(path, read_options=options, convert_options=as_text):
                held += batch.get_total_buffer_size() * TYPED_OVER_TEXT
                if held > max_table_bytes:
                    raise DataError(f"{shown!r} takes over {max_table_bytes} bytes once "
                                    "parsed, over the limit for the data tools; split or "
                                    "aggregate it")
        table = pacsv.read_csv(path, read_options=options)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        if "cannot infer number of columns" in str(exc) and path.stat().st_size:
            raise DataError(f"cannot parse {shown!r} as CSV: its first row is longer than "
                            f"{CSV_BLOCK_BYTES} bytes") from None
        raise DataError(f"cannot parse {shown!r} as CSV: {exc}") from None
    if table.num_columns == 0:
        raise DataError(f"{shown!r} has no columns")
    return table


def _write_table(table: pa.Table, folder: Path, name: str) -> None:
    """Write ``<name>.parquet`` in ``folder`` through a fresh, exclusively created file (a
    planted symlink or file at any name is never followed or overwritten), then rename it."""
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    fd, partial = tempfile.mkstemp(prefix=f".{name}.", suffix=".partial", dir=folder)
    try:
        os.fchmod(fd, 0o644)  # readable by the sandbox's user
        with os.fdopen(fd, "wb") as sink:
            pq.write_table(table, sink)
        os.replace(partial, folder / f"{name}.parquet")
    except BaseException:
        os.unlink(partial)
        raise


def ensure_table(upload_dir: Path, name: str, *, max_bytes: int,
                 tables_dir: Path | None = None,
                 max_table_bytes: int = MAX_TABLE_BYTES) -> Path:
    """The parquet file of table ``name``, converting ``<name>.csv`` first if only it exists.

    Tables are looked up in ``tables_dir`` first, then in ``upload_dir``; so a tool asked
    about an uploaded file that was not loaded yet still reads parquet.

    Raises:
        DataError: as :func:`~gramagent.tools._tables.find_table` and :func:`convert_csv`.
    """
    check_table_name(name)
    folders = list(dict.fromkeys([tables_dir or upload_dir, upload_dir]))
    if not any((f / f"{name}.parquet").is_file() for f in folders) and \
            (upload_dir / f"{name}.csv").is_file():
        convert_csv(upload_dir, f"{name}.csv", max_bytes=max_bytes, tables_dir=tables_dir,
                    max_table_bytes=max_table_bytes)
    return find_table(folders, name)


# ---------------------------------------------------------------------------------------------
# Describing a table
# ---------------------------------------------------------------------------------------------

def describe(name: str, table: pa.Table, *, sample_rows: int = SAMPLE_ROWS,
             plan: TablePlan | None = None) -> str:
    """Schema, per-column statistics and the first rows of ``table``, as text; with ``plan``
    (what :func:`read_table` read), its nested columns are listed as not read."""
    nested = plan.nested if plan is not None else ()
    columns = table.num_columns + len(nested)
    lines = [f"Table {name}: {table.num_rows} rows, {columns} columns", "Columns:"]
    for field in (plan.schema if plan is not None else table.schema):
        if field.name in nested:
            lines.append(f"  {field.name} ({field.type}): nested, not read by this tool "
                         "(read it in python_repl)")
        else:
            lines.append(f"  {field.name} ({_type_name(field.type)}): "
                         f"{_column_summary(table[field.name])}")
    if table.num_rows:
        shown = min(sample_rows, table.num_rows)
        lines.append(f"First {shown} rows:")
        lines.extend("  " + row for row in _grid(table.slice(0, shown)))
    return "\n".join(lines)


def _type_name(kind: pa.DataType) -> str:
    """A column's type as written: a dictionary-encoded column shows its values' type."""
    import pyarrow as pa

    return str(kind.value_type if pa.types.is_dictionary(kind) else kind)


def _column_summary(column: pa.ChunkedArray) -> str:
    import pyarrow as pa

    try:
        return _statistics(column)
    except pa.ArrowNotImplementedError:  # a type pyarrow has no kernel for (intervals, ...)
        return f"{column.null_count} missing; no statistics for its type"


def _statistics(column: pa.ChunkedArray) -> str:
    import pyarrow as pa
    import pyarrow.compute as pc

    nulls = column.null_count
    parts: list[str] = []
    kind = column.type
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind):
        if len(column) > nulls:
            bounds = pc.min_max(column)
            mean = pc.mean(column).as_py()
            parts.append(f"min {_fmt(bounds['min'].as_py())}, max {_fmt(bounds['max'].as_py())}, "
                         f"mean {_fmt(mean)}")
    elif pa.types.is_temporal(kind):
        if len(column) > nulls:
            bounds = pc.min_max(column)
            parts.append(f"from {bounds['min'].as_py()} to {bounds['max'].as_py()}")
    elif pa.types.is_null(kind):
        pass  # every value missing: said below
    else:
        distinct = count_distinct(column)
        head = column.slice(0, FIRST_VALUES_SCANNED)
        values = [v for v in pc.unique(head).slice(0, 7).to_pylist() if v is not None]
        shown = ", ".join(_cell(v) for v in values[:5])
        more = ", ..." if distinct > 5 else ""
        parts.append(f"{distinct} distinct ({shown}{more})")
    if nulls:
        parts.append(f"{nulls} missing")
    return "; ".join(parts) if parts else "no values"


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _cell(value: object) -> str:
    text = "" if value is None else _fmt(value)
    text = " ".join(text.split())
    return text if len(text) <= MAX_CELL_CHARS else text[: MAX_CELL_CHARS - 1] + "…"


def _grid(table: pa.Table) -> list[str]:
    header = list(table.column_names)
    rows = [[_cell(v) for v in row.values()] for row in table.to_pylist()]
    widths = [max(len(str(h)), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    out = [" | ".join(str(h).ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    out.extend(" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
               for r in rows)
    return out


# ---------------------------------------------------------------------------------------------
# Tools
# ---------------------------------------------------------------------------------------------

def make_data_tools(workspaces: WorkspaceProvider) -> list[Tool]:
    """The ``load_csv`` and ``describe_table`` tools, serving the workspaces of ``workspaces``."""

    def load_csv(path: str, ctx: ToolContext = None) -> str:  # type: ignore[assignment]
        """Load an uploaded CSV file of the data directory as a table (stored as parquet).
        The table is named after the file name without .csv; other tools use that name.

        Args:
            path: the CSV file, relative to the data directory, e.g. "sales.csv".
        """
        workspace = workspaces.get(ctx)
        name, table = convert_csv(workspace.data_dir, path,
                                  max_bytes=workspace.settings.max_upload_bytes,
                                  tables_dir=workspace.tables_dir,
                                  max_table_bytes=workspace.settings.max_table_bytes)
        columns = ", ".join(f"{f.name} ({f.type})" for f in table.schema)
        return (f"Loaded {path} as table {name}: {table.num_rows} rows, "
                f"{table.num_columns} columns: {columns}")

    def describe_table(df_name: str, ctx: ToolContext = None) -> str:  # type: ignore[assignment]
        """Describe a table: its columns with types and simple statistics, and its first rows.

        Args:
            df_name: the table name (as given by load_csv).
        """
        workspace = workspaces.get(ctx)
        limit = workspace.settings.max_table_bytes
        path = ensure_table(workspace.data_dir, df_name,
                            max_bytes=workspace.settings.max_upload_bytes,
                            tables_dir=workspace.tables_dir, max_table_bytes=limit)
        plan = plan_table(path, max_bytes=limit)
        return describe(df_name, read_table(path, max_bytes=limit), plan=plan)

    return [tool(load_csv), tool(describe_table)]
