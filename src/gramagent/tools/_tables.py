"""Names and paths of tables: confinement to a data directory, without reading any file.

Kept apart from :mod:`._data` so that checking a name or a path does not import pyarrow.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath

__all__ = ["TABLE_NAME", "DataError", "check_table_name", "confined_path", "find_table",
           "list_tables"]

TABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


class DataError(ValueError):
    """A data request cannot be served: bad path, bad name, missing table, file too large."""


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


def find_table(folders: list[Path], name: str) -> Path:
    """The parquet file of table ``name``: the first of ``folders`` that holds a regular file
    ``<name>.parquet`` (symlinks are not tables).

    Raises:
        DataError: the name is invalid, or there is no such table (the known ones are listed).
    """
    check_table_name(name)
    for folder in folders:
        path = folder / f"{name}.parquet"
        if path.is_file() and not path.is_symlink():
            return path
    known = sorted({t for folder in folders for t in list_tables(folder)})
    hint = (f"; known tables: {', '.join(known)}" if known
            else "; there are no tables yet: load a CSV file with load_csv first")
    raise DataError(f"unknown table {name!r}{hint}")
