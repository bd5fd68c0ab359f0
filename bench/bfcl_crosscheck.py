"""Check bench/bfcl_eval.py's checker (BFCL's rules) against BFCL's own ``ast_checker``.

Reads ``--json`` files of ``bench/bfcl_eval.py`` runs on ``simple_python`` and prints every
case where the two verdicts differ, then the count. bfcl-eval is installed with
``--no-deps``, so its model table (which imports every provider's SDK) is replaced by one
that keeps function names as they are, which is what the checker needs of it.

Usage::

    python bench/bfcl_crosscheck.py s05a.jsonl s05b.jsonl s15a.jsonl s15b.jsonl
"""

from __future__ import annotations

import json
import sys
import types
from collections import defaultdict
from pathlib import Path
from typing import Any

from bfcl_probes import be  # bench/bfcl_eval.py, loaded by path

# This directory holds bfcl_eval.py, which would shadow the bfcl_eval package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent]


def bfcl_ast_checker() -> Any:
    """BFCL's ``ast_checker`` and its ``Language.PYTHON``."""
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
    return ast_checker, Language.PYTHON


def main(paths: list[str]) -> int:
    ast_checker, python = bfcl_ast_checker()
    cases = {case["id"]: case for case in be.load_cases("simple_python")}
    total = differ = 0
    for path in paths:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            outcome = json.loads(line)
            case = cases[outcome["id"]]
            calls = [(c["name"], c["arguments"]) for c in outcome["calls"]]
            ours = be.check_simple_call(case["function"][0], calls, case["answer"][0]) is None
            try:
                theirs = ast_checker(case["function"], [{n: a} for n, a in calls],
                                     case["answer"], python, "simple_python", "gramagent")
                bfcl = bool(theirs["valid"])
            except Exception:  # noqa: BLE001 - BFCL raises on malformed arguments
                bfcl = False
            total += 1
            if ours != bfcl:
                differ += 1
                print(f"{outcome['id']}: ours {ours}, BFCL {bfcl}: {outcome['calls']}")
    print(f"{total} outcomes, {differ} where the verdicts differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
