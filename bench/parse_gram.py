"""Gram parsing speed: tree-sitter alone vs. the whole load to spec objects.

Generates a gram file of stand-alone tool patterns (about 1 MB by default: scalar parameters
with descriptions, defaults, enums and bounds, some array and nested-object parameters with
type patterns), then times

- ``parse``: tree-sitter-gram parsing the bytes into a syntax tree, and
- ``load``: :func:`gramagent._spec.gram.text.load_gram`, i.e. parse + walk + build every
  ``ToolSpec`` (signature and JSON Schema),
- ``load, tree walk only``: the same with the reader's regex fast route turned off (every
  value read from tree-sitter nodes), to show what the fast route saves,

and prints MB/s for both and their ratio. Times are CPU time of this process
(``time.process_time``), best of ``--repeat`` runs: the work is single-threaded and CPU-bound,
and CPU time is much less disturbed than wall time on a shared, busy machine.

Usage::

    python3 bench/parse_gram.py [--size-mb 1.0] [--repeat 5] [--seed 0] [--write FILE]
"""

from __future__ import annotations

import argparse
import platform
import random
import time
from pathlib import Path

from tree_sitter import Parser

from gramagent._spec.gram.docreader import DocumentReader
from gramagent._spec.gram.syntax import LANGUAGE
from gramagent._spec.gram.text import load_gram

WORDS = ("city", "name", "count", "limit", "unit", "query", "date", "region", "price", "mode",
         "label", "title", "note", "weight", "height", "depth", "color", "size", "level")


def _param(rng: random.Random, index: int) -> tuple[str, str | None]:
    """One parameter node, and the type pattern it needs (if any)."""
    name = f"{rng.choice(WORDS)}{index}"
    desc = f'description: "The {name} to use, as the user gave it"'
    kind = rng.randrange(8)
    if kind == 0:
        return f'({name}::String {{{desc}, default: "{rng.choice(WORDS)}"}})', None
    if kind == 1:
        return (f"({name}::Integer {{{desc}, minimum: 0, maximum: {rng.randrange(10, 999)}, "
                f"default: {rng.randrange(10)}}})"), None
    if kind == 2:
        return f"({name}::Number {{{desc}}})", None
    if kind == 3:
        return f"({name}::Boolean {{{desc}, default: false}})", None
    if kind == 4:
        values = ", ".join(f'"{w}"' for w in rng.sample(WORDS, 4))
        return f"({name}::String {{{desc}, enum: [{values}]}})", None
    if kind == 5:
        return f"({name}::Array {{{desc}, items: String, minItems: 1}})", None
    if kind == 6:
        type_name = name.capitalize()
        pattern = (f"[{type_name}:Object {{additionalProperties: false}} |\n"
                   f"    (x::Number {{description: \"x\"}}),\n"
                   f"    (y::Number {{description: \"y\"}}),\n"
                   f"    (tag::String {{required: false}})\n  ]")
        return f"({name}::{type_name} {{{desc}}})", pattern
    return f"({name}::String:Null {{{desc}, required: false}})", None


def generate(size: int, seed: int = 0) -> str:
    """Gram text of stand-alone tool patterns, at least ``size`` bytes long."""
    rng = random.Random(seed)
    blocks: list[str] = []
    total = 0
    index = 0
    while total < size:
        params = [_param(rng, i) for i in range(rng.randrange(1, 7))]
        path = "\n  ==>".join(node for node, _ in params) + "\n  ==>(::String)"
        elements = [path, *(pattern for _, pattern in params if pattern)]
        block = (f'[tool{index}:Tool {{description: "Tool number {index}: does one thing '
                 f'well, for the benchmark"}} |\n  ' + ",\n  ".join(elements) + "\n]\n")
        blocks.append(block)
        total += len(block.encode())
        index += 1
    return "\n".join(blocks)


def best(fn: object, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.process_time()
        fn()  # type: ignore[operator]
        times.append(time.process_time() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write", type=Path, help="also write the generated file here")
    args = parser.parse_args()

    text = generate(int(args.size_mb * 1_000_000), args.seed)
    src = text.encode()
    if args.write:
        args.write.write_bytes(src)
    document = load_gram(src)  # warm-up, and a check that the file is valid
    megabytes = len(src) / 1_000_000

    parse = best(lambda: Parser(LANGUAGE).parse(src), args.repeat)
    load = best(lambda: load_gram(src), args.repeat)
    tree_only = best(lambda: DocumentReader(src, None, fast=False).document(), args.repeat)
    params = sum(len(t.signature.params) for t in document.tools)
    print(f"file: {megabytes:.2f} MB, {len(document.tools)} tools, {params} parameters")
    print(f"python {platform.python_version()} on {platform.machine()}, "
          f"best of {args.repeat} (CPU time)")
    print(f"tree-sitter parse : {parse * 1000:8.1f} ms  {megabytes / parse:6.2f} MB/s")
    print(f"load_gram (total) : {load * 1000:8.1f} ms  {megabytes / load:6.2f} MB/s")
    print(f"  tree walk only  : {tree_only * 1000:8.1f} ms  {megabytes / tree_only:6.2f} MB/s")
    print(f"load / parse time : {load / parse:6.2f}x")


if __name__ == "__main__":
    main()
