"""Objects named by import path (``module:attribute``).

An experiment names its tool libraries, custom evaluators and judges by import path, never by
captured Python objects, so that any process (a worker of a distributed engine too) can load
the same thing from the same name.
"""

from __future__ import annotations

import importlib
import os
import sys
import sysconfig
from typing import Any

from gramagent.errors import ConfigurationError

__all__ = ["add_search_path", "import_object"]


def add_search_path(directory: str | os.PathLike[str]) -> None:
    """Let modules beside an experiment file be imported by name (its libraries, evaluators),
    wherever the command runs from.

    The directory goes after the standard library on ``sys.path`` (before installed
    packages), so a user's ``statistics.py`` or ``email.py`` there never stands in for the
    standard module when something imports that.
    """
    path = os.path.abspath(directory)
    if path not in sys.path:
        sys.path.insert(_after_standard_library(), path)


def _after_standard_library() -> int:
    """The ``sys.path`` index just after the standard library's entries (its zip, its
    directory, ``lib-dynload``); the end when none is there (an embedded interpreter)."""
    paths = sysconfig.get_paths()
    stdlib = {os.path.realpath(paths[key]) for key in ("stdlib", "platstdlib")}
    stdlib |= {os.path.join(directory, "lib-dynload") for directory in list(stdlib)}
    parents = {os.path.dirname(directory) for directory in stdlib}
    position = len(sys.path)
    for index, entry in enumerate(sys.path):
        real = os.path.realpath(entry) if entry else ""
        if real in stdlib or (real.endswith(".zip") and os.path.dirname(real) in parents):
            position = index + 1
    return position


def import_object(reference: str, *, what: str) -> Any:
    """The object ``module:attribute`` names (dots in the attribute walk into it).

    Modules of the working directory are found too, as ``python -m`` finds them (after
    the standard library, as :func:`add_search_path` puts an experiment's directory).

    Raises:
        ConfigurationError: the reference is malformed, or cannot be imported or looked up;
            the message starts with ``what``.
    """
    module_name, sep, attr = reference.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigurationError(f"{what} {reference!r}: expected 'module:attribute'")
    if "" not in sys.path:
        add_search_path(os.getcwd())
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
