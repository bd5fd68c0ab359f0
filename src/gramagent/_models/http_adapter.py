"""What the HTTP adapters (chat, responses, harmony) share: their client, closing, errors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Self, Unpack

from gramagent._models.http import HTTPClient, HTTPOptions
from gramagent.errors import ConfigurationError, ModelAPIError

__all__ = ["HTTPAdapter"]


class HTTPAdapter:
    """What the HTTP adapters (chat, responses, harmony) share: the client, closing, errors.

    A subclass adds its ``request`` method; it owns an :class:`HTTPClient` made from
    ``base_url``, ``api_key`` and the transport ``options``, or uses the one passed as
    ``http`` (sharing its pool; transport options then belong to that client).

    Raises:
        ConfigurationError: ``http`` given together with transport options.
    """

    http: HTTPClient
    """The client every request of this adapter goes through."""
    provider = "openai"
    """What the spans name as ``gen_ai.provider.name``: any OpenAI-compatible server."""
    model_name: str | None = None
    """The model this adapter was made for (:func:`~gramagent._models.registry.resolve_model`
    sets it from the model reference); a run given this adapter sends it as the model name.
    None: the agent's model name."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        *,
        api: str,
        http: HTTPClient | None = None,
        **options: Unpack[HTTPOptions],
    ) -> None:
        if http is not None and options:
            raise ConfigurationError(
                "pass transport options to the shared HTTPClient, not with http="
            )
        self.http = http or HTTPClient(base_url, api_key, api=api, **options)

    def reply_error(
        self, path: str, problem: Exception, *, body: bytes | Mapping[str, object], model: str
    ) -> ModelAPIError:
        """The error for a successful answer at ``path`` that the adapter cannot read."""
        return self.http.error(
            str(problem), url=self.http.base_url + path, status=200, body=body, model=model
        )

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self.http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
