"""Hostile parquet and CSV files for the data tools, and a probe that runs the tools on one in
a fresh process and reports what decoding it cost there.

Run as a script: ``python data_bombs.py DATA_DIR TABLE LIMIT`` calls ``describe_table`` and
(where the table has a numeric column) ``chart`` on ``TABLE`` with ``max_table_bytes=LIMIT``
and prints one JSON object: each tool's outcome (``ok`` or the error's type and message) and
the peak of pyarrow's memory pool (``pool_peak``) and of the process's resident memory
(``rss_growth_kib``, from before the first call) over both calls.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

KINDS = ("long_list", "list_per_row", "repeated_string", "zero_run", "many_row_groups",
         "many_columns", "struct", "wide_csv", "empty_cells_csv")
"""The hostile shapes :func:`write_hostile` makes."""


def write_hostile(folder: Path, kind: str, size: int) -> str:
    """Write a table of shape ``kind`` scaled by ``size`` into ``folder``; returns its name.

    Every file is small on disk and decodes to much more: ``size`` values in one list row
    (run-length encoded zeros); ``size`` rows of lists of 64 values; a dictionary holding one
    string of ``size`` bytes that 256 rows point at; ``size`` int64 zeros; ``size`` row groups
    of one row; ``size`` columns; a struct column of ``size`` rows; a CSV of ``size`` columns;
    a CSV of ``size`` rows of empty fields.
    """
    name = kind
    path = folder / f"{name}.parquet"
    if kind == "long_list":
        values = pa.array(np.zeros(size, dtype="int64"))
        table = pa.table({"id": [1], "x": pa.ListArray.from_arrays(pa.array([0, size],
                                                                            pa.int32()), values)})
    elif kind == "list_per_row":
        offsets = pa.array(np.arange(0, 64 * size + 1, 64, dtype="int32"))
        values = pa.array(np.zeros(64 * size, dtype="int64"))
        table = pa.table({"id": np.arange(size), "x": pa.ListArray.from_arrays(offsets, values)})
    elif kind == "repeated_string":
        strings = pa.DictionaryArray.from_arrays(pa.array(np.zeros(256, dtype="int32")),
                                                 pa.array(["a" * size]))
        table = pa.table({"id": np.arange(256), "s": strings})
    elif kind == "zero_run":
        table = pa.table({"id": np.zeros(size, dtype="int64")})
    elif kind == "many_row_groups":
        table = pa.table({"id": np.arange(size, dtype="int64")})
        pq.write_table(table, path, row_group_size=1)
        return name
    elif kind == "many_columns":
        table = pa.table({f"c{i}": [i] for i in range(size)})
    elif kind == "struct":
        table = pa.table({"id": np.arange(size),
                          "p": pa.StructArray.from_arrays([pa.array(np.zeros(size))], ["v"])})
    elif kind == "wide_csv":
        header = ",".join(f"c{i}" for i in range(size))
        (folder / f"{name}.csv").write_text(header + "\n" + ",".join("1" * size) + "\n")
        return name
    elif kind == "empty_cells_csv":
        (folder / f"{name}.csv").write_text("a,b,c,d\n" + ",,,\n" * size)
        return name
    else:
        raise ValueError(kind)
    pq.write_table(table, path)
    return name


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(f"{field}:"))


def probe(data_dir: Path, name: str, limit: int) -> dict[str, object]:
    """Run ``describe_table`` and ``chart`` on table ``name``; outcomes and memory peaks."""
    import matplotlib  # noqa: F401  (imported before the baseline: its import is not the cost)
    import pyarrow.csv  # noqa: F401

    from gramagent.tools import builtin_library
    from gramagent.tools._workspace import STATE_KEY  # noqa: F401

    sys.path.insert(0, str(Path(__file__).parent))
    from tools_support import invoke_tool

    library = builtin_library(data_dir=data_dir, max_table_bytes=limit)
    before = _status_kib("VmRSS")
    outcomes: dict[str, dict[str, object]] = {}
    try:
        for tool, arguments in (
                ("describe_table", {"df_name": name}),
                ("chart", {"df_name": name, "logical_name": "", "chart_type": "line",
                           "x_field": "id", "x_label": "", "y_label": "",
                           "series": [{"name": "id", "y_field": "id"}], "title": "",
                           "note": ""})):
            try:
                outcomes[tool] = {"ok": str(invoke_tool(library, tool, **arguments))}
            except Exception as exc:  # the outcome is what the test reads
                outcomes[tool] = {"error": type(exc).__name__, "message": str(exc)}
            outcomes[tool]["pool_peak"] = pa.default_memory_pool().max_memory()
    finally:
        library.forget()
    peak_kib = _status_kib("VmHWM")  # reset by exec, unlike ru_maxrss
    return {"outcomes": outcomes, "pool_peak": pa.default_memory_pool().max_memory(),
            "rss_growth_kib": peak_kib - before}


if __name__ == "__main__":
    print(json.dumps(probe(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]))))
