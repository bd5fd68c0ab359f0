"""How long the chart tool takes on a long table, and what it holds: a line chart of N rows.

Writes a parquet table of ``--rows`` rows (an int64 x, a float y) in a temporary data
directory and, in this process, times one ``chart`` call (line chart, one series) from the
table's footer check to the PNG written, and reports the process's peak resident memory
(VmHWM). Run: ``python bench/chart_bench.py --rows 1500000``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from gramagent._runtime.library import ToolContext
from gramagent.tools import builtin_library


def _peak_mib() -> float:
    with open("/proc/self/status") as f:
        kib = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    return kib / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_500_000)
    parser.add_argument("--chart-type", default="line")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        data = Path(folder, "data")
        data.mkdir()
        x = np.arange(options.rows)
        pq.write_table(pa.table({"t": x, "v": np.sin(x / 5000.0)}), data / "long.parquet")
        library = builtin_library(data_dir=data, session_dir=Path(folder, "session"))
        tool = library.lookup("chart")
        assert tool is not None
        ctx = ToolContext(conversation_id="bench", run_id="r", call_id="k", tool="chart",
                          state=library.conversation_state("bench"))
        before = _peak_mib()
        start = time.perf_counter()
        answer = tool.invoke(df_name="long", logical_name="", chart_type=options.chart_type,
                             x_field="t", x_label="", y_label="",
                             series=[{"name": "v", "y_field": "v"}], title="", note="",
                             ctx=ctx)
        elapsed = time.perf_counter() - start
        library.forget()
    print(f"{options.rows:,} rows, {options.chart_type} chart: {elapsed:.2f} s, peak RSS "
          f"{_peak_mib():.0f} MiB (before the call {before:.0f} MiB)")
    print(answer)


if __name__ == "__main__":
    main()
