"""The scripted OpenAI-compatible server, spoken to with a plain HTTP client."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from gramagent._models.harmony import read_completion
from gramagent._models.sse import parse_sse
from gramagent.testing import (
    ScriptCall,
    ScriptCalls,
    ScriptDrop,
    ScriptedServer,
    ScriptError,
    ScriptReply,
    call,
    calls,
    completion,
    error,
    load_script,
    reply,
)

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def test_models_endpoint_and_base_url(serve):
    """GET /v1/models lists the configured ids; base_url points at 127.0.0.1 and /v1."""
    srv = serve(models=("alpha", "beta"))
    assert srv.base_url.startswith("http://127.0.0.1:") and srv.base_url.endswith("/v1")
    data = httpx.get(srv.base_url + "/models").json()
    assert [m["id"] for m in data["data"]] == ["alpha", "beta"]
    assert srv.requests == []


def test_bad_requests_get_json_errors_and_the_server_keeps_serving(serve):
    """Bad JSON, a non-object body, an unknown path and a wrong method get 4xx JSON errors;
    the next good request is answered from the script."""
    srv = serve([reply("still here")])
    with httpx.Client(base_url=srv.base_url) as http:
        bad = http.post("/chat/completions", content=b"{not json")
        assert bad.status_code == 400
        assert "not JSON" in bad.json()["error"]["message"]
        assert http.post("/chat/completions", json=[1, 2]).status_code == 400
        assert http.post("/embeddings", json=CHAT).status_code == 404
        assert http.get("/chat/completions").status_code == 405
        ok = http.post("/chat/completions", json=CHAT)
    assert ok.json()["choices"][0]["message"]["content"] == "still here"
    assert srv.requests[0].body == "{not json"


def test_garbage_on_the_socket_gets_400(serve):
    """A malformed HTTP request is answered 400 and does not stop the server."""
    srv = serve([reply("ok")])
    with socket.create_connection(("127.0.0.1", srv.port)) as sock:
        sock.sendall(b"THIS IS NOT HTTP\r\n\r\n")
        answer = sock.recv(4096)
    assert answer.startswith(b"HTTP/1.1 400")
    assert httpx.post(srv.base_url + "/chat/completions", json=CHAT).status_code == 200


def test_expect_100_continue(serve):
    """A client waiting for 100 Continue (curl with a large body) gets it, then the answer."""
    srv = serve([reply("continued")])
    body = json.dumps(CHAT).encode()
    with socket.create_connection(("127.0.0.1", srv.port)) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Type: application/json\r\nExpect: 100-continue\r\n"
                     b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n")
        assert sock.recv(4096).startswith(b"HTTP/1.1 100")
        sock.sendall(body)
        answer = b""
        while b"continued" not in answer:
            chunk = sock.recv(4096)
            assert chunk
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200")


def test_exhausted_script_answers_500(serve):
    """Past the last turn every request gets HTTP 500 "script exhausted"."""
    srv = serve([reply("only one")])
    with httpx.Client(base_url=srv.base_url) as http:
        assert http.post("/chat/completions", json=CHAT).status_code == 200
        gone = http.post("/responses", json={"model": "m", "input": "x"})
    assert gone.status_code == 500
    assert gone.json()["error"]["message"] == "script exhausted"
    assert srv.remaining == 0


def test_turns_are_shared_by_all_endpoints_in_order(serve):
    """Any endpoint takes the next turn; each renders it in its own format."""
    srv = serve([reply("chat"), reply("responses"), completion("raw text")])
    with httpx.Client(base_url=srv.base_url) as http:
        chat = http.post("/chat/completions", json=CHAT).json()
        resp = http.post("/responses", json={"model": "m", "input": "x"}).json()
        comp = http.post("/completions", json={"model": "m", "prompt": "p"}).json()
    assert chat["object"] == "chat.completion"
    assert chat["choices"][0]["message"]["content"] == "chat"
    assert resp["object"] == "response"
    assert resp["output"][0]["content"][0]["text"] == "responses"
    assert comp["object"] == "text_completion"
    assert comp["choices"][0]["text"] == "raw text"
    for usage in (chat["usage"], comp["usage"]):
        assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert [r.path for r in srv.requests] == [
        "/v1/chat/completions", "/v1/responses", "/v1/completions"]


def test_completions_stream(serve):
    """/v1/completions streams text pieces, a finish chunk, usage on request and [DONE]."""
    text = "<|channel|>final<|message|>Hello, Alice! How are you today?<|return|>"
    srv = serve([completion(text, usage=(20, 9))])
    answer = httpx.post(srv.base_url + "/completions", json={
        "model": "m", "prompt": "p", "stream": True, "stream_options": {"include_usage": True}})
    assert answer.headers["content-type"] == "text/event-stream"
    events = [json.loads(p) for p in parse_sse(answer.text)]
    assert "".join(c["text"] for e in events for c in e["choices"]) == text
    assert events[-2]["choices"][0]["finish_reason"] == "stop"
    assert events[-1]["usage"] == {"prompt_tokens": 20, "completion_tokens": 9,
                                   "total_tokens": 29}
    assert answer.text.rstrip().endswith("data: [DONE]")


def test_calls_on_completions_endpoint_are_written_in_harmony(serve):
    """A call turn on /v1/completions comes back as the Harmony text gpt-oss would generate
    (stopped before <|call|>), and the Harmony adapter reads the same call out of it."""
    srv = serve([calls(call("sayHello", {"personName": "Al"}, id="c1"), text="Let me greet.")])
    answer = httpx.post(srv.base_url + "/completions", json={"model": "m", "prompt": "p"})
    assert answer.status_code == 200
    text = answer.json()["choices"][0]["text"]
    assert text == ("<|channel|>commentary<|message|>Let me greet.<|end|>"
                    "<|start|>assistant to=functions.sayHello<|channel|>commentary "
                    '<|constrain|>json<|message|>{"personName":"Al"}')
    turn = read_completion(answer.json())
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [("sayHello", '{"personName":"Al"}')]
    assert turn.text == "Let me greet."


def test_error_turn_sends_retry_after(serve):
    """An error turn gives its status, an OpenAI-shaped body and the Retry-After header."""
    srv = serve([error(429, "rate limited", retry_after=2.0)])
    answer = httpx.post(srv.base_url + "/chat/completions", json=CHAT)
    assert answer.status_code == 429
    assert answer.headers["retry-after"] == "2"
    assert answer.json()["error"] == {"message": "rate limited", "type": "rate_limit_error",
                                      "param": None, "code": 429}


def test_callable_script_sees_path_and_body(serve):
    """A callable script computes each turn from the path and body."""
    seen = []

    def script(path, body):
        seen.append((path, body["messages"][-1]["content"]))
        return reply(f"echo: {body['messages'][-1]['content']}")

    srv = serve(script)
    answer = httpx.post(srv.base_url + "/chat/completions", json=CHAT).json()
    assert answer["choices"][0]["message"]["content"] == "echo: hi"
    assert seen == [("/v1/chat/completions", "hi")]


def test_failing_script_function_is_a_500(serve):
    """An exception in a script function is reported, not fatal."""
    def script(path, body):
        raise KeyError("oops")

    srv = serve(script)
    answer = httpx.post(srv.base_url + "/chat/completions", json=CHAT)
    assert answer.status_code == 500
    assert "KeyError" in answer.json()["error"]["message"]


def test_loop_replays_the_script(serve):
    """loop=True starts the script over when it runs out."""
    srv = serve([reply("one"), reply("two")], loop=True)
    with httpx.Client(base_url=srv.base_url) as http:
        texts = [http.post("/chat/completions", json=CHAT).json()["choices"][0]["message"][
            "content"] for _ in range(5)]
    assert texts == ["one", "two", "one", "two", "one"]


@pytest.mark.slow
async def test_hundred_concurrent_clients(serve):
    """A hundred concurrent requests, each waiting in a delayed turn, are all answered."""
    srv = serve([reply("ok", delay=0.05)], loop=True)
    limits = httpx.Limits(max_connections=100)
    async with httpx.AsyncClient(base_url=srv.base_url, limits=limits) as http:
        answers = await asyncio.gather(
            *(http.post("/chat/completions", json=CHAT) for _ in range(100)))
    assert [a.status_code for a in answers] == [200] * 100
    assert len(srv.requests) == 100


def test_turn_constructors():
    """Constructors encode dict arguments, keep strings verbatim and carry delays."""
    c = call("f", {"a": 1}, id="x", delay=0.5)
    assert c == ScriptCall(name="f", arguments='{"a":1}', id="x", delay=0.5)
    assert call("f", "{broken").arguments == "{broken"
    assert calls(c, text="t").calls == (c,)
    assert reply("r", {"input_tokens": 3, "output_tokens": 4}).usage.total_tokens == 7


def test_json_script_file(tmp_path: Path):
    """The JSON form covers every turn kind; a bad turn is named by its index."""
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"loop": True, "turns": [
        {"reply": "Hi", "usage": {"input_tokens": 5, "output_tokens": 1}},
        {"call": "sayHello", "arguments": {"name": "Alice"}, "id": "c1", "delay": 0.1},
        {"calls": [{"name": "a", "arguments": {}}, {"name": "b", "arguments": "{bad"}]},
        {"error": 429, "retry_after": 1},
        {"drop": True},
        {"completion": "raw"},
    ]}))
    turns, repeat = load_script(path)
    assert repeat is True
    assert [type(t) for t in turns] == [ScriptReply, ScriptCall, ScriptCalls, ScriptError,
                                        ScriptDrop, type(completion("x"))]
    assert turns[1] == ScriptCall(name="sayHello", arguments='{"name":"Alice"}', id="c1",
                                  delay=0.1)
    assert turns[2].calls[1].arguments == "{bad"
    with pytest.raises(ValueError, match="turn 1"):
        load_script([{"reply": "ok"}, {"reply": "x", "call": "y"}])


@pytest.mark.slow
def test_command_line_server(tmp_path: Path):
    """``python -m gramagent.testing`` prints its base URL first and serves the
    script until terminated."""
    path = tmp_path / "script.json"
    path.write_text(json.dumps([{"reply": "from the CLI"}]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "gramagent.testing", "--script", str(path)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:")
        answer = httpx.post(base_url + "/chat/completions", json=CHAT, timeout=10)
        assert answer.json()["choices"][0]["message"]["content"] == "from the CLI"
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0
        if proc.stdout is not None:
            proc.stdout.close()


def test_port_in_use_is_reported():
    """Starting on a taken port raises OSError naming the address."""
    with ScriptedServer() as first, pytest.raises(OSError, match=str(first.port)):
        ScriptedServer(port=first.port).start()
