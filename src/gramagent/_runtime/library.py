"""Tool implementations and late binding: Tool, @tool, ToolLibrary, BoundAgent.

An agent's spec names its tools and their contracts (:class:`~gramagent._spec.model.ToolSpec`);
a :class:`ToolLibrary` holds implementations (:class:`Tool`). :meth:`ToolLibrary.bind` checks
every spec against its implementation (name, description, schema) and reports every problem at
once; the :class:`BoundAgent` it returns holds what the loop needs, built once: the tool
definitions sent to the model (with their strict-mode schemas) and compiled validators.

Two libraries with different implementations of the same names bind the same agent: that is
the A/B seam.

Example:
    >>> from gramagent._runtime.library import ToolLibrary, tool
    >>> library = ToolLibrary()
    >>> @library.register
    ... def sayHello(personName: str = "world") -> str:
    ...     '''Returns a friendly greeting message for the given name.
    ...
    ...     Args:
    ...         personName: who to greet.
    ...     '''
    ...     return f"Hello, {personName}! Nice to meet you."
    >>> sayHello(personName="Alice")
    'Hello, Alice! Nice to meet you.'
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import KW_ONLY, dataclass, field
from types import MappingProxyType
from typing import Any, Literal, overload

from gramagent._limit_values import limit_problem
from gramagent._runtime.introspect import describe_function
from gramagent._runtime.limits import INHERIT, Inherit
from gramagent._spec.calls.check import near_names
from gramagent._spec.definition import ToolDefinition
from gramagent._spec.model import Agent, Param, Signature, ToolSpec
from gramagent.errors import SchemaError, ToolError

__all__ = ["BoundAgent", "DescriptionCheck", "Tool", "ToolContext", "ToolLibrary", "tool"]

logger = logging.getLogger(__name__)

DescriptionCheck = bool | Literal["warn"]
"""How :meth:`ToolLibrary.bind` treats descriptions: ``True`` (differences are binding
problems), ``False`` (ignored, parameter descriptions too) or ``"warn"`` (an implementation
whose docstring differs still binds; the difference is logged as a warning and kept in
:attr:`BoundAgent.warnings`, while names and schemas stay strict)."""

JSONSchema = dict[str, Any]

_BIND_CACHE_SIZE = 64
"""Bound agents a library remembers (the agent object is the key; it is kept alive)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolContext:
    """What a tool learns about the call it serves, when it asks for it.

    A tool receives it by declaring a parameter annotated ``ToolContext`` (any name; a
    parameter named ``ctx`` without annotation works too). The parameter is not part of the
    tool's schema.
    """

    conversation_id: str
    """Stable across the runs of one conversation (``Conversation.id``)."""
    run_id: str
    """The current run (``AgentResponse.run_id``; ``request_id`` of the events)."""
    call_id: str
    """The id of the call being served."""
    tool: str
    """The name of the tool being called."""
    state: dict[str, Any]
    """Per-conversation state, shared by the tools of one library (namespace your keys, e.g.
    ``state["python_repl.session"]``). Values with a ``close()`` method are closed when the
    library forgets the conversation (:meth:`ToolLibrary.forget`)."""


@dataclass(frozen=True, slots=True)
class Tool:
    """A tool implementation: its contract (name, description, schema) and a callable.

    ``invoke`` receives the validated arguments as keyword arguments; it may be a plain
    function (run in a worker thread, or inline on the event loop when ``blocking=False``) or a
    coroutine function (awaited on the event loop). Its return value is sent to the model: a
    ``str`` as is, anything else as compact JSON.

    Build tools from functions with :func:`tool`; construct them directly for a callable whose
    contract is written by hand.
    """

    name: str
    """The tool name; must equal the spec's name."""
    description: str
    """What the tool does; compared with the spec's description at bind time."""
    schema: JSONSchema
    """JSON Schema of the arguments object; compared with the spec's schema at bind time."""
    invoke: Callable[..., object]
    """The implementation, called with the arguments as keyword arguments."""
    _: KW_ONLY
    timeout: float | None | Inherit = INHERIT
    """Seconds one call may take; ``INHERIT`` takes ``RunLimits.tool_timeout``, None: none."""
    blocking: bool = True
    """Whether a plain-function ``invoke`` may block (I/O, sleeps, long computations): then it
    runs in a worker thread, the default. ``False`` declares it quick and CPU-light: it is
    called inline on the event loop, saving the thread hop (tens of microseconds per call),
    and the timeout cannot interrupt it (it finishes before anything else runs). A blocking
    call marked ``False`` stalls every run of the process. Ignored for coroutine functions."""
    requires_approval: bool = False
    """Whether a person must approve each call before it runs (as ``requiresApproval: true``
    in a gram spec; either one asks for it). See :func:`~gramagent.resume_agent`."""
    runs_alone: bool = False
    """Whether a call of this tool must not run alongside other calls of its turn (as
    ``runsAlone: true`` in a gram spec; either one asks for it): the calls before it in the
    turn end first, and those after it start once it has ended. For a tool that writes what
    other tools read, or holds a resource one call at a time."""
    signature: Signature | None = None
    """The gram signature; derived from ``schema`` when not given (None if inexpressible)."""
    context_param: str | None = None
    """The parameter receiving the :class:`ToolContext`; found from ``invoke`` if not given."""
    converters: Mapping[str, Callable[[object], object]] = field(default_factory=dict)
    """Per parameter, a function turning its JSON value into the annotated Python type."""
    is_async: bool = field(init=False, default=False)
    """Whether ``invoke`` is a coroutine function (derived)."""
    runs_inline: bool = field(init=False, default=False)
    """Whether a call runs inline on the event loop's thread: a plain function declared
    ``blocking=False`` (derived)."""
    accepts: frozenset[str] | None = field(init=False, default=None)
    """The argument names ``invoke`` takes (derived); None when it takes ``**kwargs``."""

    def __post_init__(self) -> None:
        if not callable(self.invoke):
            raise ToolError(f"tool {self.name!r}: invoke must be callable, got "
                            f"{type(self.invoke).__name__}")
        if self.timeout is not INHERIT:
            problem = limit_problem("timeout", self.timeout)
            if problem is not None:
                raise ToolError(f"tool {self.name!r}: {problem}")
        object.__setattr__(self, "is_async", _is_coroutine_function(self.invoke))
        object.__setattr__(self, "runs_inline", not (self.is_async or self.blocking))
        if self.context_param is None:
            object.__setattr__(self, "context_param", _find_context_param(self.invoke))
        object.__setattr__(self, "accepts", _accepted_names(self.invoke, self.context_param))
        if self.signature is None:
            object.__setattr__(self, "signature", _signature_of(self.schema))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the implementation directly (no validation, no context)."""
        return self.invoke(*args, **kwargs)

    def spec(self) -> ToolSpec:
        """This tool's contract as a spec (for writing an agent from Python tools).

        Raises:
            ToolError: the schema has no gram signature.
        """
        if self.signature is None:
            raise ToolError(f"tool {self.name!r}: its schema cannot be written as a gram "
                            "signature")
        return ToolSpec(name=self.name, description=self.description, signature=self.signature,
                        requires_approval=self.requires_approval, runs_alone=self.runs_alone)


@overload
def tool(func: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *, name: str | None = None, description: str | None = None,
    timeout: float | None | Inherit = INHERIT, blocking: bool = True,
    requires_approval: bool = False, runs_alone: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    func: Callable[..., Any] | None = None, /, *, name: str | None = None,
    description: str | None = None, timeout: float | None | Inherit = INHERIT,
    blocking: bool = True, requires_approval: bool = False, runs_alone: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a :class:`Tool` from a function, its type hints and its docstring.

    The description is the docstring's first paragraph, parameter descriptions come from the
    Google-style ``Args:`` section, and the schema from the type hints (see
    :mod:`gramagent._runtime.introspect`). The schema is the one the equivalent gram signature
    generates, so a Python tool and a gram spec can be compared, and ``Tool.signature`` gives
    that signature.

    Usable bare (``@tool``) or called (``@tool(name="greet", timeout=5)``).

    Args:
        func: the function (when used bare).
        name: the tool name; the function's name by default.
        description: overrides the docstring's first paragraph.
        timeout: seconds one call may take (default: the run's ``tool_timeout``).
        blocking: ``False`` runs a plain function inline on the event loop instead of in a
            worker thread; only for quick, non-blocking functions (see :attr:`Tool.blocking`).
        requires_approval: a person must approve each call before it runs (see
            :func:`~gramagent.resume_agent`).
        runs_alone: a call never runs alongside other calls of its turn (see
            :attr:`Tool.runs_alone`).

    Raises:
        ToolError: a parameter has no or an unsupported type hint, or there is no description.
    """

    def make(fn: Callable[..., object]) -> Tool:
        return _make_tool(fn, name=name, description=description, timeout=timeout,
                          blocking=blocking, requires_approval=requires_approval,
                          runs_alone=runs_alone)

    return make(func) if func is not None else make


def _make_tool(fn: Callable[..., object], *, name: str | None, description: str | None,
               timeout: float | None | Inherit, blocking: bool = True,
               requires_approval: bool = False, runs_alone: bool = False) -> Tool:
    contract = describe_function(fn, description=description, context_type=ToolContext)
    signature = Signature(
        params=tuple(Param(name=p.name, schema=p.schema, required=p.required)
                     for p in contract.params),
        returns=contract.returns,
    )
    return Tool(
        name or fn.__name__, contract.description, _schema_of(signature), fn,
        timeout=timeout, blocking=blocking, requires_approval=requires_approval,
        runs_alone=runs_alone, signature=signature, context_param=contract.context_param,
        converters=MappingProxyType(dict(contract.converters)),
    )


class ToolLibrary:
    """A registry of tool implementations by name; binds agents to them.

    Also keeps per-conversation state for tools that need it (:class:`ToolContext.state`),
    at most ``max_conversations`` conversations, least recently used forgotten first.
    """

    def __init__(self, tools: Iterable[Tool] = (), *, max_conversations: int = 1024) -> None:
        self._tools: dict[str, Tool] = {}
        self._states: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._states_lock = threading.Lock()
        self._bound: OrderedDict[tuple[int, DescriptionCheck], BoundAgent] = OrderedDict()
        self._unavailable: dict[str, str] = {}
        self.max_conversations = max_conversations
        for t in tools:
            self.register(t)

    @overload
    def register(self, obj: Tool | Callable[..., Any], /, *, replace: bool = False) -> Tool: ...

    @overload
    def register(
        self, /, *, name: str | None = None, description: str | None = None,
        timeout: float | None | Inherit = INHERIT, blocking: bool = True,
        requires_approval: bool = False, runs_alone: bool = False, replace: bool = False,
    ) -> Callable[[Callable[..., Any]], Tool]: ...

    def register(
        self, obj: Tool | Callable[..., Any] | None = None, /, *, name: str | None = None,
        description: str | None = None, timeout: float | None | Inherit = INHERIT,
        blocking: bool = True, requires_approval: bool = False, runs_alone: bool = False,
        replace: bool = False,
    ) -> Tool | Callable[[Callable[..., Any]], Tool]:
        """Add a tool: a :class:`Tool`, or a function (made into one with :func:`tool`).

        Works as a decorator, bare (``@library.register``) or called
        (``@library.register(name="greet")``); the decorated name is bound to the Tool.

        Raises:
            ToolError: a tool of that name is registered already (pass ``replace=True``).
        """

        def add(target: Tool | Callable[..., object]) -> Tool:
            t = target if isinstance(target, Tool) else _make_tool(
                target, name=name, description=description, timeout=timeout,
                blocking=blocking, requires_approval=requires_approval,
                runs_alone=runs_alone)
            if not replace and t.name in self._tools:
                raise ToolError(f"a tool named {t.name!r} is registered already "
                                "(pass replace=True to replace it)")
            self._tools[t.name] = t
            self._unavailable.pop(t.name, None)
            self._bound.clear()
            return t

        return add(obj) if obj is not None else add

    def lookup(self, name: str) -> Tool | None:
        """The tool called ``name``, or None."""
        return self._tools.get(name)

    def names(self) -> tuple[str, ...]:
        """Tool names, in registration order."""
        return tuple(self._tools)

    def mark_unavailable(self, name: str, reason: str) -> None:
        """Record that the tool ``name`` belongs here but cannot run in this installation.

        Binding an agent that uses it, or looking it up from the command line, then gives
        ``reason`` (say, the missing extra and its install command) instead of "no
        implementation". Registering a tool of that name clears the mark.
        """
        if name not in self._tools:
            self._unavailable[name] = reason
            self._bound.clear()

    @property
    def unavailable(self) -> Mapping[str, str]:
        """Tools marked with :meth:`mark_unavailable`: name -> why they cannot run here."""
        return MappingProxyType(self._unavailable)

    def missing_reason(self, name: str) -> str:
        """Why no tool ``name`` is here: not available (and why), or near names."""
        if name in self._unavailable:
            return f"is not available here: {self._unavailable[name]}"
        near = near_names(name, self._tools.keys())
        hint = f"; did you mean {', '.join(map(repr, near))}?" if near else ""
        return f"has no implementation in the library{hint}"

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"ToolLibrary({list(self._tools)!r})"

    def bind(self, agent: Agent, *, check_description: DescriptionCheck = True) -> BoundAgent:
        """Bind every tool spec of ``agent`` to its implementation here.

        Checks, for each spec: an implementation exists (else near names are suggested), its
        description matches (whitespace-normalized; skipped with ``check_description=False``,
        which also ignores parameter descriptions; with ``"warn"`` a differing description is
        a warning, not a problem: the A/B case of two implementations documented differently),
        and its schema matches (compared canonically: key order, ``required`` order and the
        gram round trip do not matter). The model always sees the spec's descriptions.

        The result is cached per agent object (until a tool is registered), so binding the
        same agent on every run is a dictionary lookup.

        Raises:
            ToolError: listing every problem found, not only the first.
        """
        key = (id(agent), check_description)
        cached = self._bound.get(key)
        if cached is not None and cached.agent is agent:
            return cached
        problems: list[str] = []
        warnings: list[str] = []
        tools: dict[str, Tool] = {}
        for spec in agent.tools:
            impl = self._tools.get(spec.name)
            if impl is None:
                problems.append(f"tool {spec.name!r} of agent {agent.name!r} "
                                f"{self.missing_reason(spec.name)}")
                continue
            if check_description == "warn":
                problems.extend(contract_problems(spec, impl, check_description=False))
                if _norm_text(impl.description) != _norm_text(spec.description):
                    warnings.append(_description_difference(spec, impl))
            else:
                problems.extend(contract_problems(spec, impl,
                                                  check_description=check_description))
            tools[spec.name] = impl
        if problems:
            raise ToolError(problems)
        bound = BoundAgent.build(agent, self, tools, warnings=tuple(warnings))
        for warning in warnings:
            logger.warning("binding agent %r: %s", agent.name, warning)
        self._bound[key] = bound
        while len(self._bound) > _BIND_CACHE_SIZE:
            self._bound.popitem(last=False)
        return bound

    def conversation_state(self, conversation_id: str) -> dict[str, Any]:
        """The state dict of a conversation (created empty on first use)."""
        evicted: list[dict[str, Any]] = []
        with self._states_lock:
            state = self._states.get(conversation_id)
            if state is None:
                state = self._states[conversation_id] = {}
                while len(self._states) > self.max_conversations:
                    evicted.append(self._states.popitem(last=False)[1])
            else:
                self._states.move_to_end(conversation_id)
        for old in evicted:
            _close_values(old)
        return state

    def forget(self, conversation_id: str | None = None) -> None:
        """Drop the state of one conversation (or of all), closing values that can close."""
        with self._states_lock:
            if conversation_id is None:
                dropped = list(self._states.values())
                self._states.clear()
            else:
                state = self._states.pop(conversation_id, None)
                dropped = [state] if state is not None else []
        for state in dropped:
            _close_values(state)


@dataclass(frozen=True, slots=True, kw_only=True)
class BoundAgent:
    """An agent whose tool specs are bound to implementations; what the loop runs.

    Built by :meth:`ToolLibrary.bind`. Everything derived here (definitions, strict schemas,
    validators) is computed once.
    """

    agent: Agent
    library: ToolLibrary
    tools: Mapping[str, Tool]
    """Implementation per tool name, in the agent's order."""
    definitions: tuple[ToolDefinition, ...]
    """What the model is told about each tool (the spec's description and schema)."""
    validators: Mapping[str, Callable[[object], list[str]]]
    """Per tool name, a function returning the schema violations of an arguments object."""
    schemas: Mapping[str, JSONSchema]
    """Per tool name, the spec's arguments schema (for validation and error messages)."""
    warnings: tuple[str, ...] = ()
    """Differences accepted at bind time (descriptions, with ``check_description="warn"``)."""
    approval_required: frozenset[str] = frozenset()
    """The tools whose calls a person must approve (the spec or the implementation says
    so)."""
    runs_alone: frozenset[str] = frozenset()
    """The tools whose calls run alone, never alongside other calls of their turn (the spec
    or the implementation says so)."""

    @classmethod
    def build(cls, agent: Agent, library: ToolLibrary, tools: Mapping[str, Tool],
              *, warnings: tuple[str, ...] = ()) -> BoundAgent:
        """Compile definitions and validators for already checked ``tools``."""
        # Imported here: jsonschema is slow to import, and needed only to bind.
        from gramagent._spec.calls.validate import compile_validator
        from gramagent._spec.schema.strict import strict_schema

        definitions = []
        validators: dict[str, Callable[[object], list[str]]] = {}
        schemas: dict[str, JSONSchema] = {}
        for spec in agent.tools:
            strict = strict_schema(spec.schema)
            definitions.append(ToolDefinition(
                name=spec.name, description=spec.description, parameters=spec.schema,
                strict_parameters=strict.schema if strict.ok else None,
            ))
            validators[spec.name] = compile_validator(spec.schema).errors
            schemas[spec.name] = spec.schema
        return cls(
            agent=agent, library=library,
            tools=MappingProxyType({s.name: tools[s.name] for s in agent.tools}),
            definitions=tuple(definitions), validators=MappingProxyType(validators),
            schemas=MappingProxyType(schemas), warnings=warnings,
            approval_required=frozenset(
                s.name for s in agent.tools
                if s.requires_approval or tools[s.name].requires_approval),
            runs_alone=frozenset(
                s.name for s in agent.tools if s.runs_alone or tools[s.name].runs_alone),
        )

    @property
    def name(self) -> str:
        return self.agent.name


# ---------------------------------------------------------------------------------------------
# Contract comparison
# ---------------------------------------------------------------------------------------------

def contract_problems(spec: ToolSpec, impl: Tool, *, check_description: bool = True
                      ) -> list[str]:
    """How ``impl`` differs from ``spec`` (name, description, schema); empty when it matches."""
    out = []
    if impl.name != spec.name:
        out.append(f"tool {spec.name!r}: the implementation is named {impl.name!r}")
    if check_description and _norm_text(impl.description) != _norm_text(spec.description):
        out.append(_description_difference(spec, impl))
    want = canonical_schema(spec.schema, descriptions=check_description)
    got = canonical_schema(impl.schema, descriptions=check_description)
    if want != got:
        diffs = schema_differences(want, got)
        out.append(f"tool {spec.name!r}: schema differs from the spec: " + "; ".join(diffs[:5])
                   + (f"; and {len(diffs) - 5} more" if len(diffs) > 5 else ""))
    return out


def _description_difference(spec: ToolSpec, impl: Tool) -> str:
    return (f"tool {spec.name!r}: description differs: spec says {_short(spec.description)!r}, "
            f"implementation says {_short(impl.description)!r}")


def canonical_schema(schema: Mapping[str, object], *, descriptions: bool = True) -> object:
    """A form of ``schema`` in which equivalent schemas are equal.

    The schema goes through the gram round trip (schema -> signature -> schema) where it can,
    so a hand-written schema and a generated one compare alike; ``required`` lists are sorted;
    with ``descriptions=False`` every ``description`` is dropped.
    """
    try:
        normal: Mapping[str, object] = _schema_of(_signature_from_schema(schema))
    except SchemaError:
        normal = schema
    return _canon(normal, descriptions)


def _canon(node: object, descriptions: bool) -> object:
    if isinstance(node, Mapping):
        out: dict[str, object] = {}
        for key, value in node.items():
            if key == "description" and not descriptions and isinstance(value, str):
                continue
            if key == "required" and isinstance(value, list):
                out[key] = sorted(value)
            elif key == "properties" and isinstance(value, Mapping):
                out[key] = {k: _canon(v, descriptions) for k, v in value.items()}
            else:
                out[key] = _canon(value, descriptions)
        return out
    if isinstance(node, list):
        return [_canon(v, descriptions) for v in node]
    return node


def schema_differences(want: object, got: object, path: str = "") -> list[str]:
    """Human-readable differences between two canonical schemas (spec first)."""
    where = path or "/"
    if isinstance(want, dict) and isinstance(got, dict):
        out: list[str] = []
        for key in sorted(want.keys() | got.keys(), key=str):
            sub = f"{path}/{key}"
            if key not in got:
                out.append(f"{sub}: in the spec ({_short_json(want[key])}), missing in the "
                           "implementation")
            elif key not in want:
                out.append(f"{sub}: in the implementation ({_short_json(got[key])}), not in "
                           "the spec")
            else:
                out.extend(schema_differences(want[key], got[key], sub))
        return out
    if want != got:
        return [f"{where}: spec {_short_json(want)} vs implementation {_short_json(got)}"]
    return []


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------

def _schema_of(signature: Signature) -> JSONSchema:
    # Imported here, to keep start-up light (the gram signature reader): only for specs.
    from gramagent._spec.signature import signature_to_schema

    return signature_to_schema(signature)


def _signature_from_schema(schema: Mapping[str, object]) -> Signature:
    # Imported here, as in _schema_of.
    from gramagent._spec.signature import schema_to_signature

    return schema_to_signature(dict(schema))


def _signature_of(schema: Mapping[str, object]) -> Signature | None:
    try:
        return _signature_from_schema(schema)
    except SchemaError:
        return None


def _is_coroutine_function(func: Callable[..., object]) -> bool:
    if inspect.iscoroutinefunction(func):
        return True
    call = getattr(func, "__call__", None)  # noqa: B004 - callable objects with async __call__
    return call is not None and inspect.iscoroutinefunction(call)


def _find_context_param(func: Callable[..., object]) -> str | None:
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return None
    for p in params:
        ann = p.annotation
        if ann is ToolContext or ann == "ToolContext" or (
                ann is inspect.Parameter.empty and p.name == "ctx"):
            return p.name
    return None


def _accepted_names(func: Callable[..., object], context_param: str | None
                    ) -> frozenset[str] | None:
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return None
    names = set()
    for p in params:
        if p.kind is p.VAR_KEYWORD:
            return None
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != context_param:
            names.add(p.name)
    return frozenset(names)


def _close_values(state: Mapping[str, object]) -> None:
    for value in list(state.values()):
        close = getattr(value, "close", None)
        if callable(close):
            try:
                close()
            except Exception:  # a failing close must not break the library
                import logging

                logging.getLogger(__name__).exception("closing conversation state failed")


def _norm_text(text: str) -> str:
    return " ".join(text.split())


def _short(text: str, limit: int = 80) -> str:
    text = _norm_text(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _short_json(value: object, limit: int = 80) -> str:
    import json

    return _short(json.dumps(value, sort_keys=True, ensure_ascii=False), limit)
