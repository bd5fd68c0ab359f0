"""Per-call accuracy inside BFCL cases that expect several calls (issue 19).

BFCL counts a ``parallel`` case right only when every expected call is matched. This script
reads the ``--json`` files of ``bench/bfcl_eval.py`` runs and counts, over their cases, how
many expected calls one of the reply's calls matches on its own (BFCL's checker, each expected
call as a one-call case; a reply's call matches at most one expected call), how many calls the
replies wrote, and what the case score would be if every call were right with probability
``--p`` independently (the mean of p**k over the cases, k the number of expected calls)::

    python bench/bfcl_percall.py --category parallel --p 0.89 a15_par10.jsonl c15_par10_30.jsonl
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def _bfcl_eval() -> Any:
    """bench/bfcl_eval.py (a script, loaded by path: its name shadows the bfcl_eval package)."""
    spec = importlib.util.spec_from_file_location("bfcl_eval_script",
                                                  Path(__file__).with_name("bfcl_eval.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _outcomes(files: list[str]) -> dict[str, dict[str, Any]]:
    """The saved outcome of each case id (a later file wins)."""
    outcomes: dict[str, dict[str, Any]] = {}
    for name in files:
        with open(name, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    row = json.loads(line)
                    outcomes[row["id"]] = row
    return outcomes


@dataclass(frozen=True)
class PerCall:
    """What :func:`per_call` counts over a set of cases."""

    cases: int
    right: int
    expected: int
    written: int
    matched: int
    reference: float | None
    """The share of cases right if every call were right with ``p``, independently."""


def per_call(be: Any, cases: dict[str, Any], outcomes: dict[str, dict[str, Any]],
             p: float | None = None) -> PerCall:
    """Count ``outcomes`` (saved rows of ``bench/bfcl_eval.py``) against their ``cases``:
    each expected call matched on its own by one of the reply's calls (BFCL's checker via
    ``be.bfcl_verdict``, each reply call matching at most one expected call)."""
    expected = matched = written = right = 0
    reference = 0.0
    for case_id, outcome in outcomes.items():
        case = cases[case_id]
        calls = [(c["name"], c["arguments"]) for c in outcome.get("calls") or []]
        written += len(calls)
        right += bool(outcome["ok"])
        used: set[int] = set()
        for answer in case["answer"]:
            expected += 1
            one = {"function": case["function"], "answer": [answer]}
            for i, call in enumerate(calls):
                if i not in used and be.bfcl_verdict(one, "simple_python", [call]) is None:
                    matched += 1
                    used.add(i)
                    break
        if p is not None:
            reference += p ** len(case["answer"])
    n = len(outcomes)
    return PerCall(n, right, expected, written, matched,
                   None if p is None or not n else reference / n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("jsonl", nargs="+", help="--json files of bench/bfcl_eval.py runs")
    parser.add_argument("--category", default="parallel")
    parser.add_argument("--p", type=float, default=None,
                        help="a per-call accuracy (e.g. simple_python's) for the reference")
    args = parser.parse_args()
    be = _bfcl_eval()
    cases = {c["id"]: c for c in be.load_cases(args.category)}
    r = per_call(be, cases, _outcomes(args.jsonl), args.p)
    print(f"{args.category}: {r.cases} cases, {r.right} right ({r.right / r.cases:.1%})")
    print(f"expected calls {r.expected}, written {r.written}, "
          f"matched {r.matched} ({r.matched / r.expected:.1%})")
    if r.reference is not None:
        print(f"each call right with p={args.p} independently: {r.reference:.1%} of the cases")


if __name__ == "__main__":
    main()
