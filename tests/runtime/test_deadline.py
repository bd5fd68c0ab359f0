"""The deadlines of runs and tool calls: one timer per event loop, whichever loops come and go."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import weakref
from collections.abc import Coroutine
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gramagent._messages import Conversation
from gramagent._models.base import ModelRequest, ModelTurn
from gramagent._runtime.budget import Budget
from gramagent._runtime.deadline import RunDeadline, watcher
from gramagent._runtime.limits import RunLimits
from gramagent._runtime.loop import run_agent
from gramagent._runtime.threads import hand_off
from gramagent._spec.model import Agent, ModelRef
from gramagent.errors import LimitExceeded, ModelAPIError


async def under(deadline: RunDeadline, work: Coroutine[Any, Any, None]) -> None:
    """Await ``work`` under ``deadline`` as the loop and the tool calls do (the pattern of
    deadline.py's docstring), raising TimeoutError in place of the deadline's cancellation as
    ``asyncio.timeout`` does."""
    deadline.start()
    try:
        await work
    except asyncio.CancelledError:
        if deadline.cut_short():
            raise TimeoutError from None
        raise
    finally:
        deadline.settle()


async def cut_short(seconds: float, wait: float) -> bool:
    """Whether a deadline ``seconds`` away cuts a wait of ``wait`` seconds short."""
    deadline = RunDeadline(asyncio.get_running_loop().time() + seconds)
    deadline.arm()
    try:
        await under(deadline, asyncio.sleep(wait))
    except TimeoutError:
        assert deadline.expired
        return True
    finally:
        deadline.disarm()
    return False


@pytest.mark.parametrize("loops", [1, 3])
def test_deadlines_fire_on_every_event_loop_in_turn(loops: int) -> None:
    """Event loops one after another (as run_agent_sync makes them) each get their own timer:
    a deadline fires on each, and one far away cuts nothing short."""
    for _ in range(loops):
        assert asyncio.run(cut_short(0.01, 5))
        assert not asyncio.run(cut_short(5, 0))


async def test_deadlines_of_several_calls_on_one_loop() -> None:
    """Deadlines armed together fire each at its own time; a far one leaves its wait alone."""
    results = await asyncio.gather(cut_short(0.01, 5), cut_short(0.02, 5), cut_short(5, 0.05))
    assert list(results) == [True, True, False]


@pytest.mark.parametrize("wall_time", [None, 2.5])
def test_a_budget_starts_as_a_deadline_does(wall_time: float | None) -> None:
    """A budget's deadline starts as a RunDeadline at the end of its wall time does: every
    one of its fields."""
    limits = RunLimits(wall_time=wall_time)
    budget = Budget(limits, Conversation(), 10.0)
    deadline = RunDeadline(None if wall_time is None else 10.0 + wall_time)
    # A compiled build's native class names its attributes in __mypyc_attrs__, not __slots__.
    fields = [name for cls in RunDeadline.__mro__ for name in
              getattr(cls, "__slots__", None) or getattr(cls, "__mypyc_attrs__", ())]
    assert fields
    assert ({f: getattr(budget.deadline, f) for f in fields}
            == {f: getattr(deadline, f) for f in fields})


@settings(max_examples=20, deadline=None)
@given(st.lists(st.sampled_from(["outer", "deadline"]), max_size=2, unique=True),
       st.sampled_from(["waits", "raises", "swallows"]))
async def test_a_deadline_gives_way_to_another_cancellation(fired: list[str], await_: str
                                                            ) -> None:
    """The rule of ``asyncio.timeout`` (which the loop's model requests share through
    ``cut_short``): the await under the deadline raises TimeoutError only when the deadline
    alone cancelled it; a cancellation from elsewhere, in the same turn of the event loop
    before or after the deadline's, passes through as CancelledError; an await that
    swallows the cancellation ends as it returns; afterwards the task counts no cancellation
    of the deadline's and nothing is under it any more."""

    async def scenario() -> str:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        deadline = RunDeadline(loop.time() + 3600)
        deadline.arm()

        def fire() -> None:
            for what in fired:
                if what == "outer":
                    task.cancel()
                else:
                    deadline.expire()

        async def work() -> None:
            try:
                await asyncio.sleep(0 if not fired else 3600)
            except asyncio.CancelledError:
                if await_ != "swallows":
                    raise
            if await_ == "raises":
                raise ValueError("the await's own error")

        loop.call_soon(fire)
        try:
            await under(deadline, work())
            outcome = "done"
        except TimeoutError:
            outcome = "timeout"
        except ValueError:
            outcome = "error"
        except asyncio.CancelledError:
            outcome = "cancelled"
            task.uncancel()  # the outer cancellation, handled here
        finally:
            deadline.disarm()
        assert deadline.waiting is None
        if await_ == "swallows" and "outer" in fired:
            assert task.uncancel() == 0  # the outer cancellation, swallowed: the await's doing
        assert task.cancelling() == 0
        return outcome

    expected = ("done" if await_ == "swallows" else "cancelled" if "outer" in fired
                else "timeout" if fired else "error" if await_ == "raises" else "done")
    assert await asyncio.create_task(scenario()) == expected


class _Scripted:
    """A model whose one request answers, fails, hangs or is cancelled from outside."""

    def __init__(self, how: str) -> None:
        self.how = how

    async def request(self, request: ModelRequest) -> ModelTurn:
        if self.how == "answers":
            return ModelTurn(text="done")
        if self.how == "api_error":
            raise ModelAPIError("the server failed")
        if self.how == "error":
            raise ValueError("a bug in the model")
        if self.how == "cancelled":  # a cancellation from outside the run, mid-request
            task = asyncio.current_task()
            assert task is not None
            task.cancel()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        pass


@settings(max_examples=10, deadline=None)
@given(st.sampled_from(["answers", "api_error", "error", "hang", "cancelled"]))
async def test_a_model_request_ends_under_the_wall_time_as_it_should(how: str) -> None:
    """However the request ends (an answer, the model's error, another error, the wall time,
    a cancellation from outside), the run raises what it should, and nothing of the run's
    deadline is left to cancel the caller after it: a wait past the wall time then ends."""
    agent = Agent(name="a", model=ModelRef.parse("openai/scripted"), instruction="x")
    wall = 0.05

    async def scenario() -> str:
        try:
            response = await run_agent(agent, "Hi", model=_Scripted(how),
                                       limits=RunLimits(wall_time=wall))
            outcome = response.content
        except LimitExceeded as exc:
            assert "waiting for the model" in str(exc) and exc.context is not None
            outcome = exc.limit
        except ModelAPIError as exc:
            assert exc.context is not None and exc.context[-1].kind == "user"
            outcome = "api_error"
        except ValueError:
            outcome = "error"
        except asyncio.CancelledError:
            task = asyncio.current_task()
            assert task is not None and task.uncancel() == 0
            outcome = "cancelled"
        await asyncio.sleep(wall * 2)  # past the run's deadline: nothing cancels this
        return outcome

    expected = {"answers": "done", "hang": "wall_time"}.get(how, how)
    assert await asyncio.create_task(scenario()) == expected


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.01, 0.02, 0.03, 3600.0]), st.booleans()),
                min_size=1, max_size=5))
async def test_deadlines_armed_in_any_order_each_fire_at_their_time(
        plan: list[tuple[float, bool]]) -> None:
    """Deadlines armed one after another in any order, some of them disarmed at once (a run
    or call that ended), on one event loop's one timer: each armed one that is near cuts its
    wait short, whether it moved the timer earlier or found it set for an earlier one (then
    only joining the watched set); a far one, or one disarmed, cuts nothing."""

    async def waits(seconds: float, disarmed: bool) -> bool:
        deadline = RunDeadline(asyncio.get_running_loop().time() + seconds)
        deadline.arm()
        if disarmed:
            deadline.disarm()
        try:
            await under(deadline, asyncio.sleep(0.1 if seconds > 1 or disarmed else 5))
        except TimeoutError:
            return True
        finally:
            deadline.disarm()
        return False

    results = await asyncio.gather(*(waits(s, d) for s, d in plan))
    assert list(results) == [s < 1 and not d for s, d in plan]


@pytest.mark.slow
@settings(max_examples=8, deadline=None)
@given(st.lists(st.sampled_from(["deadline", "thread", "both"]), min_size=2, max_size=5))
def test_event_loops_one_after_another_are_not_kept(uses: list[str]) -> None:
    """Event loops one after another (``run_agent_sync`` in a script): the deadline watcher
    and the worker threads' hand-off made for each hold their loop, and once a loop is closed
    they no longer keep it alive: of all the loops, at most the last one is left."""

    async def use(what: str) -> weakref.ref[asyncio.AbstractEventLoop]:
        loop = asyncio.get_running_loop()
        if what in ("deadline", "both"):
            assert not await cut_short(5, 0)  # armed (its timer set 5 s ahead), disarmed
        if what in ("thread", "both"):
            hand_off(loop).put(contextvars.copy_context(), lambda result, error: None, 1, None)
            await asyncio.sleep(0.01)
        return weakref.ref(loop)

    loops = [asyncio.run(use(what)) for what in uses]
    gc.collect()
    assert all(ref() is None for ref in loops[:-1])


class _Failing:
    """A watched deadline whose expire raises (what a tool call's settling could do)."""

    def __init__(self, when: float) -> None:
        self.when: float | None = when

    def expire(self) -> None:
        raise RuntimeError("expire failed")


@settings(max_examples=10, deadline=None)
@given(st.lists(st.sampled_from(["fails", "near", "later"]), min_size=1, max_size=5))
async def test_a_deadline_whose_expire_raises_leaves_the_others_watched(
        order: list[str]) -> None:
    """One deadline's expire raising inside the watcher's timer (the loop's exception
    handler reports it) takes nothing else with it: the deadlines due with it, those due
    later, and one armed afterwards (which may only join the watched set) each still fire."""
    loop = asyncio.get_running_loop()
    reported: list[BaseException | None] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context.get("exception")))
    watch = watcher(loop)
    start = loop.time()

    async def waits(seconds: float) -> bool:
        return await cut_short(seconds, 5)

    try:
        for name in order:
            if name == "fails":
                watch.add(_Failing(start + 0.01))
        tasks = [asyncio.create_task(waits({"near": 0.01, "later": 0.05}[name]))
                 for name in order if name != "fails"]
        await asyncio.sleep(0.03)
        armed_after = asyncio.create_task(waits(0.05))
        assert all(await asyncio.gather(*tasks, armed_after))
    finally:
        loop.set_exception_handler(None)
    assert len(reported) == order.count("fails")
    assert all(isinstance(error, RuntimeError) for error in reported)
