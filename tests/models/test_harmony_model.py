"""Tests of the Harmony adapter against the scripted completions server, and the full loop."""

from __future__ import annotations

import re
from typing import Any

import orjson
import pytest

from gramagent._messages import ToolResultMessage, UserMessage
from gramagent._models.base import ModelRequest, NamedToolChoice, ToolChoice
from gramagent._models.harmony import HarmonyModel, build_prompt, read_completion
from gramagent._models.registry import resolve_model
from gramagent._runtime.library import ToolLibrary
from gramagent._runtime.loop import run_agent
from gramagent._spec.definition import ToolDefinition
from gramagent._spec.model import Agent
from gramagent.errors import ConfigurationError, ModelAPIError
from gramagent.testing import ScriptedServer, completion, error, http_response

WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}},
                "required": ["city"]},
)
CALL_TEXT = (
    "<|channel|>analysis<|message|>Need the weather.<|end|>"
    "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
    '<|message|>{"city":"Paris"}'
)
CALL_ID = re.compile(r"call_[0-9a-f]{24}")


def _request(**kwargs: Any) -> ModelRequest:
    base: dict[str, Any] = {
        "model": "gpt-oss-20b",
        "instruction": "Answer briefly.",
        "messages": [UserMessage(content="Weather in Paris?")],
        "tools": [WEATHER],
    }
    return ModelRequest(**{**base, **kwargs})


def _reply(text: str, finish: str | None = "stop", **choice: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "text": text, "finish_reason": finish, **choice}],
            "usage": {"prompt_tokens": 120, "completion_tokens": 30}}


async def _turn(script: list[Any], request: ModelRequest | None = None, **options: Any
                ) -> tuple[Any, ScriptedServer]:
    with ScriptedServer(script) as server:
        async with HarmonyModel(server.base_url, **options) as model:
            turn = await model.request(request or _request())
    return turn, server


async def test_request_body() -> None:
    """The prompt, the turn-ending stop sequences and the token budget are sent; settings win."""
    request = _request(settings={"temperature": 0.2, "max_tokens": 64})
    _, server = await _turn([completion("<|channel|>final<|message|>Hi")], request,
                            reasoning="high")
    (sent,) = server.requests
    assert sent.path == "/v1/completions"
    body = sent.body
    assert body["prompt"] == build_prompt(request, reasoning="high")
    assert body["prompt"].endswith("<|start|>assistant")
    assert "Reasoning: high" in body["prompt"] and "type get_weather" in body["prompt"]
    assert body["stop"] == ["<|call|>", "<|return|>"]
    assert (body["model"], body["max_tokens"], body["temperature"]) == ("gpt-oss-20b", 64, 0.2)
    assert body["skip_special_tokens"] is False


async def test_final_answer() -> None:
    """The final channel is the text; chain of thought is dropped; usage is read."""
    turn, _ = await _turn([completion(
        "<|channel|>analysis<|message|>Easy.<|end|>"
        "<|start|>assistant<|channel|>final<|message|>It is sunny.", usage=(50, 9))])
    assert turn.text == "It is sunny." and turn.tool_calls == ()
    assert turn.finish_reason == "stop"
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (50, 9)


async def test_call_whose_stop_token_was_stripped() -> None:
    """The server stops on <|call|> and strips it: the call is complete and executed."""
    turn, _ = await _turn([completion(CALL_TEXT)])
    (call,) = turn.tool_calls
    assert (call.name, call.arguments) == ("get_weather", '{"city":"Paris"}')
    assert CALL_ID.fullmatch(call.id)
    assert turn.text is None and turn.finish_reason == "tool_calls"
    assert turn.raw["messages"][-1]["ended_by"] == "call"


def test_call_cut_off_by_the_token_budget_is_not_executed() -> None:
    """finish_reason "length": the call at the end of the text is flagged, not returned."""
    turn = read_completion(_reply(CALL_TEXT, finish="length"))
    assert turn.tool_calls == () and turn.finish_reason == "length"
    last = turn.raw["messages"][-1]
    assert last["ended_by"] == "eof" and last["name"] == "get_weather"


@pytest.mark.parametrize(("stop_reason", "ended"),
                         [(200002, "return"), ("<|return|>", "return"), (200007, "end")])
def test_stop_reason_names_the_stripped_token(stop_reason: Any, ended: str) -> None:
    """vLLM's stop_reason (token id or string) says which token was stripped."""
    turn = read_completion(_reply("<|channel|>final<|message|>Done", stop_reason=stop_reason))
    assert turn.text == "Done" and turn.raw["messages"][-1]["ended_by"] == ended


def test_generation_past_the_call_is_ignored() -> None:
    """Text generated after <|call|> (a made-up result and answer) is set aside."""
    turn = read_completion(_reply(
        CALL_TEXT + "<|call|><|start|>functions.get_weather to=assistant<|channel|>commentary"
        '<|message|>{"sunny": true}<|end|><|start|>assistant<|channel|>final<|message|>'
        "Sunny!<|return|>"))
    assert [c.name for c in turn.tool_calls] == ["get_weather"]
    assert turn.text is None
    assert [m["role"] for m in turn.raw["ignored"]] == ["tool", "assistant"]


@pytest.mark.parametrize(
    ("payload", "forwarded"),
    [
        ('{"city": "Par', '{"city": "Par'),
        ("[1, 2]", "[1, 2]"),
        ('{"city": "' + "x" * 9000 + '"}', '{"city": "' + "x" * 9000 + '"}'),
    ],
)
def test_rejected_payload_is_forwarded_raw(payload: str, forwarded: str) -> None:
    """A payload the parser rejects reaches the loop as sent, for its own checks."""
    turn = read_completion(_reply(
        f"<|channel|>commentary to=functions.get_weather<|message|>{payload}<|call|>"))
    (call,) = turn.tool_calls
    assert call.arguments == forwarded
    assert turn.raw["messages"][0]["error_type"] in (
        "tool_payload_parse_error", "tool_payload_too_large")


def test_stub_calls() -> None:
    """The ADR stub form is a call; a non-object arguments value is forwarded as such."""
    turn = read_completion(_reply(
        '<|channel|>tool<|message|>{"tool":"get_weather","arguments":{"city":"Oslo"}}<|end|>'
        '<|start|>assistant<|channel|>tool<|message|>{"tool":"get_weather","arguments":7}'
        "<|end|><|start|>assistant<|channel|>final<|message|>Checking.<|return|>"))
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [
        ("get_weather", '{"city":"Oslo"}'), ("get_weather", "7")]
    assert turn.text == "Checking."


def test_python_builtin_call_arguments_are_json() -> None:
    """A call to the python built-in carries its code as a JSON object."""
    turn = read_completion(_reply("<|channel|>analysis to=python code<|message|>print(1)"))
    (call,) = turn.tool_calls
    assert (call.name, orjson.loads(call.arguments)) == ("python", {"code": "print(1)"})


def test_answer_outside_the_final_channel() -> None:
    """Without a final message, a commentary answer or plain text is the text."""
    assert read_completion(_reply("<|channel|>commentary<|message|>Hi.")).text == "Hi."
    assert read_completion(_reply("Plain answer.")).text == "Plain answer."
    assert read_completion(_reply("<|channel|>analysis<|message|>Hmm")).text is None


@pytest.mark.parametrize(
    ("choice", "prefill", "generated"),
    [
        (NamedToolChoice("get_weather"),
         "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>",
         '{"city":"Rome"}'),
        ("required", "<|channel|>commentary to=functions.",
         'get_weather <|constrain|>json<|message|>{"city":"Rome"}'),
    ],
)
async def test_forced_calls_prefill_the_header(choice: ToolChoice, prefill: str,
                                               generated: str) -> None:
    """A forced call prefills the call header; the completion continues it."""
    turn, server = await _turn([completion(generated)], _request(tool_choice=choice))
    assert server.requests[0].body["prompt"].endswith("<|start|>assistant" + prefill)
    (call,) = turn.tool_calls
    assert (call.name, call.arguments) == ("get_weather", '{"city":"Rome"}')


async def test_tool_choice_none_leaves_tools_out() -> None:
    """With tool_choice "none" the model is not told about any tool."""
    _, server = await _turn([completion("<|channel|>final<|message|>ok")],
                            _request(tool_choice="none"))
    prompt = server.requests[0].body["prompt"]
    assert "# Tools" not in prompt and "functions" not in prompt


async def test_streamed_reply_gives_the_same_turn() -> None:
    """stream=True reads the SSE chunks and gives the turn a plain reply gives."""
    text = CALL_TEXT
    streamed, server = await _turn([completion(text, usage=(10, 5))], stream=True)
    plain, _ = await _turn([completion(text, usage=(10, 5))])
    assert server.requests[0].body["stream"] is True
    assert [(c.name, c.arguments) for c in streamed.tool_calls] == [
        (c.name, c.arguments) for c in plain.tool_calls]
    assert streamed.usage == plain.usage


async def test_unreadable_reply() -> None:
    """A reply without a text choice is a ModelAPIError naming the model."""
    with pytest.raises(ModelAPIError, match="no choices") as caught:
        await _turn([http_response({"choices": []})])
    assert caught.value.model == "gpt-oss-20b"


async def test_http_error() -> None:
    """A server error surfaces as ModelAPIError with its status."""
    with pytest.raises(ModelAPIError) as caught:
        await _turn([error(400, "bad prompt")], max_retries=0)
    assert caught.value.status == 400


def test_options_are_checked() -> None:
    """An unknown reasoning effort is a configuration error."""
    with pytest.raises(ConfigurationError, match="reasoning"):
        HarmonyModel("http://127.0.0.1:1/v1", reasoning="extreme")  # type: ignore[arg-type]


def test_registry_builds_the_adapter() -> None:
    """``api="harmony"`` resolves to this adapter with its options."""
    model = resolve_model("openai/gpt-oss-20b", api="harmony", base_url="http://127.0.0.1:9/v1",
                          reasoning="medium")
    assert isinstance(model, HarmonyModel) and model.reasoning == "medium"


# -- the whole loop --------------------------------------------------------------------------------


def _weather_agent() -> tuple[Agent, ToolLibrary, list[str]]:
    seen: list[str] = []
    library = ToolLibrary()

    @library.register
    def get_weather(city: str) -> str:
        """Current weather in a city.

        Args:
            city: the city.
        """
        seen.append(city)
        return f"Sunny in {city}"

    spec = library.lookup("get_weather").spec()  # type: ignore[union-attr]
    agent = Agent(name="weather", model="openai/gpt-oss-20b", instruction="Answer briefly.",
                  tools=(spec,))
    return agent, library, seen


async def test_run_agent_end_to_end() -> None:
    """run_agent with api="harmony": the model calls a tool, reads its result, answers."""
    agent, library, seen = _weather_agent()
    script = [
        completion(CALL_TEXT),
        completion("<|channel|>analysis<|message|>Got it.<|end|><|start|>assistant"
                   "<|channel|>final<|message|>It is sunny in Paris."),
    ]
    with ScriptedServer(script) as server:
        response = await run_agent(agent, "Weather in Paris?", library=library, api="harmony",
                                   base_url=server.base_url)
    assert response.content == "It is sunny in Paris."
    assert seen == ["Paris"]
    (invocation,) = response.tool_invocations
    assert (invocation.name, invocation.arguments, invocation.result) == (
        "get_weather", {"city": "Paris"}, "Sunny in Paris")
    second = server.requests[1].body["prompt"]
    assert second.endswith(
        "<|start|>assistant to=functions.get_weather<|channel|>commentary <|constrain|>json"
        '<|message|>{"city":"Paris"}<|call|>'
        "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>"
        "Sunny in Paris<|end|><|start|>assistant")


async def test_run_agent_bad_payload_becomes_an_error_result() -> None:
    """Malformed arguments from the model come back to it as a parse error, then it recovers."""
    agent, library, seen = _weather_agent()
    script = [
        completion('<|channel|>commentary to=functions.get_weather <|constrain|>json'
                   '<|message|>{"city": "Paris"'),
        completion(CALL_TEXT),
        completion("<|channel|>final<|message|>Sunny."),
    ]
    with ScriptedServer(script) as server:
        response = await run_agent(agent, "Weather in Paris?", library=library, api="harmony",
                                   base_url=server.base_url)
    assert response.content == "Sunny." and seen == ["Paris"]
    results = [m for m in response.context if isinstance(m, ToolResultMessage)]
    assert results[0].is_error and "tool_payload_parse_error" in results[0].content
    assert "tool_payload_parse_error" in server.requests[1].body["prompt"]
