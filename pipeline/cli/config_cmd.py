"""`vault-ko config show`: the effective settings, secrets masked."""

from __future__ import annotations

import click
from rich.table import Table

from pipeline.cli._common import AppContext, emit_json, json_option, out, pass_app


@click.group("config")
def config_group() -> None:
    """Inspect the effective configuration."""


@config_group.command("show")
@json_option
@pass_app
def config_show(app: AppContext, as_json: bool) -> None:
    """Print the effective settings (defaults < vault-ko.toml < VAULT_KO_* < flags).

    Secrets (the graph password, passwords inside URLs) are masked.
    """
    data = app.settings().masked()
    if as_json:
        emit_json(data)
        return
    table = Table(title="vault-ko settings", show_header=True)
    table.add_column("setting")
    table.add_column("value")
    for key, value in data.items():
        table.add_row(key, ", ".join(value) if isinstance(value, list) else str(value))
    out.print(table)
