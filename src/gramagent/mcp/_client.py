"""One connection to an MCP server that never hangs: :class:`MCPClient`.

The SDK's client lives in anyio task groups that must be entered and left by one task, and
its session belongs to the event loop it was opened on. gramagent binds libraries before any
loop runs (the CLI) and runs agents on whatever loop the caller has (``run_agent_sync`` makes
a new one per run), so each :class:`MCPClient` keeps its session on one private event loop in
a daemon thread (shared by every client of the process) and hands calls over to it: a call
makes one thread hop each way (docs/performance.md, "MCP tool calls").

Never hang:

- connecting (launching the process, the protocol handshake, the first ``tools/list``) has
  ``connect_timeout`` seconds; every request has ``timeout`` seconds;
- a request that times out, or finds the server gone (exited, crashed, closed the
  connection), raises :class:`~gramagent.errors.MCPServerError` and drops the session: the
  next call starts a new one (a new process, for stdio); a stdio server that exited between
  calls (its stderr pipe reached end of file) is restarted before the next call is sent;
- the session's process is stopped the SDK's way (stdin closed, then SIGTERM, then SIGKILL,
  every wait bounded) when the client closes, when a session is dropped, and at exit;
- the server's stderr goes to the ``gramagent.mcp.server`` logger, one record a line, never
  to the terminal.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import logging
import math
import os
import threading
import weakref
from collections.abc import Awaitable, Coroutine
from dataclasses import dataclass, field
from typing import IO, Any, Final, TextIO, TypeVar

import anyio
import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared import _otel as _sdk_otel
from mcp.shared.exceptions import MCPError
from opentelemetry.trace import NoOpTracer
from pydantic import ValidationError

from gramagent._limit_values import limit_problem, refuse_problems
from gramagent._logs import SDK_LOGGER
from gramagent.errors import MCPFailureKind, MCPServerError
from gramagent.mcp._address import HttpServer, ServerAddress, StdioServer, parse_server
from gramagent.mcp._bounded import DEFAULT_MAX_MESSAGE_BYTES, BoundedTransport, oversized_message

__all__ = ["DEFAULT_CONNECT_TIMEOUT", "DEFAULT_MAX_MESSAGE_BYTES", "DEFAULT_TIMEOUT", "MCPClient"]

DEFAULT_TIMEOUT: Final = 30.0
"""Seconds one MCP request (``tools/call``, ``tools/list``) may take."""
DEFAULT_CONNECT_TIMEOUT: Final = 20.0
"""Seconds to launch or reach a server and complete the protocol handshake."""
_GRACE: Final = 5.0
"""Extra seconds the caller waits past a request's own timeout before giving up on it (the
request's timeout, on the session's loop, fires first; this only guards against a stuck
session loop)."""

log = logging.getLogger("gramagent.mcp")
server_log = logging.getLogger("gramagent.mcp.server")
# The SDK logs what a server got wrong (a line on stdout that is not JSON-RPC) with its
# traceback. Without a handler of its own, Python's last-resort handler would print that to
# stderr of every program using gramagent.mcp; an application that configures logging still
# gets the records, and `gramagent -v` shows them (gramagent._logs.configure_logging).
logging.getLogger(SDK_LOGGER).addHandler(logging.NullHandler())

T = TypeVar("T")


class _LoopThread:
    """The private event loop of every MCPClient of the process, in a daemon thread."""

    _lock = threading.Lock()
    _loop: asyncio.AbstractEventLoop | None = None
    ident: int | None = None
    """The thread's identifier, once it runs."""

    @classmethod
    def loop(cls) -> asyncio.AbstractEventLoop:
        with cls._lock:
            if cls._loop is None or cls._loop.is_closed():
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def run() -> None:
                    cls.ident = threading.get_ident()
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                threading.Thread(target=run, name="gramagent-mcp", daemon=True).start()
                ready.wait()
                cls._loop = loop
            return cls._loop

    @classmethod
    def submit(cls, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, cls.loop())


class _QuietTracer:
    """The MCP SDK's tracer, silent for the requests of :class:`MCPClient`.

    The SDK traces every request it sends (``MCP send tools/call echo``) through the process's
    tracer provider (the one ``gramagent run --otel`` sets), and a failed request's span status
    is the server's error message, which often quotes the call's arguments: gramagent's spans
    never carry arguments, results or error texts (:mod:`gramagent._runtime.tracing`). On the
    thread of the clients' loop the SDK gets a no-op tracer; anywhere else (another use of the
    SDK in the process) its own.
    """

    def __init__(self, sdk: object) -> None:
        self._sdk = sdk
        self._quiet = NoOpTracer()

    def __getattr__(self, name: str) -> Any:
        quiet = threading.get_ident() == _LoopThread.ident
        return getattr(self._quiet if quiet else self._sdk, name)


if not isinstance(getattr(_sdk_otel, "_tracer", None), _QuietTracer):
    # A Tracer by delegation; pinned by test_traces_carry_no_argument_a_server_quotes_in_its_error
    # (a change of the SDK's private name would show there).
    _sdk_otel._tracer = _QuietTracer(_sdk_otel._tracer)  # type: ignore[assignment]


@dataclass(eq=False)
class _Session:
    """One live session: the SDK client, the task holding it open, its stderr pipe."""

    ready: asyncio.Future[Client]
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    task: asyncio.Task[None] | None = None
    client: Client | None = None
    errlog: _StderrPipe | None = None
    """A stdio server's stderr pipe: its end of file says the process is gone."""
    dropped: str | None = None
    """Why the client itself ended the session (None: it did not), for the requests still
    in flight on it."""

    def alive(self) -> bool:
        """Whether the session can take a request (a stdio process that exited cannot)."""
        return (self.client is not None and not (self.task is not None and self.task.done())
                and not (self.errlog is not None and self.errlog.ended.is_set()))


class MCPClient:
    """A connection to one MCP server, usable from any thread and any event loop.

    The session opens on first use (or with :meth:`connect`) and reopens after a failure.
    Use it as a context manager, or call :meth:`close`; clients left open are closed at exit.

    Args:
        server: where the server is (see :func:`~gramagent.mcp.parse_server` for the text
            form: ``mcp:stdio:python -m mcp_server_time``, ``mcp:http://127.0.0.1:8000/mcp``).
        timeout: seconds one request may take.
        connect_timeout: seconds to launch or reach the server and shake hands.
        max_message_bytes: the most bytes one reply of a server over HTTP may have (a JSON
            body, or an event of an event stream); a longer one fails its request at once,
            and the session is kept. (A stdio server is a process of this machine: its
            replies are not bounded.)

    Raises:
        ConfigurationError: a timeout that is not a positive finite number, a
            ``max_message_bytes`` that is not a positive whole number, or ``server`` names no
            server (see :func:`~gramagent.mcp.parse_server`).
    """

    def __init__(self, server: str | ServerAddress | list[str], *,
                 timeout: float = DEFAULT_TIMEOUT,
                 connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        refuse_problems("MCPClient", (
            limit_problem("timeout", timeout, optional=False),
            limit_problem("connect_timeout", connect_timeout, optional=False),
            limit_problem("max_message_bytes", max_message_bytes, whole=True, optional=False)))
        self.server: ServerAddress = parse_server(server)
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.max_message_bytes = max_message_bytes
        self._session: _Session | None = None
        self._starting: asyncio.Lock | None = None
        self._closed = False
        self.server_name: str | None = None
        """The name the server gave in the handshake (None before it or if it gave none)."""
        _open_clients.add(self)

    def __repr__(self) -> str:
        return f"MCPClient({str(self.server)!r})"

    # -- public API: sync and async, from any loop -------------------------------------------

    def connect(self) -> None:
        """Open the session now (it opens on first use otherwise).

        Raises:
            MCPServerError: the server could not be launched or reached, or did not complete
                the handshake within ``connect_timeout``.
        """
        self._wait(self._ensure(), self.connect_timeout + _GRACE)

    def list_tools(self) -> list[types.Tool]:
        """Every tool the server offers (all pages of ``tools/list``).

        Raises:
            MCPServerError: the server failed, went away or did not answer in time.
        """
        return self._wait(self._list_tools(), self.connect_timeout + self.timeout + _GRACE)

    async def alist_tools(self) -> list[types.Tool]:
        """:meth:`list_tools` for async code."""
        return await self._await(self._list_tools(), self.connect_timeout + self.timeout + _GRACE)

    async def call_tool(self, name: str, arguments: dict[str, Any], *,
                        timeout: float | None = None) -> types.CallToolResult:
        """Call a tool of the server and return its result (``isError`` results included).

        Args:
            name: the tool's name on the server.
            arguments: its arguments.
            timeout: seconds for this call (default: the client's ``timeout``).

        Raises:
            MCPServerError: the server failed, went away or did not answer in time (the
                session is dropped and the next call starts a new one), or rejected the
                request itself (an unknown tool, invalid parameters).
        """
        seconds = self.timeout if timeout is None else timeout
        return await self._await(self._call_tool(name, arguments, seconds),
                                 self.connect_timeout + seconds + _GRACE)

    def call_tool_sync(self, name: str, arguments: dict[str, Any], *,
                       timeout: float | None = None) -> types.CallToolResult:
        """:meth:`call_tool` for code without an event loop."""
        seconds = self.timeout if timeout is None else timeout
        return self._wait(self._call_tool(name, arguments, seconds),
                          self.connect_timeout + seconds + _GRACE)

    def close(self) -> None:
        """End the session (stopping the server process, for stdio); idempotent."""
        self._closed = True
        _open_clients.discard(self)
        if self._session is None:
            return
        with contextlib.suppress(Exception):
            # Bounded: the SDK's stdio shutdown waits at most a few seconds.
            _LoopThread.submit(self._drop_and_wait()).result(timeout=15)

    async def aclose(self) -> None:
        """:meth:`close` for async code."""
        self._closed = True
        _open_clients.discard(self)
        if self._session is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.wrap_future(
                    _LoopThread.submit(self._drop_and_wait())), 15)

    def __enter__(self) -> MCPClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> MCPClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- hand-over to the private loop -------------------------------------------------------

    def _wait(self, coro: Coroutine[Any, Any, T], limit: float) -> T:
        future = _LoopThread.submit(coro)
        try:
            return future.result(timeout=limit)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise self._error("did not answer", "timeout") from None

    async def _await(self, coro: Coroutine[Any, Any, T], limit: float) -> T:
        future = asyncio.wrap_future(_LoopThread.submit(coro))
        try:
            return await asyncio.wait_for(future, limit)
        except TimeoutError:
            raise self._error("did not answer", "timeout") from None

    # -- on the private loop -----------------------------------------------------------------

    async def _ensure(self) -> Client:
        if self._closed:
            raise self._error("is closed", "closed")
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            session = self._session
            if session is not None and session.alive():
                assert session.client is not None
                return session.client
            if session is not None:
                await self._drop(session, "its process had exited")
            session = _Session(ready=asyncio.get_running_loop().create_future())
            self._session = session
            session.task = asyncio.get_running_loop().create_task(self._hold(session))
            try:
                client = await session.ready
            except BaseException:
                await self._drop(session, "it did not complete the handshake")
                raise
            session.client = client
            return client

    async def _hold(self, session: _Session) -> None:
        """Open the SDK client, publish it, keep it open until the scope is cancelled."""
        errlog = _StderrPipe(str(self.server)) if isinstance(self.server, StdioServer) else None
        session.errlog = errlog
        failure: BaseException | None = None
        try:
            with session.scope:
                session.scope.deadline = anyio.current_time() + self.connect_timeout
                async with contextlib.AsyncExitStack() as stack:
                    transport = await self._transport(stack, errlog)
                    client = await stack.enter_async_context(
                        # No SDK timeout: _request times each request (the SDK's timeout error
                        # has a code a server may send too).
                        Client(transport, read_timeout_seconds=None, cache=None))
                    session.scope.deadline = math.inf
                    if errlog is not None:
                        errlog.close()  # the child has its copy: its exit ends the pipe
                    info = client.server_info
                    self.server_name = info.name if info is not None else None
                    session.ready.set_result(client)
                    await anyio.sleep_forever()
        except Exception as exc:
            failure = exc
        finally:
            if errlog is not None:
                errlog.close()
        if not session.ready.done():
            if failure is None:  # the scope's deadline cancelled the handshake
                failure = self._error(f"did not complete the MCP handshake within "
                                      f"{self.connect_timeout:g} s", "timeout")
            session.ready.set_exception(self._translate(failure, starting=True))
        elif failure is not None:
            log.info("MCP session with %s ended: %s", self.server, _describe(failure))

    async def _transport(self, stack: contextlib.AsyncExitStack, errlog: _StderrPipe | None
                         ) -> Any:
        server = self.server
        if isinstance(server, StdioServer):
            assert errlog is not None
            params = StdioServerParameters(
                command=server.command, args=list(server.args),
                env=dict(server.env) if server.env is not None else None, cwd=server.cwd,
                # A byte that is not UTF-8 becomes U+FFFD ("strict" stopped the SDK's reader:
                # every later request waited for its timeout).
                encoding_error_handler="replace")
            return stdio_client(params, errlog=errlog.writer)
        assert isinstance(server, HttpServer)
        http = await stack.enter_async_context(httpx2.AsyncClient(
            headers=dict(server.headers) if server.headers else None,
            # The SDK's own client's timeouts: a server may hold an event stream open.
            timeout=httpx2.Timeout(self.timeout, read=max(self.timeout, 300.0)),
            transport=BoundedTransport(self.max_message_bytes)))
        return streamable_http_client(server.url, http_client=http,
                                      max_sse_event_size=self.max_message_bytes)

    async def _list_tools(self) -> list[types.Tool]:
        client = await self._ensure()
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(1000):  # a server that pages forever cannot hang us either
            page = await self._request(client, client.list_tools(cursor=cursor), self.timeout)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                return tools
        raise self._error("returned more than 1000 pages of tools", "protocol")

    async def _call_tool(self, name: str, arguments: dict[str, Any], timeout: float
                         ) -> types.CallToolResult:
        client = await self._ensure()
        return await self._request(
            client, client.call_tool(name, arguments), timeout)

    async def _request(self, client: Client, request: Awaitable[T], timeout: float) -> T:
        session = self._session
        try:
            async with asyncio.timeout(timeout):
                return await request
        except MCPError as exc:
            if _connection_closed(exc):
                if session is not None and session.dropped is not None:
                    raise self._error(f"was stopped by this client: {session.dropped}",
                                      "closed") from None
                await self._drop_soon(session, "it closed the connection")
                raise self._error("closed the connection (it exited or crashed)", "closed"
                                  ) from None
            if oversized_message(exc.error.message):  # the SDK's error; the session is fine
                raise self._error(f"sent a reply of more than {self.max_message_bytes} bytes "
                                  f"(max_message_bytes); it was not read further", "protocol"
                                  ) from None
            # The server answered with a JSON-RPC error (whatever its code: -32000 and -32001
            # are in the range JSON-RPC leaves to servers): the session is fine.
            raise self._error(f"rejected the request: {_one_line(exc.error.message)}",
                              "protocol") from None
        except ValidationError as exc:
            # It answered, but not with an MCP result: the session is fine.
            raise self._translate(exc, starting=False) from None
        except TimeoutError:
            # The server may be stuck on it: the next call starts afresh.
            await self._drop_soon(session, f"another request to it did not answer within "
                                           f"{timeout:g} s")
            raise self._error(f"did not answer within {timeout:g} s", "timeout") from None
        except asyncio.CancelledError:
            # Abandoned by the caller (its own timeout, a cancelled run): the server may be
            # stuck on it, so the next call starts afresh.
            await self._drop_soon(session, "another request to it was abandoned (a timeout "
                                           "or a cancelled run)")
            raise
        except Exception as exc:
            await self._drop_soon(session, f"another request to it failed ({_describe(exc)})")
            raise self._translate(exc, starting=False) from None

    async def _drop_soon(self, session: _Session | None, why: str) -> None:
        """End ``session`` (if it is still the client's) without waiting; ``why``: what the
        requests still in flight on it are told."""
        if session is not None and self._session is session:
            self._session = None
            session.dropped = why
            session.scope.cancel()

    async def _drop(self, session: _Session, why: str = "the client was closed") -> None:
        if self._session is session:
            self._session = None
        if session.dropped is None:
            session.dropped = why
        session.scope.cancel()
        if session.task is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(session.task), 15)

    async def _drop_and_wait(self) -> None:
        session = self._session
        if session is not None:
            await self._drop(session)

    # -- errors ------------------------------------------------------------------------------

    def _error(self, what: str, kind: MCPFailureKind) -> MCPServerError:
        return MCPServerError(f"MCP server {self.server} {what}", server=str(self.server),
                              kind=kind)

    def _translate(self, exc: BaseException, *, starting: bool) -> MCPServerError:
        if isinstance(exc, MCPServerError):
            return exc
        if isinstance(exc, BaseExceptionGroup):
            inner = exc.exceptions[0] if exc.exceptions else exc
            return self._translate(inner, starting=starting)
        if isinstance(exc, MCPError):
            if _connection_closed(exc):
                return self._error("closed the connection "
                                   + ("during the handshake (did it start? see its log with -v)"
                                      if starting else "(it exited or crashed)"), "closed")
            return self._error(f"answered with an error: {_one_line(exc.error.message)}",
                               "protocol")
        if isinstance(exc, ValidationError):
            return self._error(f"answered a result that is not MCP: {_invalid(exc)}",
                               "protocol")
        if isinstance(exc, FileNotFoundError | PermissionError):
            return self._error(f"could not be launched: {exc}", "start")
        if isinstance(exc, httpx2.ConnectError | ConnectionError):
            return self._error(f"could not be reached: {_describe(exc)}", "start")
        if isinstance(exc, httpx2.HTTPError | OSError | anyio.BrokenResourceError
                      | anyio.ClosedResourceError | anyio.EndOfStream):
            return self._error(f"went away: {_describe(exc)}", "closed")
        return self._error(f"failed: {_describe(exc)}", "protocol")


def _describe(exc: BaseException) -> str:
    text = _one_line(str(exc))
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


_CLOSED_MESSAGE: Final = "Connection closed"
"""The message of the SDK's own CONNECTION_CLOSED error (its dispatcher's, when the transport
ends or a write finds it closed)."""


def _connection_closed(exc: MCPError) -> bool:
    """Whether ``exc`` is the SDK saying the connection is gone, not a server's error response.

    The SDK reports a closed connection as an error of code -32000, which a server may send as
    well (JSON-RPC leaves -32000 to -32099 to servers): only the SDK's own, with its message
    and no data, is taken for one. (The SDK's other code, -32001 for a request timeout, never
    comes from it here: requests are timed by :meth:`MCPClient._request`.)
    """
    return (exc.code == types.CONNECTION_CLOSED and exc.error.message == _CLOSED_MESSAGE
            and exc.error.data is None)


_MAX_DETAIL: Final = 500
"""Longest piece of a server's text an error quotes."""


def _one_line(text: str) -> str:
    """``text`` (a server's message, an exception's) on one line, at most 500 characters."""
    line = " ".join(text.split())
    return line if len(line) <= _MAX_DETAIL else line[:_MAX_DETAIL] + "..."


def _invalid(exc: ValidationError) -> str:
    """What a result that is not MCP got wrong: its first errors, each where and what."""
    problems = [f"{'.'.join(map(str, e['loc'])) or 'result'}: {e['msg']}"
                for e in exc.errors()[:3]]
    more = exc.error_count() - len(problems)
    return _one_line("; ".join(problems) + (f" (and {more} more)" if more > 0 else ""))


class _StderrPipe:
    """A pipe the server process writes its stderr to; a thread logs each line."""

    def __init__(self, server: str) -> None:
        read_fd, write_fd = os.pipe()
        self.writer: TextIO = os.fdopen(write_fd, "w", encoding="utf-8", errors="replace")
        reader = os.fdopen(read_fd, "r", encoding="utf-8", errors="replace")
        self.ended = threading.Event()
        """Set at end of file: every process holding the write end (the server) is gone."""
        self._thread = threading.Thread(target=self._pump, args=(reader, server),
                                        name="gramagent-mcp-stderr", daemon=True)
        self._thread.start()

    def _pump(self, reader: IO[str], server: str) -> None:
        try:
            with reader:
                for line in reader:
                    text = line.rstrip()
                    if text and server_log.isEnabledFor(logging.INFO):
                        server_log.info("[%s] %s", server, text)
        finally:
            self.ended.set()

    def close(self) -> None:
        # The child keeps its own copy of the write end: the reader ends when the child does.
        with contextlib.suppress(OSError):
            self.writer.close()


_open_clients: weakref.WeakSet[MCPClient] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    """Stop every server process still open when the interpreter exits."""
    for client in list(_open_clients):
        with contextlib.suppress(Exception):
            client.close()
