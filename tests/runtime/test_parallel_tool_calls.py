"""``parallel_tool_calls`` and tools that run alone, over real HTTP in every wire format.

``parallel_tool_calls: false`` in a run's settings used to be sent as ``true`` (the loop's own
field won over the settings) and nothing ran the calls of a turn one at a time. The tools here
note when each call enters and exits; two calls overlap when one enters between the other's
entry and exit (no clock is read).
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from runtime_support import APIS, INPROCESS, PARALLEL_APIS, InProcess, ModelFactory, script

from gramagent._models.registry import resolve_model
from gramagent._runtime.library import ToolLibrary
from gramagent._runtime.loop import AgentResponse, run_agent
from gramagent._spec.gram.text import load_gram
from gramagent._spec.model import Agent
from gramagent.errors import ConfigurationError
from gramagent.experiments import Variant
from gramagent.testing import ScriptedServer, call, calls, reply

KINDS = ("async", "thread", "inline", "alone_async", "alone_thread", "alone_spec")
"""The tools of :func:`recording_tools`: ``alone_*`` run alone (``runs_alone=True`` on the
implementation; ``alone_spec`` by its gram spec's ``runsAlone: true``)."""
ALONE = frozenset({"alone_async", "alone_thread", "alone_spec"})
PARALLEL_SETTINGS = (None, True, False)
"""``parallel_tool_calls`` in the run's settings: absent, true, false."""


@dataclass
class Recorder:
    """The enter and exit events of the calls, in the order they happened."""

    events: list[tuple[str, int]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def note(self, what: str, i: int) -> None:
        with self.lock:
            self.events.append((what, i))

    def span(self, i: int) -> tuple[int, int]:
        """Where call ``i`` entered and exited in :attr:`events`."""
        return self.events.index(("enter", i)), self.events.index(("exit", i))

    def overlap(self, i: int, j: int) -> bool:
        (a0, a1), (b0, b1) = self.span(i), self.span(j)
        return a0 < b1 and b0 < a1


def recording_tools(recorder: Recorder) -> ToolLibrary:
    """One tool of each kind of :data:`KINDS`, each noting its entry and exit; the async ones
    yield to the event loop twice in between (so calls let run together do overlap)."""
    library = ToolLibrary()

    async def stepped(i: int) -> str:
        recorder.note("enter", i)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        recorder.note("exit", i)
        return f"done {i}"

    def plain(i: int) -> str:
        recorder.note("enter", i)
        time.sleep(0)  # lets another thread in
        recorder.note("exit", i)
        return f"done {i}"

    library.register(stepped, name="async", description="Async.")
    library.register(plain, name="thread", description="In a thread.")
    library.register(plain, name="inline", description="Inline.", blocking=False)
    library.register(stepped, name="alone_async", description="Async, alone.", runs_alone=True)
    library.register(plain, name="alone_thread", description="In a thread, alone.",
                     runs_alone=True)
    library.register(plain, name="alone_spec", description="Alone by its spec.")
    return library


def recording_agent(library: ToolLibrary) -> Agent:
    """The agent of :func:`recording_tools`; ``alone_spec`` runs alone by its spec only."""
    specs = tuple(library.lookup(kind).spec() for kind in KINDS)  # type: ignore[union-attr]
    specs = tuple(dataclasses.replace(s, runs_alone=True) if s.name == "alone_spec" else s
                  for s in specs)
    return Agent(name="recorder", model="openai/scripted", instruction="Call the tools.",
                 tools=specs)


def run_settings(parallel: bool | None) -> dict[str, Any]:
    out: dict[str, Any] = {"temperature": 0}
    if parallel is not None:
        out["parallel_tool_calls"] = parallel
    return out


def sent_parallel(body: Any) -> object:
    """The ``parallel_tool_calls`` a request carried (``"absent"`` when it carried none)."""
    if isinstance(body, dict):
        return body.get("parallel_tool_calls", "absent")
    return body.parallel_tool_calls  # the in-process model's ModelRequest


def check_order(recorder: Recorder, kinds: Sequence[str], parallel: bool | None) -> None:
    """The property: with ``parallel_tool_calls`` false, no two calls overlap and they ran in
    call order; otherwise a call of a tool that runs alone overlaps none, the calls before it
    ended before it entered and those after it entered after it exited, and async calls
    with no such call between them do overlap (they run together)."""
    n = len(kinds)
    assert sorted(i for what, i in recorder.events if what == "enter") == list(range(n))
    if parallel is False:
        for i in range(n - 1):
            assert recorder.span(i)[1] < recorder.span(i + 1)[0], recorder.events
        return
    for a, kind in enumerate(kinds):
        if kind not in ALONE:
            continue
        enter, exit_ = recorder.span(a)
        for b in range(n):
            if b < a:
                assert recorder.span(b)[1] < enter, recorder.events
            elif b > a:
                assert recorder.span(b)[0] > exit_, recorder.events
    group: list[int] = []
    for i, kind in [*enumerate(kinds), (n, "alone_async")]:
        if kind in ALONE:
            stepped = [g for g in group if kinds[g] == "async"]
            if len(stepped) >= 2:
                assert recorder.overlap(stepped[0], stepped[1]), recorder.events
            group = []
        else:
            group.append(i)


async def run_turn(model: Any, kinds: Sequence[str], parallel: bool | None
                   ) -> tuple[Recorder, AgentResponse]:
    recorder = Recorder()
    library = recording_tools(recorder)
    response = await run_agent(recording_agent(library), "go", library=library, model=model,
                               settings=run_settings(parallel))
    return recorder, response


_PLANS = st.lists(st.sampled_from(KINDS), min_size=1, max_size=6)


@pytest.mark.slow
@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kinds=_PLANS, parallel=st.sampled_from(PARALLEL_SETTINGS))
@pytest.mark.parametrize("api", PARALLEL_APIS)
async def test_calls_of_one_turn_run_as_the_settings_and_tools_say(
        api: str, kinds: list[str], parallel: bool | None) -> None:
    """Over HTTP, in each format whose replies carry several calls: the body says what the
    settings say (absent: true), and the calls run one at a time, together, or around the
    calls that run alone, as :func:`check_order` states; results keep call order."""
    with ScriptedServer() as server:
        model = resolve_model("openai/scripted", api=api, base_url=server.base_url,
                              max_retries=0)
        script(server, calls(*(call(kind, {"i": i}, id=f"c{i}") for i, kind in
                               enumerate(kinds))), reply("done"))
        try:
            recorder, response = await run_turn(model, kinds, parallel)
        finally:
            await model.aclose()
        assert response.content == "done"
        assert [i.result for i in response.tool_invocations] == [
            f"done {i}" for i in range(len(kinds))]
        check_order(recorder, kinds, parallel)
        for recorded in server.requests:
            assert sent_parallel(recorded.body) == (parallel is not False)
            assert recorded.body["temperature"] == 0


@settings(max_examples=30, deadline=None)
@given(kinds=_PLANS, parallel=st.sampled_from(PARALLEL_SETTINGS))
async def test_calls_of_one_turn_in_process(kinds: list[str], parallel: bool | None) -> None:
    """As above on the in-process model (the fast suite's): the request says it, the settings
    passed on without the field."""
    srv = InProcess()
    srv.add(calls(*(call(kind, {"i": i}, id=f"c{i}") for i, kind in enumerate(kinds))),
            reply("done"))
    recorder, response = await run_turn(srv.model, kinds, parallel)
    assert response.content == "done"
    check_order(recorder, kinds, parallel)
    for asked in srv.model.requests:
        assert asked.parallel_tool_calls is (parallel is not False)
        assert dict(asked.settings) == {"temperature": 0}


@pytest.mark.parametrize("api", [INPROCESS, *(pytest.param(a, marks=pytest.mark.slow)
                                              for a in APIS)])
@pytest.mark.parametrize("parallel", PARALLEL_SETTINGS)
async def test_every_format_sends_the_setting_where_it_has_a_field(
        api: str, parallel: bool | None, server: ScriptedServer | InProcess,
        model_for: ModelFactory) -> None:
    """Every wire format, one call per reply (legacy functions and Harmony make no more):
    Chat Completions and Responses send the setting (true when absent); legacy functions and
    Harmony have no such field and send none (the setting is not passed through as a body
    field either); each call runs, one after another."""
    script(server, calls(call("thread", {"i": 0}, id="c0")),
           calls(call("alone_thread", {"i": 1}, id="c1")), reply("done"))
    recorder, response = await run_turn(model_for(server, api), ["thread", "alone_thread"],
                                        parallel)
    assert response.content == "done"
    assert recorder.span(0)[1] < recorder.span(1)[0]
    expected: object = parallel is not False
    if api in ("functions", "harmony"):
        expected = "absent"
    assert [sent_parallel(r.body) for r in server.requests] == [expected] * 3


def test_the_model_returning_several_calls_when_told_not_to_runs_them_in_order() -> None:
    """Told ``parallel_tool_calls: false``, a model that returns three calls anyway gets
    them run, one after another in call order (none dropped), in the same turn."""
    srv = InProcess()
    srv.add(calls(*(call("async", {"i": i}, id=f"c{i}") for i in range(3))), reply("done"))
    recorder, response = asyncio.run(run_turn(srv.model, ["async"] * 3, False))
    assert recorder.events == [(what, i) for i in range(3) for what in ("enter", "exit")]
    assert [i.call_id for i in response.tool_invocations] == ["c0", "c1", "c2"]
    assert len(srv.model.requests) == 2


@pytest.mark.parametrize("value", ["false", 0, None, [False]])
def test_a_parallel_setting_that_is_not_a_boolean_is_refused_before_any_request(
        value: object) -> None:
    """``"false"`` is not false: a run refuses it (ConfigurationError) before asking the model,
    and an experiment's variant reports it with its other problems."""
    srv = InProcess()
    srv.add(reply("never asked"))
    library = recording_tools(Recorder())
    with pytest.raises(ConfigurationError, match="parallel_tool_calls must be true or false"):
        asyncio.run(run_agent(recording_agent(library), "go", library=library,
                              model=srv.model, settings={"parallel_tool_calls": value}))
    assert srv.model.requests == []
    problems = Variant(name="v", settings={"parallel_tool_calls": value}).problems()
    assert any("parallel_tool_calls must be true or false" in p for p in problems)


def test_runs_alone_in_gram_goes_through_the_spec_and_back() -> None:
    """``runsAlone: true`` on a tool's gram record: read, written back, kept by ``to_dict``,
    and bound as a tool that runs alone; a value other than true or false is an error."""
    from gramagent._spec.gram.text import to_gram

    text = ('[writeFile:Tool {description: "Writes a file", runsAlone: true} |\n'
            '  (path::String)==>(::String)\n]\n')
    doc = load_gram(text)
    spec = doc.tools[0]
    assert spec.runs_alone and not spec.requires_approval
    assert to_gram(doc) == text
    assert type(spec).from_dict(spec.to_dict()) == spec
    assert spec.to_dict()["runs_alone"] is True
    library = ToolLibrary()

    @library.register(name="writeFile", description="Writes a file")
    def write(path: str) -> str:
        return path

    agent = Agent(name="a", model="openai/x", instruction="Write.", tools=(spec,))
    assert library.bind(agent).runs_alone == frozenset({"writeFile"})
    from gramagent.errors import SpecError
    with pytest.raises(SpecError, match="runsAlone must be true or false"):
        load_gram(text.replace("runsAlone: true", 'runsAlone: "yes"'))
