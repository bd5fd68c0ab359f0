"""Helpers for testing agents and adapters: a scripted OpenAI-compatible server, in-process
models, an event sink.

:class:`ScriptedServer` answers Chat Completions, Responses and Harmony (``/v1/completions``)
requests on 127.0.0.1 from a script of turns, so a test drives the real loop over real HTTP::

    from gramagent.testing import ScriptedServer, call, reply

    with ScriptedServer([call("sayHello", {"personName": "Alice"}), reply("Hi Alice!")]) as srv:
        ...  # run_agent(agent, "hi", library=lib, model="openai/any", base_url=srv.base_url)

:class:`ScriptedModel` answers the same script in process (no HTTP, no wire format) and
:class:`FunctionModel` answers with a function of each request: models to pass as
``run_agent(..., model=...)`` where a test is about the loop, not the wire.

:class:`CaptureSink` keeps every tool-call event of a run in memory. ``python -m
gramagent.testing --script FILE`` serves a JSON script from the command line.
"""

from gramagent._runtime.events import CaptureSink as CaptureSink
from gramagent.testing import _inprocess, _scripted
from gramagent.testing._inprocess import *  # noqa: F403 - listed once there
from gramagent.testing._scripted import *  # noqa: F403 - the server's names, listed once there

__all__ = sorted(["CaptureSink", *_inprocess.__all__, *_scripted.__all__])
