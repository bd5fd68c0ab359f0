"""RunHooks as the one vocabulary for observing a run, over real HTTP: the tool-call events an
event sink gets are the events the hooks get (``on_event``), in the same order, each call's
result before the hooks hear of its turn's results."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from runtime_support import APIS, ModelFactory, Tools, make_agent, script

from gramagent import RunHooks, ToolInvocation, run_agent
from gramagent._runtime.events import CaptureSink, Event
from gramagent._runtime.limits import RunLimits
from gramagent.testing import ScriptedServer, call, calls, reply


class Recording(RunHooks):
    """Hooks that note every event and when each turn's results came."""

    streams = False

    def __init__(self) -> None:
        self.seen: list[str | Event] = []

    def on_event(self, event: Event) -> None:
        self.seen.append(event)

    def on_tool_results(self, invocations: Sequence[ToolInvocation]) -> None:
        self.seen.append(f"results of {len(invocations)}")


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns=st.lists(st.lists(st.sampled_from(["Alice", "Bob", 7]), min_size=1, max_size=3),
                      min_size=1, max_size=2),
       api=st.sampled_from(APIS), with_sink=st.booleans())
async def test_the_hooks_get_the_events_the_sinks_get(
        turns: list[list[str | int]], api: str, with_sink: bool, tools: Tools,
        model_for: ModelFactory) -> None:
    """Valid and invalid calls over one or two turns: the hooks' events equal a sink's (with
    or without a sink beside them), and every result event of a turn comes before the hooks
    are told of that turn's results."""
    hooks, sink = Recording(), CaptureSink()
    with ScriptedServer() as server:
        script(server, *(calls(*(call("sayHello", {"personName": name}) for name in turn))
                         for turn in turns), reply("done"))
        response = await run_agent(make_agent(tools.library), "Go", library=tools.library,
                                   model=model_for(server, api), hooks=hooks,
                                   limits=RunLimits(max_invalid_calls_per_tool=None),
                                   events=sink if with_sink else None)
    events = [e for e in hooks.seen if not isinstance(e, str)]
    assert len(events) == 2 * len(response.tool_invocations)
    if with_sink:
        assert events == sink.events
    # Each turn's results are told after that turn's result events, none after.
    answered = 0
    for index, entry in enumerate(hooks.seen):
        if isinstance(entry, str):
            answered += int(entry.split()[-1])
            results = [e for e in hooks.seen[:index]
                       if not isinstance(e, str) and e.kind == "tool_call_result"]
            assert len(results) == answered
