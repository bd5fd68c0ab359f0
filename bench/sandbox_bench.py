"""How long the python_repl sandbox takes: worker start (with isolation) and call round trips.

Prints, for N rounds each: starting a fresh isolated worker and running its first cell, and a
trivial cell in a warm worker; also a cell that reads the bundled sales table with pyarrow.
Medians and best times in milliseconds. Run: ``python bench/sandbox_bench.py --rounds 20``.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from gramagent.tools._data import convert_csv
from gramagent.tools.sandbox import PythonSandbox, SandboxConfig

SALES = Path(__file__).resolve().parents[1] / "examples" / "data" / "sales.csv"


def timed(action: object) -> float:
    start = time.perf_counter()
    action()  # type: ignore[operator]
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=20)
    options = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="sandbox-bench-"))
    data = root / "data"
    data.mkdir()
    os.chmod(data, 0o755)
    shutil.copy(SALES, data / "sales.csv")
    convert_csv(data, "sales.csv", max_bytes=1 << 20)
    config = SandboxConfig()
    figures: dict[str, list[float]] = {"start + first cell": [], "warm cell (1 + 1)": [],
                                       "read_table('sales') + sum": []}
    try:
        for i in range(options.rounds):
            box = PythonSandbox(root / f"w{i}", data_dir=data, config=config)
            figures["start + first cell"].append(timed(lambda b=box: b.run("1")))
            box.close()
        with PythonSandbox(root / "warm", data_dir=data, config=config) as box:
            box.run("import pyarrow.compute as pc")
            for _ in range(options.rounds):
                figures["warm cell (1 + 1)"].append(timed(lambda: box.run("1 + 1")))
                figures["read_table('sales') + sum"].append(timed(
                    lambda: box.run("pc.sum(read_table('sales')['revenue']).as_py()")))
            print(box.isolation.describe() if box.isolation else "no isolation report")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"Python {platform.python_version()}, {platform.system()} {platform.machine()}, "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}, {options.rounds} rounds")
    print(f"{'what':<28} {'median ms':>10} {'best ms':>9}")
    for name, values in figures.items():
        print(f"{name:<28} {statistics.median(values):>10.1f} {min(values):>9.1f}")


if __name__ == "__main__":
    main()
