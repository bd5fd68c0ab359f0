"""The error taxonomy of gramagent.

This is a leaf module: it imports nothing else from gramagent, so every layer (the spec
language included) can raise these errors without import cycles.

```
GramagentError
├── SpecError                 a gram file, signature or spec object is invalid (positioned)
│   └── ExperimentError       an experiment file or its dataset is invalid (positioned)
├── SchemaError               a JSON Schema uses a keyword gramagent cannot express
├── ValidationError           bad input to a run (e.g. an empty user message)
├── ConfigurationError        missing API key, unknown provider, bad option (before any request)
├── ToolError                 binding failed: missing or mismatched tool implementations
├── SandboxError              a sandboxed code call failed as a whole (timeout, crash, ...)
├── MCPServerError            an MCP server could not be started, reached or understood
└── RunError                  a run stopped; carries the conversation and usage so far
    ├── ModelAPIError         transport or HTTP failure, after retries
    │   └── AuthenticationError   the server refused the API key (HTTP 401/403); also a
    │                             ConfigurationError, and never retried
    ├── LimitExceeded         an iteration, time, token or call limit was hit
    └── ApprovalError         the approve callback raised (its exception is __cause__)
```

Errors that happen *inside* a tool call (bad JSON, unknown tool, schema violation, an
exception or timeout in the tool) are not raised: they become error results that the model
sees, so it can recover.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeAlias

if TYPE_CHECKING:  # types only: this leaf imports nothing of gramagent when it runs
    from gramagent._messages import Conversation, Usage

__all__ = [
    "ApprovalError",
    "AuthenticationError",
    "ConfigurationError",
    "Diagnostic",
    "ExperimentError",
    "GramagentError",
    "LimitExceeded",
    "MCPFailureKind",
    "MCPServerError",
    "ModelAPIError",
    "RunError",
    "SandboxError",
    "SandboxErrorKind",
    "SchemaError",
    "SpecError",
    "ToolError",
    "ValidationError",
]


class GramagentError(Exception):
    """Base class of every error gramagent raises."""


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One problem at a place in a source text. ``line`` and ``column`` are 1-based."""

    message: str
    """What is wrong, and what was expected."""
    file: str | None = None
    """The file name, or None for text that did not come from a file."""
    line: int | None = None
    """1-based line, or None when the problem has no position (e.g. a whole-spec rule)."""
    column: int | None = None
    """1-based column."""

    def __str__(self) -> str:
        where = [self.file or "<string>"]
        if self.line is not None:
            where.append(str(self.line))
            if self.column is not None:
                where.append(str(self.column))
        return f"{':'.join(where)}: {self.message}"


class SpecError(GramagentError):
    """A gram text, type signature or spec object is invalid.

    Carries every problem found (not only the first) as :class:`Diagnostic` objects; ``str()``
    gives one ``file:line:col: message`` line per problem.
    """

    def __init__(self, diagnostics: Sequence[Diagnostic] | str) -> None:
        if isinstance(diagnostics, str):
            diagnostics = [Diagnostic(diagnostics)]
        self.diagnostics: tuple[Diagnostic, ...] = tuple(diagnostics)
        super().__init__("\n".join(str(d) for d in self.diagnostics))

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.diagnostics,))


class ExperimentError(SpecError):
    """An experiment cannot run: its file, its dataset (``file:line: message`` per bad row,
    every one reported at once) or its store (changed agent, variants or dataset)."""

    def __init__(self, diagnostics: Sequence[Diagnostic] | str) -> None:
        super().__init__(diagnostics)
        # a problem with no place of its own (the message names the file) reads as itself
        self.args = ("\n".join(d.message if d.file is None and d.line is None else str(d)
                               for d in self.diagnostics),)


class SchemaError(GramagentError):
    """A JSON Schema uses something gramagent cannot express as a gram signature.

    ``keyword`` names the unsupported keyword and ``path`` where it stands (JSON-pointer style).
    """

    def __init__(self, message: str, *, keyword: str | None = None, path: str = "") -> None:
        self.keyword = keyword
        self.path = path
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (type(self), self.args, {"keyword": self.keyword, "path": self.path}))


class ValidationError(GramagentError):
    """Input to a run is invalid (for example an empty user message)."""


class ConfigurationError(GramagentError):
    """The run cannot start: a missing API key, an unknown provider, a bad option."""


class ToolError(GramagentError):
    """Binding an agent's tool specs to implementations failed.

    ``problems`` lists every missing or mismatched tool, not only the first; ``hint``, if
    any, says what to do about them (a last line of the message).
    """

    def __init__(self, problems: Sequence[str] | str, *, hint: str | None = None) -> None:
        if isinstance(problems, str):
            problems = [problems]
        self.problems: tuple[str, ...] = tuple(problems)
        self.hint = hint
        if len(self.problems) == 1:
            message = self.problems[0]
        else:
            message = f"{len(self.problems)} tool binding problems:\n" + "\n".join(
                f"  - {p}" for p in self.problems
            )
        super().__init__(message if hint is None else f"{message}\n{hint}")

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (type(self), (self.problems,), {"hint": self.hint}))


SandboxErrorKind: TypeAlias = Literal["timeout", "crashed", "unavailable", "protocol", "closed"]
"""How a sandbox call failed (:attr:`SandboxError.kind`)."""


class SandboxError(GramagentError):
    """A sandbox call failed as a whole (not the user's code, whose errors are results).

    ``kind`` says how: ``timeout`` (wall clock; the worker was killed), ``crashed`` (the worker
    died, e.g. by a signal), ``unavailable`` (the worker could not start or is not isolated
    enough), ``protocol`` (the worker sent something malformed; it was killed) or ``closed``.
    ``state_lost`` is true when the session's variables are gone.
    """

    def __init__(self, message: str, *, kind: SandboxErrorKind, state_lost: bool = False
                 ) -> None:
        self.kind = kind
        self.state_lost = state_lost
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        state = {"kind": self.kind, "state_lost": self.state_lost}
        return (_rebuild, (type(self), self.args, state))


MCPFailureKind: TypeAlias = Literal["start", "timeout", "closed", "protocol"]
"""How talking to an MCP server failed (:attr:`MCPServerError.kind`)."""


class MCPServerError(GramagentError):
    """An MCP server could not be started, did not answer in time, went away or broke protocol.

    Raised when a library is built from a server (connecting, listing its tools); during a
    run the same failure becomes an error result the model sees. ``server`` says which server
    (its command or URL), ``kind`` how it failed: ``start`` (could not be launched or reached),
    ``timeout`` (no answer within the configured time), ``closed`` (it exited or closed the
    connection) or ``protocol`` (it answered something that is not MCP).
    """

    def __init__(self, message: str, *, server: str = "", kind: MCPFailureKind = "protocol"
                 ) -> None:
        self.server = server
        self.kind = kind
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (type(self), self.args, {"server": self.server, "kind": self.kind}))


class RunError(GramagentError):
    """A run stopped before the model answered.

    ``context`` holds the conversation up to the failure (pass it back to ``run_agent`` to
    continue), ``usage`` the tokens spent so far; nothing of the run is lost.
    """

    def __init__(self, message: str, *, context: Conversation | None = None,
                 usage: Usage | None = None) -> None:
        self.context = context
        self.usage = usage
        super().__init__(message)

    def _state(self) -> dict[str, object]:
        return {"context": self.context, "usage": self.usage}

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (type(self), self.args, self._state()))


class ModelAPIError(RunError):
    """The model server could not be reached or answered with an error, after retries.

    ``status`` is the last answer's HTTP status (None when none came: 429 when the server was
    rate limiting), ``retry_after`` the seconds that answer asked to wait before another try
    (its ``Retry-After`` or ``retry-after-ms`` header, read on answers worth retrying: 408,
    409, 429, 5xx), None when it asked for none.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        body: str | None = None,
        model: str | None = None,
        context: Conversation | None = None,
        usage: Usage | None = None,
        retry_after: float | None = None,
    ) -> None:
        self.status = status
        self.body = body
        self.model = model
        self.retry_after = retry_after
        super().__init__(message, context=context, usage=usage)

    def _state(self) -> dict[str, object]:
        return {**super()._state(), "status": self.status, "body": self.body, "model": self.model,
                "retry_after": self.retry_after}


class AuthenticationError(ModelAPIError, ConfigurationError):
    """The model server refused the API key (HTTP 401, or 403 for a key without access).

    A configuration problem (the key is missing, wrong or revoked), so it is a
    :class:`ConfigurationError` and is not retried; raised during a run, it is also a
    :class:`ModelAPIError` carrying the conversation so far.
    """


class LimitExceeded(RunError):
    """A run limit was hit. ``limit`` names it, ``value`` is its setting, ``observed`` the count."""

    def __init__(
        self,
        message: str,
        *,
        limit: str,
        value: float | None = None,
        observed: float | None = None,
        context: Conversation | None = None,
        usage: Usage | None = None,
    ) -> None:
        self.limit = limit
        self.value = value
        self.observed = observed
        super().__init__(message, context=context, usage=usage)

    def _state(self) -> dict[str, object]:
        return {**super()._state(), "limit": self.limit, "value": self.value,
                "observed": self.observed}


class ApprovalError(RunError):
    """The ``approve`` callback of a run raised; its exception is ``__cause__``.

    ``context`` ends with the model's calls of that turn, none of them run yet (decisions the
    callback gave before it raised are not kept): continue with
    :func:`~gramagent.resume_agent`, giving a decision for each of those calls (``True`` for
    one that needs no approval runs it as it would have run).
    """


def _rebuild(cls: type[Exception], args: tuple[object, ...], state: dict[str, object]) -> Exception:
    """Unpickle an error whose constructor takes keyword-only state."""
    return cls(*args, **state)

