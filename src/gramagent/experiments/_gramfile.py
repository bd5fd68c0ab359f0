"""Experiment files in gram notation: one ``[name:Experiment {...} | variants, evaluators]``.

::

    [greetings:Experiment {
      agent: "hello.gram",          // the agent file, relative to this one
      cases: "cases.jsonl",         // JSONL, CSV or Parquet, relative to this file
      repeats: 1, baseline: "A", alpha: 0.05, seed: 0,
      store: "greetings.sqlite"
    } |
      [A:Variant {library: "ab_tools:polite"}],
      [B:Variant {library: "ab_tools:terse", limits: {max_iterations: 4}}],
      [greets:Evaluator {kind: "contains", value: "Hello"}],
      [called:Evaluator {kind: "tool_called", tool: "sayHello"}]
    ]

Every problem of the file (syntax, unknown keys, wrong types, a bad variant or evaluator, an
agent or dataset that cannot be read) is reported at once, as ``file:line:column: message``,
in one :class:`~gramagent.errors.ExperimentError`. The format is documented in
``docs/experiments.md``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tree_sitter import Node

from gramagent import Agent, load_agent
from gramagent._files import read_bounded
from gramagent._limit_values import limit_problem
from gramagent._models.chat import TOOL_CALL_MODES
from gramagent._prices import price_problem, prices_from
from gramagent._spec.gram.syntax import K_COMMENT, K_SUBJECT, NodeInfo
from gramagent._spec.gram.typereader import INVALID as _INVALID
from gramagent._spec.gram.typereader import TypeReader as _Reader
from gramagent._spec.gram.typereader import elements as _elements
from gramagent.errors import ConfigurationError, Diagnostic, ExperimentError, SpecError
from gramagent.experiments._cases import Dataset, load_cases
from gramagent.experiments._evaluators import DEFAULT_TIME_LIMIT, EvaluatorSpec
from gramagent.experiments._experiment import Experiment
from gramagent.experiments._variants import Variant

__all__ = ["KEY_ORDERS", "check_experiment_text", "is_experiment_file", "load_experiment"]

_EXPERIMENT_KEYS: dict[str, Callable[[Any], bool]] = {
    "agent": lambda v: isinstance(v, str) and bool(v),
    "agent_name": lambda v: isinstance(v, str) and bool(v),
    "cases": lambda v: isinstance(v, str) and bool(v),
    "repeats": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1,
    "baseline": lambda v: isinstance(v, str),
    "alpha": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < 1,
    "seed": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "store": lambda v: isinstance(v, str) and bool(v),
    "rate_limits": lambda v: isinstance(v, dict) and all(
        isinstance(r, (int, float)) and not isinstance(r, bool) and r > 0 for r in v.values()),
    "evaluator_timeout": lambda v: limit_problem("evaluator_timeout", v, optional=False) is None,
    "engine": lambda v: v in ("local", "ray"),
    "stop_when_decided": lambda v: isinstance(v, bool),
    "prices": lambda v: isinstance(v, dict) and all(price_problem(p) is None
                                                    for p in v.values()),
}
_EXPECTED = {
    "agent": "a file name", "agent_name": "an agent name", "cases": "a file name",
    "repeats": "a positive integer", "baseline": "a variant name",
    "alpha": "a number between 0 and 1", "seed": "an integer", "store": "a file name",
    "rate_limits": "a map of model to requests per second, e.g. {`openai/gpt-4o-mini`: 5}",
    "evaluator_timeout": "a positive number of seconds",
    "engine": "local or ray",
    "stop_when_decided": "true or false",
    "prices": "a map of model to \"INPUT,OUTPUT\" dollars per million tokens, e.g. "
              "{`openai/gpt-4o-mini`: \"0.15,0.6\"}",
}
_VARIANT_KEYS: dict[str, Callable[[Any], bool]] = {
    "library": lambda v: isinstance(v, str),
    "model": lambda v: isinstance(v, str),
    "api": lambda v: v in ("chat", "functions", "responses", "harmony"),
    "base_url": lambda v: isinstance(v, str),
    "instruction": lambda v: isinstance(v, str) and bool(v.strip()),
    "limits": lambda v: isinstance(v, dict),
    "tool_call_mode": lambda v: v in TOOL_CALL_MODES,
    "settings": lambda v: isinstance(v, dict),
}
_VARIANT_EXPECTED = {
    "library": "'module:attribute'", "model": "'provider/name'",
    "api": "one of chat, functions, responses, harmony", "base_url": "a URL",
    "instruction": "a non-empty string", "limits": "a map of run limits",
    "tool_call_mode": "one of " + ", ".join(TOOL_CALL_MODES),
    "settings": "a map of request fields",
}

KEY_ORDERS: dict[str, tuple[str, ...]] = {
    "Experiment": tuple(_EXPERIMENT_KEYS), "Variant": tuple(_VARIANT_KEYS),
    "Evaluator": ("kind",)}
"""The order ``gramagent fmt`` writes the keys of each pattern's record in (an evaluator's
options follow its kind in their order)."""


def load_experiment(path: str | os.PathLike[str]) -> Experiment:
    """Read an experiment file, its agent and its dataset.

    Raises:
        ExperimentError: every problem of the file, its agent reference or its dataset,
            positioned.
    """
    name = str(path)
    try:
        src = read_bounded(path)
    except OSError as exc:
        raise ExperimentError(f"{name}: cannot read: {exc.strerror or exc}") from None
    reader = _Reader(src, name)
    try:
        experiment = _read(reader, Path(path))
    except SpecError as exc:
        raise ExperimentError(exc.diagnostics) from None
    return experiment


def check_experiment_text(src: bytes, file: str | None) -> None:
    """Check what an experiment text says by itself: its syntax, keys and values, variants
    and evaluators, not the agent and dataset it names (``gramagent fmt`` reads only the
    file it formats; :func:`load_experiment` reads them too).

    Raises:
        ExperimentError: every such problem, positioned.
    """
    reader = _Reader(src, file)
    try:
        _shape(reader)
        reader.raise_problems()
    except SpecError as exc:
        raise ExperimentError(exc.diagnostics) from None


def is_experiment_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` holds gram whose top-level pattern is an ``Experiment`` (read, not
    checked: :func:`load_experiment` checks it); False when it cannot be read."""
    try:
        reader = _Reader(read_bounded(path), str(path))
        for child in reader.tree.root_node.named_children:
            if child.kind_id == K_SUBJECT and not child.has_error:
                info = reader.decoder.info(child)
                if info is not None and info.labels == ("Experiment",):
                    return True
    except (OSError, SpecError, UnicodeDecodeError):  # not text gram can hold: not one
        return False
    return False


def _shape(reader: _Reader) -> tuple[NodeInfo, dict[str, Any], list[Variant],
                                     list[EvaluatorSpec]]:
    """The experiment pattern of a text, its checked fields, variants and evaluators (the
    problems of what the text says by itself reported)."""
    node, info = _find_experiment(reader)
    fields = _record(reader, info, "experiment", _EXPERIMENT_KEYS, _EXPECTED)
    if info.ident is None:
        reader.error(info.offset, "the experiment needs a name, e.g. [greetings:Experiment ...]")
    for key in ("agent", "cases"):
        if key not in fields and not any(k == key for k, _, _ in info.entries or ()):
            reader.error(info.offset, f"experiment: missing {key}")
    variants, evaluators = _members(reader, node)
    if len(variants) < 2 and not reader.problems:
        reader.error(info.offset, "experiment: needs at least two variants")
    return info, fields, variants, evaluators


def _read(reader: _Reader, path: Path) -> Experiment:
    info, fields, variants, evaluators = _shape(reader)
    base = path.parent
    agent = _agent(reader, fields, base, info)
    dataset, row_problems = _dataset(fields, base)
    try:
        reader.raise_problems()
    except SpecError as exc:
        raise ExperimentError([*exc.diagnostics, *row_problems]) from None
    if row_problems:
        raise ExperimentError(row_problems)
    assert agent is not None and dataset is not None and info.ident is not None
    try:
        return Experiment(
            name=info.ident, agent=agent, dataset=dataset,
            variants=tuple(variants), evaluators=tuple(evaluators),
            repeats=fields.get("repeats", 1), baseline=fields.get("baseline"),
            alpha=float(fields.get("alpha", 0.05)), seed=fields.get("seed", 0),
            store=fields.get("store"), rate_limits=fields.get("rate_limits", {}),
            evaluator_timeout=fields.get("evaluator_timeout", DEFAULT_TIME_LIMIT),
            stop_when_decided=fields.get("stop_when_decided", False),
            prices={m: (p.input, p.output)
                    for m, p in prices_from(fields.get("prices", {})).items()},
            source=str(path), engine=fields.get("engine"))
    except ConfigurationError as exc:
        raise ExperimentError([Diagnostic(str(exc), str(path), *reader.decoder.position(
            info.offset))]) from None


def _find_experiment(reader: _Reader) -> tuple[Node, NodeInfo]:
    """The file's one top-level experiment pattern (anything else is reported)."""
    root = reader.tree.root_node
    found: list[tuple[Node, NodeInfo]] = []
    for child in root.named_children if not root.is_error else ():
        if child.kind_id == K_COMMENT or child.is_error or child.has_error:
            continue
        info = reader.decoder.info(child) if child.kind_id == K_SUBJECT else None
        if info is None or info.labels != ("Experiment",):
            reader.error(child.start_byte, "expected an experiment [name:Experiment {...} | "
                                           "variants and evaluators] at the top level")
            continue
        found.append((child, info))
    if len(found) > 1:
        reader.error(found[1][1].offset, "one experiment per file")
    if not found:
        if not reader.problems:
            reader.error(0, "no experiment in this file (expected [name:Experiment {...} | "
                            "[A:Variant {...}], [B:Variant {...}], ...])")
        reader.raise_problems()
    return found[0]


def _members(reader: _Reader, node: Node) -> tuple[list[Variant], list[EvaluatorSpec]]:
    """The variants and evaluators of an experiment pattern (bad ones reported)."""
    variants: list[Variant] = []
    evaluators: list[EvaluatorSpec] = []
    for child in _elements(node):
        info = reader.decoder.info(child) if child.kind_id == K_SUBJECT else None
        if info is not None and info.labels == ("Variant",):
            variant = _variant(reader, info)
            if variant is not None:
                variants.append(variant)
        elif info is not None and info.labels == ("Evaluator",):
            spec = _evaluator(reader, info)
            if spec is not None:
                evaluators.append(spec)
        else:
            reader.error(child.start_byte, "expected a variant [name:Variant {...}] or an "
                                           "evaluator [name:Evaluator {kind: ...}]")
            continue
        inside = _elements(child)
        if inside:  # which neither the reader nor fmt would read
            what = "a variant" if info.labels == ("Variant",) else "an evaluator"
            reader.error(inside[0].start_byte, f"{what} has no elements after '|': its "
                                               "settings go in its record {...}")
    return variants, evaluators


def _record(reader: _Reader, info: NodeInfo, what: str, keys: dict[str, Callable[[Any], bool]],
            expected: dict[str, str]) -> dict[str, Any]:
    """The checked record entries of a pattern (problems reported, bad entries left out)."""
    out: dict[str, Any] = {}
    for key, key_offset, val in info.entries or ():
        if key in out:
            reader.error(key_offset, f"{what}: duplicate key '{key}'")
            continue
        if key not in keys:
            reader.error(key_offset, f"{what}: unknown property '{key}' (expected "
                                     f"{', '.join(keys)})")
            continue
        value = reader.json(val)
        if value is _INVALID:
            continue
        if not keys[key](value):
            reader.error(val[2], f"{what}: {key} must be {expected[key]}")
            continue
        out[key] = value
    return out


def _variant(reader: _Reader, info: NodeInfo) -> Variant | None:
    name = info.ident
    what = f"variant '{name}'" if name else "variant"
    count = len(reader.problems)
    fields = _record(reader, info, what, _VARIANT_KEYS, _VARIANT_EXPECTED)
    if name is None:
        reader.error(info.offset, "a variant needs a name, e.g. [A:Variant {library: ...}]")
    if len(reader.problems) > count or name is None:
        return None
    variant = Variant(name=name, **fields)
    for problem in variant.problems():
        reader.error(info.offset, problem)
    return variant


def _evaluator(reader: _Reader, info: NodeInfo) -> EvaluatorSpec | None:
    name = info.ident
    what = f"evaluator '{name}'" if name else "evaluator"
    if name is None:
        reader.error(info.offset, "an evaluator needs a name, e.g. [greets:Evaluator "
                                  "{kind: \"contains\", value: \"Hello\"}]")
        return None
    kind: str | None = None
    options: dict[str, Any] = {}
    for key, key_offset, val in info.entries or ():
        value = reader.json(val)
        if value is _INVALID:
            continue
        if key == "kind":
            if kind is not None:
                reader.error(key_offset, f"{what}: duplicate key 'kind'")
                continue
            if not isinstance(value, str):
                reader.error(val[2], f"{what}: kind must be a string")
                continue
            kind = value
        elif key in options:
            reader.error(key_offset, f"{what}: duplicate key '{key}'")
        else:
            options[key] = value
    if kind is None:
        reader.error(info.offset, f"{what}: missing kind (e.g. kind: \"contains\")")
        return None
    spec = EvaluatorSpec(name=name, kind=kind, options=options)
    for problem in spec.problems():
        reader.error(info.record_offset if info.entries else info.offset, problem)
    return spec


def _agent(reader: _Reader, fields: dict[str, Any], base: Path, info: NodeInfo
           ) -> Agent | None:
    if "agent" not in fields:
        return None
    offset = _value_offset(info, "agent")
    try:
        return load_agent(base / fields["agent"], fields.get("agent_name"))
    except SpecError as exc:
        reader.error(offset, f"agent {fields['agent']!r}: " + "; ".join(
            str(d) for d in exc.diagnostics))
    except (OSError, ConfigurationError) as exc:
        reader.error(offset, f"agent {fields['agent']!r}: {exc}")
    return None


def _dataset(fields: dict[str, Any], base: Path) -> tuple[Dataset | None, list[Diagnostic]]:
    """The dataset, or the problems of its rows (each positioned in the dataset's file)."""
    if "cases" not in fields:
        return None, []
    try:
        return load_cases(base / fields["cases"]), []
    except ExperimentError as exc:
        return None, list(exc.diagnostics)


def _value_offset(info: NodeInfo, key: str) -> int:
    for k, _, val in info.entries or ():
        if k == key:
            offset: int = val[2]
            return offset
    return info.offset
