"""The :class:`~gramagent.errors.ModelAPIError` of a failed request, and what it says.

:func:`request_error` is the one place such errors are made (for transport failures, HTTP
errors and replies an adapter cannot read alike): it names the model, the URL, the HTTP status
and the server's message (:func:`error_detail`), keeps an excerpt of the body, and passes its
text through the caller's ``mask`` (the API key masked). A refused key (401, 403) is an
:class:`~gramagent.errors.AuthenticationError`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import aiohttp
import orjson

from gramagent._models.http_body import body_text
from gramagent.errors import AuthenticationError, ModelAPIError

__all__ = [
    "AUTH_STATUSES",
    "EXCERPT_CHARS",
    "error_detail",
    "error_detail_bytes",
    "excerpt",
    "request_error",
    "transport_detail",
]

AUTH_STATUSES = frozenset({401, 403})
"""HTTP statuses that mean the API key was refused: an AuthenticationError, not retried."""

EXCERPT_CHARS = 500
"""How much of an error body a ModelAPIError keeps."""


def request_error(
    message: str,
    *,
    mask: Callable[[str], str],
    url: str | None = None,
    status: int | None = None,
    body: bytes | str | Mapping[str, object] | None = None,
    model: str | None = None,
    attempts: int | None = None,
    retry_after: float | None = None,
) -> ModelAPIError:
    """The error for a failed request: ``message`` with where it went (``url``), who answered
    (``model``), how many ``attempts`` were made, and an excerpt of ``body`` (about 500
    characters), every text through ``mask``; ``retry_after`` is the wait the last answer
    asked for (:attr:`~gramagent.errors.ModelAPIError.retry_after`)."""
    where = f" ({url})" if url else ""
    tries = f" after {attempts} attempts" if attempts and attempts > 1 else ""
    who = f"model {model!r}" if model else "the model server"
    shown = excerpt(body)
    if status in AUTH_STATUSES:
        return AuthenticationError(
            mask(f"request to {who} failed: {message}{where}; the server refused the "
                 "API key: check --api-key / OPENAI_API_KEY (or api_key=)"),
            status=status, body=None if shown is None else mask(shown), model=model,
        )
    return ModelAPIError(
        mask(f"request to {who} failed{tries}: {message}{where}"),
        status=status,
        body=None if shown is None else mask(shown),
        model=model,
        retry_after=retry_after,
    )


def excerpt(body: bytes | str | Mapping[str, object] | None) -> str | None:
    """The start of ``body`` an error keeps (about :data:`EXCERPT_CHARS` characters)."""
    if body is None:
        return None
    if isinstance(body, bytes):
        text = body_text(body[: EXCERPT_CHARS * 4])
    elif isinstance(body, str):
        text = body
    else:
        text = body_text(orjson.dumps(body))
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS] + "…"


def error_detail(data: object) -> str | None:
    """The human message of an OpenAI-style error body (``{"error": {"message": ...}}``)."""
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict):
            message = err.get("message")
            if isinstance(message, str) and message:
                return message
        elif isinstance(err, str) and err:
            return err
        message = data.get("message") or data.get("detail")
        if isinstance(message, str) and message:
            return message
    return None


def error_detail_bytes(content: bytes) -> str:
    """The server's message in an error body: its :func:`error_detail`, else the start of
    its text (at most about 300 characters)."""
    try:
        detail = error_detail(orjson.loads(content))
    except orjson.JSONDecodeError:
        detail = None
    if detail is None:
        detail = body_text(content[:400]).strip()
    return detail if len(detail) <= 300 else detail[:300] + "…"


def transport_detail(exc: BaseException, request_timeout: float) -> str:
    """What a transport failure says in an error (``request_timeout`` passed: its own
    sentence)."""
    if not isinstance(exc, aiohttp.ClientError) and isinstance(exc, TimeoutError):
        return (f"no complete answer within {request_timeout:g} s (request_timeout); the "
                "server was too slow")
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
