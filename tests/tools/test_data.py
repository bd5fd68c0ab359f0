"""load_csv and describe_table: CSV to parquet, path confinement, size cap, descriptions."""

from __future__ import annotations

from extras import require

require("tools")

import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from tools_support import SALES_CSV, invoke_tool, workspace_of

from gramagent._runtime.library import ToolLibrary
from gramagent.tools import DATA_DIR_ENV, builtin_library
from gramagent.tools._data import convert_csv, describe
from gramagent.tools._tables import DataError, confined_path, list_tables


def call(library: ToolLibrary, name: str, **arguments: object) -> object:
    return invoke_tool(library, name, "c1", **arguments)


def tables_dir(library: ToolLibrary) -> Path:
    """Where the library's conversation "c1" keeps its tables (its workspace's data/)."""
    return workspace_of(library, "c1").tables_dir


@pytest.fixture
def library(data_dir: Path) -> ToolLibrary:
    lib = builtin_library(data_dir=data_dir)
    yield lib
    lib.forget()


def test_load_csv_writes_a_parquet_table(library: ToolLibrary, data_dir: Path) -> None:
    """The CSV becomes <stem>.parquet with inferred column types, in the conversation's own
    tables folder: the shared upload directory is only read."""
    text = call(library, "load_csv", path="sales.csv")
    assert isinstance(text, str)
    assert "table sales: 48 rows, 4 columns" in text
    assert sorted(p.name for p in data_dir.iterdir()) == ["sales.csv"]
    table = pq.read_table(tables_dir(library) / "sales.parquet")
    assert table.num_rows == 48
    assert [str(t) for t in table.schema.types] == ["string", "string", "int64", "double"]
    assert table.column("region").to_pylist()[:4] == ["North", "South", "East", "West"]
    assert list_tables(tables_dir(library)) == ["sales"]


def test_describe_table_reports_schema_stats_and_rows(library: ToolLibrary) -> None:
    """Columns with types, min/max of numbers, distinct values of text, first rows."""
    call(library, "load_csv", path="sales.csv")
    text = call(library, "describe_table", df_name="sales")
    assert isinstance(text, str)
    lines = text.splitlines()
    assert lines[0] == "Table sales: 48 rows, 4 columns"
    assert "  region (string): 4 distinct (North, South, East, West)" in lines
    assert any(line.startswith("  units (int64): min 76, max 216") for line in lines)
    assert "First 5 rows:" in lines
    header = lines[lines.index("First 5 rows:") + 1]
    assert header.split() == ["month", "|", "region", "|", "units", "|", "revenue"]
    assert "2024-01 | North  | 98    | 5096" in text


def test_unknown_table_lists_the_known_ones(library: ToolLibrary) -> None:
    """A wrong table name is an error naming the tables that exist."""
    call(library, "load_csv", path="sales.csv")
    with pytest.raises(DataError, match="unknown table 'sale'; known tables: sales"):
        call(library, "describe_table", df_name="sale")
    with pytest.raises(DataError, match="invalid table name"):
        call(library, "describe_table", df_name="../sales")


@pytest.mark.parametrize(("path", "message"), [
    ("../secret.csv", "'..' is not allowed"),
    ("sub/../../secret.csv", "'..' is not allowed"),
    ("/etc/passwd", "absolute paths are not allowed"),
    ("C:/data/x.csv", "absolute paths are not allowed"),
    ("", "the path is empty"),
])
def test_paths_out_of_the_data_dir_are_refused(library: ToolLibrary, path: str,
                                               message: str) -> None:
    """Absolute paths and '..' never reach the filesystem."""
    with pytest.raises(DataError, match=message):
        call(library, "load_csv", path=path)


def test_symlinks_out_are_refused_inside_are_fine(library: ToolLibrary, data_dir: Path,
                                                  tmp_path: Path) -> None:
    """A symlink leading outside is refused; one staying inside works."""
    outside = tmp_path / "outside.csv"
    outside.write_text("a,b\n1,2\n")
    (data_dir / "escape.csv").symlink_to(outside)
    with pytest.raises(DataError, match="leads outside the data directory"):
        call(library, "load_csv", path="escape.csv")
    (data_dir / "linked").symlink_to(tmp_path)
    with pytest.raises(DataError, match="outside"):
        call(library, "load_csv", path="linked/outside.csv")
    (data_dir / "alias.csv").symlink_to(data_dir / "sales.csv")
    assert "table alias: 48 rows" in str(call(library, "load_csv", path="alias.csv"))
    assert not (tables_dir(library) / "escape.parquet").exists()


def test_missing_file_names_the_available_ones(library: ToolLibrary) -> None:
    with pytest.raises(FileNotFoundError, match="no file 'nope.csv'.*available: sales.csv"):
        call(library, "load_csv", path="nope.csv")


def test_upload_size_cap(data_dir: Path) -> None:
    """A file over max_upload_bytes is refused before it is read."""
    size = SALES_CSV.stat().st_size
    small = builtin_library(data_dir=data_dir, max_upload_bytes=size - 1)
    with pytest.raises(DataError, match=f"has {size} bytes, over the upload limit"):
        call(small, "load_csv", path="sales.csv")
    assert not (tables_dir(small) / "sales.parquet").exists()
    fits = builtin_library(data_dir=data_dir, max_upload_bytes=size)
    assert "48 rows" in str(call(fits, "load_csv", path="sales.csv"))


def test_bad_names_and_contents(data_dir: Path) -> None:
    """Stems that are not identifiers, non-CSV files and unparsable CSV are clear errors."""
    (data_dir / "2024 sales.csv").write_text("a\n1\n")
    (data_dir / "notes.txt").write_text("a\n1\n")
    (data_dir / "broken.csv").write_text('a,b\n1,2\n3,4,5\n')
    with pytest.raises(DataError, match="invalid table name '2024 sales'.*'t_2024_sales'"):
        convert_csv(data_dir, "2024 sales.csv", max_bytes=1 << 20)
    with pytest.raises(DataError, match="not a .csv file"):
        convert_csv(data_dir, "notes.txt", max_bytes=1 << 20)
    with pytest.raises(DataError, match="cannot parse 'broken.csv' as CSV"):
        convert_csv(data_dir, "broken.csv", max_bytes=1 << 20)
    assert list_tables(data_dir) == []


def test_data_dir_from_the_environment(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """GRAMAGENT_DATA_DIR names the data directory when no data_dir= is given."""
    monkeypatch.setenv(DATA_DIR_ENV, str(data_dir))
    library = builtin_library()
    try:
        call(library, "load_csv", path="sales.csv")
        assert (tables_dir(library) / "sales.parquet").is_file()
        assert not (data_dir / "sales.parquet").exists()
    finally:
        library.forget()
    assert data_dir.is_dir()  # a shared data directory is never removed


def test_missing_data_dir_is_a_configuration_error(tmp_path: Path) -> None:
    from gramagent.errors import ConfigurationError

    library = builtin_library(data_dir=tmp_path / "absent")
    with pytest.raises(ConfigurationError, match="does not exist"):
        call(library, "load_csv", path="x.csv")


def test_confined_path_resolves_inside(data_dir: Path) -> None:
    (data_dir / "sub").mkdir()
    (data_dir / "sub" / "x.csv").write_text("a\n1\n")
    assert confined_path(data_dir, "sub/x.csv") == (data_dir / "sub" / "x.csv").resolve()
    assert confined_path(data_dir, "./sub/x.csv") == (data_dir / "sub" / "x.csv").resolve()


def test_describe_handles_nulls_and_empty_tables() -> None:
    import pyarrow as pa

    table = pa.table({"n": pa.array([1.5, None, 3.0]), "s": pa.array(["a", None, "a"])})
    text = describe("t", table, sample_rows=2)
    assert "n (double): min 1.5, max 3, mean 2.25; 1 missing" in text
    assert "s (string): 1 distinct (a); 1 missing" in text and "First 2 rows:" in text
    empty = describe("e", table.slice(0, 0))
    assert empty.splitlines()[0] == "Table e: 0 rows, 2 columns" and "First" not in empty


def test_parquet_files_are_readable_by_others(library: ToolLibrary, data_dir: Path) -> None:
    """Tables are world-readable files, so the sandbox's user can read them."""
    call(library, "load_csv", path="sales.csv")
    assert os.stat(tables_dir(library) / "sales.parquet").st_mode & 0o004


def test_uploaded_csv_is_converted_on_first_use(data_dir: Path) -> None:
    """describe_table on a table whose CSV was uploaded but not loaded converts it first."""
    library = builtin_library(data_dir=data_dir)
    try:
        text = call(library, "describe_table", df_name="sales")
        assert str(text).startswith("Table sales: 48 rows")
        assert (tables_dir(library) / "sales.parquet").is_file()
    finally:
        library.forget()
    capped = builtin_library(data_dir=data_dir, max_upload_bytes=10)
    with pytest.raises(DataError, match="over the upload limit of 10"):
        call(capped, "describe_table", df_name="sales")


def test_csv_column_types_come_from_the_whole_file(tmp_path: Path) -> None:
    """A number column whose first fractional value comes after the first block of the
    bounded CSV reader is still a double (types are inferred from every row), and a limit
    the parsed table would pass is a clear DataError before the table is built."""
    from gramagent.tools._data import CSV_BLOCK_BYTES, read_csv

    path = tmp_path / "late.csv"
    path.write_text("x\n" + "1\n" * (CSV_BLOCK_BYTES // 2 + 10) + "1.5\n")
    assert str(read_csv(path, "late.csv").schema.field("x").type) == "double"
    assert str(read_csv(path, "late.csv", max_table_bytes=8 << 20).schema.field("x").type) \
        == "double"
    with pytest.raises(DataError, match="takes over 1048576 bytes once parsed"):
        read_csv(path, "late.csv", max_table_bytes=1 << 20)
