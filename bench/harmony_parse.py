"""Harmony parse throughput: gramagent's parser vs openai-harmony's, on one generated completion.

The completion is a long agent trace in Harmony text (a few MB, thousands of tool calls):
chain of thought, an occasional preamble, a call to a function with JSON arguments, the tool's
result, and a final answer at the end. It is parsed by

- ``gramagent batch``: :func:`gramagent._models.harmony_parse.parse_harmony` on the text;
- ``gramagent stream``: :class:`~gramagent._models.harmony_parse.HarmonyStreamParser` fed
  chunks of ``--chunk`` characters (about what a server streams per event);
- ``openai-harmony``, when installed (``pip install 'gramagent[harmony]'``): tokenizing the
  text (``encode(..., allowed_special="all")``), then ``parse_messages_from_completion_tokens``,
  then ``StreamableParser.process`` token by token; each timed separately.

Throughput is the UTF-8 size of the text over the best of ``--repeat`` wall-clock times. The
messages of each parser are compared (role, channel, recipient, content type, content).

Run: ``python bench/harmony_parse.py`` (``--help`` for the knobs).
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gramagent._models.harmony_parse import HarmonyStreamParser, parse_harmony

WORDS = ["the", "user", "wants", "weather", "data", "so", "I", "should", "call", "tool",
         "with", "city", "then", "compare", "results", "across", "days", "and", "report", "a",
         "concise", "answer", "units"]
TOOLS = ("get_weather", "search_flights", "lookup_user", "read_file", "run_query")


def make_completion(calls: int, seed: int = 7) -> str:
    """A deterministic agent trace with ``calls`` tool calls (about 1 KB per call)."""
    rng = random.Random(seed)
    out: list[str] = []
    for i in range(calls):
        thought = " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 160)))
        head = "<|channel|>" if i == 0 else "<|start|>assistant<|channel|>"
        out.append(f"{head}analysis<|message|>{thought}<|end|>")
        if i % 10 == 0:
            out.append("<|start|>assistant<|channel|>commentary<|message|>Working on step "
                       f"{i}.<|end|>")
        tool = TOOLS[i % len(TOOLS)]
        args = json.dumps({"id": i, "city": rng.choice(["Paris", "Zürich", "東京", "Lima"]),
                           "days": rng.randint(1, 14), "tags": ["a", "b", "c"][: rng.randint(0, 3)],
                           "note": " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 40)))},
                          ensure_ascii=False)
        out.append(f"<|start|>assistant<|channel|>commentary to=functions.{tool} "
                   f"<|constrain|>json<|message|>{args}<|call|>")
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 80)))
        result = json.dumps({"ok": True, "value": rng.random(), "text": words})
        out.append(f"<|start|>functions.{tool} to=assistant<|channel|>commentary"
                   f"<|message|>{result}<|end|>")
    out.append("<|start|>assistant<|channel|>final<|message|>All done.<|return|>")
    return "".join(out)


def best_time(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def stream_parse(text: str, chunk: int) -> list[Any]:
    parser = HarmonyStreamParser()
    for i in range(0, len(text), chunk):
        parser.feed(text[i : i + chunk])
    parser.finish()
    return parser.messages


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=4000, help="tool calls in the completion")
    ap.add_argument("--repeat", type=int, default=5, help="runs per measurement (best kept)")
    ap.add_argument("--chunk", type=int, default=16, help="characters per streamed chunk")
    ap.add_argument("--reference-repeat", type=int, default=2,
                    help="runs per openai-harmony measurement")
    ap.add_argument("--no-reference", action="store_true", help="skip openai-harmony")
    args = ap.parse_args(argv)

    text = make_completion(args.calls)
    size = len(text.encode("utf-8"))
    mb = size / 1e6
    print(f"completion: {mb:.2f} MB, {len(text):,} characters, {args.calls:,} tool calls")
    print(f"python {platform.python_version()} on {platform.machine()} "
          f"({platform.processor() or platform.platform()})")
    rows: list[tuple[str, float]] = []

    t, ours = best_time(lambda: parse_harmony(text), args.repeat)
    calls = sum(1 for m in ours if m.is_tool_call)
    errors = sum(1 for m in ours if m.error_type)
    assert calls == args.calls and errors == 0, (calls, errors)
    rows.append(("gramagent batch (parse_harmony)", t))
    t, streamed = best_time(lambda: stream_parse(text, args.chunk), args.repeat)
    assert streamed == ours
    rows.append((f"gramagent stream ({args.chunk}-char chunks)", t))

    if not args.no_reference:
        try:
            import openai_harmony as oh

            sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "models"))
            from harmony_reference import load_reference_encoding  # tests/models/

            enc = load_reference_encoding()
        except Exception as exc:  # not installed, or no vocabulary
            print(f"openai-harmony: skipped ({type(exc).__name__}: {exc})")
        else:
            rep = args.reference_repeat
            t_tok, tokens = best_time(lambda: enc.encode(text, allowed_special="all"), rep)
            rows.append((f"openai-harmony tokenize ({len(tokens):,} tokens)", t_tok))
            t_parse, reference = best_time(
                lambda: enc.parse_messages_from_completion_tokens(tokens, oh.Role.ASSISTANT),
                rep)
            rows.append(("openai-harmony parse_messages_from_completion_tokens", t_parse))
            rows.append(("openai-harmony tokenize + parse", t_tok + t_parse))

            def streamable() -> int:
                parser = oh.StreamableParser(enc, role=oh.Role.ASSISTANT)
                for token in tokens:
                    parser.process(token)
                parser.process_eos()
                return len(parser.messages)

            t_stream, count = best_time(streamable, rep)
            rows.append(("openai-harmony StreamableParser.process per token", t_stream))
            ref = [(m.author.role.value, m.channel, m.recipient, m.content_type,
                    m.content[0].text) for m in reference]
            mine = [(m.role, m.channel, m.recipient, m.content_type, m.content) for m in ours]
            print(f"messages: gramagent {len(ours):,}, openai-harmony {len(reference):,} "
                  f"(streamable {count:,}); identical: {mine == ref}")

    width = max(len(name) for name, _ in rows)
    print(f"\n{'parser':<{width}}  {'seconds':>8}  {'MB/s':>8}")
    for name, seconds in rows:
        print(f"{name:<{width}}  {seconds:8.3f}  {mb / seconds:8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
