"""The runs of an experiment as columns: what a report reads, and nothing else.

A report needs, per run, its key, how it stopped, its tokens and time, how many tool calls it
made (and which failed), and each evaluator's score; the answers only of the few runs it
shows as disagreements. :class:`RunTable` holds those as NumPy arrays in key order (variant,
case, repeat), read from a store in one pass over its rows (:meth:`Store.table
<gramagent.experiments.Store.table>`) or made from records (:meth:`RunTable.of_records`),
so a report of 100,000 runs builds no object per run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from gramagent import _json as exact_json
from gramagent.experiments._records import RunRecord

__all__ = ["Columns", "RunTable"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunTable:
    """Runs as columns, in key order; every array has one item per run."""

    variant: np.ndarray
    """Variant names (objects: ``str``)."""
    case_id: np.ndarray
    """Case ids (objects: ``str``)."""
    repeat: np.ndarray
    stop: np.ndarray
    """How each run stopped (objects: ``str``)."""
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    wall_ms: np.ndarray
    started: np.ndarray
    estimated: np.ndarray
    """Whether the run's tokens were estimated (a server reported no usage), as bools."""
    tool_calls: np.ndarray
    """Tool calls per run."""
    tool_failures: tuple[tuple[int, str], ...]
    """(run, ``tool:error_type``) of every failed tool call, in order."""
    scores: dict[str, np.ndarray]
    """Per evaluator, each run's score (0 where the evaluator left none)."""
    kinds: dict[str, str]
    """Per evaluator, ``rate`` when every verdict it gave is pass/fail, else ``mean``."""
    answers: Callable[[Sequence[int]], list[str | None]]
    """The answers of the runs at these positions (read only for the runs a report shows)."""

    def __len__(self) -> int:
        return int(self.repeat.size)

    @property
    def errored(self) -> np.ndarray:
        """Which runs ended on an error (``error:...``)."""
        return np.array([s.startswith("error:") for s in self.stop.tolist()], dtype=bool)

    @classmethod
    def of_records(cls, records: Iterable[RunRecord], evaluators: Sequence[str]) -> RunTable:
        """The table of ``records`` (sorted by key here) for these evaluators."""
        ordered = sorted(records, key=lambda r: (r.variant, r.case_id, r.repeat))
        columns = Columns(evaluators)
        for r in ordered:
            columns.add(r.variant, r.case_id, r.repeat, r.stop, r.input_tokens,
                        r.output_tokens, r.wall_ms, r.started, r.estimated_tokens)
            columns.add_tools((t.name, t.status, t.error_type) for t in r.tools)
            columns.add_evaluations((e.name, e.score, e.passed) for e in r.evaluations)
        answers = [r.answer for r in ordered]
        return columns.table(lambda rows: [answers[i] for i in rows])


class Columns:
    """Collects the columns of a :class:`RunTable` run by run (in key order)."""

    __slots__ = ("_evaluators", "_failures", "_given", "_keys", "_passfail", "_scores",
                 "_tools")

    def __init__(self, evaluators: Sequence[str]) -> None:
        self._evaluators = list(evaluators)
        self._keys: list[list[Any]] = [[] for _ in range(9)]
        self._tools: list[int] = []
        self._failures: list[tuple[int, str]] = []
        self._scores: dict[str, list[float]] = {name: [] for name in self._evaluators}
        self._given = dict.fromkeys(self._evaluators, 0)
        """How many runs each evaluator gave a verdict."""
        self._passfail = dict.fromkeys(self._evaluators, 0)
        """How many of those verdicts were pass/fail."""

    def add(self, variant: str, case_id: str, repeat: int, stop: str, input_tokens: int,
            output_tokens: int, wall_ms: float, started: float, estimated: bool) -> None:
        """Start a run: its key and scalar fields (then its tools and evaluations)."""
        for column, value in zip(self._keys, (variant, case_id, repeat, stop, input_tokens,
                                              output_tokens, wall_ms, started, bool(estimated)),
                                 strict=True):
            column.append(value)

    def key(self, run: int) -> tuple[str, str, int]:
        """The (variant, case, repeat) of the ``run``-th run added."""
        variant, case_id, repeat = self._keys[:3]
        return variant[run], case_id[run], repeat[run]

    def add_tools(self, tools: Iterable[tuple[str, str, str | None]]) -> None:
        """The current run's tool calls as (name, status, error type)."""
        run = len(self._tools)
        calls = 0
        for name, status, error_type in tools:
            calls += 1
            if status != "ok":
                self._failures.append((run, f"{name}:{error_type}"))
        self._tools.append(calls)

    def add_evaluations(self, results: Iterable[tuple[str, float, bool | None]]) -> None:
        """The current run's evaluations as (name, score, passed); the first of a name
        counts."""
        seen: set[str] = set()
        for name, score, passed in results:
            if name in seen or name not in self._scores:
                continue
            seen.add(name)
            self._scores[name].append(float(score))
            self._given[name] += 1
            self._passfail[name] += passed is not None
        for name in self._evaluators:
            if name not in seen:
                self._scores[name].append(0.0)

    def add_stored(self, tools: str, evaluations: str) -> None:
        """The current run's tools and evaluations as the store keeps them (JSON lists)."""
        self.add_tools((t["name"], t["status"], t.get("error_type")) for t in _loads(tools))
        self.add_evaluations((e["name"], e["score"], e.get("passed"))
                             for e in _loads(evaluations))

    def table(self, answers: Callable[[Sequence[int]], list[str | None]]) -> RunTable:
        """The columns collected, with where the answers are read from."""
        (variant, case_id, repeat, stop, input_tokens, output_tokens, wall_ms, started,
         estimated) = self._keys
        return RunTable(
            variant=_objects(variant), case_id=_objects(case_id),
            repeat=np.array(repeat, dtype=np.int64), stop=_objects(stop),
            input_tokens=np.array(input_tokens, dtype=np.int64),
            output_tokens=np.array(output_tokens, dtype=np.int64),
            wall_ms=np.array(wall_ms, dtype=float), started=np.array(started, dtype=float),
            estimated=np.array(estimated, dtype=bool),
            tool_calls=np.array(self._tools, dtype=np.int64),
            tool_failures=tuple(self._failures),
            scores={name: np.array(values, dtype=float) for name, values in self._scores.items()},
            kinds={name: "rate" if self._given[name] and self._passfail[name] == self._given[name]
                   else "mean" for name in self._evaluators},
            answers=answers)


def _objects(values: list[Any]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _loads(text: str) -> Any:
    """A stored JSON column: orjson, else the exact decoder (integers beyond 64 bits in tool
    arguments, which orjson reads as floats: the names and statuses read here are the same)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return exact_json.loads(text)
