"""Tests of running one checked call: threads and tasks, timeouts, failures, output text."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from typing import Any

from gramagent._runtime.invoke import DRY_RUN_RESULT, Outcome, execute, render_output, start_task
from gramagent._runtime.library import Tool, ToolContext, tool

request_var: contextvars.ContextVar[str] = contextvars.ContextVar("request_var", default="none")


def test_render_output_strings_json_and_truncation() -> None:
    """Strings pass as they are, other values become compact JSON, long text is cut."""
    assert render_output("héllo", None) == "héllo"
    assert render_output({"a": [1, None], "b": True}, None) == '{"a":[1,null],"b":true}'
    assert render_output(3.5, None) == "3.5"
    cut = render_output("abcdefghij", 4)
    assert cut.startswith("abcd\n[... output truncated: 6 of 10 characters cut (limit 4)]")


async def test_sync_tools_run_in_a_worker_thread_with_context_variables() -> None:
    """A sync tool runs off the event loop thread and sees the caller's context variables."""
    seen: dict[str, object] = {}

    @tool
    def where() -> str:
        """Where am I."""
        seen["thread"] = threading.current_thread().name
        return request_var.get()

    request_var.set("req-42")
    outcome = await execute(where, {}, context=None, timeout=5)
    assert outcome.result == "req-42" and outcome.error_type is None
    assert str(seen["thread"]).startswith("gramagent-tool")


async def test_async_tools_and_awaitables_returned_by_sync_callables() -> None:
    """Coroutine functions are awaited; a sync callable returning an awaitable too."""

    async def later() -> str:
        return "later"

    direct = Tool("d", "D.", {"type": "object", "properties": {}}, later)
    indirect = Tool("i", "I.", {"type": "object", "properties": {}}, lambda: later())
    assert direct.is_async and not indirect.is_async
    assert (await execute(direct, {}, context=None, timeout=5)).result == "later"
    assert (await execute(indirect, {}, context=None, timeout=5)).result == "later"


async def test_timeouts_and_a_tools_own_timeout_error_differ() -> None:
    """Our deadline gives tool_timeout; a TimeoutError raised by the tool is tool_exception."""

    @tool
    async def hang() -> str:
        """Hangs."""
        await asyncio.Event().wait()
        return ""

    @tool
    def gives_up() -> str:
        """Raises TimeoutError itself."""
        raise TimeoutError("upstream timed out")

    timed_out = await execute(hang, {}, context=None, timeout=0.05)
    assert timed_out.error_type == "tool_timeout" and "0.05 s" in timed_out.output
    own = await execute(gives_up, {}, context=None, timeout=5)
    assert own.error_type == "tool_exception"
    assert "TimeoutError: upstream timed out" in own.output
    assert own.event_message == "raised an exception: TimeoutError"


async def test_a_thread_tool_that_outlives_its_timeout_is_dropped_quietly() -> None:
    """A worker thread that finishes after its call timed out settles nothing: the call
    stays a timeout, and the event loop reports no error for the late result."""
    release = threading.Event()
    finished = threading.Event()
    errors: list[dict[str, object]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: errors.append(ctx))

    @tool
    def slow() -> str:
        """Waits to be released."""
        release.wait(5)
        finished.set()
        return "late"

    timed_out = await execute(slow, {}, context=None, timeout=0.05)
    assert timed_out.error_type == "tool_timeout"
    release.set()
    while not finished.is_set():
        await asyncio.sleep(0.01)
    for _ in range(5):  # let the worker's hand-off reach the loop
        await asyncio.sleep(0.01)
    assert errors == []
    again = await execute(slow, {}, context=None, timeout=5)
    assert again.result == "late"


async def test_thread_tools_raising_anything_give_a_tool_exception() -> None:
    """Whatever a tool in a worker thread raises becomes its error result, StopIteration
    (which no future can hold) included; nothing hangs until the timeout."""

    @tool
    def stops() -> str:
        """Raises StopIteration."""
        raise StopIteration("done")

    @tool
    def fails() -> str:
        """Raises ValueError."""
        raise ValueError("bad")

    stopped = await execute(stops, {}, context=None, timeout=5)
    assert stopped.error_type == "tool_exception" and "StopIteration" in stopped.output
    failed = await execute(fails, {}, context=None, timeout=5)
    assert failed.error_type == "tool_exception" and "ValueError: bad" in failed.output


async def test_unserializable_results_are_the_tools_fault() -> None:
    """A result that is not JSON becomes a tool_exception, not a crash of the loop."""

    @tool
    def odd() -> str:
        """Returns an object."""
        return object()  # type: ignore[return-value]

    outcome = await execute(odd, {}, context=None, timeout=5)
    assert outcome.error_type == "tool_exception" and "not JSON" in outcome.output


async def test_dry_run_does_not_call_and_context_is_passed() -> None:
    """Dry run returns the canned result; a context parameter receives the ToolContext."""
    calls: list[ToolContext] = []

    @tool
    def remember(ctx: ToolContext, note: str) -> str:
        """Remembers."""
        calls.append(ctx)
        ctx.state.setdefault("notes", []).append(note)
        return ",".join(ctx.state["notes"])

    ctx = ToolContext(conversation_id="c", run_id="r", call_id="k", tool="remember", state={})
    dry = await execute(remember, {"note": "x"}, context=ctx, timeout=5, dry_run=True)
    assert dry.result == DRY_RUN_RESULT and dry.output == '{"ok":true}' and not dry.executed
    assert calls == []
    first = await execute(remember, {"note": "a"}, context=ctx, timeout=5)
    second = await execute(remember, {"note": "b"}, context=ctx, timeout=5)
    assert (first.result, second.result) == ("a", "a,b") and calls == [ctx, ctx]


async def test_non_blocking_sync_tools_run_inline_in_a_copied_context() -> None:
    """``blocking=False`` runs a plain function on the event loop thread, in a copy of the
    caller's context (what it sets stays its own), with failures reported as usual."""
    seen: dict[str, object] = {}

    @tool(blocking=False)
    def here(word: str) -> str:
        """Echoes a word."""
        seen["thread"] = threading.current_thread()
        seen["var"] = request_var.get()
        request_var.set("changed by the tool")
        return word.upper()

    @tool(blocking=False)
    def broken() -> str:
        """Fails."""
        raise ValueError("no")

    assert not here.blocking and not here.is_async and tool(lambda: "x", name="t",
                                                            description="T.").blocking
    request_var.set("req-7")
    outcome = await execute(here, {"word": "hi"}, context=None, timeout=5)
    assert (outcome.result, outcome.output, outcome.error_type) == ("HI", "HI", None)
    assert seen == {"thread": threading.current_thread(), "var": "req-7"}
    assert request_var.get() == "req-7"
    failed = await execute(broken, {}, context=None, timeout=5)
    assert failed.error_type == "tool_exception" and "ValueError: no" in failed.output


async def test_non_blocking_tool_returning_an_awaitable_gets_the_timeout() -> None:
    """An inline callable that returns an awaitable: the awaitable runs under the timeout."""

    async def hang() -> str:
        await asyncio.Event().wait()
        return ""

    async def later() -> str:
        return "later"

    schema = {"type": "object", "properties": {}}
    quick = Tool("q", "Q.", schema, lambda: later(), blocking=False)
    stuck = Tool("s", "S.", schema, lambda: hang(), blocking=False)
    assert (await execute(quick, {}, context=None, timeout=5)).result == "later"
    timed_out = await execute(stuck, {}, context=None, timeout=0.05)
    assert timed_out.error_type == "tool_timeout"


def test_render_output_takes_any_json_value() -> None:
    """Issue 14 item 2: big integers, deep nesting and lone surrogates are valid results."""
    import json

    deep: list[object] = []
    node = deep
    for _ in range(300):
        node.append([])
        node = node[0]  # type: ignore[assignment]
    assert render_output({"n": 2**70}, None) == '{"n":1180591620717411303424}'
    assert json.loads(render_output(deep, None)) == deep
    for text in (render_output("a\ud800", None), render_output({"s": "a\ud800"}, None)):
        text.encode("utf-8")  # the next request can carry it


def test_deep_and_big_results_are_not_tool_exceptions() -> None:
    @tool
    def big() -> dict[str, int]:
        """Big."""
        return {"n": 2**70}

    outcome = asyncio.run(execute(big, {}, context=None, timeout=None))
    assert outcome.error_type is None and outcome.output == '{"n":1180591620717411303424}'


async def test_a_coroutine_from_a_thread_tool_is_awaited_under_the_timeout() -> None:
    """A plain function run in a thread may return a coroutine: it is awaited on the loop,
    within the call's timeout (past it: tool_timeout, and the coroutine is cancelled)."""
    cancelled: list[bool] = []

    async def forever() -> str:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return "unreachable"

    slow = Tool("s", "S.", {"type": "object", "properties": {}}, lambda: forever())
    outcome = await execute(slow, {}, context=None, timeout=0.1)
    assert outcome.error_type == "tool_timeout" and outcome.result is None
    await asyncio.sleep(0)  # the cancelled coroutine's task ends
    assert cancelled == [True]


async def test_call_tasks_are_made_by_the_loops_task_factory() -> None:
    """A task factory set on the event loop makes the tasks of calls run alongside."""
    made: list[object] = []
    loop = asyncio.get_running_loop()

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        made.append(coro)
        return asyncio.Task(coro, loop=loop, **kwargs)

    async def work() -> Outcome:
        return Outcome("42", "42")

    loop.set_task_factory(factory)
    try:
        task = start_task(work())
        assert (await task).result == "42" and len(made) == 1
    finally:
        loop.set_task_factory(None)
    assert (await start_task(work())).result == "42" and len(made) == 1


async def test_with_no_time_left_a_tool_is_not_called_at_all() -> None:
    """A timeout of 0 (what a call gets once the run's wall time is up) starts neither a
    worker thread nor an async tool: a tool whose result would be thrown away must not act
    (write, send, spend) either. The call's result says it was not run."""
    called: list[str] = []

    @tool
    def in_thread(n: int) -> str:
        """Records its call."""
        called.append("thread")
        return "ran"

    @tool
    async def in_task(n: int) -> str:
        """Records its call."""
        called.append("async")
        return "ran"

    for t in (in_thread, in_task):
        outcome = await execute(t, {"n": 1}, context=None, timeout=0)
        assert outcome.error_type == "tool_timeout" and not outcome.executed
        assert f"tool {t.name!r} was not run: the run's time was up" in outcome.output
        assert (await execute(t, {"n": 1}, context=None, timeout=5)).result == "ran"
    await asyncio.sleep(0.05)  # a thread started by mistake would have recorded by now
    assert called == ["thread", "async"]  # the runs with time left, only
