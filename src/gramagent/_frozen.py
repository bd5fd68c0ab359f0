"""Building frozen dataclasses without a call of ``object.__setattr__`` per field.

A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__`` (its own
``__setattr__`` refuses): a C call that costs about 1,200 machine instructions per field, a
multiple of the whole rest of the construction (bench/RESULTS.md, "Per call and per message").
The loop builds a dozen such objects per run (requests, turns, usage, messages, records).

:func:`constructor` returns a stand-in for the class that builds the same object the cheap
way: it makes an instance of a twin subclass that keeps the plain ``__setattr__`` (no slots of
its own, so the layout is the same), stores the fields as ordinary attribute stores, then
turns the instance into the class itself (``__class__`` assignment). The result is an
instance of exactly the class, equal to, hashed, printed, pickled and as immutable as one made
by the class's own constructor; the stand-in takes the same parameters (mypy checks them as
the class's). The class itself is unchanged: users keep constructing it as before.

A leaf module: it imports nothing else of gramagent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

__all__ = ["constructor"]

P = ParamSpec("P")
T = TypeVar("T")


def constructor(cls: Callable[P, T]) -> Callable[P, T]:
    """A function that builds instances of the frozen, slotted dataclass ``cls`` cheaply.

    It takes the parameters of ``cls`` (positional and keyword-only alike, defaults and
    default factories included) and returns an instance of exactly ``cls``.

    Raises:
        TypeError: ``cls`` is not a frozen dataclass with slots whose fields are all set by
            its ``__init__``, or it has a ``__post_init__`` or a ``__new__`` of its own.
    """
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)
            and cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
            and "__slots__" in cls.__dict__ and "__dict__" not in cls.__dict__
            and not hasattr(cls, "__post_init__") and cls.__new__ is object.__new__):
        raise TypeError(f"{cls!r} is not a frozen dataclass with slots")
    fields = dataclasses.fields(cls)
    if any(not f.init for f in fields):
        raise TypeError(f"{cls.__name__} has fields its __init__ does not set")
    # The twin keeps object's own __setattr__ and __delattr__ (both: they share one C slot,
    # so the attribute stores below take the fast path of a plain slotted class), and
    # object's __init__, so that calling it makes an empty instance (a type call costs less
    # than ``object.__new__(twin)``, whose wrapper packs its arguments into a tuple).
    twin = type(f"_{cls.__name__}Builder", (cls,), {
        "__slots__": (), "__setattr__": object.__setattr__,
        "__delattr__": object.__delattr__, "__init__": object.__init__,
        "__module__": __name__})
    names: dict[str, Any] = {"_twin": twin, "_cls": cls, "_MISSING": dataclasses.MISSING}
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    for f in fields:
        if f.default is not dataclasses.MISSING:
            names[f"_default_{f.name}"] = f.default
            param = f"{f.name}=_default_{f.name}"
        elif f.default_factory is not dataclasses.MISSING:
            names[f"_factory_{f.name}"] = f.default_factory
            param = f"{f.name}=_MISSING"
            body.append(f"    if {f.name} is _MISSING: {f.name} = _factory_{f.name}()")
        else:
            param = f.name
        (keyword if f.kw_only else positional).append(param)
    params = ", ".join(positional + (["*", *keyword] if keyword else []))
    lines = [f"def build({params}):", *body, "    self = _twin()"]
    lines += [f"    self.{f.name} = {f.name}" for f in fields]
    lines += ["    self.__class__ = _cls", "    return self"]
    exec("\n".join(lines), names)  # the way dataclasses writes __init__ itself
    build: Callable[P, T] = names["build"]
    build.__name__ = build.__qualname__ = f"new_{cls.__name__}"
    build.__doc__ = f"Build a {cls.__name__} (:func:`gramagent._frozen.constructor`)."
    return build
