"""From a Python function to a tool contract: description, parameters and JSON Schema.

Used by the :func:`~gramagent._runtime.library.tool` decorator. The description is the
docstring's first paragraph; parameter descriptions come from a Google-style ``Args:`` section;
each parameter's schema comes from its type hint:

================================  =====================================================
Python                            JSON Schema
================================  =====================================================
``str`` / ``int`` / ``float``     ``string`` / ``integer`` / ``number``
``bool``                          ``boolean``
``list[T]``, ``tuple[T, ...]``    ``array`` of ``T``
``dict``, ``dict[str, T]``        ``object`` (values of ``T``)
``Literal["a", "b"]``, ``Enum``   ``enum``
``T | None``, ``Optional[T]``     ``T`` or ``null``
``TypedDict``, ``@dataclass``     nested ``object`` (required keys, no extra keys)
``Annotated[T, "text"]``          ``T`` described by ``text``
================================  =====================================================

A parameter with a default is optional and its schema records the default. A parameter
annotated :class:`~gramagent._runtime.library.ToolContext` receives the per-call context and
is not part of the schema.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import inspect
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints, is_typeddict

from gramagent.errors import ToolError

__all__ = ["FunctionContract", "describe_function", "parse_docstring", "type_schema"]

JSONSchema = dict[str, Any]

_SECTION = re.compile(r"^(\w[\w ]*):\s*$")
_ARG_SECTIONS = {"args", "arguments", "parameters", "params", "keyword args", "keyword arguments"}
_ARG_LINE = re.compile(r"^\*{0,2}(\w+)\s*(?:\(([^)]*)\))?\s*:\s*(.*)$")


@dataclass(frozen=True, slots=True)
class ParamContract:
    """One parameter as the model sees it."""

    name: str
    schema: JSONSchema
    """The value's schema, with ``description`` and ``default`` when there are any."""
    required: bool


@dataclass(frozen=True, slots=True)
class FunctionContract:
    """What :func:`describe_function` learned about a function."""

    description: str
    params: tuple[ParamContract, ...]
    returns: JSONSchema
    context_param: str | None
    """The name of the parameter that receives the ToolContext, if any."""
    converters: Mapping[str, Callable[[object], object]]
    """Per parameter, a function turning its JSON value into the annotated Python type
    (dataclasses), for parameters that need one."""


def describe_function(
    func: Callable[..., object], *, description: str | None = None, context_type: type | None = None
) -> FunctionContract:
    """Derive a tool contract from ``func``'s signature, type hints and docstring.

    Args:
        func: the tool function (sync or async).
        description: overrides the docstring's first paragraph.
        context_type: the ToolContext class; a parameter of that type is the context parameter.

    Raises:
        ToolError: a parameter has no type hint or an unsupported one, the function takes
            ``*args``/``**kwargs``, or there is no description. The message names the function
            with its file and line.
    """
    where = _where(func)
    try:
        hints = get_type_hints(func, include_extras=True)
    except Exception as exc:  # NameError for unresolvable forward references, ...
        raise ToolError(f"{where}: cannot resolve type hints: {exc}") from exc
    doc_description, arg_docs = parse_docstring(inspect.getdoc(func) or "")
    description = _collapse(description) if description is not None else doc_description
    problems: list[str] = []
    if not description:
        problems.append("no description: add a docstring or pass description=...")

    params: list[ParamContract] = []
    converters: dict[str, Callable[[object], object]] = {}
    context_param: str | None = None
    for p in inspect.signature(func).parameters.values():
        hint = hints.get(p.name, inspect.Parameter.empty)
        if context_type is not None and (hint is context_type or (
                hint is inspect.Parameter.empty and p.name == "ctx")):
            context_param = p.name
            continue
        contract = _param_contract(p, hint, arg_docs.get(p.name))
        if isinstance(contract, str):
            problems.append(contract)
            continue
        params.append(contract)
        converter = _converter(hint)
        if converter is not None:
            converters[p.name] = converter
    if problems:
        raise ToolError([f"{where}: {problem}" for problem in problems])

    returns: JSONSchema = {"type": "string"}
    ret = hints.get("return", inspect.Parameter.empty)
    if ret is not inspect.Parameter.empty and ret is not type(None):
        try:
            returns = type_schema(_unwrap_awaitable(ret))
        except TypeError:
            returns = {}
    return FunctionContract(description, tuple(params), returns, context_param, converters)



def _param_contract(p: inspect.Parameter, hint: object, doc: str | None) -> ParamContract | str:
    """The contract of one tool parameter, or the problem that keeps it from being one."""
    if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
        return f"parameter {p.name!r}: *args and **kwargs cannot be tool parameters"
    if p.kind is p.POSITIONAL_ONLY:
        return f"parameter {p.name!r}: positional-only parameters cannot be passed by name"
    if hint is inspect.Parameter.empty:
        return f"parameter {p.name!r} has no type hint"
    try:
        schema = type_schema(hint)
    except TypeError as exc:
        return f"parameter {p.name!r}: {exc}"
    if doc is not None and "description" not in schema:
        schema = {**schema, "description": doc}
    required = p.default is inspect.Parameter.empty
    if not required:
        default = _json_default(p.default)
        if default is _NO_JSON:
            return f"parameter {p.name!r}: default {p.default!r} is not JSON"
        schema = {**schema, "default": default}
    return ParamContract(p.name, schema, required)

def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its first paragraph and ``Args:`` descriptions.

    Both are whitespace-normalized (wrapped lines joined with single spaces).

    Returns:
        ``(description, {parameter name: description})``.
    """
    lines = inspect.cleandoc(doc).splitlines() if doc else []
    first: list[str] = []
    for line in lines:
        if not line.strip() or _SECTION.match(line.strip()):
            break
        first.append(line)
    args: dict[str, str] = {}
    i = 0
    while i < len(lines):
        header = _SECTION.match(lines[i])
        i += 1
        if not header or header.group(1).lower() not in _ARG_SECTIONS:
            continue
        entry_indent: int | None = None
        current: str | None = None
        while i < len(lines):
            line = lines[i]
            if line.strip():
                indent = len(line) - len(line.lstrip())
                if indent == 0:
                    break  # the next section (or the end of this one)
                if entry_indent is None:
                    entry_indent = indent
                if indent <= entry_indent and (m := _ARG_LINE.match(line.strip())):
                    current = m.group(1)
                    args[current] = m.group(3).strip()
                elif current is not None:
                    args[current] = (args[current] + " " + line.strip()).strip()
            i += 1
    return _collapse(" ".join(first)), {k: _collapse(v) for k, v in args.items()}


def type_schema(tp: object) -> JSONSchema:
    """The JSON Schema of values of the Python type ``tp`` (see the module table).

    Raises:
        TypeError: for a type with no JSON Schema equivalent (with the type in the message).
    """
    return _schema(tp, ())


_PRIMITIVES: dict[object, JSONSchema] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
}
# get_origin maps typing.List, typing.Sequence, ... to these.
_ARRAYS: frozenset[object] = frozenset({list, tuple, set, frozenset, Sequence})
_OBJECTS: frozenset[object] = frozenset({dict, Mapping})


def _schema(tp: object, seen: tuple[object, ...]) -> JSONSchema:
    if tp in _PRIMITIVES:
        return dict(_PRIMITIVES[tp])
    if tp is Any or tp is object:
        return {}
    origin, args = get_origin(tp), get_args(tp)
    if origin is typing.Annotated:
        schema = _schema(args[0], seen)
        texts = [a for a in args[1:] if isinstance(a, str)]
        return {**schema, "description": _collapse(" ".join(texts))} if texts else schema
    if origin is Literal:
        return _enum_schema(list(args))
    if origin in (Union, types.UnionType):
        return _union_schema(args, seen)
    if tp in _ARRAYS or origin in _ARRAYS:
        return _array_schema(tp, origin, args, seen)
    if tp in _OBJECTS or origin in _OBJECTS:
        return _object_schema(tp, args, seen)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum_schema([member.value for member in tp])
    if isinstance(tp, type) and (is_typeddict(tp) or dataclasses.is_dataclass(tp)):
        if tp in seen:
            raise TypeError(f"recursive type {tp.__name__} is not supported")
        return _record_schema(tp, (*seen, tp))
    raise TypeError(f"unsupported type {tp!r} (use str, int, float, bool, list, dict, Literal, "
                    "Enum, TypedDict or a dataclass)")



def _array_schema(tp: object, origin: object, args: tuple[object, ...], seen: tuple[object, ...]
                  ) -> JSONSchema:
    if origin is tuple and args and not (len(args) == 2 and args[1] is ...):
        raise TypeError(f"fixed-length tuples are not supported ({tp!r}); use list[T]")
    array: JSONSchema = {"type": "array"}
    if args and args[0] is not Any:
        array["items"] = _schema(args[0], seen)
    return array


def _object_schema(tp: object, args: tuple[object, ...], seen: tuple[object, ...]) -> JSONSchema:
    mapping: JSONSchema = {"type": "object"}
    if args:
        if args[0] is not str:
            raise TypeError(f"object keys must be str ({tp!r})")
        if args[1] is not Any:
            mapping["additionalProperties"] = _schema(args[1], seen)
    return mapping

def _enum_schema(values: list[object]) -> JSONSchema:
    kinds = {type(v) for v in values}
    schema: JSONSchema = {}
    if len(kinds) == 1:
        kind = kinds.pop()
        if kind in _PRIMITIVES:
            schema["type"] = _PRIMITIVES[kind]["type"]
    schema["enum"] = values
    return schema


def _union_schema(args: tuple[object, ...], seen: tuple[object, ...]) -> JSONSchema:
    members = [a for a in args if a is not type(None)]
    nullable = len(members) < len(args)
    if len(members) == 1:
        inner = _schema(members[0], seen)
    else:
        inner = {"anyOf": [_schema(m, seen) for m in members]}
    return nullable_schema(inner) if nullable else inner


def nullable_schema(schema: JSONSchema) -> JSONSchema:
    """``schema`` widened to also accept ``null``."""
    kind = schema.get("type")
    if isinstance(kind, str) and kind != "null" and "enum" not in schema:
        return {**schema, "type": [kind, "null"]}
    if isinstance(kind, str) and "enum" in schema:
        return {**schema, "type": [kind, "null"], "enum": [*schema["enum"], None]}
    if "anyOf" in schema and len(schema) == 1:
        return {"anyOf": [*schema["anyOf"], {"type": "null"}]}
    return {"anyOf": [schema, {"type": "null"}]}


def _record_schema(tp: type, seen: tuple[object, ...]) -> JSONSchema:
    hints = get_type_hints(tp, include_extras=True)
    _, field_docs = parse_docstring(inspect.getdoc(tp) or "")
    properties: dict[str, JSONSchema] = {}
    required: list[str] = []
    if dataclasses.is_dataclass(tp):
        for f in dataclasses.fields(tp):
            schema = _schema(hints[f.name], seen)
            if f.name in field_docs:
                schema = {**schema, "description": field_docs[f.name]}
            if f.default is not dataclasses.MISSING:
                default = _json_default(f.default)
                if default is not _NO_JSON:
                    schema = {**schema, "default": default}
            elif f.default_factory is dataclasses.MISSING:
                required.append(f.name)
            properties[f.name] = schema
    else:
        required_keys = tp.__required_keys__  # type: ignore[attr-defined]
        for key, hint in hints.items():
            schema = _schema(_strip_required(hint), seen)
            if key in field_docs:
                schema = {**schema, "description": field_docs[key]}
            properties[key] = schema
            # Under `from __future__ import annotations` Python 3.11 cannot see NotRequired
            # when it builds __required_keys__: read the resolved hint as well.
            marker = get_origin(hint)
            if marker is typing.Required or (key in required_keys
                                             and marker is not typing.NotRequired):
                required.append(key)
    schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


def _strip_required(hint: object) -> object:
    while get_origin(hint) in (typing.Required, typing.NotRequired):
        hint = get_args(hint)[0]
    return hint


def _converter(tp: object) -> Callable[[object], object] | None:
    """A function building the annotated Python value from its JSON form, when one is needed
    (dataclasses, enums, tuples and sets, and containers of those); None when the JSON value
    is already right."""
    origin, args = get_origin(tp), get_args(tp)
    if origin is typing.Annotated:
        return _converter(args[0])
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _dataclass_converter(tp)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp
    if origin in (Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        inner = _converter(members[0]) if len(members) == 1 else None
        return None if inner is None else functools.partial(_or_none, inner)
    if tp in _ARRAYS or origin in _ARRAYS:
        container: Callable[[Iterable[object]], object] = (
            list if (origin or tp) in (list, Sequence)
            else typing.cast("Callable[[Iterable[object]], object]", origin or tp))
        item = _converter(args[0]) if args else None
        if item is None:
            return None if container is list else functools.partial(_whole, container)
        return functools.partial(_each, container, item)
    if origin in _OBJECTS and len(args) == 2:
        value = _converter(args[1])
        return None if value is None else functools.partial(_values, value)
    return None


def _dataclass_converter(cls: type) -> Callable[[object], object]:
    hints = get_type_hints(cls)
    fields = {f.name: _converter(hints[f.name]) for f in dataclasses.fields(cls)}

    def build(value: object) -> object:
        if not isinstance(value, dict):
            return value
        kwargs = {}
        for key, item in value.items():
            convert = fields.get(key)
            kwargs[key] = item if convert is None else convert(item)
        return cls(**kwargs)

    return build


def _or_none(convert: Callable[[object], object], value: object) -> object:
    return None if value is None else convert(value)


def _whole(container: Callable[[Iterable[object]], object], value: object) -> object:
    if not isinstance(value, list):  # checked against the schema: a list
        return value
    return container(value)


def _each(container: Callable[[Iterable[object]], object], convert: Callable[[object], object],
          value: object) -> object:
    if not isinstance(value, list):  # checked against the schema: a list
        return value
    return container(convert(v) for v in value)


def _values(convert: Callable[[object], object], value: object) -> object:
    if not isinstance(value, dict):  # checked against the schema: an object
        return value
    return {k: convert(v) for k, v in value.items()}


_NO_JSON = object()


def _json_default(value: object) -> object:
    if isinstance(value, enum.Enum):
        value = value.value
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, list | tuple):
        items = [_json_default(v) for v in value]
        return _NO_JSON if any(i is _NO_JSON for i in items) else items
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        out = {k: _json_default(v) for k, v in value.items()}
        return _NO_JSON if any(v is _NO_JSON for v in out.values()) else out
    return _NO_JSON


def _unwrap_awaitable(tp: object) -> object:
    origin = get_origin(tp)
    if origin is not None and getattr(origin, "__name__", "") in {"Coroutine", "Awaitable"}:
        return get_args(tp)[-1]
    return tp


def _collapse(text: str) -> str:
    return " ".join(text.split())


def _where(func: Callable[..., object]) -> str:
    name = f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', repr(func))}"
    try:
        code = inspect.unwrap(func).__code__
        return f"@tool {name} ({code.co_filename}:{code.co_firstlineno})"
    except AttributeError:
        return f"@tool {name}"
