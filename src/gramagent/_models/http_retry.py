"""When a failed HTTP attempt is tried again, and how long to wait before it.

:func:`retryable_answer` is the default rule for an error answer (HTTP 408, 409, 429 and
5xx); an adapter for a server with a failure of its own that is not worth repeating gives
:class:`~gramagent._models.http.HTTPClient` a rule of its own (``retryable_answer=``).
:func:`retry_delay` is the backoff, :func:`parse_retry_after` reads the wait a server asks
for (``Retry-After``, ``retry-after-ms``).
"""

from __future__ import annotations

import email.utils
import random
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TypeAlias

__all__ = ["RETRY_STATUSES", "RetryRule", "parse_retry_after", "retry_delay", "retryable_answer"]

RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
"""HTTP statuses answered by a retry (any other 5xx is retried too)."""

RetryRule: TypeAlias = Callable[[int, str], bool]
"""Whether an error answer is worth another attempt, given its HTTP status and the server's
message (the ``error.message`` of its body, else the start of its text)."""


def retryable_answer(status: int, message: str) -> bool:
    """The default :data:`RetryRule`: 408, 409, 429 and every 5xx, whatever the message."""
    return status in RETRY_STATUSES or status >= 500


def retry_delay(
    attempt: int,
    retry_after: float | None,
    *,
    base: float = 0.5,
    rand: Callable[[], float] = random.random,
) -> float:
    """Seconds to wait before retry number ``attempt + 1`` (``attempt`` counts from 0).

    A server hint (``Retry-After``) wins; otherwise ``base * 2**attempt`` with "equal jitter":
    half of it fixed, the other half random, so that many clients backing off together spread
    out.
    """
    if retry_after is not None:
        return max(0.0, retry_after)
    step = base * 2.0**attempt
    return step / 2 + rand() * step / 2


def parse_retry_after(headers: Mapping[str, str], *, now: datetime | None = None) -> float | None:
    """The wait a server asks for, in seconds, or None when it asks for none.

    Reads ``retry-after-ms`` (milliseconds, sent by OpenAI) and ``Retry-After`` (delta-seconds
    or an HTTP date, RFC 9110 section 10.2.3). Unreadable values are ignored.
    """
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())
