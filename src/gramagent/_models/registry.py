"""From a model reference (``openai/gpt-4o-mini``, ``local/qwen2.5-coder-0.5b``) to an adapter.

=============  ==========================================================================
provider       what it resolves to
=============  ==========================================================================
``openai``     any OpenAI-compatible server, in the wire format ``api`` names (default
               ``chat``): one of the :class:`WireFormat` entries of :data:`WIRE_FORMATS`.
               Base URL and key come from the arguments, else ``OPENAI_BASE_URL`` /
               ``OPENAI_API_KEY``; the default base URL is ``https://api.openai.com/v1``.
``local``      the embedded llama.cpp model, ``gramagent._models.local.local_model``
               (imported on demand; needs the ``local`` extra).
=============  ==========================================================================

The wire formats are one table: an entry names the format, its adapter class and the endpoint
it posts to, and the renderer of that endpoint's replies (which the scripted test server of
:mod:`gramagent.testing` serves). The CLI's ``--api``, the scripted server and the tests read
the table, so a new wire format is its adapter module plus one :func:`register_wire_format`
entry. Adapters are imported by name on first use: reading the table imports none of them.

Everything that can be checked before a request is checked here and raised as a
:class:`~gramagent.errors.ConfigurationError`: an unknown provider or api, a malformed base
URL, a missing API key (a server on a loopback address may go without one), an option the
adapter does not take.
"""

from __future__ import annotations

import importlib
import ipaddress
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from gramagent._install import needs_extra
from gramagent.errors import ConfigurationError

if TYPE_CHECKING:  # reading the table (the CLI's --api) loads neither the spec nor the seam
    from gramagent._models.base import Model
    from gramagent._spec.model import ModelRef

__all__ = [
    "DEFAULT_BASE_URL",
    "PROVIDERS",
    "WIRE_FORMATS",
    "WireFormat",
    "api_names",
    "check_base_url",
    "is_loopback",
    "load_object",
    "register_wire_format",
    "resolve_model",
    "wire_format",
]

PROVIDERS = ("openai", "local")
DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_API = "chat"


@dataclass(frozen=True, slots=True, kw_only=True)
class WireFormat:
    """One wire format of the ``openai`` provider: its adapter, endpoint and reply renderer."""

    name: str
    """The ``api`` value that selects it (``--api`` on the command line)."""
    adapter: str
    """``module:attribute`` of the adapter class, called as ``(base_url, api_key, **options)``."""
    endpoint: str
    """The path below the API root the adapter posts to, e.g. ``/chat/completions``."""
    renderer: str
    """``module:function`` rendering a :class:`~gramagent._models.base.ModelTurn` as the reply
    to a request of this endpoint (see ``gramagent._models.chat_render.render_reply``)."""
    summary: str
    """One line for help texts."""
    options: Mapping[str, Any] = field(default_factory=dict)
    """Options every adapter of this format gets (e.g. ``functions=True``)."""
    parallel_calls: bool = True
    """Whether one reply can carry several calls."""
    extra: str | None = None
    """The gramagent extra the adapter needs, named when its import fails."""


WIRE_FORMATS: dict[str, WireFormat] = {}
"""The registered wire formats by name, in registration order (read-only for callers)."""


def register_wire_format(wire: WireFormat) -> None:
    """Add a wire format to :data:`WIRE_FORMATS`.

    Raises:
        ValueError: the name is taken, or the endpoint is registered with another renderer
            (one endpoint answers in one way, whichever format posted to it).
    """
    if wire.name in WIRE_FORMATS:
        raise ValueError(f"wire format {wire.name!r} is already registered")
    for other in WIRE_FORMATS.values():
        if other.endpoint == wire.endpoint and other.renderer != wire.renderer:
            raise ValueError(f"endpoint {wire.endpoint} is rendered by {other.renderer} "
                             f"({other.name}), not {wire.renderer}")
    WIRE_FORMATS[wire.name] = wire


def api_names() -> tuple[str, ...]:
    """The names of the registered wire formats, in registration order."""
    return tuple(WIRE_FORMATS)


def wire_format(name: str) -> WireFormat:
    """The registered wire format ``name``.

    Raises:
        ConfigurationError: no format has that name (the message lists those that exist).
    """
    try:
        return WIRE_FORMATS[name]
    except KeyError:
        raise ConfigurationError(
            f"unknown api {name!r}; expected one of: {', '.join(WIRE_FORMATS)}"
        ) from None


def load_object(path: str) -> Any:
    """The object a ``module:attribute`` path names (the module is imported if need be)."""
    module, _, attribute = path.partition(":")
    return getattr(importlib.import_module(module), attribute)


_CHAT_RENDERER = "gramagent._models.chat_render:render_reply"
for _wire in (
    WireFormat(name="chat", adapter="gramagent._models.chat:ChatCompletionsModel",
               endpoint="/chat/completions", renderer=_CHAT_RENDERER,
               summary="Chat Completions with tools / tool_calls"),
    WireFormat(name="functions", adapter="gramagent._models.chat:ChatCompletionsModel",
               endpoint="/chat/completions", renderer=_CHAT_RENDERER,
               options={"functions": True}, parallel_calls=False,
               summary="Chat Completions with legacy functions / function_call"),
    WireFormat(name="responses", adapter="gramagent._models.responses:ResponsesModel",
               endpoint="/responses", renderer="gramagent._models.responses:render_reply",
               summary="the Responses API (function_call / function_call_output, strict)"),
    WireFormat(name="harmony", adapter="gramagent._models.harmony:HarmonyModel",
               endpoint="/completions", renderer="gramagent._models.harmony:render_reply",
               parallel_calls=False, extra="harmony",
               summary="the Harmony format of gpt-oss over /v1/completions"),
):
    register_wire_format(_wire)


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
        ref: The agent's model reference (text is parsed with :meth:`ModelRef.parse`); the
            provider name is case-insensitive (``OpenAI/gpt-4o-mini``).
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
    from gramagent._spec.model import ModelRef

    if isinstance(ref, str):
        ref = ModelRef.parse(ref)
    if ref.provider not in PROVIDERS:  # provider names are case-insensitive: OpenAI/gpt-4o
        ref = ModelRef(provider=ref.provider.lower(), name=ref.name)
    if ref.provider == "local" and base_url is not None:
        # An explicit server for a local model: speak to it as to any OpenAI-compatible one.
        ref = ModelRef(provider="openai", name=ref.name)
    if ref.provider == "local":
        local_model = _load("gramagent._models.local:local_model",
                            needs_extra("the local provider (the embedded llama.cpp runtime)",
                                        "local"))
        # The local provider decides what it accepts (it rejects a base URL or key: its
        # server is embedded), so explicit arguments are passed on, absent ones are not.
        given = {"api": api, "api_key": api_key}
        options.update((k, v) for k, v in given.items() if v is not None)
        return _build(local_model, "local", ref, **options)
    if ref.provider != "openai":
        raise ConfigurationError(
            f"unknown model provider {ref.provider!r} in {str(ref)!r}; "
            f"expected one of: {', '.join(PROVIDERS)}"
        )
    wire = wire_format(api or DEFAULT_API)
    base_url = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
    check_base_url(base_url)
    api_key = api_key or os.environ.get("OPENAI_API_KEY") or None
    if api_key is None and not is_loopback(base_url):
        raise ConfigurationError(
            f"no API key for {base_url} (model {str(ref)!r}): set OPENAI_API_KEY or pass an "
            "api key (servers on 127.0.0.1 / localhost need none)"
        )
    hint = (needs_extra(f"the {wire.name} api", wire.extra) if wire.extra else
            f"the {wire.name} api's adapter cannot be imported")
    adapter = _load(wire.adapter, hint)
    built = _build(adapter, wire.name, base_url, api_key, **{**wire.options, **options})
    if hasattr(built, "model_name"):  # the adapters here: requests name this model
        built.model_name = ref.name
    return built


def is_loopback(url: str) -> bool:
    """Whether ``url`` points at this machine (``localhost``, 127.0.0.0/8, ``::1``)."""
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_base_url(url: str) -> None:
    """Refuse a base URL that is not ``http(s)://host...``.

    Raises:
        ConfigurationError: naming the URL and the form expected.
    """
    try:
        parts = urlsplit(url)
        hostname = parts.hostname
    except ValueError:  # an unclosed "[" of an IPv6 host, a port that is not a number
        hostname = None
    if not hostname or parts.scheme not in ("http", "https"):
        raise ConfigurationError(
            f"invalid base URL {url!r}: expected http(s)://host[:port]/path, "
            "e.g. http://127.0.0.1:8080/v1"
        )


def _load(path: str, hint: str) -> Any:
    """:func:`load_object`, an import failure being a ConfigurationError that says ``hint``."""
    try:
        return load_object(path)
    except ImportError as exc:
        raise ConfigurationError(f"{hint} ({exc})") from exc


def _build(factory: Callable[..., Model], api: str, *args: Any, **options: Any) -> Model:
    try:
        return factory(*args, **options)
    except TypeError as exc:
        raise ConfigurationError(f"invalid option for the {api} model: {exc}") from exc
