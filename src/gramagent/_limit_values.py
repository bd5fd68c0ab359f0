"""What the value of a limit may be: one check for every numeric setting of every layer (run
limits, tool timeouts, transport and MCP timeouts, sandbox limits, experiment rates), so they
refuse the same values with the same words.

A leaf module: it imports only the error tree.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from gramagent.errors import ConfigurationError

__all__ = ["limit_problem", "refuse_problems"]


def limit_problem(name: str, value: object, *, whole: bool = False, optional: bool = True,
                  zero: bool = False) -> str | None:
    """What is wrong with ``value`` as the limit ``name``, or None if nothing is.

    A limit is a positive number (or 0 too, where ``zero``): a whole one where ``whole``, else
    any finite one (not ``nan``, which compares false with everything and so would silently
    lift the limit, nor ``inf``); or None (no limit) where ``optional``. ``True`` and
    ``False`` are not numbers here.
    """
    if value is None and optional:
        return None
    kinds = (int,) if whole else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        what = "a positive whole number" if whole else "a positive number"
        return f"{name} must be {what}{' or None' if optional else ''} (got {value!r})"
    if not math.isfinite(value):
        return f"{name} must be finite (got {value!r}{'; None means no limit' if optional else ''})"
    if value < 0 or (value == 0 and not zero):
        return f"{name} must be {'0 or more' if zero else 'positive'} (got {value!r})"
    return None


def refuse_problems(what: str, problems: Iterable[str | None]) -> None:
    """Raise one error naming every problem (None: that value is fine), if there is any.

    Raises:
        ConfigurationError: ``"WHAT: problem; problem"``.
    """
    found = [problem for problem in problems if problem is not None]
    if found:
        raise ConfigurationError(f"{what}: " + "; ".join(found))
