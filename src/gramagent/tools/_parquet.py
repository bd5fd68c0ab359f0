"""Reading parquet tables in the host with a bound on what decoding them may take.

A parquet file a few hundred bytes long can decode to gigabytes: a list column whose one row
holds millions of values written as one run-length-encoded run, a dictionary page holding one
long string that a million rows point at, thousands of row groups or columns. The data tools
(``describe_table``, ``chart``) run in the host process, so before a table is decoded:

- only its flat columns are read; nested ones (lists, structs, maps) are listed but never
  decoded in the host (a list's length is not bounded by the row count, so nothing in the
  footer bounds it reliably); ``python_repl`` reads them, under the sandbox's limits;
- string and binary columns written with a dictionary are read as dictionaries, so a value
  repeated by every row is held once (decoding them to plain strings is where a repeated value
  multiplies);
- the bytes the flat columns take once read are estimated from the footer (rows times the Arrow
  width for fixed-width columns; offsets plus the uncompressed size for byte arrays) and a
  table over the limit is refused before any page is read;
- the table is read one row group at a time, and the bytes actually held are added up as it
  goes: a footer that understates its row groups stops the read at the limit (plus at most one
  row group), with the same error.

Needs ``pyarrow`` (the ``tools`` extra), imported where it is used.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gramagent.tools._tables import DataError
from gramagent.tools._workspace import DEFAULT_MAX_TABLE_BYTES

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq

__all__ = ["MAX_ROW_GROUPS", "MAX_TABLE_BYTES", "MAX_TABLE_COLUMNS", "TablePlan",
           "check_table", "count_distinct", "decoded_size", "plan_table", "read_table"]

MAX_TABLE_BYTES = DEFAULT_MAX_TABLE_BYTES
"""Largest decoded size of a table the host reads, by default."""
MAX_TABLE_COLUMNS = 1000
"""Most columns (leaf columns of the footer) a table the host reads may have."""
MAX_ROW_GROUPS = 10_000
"""Most row groups a table the host reads may have."""

_PHYSICAL_WIDTHS = {"BOOLEAN": 1, "INT32": 4, "FLOAT": 4, "INT64": 8, "DOUBLE": 8, "INT96": 12}


@dataclass(frozen=True, slots=True, kw_only=True)
class TablePlan:
    """What the host will read of one parquet file, decided from its footer alone."""

    meta: pq.FileMetaData
    """The footer."""
    schema: pa.Schema
    """The Arrow schema of every column of the file."""
    flat: tuple[str, ...]
    """The columns the host reads."""
    nested: tuple[str, ...]
    """Lists, structs and maps: listed, never decoded in the host."""
    dictionary: tuple[str, ...]
    """Flat string or binary columns read as dictionaries (written with a dictionary page)."""
    estimate: int
    """Bytes the flat columns take once read (:func:`decoded_size`)."""


def _is_nested(kind: pa.DataType) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_nested(kind))


def decoded_size(meta: pq.FileMetaData, columns: set[str] | None = None) -> int:
    """An estimate, from the footer alone, of the bytes the flat ``columns`` (default: every
    flat column) take once read: rows times width (the larger of the parquet and the Arrow
    width, so a decimal or a timestamp stored narrowly counts as read) plus a validity bit per
    row for fixed-width columns; for byte arrays an offset or dictionary index per row plus
    their uncompressed size (the dictionary page included). Nested columns are not counted:
    the host does not read them (:func:`plan_table`)."""
    schema = meta.schema.to_arrow_schema()
    flat = {f.name for f in schema if not _is_nested(f.type)}
    if columns is not None:
        flat &= columns
    arrow_widths = {f.name: _arrow_width(f.type) for f in schema if f.name in flat}
    total = 0
    for j in range(meta.num_columns):
        column = meta.schema.column(j)
        if column.path not in flat or column.max_repetition_level > 0:
            continue
        width = _PHYSICAL_WIDTHS.get(column.physical_type)
        if width is None and column.physical_type == "FIXED_LEN_BYTE_ARRAY":
            width = max(int(column.length or 0), 1)
        for i in range(meta.num_row_groups):
            rows = meta.row_group(i).num_rows
            if width is not None:
                arrow_width = arrow_widths[column.path]
                total += rows * (max(width, arrow_width) if arrow_width else 0) + rows // 8 + 1
            else:
                total += rows * 8 + meta.row_group(i).column(j).total_uncompressed_size
    return total


def _arrow_width(kind: pa.DataType) -> int:
    import pyarrow as pa

    if pa.types.is_null(kind):
        return 0
    try:
        return max(int(kind.bit_width) // 8, 1)
    except ValueError:  # not fixed width: strings, binary
        return 0


def plan_table(path: Path, *, max_bytes: int = MAX_TABLE_BYTES,
               columns: list[str] | None = None) -> TablePlan:
    """What the host reads of the parquet file ``path`` (only ``columns`` if given), if that
    is small enough: at most ``max_bytes`` once read (:func:`decoded_size`), at most
    :data:`MAX_TABLE_COLUMNS` columns and :data:`MAX_ROW_GROUPS` row groups.

    Raises:
        DataError: the file is not parquet, or the table is too large.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        meta = pq.read_metadata(path)
        schema = meta.schema.to_arrow_schema()
    except (pa.ArrowException, OSError) as exc:
        raise DataError(f"{path.name} is not a readable parquet file: {exc}") from None
    if meta.num_columns > MAX_TABLE_COLUMNS or meta.num_row_groups > MAX_ROW_GROUPS:
        raise DataError(f"{path.name} has {meta.num_columns} columns in {meta.num_row_groups} "
                        f"row groups; at most {MAX_TABLE_COLUMNS} columns and "
                        f"{MAX_ROW_GROUPS} row groups are read")
    wanted = set(schema.names if columns is None else columns)
    flat = tuple(f.name for f in schema if f.name in wanted and not _is_nested(f.type))
    nested = tuple(f.name for f in schema if f.name in wanted and _is_nested(f.type))
    size = decoded_size(meta, set(flat))
    if size > max_bytes:
        raise DataError(f"{path.name} holds {size} bytes of data (from its footer), over "
                        f"the limit of {max_bytes} for the data tools; aggregate it in "
                        "python_repl instead")
    with_dictionary = {
        meta.schema.column(j).path for j in range(meta.num_columns)
        if meta.schema.column(j).physical_type == "BYTE_ARRAY"
        and any(meta.row_group(i).column(j).has_dictionary_page
                for i in range(meta.num_row_groups))}
    dictionary = tuple(name for name in flat if name in with_dictionary
                       and (pa.types.is_string(schema.field(name).type)
                            or pa.types.is_binary(schema.field(name).type)
                            or pa.types.is_large_string(schema.field(name).type)
                            or pa.types.is_large_binary(schema.field(name).type)))
    return TablePlan(meta=meta, schema=schema, flat=flat, nested=nested,
                     dictionary=dictionary, estimate=size)


def check_table(path: Path, *, max_bytes: int = MAX_TABLE_BYTES) -> pq.FileMetaData:
    """The footer of the parquet file ``path``, if :func:`plan_table` accepts it.

    Raises:
        DataError: as :func:`plan_table`.
    """
    return plan_table(path, max_bytes=max_bytes).meta


def read_table(path: Path, columns: list[str] | None = None, *,
               max_bytes: int = MAX_TABLE_BYTES) -> pa.Table:
    """The flat columns of the parquet table at ``path`` (only ``columns`` if given), read one
    row group at a time while the bytes held stay within ``max_bytes``.

    String and binary columns written with a dictionary come back dictionary-encoded; nested
    columns are left out (:func:`plan_table` names them).

    Raises:
        DataError: the file is not parquet, its footer says it is too large, or reading it
            held more than ``max_bytes`` (a footer that understates its data).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    plan = plan_table(path, max_bytes=max_bytes, columns=columns)
    names = list(plan.flat)
    try:
        parquet = pq.ParquetFile(path, read_dictionary=list(plan.dictionary),
                                 pre_buffer=False)
        parts: list[pa.Table] = []
        held = 0
        for i in range(plan.meta.num_row_groups):
            part = parquet.read_row_group(i, columns=names, use_threads=False)
            held += part.get_total_buffer_size()
            if held > max_bytes:
                raise DataError(
                    f"{path.name} took over {max_bytes} bytes once read (by row group {i + 1} "
                    f"of {plan.meta.num_row_groups}), more than its footer says "
                    f"({plan.estimate}); the data tools do not read it: use python_repl")
            parts.append(part)
    except (pa.ArrowException, OSError) as exc:
        raise DataError(f"{path.name} is not a readable parquet file: {exc}") from None
    if not parts:
        fields = [pa.field(n, pa.dictionary(pa.int32(), plan.schema.field(n).type)
                           if n in plan.dictionary else plan.schema.field(n).type)
                  for n in names]
        return pa.schema(fields).empty_table()
    table = pa.concat_tables(parts)
    return table.unify_dictionaries() if plan.dictionary else table


def count_distinct(column: pa.ChunkedArray) -> int:
    """The number of distinct non-null values of ``column``, counted by sorting (arrow's hash
    kernels hold over 100 bytes per row; a sort holds an index and a copy): a
    dictionary-encoded column (as :func:`read_table` returns) by its indices."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(column.type):
        column = column.unify_dictionaries() if column.num_chunks > 1 else column
        column = pa.chunked_array([c.indices for c in column.chunks],
                                  type=column.type.index_type)
    values = column.drop_null()
    if len(values) < 2:
        return len(values)
    ordered = values.take(pc.sort_indices(values))
    changes = pc.not_equal(ordered.slice(1), ordered.slice(0, len(ordered) - 1))
    return 1 + int(pc.sum(changes).as_py() or 0)
