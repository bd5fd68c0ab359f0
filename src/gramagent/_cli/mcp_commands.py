"""CLI commands for MCP: ``gramagent mcp import`` and ``gramagent mcp serve``.

``gramagent mcp import SERVER`` prints gram tool specs for the tools of an MCP server (or
writes them with ``--output``); tools the notation cannot express are listed on stderr and
make the exit status 1. ``gramagent mcp serve`` exposes a ToolLibrary (and optionally an
agent) as an MCP server over stdio, or over streamable HTTP with ``--http PORT``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from gramagent._cli._app import app, err_console, handle_errors
from gramagent._cli._conventions import Group
from gramagent._cli._terminal import TerminalStream, echo, markup_text
from gramagent.mcp._sdk import require_sdk

__all__ = ["import_tools", "mcp_app", "serve"]

mcp_app = typer.Typer(cls=Group,
    name="mcp",
    help="MCP (Model Context Protocol): import a server's tools as gram specs, or serve a "
         "tool library as an MCP server.",
    no_args_is_help=True,
)
app.add_typer(mcp_app)

_TIMEOUT = typer.Option("--timeout", min=0.001, metavar="SECONDS",
                        help="Seconds one MCP request may take.")
_CONNECT = typer.Option("--connect-timeout", min=0.001, metavar="SECONDS",
                        help="Seconds to launch or reach the server and shake hands.")
_VERBOSE = typer.Option("-v", "--verbose", count=True, show_default=False,
                        help="Log records (the server's stderr among them) on stderr.")


@mcp_app.command("import")
@handle_errors
def import_tools(
    server: Annotated[str, typer.Argument(
        help="'stdio:COMMAND ARGS...' or 'http://HOST:PORT/PATH' (an 'mcp:' prefix is "
             "allowed), quoted as one argument.", show_default=False, metavar="SERVER")],
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", metavar="FILE",
        help="Write the specs to this file instead of stdout.")] = None,
    tool: Annotated[list[str] | None, typer.Option(
        "--tool", metavar="NAME", help="Import only this tool (repeatable).")] = None,
    timeout: Annotated[float, _TIMEOUT] = 30.0,
    connect_timeout: Annotated[float, _CONNECT] = 20.0,
    verbose: Annotated[int, _VERBOSE] = 0,
) -> None:
    """Print gram tool specs for the tools of an MCP server."""
    require_sdk()
    from gramagent._logs import configure_logging, reset_logging
    from gramagent.mcp._import import import_specs

    configure_logging(verbose if verbose > 0 else -1,
                      stream=TerminalStream(sys.stderr))  # type: ignore[arg-type]
    try:
        imported = import_specs(server, timeout=timeout, connect_timeout=connect_timeout,
                                only=tool or None)
    finally:
        reset_logging()
    text = imported.to_gram()
    if output is not None:
        output.write_text(text, encoding="utf-8")
        err_console.print(f"[dim]wrote {len(imported.specs)} tool spec(s) to "
                          f"{markup_text(output)}[/dim]",
                          highlight=False)
    else:
        echo(text, nl=False)
    for problem in imported.problems:  # it quotes the server's tool names: not markup
        err_console.print(f"[yellow]left out[/yellow]: {markup_text(problem)}", highlight=False,
                          soft_wrap=True, markup=True)
    if imported.problems:
        raise typer.Exit(1)


@mcp_app.command("serve")
@handle_errors
def serve(
    agent_file: Annotated[Path | None, typer.Argument(
        help="An agent's gram file: serve its tools with the schemas of its specs (bound "
             "to the library first). Without it, every tool of the library.",
        show_default=False, metavar="AGENT.gram")] = None,
    tools: Annotated[str | None, typer.Option(
        "--tools", metavar="MODULE:LIBRARY",
        help="The tools to serve (default: the built-in tools); same forms as for run.")
    ] = None,
    agent: Annotated[str | None, typer.Option(
        "--agent", metavar="NAME", help="Which agent of a file that declares several.")
    ] = None,
    http: Annotated[int | None, typer.Option(
        "--http", metavar="PORT", min=0,
        help="Serve streamable HTTP on this port (path /mcp) instead of stdio.")] = None,
    host: Annotated[str, typer.Option("--host", metavar="HOST", help="Interface for --http.")
                    ] = "127.0.0.1",
    agent_tool: Annotated[bool, typer.Option(
        "--agent-tool", help="Also serve the agent itself as a tool (input -> its answer).")
    ] = False,
    model: Annotated[str | None, typer.Option(
        "--model", metavar="PROVIDER/NAME",
        help="Model of the agent-as-a-tool, overriding the agent's.")] = None,
    base_url: Annotated[str | None, typer.Option(
        "--base-url", metavar="URL",
        help="API root of an OpenAI-compatible server, for --agent-tool.")
    ] = None,
    api: Annotated[str | None, typer.Option("--api", metavar="API",
                                            help="Wire format, for --agent-tool.")] = None,
    api_key: Annotated[str | None, typer.Option(
        "--api-key", metavar="KEY", help="API key, for --agent-tool.",
        show_default=False)] = None,
    verbose: Annotated[int, _VERBOSE] = 0,
) -> None:
    """Serve a tool library (and optionally an agent) as an MCP server."""
    require_sdk()
    from gramagent._cli.run_commands import load_library
    from gramagent._logs import configure_logging, reset_logging
    from gramagent._models.registry import resolve_model
    from gramagent._spec.gram.text import load_agent
    from gramagent._spec.model import ModelRef
    from gramagent.errors import ConfigurationError
    from gramagent.mcp._serve import build_server, serve_http, serve_stdio

    if agent_file is None and (agent_tool or agent):
        raise ConfigurationError("--agent-tool and --agent need an agent's gram file")
    # stdout carries the protocol over stdio: diagnostics go to stderr only.
    configure_logging(verbose if verbose > 0 else 0,
                      stream=TerminalStream(sys.stderr))  # type: ignore[arg-type]
    try:
        spec = load_agent(agent_file, agent) if agent_file is not None else None
        library = load_library(tools)
        resolved = None
        if agent_tool and spec is not None:
            ref = ModelRef.parse(model) if model else spec.model
            resolved = resolve_model(ref, api=api, base_url=base_url, api_key=api_key)
        server = build_server(library, spec, agent_tool=agent_tool, model=resolved)
        names = ", ".join(library.names() if spec is None else [t.name for t in spec.tools])
        if http is not None:
            err_console.print(f"[dim]serving {markup_text(names or 'no tools')} on "
                              f"http://{host}:{http}/mcp; Ctrl-C ends[/dim]", highlight=False)
            serve_http(server, host=host, port=http)
        else:
            serve_stdio(server)
    except KeyboardInterrupt:
        pass
    finally:
        reset_logging()
