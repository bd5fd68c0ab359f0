"""What a run needs before its first request: a bound agent, a model, a conversation."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from gramagent._messages import Conversation, Message
from gramagent._models.base import Model
from gramagent._models.registry import resolve_model
from gramagent._runtime.library import BoundAgent, Tool, ToolLibrary
from gramagent._spec.model import Agent, ModelRef, ToolSpec
from gramagent.errors import ConfigurationError, ToolError

__all__ = ["bind", "conversation_for", "model_for", "new_id", "new_ids", "request_settings"]


def bind(agent: Agent | BoundAgent, library: ToolLibrary | None, *, dry_run: bool
         ) -> BoundAgent:
    """``agent`` bound to ``library``; without a library, to stubs of its specs (dry runs and
    agents without tools only).

    Raises:
        ToolError: the agent declares tools, no library was given and this is no dry run; or
            binding failed.
    """
    if isinstance(agent, BoundAgent):
        return agent
    if library is None:
        if agent.tools and not dry_run:
            names = ", ".join(repr(t.name) for t in agent.tools)
            raise ToolError(f"agent {agent.name!r} declares tools ({names}) but no library was "
                            "given: pass library=... (e.g. gramagent.tools.builtin_library())")
        library = ToolLibrary(_spec_stub(spec) for spec in agent.tools)
    return library.bind(agent)


def model_for(options: Mapping[str, Any], agent: Agent) -> tuple[Model, str, bool]:
    """The model a run talks to, the model name it sends, and whether the run owns (closes) it.

    ``options`` are the run's (``model``, and ``api``, ``base_url``, ``api_key`` read only
    when a reference is resolved). A :class:`Model` is used as is, under the name of the model
    it was made for (its ``model_name``: the adapters of ``resolve_model`` and the embedded
    model know it), else the agent's model name; a reference (or None: the agent's own) is
    resolved with ``api``, ``base_url`` and ``api_key``.

    Raises:
        ConfigurationError: the reference cannot be resolved.
    """
    model = options.get("model")
    # A tuple, not ``str | ModelRef``, which would build a union object on every run.
    if model is not None and not isinstance(model, (str, ModelRef)):
        return model, getattr(model, "model_name", None) or agent.model.name, False
    ref = (model if isinstance(model, ModelRef)
           else ModelRef.parse(model) if isinstance(model, str) else agent.model)
    return resolve_model(ref, api=options.get("api"), base_url=options.get("base_url"),
                         api_key=options.get("api_key")), ref.name, True


def request_settings(settings: Mapping[str, Any] | None) -> tuple[dict[str, Any], bool]:
    """A run's request settings, its own copy (a request pickles with it), and whether the
    calls of a turn may run alongside each other: ``parallel_tool_calls`` (default true),
    taken out of the settings. The loop owns that field: each adapter sends it where its
    wire format has one, and the loop runs the calls one at a time when it is false.

    Raises:
        ConfigurationError: ``parallel_tool_calls`` is not ``true`` or ``false``.
    """
    if not settings:
        return {}, True
    own = dict(settings)
    parallel = own.pop("parallel_tool_calls", True)
    if not isinstance(parallel, bool):
        raise ConfigurationError("settings: parallel_tool_calls must be true or false, got "
                                 f"a value of type {type(parallel).__name__}")
    return own, parallel


def conversation_for(context: Conversation | Iterable[Message] | None) -> Conversation:
    """A new conversation, or a copy of ``context`` to continue (never modified)."""
    if context is None:
        return Conversation((), new_id())
    if isinstance(context, Conversation):
        return context.copy()
    return Conversation(context)


def new_id() -> str:
    """A random id of 32 hex digits (run and conversation ids)."""
    return os.urandom(16).hex()


def new_ids() -> tuple[str, str]:
    """Two ids as :func:`new_id` makes them (a new conversation's and its run's), from one read
    of the OS's randomness."""
    both = os.urandom(32).hex()
    return both[:32], both[32:]


def _spec_stub(spec: ToolSpec) -> Tool:
    """A tool that only carries a spec's contract; dry runs never call it."""

    def not_run(**_: object) -> object:
        raise NotImplementedError(f"{spec.name} has no implementation (dry run)")

    return Tool(spec.name, spec.description, spec.schema, not_run, signature=spec.signature)
