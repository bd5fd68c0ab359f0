"""Durable conversations: :class:`SessionStore` (SQLite) and :class:`StoredSession`.

A session is a named conversation kept in a SQLite database, by default
``$XDG_DATA_HOME/gramagent/sessions.sqlite3`` (``~/.local/share/gramagent/...``; set
``GRAMAGENT_DATA_DIR`` to move it). Each turn run through :meth:`StoredSession.run` starts from
what the store holds and appends the turn's messages in one transaction when it ends (or fails
with a conversation to keep, or is interrupted), so a crash loses at most the turn in flight.

Turns of one session are serialized, across tasks, threads and processes: a turn holds the
session's lock (an ``asyncio.Lock`` of its event loop, and an exclusive ``flock`` on a lock file
beside the database, released by the system if the process dies) from loading the
conversation to saving it. Turns of different sessions run side by side. One store may be used
from several event loops at once (threads each running ``asyncio.run``).

A store that SQLite can open but that is damaged (unreadable pages, rows another program wrote
or left without their session, tables of another shape, a lock folder that is a file) or that
cannot be written (a full disk) raises :class:`~gramagent.errors.ConfigurationError` naming
the file and what is wrong; what was stored before stays as it was.

Tables::

    sessions(name PRIMARY KEY, conversation_id, agent, created, updated)
    messages(session, seq, body JSON)   -- one row per message, seq from 0
    pauses(session PRIMARY KEY, messages, response JSON)   -- a turn paused for approvals
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import shlex
import sqlite3
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from gramagent import _json as exact_json
from gramagent._logs import Redactor, default_redactor
from gramagent._messages import Conversation, message_from_dict
from gramagent._runtime.approval import (
    ApprovalRequest,
    Decision,
    check_pending,
    check_still_waiting,
    waiting_requests,
)
from gramagent._runtime.library import BoundAgent
from gramagent._runtime.loop import resume_agent, run_agent
from gramagent._runtime.results import AgentResponse
from gramagent._spec.model import Agent
from gramagent.errors import ConfigurationError, RunError, ValidationError

__all__ = ["SessionInfo", "SessionStore", "SessionTurn", "StoredSession", "default_store_path"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    name TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL,
    agent TEXT,
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    session TEXT NOT NULL REFERENCES sessions(name) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (session, seq)
);
CREATE TABLE IF NOT EXISTS pauses (
    session TEXT PRIMARY KEY REFERENCES sessions(name) ON DELETE CASCADE,
    messages INTEGER NOT NULL,
    response TEXT NOT NULL
);
"""
_COLUMNS = {
    "sessions": ("name", "conversation_id", "agent", "created", "updated"),
    "messages": ("session", "seq", "body"),
    "pauses": ("session", "messages", "response"),
}
"""The columns of each table, in order: a table of another shape is not a session store."""

# pauses: the response a session's last turn paused with (for approvals), all but its
# conversation, which is the session's first ``messages`` messages: a resumed turn continues
# that run, its limits holding across the pause.


def default_store_path() -> Path:
    """``$GRAMAGENT_DATA_DIR/sessions.sqlite3``, else under ``$XDG_DATA_HOME/gramagent``
    (default ``~/.local/share/gramagent``)."""
    explicit = os.environ.get("GRAMAGENT_DATA_DIR")
    if explicit:
        return Path(explicit) / "sessions.sqlite3"
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "gramagent" / "sessions.sqlite3"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SessionInfo:
    """A stored session, as :meth:`SessionStore.list` describes it."""

    name: str
    agent: str | None
    """The name of the agent of its last turn."""
    messages: int
    created: float
    """Seconds since the epoch."""
    updated: float


class SessionStore:
    """The sessions of one SQLite database.

    Args:
        path: The database file (created with its folder); default :func:`default_store_path`.

    Raises:
        ConfigurationError: the database cannot be opened or is not a session store.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_store_path()
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop,
                                               dict[str, asyncio.Lock]] = (
            weakref.WeakKeyDictionary())
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigurationError(f"cannot open the session store {self.path}: {exc}"
                                     ) from exc
        with self._db() as db:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    db.execute(statement)
            self._check_tables(db)

    def __repr__(self) -> str:
        return f"SessionStore({str(self.path)!r})"

    @contextlib.contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        """A connection in one transaction (committed on success), closed after.

        Raises:
            ConfigurationError: SQLite failed (a damaged file, a full disk, ...); nothing of
                the transaction was written.
        """
        try:
            db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        except sqlite3.Error as exc:
            raise self._failure(exc) from None
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            db.execute("PRAGMA foreign_keys=ON")
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        except sqlite3.Error as exc:
            raise self._failure(exc) from None
        except UnicodeDecodeError as exc:  # a text cell whose bytes are not UTF-8
            raise ConfigurationError(
                f"session store {self.path} is damaged (a text value is not UTF-8: {exc.reason} "
                f"at byte {exc.start}); move it aside to start a new one") from None
        finally:
            db.close()

    def _failure(self, exc: sqlite3.Error) -> ConfigurationError:
        """The error a user sees for ``exc``, naming the store and what is wrong."""
        code = getattr(exc, "sqlite_errorcode", 0) & 0xFF  # the primary result code
        if code == sqlite3.SQLITE_FULL:
            return ConfigurationError(
                f"session store {self.path}: the disk is full ({exc}); nothing of this "
                "turn was saved, what was stored before is kept")
        if isinstance(exc, sqlite3.IntegrityError):
            return ConfigurationError(
                f"session store {self.path} holds rows that do not fit together ({exc}): it "
                "was changed by another program or damaged")
        if code == sqlite3.SQLITE_IOERR:
            return ConfigurationError(
                f"session store {self.path}: cannot write to it ({exc}: a full disk, a file "
                "size limit or a failing device); nothing of this turn was saved, what was "
                "stored before is kept")
        if code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
            return ConfigurationError(
                f"session store {self.path} is damaged ({exc}); move it aside to start a new "
                "one (sqlite3's .recover may save its readable rows)")
        return ConfigurationError(f"session store {self.path}: {exc}")

    def _check_tables(self, db: sqlite3.Connection) -> None:
        """Refuse a database whose tables are not a session store's."""
        for table, expected in _COLUMNS.items():
            found = tuple(row[1] for row in db.execute(f"PRAGMA table_info({table})"))
            if found != expected:
                raise ConfigurationError(
                    f"{self.path} is not a gramagent session store: its table {table!r} has "
                    f"the columns {', '.join(found)} where a session store has "
                    f"{', '.join(expected)}")

    def open(self, name: str) -> StoredSession:
        """The session ``name`` (created empty on its first saved turn).

        Raises:
            ConfigurationError: an empty name.
        """
        if not isinstance(name, str) or not name.strip():
            raise ConfigurationError("a session needs a name")
        return StoredSession(self, name)

    def load(self, name: str) -> Conversation | None:
        """The stored conversation of ``name``, or None when there is no such session.

        Raises:
            ConfigurationError: a stored message cannot be read back (the file was damaged or
                written by something else); the error names the session and the message.
        """
        with self._db() as db:
            row = db.execute("SELECT conversation_id FROM sessions WHERE name = ?",
                             (name,)).fetchone()
            if row is None:
                return None
            bodies = db.execute("SELECT seq, body FROM messages WHERE session = ? ORDER BY seq",
                                (name,)).fetchall()
        if not isinstance(row[0], str):
            raise self._damaged(name, f"the conversation id of session {name!r} is "
                                      f"{_typename(row[0])}, not text")
        messages = []
        for expected, (seq, body) in enumerate(bodies):
            if seq != expected:
                raise self._damaged(name, f"message {expected} of session {name!r} is missing "
                                          f"(the next is {seq!r})")
            try:
                messages.append(message_from_dict(orjson.loads(body)))
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                raise self._damaged(name, f"message {seq} of session {name!r} cannot be read: "
                                          f"{type(exc).__name__}: {exc}") from None
        return Conversation(messages, id=row[0])

    def _damaged(self, name: str, what: str) -> ConfigurationError:
        """A damaged session: ``what`` names it and what is wrong."""
        return ConfigurationError(
            f"session store {self.path}: {what} (damaged, or written by another program); "
            f"`gramagent sessions delete {shlex.quote(name)}` removes it")

    def save(self, name: str, conversation: Conversation, *, agent: str | None = None,
             stored: int = 0, paused: AgentResponse | None = None,
             secrets: Iterable[str | None] = ()) -> None:
        """Append the messages of ``conversation`` after the first ``stored`` ones, in one
        transaction (creating the session if needed). ``paused``: the response the turn
        paused with (its conversation ``conversation``), kept until the next save.

        Secrets are not stored: ``secrets`` (e.g. the run's API key), the secrets added with
        ``gramagent._logs.add_secret`` and the secret-named environment variables are
        replaced by ``[REDACTED]`` wherever they appear (a server echoing the key in an
        answer or in tool arguments).
        """
        now = time.time()
        masker = Redactor([*default_redactor().secrets, *(s for s in secrets if s)],
                          shapes=False)
        rows = [(name, seq, orjson.dumps(_masked(m.to_dict(), masker)).decode())
                for seq, m in enumerate(conversation.messages) if seq >= stored]
        with self._db() as db:
            (held,) = db.execute("SELECT COUNT(*) FROM messages WHERE session = ?",
                                 (name,)).fetchone()
            if held != stored:
                # another program wrote (or left) rows of this name: appending after them
                # would interleave two conversations
                raise self._damaged(name, f"session {name!r} holds {held} messages where this "
                                          f"turn started from {stored}; nothing of the turn "
                                          "was saved")
            db.execute(
                "INSERT INTO sessions (name, conversation_id, agent, created, updated) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET "
                "updated = excluded.updated, agent = COALESCE(excluded.agent, agent)",
                (name, conversation.id, agent, now, now))
            db.executemany("INSERT INTO messages (session, seq, body) VALUES (?, ?, ?)", rows)
            db.execute("DELETE FROM pauses WHERE session = ?", (name,))
            if paused is not None and paused.paused:
                db.execute("INSERT INTO pauses (session, messages, response) VALUES (?, ?, ?)",
                           (name, len(conversation), _pause_text(paused, masker)))

    def load_pause(self, name: str, conversation: Conversation) -> AgentResponse | None:
        """The response the last turn of ``name`` paused with, on ``conversation`` (the
        session as loaded), or None when it did not pause there."""
        with self._db() as db:
            row = db.execute("SELECT messages, response FROM pauses WHERE session = ?",
                             (name,)).fetchone()
        if row is None or row[0] != len(conversation):
            return None
        try:
            # The standard library's reader: what _pause_text writes (integers beyond 64 bits,
            # escaped lone surrogates) reads back as it was.
            data = json.loads(row[1])
            response = AgentResponse.from_dict({**data, "context": []})
            check_pending(response.pending_approvals,
                          (call.id for call in conversation.unanswered_calls()))
        except (ValueError, TypeError, RecursionError, ValidationError):
            return None  # unreadable: the turn resumes from the conversation alone
        return dataclasses.replace(response, context=conversation)

    def list(self) -> list[SessionInfo]:
        """Every session, most recently updated first.

        Raises:
            ConfigurationError: a session's row holds values of the wrong type (written by
                another program); the error names it.
        """
        with self._db() as db:
            rows = db.execute(
                "SELECT s.name, s.agent, s.created, s.updated, "
                "(SELECT COUNT(*) FROM messages m WHERE m.session = s.name) "
                "FROM sessions s ORDER BY s.updated DESC").fetchall()
        sessions = []
        for name, agent, created, updated, count in rows:
            if not isinstance(name, str):
                raise ConfigurationError(f"session store {self.path}: a session is named "
                                         f"{_typename(name)}, not text: the store is damaged")
            for field, value in (("created", created), ("updated", updated)):
                if isinstance(value, bool) or not isinstance(value, int | float):
                    raise self._damaged(name, f"the {field} time of session {name!r} is "
                                              f"{_typename(value)}")
            if agent is not None and not isinstance(agent, str):
                raise self._damaged(name, f"the agent of session {name!r} is "
                                          f"{_typename(agent)}")
            sessions.append(SessionInfo(name=name, agent=agent, created=float(created),
                                        updated=float(updated), messages=count))
        return sessions

    def delete(self, name: str) -> bool:
        """Delete ``name`` and its messages (rows left without their session too); whether
        it existed."""
        with self._db() as db:
            found = db.execute("DELETE FROM sessions WHERE name = ?", (name,)).rowcount > 0
            strays = db.execute("DELETE FROM messages WHERE session = ?", (name,)).rowcount
            db.execute("DELETE FROM pauses WHERE session = ?", (name,))
            return found or strays > 0

    @contextlib.asynccontextmanager
    async def lock(self, name: str) -> AsyncIterator[None]:
        """Hold the lock of session ``name`` (see the module docs).

        Raises:
            ConfigurationError: the lock file cannot be made (its folder is a file, or is not
                writable).
        """
        locks = self._locks.setdefault(asyncio.get_running_loop(), {})
        async with locks.setdefault(name, asyncio.Lock()):
            handle = self._lock_file(name)
            try:
                # Polled, not a blocking flock in a thread: a wait that is cancelled (a
                # timeout, Ctrl-C) must not leave a thread behind still waiting for the lock.
                wait = 0.01
                while True:
                    try:
                        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        await asyncio.sleep(wait)
                        wait = min(wait * 2, 0.25)
                yield
            finally:
                handle.close()  # releases the flock

    def _lock_file(self, name: str) -> BinaryIO:
        """The open lock file of session ``name``, in the folder beside the database."""
        digest = hashlib.sha256(name.encode()).hexdigest()[:32]
        folder = self.path.with_name(self.path.name + ".locks")
        try:
            folder.mkdir(exist_ok=True)
            return open(folder / f"{digest}.lock", "a+b")  # noqa: SIM115 (held while locked)
        except OSError as exc:
            raise ConfigurationError(
                f"session store {self.path}: cannot make the lock file of session {name!r} "
                f"in {folder}: {exc.strerror or exc}") from None


def _typename(value: object) -> str:
    return "empty" if value is None else f"a value of type {type(value).__name__}"


def _pause_text(paused: AgentResponse, masker: Redactor) -> str:
    """The JSON kept of a paused response: all but its conversation (the session's messages).

    Written whatever its tools returned (``tool_invocations[].result`` holds their return
    values): integers beyond 64 bits and lone surrogates as JSON can hold them, a value JSON
    has no form for as its text (as ``gramagent run --json`` prints it); where even that fails
    (NaN beside a big integer, nesting past the recursion limit), every result as its text.
    """
    data = paused.to_dict()
    del data["context"]
    try:
        return exact_json.dumps(_masked(data, masker), default=str)
    except (ValueError, RecursionError):
        for invocation in data["tool_invocations"]:
            invocation["result"] = None if invocation["result"] is None else _text(
                invocation["result"])
        return exact_json.dumps(_masked(data, masker), default=str)


def _masked(data: object, masker: Redactor) -> object:
    """``data`` with ``masker``'s secrets replaced (itself when there are none)."""
    return masker.redact(data) if masker.secrets else data


def _text(value: object) -> str:
    try:
        return str(value)
    except (ValueError, RecursionError):  # a container nested past the recursion limit
        return f"<{type(value).__name__}>"


class StoredSession:
    """A named conversation in a :class:`SessionStore`; :meth:`run` continues it."""

    def __init__(self, store: SessionStore, name: str) -> None:
        self.store = store
        self.name = name
        self.last_read: Conversation | None = None
        """The conversation :attr:`pending_approvals` was last read from (or the last turn
        run or resumed through this object ended with): the calls a person's decisions are
        made on, checked when :meth:`resume` holds the session (None: not read yet)."""

    def __repr__(self) -> str:
        return f"StoredSession({self.name!r}, {self.store!r})"

    @property
    def context(self) -> Conversation:
        """The conversation as stored now (empty for a new session)."""
        return self.store.load(self.name) or Conversation()

    @contextlib.asynccontextmanager
    async def turn(self, agent: str | None = None) -> AsyncIterator[SessionTurn]:
        """Hold the session for one turn: the stored conversation to start from (and the
        response it paused with, if it did), and :meth:`SessionTurn.save` for what the turn
        adds (see :meth:`run`, which uses it)."""
        async with self.store.lock(self.name):
            context = self.store.load(self.name)
            paused = None if context is None else self.store.load_pause(self.name, context)
            yield SessionTurn(self, context, agent, paused)

    @property
    def pending_approvals(self) -> tuple[ApprovalRequest, ...]:
        """The tool calls the stored conversation waits for a person to approve (empty
        unless its last turn paused): decide on them with :meth:`resume`."""
        self.last_read = context = self.context
        return waiting_requests(context)

    async def resume(self, agent: Agent | BoundAgent, decisions: Mapping[str, Decision],
                     **options: Any) -> AgentResponse:
        """Continue the session's paused turn: :func:`~gramagent.resume_agent` on the stored
        conversation, whose new messages are saved when it ends (as :meth:`run` saves).

        Raises:
            ValidationError: another process decided on these calls since they were read
                (the stored conversation went on), or made the session again meanwhile (the
                calls waiting are not those read); nothing is run.
            Everything resume_agent raises.
        """
        def start(turn: SessionTurn) -> Awaitable[AgentResponse]:
            context = turn.context or Conversation()
            check_still_waiting(decisions, context, self.name, self.last_read)
            return resume_agent(agent, turn.paused or context, decisions, **options)

        return await self._turn(agent, start, options)

    async def run(self, agent: Agent | BoundAgent, user_input: str, **options: Any
                  ) -> AgentResponse:
        """One turn of the session: :func:`~gramagent.run_agent` from the stored conversation,
        whose new messages are saved when it ends.

        Takes ``run_agent``'s options except ``context``. A run that fails keeps what it
        carries (``exc.context``: the user message and completed tool results); a cancelled
        one keeps nothing of its turn.

        Raises:
            Everything run_agent raises.
        """
        return await self._turn(agent, lambda turn: run_agent(
            agent, user_input, context=turn.context, **options), options)

    async def _turn(self, agent: Agent | BoundAgent,
                    start: Callable[[SessionTurn], Awaitable[AgentResponse]],
                    options: Mapping[str, Any]) -> AgentResponse:
        """One turn: ``start`` from the stored session, what it adds saved at its end."""
        if "context" in options:
            raise TypeError("a session supplies the context; do not pass context=")
        name = agent.agent.name if isinstance(agent, BoundAgent) else agent.name
        async with self.turn(name) as turn:
            api_key = options.get("api_key")
            turn.secrets = (api_key,) if isinstance(api_key, str) and api_key else ()
            try:
                response = await start(turn)
            except RunError as exc:
                if exc.context is not None:
                    turn.save(exc.context)
                raise
            turn.save(response.context, response)
        self.last_read = response.context  # its pending calls are the next ones decided on
        return response


class SessionTurn:
    """One turn of a :class:`StoredSession`, holding its lock (from :meth:`StoredSession.turn`)."""

    def __init__(self, session: StoredSession, context: Conversation | None,
                 agent: str | None, paused: AgentResponse | None = None) -> None:
        self.session = session
        self.context = context
        """The stored conversation to continue (None for a new session)."""
        self.paused = paused
        """The response :attr:`context` paused with (None: it did not pause): resuming from
        it continues that run, whose limits hold across the pause."""
        self._agent = agent
        self._stored = 0 if context is None else len(context)
        self.secrets: tuple[str, ...] = ()
        """Secrets of this turn (its API key) kept out of what is stored."""

    def save(self, conversation: Conversation, response: AgentResponse | None = None
             ) -> None:
        """Store the messages ``conversation`` has beyond :attr:`context` (once per turn);
        ``response``: the one the turn ended with, kept if it paused."""
        self.session.store.save(self.session.name, conversation, agent=self._agent,
                                stored=self._stored, paused=response, secrets=self.secrets)
        self._stored = len(conversation)
