"""Data bombs on the host (issue 31, class 6): a small file must not make ``describe_table``
or ``chart`` decode more than the table limit in the host process.

Each hostile file is small on disk and large once decoded (nested lists, a dictionary of one
long string, runs of zeros, many row groups or columns, structs, wide or empty CSV). The
tools run on it in a fresh process (``data_bombs.py``), which reports each tool's outcome and
the peaks of pyarrow's memory pool and of its resident memory: every outcome is a result or a
clear ``DataError``, and both peaks stay within a bound proportional to the limit.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("matplotlib")

from data_bombs import write_hostile  # noqa: E402
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

pytestmark = pytest.mark.slow

LIMIT = 8 << 20
"""``max_table_bytes`` of the probed library."""
POOL_BOUND = 12 * LIMIT
"""Most bytes pyarrow's pool may hold at its peak: the limit, one row group read past it, the
temporaries of decoding, and a chart's grouping of a table at the limit (arrow's hash
grouping holds about 50 bytes per row)."""
RSS_BOUND_KIB = (POOL_BOUND + (96 << 20)) >> 10
"""Most growth of the probe's resident memory: the pool's bound and drawing one chart."""
PROBE = Path(__file__).with_name("data_bombs.py")

SIZES = {"long_list": (1, 12_000_000), "list_per_row": (1, 200_000),
         "repeated_string": (1, 1_000_000), "zero_run": (1, 8_000_000),
         "many_row_groups": (1, 12_000), "many_columns": (1, 1_500), "struct": (1, 500_000),
         "wide_csv": (1, 3_000), "empty_cells_csv": (1, 2_000_000)}
"""Sizes per kind; the largest decodes to several times :data:`LIMIT` (or past a count)."""


def _probe(tmp_path: Path, kind: str, size: int) -> dict[str, object]:
    folder = tmp_path / f"{kind}-{size}"
    folder.mkdir()
    name = write_hostile(folder, kind, size)
    done = subprocess.run([sys.executable, str(PROBE), str(folder), name, str(LIMIT)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    for path in folder.rglob("*"):
        if path.is_file():
            path.unlink()
    result: dict[str, object] = json.loads(done.stdout)
    return result


@st.composite
def _hostile(draw: st.DrawFn) -> tuple[str, int]:
    kind = draw(st.sampled_from(sorted(SIZES)))
    low, high = SIZES[kind]
    return kind, draw(st.integers(low, high))


@settings(max_examples=6, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(hostile=_hostile())
@example(hostile=("long_list", 12_000_000))
@example(hostile=("list_per_row", 200_000))
@example(hostile=("repeated_string", 1_000_000))
@example(hostile=("zero_run", 8_000_000))
@example(hostile=("many_row_groups", 12_000))
@example(hostile=("many_columns", 1_500))
@example(hostile=("struct", 500_000))
@example(hostile=("wide_csv", 3_000))
@example(hostile=("empty_cells_csv", 2_000_000))
def test_hostile_files_are_refused_or_read_within_the_limit(
        tmp_path_factory: pytest.TempPathFactory, hostile: tuple[str, int]) -> None:
    """Every hostile file gets a result or a clear DataError from describe_table and chart,
    and decoding it keeps pyarrow's pool and the process's memory within the bounds."""
    kind, size = hostile
    report = _probe(tmp_path_factory.mktemp("bomb"), kind, size)
    outcomes = report["outcomes"]
    assert isinstance(outcomes, dict)
    for tool, outcome in outcomes.items():
        assert "ok" in outcome or outcome["error"] == "DataError", (kind, size, tool, outcome)
        if "error" in outcome:
            assert outcome["message"], (kind, tool)
    assert isinstance(report["pool_peak"], int) and report["pool_peak"] <= POOL_BOUND, report
    assert isinstance(report["rss_growth_kib"], int)
    assert report["rss_growth_kib"] <= RSS_BOUND_KIB, (kind, size, report)


def test_nested_columns_are_listed_not_decoded(tmp_path: Path) -> None:
    """The issue's bomb, scaled: one row holding a list of 12 million zeros (a file of under
    1 KB). describe_table names the column as nested and not read; the pool never holds it."""
    report = _probe(tmp_path, "long_list", 12_000_000)
    described = report["outcomes"]["describe_table"]  # type: ignore[index]
    assert "x (list<element: int64>): nested, not read by this tool" in described["ok"]
    assert report["pool_peak"] < 1 << 20  # type: ignore[operator]  (96 MB once decoded)
