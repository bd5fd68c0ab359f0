"""Tabular data: CSV uploads become parquet tables; tools read parquet only.

:func:`convert_csv` converts a CSV file of the upload directory into the parquet table
``<name>`` of the tables directory (the conversation's own ``data/`` folder, never the shared
upload directory), ``name`` being the file's stem (an identifier). Paths are confined to the
upload directory (:mod:`._tables`), files over the upload cap are not read, and the table is
written through a new file created exclusively and without following symlinks, then renamed
into place. :func:`describe` reports a table's schema, simple statistics and its first rows.
Before a table is read, its size is checked from the parquet footer (:func:`check_table`), so
a small file cannot make the host decode gigabytes. Needs ``pyarrow`` (the ``tools`` extra).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from gramagent._runtime.library import Tool, ToolContext, tool
from gramagent.tools._tables import DataError, check_table_name, confined_path, find_table
from gramagent.tools._workspace import DEFAULT_MAX_TABLE_BYTES

# pyarrow is imported where it is used, not here: building the tools (to list or bind
# them) does not load it, only running them does.
if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq

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
    "read_table",
]

SAMPLE_ROWS = 5
MAX_CELL_CHARS = 40
MAX_TABLE_BYTES = DEFAULT_MAX_TABLE_BYTES
"""Largest decoded size (from the parquet footer) of a table the host reads, by default."""
MAX_TABLE_COLUMNS = 1000
MAX_ROW_GROUPS = 10_000


# ---------------------------------------------------------------------------------------------
# Writing and reading tables
# ---------------------------------------------------------------------------------------------

def convert_csv(upload_dir: Path, relative: str, *, max_bytes: int,
                tables_dir: Path | None = None) -> tuple[str, pa.Table]:
    """Convert the CSV file ``relative`` of ``upload_dir`` to the parquet table of its stem.

    Args:
        upload_dir: where uploaded CSV files are (read only).
        relative: the file, relative to ``upload_dir``.
        max_bytes: the largest CSV file read.
        tables_dir: where the table is written; default: ``upload_dir``.

    Returns:
        The table name and the table.

    Raises:
        DataError: bad path or name, not a ``.csv`` file, too large, or unparsable.
        FileNotFoundError: no such file.
    """
    import pyarrow as pa
    import pyarrow.csv as pacsv

    path = confined_path(upload_dir, relative)
    if not path.is_file():
        raise DataError(f"{relative!r} is not a file")
    if path.suffix.lower() != ".csv":
        raise DataError(f"{relative!r} is not a .csv file")
    size = path.stat().st_size
    if size > max_bytes:
        raise DataError(f"{relative!r} has {size} bytes, over the upload limit of {max_bytes}")
    name = check_table_name(PurePosixPath(relative.strip().replace("\\", "/")).stem)
    try:
        table = pacsv.read_csv(path)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise DataError(f"cannot parse {relative!r} as CSV: {exc}") from None
    if table.num_columns == 0:
        raise DataError(f"{relative!r} has no columns")
    _write_table(table, (tables_dir or upload_dir).resolve(), name)
    return name, table


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
                 tables_dir: Path | None = None) -> Path:
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
        convert_csv(upload_dir, f"{name}.csv", max_bytes=max_bytes, tables_dir=tables_dir)
    return find_table(folders, name)


_WIDTHS = {"BOOLEAN": 1, "INT32": 4, "FLOAT": 4, "INT64": 8, "DOUBLE": 8, "INT96": 12}


def decoded_size(meta: pq.FileMetaData) -> int:
    """An estimate, from the footer alone, of the bytes the table takes once read: rows times
    width for fixed-width columns, and for byte arrays an offset per row plus their encoded
    size (encodings such as run lengths make the file far smaller than that)."""
    total = 0
    for j in range(meta.num_columns):
        column = meta.schema.column(j)
        width = _WIDTHS.get(column.physical_type)
        if width is None and column.physical_type == "FIXED_LEN_BYTE_ARRAY":
            width = max(int(column.length or 0), 1)
        if width is not None:
            total += meta.num_rows * width
        else:
            total += meta.num_rows * 4 + sum(
                meta.row_group(i).column(j).total_uncompressed_size
                for i in range(meta.num_row_groups))
    return total


def check_table(path: Path, *, max_bytes: int = MAX_TABLE_BYTES) -> pq.FileMetaData:
    """The footer of the parquet file ``path``, if the table it describes is small enough to
    read in the host: at most ``max_bytes`` once read (:func:`decoded_size`), at most
    :data:`MAX_TABLE_COLUMNS` columns.

    Raises:
        DataError: the file is not parquet, or the table is too large.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        meta = pq.read_metadata(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise DataError(f"{path.name} is not a readable parquet file: {exc}") from None
    if meta.num_columns > MAX_TABLE_COLUMNS or meta.num_row_groups > MAX_ROW_GROUPS:
        raise DataError(f"{path.name} has {meta.num_columns} columns in {meta.num_row_groups} "
                        f"row groups; at most {MAX_TABLE_COLUMNS} columns and "
                        f"{MAX_ROW_GROUPS} row groups are read")
    size = decoded_size(meta)
    if size > max_bytes:
        raise DataError(f"{path.name} holds {size} bytes of data (from its footer), over "
                        f"the limit of {max_bytes} for the data tools; aggregate it in "
                        "python_repl instead")
    return meta


def read_table(path: Path, columns: list[str] | None = None, *,
               max_bytes: int = MAX_TABLE_BYTES) -> pa.Table:
    """Read the parquet table at ``path`` (optionally only ``columns``), size-checked first."""
    import pyarrow.parquet as pq

    check_table(path, max_bytes=max_bytes)
    return pq.read_table(path, columns=columns, use_threads=False)


# ---------------------------------------------------------------------------------------------
# Describing a table
# ---------------------------------------------------------------------------------------------

def describe(name: str, table: pa.Table, *, sample_rows: int = SAMPLE_ROWS) -> str:
    """Schema, per-column statistics and the first rows of ``table``, as text."""
    lines = [f"Table {name}: {table.num_rows} rows, {table.num_columns} columns", "Columns:"]
    for field in table.schema:
        lines.append(f"  {field.name} ({field.type}): {_column_summary(table[field.name])}")
    if table.num_rows:
        shown = min(sample_rows, table.num_rows)
        lines.append(f"First {shown} rows:")
        lines.extend("  " + row for row in _grid(table.slice(0, shown)))
    return "\n".join(lines)


def _column_summary(column: pa.ChunkedArray) -> str:
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
    else:
        distinct = pc.count_distinct(column).as_py()
        values = [v for v in pc.unique(column).slice(0, 7).to_pylist() if v is not None]
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
                                  tables_dir=workspace.tables_dir)
        columns = ", ".join(f"{f.name} ({f.type})" for f in table.schema)
        return (f"Loaded {path} as table {name}: {table.num_rows} rows, "
                f"{table.num_columns} columns: {columns}")

    def describe_table(df_name: str, ctx: ToolContext = None) -> str:  # type: ignore[assignment]
        """Describe a table: its columns with types and simple statistics, and its first rows.

        Args:
            df_name: the table name (as given by load_csv).
        """
        workspace = workspaces.get(ctx)
        path = ensure_table(workspace.data_dir, df_name,
                            max_bytes=workspace.settings.max_upload_bytes,
                            tables_dir=workspace.tables_dir)
        return describe(df_name, read_table(path, max_bytes=workspace.settings.max_table_bytes))

    return [tool(load_csv), tool(describe_table)]
