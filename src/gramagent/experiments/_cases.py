"""The dataset of an experiment: cases read from JSONL, CSV or Parquet.

A case is one row: an ``id``, the user ``input`` (a string, or a list of user messages for a
multi-turn case), optional ``expected`` values and ``metadata``. Other columns go into
``metadata``. ``expected`` is a JSON object of named values, or a single value, which is
then the value named ``answer`` (what ``exact``, ``contains`` and ``regex`` compare against
when they are given no ``value`` of their own).

Every bad row is reported, all at once, as ``file:line: message`` in one
:class:`~gramagent.errors.ExperimentError`; nothing runs. In CSV an ``input`` that is a JSON
list (``["hi", "and bye"]``) is a multi-turn case and ``expected``/``metadata`` cells holding
a JSON object are read as JSON; Parquet rows are numbered from 1 as lines.
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gramagent import _json as exact_json
from gramagent._files import MAX_DATASET_BYTES, read_bounded
from gramagent._install import needs_extra
from gramagent.errors import Diagnostic, ExperimentError

__all__ = ["Case", "Dataset", "load_cases"]

_FIELDS = ("id", "input", "expected", "metadata")


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    """One row of a dataset."""

    id: str
    inputs: tuple[str, ...]
    """The user messages, in order (one for a single-turn case)."""
    expected: Mapping[str, Any] = field(default_factory=dict)
    """Named expected values (a lone value is named ``answer``)."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    line: int = 0
    """Where the row is in its file (1-based; rows for Parquet)."""

    @property
    def input(self) -> str:
        """The (last) user message."""
        return self.inputs[-1]


@dataclass(frozen=True, slots=True, kw_only=True)
class Dataset:
    """The cases of one file, and a fingerprint of its bytes (to detect a changed dataset)."""

    path: str
    cases: tuple[Case, ...]
    fingerprint: str
    """SHA-256 of the file's bytes."""

    def __len__(self) -> int:
        return len(self.cases)

    def __iter__(self) -> Iterator[Case]:
        return iter(self.cases)

    def by_id(self) -> dict[str, Case]:
        return {case.id: case for case in self.cases}


def load_cases(path: str | os.PathLike[str]) -> Dataset:
    """Read and check every case of a ``.jsonl``, ``.csv`` or ``.parquet`` file.

    Raises:
        ExperimentError: the file cannot be read, or rows are bad (each one as
            ``file:line: message``).
    """
    file = Path(path)
    name = str(path)
    suffix = file.suffix.lower()
    try:
        data = read_bounded(file, MAX_DATASET_BYTES)
    except OSError as exc:
        raise ExperimentError(f"{name}: cannot read the dataset: {exc.strerror or exc}") from None
    rows: Iterator[tuple[int, Any]]
    if suffix in (".jsonl", ".ndjson"):
        rows = _jsonl_rows(data)
    elif suffix == ".csv":
        rows = _csv_rows(data, name)
    elif suffix == ".parquet":
        rows = _parquet_rows(file, name)
    else:
        raise ExperimentError(f"{name}: unknown dataset format {suffix or '(no suffix)'!r}; "
                              "expected .jsonl, .csv or .parquet")
    problems: list[Diagnostic] = []
    cases: list[Case] = []
    first_line: dict[str, int] = {}
    for line, row in rows:
        case = _case(row, line, name, problems)
        if case is None:
            continue
        if case.id in first_line:
            problems.append(Diagnostic(f"duplicate id {case.id!r} (first at line "
                                       f"{first_line[case.id]})", name, line))
            continue
        first_line[case.id] = line
        cases.append(case)
    if not problems and not cases:
        problems.append(Diagnostic("the dataset has no cases", name))
    if problems:
        raise ExperimentError(problems)
    return Dataset(path=name, cases=tuple(cases), fingerprint=hashlib.sha256(data).hexdigest())


def _jsonl_rows(data: bytes) -> Iterator[tuple[int, Any]]:
    # a byte order mark (Notepad, PowerShell) is no part of the first line, as in CSV
    for number, raw in enumerate(data.removeprefix(b"\xef\xbb\xbf").splitlines(), 1):
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield number, _Bad(f"not UTF-8 text: {exc}")
            continue
        try:  # exact: an id or expected value of 30 digits stays that integer
            yield number, exact_json.loads(text)
        except ValueError as exc:
            yield number, _Bad(f"invalid JSON: {exc.args[0] if exc.args else exc}")


def _csv_rows(data: bytes, name: str) -> Iterator[tuple[int, Any]]:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ExperimentError(f"{name}: not UTF-8 text ({exc.reason})") from None
    # A cell may be as long as the file (a document to summarise): the csv module's default
    # limit (131,072 characters) would refuse it. The limit is process-wide; it is only
    # raised, and only to the length of text already read.
    if csv.field_size_limit() < len(text):
        csv.field_size_limit(len(text))
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        yield from _csv_records(reader, name)
    except csv.Error as exc:  # e.g. a NUL byte: the reader stops where it is
        raise ExperimentError([Diagnostic(f"not readable as CSV: {exc}", name,
                                          reader.line_num or 1)]) from None


def _csv_records(reader: csv.DictReader[str], name: str) -> Iterator[tuple[int, Any]]:
    if reader.fieldnames is None:
        return
    columns = list(reader.fieldnames)
    twice = sorted({c for c in columns if columns.count(c) > 1})
    if twice:  # DictReader would keep the last cell of each silently
        raise ExperimentError([Diagnostic(f"column {c!r} appears more than once", name, 1)
                               for c in twice])
    end = reader.line_num  # the header's last line
    for record in reader:
        start, end = end + 1, reader.line_num
        row: dict[str, Any] = {}
        for key, value in record.items():
            if key is None:  # more cells than headers
                row["\x00extra"] = value
                continue
            if value is None or value == "":
                continue
            row[key] = _csv_cell(key, value)
        yield start, row


def _csv_cell(key: str, value: str) -> Any:
    """JSON where a CSV cell plainly holds some: a list ``input``, an object ``expected``."""
    stripped = value.strip()
    if (key == "input" and stripped.startswith("[")) or (
            key in ("expected", "metadata") and stripped.startswith("{")):
        try:
            return exact_json.loads(stripped)
        except ValueError:
            return value
    return value


def _parquet_rows(file: Path, name: str) -> Iterator[tuple[int, Any]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ExperimentError(f"{name}: " + needs_extra("reading Parquet", "experiments")
                              ) from None
    try:
        table = pq.read_table(file)
    except Exception as exc:  # pyarrow raises several types for a broken file
        raise ExperimentError(f"{name}: cannot read Parquet: {exc}") from None
    for number, row in enumerate(table.to_pylist(), 1):
        yield number, {k: v for k, v in row.items() if v is not None}


@dataclass(frozen=True, slots=True)
class _Bad:
    message: str


def _case(row: Any, line: int, name: str, problems: list[Diagnostic]) -> Case | None:
    def bad(message: str) -> None:
        problems.append(Diagnostic(message, name, line))

    if isinstance(row, _Bad):
        bad(row.message)
        return None
    if not isinstance(row, dict):
        bad(f"expected a JSON object per line, got {_kind(row)}")
        return None
    if "\x00extra" in row:
        bad("more cells than columns")
        return None
    count = len(problems)
    raw_id = row.get("id", str(line))
    if isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)) or str(raw_id) == "":
        bad(f"id must be a non-empty string or an integer, got {_kind(raw_id)}")
    inputs = _inputs(row.get("input"), bad)
    expected: Any = row.get("expected", {})
    if not isinstance(expected, dict):
        expected = {"answer": expected}
    metadata = row.get("metadata", {})
    if not isinstance(metadata, dict):
        bad(f"metadata must be an object, got {_kind(metadata)}")
    if len(problems) > count or inputs is None:
        return None
    extra = {k: v for k, v in row.items() if k not in _FIELDS}
    return Case(id=str(raw_id), inputs=inputs, expected=expected,
                metadata={**extra, **metadata}, line=line)


def _inputs(value: Any, bad: Any) -> tuple[str, ...] | None:
    if value is None:
        bad("missing input")
        return None
    if isinstance(value, str):
        if not value.strip():
            bad("input must not be empty")
            return None
        return (value,)
    if isinstance(value, Sequence) and value and all(
            isinstance(v, str) and v.strip() for v in value):
        return tuple(value)
    bad("input must be a non-empty string or a non-empty list of non-empty strings, got "
        f"{_kind(value)}")
    return None


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"[:60]
    if isinstance(value, str):
        return "a string" if value else "an empty string"
    if isinstance(value, (list, tuple)):
        return "a list" if value else "an empty list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
