"""resolve_model: providers, apis, base URL and key resolution, ConfigurationError cases."""

from __future__ import annotations

import re
import sys

import pytest

from gramagent._install import install_command
from gramagent._models.base import Model
from gramagent._models.chat import ChatCompletionsModel
from gramagent._models.registry import is_loopback, resolve_model
from gramagent._models.responses import ResponsesModel
from gramagent._spec.model import ModelRef
from gramagent.errors import ConfigurationError
from gramagent.testing import reply


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No OpenAI settings leak in from the environment running the tests."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


@pytest.mark.parametrize(
    ("api", "cls", "functions"),
    [(None, ChatCompletionsModel, False), ("chat", ChatCompletionsModel, False),
     ("functions", ChatCompletionsModel, True), ("responses", ResponsesModel, None)],
    ids=["default", "chat", "functions", "responses"],
)
def test_apis(api, cls, functions):
    """Each api builds its adapter; chat is the default, functions is chat in legacy form."""
    model = resolve_model(ModelRef.parse("openai/gpt-4o-mini"), api=api, api_key="sk-1")
    assert isinstance(model, cls)
    assert isinstance(model, Model)
    assert model.http.base_url == "https://api.openai.com/v1"
    if functions is not None:
        assert model.functions is functions


def test_environment_supplies_base_url_and_key(monkeypatch):
    """OPENAI_BASE_URL and OPENAI_API_KEY are used when no arguments are given."""
    monkeypatch.setenv("OPENAI_BASE_URL", "https://llm.example.com/v1/")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    model = resolve_model("gpt-4o-mini")
    assert model.http.base_url == "https://llm.example.com/v1"
    assert model.http._headers["Authorization"] == "Bearer sk-env"


def test_arguments_override_environment(monkeypatch):
    """Explicit base_url and api_key win over the environment."""
    monkeypatch.setenv("OPENAI_BASE_URL", "https://env.example.com/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    model = resolve_model("openai/x", base_url="https://arg.example.com/v1", api_key="sk-arg")
    assert model.http.base_url == "https://arg.example.com/v1"
    assert model.http._headers["Authorization"] == "Bearer sk-arg"


@pytest.mark.parametrize("url", ["https://api.openai.com/v1", "http://10.0.0.5:8000/v1"])
def test_missing_key_for_remote_server(url, monkeypatch):
    """No key for a non-loopback server is a ConfigurationError naming OPENAI_API_KEY."""
    monkeypatch.setenv("OPENAI_API_KEY", "")
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        resolve_model("openai/gpt-4o-mini", base_url=url)


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:8080/v1", "http://localhost:1234/v1", "http://[::1]:9/v1",
            "http://127.1.2.3/v1"])
def test_loopback_servers_need_no_key(url):
    """Local servers are reachable without a key; no Authorization header is sent."""
    model = resolve_model("openai/qwen", base_url=url)
    assert "Authorization" not in model.http._headers
    assert is_loopback(url)


def test_is_loopback_rejects_lookalikes():
    """Hosts that merely contain loopback-looking text are remote."""
    assert not is_loopback("http://127.0.0.1.example.com/v1")
    assert not is_loopback("http://localhost.evil.com/v1")


@pytest.mark.parametrize(
    ("ref", "kwargs", "match"),
    [
        ("anthropic/claude", {}, "unknown model provider 'anthropic'"),
        ("openai/gpt", {"api": "assistants"}, "unknown api 'assistants'"),
        ("openai/gpt", {"base_url": "ftp://x/v1"}, "invalid base URL"),
        ("openai/gpt", {"base_url": "127.0.0.1:8080"}, "invalid base URL"),
        ("openai/gpt", {"api_key": "k", "tool_call_mode": "json"}, "tool_call_mode"),
        ("openai/gpt", {"api_key": "k", "no_such_option": 1}, "no_such_option"),
        ("openai/gpt", {"api": "responses", "api_key": "k", "stream": True}, "stream"),
    ],
    ids=["provider", "api", "scheme", "no-scheme", "mode", "option", "responses-option"],
)
def test_configuration_errors(ref, kwargs, match):
    """Everything checkable before a request raises ConfigurationError with a clear reason."""
    with pytest.raises(ConfigurationError, match=match):
        resolve_model(ref, **kwargs)


def test_options_reach_the_adapter():
    """Adapter options pass through resolve_model."""
    model = resolve_model("openai/m", api_key="k", tool_call_mode="text", stream=True,
                          max_retries=5)
    assert (model.tool_call_mode, model.stream, model.http.max_retries) == ("text", True, 5)


def test_missing_local_extra(monkeypatch):
    """Without the local module the error says which extra to install."""
    monkeypatch.setitem(sys.modules, "gramagent._models.local", None)
    with pytest.raises(ConfigurationError, match=re.escape(install_command("local"))):
        resolve_model("local/qwen2.5-coder-0.5b")


def test_missing_harmony_extra(monkeypatch):
    """Without the harmony module the error says which extra to install."""
    monkeypatch.setitem(sys.modules, "gramagent._models.harmony", None)
    with pytest.raises(ConfigurationError, match=re.escape(install_command("harmony"))):
        resolve_model("openai/gpt-oss-20b", api="harmony", base_url="http://127.0.0.1:1/v1")


def test_a_base_url_serves_a_local_model_instead_of_the_embedded_server():
    """local/NAME with a base URL talks to that server for NAME; nothing embedded starts."""
    model = resolve_model("local/qwen2.5-coder-0.5b", base_url="http://127.0.0.1:9/v1")
    assert isinstance(model, ChatCompletionsModel)
    assert model.http.base_url == "http://127.0.0.1:9/v1"
    with pytest.raises(ConfigurationError, match="unknown api"):
        resolve_model("local/x", api="nope", base_url="http://127.0.0.1:9/v1")


async def test_resolved_model_talks_to_a_loopback_server(serve, make_request):
    """A model resolved for a loopback base URL without a key answers over real HTTP."""
    srv = serve([reply("resolved")])
    model = resolve_model("openai/test-model", api="responses", base_url=srv.base_url)
    try:
        turn = await model.request(make_request())
    finally:
        await model.aclose()
    assert turn.text == "resolved"
    assert srv.requests[0].path == "/v1/responses"
    assert "authorization" not in srv.requests[0].headers


# -- the table of wire formats -----------------------------------------------------------------


def test_one_registration_reaches_resolve_model_the_cli_and_the_scripted_server(monkeypatch):
    """A wire format registered once is built by resolve_model, offered by ``--api`` and
    served by the scripted server: nothing else lists the formats."""
    import typer

    from gramagent._cli.run_commands import API_OPTION as _API
    from gramagent._models.registry import WIRE_FORMATS, WireFormat, register_wire_format
    from gramagent.testing import ScriptedServer

    monkeypatch.setattr("gramagent._models.registry.WIRE_FORMATS", dict(WIRE_FORMATS))
    from gramagent._models import registry

    register_wire_format(WireFormat(
        name="chat-strict", adapter="gramagent._models.chat:ChatCompletionsModel",
        endpoint="/chat/completions", renderer="gramagent._models.chat_render:render_reply",
        options={"strict": True}, summary="Chat Completions, strict tools"))
    assert "chat-strict" in registry.api_names()
    model = resolve_model("openai/m", api="chat-strict", api_key="k")
    assert isinstance(model, ChatCompletionsModel) and model.strict is True
    api_choice = _API.callback  # what --api accepts
    assert api_choice is not None
    assert api_choice("Chat-Strict") == "chat-strict"
    with pytest.raises(typer.BadParameter, match="chat-strict"):
        api_choice("chat-lax")
    with ScriptedServer([reply("ok")]) as server:
        served = {"/v1" + w.endpoint for w in registry.WIRE_FORMATS.values()}
        assert set(server._renderers) == served


def test_registration_refuses_a_taken_name_and_a_second_renderer_for_an_endpoint(monkeypatch):
    """Two formats may share an endpoint only if they answer it the same way."""
    from gramagent._models.registry import WIRE_FORMATS, WireFormat, register_wire_format

    monkeypatch.setattr("gramagent._models.registry.WIRE_FORMATS", dict(WIRE_FORMATS))
    base = dict(adapter="gramagent._models.chat:ChatCompletionsModel", summary="x")
    with pytest.raises(ValueError, match="already registered"):
        register_wire_format(WireFormat(name="chat", endpoint="/other", renderer="m:f", **base))
    with pytest.raises(ValueError, match="is rendered by"):
        register_wire_format(WireFormat(name="new", endpoint="/chat/completions",
                                        renderer="m:other", **base))


def test_unknown_api_lists_the_registered_ones():
    """An unknown api is a ConfigurationError naming every registered format."""
    with pytest.raises(ConfigurationError, match="chat, functions, responses, harmony"):
        resolve_model("openai/m", api="chatt", api_key="k")
