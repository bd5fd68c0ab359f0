"""A streamed Chat Completions reply: its ``chat.completion.chunk`` events, folded.

The SSE chunks (``choices[0].delta`` with ``content`` pieces and ``tool_calls`` deltas keyed by
``index``, usage in the last chunk) are assembled by :func:`assemble_chat_chunks` into the
non-streamed reply shape, read by the same parser, so both paths give the same turn.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gramagent._models._wire import (
    arguments_text,
)
from gramagent._models.wire_shapes import FunctionCall, JSONObject

__all__ = ["assemble_chat_chunks", "content_delta"]


def assemble_chat_chunks(chunks: Iterable[Mapping[str, object]]) -> JSONObject:
    """Fold streamed ``chat.completion.chunk`` events into the non-streamed reply shape.

    Content pieces are concatenated; ``tool_calls`` deltas are merged by ``index`` (the id and
    type from the first delta that has them, name and arguments pieces concatenated; a new id
    at a used index, or deltas without an index, as :meth:`_CallsSoFar.merge` says); legacy
    ``function_call`` deltas likewise; the last ``finish_reason`` and ``usage`` seen win. A
    whole ``message`` (a server that ignored ``stream: true``) counts as one big delta. With no
    choice in any chunk the result has no choices (the parser reports that).

    Time is linear in the stream's length: every piece is kept in a list and joined once at
    the end (docs/performance.md, "Models and HTTP", has the hostile case this guards against).
    """
    meta: JSONObject = {}
    texts: dict[str, list[str]] = {"content": [], "refusal": []}
    calls = _CallsSoFar()
    legacy: _CallPieces | None = None
    finish: str | None = None
    usage: object = None
    seen = False
    for chunk in chunks:
        if not meta and chunk.get("id") is not None:
            meta = {k: chunk[k] for k in ("id", "created", "model") if k in chunk}
        if chunk.get("usage"):
            usage = chunk["usage"]
        choices = chunk.get("choices")  # anything but a list: no choice (a hostile server)
        for choice in choices if isinstance(choices, list) else ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            seen = True
            delta = choice.get("delta") or choice.get("message")
            if isinstance(delta, dict):
                legacy = _fold_delta(delta, texts, calls, legacy)
            if choice.get("finish_reason"):
                finish = choice["finish_reason"]
    if not seen:
        return {**meta, "object": "chat.completion", "choices": [], "usage": usage}
    content, refusal = texts["content"], texts["refusal"]
    message: JSONObject = {"role": "assistant", "content": "".join(content) if content
                               else None}
    if refusal:
        message["refusal"] = "".join(refusal)
    if calls.slots:
        message["tool_calls"] = calls.joined()
    if legacy is not None:
        message["function_call"] = legacy.joined()
    return {
        **meta,
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage,
    }


class _CallPieces:
    """A streamed call's id and its name and arguments pieces, joined once at the end."""

    __slots__ = ("arguments", "id", "name")

    def __init__(self) -> None:
        self.id: object = None
        self.name: list[str] = []
        self.arguments: list[str] = []

    def add(self, fn: Mapping[str, object]) -> None:
        """The ``name`` and ``arguments`` pieces of one delta (arguments that are not text, as
        JSON text; anything else adds nothing)."""
        self.name.append(_piece(fn.get("name")))
        args = fn.get("arguments")
        if isinstance(args, str):
            self.arguments.append(args)
        elif args is not None:
            self.arguments.append(arguments_text(args))

    def joined(self) -> FunctionCall:
        """The call's ``{"name", "arguments"}``, each piece list joined."""
        return {"name": "".join(self.name), "arguments": "".join(self.arguments)}


def _fold_delta(delta: Mapping[str, object], texts: dict[str, list[str]],
                calls: _CallsSoFar, legacy: _CallPieces | None
                ) -> _CallPieces | None:
    """Add one delta's text pieces (``content``, ``refusal``) and call pieces; returns the
    legacy ``function_call`` so far."""
    for key, pieces in texts.items():
        piece = delta.get(key)
        if isinstance(piece, str):
            pieces.append(piece)
    raw_calls = delta.get("tool_calls")
    for raw in raw_calls if isinstance(raw_calls, list) else ():
        if isinstance(raw, dict):
            calls.merge(raw)
    fc = delta.get("function_call")
    if isinstance(fc, dict):
        legacy = legacy or _CallPieces()
        legacy.add(fc)
    return legacy


def _piece(value: object) -> str:
    """A streamed name or arguments piece; anything but a string adds nothing."""
    return value if isinstance(value, str) else ""


class _CallsSoFar:
    """The calls of a streamed reply so far, keyed ``(index, n)``: sent back by index, then
    in the order they came."""

    __slots__ = ("latest", "slots")

    def __init__(self) -> None:
        self.slots: dict[tuple[int, int], _CallPieces] = {}
        self.latest: dict[int, tuple[int, int]] = {}
        """Per index, the key of its last call."""

    def merge(self, raw: Mapping[str, object]) -> None:
        """Add one ``tool_calls`` delta to its call: the last call of its ``index``, unless it
        brings an id other than that call's (a server that numbers every call 0: a new call).
        Without an index (some servers send none), a delta with an id starts a new call and
        one without continues the last call (it is a piece of it), or starts the first."""
        index = raw.get("index")
        new_id = raw.get("id") or None
        slots = self.slots
        slot: _CallPieces | None
        if isinstance(index, int) and not isinstance(index, bool):
            key = self.latest.get(index, (index, 0))
            slot = slots.get(key)
            if slot is not None and new_id is not None and slot.id and new_id != slot.id:
                key, slot = (index, len(slots)), None  # a new call at a used index
            self.latest[index] = key
        elif slots and new_id is None:
            key = next(reversed(slots))  # a piece of the last call
            slot = slots[key]
        else:
            key, slot = (len(slots), -1), None
        if slot is None:
            slot = slots[key] = _CallPieces()
        if new_id is not None and not slot.id:
            slot.id = new_id
        fn = raw.get("function")
        if isinstance(fn, dict):
            slot.add(fn)

    def joined(self) -> list[JSONObject]:
        """The calls in the reply shape."""
        return [{"id": self.slots[k].id, "type": "function", "function": self.slots[k].joined()}
                for k in sorted(self.slots)]


def content_delta(chunk: Mapping[str, object]) -> str | None:
    """The content piece of a streamed chunk's first choice (as :func:`assemble_chat_chunks`
    reads it), or None."""
    choices = chunk.get("choices")
    for choice in choices if isinstance(choices, list) else ():
        if isinstance(choice, dict) and choice.get("index", 0) == 0:
            delta = choice.get("delta") or choice.get("message")
            if isinstance(delta, dict):
                piece = delta.get("content")
                return piece if isinstance(piece, str) else None
    return None

