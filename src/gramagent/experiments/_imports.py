"""Objects named by import path (``module:attribute``).

An experiment names its tool libraries, custom evaluators and judges by import path, never by
captured Python objects, so that any process (a worker of a distributed engine too) can load
the same thing from the same name.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

from gramagent.errors import ConfigurationError

__all__ = ["add_search_path", "import_object"]


def add_search_path(directory: str | os.PathLike[str]) -> None:
    """Let modules beside an experiment file be imported by name (its libraries, evaluators),
    wherever the command runs from."""
    path = os.path.abspath(directory)
    if path not in sys.path:
        sys.path.insert(0, path)


def import_object(reference: str, *, what: str) -> Any:
    """The object ``module:attribute`` names (dots in the attribute walk into it).

    Modules of the working directory are found too, as ``python -m`` finds them.

    Raises:
        ConfigurationError: the reference is malformed, or cannot be imported or looked up;
            the message starts with ``what``.
    """
    module_name, sep, attr = reference.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigurationError(f"{what} {reference!r}: expected 'module:attribute'")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(f"{what} {reference!r}: cannot import {module_name!r}: {exc}"
                                 ) from None
    except Exception as exc:  # the module itself failed while importing
        raise ConfigurationError(f"{what} {reference!r}: importing {module_name!r} failed: "
                                 f"{type(exc).__name__}: {exc}") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigurationError(f"{what} {reference!r}: module {module_name!r} has no "
                                     f"attribute {attr!r}") from None
    return obj
