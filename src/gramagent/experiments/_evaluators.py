"""Evaluators: each scores one run, as a pass/fail or a score in [0, 1], with a reason.

Built-ins (``kind``, and the options each takes):

=================  ================================================================
``exact``          answer equals ``value`` (default: the case's expected ``answer``,
                   or the expected value named by ``expected``); ``ignore_case``
``contains``       answer contains ``value`` (same default); ``ignore_case`` (default
                   true)
``regex``          answer matches ``pattern`` (``re.search``); ``ignore_case``
``json_schema``    the answer is JSON valid against ``schema``
``tool_called``    ``tool`` was called successfully, with ``arguments`` (a subset of
                   the call's arguments) when given
``no_tool_errors`` no tool call of the run failed
``latency_under``  the run took under ``ms`` milliseconds
``custom``         ``function``: ``module:function`` taking ``(case, record)`` and
                   returning a bool, a number in [0, 1], a ``(value, reason)`` pair or
                   an :class:`EvalResult`; may be async (a plain function runs on a
                   worker thread, so it never holds up the other runs)
``judge``          an LLM grades the answer against ``rubric`` on ``model`` (any model,
                   the embedded ``local/...`` ones too); a score in [0, 1]
=================  ================================================================

Evaluators are data (:class:`EvaluatorSpec`, custom ones named by import path), built into
callables by :func:`build_evaluators` in whatever process runs the cases. A custom or judge
verdict has a time limit (:data:`DEFAULT_TIME_LIMIT` seconds unless the experiment says
otherwise): past it, that run fails the evaluator with a reason saying so.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import re
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from gramagent._limit_values import limit_problem, refuse_problems
from gramagent.errors import ConfigurationError
from gramagent.experiments._cases import Case
from gramagent.experiments._imports import import_object
from gramagent.experiments._records import EvalResult, RunRecord

__all__ = ["DEFAULT_TIME_LIMIT", "KINDS", "Evaluator", "EvaluatorSpec", "build_evaluators",
           "evaluate"]

DEFAULT_TIME_LIMIT = 60.0
"""Seconds a custom or judge evaluator has for one verdict (``evaluator_timeout``)."""

KINDS = ("exact", "contains", "regex", "json_schema", "tool_called", "no_tool_errors",
         "latency_under", "custom", "judge")
_OPTIONS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    # kind: (required options, optional options)
    "exact": (frozenset(), frozenset({"value", "expected", "ignore_case"})),
    "contains": (frozenset(), frozenset({"value", "expected", "ignore_case"})),
    "regex": (frozenset({"pattern"}), frozenset({"ignore_case"})),
    "json_schema": (frozenset({"schema"}), frozenset()),
    "tool_called": (frozenset({"tool"}), frozenset({"arguments"})),
    "no_tool_errors": (frozenset(), frozenset()),
    "latency_under": (frozenset({"ms"}), frozenset()),
    "custom": (frozenset({"function"}), frozenset()),
    "judge": (frozenset({"model", "rubric"}), frozenset({"api", "base_url", "pass_score"})),
}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_OPTION_TYPES: dict[str, tuple[Callable[[Any], bool], str]] = {
    # option: (what fits, in words); checked where a kind takes the option (ms: limit_problem)
    "value": (lambda v: isinstance(v, str) or _is_number(v), "a string or a number"),
    "expected": (lambda v: isinstance(v, str) and bool(v), "the name of an expected value"),
    "ignore_case": (lambda v: isinstance(v, bool), "true or false"),
    "pattern": (lambda v: isinstance(v, str), "a string"),
    "schema": (lambda v: isinstance(v, (dict, bool)), "a JSON Schema (an object)"),
    "tool": (lambda v: isinstance(v, str) and bool(v), "a tool name"),
    "arguments": (lambda v: isinstance(v, dict), "an object of argument values"),
    "function": (lambda v: isinstance(v, str) and ":" in v, "'module:function'"),
    "model": (lambda v: isinstance(v, str) and bool(v), "'provider/name'"),
    "rubric": (lambda v: isinstance(v, str) and bool(v.strip()), "a non-empty string"),
    "api": (lambda v: v in ("chat", "functions", "responses", "harmony"),
            "one of chat, functions, responses, harmony"),
    "base_url": (lambda v: isinstance(v, str) and bool(v), "a URL"),
    "pass_score": (lambda v: _is_number(v) and 0.0 <= v <= 1.0, "a number in [0, 1]"),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class EvaluatorSpec:
    """An evaluator as data: its name in reports, its kind and the kind's options."""

    name: str
    kind: str
    options: Mapping[str, Any] = field(default_factory=dict)

    def problems(self) -> list[str]:
        """What is wrong with the kind or options (empty when fine)."""
        if self.kind not in _OPTIONS:
            return [f"evaluator {self.name!r}: unknown kind {self.kind!r} (expected one of "
                    f"{', '.join(KINDS)})"]
        required, optional = _OPTIONS[self.kind]
        out = [f"evaluator {self.name!r}: {self.kind} needs option {key!r}"
               for key in sorted(required - set(self.options))]
        out += [f"evaluator {self.name!r}: {self.kind} has no option {key!r} (it takes "
                f"{', '.join(sorted(required | optional)) or 'none'})"
                for key in sorted(set(self.options) - required - optional)]
        out += [f"evaluator {self.name!r}: {key} must be {wanted}"
                for key, (fits, wanted) in _OPTION_TYPES.items()
                if key in self.options and key in required | optional
                and not fits(self.options[key])]
        if self.kind == "latency_under" and "ms" in self.options and (
                problem := limit_problem("ms", self.options["ms"], optional=False)):
            out.append(f"evaluator {self.name!r}: {problem}")
        pattern = self.options.get("pattern")
        if self.kind == "regex" and pattern is not None:
            try:
                re.compile(str(pattern))
            except re.error as exc:
                out.append(f"evaluator {self.name!r}: bad pattern: {exc}")
        if self.kind == "json_schema" and isinstance(self.options.get("schema"), dict):
            from jsonschema import validators
            from jsonschema.exceptions import SchemaError

            try:
                validators.validator_for(self.options["schema"]).check_schema(
                    self.options["schema"])
            except SchemaError as exc:
                out.append(f"evaluator {self.name!r}: bad schema: {exc.message}")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "options": dict(self.options)}


class Evaluator(Protocol):
    """A built evaluator: scores one run of one case.

    Calling it returns the result, or an awaitable of it (custom and judge evaluators):
    built-ins answer at once, without a coroutine per run.
    """

    name: str

    def __call__(self, case: Case, record: RunRecord
                 ) -> EvalResult | Awaitable[EvalResult]: ...

    async def aclose(self) -> None: ...


async def evaluate(evaluators: Sequence[Evaluator], case: Case, record: RunRecord
                   ) -> tuple[EvalResult, ...]:
    """Every evaluator's result on one run, in order.

    An evaluator that raises, or gives something other than an :class:`EvalResult` with a
    score in [0, 1] (a NaN, 7, ``passed="yes"``), fails this run with the reason: it costs
    one verdict, never the experiment or its store.

    Raises:
        ConfigurationError: an evaluator cannot work at all (a judge's model has no API key):
            every run would fail alike, so the experiment stops and says why.
    """
    results = []
    for evaluator in evaluators:
        try:
            result = evaluator(case, record)
            if not isinstance(result, EvalResult):
                result = await result
            results.append(_checked(evaluator.name, result))
        except ConfigurationError:
            raise
        except Exception as exc:  # a user's function (or a judge's model) must not stop runs
            results.append(EvalResult(
                name=evaluator.name, score=0.0, passed=False,
                reason=f"evaluator raised {type(exc).__name__}: {exc}"[:500]))
    return tuple(results)


def _checked(name: str, result: Any) -> EvalResult:
    """``result`` if it is a well-formed verdict of evaluator ``name``.

    Raises:
        TypeError: anything else (said in words).
    """
    if not isinstance(result, EvalResult):
        raise TypeError(f"expected an EvalResult, got {type(result).__name__}")
    score, passed = result.score, result.passed
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not (
            0.0 <= score <= 1.0):  # NaN fails both comparisons
        raise TypeError(f"score must be a number in [0, 1], got {score!r}"[:200])
    if passed is not None and not isinstance(passed, bool):
        raise TypeError(f"passed must be True, False or None, got {passed!r}"[:200])
    if passed is not None and float(score) != float(passed):
        raise TypeError(f"a pass/fail verdict scores 1 or 0, got passed={passed} with "
                        f"score {score!r}")
    if result.name != name or not isinstance(result.reason, str):
        return EvalResult(name=name, score=float(score), passed=passed,
                          reason=str(result.reason))
    return result


def build_evaluators(specs: Sequence[EvaluatorSpec], *,
                     time_limit: float | None = DEFAULT_TIME_LIMIT) -> list[Evaluator]:
    """Build callables from specs (imports custom functions, prepares judges).

    Args:
        specs: the evaluators.
        time_limit: seconds a custom or judge evaluator has for one verdict (None: no
            limit); past it the run fails that evaluator, with the reason.

    Raises:
        ConfigurationError: a spec or the time limit is invalid, or a custom function cannot
            be imported.
    """
    refuse_problems("evaluators", [limit_problem("evaluator_timeout", time_limit),
                                   *(p for spec in specs for p in spec.problems())])
    out: list[Evaluator] = []
    for spec in specs:
        if spec.kind == "custom":
            out.append(_TimeLimited(_Custom(spec.name, spec.options["function"]), time_limit))
        elif spec.kind == "judge":
            from gramagent.experiments._judge import Judge

            out.append(_TimeLimited(Judge(spec.name, **spec.options), time_limit))
        else:
            out.append(_Sync(spec.name, _BUILTINS[spec.kind](spec.options)))
    return out


Check = Callable[[Case, RunRecord], tuple[bool, str]]


@dataclass(slots=True)
class _Sync:
    name: str
    check: Check

    def __call__(self, case: Case, record: RunRecord) -> EvalResult:
        passed, reason = self.check(case, record)
        return EvalResult(name=self.name, score=1.0 if passed else 0.0, passed=passed,
                          reason=reason)

    async def aclose(self) -> None:
        return None


def _target(options: Mapping[str, Any], case: Case) -> str | None:
    if "value" in options:
        return str(options["value"])
    value = case.expected.get(str(options.get("expected", "answer")))
    return None if value is None else str(value)


def _text_check(compare: Callable[[str, str], bool], verb: str, ignore_case: bool
                ) -> Callable[[Mapping[str, Any]], Check]:
    def make(options: Mapping[str, Any]) -> Check:
        fold = bool(options.get("ignore_case", ignore_case))

        def check(case: Case, record: RunRecord) -> tuple[bool, str]:
            target = _target(options, case)
            if target is None:
                return False, (f"case {case.id!r} has no expected "
                               f"{options.get('expected', 'answer')!r}")
            if record.answer is None:
                return False, f"no answer ({record.stop})"
            answer = record.answer.strip()
            want = target.strip()
            if fold:
                answer, want = answer.casefold(), want.casefold()
            ok = compare(answer, want)
            return ok, f"answer {'' if ok else 'does not '}{verb} {target!r}"

        return check

    return make


def _regex(options: Mapping[str, Any]) -> Check:
    flags = re.IGNORECASE if options.get("ignore_case") else 0
    pattern = re.compile(str(options["pattern"]), flags)

    def check(case: Case, record: RunRecord) -> tuple[bool, str]:
        if record.answer is None:
            return False, f"no answer ({record.stop})"
        ok = pattern.search(record.answer) is not None
        return ok, f"answer {'matches' if ok else 'does not match'} /{pattern.pattern}/"

    return check


def _json_schema(options: Mapping[str, Any]) -> Check:
    from jsonschema import validators

    schema = options["schema"]
    validator = validators.validator_for(schema)(schema)

    def check(case: Case, record: RunRecord) -> tuple[bool, str]:
        if record.answer is None:
            return False, f"no answer ({record.stop})"
        try:
            value = orjson.loads(record.answer)
        except orjson.JSONDecodeError:
            return False, "answer is not JSON"
        error = next(iter(validator.iter_errors(value)), None)
        if error is None:
            return True, "answer matches the schema"
        return False, f"answer violates the schema: {error.message[:200]}"

    return check


def _tool_called(options: Mapping[str, Any]) -> Check:
    tool = str(options["tool"])
    wanted = options.get("arguments")

    def check(case: Case, record: RunRecord) -> tuple[bool, str]:
        calls = [t for t in record.tools if t.name == tool and t.status == "ok"]
        if not calls:
            return False, f"{tool} was not called successfully"
        if wanted is None:
            return True, f"{tool} was called"
        for t in calls:
            args = t.arguments if isinstance(t.arguments, dict) else {}
            if all(args.get(k) == v for k, v in wanted.items()):
                return True, f"{tool} was called with {wanted}"
        return False, f"{tool} was never called with {wanted}"

    return check


def _no_tool_errors(options: Mapping[str, Any]) -> Check:
    def check(case: Case, record: RunRecord) -> tuple[bool, str]:
        failed = [t for t in record.tools if t.status != "ok"]
        if not failed:
            return True, "no tool errors"
        kinds = ", ".join(sorted({f"{t.name}:{t.error_type}" for t in failed}))
        return False, f"{len(failed)} tool error(s): {kinds}"

    return check


def _latency_under(options: Mapping[str, Any]) -> Check:
    limit = float(options["ms"])

    def check(case: Case, record: RunRecord) -> tuple[bool, str]:
        ok = record.wall_ms < limit
        return ok, f"{record.wall_ms:.0f} ms {'<' if ok else '>='} {limit:g} ms"

    return check


_BUILTINS: dict[str, Callable[[Mapping[str, Any]], Check]] = {
    "exact": _text_check(lambda a, b: a == b, "equals", False),
    "contains": _text_check(lambda a, b: b in a, "contains", True),
    "regex": _regex,
    "json_schema": _json_schema,
    "tool_called": _tool_called,
    "no_tool_errors": _no_tool_errors,
    "latency_under": _latency_under,
}


@dataclass(slots=True)
class _Custom:
    name: str
    reference: str
    function: Callable[[Case, RunRecord], Any] = field(init=False)

    def __post_init__(self) -> None:
        fn = import_object(self.reference, what=f"evaluator {self.name!r}:")
        if not callable(fn):
            raise ConfigurationError(f"evaluator {self.name!r}: {self.reference!r} is not "
                                     "callable")
        self.function = fn

    async def __call__(self, case: Case, record: RunRecord) -> EvalResult:
        if _is_async(self.function):
            value = self.function(case, record)
        else:  # a plain function may block (a network call, a long computation): not the loop
            value = await _in_thread(self.function, case, record)
        if inspect.isawaitable(value):
            value = await value
        return to_result(self.name, value)

    async def aclose(self) -> None:
        return None


def _is_async(function: Callable[..., Any]) -> bool:
    """A coroutine function, or an object whose ``__call__`` is one."""
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
        type(function).__call__)


async def _in_thread(function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)`` on a thread of its own, awaited without blocking the event loop.

    A daemon thread, not the loop's executor: a function that never returns is abandoned at
    its time limit, and must keep neither a pool's worker nor the process's exit waiting.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():  # abandoned (time limit, Ctrl-C)
            return
        if error is None:
            future.set_result(value)
        else:
            future.set_exception(error)

    def run() -> None:
        value: Any = None
        error: BaseException | None = None
        try:
            value = function(*args)
        except Exception as exc:
            error = exc
        except BaseException as exc:  # SystemExit in a thread: a failed verdict, not an exit
            error = RuntimeError(f"{type(exc).__name__}: {exc}")
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
            loop.call_soon_threadsafe(settle, value, error)

    threading.Thread(target=run, name=f"evaluator {getattr(function, '__name__', '?')}",
                     daemon=True).start()
    return await future


@dataclass(slots=True)
class _TimeLimited:
    """An evaluator whose verdict fails, saying why, when it takes over ``seconds``."""

    inner: Evaluator
    seconds: float | None
    name: str = field(init=False)

    def __post_init__(self) -> None:
        self.name = self.inner.name

    async def __call__(self, case: Case, record: RunRecord) -> EvalResult:
        result = self.inner(case, record)
        if isinstance(result, EvalResult):
            return result
        task = asyncio.ensure_future(result)
        try:
            done, _ = await asyncio.wait({task}, timeout=self.seconds)
        finally:
            if not task.done():  # past the limit, or this run was cancelled (Ctrl-C)
                task.cancel()
                task.add_done_callback(_forget)
        if not done:
            return EvalResult(
                name=self.name, score=0.0, passed=False,
                reason=f"evaluator gave no verdict within its time limit ({self.seconds:g} s, "
                       "evaluator_timeout)")
        return task.result()

    async def aclose(self) -> None:
        await self.inner.aclose()


def _forget(task: asyncio.Future[Any]) -> None:
    """Retrieve an abandoned verdict's outcome, so asyncio does not log it as lost."""
    if not task.cancelled():
        task.exception()


def to_result(name: str, value: Any) -> EvalResult:
    """Normalize what a custom evaluator returned (numpy scalars count as Python's own).

    Raises:
        TypeError: not a bool, a number in [0, 1], a (value, reason) pair or an EvalResult.
    """
    if isinstance(value, EvalResult):
        return value  # checked (and named) by evaluate
    reason = ""
    if isinstance(value, tuple) and len(value) == 2:
        value, reason = value[0], str(value[1])
    if getattr(value, "shape", None) == () and hasattr(value, "item"):
        value = value.item()  # a numpy scalar (np.isclose gives a numpy bool): Python's own
    if isinstance(value, bool):
        return EvalResult(name=name, score=float(value), passed=value, reason=reason)
    if isinstance(value, (int, float)) and 0.0 <= float(value) <= 1.0:
        return EvalResult(name=name, score=float(value), passed=None, reason=reason)
    raise TypeError(f"expected a bool, a number in [0, 1] or a (value, reason) pair, got "
                    f"{value!r}"[:200])

