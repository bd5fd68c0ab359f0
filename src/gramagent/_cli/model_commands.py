"""``gramagent models list``: the models a server offers (its ``GET /v1/models``), or the
embedded runtime's packaged models and whether their weights are installed."""

from __future__ import annotations

import os
import sys
from typing import TypedDict

import typer

from gramagent._cli._app import app, handle_errors, out_console
from gramagent._cli._conventions import Group
from gramagent._cli._terminal import terminal_text
from gramagent.errors import ConfigurationError

__all__ = ["LocalModel", "list_models", "local_models", "models_app", "server_models"]

models_app = typer.Typer(cls=Group, name="models", no_args_is_help=True,
                         help="The models a server offers, or the embedded runtime's.")
app.add_typer(models_app)

TIMEOUT = 10.0
"""Seconds to wait for a server's model list."""


class LocalModel(TypedDict):
    """A packaged model of the embedded runtime."""

    name: str
    """Its name after ``local/``."""
    size: int
    """The size of its GGUF file, in bytes."""
    installed: bool
    """Whether its weights packages are installed (the model runs without a download)."""
    install: str
    """The pip command that installs its weights."""


def server_models(base_url: str, api_key: str | None = None) -> list[str]:
    """The model ids ``GET {base_url}/models`` lists.

    Raises:
        ConfigurationError: the server cannot be reached, refuses, or answers no model list.
    """
    import http.client
    import json
    import urllib.error
    import urllib.request

    from gramagent._models.registry import check_base_url

    check_base_url(base_url)  # as a run checks it
    url = base_url.rstrip("/") + "/models"
    try:
        request = urllib.request.Request(url, headers={"Accept": "application/json"})
        if api_key:
            request.add_header("Authorization", f"Bearer {api_key}")
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:  # noqa: S310
            body = response.read()
    except urllib.error.HTTPError as exc:
        raise ConfigurationError(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ConfigurationError(f"{url}: cannot reach the server ({reason})") from None
    except (http.client.HTTPException, ValueError) as exc:
        # a URL or key http.client refuses (control characters), an answer it cannot read
        raise ConfigurationError(f"{url!r}: the request failed ({exc})") from None
    try:
        data = json.loads(body)
    except ValueError:
        raise ConfigurationError(f"{url}: the answer is not JSON") from None
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise ConfigurationError(f"{url}: the answer has no model list ('data')")
    return [str(m["id"]) for m in items if isinstance(m, dict) and "id" in m]


def local_models() -> list[LocalModel]:
    """The embedded runtime's packaged models (no network, no hashing)."""
    from gramagent._models.weights import known_weights, locate_chunks

    out: list[LocalModel] = []
    for weights in known_weights().values():
        try:
            locate_chunks(weights)
            installed = True
        except ConfigurationError:
            installed = False
        out.append(LocalModel(name=weights.name, size=weights.size, installed=installed,
                              install=weights.install_command()))
    return out


@models_app.command("list")
@handle_errors
def list_models(
    base_url: str | None = typer.Option(
        None, "--base-url", metavar="URL",
        help="List what this OpenAI-compatible server offers (else OPENAI_BASE_URL; with "
             "neither, the embedded runtime's models)."),
    api_key: str | None = typer.Option(None, "--api-key", metavar="KEY",
                                       help="API key (else OPENAI_API_KEY).",
                                       show_default=False),
    json: bool = typer.Option(False, "--json", help="Print JSON instead of text."),
) -> None:
    """The models a server offers, or the embedded runtime's packaged models."""
    from gramagent import _json as exact_json
    from gramagent._logs import add_secret

    url = base_url or os.environ.get("OPENAI_BASE_URL")
    if url:
        key = api_key or os.environ.get("OPENAI_API_KEY")
        add_secret(key)
        ids = server_models(url, key)
        if json:
            sys.stdout.write(terminal_text(exact_json.dumps({"base_url": url, "models": ids}))
                             + "\n")
            return
        # the server names its models: shown, never obeyed
        sys.stdout.writelines(terminal_text(f"openai/{model}") + "\n" for model in ids)
        return
    found = local_models()
    if json:
        sys.stdout.write(terminal_text(exact_json.dumps({"local": found})) + "\n")
        return
    from rich.table import Table

    table = Table("model", "size", "weights", box=None, pad_edge=False)
    for local in found:
        table.add_row(f"local/{local['name']}", f"{local['size'] / 1e9:.2f} GB",
                      "installed" if local["installed"] else "not installed")
    console = out_console()
    console.print(table)
    for local in found:
        if not local["installed"]:
            console.print(f"local/{local['name']}: {local['install']}", markup=False,
                          soft_wrap=True)
