"""The modules an opt-in build compiles with mypyc, and which of them this install runs compiled.

``GRAMAGENT_COMPILE=1 pip install --no-build-isolation --no-deps --force-reinstall .`` (after
``pip install ".[compile]"``, with a C compiler at hand) turns
each module of :data:`MODULES` into a C extension beside its source; a default install stays
pure Python and behaves the same. The list is the run's hot path (bench/RESULTS.md, "Compiled
hot path"): the loop, the tool calls, the deadline and budget, the chat and Responses adapters'
body building and reply reading, the checks of each tool call. Modules left out on purpose:
those whose frozen classes are built by :func:`gramagent._frozen.builds` (``_messages``,
``_models.base``, ``_spec.checked``, ``_runtime.results``: mypyc makes their classes native,
which the builders' ``__class__`` assignment refuses), and ``_models.http`` (async generators,
which mypyc does not compile). ``setup.py`` reads the list from here; tests/test_compiled.py
checks each module stays compilable, and keeps its exceptions' causes (mypyc drops
``raise ... from``), in the ways a quick read can tell.

A leaf module: it imports nothing else of gramagent.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util

__all__ = ["MODULES", "compiled_modules"]

MODULES: tuple[str, ...] = (
    "gramagent._json",
    "gramagent._models._wire",
    "gramagent._models.chat",
    "gramagent._models.responses",
    "gramagent._runtime.budget",
    "gramagent._runtime.deadline",
    "gramagent._runtime.invoke",
    "gramagent._runtime.per_loop",
    "gramagent._runtime.preparation",
    "gramagent._runtime.tracing",
    "gramagent._spec.calls",
    "gramagent._spec.fastcheck",
)
"""The modules the compiled build compiles, by dotted name (all under ``src/``)."""


def compiled_modules() -> tuple[str, ...]:
    """The modules of :data:`MODULES` that this install loads from a C extension (none for a
    default install), found without importing them."""
    found = []
    for name in MODULES:
        spec = importlib.util.find_spec(name)
        if spec is not None and isinstance(spec.loader, importlib.machinery.ExtensionFileLoader):
            found.append(name)
    return tuple(found)
