"""The public namespace of ``gramagent``: the pinned list of names, lazy imports, pickling."""

from __future__ import annotations

import importlib
import pickle
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pytest
from extras import require

import gramagent

ROOT = Path(__file__).resolve().parent.parent

EXPORTED = [
    "Agent",
    "AgentResponse",
    "AgentStream",
    "ApprovalError",
    "ApprovalRequest",
    "Approver",
    "AssistantMessage",
    "AuthenticationError",
    "BoundAgent",
    "CaptureSink",
    "ConfigurationError",
    "Conversation",
    "Decision",
    "Diagnostic",
    "EventSink",
    "FinalResponse",
    "GramDocument",
    "GramagentError",
    "INHERIT",
    "JSONLSink",
    "LimitExceeded",
    "MCPServerError",
    "Message",
    "Model",
    "ModelAPIError",
    "ModelRef",
    "ModelRequest",
    "ModelTurn",
    "NamedToolChoice",
    "Param",
    "Refused",
    "RunAgentOptions",
    "RunError",
    "RunHooks",
    "RunLimits",
    "SandboxError",
    "SchemaError",
    "SessionInfo",
    "SessionStore",
    "Signature",
    "SpecError",
    "StoredSession",
    "StreamEvent",
    "StreamingModel",
    "TextDelta",
    "Tool",
    "ToolCall",
    "ToolCallAnswered",
    "ToolCallPlanned",
    "ToolCallRequested",
    "ToolCallResult",
    "ToolChoice",
    "ToolContext",
    "ToolDefinition",
    "ToolError",
    "ToolInvocation",
    "ToolLibrary",
    "ToolMetrics",
    "ToolResultMessage",
    "ToolSpec",
    "Usage",
    "UserMessage",
    "ValidationError",
    "WireFormat",
    "args_preview_hash",
    "builtin_library",
    "format_signature",
    "load_agent",
    "load_file",
    "load_gram",
    "parse_signature",
    "register_wire_format",
    "resolve_model",
    "resume_agent",
    "resume_agent_stream",
    "run_agent",
    "run_agent_stream",
    "run_agent_sync",
    "schema_to_signature",
    "serve_metrics",
    "signature_to_schema",
    "strict_schema",
    "to_gram",
    "tool",
]


def test_all_is_the_pinned_sorted_list() -> None:
    """``__all__`` is exactly the curated list, sorted (case-sensitively), without repeats."""
    assert gramagent.__all__ == EXPORTED
    assert sorted(set(EXPORTED)) == EXPORTED


@pytest.mark.parametrize("name", EXPORTED)
def test_every_name_resolves_to_its_definition(name: str) -> None:
    """Each public name is the object its defining module holds (a re-export, not a copy),
    and ``dir(gramagent)`` lists it."""
    value = getattr(gramagent, name)
    home = importlib.import_module(f"gramagent.{gramagent._HOME[name]}")
    assert value is getattr(home, name)
    assert name in dir(gramagent)


def test_only_public_names_are_looked_up_lazily() -> None:
    """The lazy table covers ``__all__`` exactly; an unknown name is an AttributeError."""
    assert sorted(gramagent._HOME) == EXPORTED
    with pytest.raises(AttributeError, match="module 'gramagent' has no attribute 'nope'"):
        gramagent.nope  # noqa: B018


def test_import_gramagent_loads_no_submodule() -> None:
    """``import gramagent`` imports none of its submodules but the lazy-export helper (nor
    asyncio or httpx) until a name is used; ``import gramagent.errors`` loads only the error
    module."""
    code = (
        "import sys, gramagent, gramagent.errors\n"
        "print(sorted(m for m in sys.modules if m.startswith('gramagent')))\n"
        "print('asyncio' in sys.modules, 'httpx' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out == ["['gramagent', 'gramagent._lazy', 'gramagent.errors']", "False False"]


def test_typed_agent_file_runs() -> None:
    """``tests/typed_agent.py`` (mypy checks its types) also runs: every decorator form gives
    a Tool, registered in order; ``register(..., replace=True)`` adds a tool not yet there."""
    typed_agent = importlib.import_module("typed_agent")
    tools = (typed_agent.say_hello, typed_agent.lookup_record, typed_agent.shout,
             typed_agent.whisper_impl)
    assert all(isinstance(t, gramagent.Tool) for t in tools)
    assert typed_agent.library.names() == ("shout", "whisper", "say_hello", "lookup")


# -- pickling (process pools, Ray) and introspection of the re-exported types ------------------


def _error_state(err: BaseException) -> tuple[Any, ...]:
    attributes = ("diagnostics", "keyword", "path", "problems", "hint", "context", "usage",
                  "status", "body", "model", "limit", "value", "observed")
    return (type(err), err.args, str(err),
            {a: getattr(err, a) for a in attributes if hasattr(err, a)})


ERRORS = [
    gramagent.GramagentError("base"),
    gramagent.SpecError([gramagent.Diagnostic("bad key", file="a.gram", line=3, column=7),
                         gramagent.Diagnostic("no agent")]),
    gramagent.SchemaError("cannot express", keyword="patternProperties", path="/properties/x"),
    gramagent.ValidationError("empty user message"),
    gramagent.ConfigurationError("no API key"),
    gramagent.ToolError(["sayHello: no implementation", "chart: schema differs"]),
    gramagent.ToolError(["chart: no implementation"], hint="pass --tools"),
    gramagent.RunError("stopped", context=gramagent.Conversation(
        [gramagent.UserMessage(content="Hi")], id="c1"), usage=gramagent.Usage(requests=1)),
    gramagent.ModelAPIError("HTTP 503", status=503, body="overloaded", model="m",
                            usage=gramagent.Usage(input_tokens=5, output_tokens=1, requests=1)),
    gramagent.AuthenticationError("HTTP 401", status=401, body="invalid key", model="m",
                                  context=gramagent.Conversation(id="c3")),
    gramagent.LimitExceeded("too many turns", limit="max_iterations", value=3, observed=4,
                            context=gramagent.Conversation(id="c2")),
    gramagent.ApprovalError("the approve callback raised", context=gramagent.Conversation(
        id="c4"), usage=gramagent.Usage(requests=1)),
    gramagent.MCPServerError("MCP server x did not answer", server="x", kind="timeout"),
]


@pytest.mark.parametrize("err", ERRORS, ids=lambda e: type(e).__name__)
def test_errors_pickle_with_their_state(err: BaseException) -> None:
    """Every public error comes back from pickle with its type, message and fields."""
    assert _error_state(pickle.loads(pickle.dumps(err))) == _error_state(err)


@pytest.mark.parametrize("path", ["examples/hello_world.gram", "examples/analyst.gram",
                                  "tests/fixtures/shared_types.gram"])
def test_spec_objects_pickle(path: str) -> None:
    """Documents, agents and tool specs read from gram come back equal from pickle, and
    write the same gram text (formatting metadata survives too)."""
    document = gramagent.load_file(ROOT / path)
    again = pickle.loads(pickle.dumps(document))
    assert again == document
    assert gramagent.to_gram(again) == gramagent.to_gram(document)
    for agent in document.agents:
        assert pickle.loads(pickle.dumps(agent)) == agent
    signature = gramagent.parse_signature("(city::String)==>(::String)")
    assert pickle.loads(pickle.dumps(signature)) == signature


def test_conversations_pickle_with_their_id() -> None:
    """A conversation keeps its messages and its id through pickle."""
    conversation = gramagent.Conversation([
        gramagent.UserMessage(content="Hi"),
        gramagent.AssistantMessage(tool_calls=(
            gramagent.ToolCall(id="c1", name="sayHello", arguments="{}"),)),
        gramagent.ToolResultMessage(call_id="c1", name="sayHello", content="Hello!"),
    ], id="conv-1")
    again = pickle.loads(pickle.dumps(conversation))
    assert again == conversation and again.id == "conv-1"


@pytest.mark.parametrize("name", [n for n in EXPORTED if isinstance(getattr(gramagent, n), type)])
def test_exported_classes_keep_their_module_for_type_hints(name: str) -> None:
    """Annotations of the exported classes resolve: their ``__module__`` stays the defining
    module (postponed annotations are evaluated there, not in ``gramagent``)."""
    cls = getattr(gramagent, name)
    assert cls.__module__ == f"gramagent.{gramagent._HOME[name]}"
    typing.get_type_hints(cls)


# -- the public modules --------------------------------------------------------------------------

PUBLIC_MODULES = [
    "gramagent",
    "gramagent.errors",
    "gramagent.experiments",
    "gramagent.mcp",
    "gramagent.testing",
    "gramagent.tools",
    "gramagent.tools.sandbox",
]
"""Every module whose dotted name has no part starting with ``_``: the documented public
surface (docs/architecture.md). Everything else is private by its name."""


def _all_modules() -> list[str]:
    package = Path(gramagent.__file__).resolve().parent
    names = []
    for path in package.rglob("*.py"):
        parts = path.relative_to(package.parent).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return sorted(names)


def test_public_modules_are_the_pinned_set() -> None:
    """A new module is private (``_name``) unless it is added here and documented."""
    public = [m for m in _all_modules()
              if not any(part.startswith("_") for part in m.split(".")[1:])]
    assert public == PUBLIC_MODULES


@pytest.mark.parametrize("module", PUBLIC_MODULES)
def test_public_modules_declare_a_sorted_resolvable_all(module: str) -> None:
    """Each public module says what it exports (``__all__``, sorted) and every name exists."""
    needs = {"gramagent.mcp": "mcp", "gramagent.experiments": "experiments"}.get(module)
    if needs is not None:  # its names need the extra (they say so when it is missing)
        require(needs)
    mod = importlib.import_module(module)
    exported = list(mod.__all__)
    assert exported == sorted(exported)
    assert all(getattr(mod, name, None) is not None for name in exported)


TESTING_EXPORTED = [
    "CaptureSink", "FunctionModel", "ModelFunction", "RecordedRequest", "ScriptCall",
    "ScriptCalls", "ScriptCompletion", "ScriptDrop", "ScriptError", "ScriptHTTP", "ScriptReply",
    "ScriptTurn", "ScriptedModel", "ScriptedServer", "call", "calls", "completion", "drop",
    "error", "http_response", "load_script", "main", "reply", "turn_from_dict",
]


def test_the_testing_module_exports_the_pinned_list() -> None:
    """``gramagent.testing`` exports the scripted server, its turns, the in-process models
    (each a StreamingModel, documented) and the capture sink: exactly the pinned list."""
    testing = importlib.import_module("gramagent.testing")
    assert testing.__all__ == TESTING_EXPORTED
    for name in ("FunctionModel", "ScriptedModel"):
        model_class = getattr(testing, name)
        assert model_class.__doc__ and model_class.__module__ == "gramagent.testing._inprocess"
        assert issubclass(model_class, gramagent.StreamingModel)
