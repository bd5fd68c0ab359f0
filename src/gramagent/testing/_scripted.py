"""A scripted OpenAI-compatible HTTP server, for tests, docs and benchmarks.

:class:`ScriptedServer` listens on 127.0.0.1 (a free port by default) in a background thread
and answers the endpoint of every registered wire format (``/v1/chat/completions``, plain and
SSE; ``/v1/responses``; ``/v1/completions``, plain and SSE: see
``gramagent._models.registry.WIRE_FORMATS``) and ``GET /v1/models`` from a script: a list of
turns consumed in order, whatever the endpoint, or a callable ``(path, body) -> turn``. It
also answers llama.cpp's ``POST /apply-template`` (no turn consumed): ``{"prompt": ...}``,
each message as ``role: content`` on a line, then ``assistant:``. ::

    from gramagent.testing import ScriptedServer, call, reply

    with ScriptedServer([call("sayHello", {"name": "Alice"}), reply("Hello, Alice!")]) as srv:
        ...  # point a model at srv.base_url; srv.requests records what it was sent

Turns are built with :func:`reply`, :func:`call`, :func:`calls`, :func:`error`, :func:`drop`,
:func:`completion` and :func:`http_response` (a verbatim answer), each taking ``delay=``
seconds. A turn is rendered in the form the request asks for, by the renderer its wire format
registered: ``tool_calls`` (or legacy
``function_call``, first call only, when the request has ``functions``), Responses ``output``
items, SSE chunks for ``stream: true``, the constrained ``{"name", "arguments"}`` /
``{"text"}`` content when the request carries gramagent's ``tool_step`` response format, plain
text for ``/v1/completions``. Usage figures are estimated from the sizes (about four
characters a token) unless a turn gives its own. An exhausted script answers HTTP 500
``script exhausted``; a malformed request gets a 400 JSON error and never stops the server.

The server runs one asyncio event loop (HTTP/1.1 keep-alive, parsed by h11), so delays hold no
threads and a hundred concurrent clients are served without strain. A JSON script file and
``python -m gramagent.testing --script FILE [--port N] [--loop]`` serve the same from
the command line (the base URL is the first line printed).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

import h11
import orjson

from gramagent._messages import ToolCall, Usage
from gramagent._models._wire import RenderedReply, arguments_text, error_reply
from gramagent._models.base import ModelTurn
from gramagent._models.registry import WIRE_FORMATS, load_object

__all__ = [
    "RecordedRequest",
    "ScriptCall",
    "ScriptCalls",
    "ScriptCompletion",
    "ScriptDrop",
    "ScriptError",
    "ScriptHTTP",
    "ScriptReply",
    "ScriptTurn",
    "ScriptedServer",
    "call",
    "calls",
    "completion",
    "drop",
    "error",
    "http_response",
    "load_script",
    "main",
    "reply",
    "turn_from_dict",
]

UsageLike: TypeAlias = Usage | Mapping[str, int] | tuple[int, int] | None


# -- turns -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ScriptReply:
    """A text answer."""

    text: str
    usage: Usage | None = None
    delay: float = 0.0
    raw: bool = False
    """Send ``text`` verbatim as content even when the request asks for the constrained
    ``tool_step`` format (to script malformed constrained output)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ScriptCall:
    """One tool call; also a turn of its own (a single-call turn)."""

    name: str
    arguments: str
    """The arguments as JSON text (kept verbatim, so it may be malformed on purpose)."""
    id: str | None = None
    """The call id; None lets the server number it."""
    delay: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ScriptCalls:
    """One turn with several (parallel) calls, optionally with text beside them."""

    calls: tuple[ScriptCall, ...]
    text: str | None = None
    usage: Usage | None = None
    delay: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ScriptError:
    """An HTTP error answer, OpenAI-shaped: ``{"error": {"message", "type", ...}}``."""

    status: int
    message: str = "scripted error"
    retry_after: float | str | None = None
    """Sent as the ``Retry-After`` header (seconds, or an HTTP date string)."""
    delay: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ScriptDrop:
    """Close the connection without answering."""

    delay: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ScriptCompletion:
    """Raw text for ``/v1/completions`` (read as a text reply on the chat endpoints)."""

    text: str
    usage: Usage | None = None
    delay: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ScriptHTTP:
    """A verbatim HTTP answer (to script what no well-behaved server sends)."""

    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()
    delay: float = 0.0


ScriptTurn: TypeAlias = (
    ScriptReply | ScriptCall | ScriptCalls | ScriptError | ScriptDrop | ScriptCompletion
    | ScriptHTTP
)
ScriptFunction: TypeAlias = Callable[[str, Any], ScriptTurn | None]


def _usage(value: UsageLike) -> Usage | None:
    if value is None or isinstance(value, Usage):
        return value
    if isinstance(value, tuple):
        return Usage(input_tokens=value[0], output_tokens=value[1], requests=1)
    return Usage(
        input_tokens=int(value.get("input_tokens", value.get("prompt_tokens", 0))),
        output_tokens=int(value.get("output_tokens", value.get("completion_tokens", 0))),
        requests=1,
    )


def reply(text: str, usage: UsageLike = None, *, delay: float = 0.0,
          raw: bool = False) -> ScriptReply:
    """A text answer. ``usage`` is a Usage, ``{"input_tokens", "output_tokens"}`` or a pair."""
    return ScriptReply(text=text, usage=_usage(usage), delay=delay, raw=raw)


def call(name: str, arguments: Mapping[str, Any] | str | None = None, id: str | None = None,
         *, delay: float = 0.0) -> ScriptCall:
    """A call to ``name``; a dict is encoded to JSON, a string is sent verbatim."""
    return ScriptCall(name=name, arguments=arguments_text(arguments), id=id, delay=delay)


def calls(*items: ScriptCall, text: str | None = None, usage: UsageLike = None,
          delay: float = 0.0) -> ScriptCalls:
    """One turn holding every call in ``items`` (parallel calls)."""
    return ScriptCalls(calls=items, text=text, usage=_usage(usage), delay=delay)


def error(status: int, message: str = "scripted error", retry_after: float | str | None = None,
          *, delay: float = 0.0) -> ScriptError:
    """An HTTP error answer with an optional ``Retry-After``."""
    return ScriptError(status=status, message=message, retry_after=retry_after, delay=delay)


def drop(*, delay: float = 0.0) -> ScriptDrop:
    """Close the connection without answering (after ``delay``)."""
    return ScriptDrop(delay=delay)


def completion(text: str, usage: UsageLike = None, *, delay: float = 0.0) -> ScriptCompletion:
    """Raw completion text for ``/v1/completions``."""
    return ScriptCompletion(text=text, usage=_usage(usage), delay=delay)


def http_response(body: bytes | str | Mapping[str, Any] | Sequence[Any] = b"", status: int = 200,
                  *, content_type: str = "application/json",
                  headers: Mapping[str, str] | None = None,
                  delay: float = 0.0) -> ScriptHTTP:
    """Answer with exactly this status and body (JSON-encoded when not text or bytes), e.g.
    a 200 whose body is not JSON, or a reply missing its ``choices``."""
    if isinstance(body, str):
        data = body.encode()
    elif isinstance(body, bytes):
        data = body
    else:
        data = orjson.dumps(body)
    return ScriptHTTP(status=status, body=data, content_type=content_type,
                      headers=tuple((headers or {}).items()), delay=delay)


# -- the JSON script file --------------------------------------------------------------------


def turn_from_dict(data: Mapping[str, Any]) -> ScriptTurn:
    """One turn from its JSON form (one of the keys ``reply``, ``call``, ``calls``, ``error``,
    ``drop``, ``completion``, plus optional ``delay`` and ``usage``)::

        {"reply": "Hello!", "usage": {"input_tokens": 20, "output_tokens": 3}}
        {"call": "sayHello", "arguments": {"name": "Alice"}, "id": "call_1"}
        {"calls": [{"name": "a", "arguments": {}}, {"name": "b", "arguments": "{bad"}]}
        {"error": 429, "message": "slow down", "retry_after": 1}
        {"drop": true, "delay": 0.5}
        {"completion": "<|channel|>final<|message|>Hi<|return|>"}

    Raises:
        ValueError: no or several turn keys, or a field of the wrong type.
    """
    kinds = [k for k in ("reply", "call", "calls", "error", "drop", "completion") if k in data]
    if len(kinds) != 1:
        raise ValueError(
            "a turn needs exactly one of reply, call, calls, error, drop, completion; "
            f"got {sorted(data)}"
        )
    kind = kinds[0]
    delay = float(data.get("delay", 0.0))
    usage = _usage(data.get("usage"))
    if kind == "reply":
        return ScriptReply(text=str(data["reply"]), usage=usage, delay=delay,
                           raw=bool(data.get("raw", False)))
    if kind == "call":
        return call(str(data["call"]), data.get("arguments"), data.get("id"), delay=delay)
    if kind == "calls":
        items = data["calls"]
        if not isinstance(items, list):
            raise ValueError("'calls' must be a list of {name, arguments, id}")
        return ScriptCalls(
            calls=tuple(call(str(c["name"]), c.get("arguments"), c.get("id")) for c in items),
            text=data.get("text"),
            usage=usage,
            delay=delay,
        )
    if kind == "error":
        return ScriptError(status=int(data["error"]),
                           message=str(data.get("message", "scripted error")),
                           retry_after=data.get("retry_after"), delay=delay)
    if kind == "drop":
        return ScriptDrop(delay=delay)
    return ScriptCompletion(text=str(data["completion"]), usage=usage, delay=delay)


def load_script(source: str | Path | Sequence[Any] | Mapping[str, Any]) -> tuple[
    list[ScriptTurn], bool
]:
    """Read a script: a path to a JSON file, or its decoded content. Returns ``(turns, loop)``.

    The content is a list of turn objects (see :func:`turn_from_dict`) or
    ``{"turns": [...], "loop": false}``.

    Raises:
        ValueError: naming the turn (by index) that cannot be read.
    """
    data: Any = source
    if isinstance(source, (str, Path)):
        data = orjson.loads(Path(source).read_bytes())
    loop = False
    if isinstance(data, Mapping):
        loop = bool(data.get("loop", False))
        data = data.get("turns", [])
    if not isinstance(data, Sequence) or isinstance(data, (str, bytes)):
        raise ValueError("a script is a list of turns or {\"turns\": [...]}")
    turns: list[ScriptTurn] = []
    for index, item in enumerate(data):
        if not isinstance(item, Mapping):
            raise ValueError(f"turn {index}: expected an object, got {type(item).__name__}")
        try:
            turns.append(turn_from_dict(item))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"turn {index}: {exc}") from exc
    return turns, loop


# -- the server ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """A request the server received on a model endpoint."""

    path: str
    headers: dict[str, str]
    """Header names in lower case."""
    body: Any
    """The decoded JSON body (the raw text when it was not JSON)."""


@dataclass(slots=True)
class _Answer:
    status: int
    body: bytes
    content_type: bytes = b"application/json"
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    drop: bool = False


Renderer: TypeAlias = Callable[..., RenderedReply]
"""A wire format's ``render_reply(turn, request, *, model, number, verbatim)``."""


_APPLY_TEMPLATE = "/apply-template"


def _apply_template(body: dict[str, Any]) -> _Answer:
    """llama.cpp's ``/apply-template``: the prompt a chat body's messages make (no turn)."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return _json_error(400, "the request body must hold a list of messages")
    lines = [f"{m.get('role')}: {m.get('content')}" for m in messages if isinstance(m, dict)]
    return _Answer(200, orjson.dumps({"prompt": "\n".join([*lines, "assistant:"])}))


def _renderers() -> dict[str, Renderer]:
    """``/v1`` + endpoint -> renderer, for every registered wire format."""
    return {"/v1" + w.endpoint: load_object(w.renderer) for w in WIRE_FORMATS.values()}


def _json_error(status: int, message: str, headers: Iterable[tuple[bytes, bytes]] = ()) -> _Answer:
    return _answer(error_reply(status, message), headers)


def _answer(reply: RenderedReply, headers: Iterable[tuple[bytes, bytes]] = ()) -> _Answer:
    return _Answer(reply.status, reply.body, content_type=reply.content_type.encode(),
                   headers=list(headers))


class ScriptedServer:
    """A real HTTP server on 127.0.0.1 answering from a script (see the module docs).

    Args:
        script: Turns consumed in order by every model endpoint, or a callable
            ``(path, body) -> turn`` (returning None means exhausted).
        host: Interface to listen on.
        port: Port; 0 picks a free one.
        loop: Replay the script from the start when it runs out (for benchmarks).
        models: Model ids listed by ``GET /v1/models``.
        record: Keep every request in :attr:`requests` (turn off for long benchmark runs).
        event_pause: Seconds between the events of a streamed answer (each is sent on its
            own), to show text arriving piece by piece; a long pause holds a stream open
            mid-answer. 0 sends a stream in one write.
    """

    def __init__(
        self,
        script: Sequence[ScriptTurn] | ScriptFunction = (),
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        loop: bool = False,
        models: Sequence[str] = ("scripted",),
        record: bool = True,
        event_pause: float = 0.0,
    ) -> None:
        self._function: ScriptFunction | None = script if callable(script) else None
        self._turns: list[ScriptTurn] = [] if callable(script) else list(script)
        self._index = 0
        self._lock = threading.Lock()
        self._repeat = loop
        self._record = record
        self.event_pause = event_pause
        self.host = host
        self.port = port
        self.models = tuple(models)
        self.requests: list[RecordedRequest] = []
        """Every request received on a model endpoint, in arrival order."""
        self.connections = 0
        """TCP connections accepted so far (to check keep-alive reuse)."""
        self._counter = 0
        self._renderers = _renderers()
        self._thread: threading.Thread | None = None
        self._aio: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    # -- lifecycle --------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``."""
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> ScriptedServer:
        """Start serving in a background thread; returns once the port is bound."""
        if self._thread is not None:
            return self
        self._thread = threading.Thread(target=self._serve, name="scripted-server", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._startup_error is not None:
            self._thread.join()
            self._thread = None
            raise OSError(f"scripted server could not listen on {self.host}:{self.port}: "
                          f"{self._startup_error}") from self._startup_error
        return self

    def close(self) -> None:
        """Stop serving and close every connection."""
        thread, aio = self._thread, self._aio
        if thread is None or aio is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop already stopped
            aio.call_soon_threadsafe(aio.stop)
        thread.join()
        self._thread = None

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def add(self, *turns: ScriptTurn) -> None:
        """Append turns to a list script (also while serving)."""
        with self._lock:
            self._turns.extend(turns)

    @property
    def remaining(self) -> int:
        """Turns not consumed yet (0 for a callable script)."""
        return max(0, len(self._turns) - self._index)

    def _serve(self) -> None:
        aio = asyncio.new_event_loop()
        asyncio.set_event_loop(aio)
        self._aio = aio
        try:
            server = aio.run_until_complete(
                asyncio.start_server(self._connection, self.host, self.port, backlog=2048)
            )
        except OSError as exc:
            self._startup_error = exc
            self._ready.set()
            aio.close()
            return
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            aio.run_forever()
        finally:
            server.close()
            for writer in list(self._writers):
                writer.close()
            tasks = asyncio.all_tasks(aio)
            for task in tasks:
                task.cancel()
            if tasks:
                aio.run_until_complete(asyncio.wait(tasks, timeout=5.0))
            aio.run_until_complete(server.wait_closed())
            aio.close()

    # -- HTTP -------------------------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        self.connections += 1
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                request, body = await self._read(conn, reader, writer)
                if request is None:
                    break
                answer = await self._answer(request, body)
                if answer.drop:
                    break
                if self.event_pause > 0 and answer.content_type == b"text/event-stream":
                    await self._write_paced(conn, writer, answer)
                else:
                    self._write(conn, writer, answer)
                await writer.drain()
                if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    break
                conn.start_next_cycle()
        except h11.RemoteProtocolError as exc:
            with contextlib.suppress(ConnectionError):
                answer = _json_error(400, f"malformed HTTP request: {exc}")
                writer.write(
                    b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n"
                    b"connection: close\r\ncontent-length: "
                    + str(len(answer.body)).encode() + b"\r\n\r\n" + answer.body
                )
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, h11.LocalProtocolError):
            pass
        except asyncio.CancelledError:
            # The server is shutting down. End quietly: on Python 3.11 the streams machinery
            # logs a cancelled connection handler as an unhandled error.
            pass
        finally:
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(ConnectionError, asyncio.CancelledError):
                await writer.wait_closed()

    @staticmethod
    async def _read(conn: h11.Connection, reader: asyncio.StreamReader,
                    writer: asyncio.StreamWriter) -> tuple[h11.Request | None, bytes]:
        request: h11.Request | None = None
        body = bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                if conn.they_are_waiting_for_100_continue:  # e.g. curl with a large body
                    writer.write(conn.send(h11.InformationalResponse(status_code=100,
                                                                      headers=[])))
                conn.receive_data(await reader.read(65536))
            elif isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                return request, bytes(body)
            elif isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                return None, b""

    @staticmethod
    def _write(conn: h11.Connection, writer: asyncio.StreamWriter, answer: _Answer) -> None:
        ScriptedServer._write_head(conn, writer, answer)
        writer.write(conn.send(h11.Data(data=answer.body)))
        writer.write(conn.send(h11.EndOfMessage()))

    @staticmethod
    def _write_head(conn: h11.Connection, writer: asyncio.StreamWriter, answer: _Answer
                    ) -> None:
        headers = [(b"content-type", answer.content_type), *answer.headers]
        if answer.content_type != b"text/event-stream":
            headers.append((b"content-length", str(len(answer.body)).encode()))
        else:
            headers.append((b"cache-control", b"no-cache"))
        writer.write(conn.send(h11.Response(status_code=answer.status, headers=headers)))

    async def _write_paced(self, conn: h11.Connection, writer: asyncio.StreamWriter,
                           answer: _Answer) -> None:
        """A stream's events one by one, :attr:`event_pause` apart."""
        self._write_head(conn, writer, answer)
        events = [e + b"\n\n" for e in answer.body.split(b"\n\n") if e]
        for n, event in enumerate(events):
            if n:
                await asyncio.sleep(self.event_pause)
            writer.write(conn.send(h11.Data(data=event)))
            await writer.drain()
        writer.write(conn.send(h11.EndOfMessage()))

    async def _answer(self, request: h11.Request, raw: bytes) -> _Answer:
        path = request.target.decode("latin-1").split("?", 1)[0]
        method = request.method.decode("latin-1")
        if path == "/v1/models":
            if method != "GET":
                return _json_error(405, f"{method} is not allowed on {path}; use GET")
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "gramagent"}
                    for m in self.models]
            return _Answer(200, orjson.dumps({"object": "list", "data": data}))
        if path not in self._renderers and path != _APPLY_TEMPLATE:
            return _json_error(404, f"no such endpoint: {path} (this scripted server serves "
                                    f"{', '.join(self._renderers)}, /v1/models and "
                                    f"{_APPLY_TEMPLATE})")
        if method != "POST":
            return _json_error(405, f"{method} is not allowed on {path}; use POST")
        try:
            body: Any = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            self._keep(path, request, raw.decode("utf-8", errors="replace"))
            return _json_error(400, f"the request body is not JSON: {exc}")
        self._keep(path, request, body)
        if not isinstance(body, dict):
            return _json_error(400, "the request body must be a JSON object")
        if path == _APPLY_TEMPLATE:
            return _apply_template(body)
        try:
            turn = self._next_turn(path, body)
        except Exception as exc:  # a script function failing is the script's bug, not ours
            return _json_error(500, f"the script function raised {type(exc).__name__}: {exc}")
        if turn is None:
            return _json_error(500, "script exhausted")
        if turn.delay > 0:
            await asyncio.sleep(turn.delay)
        try:
            return self._render(path, body, raw, turn)
        except Exception as exc:  # a malformed request must not stop the server
            return _json_error(400, f"cannot answer this request: {type(exc).__name__}: {exc}")

    def _keep(self, path: str, request: h11.Request, body: Any) -> None:
        if self._record:
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in request.headers}
            self.requests.append(RecordedRequest(path=path, headers=headers, body=body))

    def _next_turn(self, path: str, body: Any) -> ScriptTurn | None:
        if self._function is not None:
            return self._function(path, body)
        with self._lock:
            if self._index >= len(self._turns):
                if not (self._repeat and self._turns):
                    return None
                self._index = 0
            turn = self._turns[self._index]
            self._index += 1
            return turn

    # -- rendering --------------------------------------------------------------------------

    def _render(self, path: str, body: dict[str, Any], raw: bytes, turn: ScriptTurn) -> _Answer:
        if isinstance(turn, ScriptDrop):
            return _Answer(0, b"", drop=True)
        if isinstance(turn, ScriptHTTP):
            return _Answer(turn.status, turn.body, content_type=turn.content_type.encode(),
                           headers=[(k.encode(), v.encode()) for k, v in turn.headers])
        if isinstance(turn, ScriptError):
            headers = []
            if turn.retry_after is not None:
                value = turn.retry_after
                if isinstance(value, float) and value.is_integer():
                    value = int(value)
                headers.append((b"retry-after", str(value).encode()))
            return _json_error(turn.status, turn.message, headers)
        self._counter += 1
        asked = body.get("model")
        model = asked if isinstance(asked, str) else self.models[0]
        verbatim = isinstance(turn, ScriptCompletion) or (isinstance(turn, ScriptReply)
                                                          and turn.raw)
        render = self._renderers[path]
        return _answer(render(model_turn(turn, self._counter, len(raw)), body, model=model,
                              number=self._counter, verbatim=verbatim))


def model_turn(turn: ScriptReply | ScriptCompletion | ScriptCall | ScriptCalls, number: int,
               size: int) -> ModelTurn:
    """The normalized turn a text or call turn of a script stands for: its calls numbered
    ``call_{number}_{k}`` where it gives no id, its usage its own or estimated from ``size``
    (the request's length in characters) and what it writes."""
    if isinstance(turn, ScriptReply | ScriptCompletion):
        return ModelTurn(text=turn.text, usage=turn.usage or _estimate(size, turn.text),
                         finish_reason="stop")
    if isinstance(turn, ScriptCall):
        turn = ScriptCalls(calls=(turn,), delay=turn.delay)
    tool_calls = tuple(
        ToolCall(id=c.id or f"call_{number}_{k}", name=c.name, arguments=c.arguments)
        for k, c in enumerate(turn.calls)
    )
    written = (turn.text or "") + "".join(c.name + c.arguments for c in tool_calls)
    return ModelTurn(text=turn.text, tool_calls=tool_calls,
                     usage=turn.usage or _estimate(size, written), finish_reason="tool_calls")


def _estimate(size: int, written: str) -> Usage:
    """Token counts of the rough size a real server would report (~4 characters a token)."""
    return Usage(input_tokens=max(1, size // 4), output_tokens=max(1, len(written) // 4),
                 requests=1)


# -- command line ----------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m gramagent.testing --script FILE [--port N] [--loop]``.

    Prints the base URL as the first line of stdout, then serves until interrupted or
    terminated.
    """
    parser = argparse.ArgumentParser(
        prog="python -m gramagent.testing",
        description="Serve a scripted OpenAI-compatible API on 127.0.0.1.",
    )
    parser.add_argument("--script", type=Path, help="JSON script file (a list of turns)")
    parser.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    parser.add_argument("--host", default="127.0.0.1", help="interface (default 127.0.0.1)")
    parser.add_argument("--loop", action="store_true", help="replay the script cyclically")
    parser.add_argument("--record", action="store_true",
                        help="keep requests in memory (off by default for long runs)")
    args = parser.parse_args(argv)
    turns: list[ScriptTurn] = []
    repeat = args.loop
    if args.script is not None:
        try:
            turns, file_loop = load_script(args.script)
        except (OSError, ValueError) as exc:
            parser.error(f"{args.script}: {exc}")
        repeat = repeat or file_loop
    stop = threading.Event()

    def _stop(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    with ScriptedServer(turns, host=args.host, port=args.port, loop=repeat,
                        record=args.record) as server:
        print(server.base_url, flush=True)
        while not stop.wait(0.5):
            pass
    return 0

