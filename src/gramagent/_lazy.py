"""Lazy re-exports (PEP 562) for packages whose public names live in heavier submodules."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping

__all__ = ["lazy_exports"]


def lazy_exports(
    namespace: dict[str, object], homes: Mapping[str, str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of a package that imports names on first use.

    Args:
        namespace: The package's ``globals()``; a name, once imported, is stored there, so
            later lookups do not come back here.
        homes: Public name -> the submodule defining it, relative to the package
            (``"spec.model"``).

    Returns:
        ``(__getattr__, __dir__)``, to assign at module level. ``__getattr__`` raises
        AttributeError, naming the package, for a name not in ``homes``.
    """
    package = namespace["__name__"]

    def __getattr__(name: str) -> object:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{home}"), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *homes})

    return __getattr__, __dir__
