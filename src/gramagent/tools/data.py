"""Tabular data: CSV uploads become parquet tables; tools read parquet only.

:func:`load_csv` converts a CSV file of the data directory into ``<name>.parquet`` next to it,
``name`` being the file's stem (which must be an identifier). Paths are confined to the data
directory: absolute paths, ``..`` and symlinks that lead out are refused, and files over the
upload cap are not read. :func:`describe_table` reports a table's schema, simple statistics and
its first rows. A table whose CSV file was uploaded but not loaded yet is converted on first
use. Needs ``pyarrow`` (the ``tools`` extra).
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]
import pyarrow.csv as pacsv  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]

from gramagent._runtime.library import Tool, ToolContext, tool

if TYPE_CHECKING:
    from gramagent.tools.workspace import WorkspaceProvider

__all__ = [
    "DataError",
    "confined_path",
    "convert_csv",
    "describe",
    "ensure_table",
    "list_tables",
    "make_data_tools",
    "read_table",
    "table_path",
]

TABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
SAMPLE_ROWS = 5
MAX_CELL_CHARS = 40


class DataError(ValueError):
    """A data request cannot be served: bad path, bad name, missing table, file too large."""


# ---------------------------------------------------------------------------------------------
# Paths and tables
# ---------------------------------------------------------------------------------------------

def confined_path(data_dir: Path, relative: str) -> Path:
    """``relative`` resolved inside ``data_dir``, refusing every way out.

    Raises:
        DataError: the path is empty, absolute, contains ``..``, or resolves (through a
            symlink) outside the data directory.
        FileNotFoundError: it does not exist.
    """
    text = relative.strip()
    if not text:
        raise DataError("the path is empty: give a file name inside the data directory")
    if "\x00" in text:
        raise DataError("the path contains a NUL character")
    pure = PurePosixPath(text.replace("\\", "/"))
    if pure.is_absolute() or re.match(r"^[A-Za-z]:", text):
        raise DataError(f"absolute paths are not allowed ({relative!r}); give a path relative "
                        "to the data directory")
    if ".." in pure.parts:
        raise DataError(f"'..' is not allowed in paths ({relative!r})")
    root = data_dir.resolve()
    candidate = root.joinpath(*pure.parts)
    if not os.path.lexists(candidate):
        raise FileNotFoundError(f"no file {relative!r} in the data directory"
                                + _available(root, "*.csv"))
    resolved = candidate.resolve()
    if resolved != root and root not in resolved.parents:
        raise DataError(f"{relative!r} leads outside the data directory (a symlink); refused")
    return resolved


def _available(root: Path, pattern: str) -> str:
    names = sorted(p.name for p in root.glob(pattern))[:20]
    return f"; available: {', '.join(names)}" if names else ""


def check_table_name(name: str) -> str:
    """``name`` if it is a valid table name (an identifier of at most 63 characters).

    Raises:
        DataError: it is not.
    """
    if not TABLE_NAME.fullmatch(name):
        suggestion = re.sub(r"\W", "_", name.strip()) or "table"
        if not re.match(r"[A-Za-z_]", suggestion):
            suggestion = "t_" + suggestion
        raise DataError(f"invalid table name {name!r}: use letters, digits and underscores, "
                        f"not starting with a digit (e.g. {suggestion[:63]!r})")
    return name


def list_tables(data_dir: Path) -> list[str]:
    """The names of the parquet tables in ``data_dir``."""
    if not data_dir.is_dir():
        return []
    return sorted(p.stem for p in data_dir.glob("*.parquet")
                  if p.is_file() and TABLE_NAME.fullmatch(p.stem))


def table_path(data_dir: Path, name: str) -> Path:
    """The parquet file of table ``name``.

    Raises:
        DataError: the name is invalid, or there is no such table (the known ones are listed).
    """
    check_table_name(name)
    path = data_dir / f"{name}.parquet"
    if not path.is_file() or path.is_symlink():
        known = list_tables(data_dir)
        hint = (f"; known tables: {', '.join(known)}" if known
                else "; there are no tables yet: load a CSV file with load_csv first")
        raise DataError(f"unknown table {name!r}{hint}")
    return path


def ensure_table(data_dir: Path, name: str, *, max_bytes: int) -> Path:
    """The parquet file of table ``name``, converting ``<name>.csv`` first if only it exists.

    So a tool asked about an uploaded file that was not loaded yet still reads parquet.

    Raises:
        DataError: as :func:`table_path` and :func:`convert_csv`.
    """
    check_table_name(name)
    if not (data_dir / f"{name}.parquet").is_file() and (data_dir / f"{name}.csv").is_file():
        convert_csv(data_dir, f"{name}.csv", max_bytes=max_bytes)
    return table_path(data_dir, name)


def read_table(data_dir: Path, name: str, columns: list[str] | None = None) -> pa.Table:
    """Read table ``name`` (optionally only ``columns``) from its parquet file."""
    return pq.read_table(table_path(data_dir, name), columns=columns)


def convert_csv(data_dir: Path, relative: str, *, max_bytes: int) -> tuple[str, pa.Table]:
    """Convert the CSV file ``relative`` of ``data_dir`` to the parquet table of its stem.

    Returns:
        The table name and the table.

    Raises:
        DataError: bad path or name, not a ``.csv`` file, too large, or unparsable.
        FileNotFoundError: no such file.
    """
    path = confined_path(data_dir, relative)
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
    target = data_dir.resolve() / f"{name}.parquet"
    partial = target.with_name(f".{name}.parquet.partial")
    pq.write_table(table, partial)
    os.chmod(partial, 0o644)
    os.replace(partial, target)
    return name, table


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


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _cell(value: Any) -> str:
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
                                  max_bytes=workspace.settings.max_upload_bytes)
        columns = ", ".join(f"{f.name} ({f.type})" for f in table.schema)
        return (f"Loaded {path} as table {name}: {table.num_rows} rows, "
                f"{table.num_columns} columns: {columns}")

    def describe_table(df_name: str, ctx: ToolContext = None) -> str:  # type: ignore[assignment]
        """Describe a table: its columns with types and simple statistics, and its first rows.

        Args:
            df_name: the table name (as given by load_csv).
        """
        workspace = workspaces.get(ctx)
        ensure_table(workspace.data_dir, df_name, max_bytes=workspace.settings.max_upload_bytes)
        return describe(df_name, read_table(workspace.data_dir, df_name))

    return [tool(load_csv), tool(describe_table)]
