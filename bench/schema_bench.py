"""JSON Schema work on and off the hot path: validation per tool call, strict compilation,
validator compilation and the BFCL gram round trip.

Validation runs on every tool call, so it is measured per call: jsonschema's own validator
(the reference), gramagent's validator kept at bind time (what the runtime does), the same
through ``compile_validator``'s cache (a lookup by canonical JSON first), and on invalid
arguments (which goes through jsonschema to format the messages). The rest
runs once per tool (strict compilation, validator compilation) or only in tests (the BFCL round
trip), over the 3,258 unique functions of bfcl-eval 2026.3.23.

Usage::

    python bench/schema_bench.py            # needs bfcl-eval for the corpus figures
    python bench/schema_bench.py --calls 50000
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from gramagent._spec.bfcl import iter_bfcl_functions, normalize_bfcl_function
from gramagent._spec.calls.validate import compile_validator
from gramagent._spec.schema.strict import strict_schema
from gramagent._spec.signature import (
    format_signature,
    parse_signature,
    schema_to_signature,
    signature_to_schema,
)
from gramagent.errors import ConfigurationError

CHART: dict[str, Any] = json.loads(
    (Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "chart_tool.json").read_text()
)
"""The chart tool of the seed notes: a realistic, nested tool schema."""

VALID = {"df_name": "sales", "logical_name": "", "chart_type": "line", "x_field": "month",
         "x_label": "Month", "y_label": "", "series": [{"name": "Revenue", "y_field": "rev"},
                                                        {"name": "Cost", "y_field": "cost"}],
         "title": "", "note": ""}
INVALID = {**VALID, "chart_type": "pie", "series": [{"name": 3}], "extra": True}


def per_call(fn: Callable[[], Any], calls: int) -> float:
    """Microseconds per call of ``fn``, best of three rounds."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, time.perf_counter() - start)
    return best / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20_000, help="calls per timing round")
    args = parser.parse_args()

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=Path(__file__).parent, check=False).stdout.strip()
    print(f"# commit {commit or '?'}, Python {platform.python_version()}, "
          f"{platform.machine()} {platform.processor() or ''}".rstrip())

    plain = Draft202012Validator(CHART, format_checker=Draft202012Validator.FORMAT_CHECKER)
    reference = per_call(lambda: plain.is_valid(VALID), args.calls)
    print(f"validate, jsonschema alone      {reference:8.1f} us/call")
    kept = compile_validator(CHART)
    print(f"validate, validator kept        {per_call(lambda: kept.errors(VALID), args.calls):8.1f}"
          " us/call")
    print(f"validate, via compile_validator "
          f"{per_call(lambda: compile_validator(CHART).errors(VALID), args.calls):8.1f} us/call")
    print(f"validate, invalid (4 messages)  "
          f"{per_call(lambda: kept.errors(INVALID), args.calls // 4):8.1f} us/call")

    try:
        docs = [normalize_bfcl_function(d) for d in iter_bfcl_functions()]
    except ConfigurationError as exc:
        print(f"(BFCL figures skipped: {exc})")
        return
    schemas = [d["parameters"] for d in docs]
    n = len(schemas)

    start = time.perf_counter()
    for schema in schemas:
        strict_schema(schema)
    strict_s = time.perf_counter() - start
    print(f"strict_schema, BFCL corpus      {strict_s / n * 1e6:8.1f} us/schema ({n} schemas)")

    start = time.perf_counter()
    for schema in schemas:
        compile_validator(schema)
    compile_s = time.perf_counter() - start
    print(f"compile_validator, cold         {compile_s / n * 1e3:8.2f} ms/schema")

    start = time.perf_counter()
    for schema in schemas:
        signature_to_schema(parse_signature(format_signature(schema_to_signature(schema))))
    trip_s = time.perf_counter() - start
    print(f"BFCL gram round trip, corpus    {trip_s:8.2f} s ({trip_s / n * 1e3:.2f} ms/function)")


if __name__ == "__main__":
    main()
