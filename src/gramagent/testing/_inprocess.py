"""Models answered in process, for tests of what the loop does rather than of a wire format.

:class:`FunctionModel` answers each request with a function of it; :class:`ScriptedModel`
answers from the same script of turns as :class:`~gramagent.testing.ScriptedServer` (built
with :func:`~gramagent.testing.reply`, :func:`~gramagent.testing.call`, ...), with no HTTP, no
wire format and no event loop of their own. Both implement
:class:`~gramagent._models.base.StreamingModel`, so ``run_agent(..., model=...)`` takes them
where it takes an adapter, and both keep every request they were asked in ``requests``::

    from gramagent.testing import ScriptedModel, call, reply

    model = ScriptedModel([call("sayHello", {"personName": "Alice"}), reply("Hi Alice!")])
    response = await run_agent(agent, "hi", library=lib, model=model)
    assert model.requests[1].messages[-1].content == "Hello, Alice!"

What an adapter guarantees on the wire (bodies, SSE, retries, errors of a hostile server) is
tested against the scripted server; these models stand in for it where only the loop is tested.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import re
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeAlias

from gramagent._models.base import ModelRequest, ModelTurn, TextSink
from gramagent.errors import ModelAPIError
from gramagent.testing._scripted import (
    ScriptDrop,
    ScriptError,
    ScriptHTTP,
    ScriptTurn,
    model_turn,
)

__all__ = ["FunctionModel", "ModelFunction", "ScriptedModel"]

ModelFunction: TypeAlias = Callable[[ModelRequest], ModelTurn | Awaitable[ModelTurn]]
"""Answers one request with a turn, directly or awaited; may raise ModelAPIError."""

_WORDS = re.compile(r"\S+\s*|\s+")


class FunctionModel:
    """A model whose every answer is ``function(request)``, computed in process.

    Args:
        function: Takes the :class:`~gramagent._models.base.ModelRequest` and returns the
            :class:`~gramagent._models.base.ModelTurn` (or an awaitable of it); an exception it
            raises (e.g. :class:`~gramagent.errors.ModelAPIError`) is the request's failure.

    Streamed (:meth:`stream_request`), the turn's text is handed out word by word (each piece
    a word and the white space after it).
    """

    def __init__(self, function: ModelFunction) -> None:
        self._function = function
        self.requests: list[ModelRequest] = []
        """Every request asked so far, in order, each with its messages as they stood then."""
        self.closed = False
        """Whether :meth:`aclose` was called."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._function!r})"

    async def request(self, request: ModelRequest) -> ModelTurn:
        """Record ``request`` and return the function's answer to it."""
        kept = dataclasses.replace(request, messages=tuple(request.messages))
        self.requests.append(kept)
        answer = self._function(kept)
        return await answer if inspect.isawaitable(answer) else answer

    async def stream_request(self, request: ModelRequest, on_text: TextSink) -> ModelTurn:
        """As :meth:`request`, then hand the turn's text (if any) to ``on_text`` word by word."""
        turn = await self.request(request)
        for piece in _WORDS.findall(turn.text or ""):
            on_text(piece)
        return turn

    async def aclose(self) -> None:
        """Nothing to release; marks the model :attr:`closed`."""
        self.closed = True


class ScriptedModel(FunctionModel):
    """A model answering from a script of turns, in order, as the scripted server does.

    A text turn (:func:`~gramagent.testing.reply`, :func:`~gramagent.testing.completion`)
    is a turn with that text, finished ``stop``; a call turn (:func:`~gramagent.testing.call`,
    :func:`~gramagent.testing.calls`) holds its calls (numbered ``call_N_K`` where the script
    gives no id), finished ``tool_calls``; an :func:`~gramagent.testing.error` or
    :func:`~gramagent.testing.drop` raises :class:`~gramagent.errors.ModelAPIError` (with the
    error's status), as an adapter does once its retries are spent; ``delay`` is awaited
    first. Usage is the turn's own or estimated from the sizes (about four characters a token).
    An exhausted script raises ModelAPIError ``script exhausted`` (status 500).

    Args:
        script: The turns. A verbatim HTTP answer (:func:`~gramagent.testing.http_response`)
            means nothing without HTTP and is refused (ValueError).
        loop: Replay the script from the start when it runs out.
    """

    def __init__(self, script: Sequence[ScriptTurn] = (), *, loop: bool = False) -> None:
        super().__init__(self._answer)
        self._turns: list[ScriptTurn] = []
        self._index = 0
        self._repeat = loop
        self._lock = threading.Lock()
        self.add(*script)

    def __repr__(self) -> str:
        return f"ScriptedModel({self.remaining} turns remaining)"

    def add(self, *turns: ScriptTurn) -> None:
        """Append turns to the script (also while a run uses the model).

        Raises:
            ValueError: a turn is a verbatim HTTP answer.
        """
        for turn in turns:
            if isinstance(turn, ScriptHTTP):
                raise ValueError("a verbatim HTTP answer (http_response) needs HTTP: script it "
                                 "on a ScriptedServer")
        with self._lock:
            self._turns.extend(turns)

    @property
    def remaining(self) -> int:
        """Turns not consumed yet."""
        return max(0, len(self._turns) - self._index)

    def _next(self) -> ScriptTurn | None:
        with self._lock:
            if self._index >= len(self._turns):
                if not (self._repeat and self._turns):
                    return None
                self._index = 0
            self._index += 1
            return self._turns[self._index - 1]

    async def _answer(self, request: ModelRequest) -> ModelTurn:
        turn = self._next()
        if turn is None:
            raise ModelAPIError("script exhausted", status=500, model=request.model)
        if turn.delay > 0:
            await asyncio.sleep(turn.delay)
        if isinstance(turn, ScriptError):
            raise ModelAPIError(turn.message, status=turn.status, body=turn.message,
                                model=request.model)
        if isinstance(turn, ScriptDrop):
            raise ModelAPIError("the scripted model dropped the request", model=request.model)
        assert not isinstance(turn, ScriptHTTP)  # refused by add()
        return model_turn(turn, len(self.requests), _size(request))


def _size(request: ModelRequest) -> int:
    """About how many characters the request would take on the wire."""
    return len(request.instruction) + sum(len(repr(m)) for m in request.messages) + sum(
        len(d.name) + len(d.description or "") for d in request.tools)
