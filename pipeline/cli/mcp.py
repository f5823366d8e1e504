"""`vault-ko mcp`: the MCP server over stdio (tools ask, session_context, freshness)."""

from __future__ import annotations

import click

from pipeline.cli._common import AppContext, pass_app


@click.command("mcp")
@pass_app
def mcp_cmd(app: AppContext) -> None:
    """Serve the vault to an MCP client over stdio (stdout carries the protocol).

    Tools: ask (a question and the query options → the answer JSON, with its relevance
    label and mode), session_context (many {id, prompt} → packs), freshness (the freshness
    report). Answers come from the vault's service when it runs, else from this process
    (which loads the model on the first question). Private notes never appear.
    """
    from pipeline.mcp_server import run

    run(app.settings())
