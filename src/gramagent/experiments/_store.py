"""The results store: one SQLite file in WAL mode, written as each run ends.

One writer (the runner) owns it. Each finished run is one committed row keyed by (variant,
case, repeat): a ``kill -9`` loses at most the runs in flight, and resuming runs only the keys
that have no row. The experiment's fingerprint is kept in the file; opening the store for an
experiment whose agent, variants, dataset or evaluators changed is refused, naming what
changed. Export to Parquet or CSV with :meth:`Store.export`.
"""

from __future__ import annotations

import contextlib
import csv
import os
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from gramagent import _json as exact_json
from gramagent._install import needs_extra
from gramagent._logs import Redactor, default_redactor, env_secrets
from gramagent.errors import ExperimentError
from gramagent.experiments._experiment import canonical, changes
from gramagent.experiments._records import EvalResult, RunKey, RunRecord, ToolRecord
from gramagent.experiments._table import Columns, RunTable

if TYPE_CHECKING:
    from gramagent.experiments._cases import Case

__all__ = ["Store", "StoredCase"]

SCHEMA_VERSION = "1"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    variant TEXT NOT NULL,
    case_id TEXT NOT NULL,
    repeat INTEGER NOT NULL,
    answer TEXT,
    stop TEXT NOT NULL,
    error TEXT,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    requests INTEGER NOT NULL,
    wall_ms REAL NOT NULL,
    started REAL NOT NULL,
    tools TEXT NOT NULL,
    evaluations TEXT NOT NULL,
    estimated INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (variant, case_id, repeat)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS cases (
    case_id TEXT PRIMARY KEY,
    inputs TEXT NOT NULL,
    expected TEXT NOT NULL
) WITHOUT ROWID;
"""
_COLUMNS = ("variant", "case_id", "repeat", "answer", "stop", "error", "input_tokens",
            "output_tokens", "requests", "wall_ms", "started", "tools", "evaluations",
            "estimated")
_ESTIMATED = "ALTER TABLE runs ADD COLUMN estimated INTEGER NOT NULL DEFAULT 0"
"""What a store written before runs noted estimated tokens gets when it is run into again
(its runs: not estimated, as far as it knows)."""
_TABLE_COLUMNS = ("variant", "case_id", "repeat", "stop", "input_tokens", "output_tokens",
                  "wall_ms", "started", "estimated", "tools", "evaluations")
"""What a report reads of each run (:meth:`Store.table`)."""
_FETCH = 4096
"""Rows fetched at once when reading a table."""
# OR IGNORE: a key another runner on the same store saved first keeps that run (the first
# result of a key stands; a key is never run into the store twice)
_INSERT = (f"INSERT OR IGNORE INTO runs ({', '.join(_COLUMNS)}) "
           f"VALUES ({', '.join('?' * len(_COLUMNS))})")


class Store:
    """An experiment's results file. Use :meth:`create` to run into it, :meth:`read` to
    report from it."""

    def __init__(self, path: str | os.PathLike[str], connection: sqlite3.Connection,
                 fingerprint: str | None = None, masker: Redactor | None = None) -> None:
        self.path = str(path)
        self._db = connection
        self._fingerprint = fingerprint
        """The experiment this store was opened to run (its runs are written only while the
        store still holds that experiment)."""
        self._masker = masker if masker is not None and masker.secrets else None
        """Replaces the secrets in what a run holds before it is written (None: no secret
        known)."""

    @classmethod
    def create(cls, path: str | os.PathLike[str], *, fingerprint: Mapping[str, Any],
               settings: Mapping[str, Any], cases: Sequence[Case] = (),
               secrets: Iterable[str | None] = ()) -> Store:
        """Open (or make) the store of an experiment about to run; ``cases`` (the dataset's)
        are kept beside the runs, so exports and reports can show each run's input and
        expected values.

        Secrets are not stored: ``secrets`` (e.g. an API key given in code), the secrets added
        with ``gramagent._logs.add_secret`` (the CLI's ``--api-key``) and the values of the
        secret-named environment variables (``OPENAI_API_KEY``, ``*TOKEN*``, ...) are
        replaced by ``[REDACTED]`` wherever a run holds them (a server echoing the key in an
        answer, in tool arguments or in an error), so the store and its exports never do.

        A store that holds no run yet takes this experiment, whatever it was opened for
        before. Missing directories of ``path`` are made (``store: "results/ab.sqlite"``).

        Raises:
            ExperimentError: the file is not a store (or cannot be made), or it holds runs of
                an experiment that differs from this one (the message says what changed).
        """
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ExperimentError(f"{path}: cannot make the store's directory: "
                                  f"{exc.strerror or exc}") from None
        with _opening(path) as db, db:
            db.executescript(_SCHEMA)
            if "estimated" not in _run_columns(db):
                db.execute(_ESTIMATED)
            old = _meta(db)
            # a store without runs (a start that failed, e.g. on a mistyped evaluator) takes
            # the experiment as it is now
            if "fingerprint" in old and db.execute("SELECT 1 FROM runs LIMIT 1").fetchone():
                found = changes(orjson.loads(old["fingerprint"]), fingerprint)
                if found:
                    raise ExperimentError(
                        f"{path}: this store holds runs of a different experiment: "
                        f"{'; '.join(found)}. Use another store (e.g. --store NEW.sqlite) "
                        "or delete this one to start over")
            mine = canonical(fingerprint)
            db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", [
                ("schema", SCHEMA_VERSION), ("fingerprint", mine),
                ("settings", canonical(settings))])
            db.executemany("INSERT OR REPLACE INTO cases VALUES (?, ?, ?)", [
                (case.id, exact_json.dumps(list(case.inputs)),
                 exact_json.dumps(dict(case.expected))) for case in cases])
        masker = Redactor([*default_redactor().secrets, *env_secrets(os.environ),
                           *(s for s in secrets if s)], shapes=False)
        return cls(path, db, mine, masker)

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> Store:
        """Open an existing store for reporting.

        Raises:
            ExperimentError: no such file, or not an experiment store.
        """
        if not Path(path).is_file():
            raise ExperimentError(f"{path}: no such store")
        with _opening(path) as db:
            meta = _meta(db)
            if "settings" not in meta:
                raise ExperimentError(f"{path}: not an experiment store (no settings)")
            problem = _settings_problem(meta["settings"])
            if problem is not None:
                raise ExperimentError(f"{path}: a damaged experiment store ({problem})")
        return cls(path, db)

    def settings(self) -> dict[str, Any]:
        """Baseline, alpha, seed, variant and evaluator names (see Experiment.settings)."""
        value: dict[str, Any] = orjson.loads(_meta(self._db)["settings"])
        return value

    def cases(self) -> dict[str, StoredCase]:
        """The inputs and expected values of the cases, by id (empty for a store written
        before stores kept them)."""
        try:
            rows = self._db.execute("SELECT case_id, inputs, expected FROM cases").fetchall()
        except sqlite3.OperationalError:  # no such table: an older store
            return {}
        return {case_id: StoredCase(inputs=tuple(orjson.loads(inputs)),
                                    expected=orjson.loads(expected))
                for case_id, inputs, expected in rows}

    def done(self) -> set[RunKey]:
        """The keys that have a result."""
        rows = self._db.execute("SELECT variant, case_id, repeat FROM runs")
        return {RunKey(v, c, r) for v, c, r in rows}

    def forget_errors(self) -> int:
        """Delete the runs that ended on an error (``error:...``: a server that was down, a
        dropped connection), so that running again runs them again; returns how many."""
        with self._db:
            forgotten: int = self._db.execute(
                "DELETE FROM runs WHERE stop LIKE 'error:%'").rowcount
        return forgotten

    def write(self, records: Iterable[RunRecord]) -> int:
        """Commit finished runs in one transaction (durable once this returns); returns how
        many were new (a key that another runner of the same store saved first keeps its
        run).

        Raises:
            ExperimentError: another experiment took this store since it was opened (it had
                no runs then); nothing is written, so runs of two experiments never mix.
        """
        masker = self._masker
        rows = [_row(r) if masker is None else _row(r, masker) for r in records]
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")  # the check and the rows: one transaction
            if self._fingerprint is not None and (
                    _meta(self._db).get("fingerprint") != self._fingerprint):
                raise ExperimentError(f"{self.path}: another experiment was started on this "
                                      "store while it had no runs; its runs are kept, this "
                                      "experiment's are not written. Use another store "
                                      "(--store NEW.sqlite)")
            written: int = self._db.executemany(_INSERT, rows).rowcount
        return written

    def stop_note(self) -> dict[str, Any] | None:
        """What the runner noted when it stopped the experiment early (``--stop-when-decided``),
        or None."""
        text = _meta(self._db).get("stopped")
        note: dict[str, Any] | None = orjson.loads(text) if text else None
        return note

    def set_stop_note(self, note: Mapping[str, Any] | None) -> None:
        """Note an early stop (or, with None, that the experiment runs on)."""
        with self._db:
            if note is None:
                self._db.execute("DELETE FROM meta WHERE key = 'stopped'")
            else:
                self._db.execute("INSERT OR REPLACE INTO meta VALUES ('stopped', ?)",
                                 (orjson.dumps(dict(note)).decode(),))

    def records(self) -> list[RunRecord]:
        """Every run, ordered by (variant, case, repeat): the same store reads the same."""
        rows = self._db.execute(
            f"SELECT {', '.join(self._selected(_COLUMNS))} FROM runs "
            "ORDER BY variant, case_id, repeat")
        return [_record(row) for row in rows]

    def table(self, evaluators: Sequence[str]) -> RunTable:
        """What a report reads of every run, as columns in key order (see :class:`RunTable`):
        one pass over the rows, without the answers (read later for the runs a report
        shows) and without a record per run."""
        columns = Columns(evaluators)
        cursor = self._db.execute(
            f"SELECT {', '.join(self._selected(_TABLE_COLUMNS))} FROM runs "
            "ORDER BY variant, case_id, repeat")
        while rows := cursor.fetchmany(_FETCH):
            for (variant, case_id, repeat, stop, input_tokens, output_tokens, wall_ms, started,
                 estimated, tools, evaluations) in rows:
                columns.add(variant, case_id, repeat, stop, input_tokens, output_tokens,
                            wall_ms, started, estimated)
                columns.add_stored(tools, evaluations)
        return columns.table(lambda runs: self._answers([columns.key(i) for i in runs]))

    def _answers(self, keys: Sequence[tuple[str, str, int]]) -> list[str | None]:
        query = "SELECT answer FROM runs WHERE variant = ? AND case_id = ? AND repeat = ?"
        return [self._db.execute(query, key).fetchone()[0] for key in keys]

    def _selected(self, columns: Sequence[str]) -> list[str]:
        """``columns``, with 0 for ``estimated`` in a store written before runs noted it."""
        if "estimated" in _run_columns(self._db):
            return list(columns)
        return ["0" if c == "estimated" else c for c in columns]

    def __len__(self) -> int:
        count: int = self._db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
        return count

    def export(self, path: str | os.PathLike[str]) -> int:
        """Write every run as one flat row to ``.parquet`` or ``.csv``; returns the row count.

        Tool calls are summarized (count, errors, JSON list); each evaluator gets a
        ``score:<name>`` column. In CSV, a text cell a spreadsheet would read as a formula
        (starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return: a model's answer
        may) gets a leading ``'``, so it is shown as text, never run.

        Raises:
            ExperimentError: unknown suffix, or pyarrow is missing for Parquet.
        """
        rows = list(self._flat())
        suffix = Path(path).suffix.lower()
        if suffix == ".csv":
            columns = list(rows[0]) if rows else list(_COLUMNS)
            with open(path, "w", newline="", encoding="utf-8") as out:
                writer = csv.writer(out)
                writer.writerow(map(_defused, columns))
                writer.writerows([_defused(row[column]) for column in columns] for row in rows)
        elif suffix == ".parquet":
            try:
                import pyarrow as pa
                import pyarrow.parquet as pq
            except ImportError:
                raise ExperimentError(needs_extra("Parquet export", "experiments")) from None
            pq.write_table(pa.Table.from_pylist(rows), path)
        else:
            raise ExperimentError(f"{path}: export to .parquet or .csv")
        return len(rows)

    def _flat(self) -> Iterator[dict[str, Any]]:
        names = self.settings().get("evaluators", [])
        cases = self.cases()
        for record in self.records():
            case = cases.get(record.case_id)
            row: dict[str, Any] = {
                "variant": record.variant, "case_id": record.case_id, "repeat": record.repeat,
                "input": None if case is None else case.inputs[-1],
                "expected": None if case is None else exact_json.dumps(case.expected),
                "answer": record.answer, "stop": record.stop, "error": record.error,
                "input_tokens": record.input_tokens, "output_tokens": record.output_tokens,
                "tokens_estimated": record.estimated_tokens,
                "requests": record.requests, "wall_ms": record.wall_ms,
                "started": _iso_time(record.started), "tool_calls": len(record.tools),
                "tool_errors": record.tool_errors,
                "tools": exact_json.dumps([t.to_dict() for t in record.tools]),
            }
            for name in names:
                result = record.evaluation(name)
                row[f"score:{name}"] = None if result is None else result.score
            yield row

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredCase:
    """A case as its store keeps it."""

    inputs: tuple[str, ...]
    """The user messages, in order."""
    expected: dict[str, Any]
    """The named expected values."""


def _iso_time(epoch: float) -> str:
    """A run's start (Unix time) as ISO 8601 in UTC, to the millisecond."""
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds")


_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""How a cell starts that a spreadsheet reads as a formula (OWASP's CSV injection list)."""


def _defused(value: Any) -> Any:
    """``value``, with a leading ``'`` when it is text a spreadsheet would run as a formula."""
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return value


@contextlib.contextmanager
def _opening(path: str | os.PathLike[str]) -> Iterator[sqlite3.Connection]:
    """A connection to check a store with: closed if the check fails (a broken file is an
    ExperimentError), left open otherwise."""
    db = _connect(path)
    try:
        yield db
    except sqlite3.DatabaseError as exc:
        db.close()
        raise ExperimentError(f"{path}: not an experiment store ({exc})") from None
    except BaseException:
        db.close()
        raise


def _connect(path: str | os.PathLike[str]) -> sqlite3.Connection:
    try:
        db = sqlite3.connect(path, isolation_level="DEFERRED")
        db.execute("PRAGMA journal_mode=WAL")
        # WAL + NORMAL: a committed run survives the process being killed (not a power cut,
        # which may lose the last commits but never corrupts the file).
        db.execute("PRAGMA synchronous=NORMAL")
    except sqlite3.DatabaseError as exc:
        raise ExperimentError(f"{path}: not an experiment store ({exc})") from None
    return db


def _meta(db: sqlite3.Connection) -> dict[str, str]:
    try:
        return dict(db.execute("SELECT key, value FROM meta"))
    except sqlite3.OperationalError:  # no meta table: not a store
        return {}


def _row(r: RunRecord, masker: Redactor | None = None) -> tuple[Any, ...]:
    # exact JSON: a model's tool arguments may hold integers beyond 64 bits, a custom
    # evaluator's reason (or an error message) a lone surrogate; neither may stop a run's save
    tools: Any = [t.to_dict() for t in r.tools]
    if masker is not None and tools:
        tools = _masked_keys(masker.redact(tools), masker)
    return (r.variant, r.case_id, r.repeat, _text(r.answer, masker), r.stop,
            _text(r.error, masker), r.input_tokens, r.output_tokens, r.requests, r.wall_ms,
            r.started, exact_json.dumps(tools),
            exact_json.dumps([{**e.to_dict(), "reason": _text(e.reason, masker)}
                              for e in r.evaluations]), int(r.estimated_tokens))


def _text(value: str | None, masker: Redactor | None = None) -> str | None:
    if value is None:
        return None
    clean = exact_json.clean_text(value)
    return clean if masker is None else masker.redact_text(clean)


def _masked_keys(data: Any, masker: Redactor) -> Any:
    """``data`` with the secrets in its mapping keys replaced too (a model may send the key
    as an argument's name)."""
    if isinstance(data, dict):
        return {masker.redact_text(k) if isinstance(k, str) else k: _masked_keys(v, masker)
                for k, v in data.items()}
    if isinstance(data, list):
        return [_masked_keys(v, masker) for v in data]
    return data


def _run_columns(db: sqlite3.Connection) -> set[str]:
    return {row[1] for row in db.execute("PRAGMA table_info(runs)")}


def _record(row: tuple[Any, ...]) -> RunRecord:
    (variant, case_id, repeat, answer, stop, error, input_tokens, output_tokens, requests,
     wall_ms, started, tools, evaluations, estimated) = row
    return RunRecord(
        variant=variant, case_id=case_id, repeat=repeat, answer=answer, stop=stop, error=error,
        input_tokens=input_tokens, output_tokens=output_tokens, requests=requests,
        wall_ms=wall_ms, started=started, estimated_tokens=bool(estimated),
        tools=tuple(ToolRecord.from_dict(t) for t in exact_json.loads(tools)),
        evaluations=tuple(EvalResult.from_dict(e) for e in exact_json.loads(evaluations)))


def _settings_problem(raw: str) -> str | None:
    """What is wrong with a store's saved settings for a report, or None: a JSON object naming
    the baseline, and the variants with it if it lists them (as every runner saves them)."""
    try:
        settings = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return "its settings are not JSON"
    if not isinstance(settings, dict):
        return "its settings are not a JSON object"
    baseline, variants = settings.get("baseline"), settings.get("variants")
    if not isinstance(baseline, str):
        return f"its settings name no baseline variant (got {baseline!r})"
    if variants is not None and not (isinstance(variants, list) and baseline in variants
                                     and all(isinstance(v, str) for v in variants)):
        return f"its settings' variants are not a list of names with the baseline {baseline!r}"
    return None
