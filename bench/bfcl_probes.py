"""One-off probes of the embedded model on BFCL cases, behind the "what we tried" figures of
bench/RESULTS.md ("BFCL simple_python"). None of them is how gramagent runs; each asks the
embedded llama.cpp server directly with a variant of the constrained request.

``fence``
    The constrained step schema as an llguidance grammar that also lets the reply open with
    a ```` ```json ```` fence, sent to the raw ``/completion`` endpoint with the chat
    template's prompt (``/apply-template``): llama.cpp refuses custom grammars beside
    ``tools``. Scored with bench/bfcl_eval.py's checker (simple_python).
``tag``
    The same, but the call must come in the chat template's own form, between Qwen's
    ``<tool_call>`` and ``</tool_call>`` tokens, and the final answer stays the
    ``{"text": ...}`` variant: does the template's native call format help?
``free-name``
    A schema ``{"name": string}`` only: how often the model names an offered function.
``named-final``
    The step schema with the final answer spelt as a call
    (``{"name": "final_answer", "arguments": {"text": ...}}``); counts the declines
    (irrelevance) or scores the calls (simple_python).
``thought-first``
    Every variant of the step schema opens with a ``"thought"`` string (at most 200
    characters) before the call or the answer: does a sentence of reasoning let the model
    notice that no function fits? Counts declines or scores calls, as ``named-final``.
``decide-first``
    Every variant opens with ``"a_function_fits"``: ``true`` before a call, ``false`` before
    the final answer, so the first choice the model makes is a yes/no question.
``first-bracket``
    The ordinary constrained request with ``logprobs``: prints the probability the model gave
    the first token opening a list (``[``, ``[\n``) and an object (``{``, ``{"``, ``{\n``),
    as llama.cpp reports it, to see whether the model's own preference tells a several-call
    request from a one-call one. Scores the reply as it is.
``continue-lists``
    A reply that is a list of calls is asked again under a schema whose first items are its
    calls (``prefixItems`` with ``const``) and whose further items are free: does the model
    go on where it closed a list a call short? Scores the continued list.
``enumerate-v1``
    Issue 19, grounding the count: the step schema becomes ``{"requests": [...], "calls":
    [...]}`` (the separate results the user asks for, short strings, then a list of calls) or
    the final answer, with ``ENUMERATE_HINT`` in place of the sentence about lists. Scores the
    calls; prints the requests.
``enumerate-v2``
    The same in two requests: first ``{"requests": [...]}`` alone (``LIST_HINT``), then the
    call request with the N requests named in the instruction and a list of exactly N calls
    (``minItems = maxItems = N``; for N = 1 the one-call variants and the final answer).
``ask-first``
    A first constrained request asks the question outright: the conversation plus a user
    message ``ASK_FIRST`` (or ``--question``), answered by ``{"answer": "yes" | "no"}``; "no"
    (or ``--decline-on yes``, for a question asked the other way round) is a decline, the other
    answer is followed by the ordinary constrained step (scored as usual). Prints the
    probability the model gave "no" (``logprobs``) for each case.
``example-turns``
    A worked example given as earlier turns of the conversation (a question about three
    cities and two years answered by a list of six calls), before the user's message.
``decompose``
    Issue 19, each item asked alone: the case goes through the embedded model as gramagent
    runs it (constrained, the continuation of lone calls). When that reply is a list of 2+
    calls, a fresh request (``SPLIT_INSTRUCTION``, the functions' names and descriptions, the
    user's message; no tools) asks under a JSON list of two to eight strings for the separate
    requests, each complete on its own; then each request is asked
    alone, as the only user message, under the one-call variants (no list, no text answer,
    no sentence about lists): one call each, and those calls replace the list. Lone calls and
    text answers are scored as they are. Prints the requests and the calls. Its own
    requests go through the adapter's ``post_body``, so a reply llama.cpp's chat parser
    rejects is generated again raw, as the product does (``gramagent._models.unparsed``).

Usage::

    python bench/bfcl_probes.py fence --category simple_python --limit 50
    python bench/bfcl_probes.py tag --category simple_python --limit 50
    python bench/bfcl_probes.py free-name --category irrelevance --limit 50
    python bench/bfcl_probes.py named-final --category irrelevance --limit 50 \
        --model local/qwen2.5-coder-1.5b
    python bench/bfcl_probes.py thought-first --category irrelevance --limit 10
    python bench/bfcl_probes.py decide-first --category simple_python --limit 10
    python bench/bfcl_probes.py first-bracket --category parallel --limit 12
    python bench/bfcl_probes.py continue-lists --category parallel --limit 12
    python bench/bfcl_probes.py ask-first --category irrelevance --limit 6 \
        --model local/qwen2.5-coder-1.5b
    python bench/bfcl_probes.py enumerate-v1 --category parallel --ids 2,5,7 -v
    python bench/bfcl_probes.py decompose --category parallel --ids 7,18 -v \
        --model local/qwen2.5-coder-1.5b
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import importlib.util
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from gramagent._messages import UserMessage
from gramagent._models.base import Model
from gramagent._models.chat import ChatCompletionsModel
from gramagent._models.chat_reply import parse_chat_reply
from gramagent._models.chat_request import build_chat_body
from gramagent._models.http import HTTPClient
from gramagent._models.jsoncalls import FINAL_ANSWER, SEVERAL_CALLS_HINT, continued_list_schema
from gramagent._models.local import local_model
from gramagent._spec.model import ModelRef
from gramagent.errors import ModelAPIError


def _bfcl_eval() -> Any:
    """bench/bfcl_eval.py (a script, loaded by path: its name shadows the bfcl_eval package)."""
    spec = importlib.util.spec_from_file_location("bfcl_eval_script",
                                                  Path(__file__).with_name("bfcl_eval.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


be = _bfcl_eval()
SETTINGS = {"temperature": 0.0, "max_tokens": 512}
EXAMPLE_QUESTION = "What is the population of Lyon, of Nice and of Lille in 2020 and 2021?"
EXAMPLE_ANSWER = json.dumps([
    {"name": "population", "arguments": {"city": city, "year": year}}
    for city in ("Lyon", "Nice", "Lille") for year in (2020, 2021)])
"""example-turns: the worked example (six calls, one for each city and year)."""
EXAMPLE = ('For example, "the weather in Paris and Rome" asks for two results, "weather in '
           'Paris" and "weather in Rome"; "the distance from Paris to Rome" asks for one.')
ENUMERATE_HINT = (
    'To call functions, reply with a JSON object: first "requests", the list of the separate '
    'results the user asks for, one short phrase for each with its own values; then "calls", '
    "the list of calls, one call for each request. " + EXAMPLE)
LIST_HINT = (
    "Before answering, list the separate results the user asks for, one short phrase for each "
    'with its own values, as a JSON object {"requests": [...]}. ' + EXAMPLE)


def _requests(max_length: int) -> dict[str, Any]:
    """The schema of the list of requests: short strings, at most 8."""
    return {"type": "array", "items": {"type": "string", "maxLength": max_length},
            "minItems": 1, "maxItems": 8}

SPLIT_INSTRUCTION = (
    "Split the user's message into the separate requests it makes, one for each call of the "
    "function it needs. Write each request in plain words as a complete request on its own, as "
    "the user would ask it alone: repeat in it what it shares with the others (places, dates, "
    "amounts, ...) and give it only its own values. Do not write function calls. Reply with a "
    'JSON list of the requests. For example, "the weather in Paris and Rome in Celsius" is '
    '["What is the weather in Paris in Celsius?", "What is the weather in Rome in Celsius?"].'
    "\n\nThe functions:\n")
"""decompose: the instruction of the splitting request (the functions' names and
descriptions follow it, one a line)."""
SPLIT_SCHEMA = {"type": "array", "items": {"type": "string", "pattern": "^[^{}\\[\\]()=:]{1,300}$"},
                "minItems": 2, "maxItems": 8}
"""decompose: two to eight requests in plain words (no brackets, parentheses, ``=`` or ``:``:
the 1.5B otherwise writes calls, JSON or Python, as its requests)."""

ASK_FIRST = ("Can one of the provided functions do what I asked? Answer yes or no.")


def _verdict(case: dict[str, Any], category: str, calls: list[tuple[str, Any]],
             offered: set[str]) -> bool:
    if category.endswith("irrelevance"):
        return not any(name in offered for name, _ in calls)
    return be.bfcl_verdict(case, category, calls) is None


def _decoded(turn: Any) -> list[tuple[str, Any]]:
    out = []
    for call in turn.tool_calls:
        try:
            out.append((call.name, json.loads(call.arguments)))
        except ValueError:
            out.append((call.name, call.arguments))
    return out


def _p_no(choice: dict[str, Any]) -> float:
    """The probability the model gave "no" where it chose between yes and no (0 if unseen)."""
    for position in (choice.get("logprobs") or {}).get("content") or []:
        tops = {t["token"].strip(): t["logprob"] for t in position.get("top_logprobs", [])}
        if "yes" in tops or "no" in tops:
            return float(math.exp(tops["no"])) if "no" in tops else 0.0
    return 0.0


def _first_brackets(choice: dict[str, Any]) -> str:
    """The reported probabilities of the first token opening a list and an object."""
    first = ((choice.get("logprobs") or {}).get("content") or [{}])[0]
    tops = {t["token"]: math.exp(t["logprob"]) for t in first.get("top_logprobs", [])}
    opens_list = sum(p for token, p in tops.items() if token.strip().startswith("["))
    opens_object = sum(p for token, p in tops.items() if token.strip().startswith("{"))
    best = max(tops, key=tops.__getitem__) if tops else None
    return f"p([) {opens_list:.3f}  p({{) {opens_object:.3f}  top {best!r}"


async def _free_name(body: dict[str, Any], offered: set[str], api: HTTPClient
                     ) -> tuple[bool, str]:
    """free-name: the request under ``{"name": string}`` (which function it would call)."""
    body["response_format"]["json_schema"]["schema"] = {
        "type": "object", "properties": {"name": {"type": "string"}},
        "required": ["name"], "additionalProperties": False}
    content = (await api.post_json("/chat/completions", body))["choices"][0]["message"]
    text = content.get("content") or ""
    try:
        name = json.loads(text).get("name")
    except (ValueError, AttributeError):
        name = None
    return name in offered, text


def _one_call_only(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` asking for exactly one call: the tool variants of its step schema (no list, no
    final answer) and its instruction without the sentence about lists."""
    schema = body["response_format"]["json_schema"]["schema"]
    calls = [v for v in schema.get("anyOf", [schema]) if "name" in v.get("properties", {})]
    shaped: dict[str, Any] = dict(calls[0]) if len(calls) == 1 else {"anyOf": calls}
    if "$defs" in schema:
        shaped["$defs"] = schema["$defs"]
    messages = list(body["messages"])
    messages[0] = dict(messages[0], content=messages[0]["content"].removesuffix(
        f"\n\n{SEVERAL_CALLS_HINT}"))
    return dict(body, messages=messages, response_format=_format(shaped))


async def _decompose(case: dict[str, Any], category: str, model: Model,
                     chat: ChatCompletionsModel) -> tuple[bool, str]:
    """decompose: gramagent's reply; a list of 2+ calls is replaced by one call per request
    the model splits the user's message into (a fresh request: ``SPLIT_INSTRUCTION``, the
    functions, the user's message), each asked alone."""
    request = be._request(case, "local", SETTINGS)
    offered = {t.name for t in request.tools}
    calls = _decoded(await model.request(request))
    if len(calls) >= 2:
        functions = "\n".join(f"- {t.name}: {t.description}" for t in request.tools)
        ask = {**SETTINGS, "messages": [
            {"role": "system", "content": SPLIT_INSTRUCTION + functions},
            {"role": "user", "content": request.messages[-1].content}],
            "response_format": _format(SPLIT_SCHEMA)}
        try:
            reply = (await chat.post_body(ask))["choices"][0]["message"]
            parts = [str(p) for p in json.loads(reply.get("content") or "")]
        except (ModelAPIError, ValueError, TypeError) as error:  # the list is kept
            print(f"  no split: {error}", file=sys.stderr, flush=True)
            parts = []
        print(f"  list of {len(calls)} -> requests {parts}", file=sys.stderr, flush=True)
        if parts:
            calls = []
            for part in parts:
                alone = dataclasses.replace(request, messages=[UserMessage(content=part)])
                sent = _one_call_only(build_chat_body(alone, tool_call_mode="constrained"))
                data = await chat.post_body(sent)
                turn = parse_chat_reply(data, tool_call_mode="constrained",
                                        tool_names=sorted(offered))
                calls.extend(_decoded(turn))
    return _verdict(case, category, calls, offered), json.dumps(
        [{"name": n, "arguments": a} for n, a in calls])


async def probe(kind: str, case: dict[str, Any], category: str, api: HTTPClient,
                root: HTTPClient, question: str = ASK_FIRST,
                decline_on: str = "no", max_length: int = 120,
                example: bool = True) -> tuple[bool, str]:
    """One case: (counted as a success, what the model wrote)."""
    request = be._request(case, "local", SETTINGS)
    offered = {t.name for t in request.tools}
    body = build_chat_body(request, tool_call_mode="constrained")
    schema = body["response_format"]["json_schema"]["schema"]
    if kind == "free-name":
        return await _free_name(body, offered, api)
    if kind == "ask-first":
        ask = dict(body, messages=[*body["messages"], {"role": "user", "content": question}],
                   response_format={"type": "json_schema", "json_schema": {
                       "name": "decision", "strict": False, "schema": {
                           "type": "object", "properties": {"answer": {"enum": ["yes", "no"]}},
                           "required": ["answer"], "additionalProperties": False}}})
        ask.update(logprobs=True, top_logprobs=5)
        choice = (await api.post_json("/chat/completions", ask))["choices"][0]
        decided = choice["message"]
        print(f"  p(no) {_p_no(choice):.3f}", file=sys.stderr, flush=True)
        if f'"{decline_on}"' in (decided.get("content") or ""):
            return category.endswith("irrelevance"), decided.get("content") or ""
        data = await api.post_json("/chat/completions", body)
        raw = data["choices"][0]["message"].get("content") or ""
    elif kind in ("enumerate-v1", "enumerate-v2"):
        raw = await _enumerate(kind, request, body, schema, api, max_length, example)
        data = {"choices": [{"message": {"role": "assistant", "content": raw}}]}
    elif kind == "first-bracket":
        data = await api.post_json("/chat/completions", dict(body, logprobs=True,
                                                             top_logprobs=8))
        raw = data["choices"][0]["message"].get("content") or ""
        print(f"  {_first_brackets(data['choices'][0])}", file=sys.stderr, flush=True)
    elif kind == "continue-lists":
        data = await api.post_json("/chat/completions", body)
        raw = data["choices"][0]["message"].get("content") or ""
        if raw.lstrip().startswith("["):
            written = json.loads(raw)
            continued = continued_list_schema(request.tools, written[0])
            continued["prefixItems"] = [{"const": item} for item in written]
            more = dict(body, response_format=dict(
                body["response_format"], json_schema=dict(
                    body["response_format"]["json_schema"], schema=continued)))
            data = await api.post_json("/chat/completions", more)
            added = data["choices"][0]["message"].get("content") or ""
            print(f"  a list of {len(written)} continued to {len(json.loads(added))}",
                  file=sys.stderr, flush=True)
    elif kind == "example-turns":
        # A worked example as earlier turns of the conversation (not as a sentence of the
        # instruction): a question about three items answered with a list of three calls.
        messages = body["messages"]
        head = 1 if messages and messages[0]["role"] == "system" else 0
        shown = [{"role": "user", "content": EXAMPLE_QUESTION},
                   {"role": "assistant", "content": EXAMPLE_ANSWER},
                   {"role": "user", "content": "Thanks."},
                   {"role": "assistant", "content": '{"text": "You are welcome."}'}]
        sent = dict(body, messages=[*messages[:head], *shown, *messages[head:]])
        data = await api.post_json("/chat/completions", sent)
        raw = data["choices"][0]["message"].get("content") or ""
    elif kind in ("thought-first", "decide-first"):
        variants = schema["anyOf"]
        for i, variant in enumerate(variants):
            if variant.get("type") != "object":
                continue  # the list of calls: left as it is
            calls_it = "name" in variant["properties"]
            first = ({"thought": {"type": "string", "maxLength": 200}} if kind == "thought-first"
                     else {"a_function_fits": {"const": calls_it}})
            variants[i] = dict(variant, properties={**first, **variant["properties"]},
                               required=[*first, *variant["required"]])
        data = await api.post_json("/chat/completions", body)
        raw = data["choices"][0]["message"].get("content") or ""
    elif kind == "named-final":
        variants = [v for v in schema["anyOf"] if "name" in v.get("properties", {})]
        variants.append({"type": "object", "properties": {
            "name": {"const": FINAL_ANSWER},
            "arguments": {"type": "object", "properties": {"text": {"type": "string"}},
                          "required": ["text"], "additionalProperties": False}},
            "required": ["name", "arguments"], "additionalProperties": False})
        schema["anyOf"] = variants
        data = await api.post_json("/chat/completions", body)
        raw = data["choices"][0]["message"].get("content") or ""
    else:  # fence or tag
        if kind == "fence":
            grammar = ('%llguidance {}\nstart: "```json\\n" call "\\n```" | call\ncall: %json '
                       + json.dumps(schema) + "\n")
        else:
            calls = dict(schema, anyOf=[v for v in schema["anyOf"]
                                        if "name" in v.get("properties", {})])
            final = next(v for v in schema["anyOf"] if "name" not in v.get("properties", {}))
            grammar = ('%llguidance {}\nstart: <[151657]> "\\n" call "\\n" <[151658]> | final\n'
                       "call: %json " + json.dumps(calls) + "\nfinal: %json " + json.dumps(final)
                       + "\n")
        prompt = (await root.post_json("/apply-template", body))["prompt"]
        done = await root.post_json("/completion", {
            "prompt": prompt, "grammar": grammar, "temperature": 0.0, "n_predict": 512,
            "cache_prompt": True})
        content = done["content"]
        if kind == "tag":
            content = content.removeprefix("<tool_call>\n").removesuffix("\n</tool_call>")
        data = {"choices": [{"message": {"role": "assistant", "content": content}}]}
        raw = done["content"]
    turn = parse_chat_reply(data, tool_call_mode="constrained", tool_names=sorted(offered))
    return _verdict(case, category, _decoded(turn), offered), raw


def _with_instruction(body: dict[str, Any], hint: str) -> dict[str, Any]:
    """``body`` with its system instruction's last paragraph (the sentence about lists)
    replaced by ``hint``."""
    messages = list(body["messages"])
    base = messages[0]["content"].rsplit("\n\n", 1)[0]
    messages[0] = dict(messages[0], content=f"{base}\n\n{hint}")
    return dict(body, messages=messages)


def _format(schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "tool_step", "strict": False,
                                                   "schema": schema}}


async def _enumerate(kind: str, request: Any, body: dict[str, Any], schema: dict[str, Any],
                     api: HTTPClient, max_length: int = 120, example: bool = True) -> str:
    """The two enumerate variants; returns the reply as a constrained step (calls as a list
    or one call, or the final answer)."""
    variants = schema["anyOf"]
    defs = schema.get("$defs")
    calls_schema = next(v for v in variants if v.get("type") == "array")
    call_variants = [v for v in variants if "name" in v.get("properties", {})]
    final = next(v for v in variants if "text" in v.get("properties", {}))
    requests_schema = _requests(max_length)
    cut = "" if example else " " + EXAMPLE
    if kind == "enumerate-v1":
        shaped: dict[str, Any] = {"anyOf": [{
            "type": "object",
            "properties": {"requests": requests_schema, "calls": dict(calls_schema, maxItems=8)},
            "required": ["requests", "calls"], "additionalProperties": False}, final]}
        if defs:
            shaped["$defs"] = defs
        sent = dict(_with_instruction(body, ENUMERATE_HINT.removesuffix(cut)),
                    response_format=_format(shaped))
        raw = (await api.post_json("/chat/completions", sent))["choices"][0]["message"]
        content = raw.get("content") or ""
        try:
            value = json.loads(content)
        except ValueError:
            return content
        print(f"  requests {value.get('requests')}", file=sys.stderr, flush=True)
        return json.dumps(value["calls"]) if "calls" in value else content
    listing = {"type": "object", "properties": {"requests": requests_schema},
               "required": ["requests"], "additionalProperties": False}
    sent = dict(_with_instruction(body, LIST_HINT.removesuffix(cut)),
                response_format=_format(listing))
    reply = (await api.post_json("/chat/completions", sent))["choices"][0]["message"]
    try:
        items = [str(i) for i in json.loads(reply.get("content") or "")["requests"]]
    except (ValueError, KeyError, TypeError):
        items = []
    print(f"  requests {items}", file=sys.stderr, flush=True)
    n = len(items)
    if n <= 1:
        shaped = {"anyOf": [*call_variants, final]} if len(call_variants) > 1 else {
            "anyOf": [call_variants[0], final]}
        hint = "Reply with one call."
    else:
        named = "; ".join(f"{i + 1}. {item}" for i, item in enumerate(items))
        shaped = dict(calls_schema, minItems=n, maxItems=n)
        hint = (f"The user asks for {n} results: {named}. Reply with a JSON list of {n} "
                "calls, one for each.")
    if defs:
        shaped["$defs"] = defs
    sent = dict(_with_instruction(body, hint), response_format=_format(shaped))
    reply = (await api.post_json("/chat/completions", sent))["choices"][0]["message"]
    return str(reply.get("content") or "")


def _chosen_cases(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The cases of ``--ids`` in the order given, else ``--offset``/``--limit``."""
    cases: list[dict[str, Any]] = be.load_cases(args.category)
    if not args.ids:
        return cases[args.offset:args.offset + args.limit]
    by_id = {c["id"]: c for c in cases}
    wanted = [f"{args.category}_{i.strip()}" for i in args.ids.split(",")]
    if missing := [name for name in wanted if name not in by_id]:
        raise SystemExit(f"--ids: no such case in {args.category}: {', '.join(missing)}")
    return [by_id[name] for name in wanted]


async def main_async(args: argparse.Namespace) -> None:
    cases = _chosen_cases(args)  # before the model starts: a bad --ids is said at once
    model = local_model(ModelRef.parse(args.model), threads=args.threads)
    server = await model.start()
    api = HTTPClient(server.base_url)
    # decompose's own requests, as the product sends them: a reply llama.cpp's chat parser
    # rejects is generated again raw (gramagent._models.unparsed)
    chat = ChatCompletionsModel(server.base_url, llama_server_root=server.root_url)
    root = HTTPClient(server.base_url.removesuffix("/v1"))
    try:
        good = wrapped = 0
        width = 600 if args.kind == "decompose" else 150
        for case in cases:
            start = time.perf_counter()
            if args.kind == "decompose":
                ok, raw = await _decompose(case, args.category, model, chat)
            else:
                ok, raw = await probe(args.kind, case, args.category, api, root,
                                      args.question, args.decline_on, args.max_length,
                                      not args.no_example)
            good += ok
            wrapped += raw.lstrip().startswith(("```", "<tool_call>"))
            if args.verbose:
                print(f"{'ok  ' if ok else 'miss'} {case['id']:<22} "
                      f"{time.perf_counter() - start:5.1f}s {raw[:width]!r}",
                      file=sys.stderr, flush=True)
        decided = "declined" if args.category.endswith("irrelevance") else "correct"
        what = {"free-name": "named an offered function", "named-final": decided,
                "first-bracket": decided, "continue-lists": decided,
                "thought-first": decided, "enumerate-v1": decided,
                "enumerate-v2": decided, "decide-first": decided, "ask-first": decided,
                "example-turns": decided, "decompose": decided,
                "fence": "correct", "tag": "correct"}[args.kind]
        print(f"{args.kind} {args.model} {args.category} cases {len(cases)}: {what} {good}"
              + (f", wrapped {wrapped}" if args.kind in ("fence", "tag") else ""))
    finally:
        await api.aclose()
        await chat.aclose()
        await root.aclose()
        await model.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=("fence", "tag", "free-name", "named-final",
                                         "thought-first", "decide-first", "ask-first",
                                         "first-bracket", "continue-lists", "enumerate-v1",
                                         "enumerate-v2", "example-turns", "decompose"))
    parser.add_argument("--model", default="local/qwen2.5-coder-0.5b")
    parser.add_argument("--category", default="simple_python")
    parser.add_argument("--limit", type=int, default=50)
    parser.add_argument("--offset", type=int, default=0)
    parser.add_argument("--ids", default=None,
                        help="only these case numbers of the category (e.g. 2,5,7)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--question", default=ASK_FIRST, help="ask-first: the question")
    parser.add_argument("--decline-on", choices=("yes", "no"), default="no",
                        help="ask-first: the answer that declines")
    parser.add_argument("--max-length", type=int, default=120,
                        help="enumerate-*: the longest request string")
    parser.add_argument("--no-example", action="store_true",
                        help="enumerate-*: leave the example out of the instruction")
    parser.add_argument("-v", "--verbose", action="store_true")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
