"""Helpers for testing agents and adapters: a scripted OpenAI-compatible server, an event sink.

:class:`ScriptedServer` answers Chat Completions, Responses and Harmony (``/v1/completions``)
requests on 127.0.0.1 from a script of turns, so a test drives the real loop over real HTTP::

    from gramagent.testing import ScriptedServer, call, reply

    with ScriptedServer([call("sayHello", {"personName": "Alice"}), reply("Hi Alice!")]) as srv:
        ...  # run_agent(agent, "hi", library=lib, model="openai/any", base_url=srv.base_url)

:class:`CaptureSink` keeps every tool-call event of a run in memory. ``python -m
gramagent.testing --script FILE`` serves a JSON script from the command line.
"""

from gramagent._runtime.events import CaptureSink
from gramagent.testing._scripted import (
    RecordedRequest,
    ScriptCall,
    ScriptCalls,
    ScriptCompletion,
    ScriptDrop,
    ScriptedServer,
    ScriptError,
    ScriptHTTP,
    ScriptReply,
    ScriptTurn,
    call,
    calls,
    completion,
    drop,
    error,
    http_response,
    load_script,
    reply,
    turn_from_dict,
)

__all__ = [
    "CaptureSink",
    "RecordedRequest",
    "ScriptCall",
    "ScriptCalls",
    "ScriptCompletion",
    "ScriptDrop",
    "ScriptError",
    "ScriptHTTP",
    "ScriptReply",
    "ScriptTurn",
    "ScriptedServer",
    "call",
    "calls",
    "completion",
    "drop",
    "error",
    "http_response",
    "load_script",
    "reply",
    "turn_from_dict",
]
