"""Building frozen dataclasses without a call of ``object.__setattr__`` per field.

A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__`` (its own
``__setattr__`` refuses). For the objects the loop makes for every request, reply and tool
call (requests, turns, usage, messages, records) that is most of the construction; the
measurement that keeps these builders is in docs/performance.md, "Frozen builders".

:func:`builds` turns a function that builds such an object through its class into one that
builds the same object without those calls: it makes an instance of a twin subclass that keeps
the plain ``__setattr__`` (no slots of its own, so the layout is the same), stores the fields
as ordinary attribute stores, then turns the instance into the class itself (``__class__``
assignment). The result is an instance of exactly the class, equal to, hashed, printed,
pickled and as immutable as one made by the class's own constructor. The class itself is
unchanged: users keep constructing it as before.

A leaf module: it imports nothing else of gramagent.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

__all__ = ["builds"]

P = ParamSpec("P")
T = TypeVar("T")


def builds(cls: type[T]) -> Callable[[Callable[P, T]], Callable[P, T]]:
    """Decorator: the decorated function, which builds a ``cls`` through the class, replaced by
    one that builds the same object without ``object.__setattr__``.

    The decorated function says what the builder takes: its parameters are the fields of
    ``cls`` (each once, in any order, positional or keyword-only; a default, where it has one,
    the field's own default), and its body builds the object with the class. That body is the
    reference: mypy checks the parameters against the fields through it, and it stays
    reachable as ``__wrapped__`` (the tests compare the two). ``cls`` must be a frozen
    dataclass with slots whose fields are all set by its ``__init__``, without a
    ``__post_init__`` or a ``__new__`` of its own.

    Raises:
        TypeError: ``cls`` is not such a class, or the parameters are not its fields (a field
            missing, another name, ``*args``/``**kwargs``, a default that is not the field's,
            a default for a field whose default is a factory).
    """
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)
            and cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
            and "__slots__" in cls.__dict__ and "__dict__" not in cls.__dict__
            and not hasattr(cls, "__post_init__") and cls.__new__ is object.__new__):
        raise TypeError(f"{cls!r} is not a frozen dataclass with slots")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    if any(not f.init for f in fields.values()):
        raise TypeError(f"{cls.__name__} has fields its __init__ does not set")
    clash = _OWN_NAMES.intersection(fields)
    if clash:  # a parameter of that name would shadow the builder's own
        raise TypeError(f"{cls.__name__} has a field named {sorted(clash)[0]!r}, a name the "
                        "builder's code uses itself")

    def decorate(reference: Callable[P, T]) -> Callable[P, T]:
        params = list(inspect.signature(reference).parameters.values())
        _check_params(cls, fields, params)
        build: Callable[P, T] = _compile(cls, params)
        functools.update_wrapper(build, reference)  # name, docs; __wrapped__: the reference
        return build

    return decorate


_OWN_NAMES = frozenset({"self", "_twin", "_cls"})
"""The names :func:`_compile`'s code uses (the object it fills, the twin, the class)."""

_ALLOWED_KINDS = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def _check_params(cls: type, fields: dict[str, dataclasses.Field[Any]],
                  params: list[inspect.Parameter]) -> None:
    """Refuse parameters that are not exactly ``cls``'s fields, with the fields' defaults."""
    names = [p.name for p in params]
    if sorted(names) != sorted(fields) or any(p.kind not in _ALLOWED_KINDS for p in params):
        raise TypeError(f"a builder of {cls.__name__} takes its fields {sorted(fields)} "
                        f"(positional or keyword-only), not {names}")
    for p in params:
        if p.default is inspect.Parameter.empty:
            continue
        default = fields[p.name].default
        # The same value, not one that only compares equal (0 for 0.0, False for 0, -0.0):
        # an object built with it would print and serialize otherwise than the class's.
        if default is dataclasses.MISSING or not (
                p.default is default or (type(p.default) is type(default)
                                         and p.default == default
                                         and repr(p.default) == repr(default))):
            raise TypeError(f"the builder's default for {cls.__name__}.{p.name} is not the "
                            "field's (a field with a default factory has none: pass it)")


def _compile(cls: type[T], params: list[inspect.Parameter]) -> Callable[..., T]:
    """The builder: the twin instance, one attribute store per field, the class set."""
    # The twin keeps object's own __setattr__ and __delattr__ (both: they share one C slot,
    # so the attribute stores below are those of a plain slotted class), and object's
    # __init__, so that calling it makes an empty instance.
    twin = type(f"_{cls.__name__}Builder", (cls,), {
        "__slots__": (), "__setattr__": object.__setattr__,
        "__delattr__": object.__delattr__, "__init__": object.__init__,
        "__module__": __name__})
    names: dict[str, Any] = {"_twin": twin, "_cls": cls}
    signature: list[str] = []
    for p in params:
        if p.kind is inspect.Parameter.KEYWORD_ONLY and "*" not in signature:
            signature.append("*")
        if p.default is inspect.Parameter.empty:
            signature.append(p.name)
        else:
            names[f"_default_{p.name}"] = p.default
            signature.append(f"{p.name}=_default_{p.name}")
    lines = [f"def build({', '.join(signature)}):", "    self = _twin()"]
    lines += [f"    self.{p.name} = {p.name}" for p in params]
    lines += ["    self.__class__ = _cls", "    return self"]
    exec("\n".join(lines), names)  # the way dataclasses writes __init__ itself
    build: Callable[..., T] = names["build"]
    return build
