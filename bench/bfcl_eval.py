"""BFCL tool-calling accuracy of a model, run through gramagent's model layer.

Each case of a Berkeley Function Calling Leaderboard category (from the installed
``bfcl-eval`` package: ``pip install --no-deps bfcl-eval==2026.3.23``) becomes one gramagent
:class:`~gramagent._models.base.ModelRequest`: the user's question, the case's functions as
tools (normalized with :func:`gramagent._spec.bfcl.normalize_bfcl_function`),
``tool_choice="auto"`` and a neutral instruction. For ``local/...`` models that is the embedded
llama.cpp server with grammar-constrained tool calls, exactly as agents run.

Scoring. The reference verdict is BFCL's own: its ``ast_checker`` (imported from the installed
``bfcl-eval``) for every category with possible answers (``simple_*``, ``multiple``,
``parallel``, ``parallel_multiple``, ...), and for ``irrelevance`` BFCL's rule that the reply
holds no function call at all. A second column is the project's own checker, where it
applies:

- ``simple_*``: :func:`check_simple_call`, written to BFCL's rules (one call, the expected
  name, required parameters, types with an int accepted for a float, BFCL's string
  normalization, allowed values), and the same checker *by value* (``json_numbers=True``: a
  JSON number is one type, so ``[1, 3]`` counts as ``[1.0, 3.0]``);
- ``irrelevance``: no *offered* function called (a call to an invented name is not run by the
  loop; BFCL counts it as a call);
- other categories: none (the project's checker reads one expected function).

Several categories run in one process with ``--category a,b,c`` (the model loads once); the
summary is printed per category.

Usage::

    python bench/bfcl_eval.py --model local/qwen2.5-coder-0.5b --category simple_python
    python bench/bfcl_eval.py --model local/qwen2.5-coder-1.5b \
        --category simple_python,parallel,parallel_multiple,irrelevance --limit 30

Prints one line per case to stderr with ``-v`` and a summary (accuracy, seconds per case) to
stdout; ``--json FILE`` writes every case's outcome as it goes, and ``--report FILE...``
summarizes such files (for a category run in chunks with ``--offset``/``--limit``), checking
the saved calls again with the current checkers. For cases that expect several calls the
summary also counts the calls: expected, written, and matched one by one (each expected call
checked on its own against the reply's calls).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import re
import sys
import time
import types
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from importlib import metadata
from pathlib import Path
from typing import Any

from gramagent._messages import UserMessage
from gramagent._models.base import Model, ModelRequest, ToolChoice
from gramagent._models.registry import resolve_model
from gramagent._spec.bfcl import normalize_bfcl_function
from gramagent._spec.definition import ToolDefinition
from gramagent._spec.model import ModelRef

INSTRUCTION = (
    "You are a helpful assistant. When one of the provided functions answers the user's "
    "request, call it with arguments taken from the request; otherwise answer in text."
)

_PY_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str, "integer": int, "float": float, "boolean": bool, "array": list,
    "tuple": list, "dict": dict, "any": str,
}
_STRIP = re.compile(r"[ ,./\-_*^]")


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one case went."""

    id: str
    ok: bool
    reason: str
    seconds: float
    calls: list[dict[str, Any]]
    text: str | None
    ok_by_value: bool | None = None  # the verdict with JSON numbers (simple_* only)
    model: str | None = None  # the --model of the run (files of older runs lack it)
    ok_ours: bool | None = None  # the project's checker, where it applies

    @property
    def category(self) -> str:
        """The BFCL category, read from the case id (``parallel_multiple_7``)."""
        return _case_number(self.id)[0]

    @property
    def pairs(self) -> list[tuple[str, Any]]:
        """The calls as (name, arguments), as the checkers take them."""
        return [(c["name"], c["arguments"]) for c in self.calls]


# -- BFCL's own checker ----------------------------------------------------------------------


@functools.cache
def bfcl_ast_checker() -> tuple[Any, Any]:
    """BFCL's ``ast_checker`` and its ``Language.PYTHON``.

    bfcl-eval is installed with ``--no-deps``, so its model table (which imports every
    provider's SDK) is replaced, where it does not import, by one that keeps function names as
    they are: all the checker needs of it. This directory holds this script, bfcl_eval.py,
    which would shadow the package: it is left out of ``sys.path`` for the import.
    """
    here = Path(__file__).resolve().parent
    saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    try:
        try:
            import bfcl_eval.constants.model_config  # type: ignore[import-untyped]  # noqa: F401
        except ImportError:  # a provider SDK is missing
            table = types.ModuleType("bfcl_eval.constants.model_config")
            table.MODEL_CONFIG_MAPPING = defaultdict(  # type: ignore[attr-defined]
                lambda: types.SimpleNamespace(underscore_to_dot=False))
            sys.modules[table.__name__] = table
        from bfcl_eval.constants.enums import Language  # type: ignore[import-untyped]
        from bfcl_eval.eval_checker.ast_eval.ast_checker import (  # type: ignore[import-untyped]
            ast_checker,
        )
    finally:
        sys.path[:] = saved
    return ast_checker, Language.PYTHON


def bfcl_verdict(case: Mapping[str, Any], category: str,
                 calls: Sequence[tuple[str, Any]]) -> str | None:
    """Why BFCL's own checker rejects ``calls`` for ``case``, or None when it accepts them.

    ``irrelevance`` categories: any call fails (BFCL's rule: the reply must not decode to a
    function call). Otherwise ``ast_checker`` with the case's functions and possible answer;
    arguments that are not a JSON object (a truncated call) fail as malformed.
    """
    if "irrelevance" in category:
        return f"called {calls[0][0]}" if calls else None
    if any(not isinstance(args, dict) for _, args in calls):
        return "malformed call: arguments are not an object"
    ast_checker, python = bfcl_ast_checker()
    try:
        result = ast_checker(case["function"], [{name: args} for name, args in calls],
                             case["answer"], python, category, "gramagent")
    except Exception as exc:  # noqa: BLE001 - BFCL raises on shapes it does not expect
        return f"BFCL's checker raised {type(exc).__name__}: {exc}"
    if result["valid"]:
        return None
    errors = result.get("error") or []
    return f"{result.get('error_type', 'invalid')}: {errors[0] if errors else ''}"[:300]


def our_verdicts(case: Mapping[str, Any], category: str, calls: Sequence[tuple[str, Any]],
                 ) -> tuple[bool | None, bool | None]:
    """The project's checker on ``calls``: (by BFCL's rules, by value), None where it does not
    apply (categories offering several functions or expecting several calls)."""
    if "irrelevance" in category:
        offered = {f["name"] for f in case["function"]}
        return not any(name in offered for name, _ in calls), None
    if category.startswith("simple"):
        reason, by_value = simple_verdicts(case, calls)
        return reason is None, by_value
    return None, None


def score(case: Mapping[str, Any], category: str, calls: Sequence[tuple[str, Any]],
          ) -> tuple[str | None, bool | None, bool | None]:
    """BFCL's reason (None: correct), our verdict, our by-value verdict."""
    ours, by_value = our_verdicts(case, category, calls)
    return bfcl_verdict(case, category, calls), ours, by_value


# -- the checker -----------------------------------------------------------------------------


def standardize(text: str) -> str:
    """BFCL's string normalization: drop spaces and ``,./-_*^``, lowercase, ``'`` -> ``"``."""
    return _STRIP.sub("", text).lower().replace("'", '"')


def _std(value: Any) -> Any:
    return standardize(value) if isinstance(value, str) else value


def check_simple_call(
    function: Mapping[str, Any], calls: Sequence[tuple[str, Any]], answer: Mapping[str, Any],
    *, json_numbers: bool = False,
) -> str | None:
    """Why ``calls`` do not answer a ``simple`` case, or None when they do.

    Args:
        function: the case's raw BFCL function document.
        calls: ``(name, arguments)`` pairs the model made, arguments decoded from JSON.
        answer: the possible answer, ``{name: {param: [allowed values...]}}``.
        json_numbers: compare numbers as JSON does (``1`` is ``1.0`` wherever the function
            says float, lists included) instead of by BFCL's Python type rule.
    """
    if len(calls) != 1:
        return f"wrong number of calls: {len(calls)}"
    name, args = calls[0]
    (want_name, allowed), = answer.items()
    if name != want_name:
        return f"wrong function {name!r}, expected {want_name!r}"
    if not isinstance(args, dict):
        return f"arguments are not an object: {args!r}"
    properties = function["parameters"].get("properties", {})
    for param in function["parameters"].get("required", []):
        if param not in args:
            return f"missing required parameter {param!r}"
    for param, value in args.items():
        if param not in properties or param not in allowed:
            return f"unexpected parameter {param!r}"
        if json_numbers:
            value = _as_floats(value, properties[param])
        problem = _check_value(param, value, properties[param], allowed[param])
        if problem:
            return problem
    for param, values in allowed.items():
        if param not in args and "" not in values:
            return f"parameter {param!r} not given and not optional"
    return None


def simple_verdicts(case: Mapping[str, Any],
                    calls: Sequence[tuple[str, Any]]) -> tuple[str | None, bool]:
    """A ``simple`` case's two verdicts: why BFCL's rules reject ``calls`` (None when they
    do not), and whether they are right by value."""
    function, answer = case["function"][0], case["answer"][0]
    return (check_simple_call(function, calls, answer),
            check_simple_call(function, calls, answer, json_numbers=True) is None)


def _as_floats(value: Any, details: Mapping[str, Any]) -> Any:
    """``value`` with every int that the function declares a float made a float."""
    if details.get("type") == "float" and type(value) is int:
        return float(value)
    items = details.get("items")
    if isinstance(value, list) and isinstance(items, dict):
        return [_as_floats(v, items) for v in value]
    return value


def _check_value(
    param: str, value: Any, details: Mapping[str, Any], allowed: list[Any]
) -> str | None:
    type_name = details.get("type", "any")
    if type_name == "float" and type(value) is int:
        value = float(value)
    expected = _PY_TYPES.get(type_name, object)
    answer_type = next((type(a) for a in allowed if a != ""), None)
    variable = answer_type is not None and answer_type is not expected
    if type(value) is not expected and not (answer_type is not None and type(value) is answer_type):
        return f"{param!r}: type {type(value).__name__}, expected {type_name}"
    if expected is list and type(value) is list and isinstance(details.get("items"), dict):
        item_type = _PY_TYPES.get(details["items"].get("type", "any"), object)
        if not _items_ok(value, item_type, allowed):
            return f"{param!r}: items of {value!r} are not {details['items'].get('type')}"
    if not variable:
        if expected is dict and isinstance(value, dict):
            return _check_dict(param, value, allowed)
        if expected is str and isinstance(value, str):
            if _std(value) not in [_std(a) for a in allowed if isinstance(a, str)]:
                return f"{param!r}: {value!r} not among {allowed!r}"
            return None
        items = details.get("items")
        if (expected is list and isinstance(value, list) and isinstance(items, dict)
                and items.get("type") == "dict"):
            return _check_dict_list(param, value, allowed)
        if expected is list and isinstance(value, list):
            # BFCL reads the optional marker "" as a list too: an empty one.
            if [_std(v) for v in value] not in [
                    [_std(x) for x in a] if isinstance(a, list) else []
                    for a in allowed if isinstance(a, list) or a == ""]:
                return f"{param!r}: {value!r} not among {allowed!r}"
            return None
    if value not in allowed:
        return f"{param!r}: {value!r} not among {allowed!r}"
    return None


def _items_ok(value: list[Any], item_type: Any, allowed: list[Any]) -> bool:
    """BFCL's one-level nested type check: some possible answer accepts every item's type."""
    for option in allowed:
        if not isinstance(option, list):
            return True  # BFCL checks only list-shaped answers (``""`` marks "optional")
        option_type = next((type(x) for x in option if x != ""), None)
        if all(type(v) is item_type or type(v) is option_type for v in value):
            return True
    return False


def _check_dict_list(param: str, value: list[Any], allowed: list[Any]) -> str | None:
    """A list of dicts: some allowed list has as many dicts, each matching in order."""
    for option in allowed:
        if (isinstance(option, list) and len(option) == len(value)
                and all(isinstance(v, dict) and _check_dict(param, v, [o]) is None
                        for v, o in zip(value, option, strict=True))):
            return None
    return f"{param!r}: {value!r} not among {allowed!r}"


def _check_dict(param: str, value: dict[str, Any], allowed: list[Any]) -> str | None:
    for option in allowed:
        if not isinstance(option, dict):
            continue
        if all(k in option and _std(v) in [_std(x) for x in option[k]]
               for k, v in value.items()) and all(
                   k in value or "" in vals for k, vals in option.items()):
            return None
    return f"{param!r}: {value!r} not among {allowed!r}"


# -- running ---------------------------------------------------------------------------------


def data_dir() -> Path:
    """``bfcl_eval/data`` of the installed distribution.

    Found through the distribution's metadata rather than an import lookup, because this very
    script is called ``bfcl_eval.py`` and would shadow the package on ``sys.path``.
    """
    try:
        dist = metadata.distribution("bfcl-eval")
    except metadata.PackageNotFoundError:
        sys.exit("bfcl-eval is not installed: pip install --no-deps bfcl-eval==2026.3.23")
    return Path(str(dist.locate_file("bfcl_eval/data")))


def load_cases(category: str, data: Path | None = None) -> list[dict[str, Any]]:
    """The category's cases, each with its possible answer under ``"answer"`` (if any)."""
    data = data or data_dir()
    cases = [json.loads(line) for line in _lines(data / f"BFCL_v4_{category}.json")]
    answers_file = data / "possible_answer" / f"BFCL_v4_{category}.json"
    if answers_file.exists():
        answers = {a["id"]: a["ground_truth"] for a in map(json.loads, _lines(answers_file))}
        for case in cases:
            case["answer"] = answers[case["id"]]
    return cases


def _lines(path: Path) -> Iterator[str]:
    with open(path, encoding="utf-8") as f:
        yield from (line for line in f if line.strip())


def _request(case: Mapping[str, Any], model_name: str, settings: Mapping[str, Any],
             instruction: str = INSTRUCTION, tool_choice: ToolChoice = "auto") -> ModelRequest:
    tools = []
    for doc in case["function"]:
        norm = normalize_bfcl_function(doc)
        tools.append(ToolDefinition(name=norm["name"], description=norm["description"],
                                    parameters=norm["parameters"]))
    turns = case["question"][0]
    question = "\n".join(m["content"] for m in turns if m["role"] == "user")
    return ModelRequest(model=model_name, instruction=instruction,
                        messages=[UserMessage(content=question)], tools=tools,
                        tool_choice=tool_choice, settings=dict(settings))


async def run_case(model: Model, case: Mapping[str, Any], category: str, model_name: str,
                   settings: Mapping[str, Any], instruction: str = INSTRUCTION,
                   tool_choice: ToolChoice = "auto") -> Outcome:
    """Ask the model one case and score its turn."""
    request = _request(case, model_name, settings, instruction, tool_choice)
    start = time.perf_counter()
    turn = await model.request(request)
    seconds = time.perf_counter() - start
    calls: list[tuple[str, Any]] = []
    for call in turn.tool_calls:
        try:
            args: Any = json.loads(call.arguments)
        except ValueError:
            args = call.arguments
        calls.append((call.name, args))
    reason, ours, by_value = score(case, category, calls)
    return Outcome(id=case["id"], ok=reason is None, reason=reason or "ok", seconds=seconds,
                   calls=[{"name": n, "arguments": a} for n, a in calls], text=turn.text,
                   ok_by_value=by_value, ok_ours=ours)


async def evaluate(args: argparse.Namespace) -> list[Outcome]:
    """Run every case of ``args.category`` (comma-separated categories, each cut to
    ``--offset``/``--limit``) through one model, in order."""
    cases: list[tuple[str, dict[str, Any]]] = []
    for category in args.category.split(","):
        chosen = load_cases(category)[args.offset:]
        if args.limit is not None:
            chosen = chosen[: args.limit]
        cases.extend((category, case) for case in chosen)
    ref = ModelRef.parse(args.model)
    options: dict[str, Any] = {}
    if args.threads and ref.provider == "local":
        options["threads"] = args.threads
    if args.tool_call_mode:
        options["tool_call_mode"] = args.tool_call_mode
    model = resolve_model(ref, **options)
    settings = {"temperature": 0.0, "max_tokens": args.max_tokens}
    outcomes = []
    out = open(args.json, "w", encoding="utf-8") if args.json else None  # noqa: SIM115
    try:
        start = time.perf_counter()
        if ref.provider == "local":  # load the model before the clock of the first case
            await model.start()  # type: ignore[attr-defined]
        load_seconds = time.perf_counter() - start
        if args.verbose:
            print(f"model ready in {load_seconds:.1f} s", file=sys.stderr)
        for category, case in cases:
            outcome = replace(
                await run_case(model, case, category, ref.name, settings,
                               args.instruction, args.tool_choice), model=args.model)
            outcomes.append(outcome)
            if out is not None:  # written as it goes: an interrupted run keeps its cases
                out.write(json.dumps(asdict(outcome)) + "\n")
                out.flush()
            if args.verbose:
                mark = "ok  " if outcome.ok else "FAIL"
                print(f"{mark} {outcome.id:<22} {outcome.seconds:5.1f}s  {outcome.reason}",
                      file=sys.stderr, flush=True)
    finally:
        await model.aclose()
        if out is not None:
            out.close()
    return outcomes


@functools.cache
def _cases_by_id(category: str) -> dict[str, dict[str, Any]]:
    """The category's cases by id, read once per process (not to be changed)."""
    return {c["id"]: c for c in load_cases(category)}


def rescore(outcomes: Sequence[Outcome]) -> list[Outcome]:
    """Check saved outcomes again from their calls with the current checkers (no model)."""
    out = []
    for o in outcomes:
        reason, ours, by_value = score(_cases_by_id(o.category)[o.id], o.category, o.pairs)
        out.append(replace(o, ok=reason is None, reason=reason or "ok", ok_by_value=by_value,
                           ok_ours=ours))
    return out


_KINDS = (
    ("wrong number of calls", "call count"), ("wrong function", "wrong function"),
    ("missing required", "missing required parameter"),
    ("unexpected parameter", "unexpected parameter"),
    ("not given and not optional", "missing needed parameter"),
    ("not among", "wrong value"), (": type ", "wrong type"), ("items of", "wrong type"),
    ("arguments are not", "malformed call"), ("called ", "called a function"),
    ("wrong_count", "call count"), ("func_name", "wrong function"),
    ("missing_required", "missing required parameter"),
    ("missing_optional", "missing needed parameter"), ("unexpected_param", "unexpected parameter"),
    ("type_error", "wrong type"), ("value_error", "wrong value"),
    ("cannot_find_match", "no call matches an expected one"), ("raised", "checker error"),
)


def _case_number(case_id: str) -> tuple[str, int]:
    prefix, _, number = case_id.rpartition("_")
    return prefix, int(number) if number.isdigit() else -1


def failure_kind(reason: str) -> str:
    """A failure reason's category, for the summary line."""
    return next((kind for marker, kind in _KINDS if marker in reason), "other")


def summarize(outcomes: Sequence[Outcome], model: str) -> str:
    """Per category: BFCL's accuracy, seconds per case, the project's checker where it
    applies, and the failure kinds, as printed."""
    by_category: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        by_category[o.category].append(o)
    return "\n\n".join(_summarize_category(group, model, category)
                        for category, group in by_category.items())


def _summarize_category(outcomes: Sequence[Outcome], model: str, category: str) -> str:
    n = len(outcomes)
    good = sum(o.ok for o in outcomes)
    seconds = sum(o.seconds for o in outcomes)
    ids = f"{outcomes[0].id}..{outcomes[-1].id}" if outcomes else "none"
    lines = [
        f"model {model}  category {category}  cases {n} ({ids})",
        f"accuracy {good}/{n} = {good / max(n, 1):.1%}   (BFCL's ast_checker)   "
        f"{seconds / max(n, 1):.2f} s/case (model time, excluding load)",
    ]
    if outcomes and all(o.ok_ours is not None for o in outcomes):
        ours = sum(bool(o.ok_ours) for o in outcomes)
        differ = sum(bool(o.ok_ours) != o.ok for o in outcomes)
        what = ("no offered function called" if "irrelevance" in category
                else "our checker, BFCL's type rules")
        lines.append(f"accuracy {ours}/{n} = {ours / max(n, 1):.1%}   ({what}; "
                     f"differs from BFCL's on {differ})")
    if outcomes and all(o.ok_by_value is not None for o in outcomes):
        by_value = sum(bool(o.ok_by_value) for o in outcomes)
        lines.append(f"accuracy {by_value}/{n} = {by_value / max(n, 1):.1%}   "
                     "(our checker by value: JSON numbers, 1 == 1.0 in lists too)")
    calls = _calls_line(outcomes, category)
    if calls:
        lines.append(calls)
    failures = Counter(failure_kind(o.reason) for o in outcomes if not o.ok)
    if failures:
        lines.append("failures: " + ", ".join(f"{k} x{v}" for k, v in failures.most_common()))
    return "\n".join(lines)


def matched_calls(case: Mapping[str, Any], calls: Sequence[tuple[str, Any]]) -> int:
    """How many of ``case``'s expected calls one of ``calls`` matches on its own: BFCL's
    checker on each expected call as a one-call case, each call matching at most one."""
    used: set[int] = set()
    for answer in case["answer"]:
        one = {"function": case["function"], "answer": [answer]}
        for i, call in enumerate(calls):
            if i not in used and bfcl_verdict(one, "simple_python", [call]) is None:
                used.add(i)
                break
    return len(used)


def _calls_line(outcomes: Sequence[Outcome], category: str) -> str | None:
    """For cases that expect several calls (``parallel``, ``parallel_multiple``): the expected
    calls (by how many a case expects), the calls written, and the expected calls matched one
    by one (:func:`matched_calls`), as printed; None for other categories."""
    cases = _cases_by_id(category) if outcomes else {}
    if not outcomes or not all("answer" in cases[o.id] for o in outcomes):
        return None
    sizes = Counter(len(cases[o.id]["answer"]) for o in outcomes)
    if max(sizes) < 2:
        return None
    expected = sum(k * n for k, n in sizes.items())
    written = sum(len(o.calls) for o in outcomes)
    matched = sum(matched_calls(cases[o.id], o.pairs) for o in outcomes)
    per_case = ", ".join(f"{k} x{n}" for k, n in sorted(sizes.items()))
    return (f"calls: {expected} expected ({per_case} per case), {written} written, "
            f"{matched} matched one by one ({matched / expected:.1%})")


def read_outcomes(paths: Sequence[Path]) -> list[Outcome]:
    """The outcomes saved in ``--json`` files, in case order; a case saved twice (a chunk
    restarted mid-way) counts once, the last.

    Raises:
        SystemExit: a file that cannot be read, or a line that is not a saved outcome (the
            message names the file and the line).
    """
    by_id: dict[str, Outcome] = {}
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                numbered = [(n, line) for n, line in enumerate(f, 1) if line.strip()]
        except OSError as exc:
            raise SystemExit(f"{path}: {exc.strerror or exc}") from None
        for number, line in numbered:
            try:
                outcome = Outcome(**json.loads(line))
            except (ValueError, TypeError) as exc:
                raise SystemExit(f"{path}:{number}: not a saved outcome: {exc}") from None
            by_id[outcome.id] = outcome
    return sorted(by_id.values(), key=lambda o: _case_number(o.id))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="local/qwen2.5-coder-0.5b")
    parser.add_argument("--category", default="simple_python",
                        help="a BFCL category (simple_python, parallel, parallel_multiple, "
                        "irrelevance, ...) or several, comma-separated")
    parser.add_argument("--limit", type=int, default=None, help="first N cases (default all)")
    parser.add_argument("--offset", type=int, default=0)
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--threads", type=int, default=None,
                        help="llama.cpp threads for local models (default: all cores)")
    parser.add_argument("--tool-call-mode", choices=("native", "constrained", "text", "hybrid"),
                        default=None, help="the adapter's mode (default: the provider's; "
                        "constrained for local models)")
    parser.add_argument("--instruction", default=INSTRUCTION,
                        help="the system instruction ('' sends none: the chat template's "
                        "default applies)")
    parser.add_argument("--tool-choice", choices=("auto", "required"), default="auto",
                        help="the request's tool_choice (default auto)")
    parser.add_argument("--json", type=Path, default=None, help="write per-case outcomes here")
    parser.add_argument("--report", type=Path, nargs="+", default=None, metavar="JSONL",
                        help="summarize earlier --json files (e.g. chunks run with --offset) "
                        "instead of running")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    if args.report:
        outcomes = rescore(read_outcomes(args.report))
        recorded = sorted({o.model for o in outcomes if o.model})
        print(summarize(outcomes, ", ".join(recorded) or args.model))
        return 0
    outcomes = asyncio.run(evaluate(args))
    print(summarize(outcomes, args.model))
    return 0


if __name__ == "__main__":
    sys.exit(main())
