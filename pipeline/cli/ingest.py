"""`vault-ko ingest`: read the vault's notes into KO-DB (registry and extracted facts)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click
from rich.table import Table
from rich.text import Text

from pipeline.cli._common import (
    AppContext,
    emit_json,
    json_option,
    no_wait_option,
    out,
    pass_app,
    progress_bar,
    writer_lock,
)

if TYPE_CHECKING:
    from pipeline.ingest import IngestReport

#: Below this many notes a progress bar only flickers; above it people like to see one.
PROGRESS_MIN_NOTES = 200
TOP_PREDICATES = 12


@click.command("ingest")
@click.argument("vault", required=False, type=click.Path(file_okay=False, path_type=str))
@click.option("--force", is_flag=True, help="Re-read and re-extract every note, changed or not.")
@no_wait_option
@json_option
@pass_app
def ingest_command(
    app: AppContext, vault: str | None, force: bool, no_wait: bool, as_json: bool
) -> None:
    """Scan the vault and extract facts from new and changed notes into KO-DB.

    VAULT is the same as --vault (both, naming other folders, are refused). Notes that
    cannot be read (invalid YAML frontmatter, not UTF-8, binary, bigger than
    vault_max_note_bytes) are listed as skipped and keep the facts of their last good
    version; the exit code is still 0. Removed notes lose their facts.
    One run writes to a vault at a time: a second one waits (or exits 2 with --no-wait).
    """
    # Imported here so `vault-ko --help` does not load SQLAlchemy or markdown-it.
    from pipeline.app import App
    from pipeline.ingest import ingest_vault

    settings = app.settings(vault)
    with (
        writer_lock(settings, "vault-ko ingest", no_wait=no_wait),
        App(settings) as stores,
        progress_bar("reading notes", enabled=not as_json, min_total=PROGRESS_MIN_NOTES) as bar,
    ):
        report = ingest_vault(settings, stores.kodb, progress=bar, force=force)

    if as_json:
        emit_json(report.to_dict())
        return
    render_report(report)


def render_report(report: IngestReport) -> None:
    """The human summary: notes per type, changes, top predicates, skipped notes."""
    by_type = ", ".join(f"{n} {t}" for t, n in report.notes_by_type.items())
    out.print(
        f"[bold]{report.notes_total}[/] notes ({by_type}), "
        f"[bold]{report.facts_total}[/] facts in KO-DB"
    )
    out.print(
        f"added {report.added}, updated {report.updated}, removed {report.removed}, "
        f"unchanged {report.unchanged}, skipped {len(report.skipped)} "
        f"in {report.seconds:.2f} s"
    )
    if report.facts_by_predicate:
        table = Table(title="top predicates", title_justify="left")
        table.add_column("predicate")
        table.add_column("facts", justify="right")
        top = list(report.facts_by_predicate.items())
        for predicate, count in top[:TOP_PREDICATES]:
            table.add_row(Text(predicate), str(count))
        if len(top) > TOP_PREDICATES:
            rest = sum(count for _, count in top[TOP_PREDICATES:])
            table.add_row(f"… {len(top) - TOP_PREDICATES} more", str(rest), style="dim")
        out.print(table)
    if report.skipped:
        table = Table(title="skipped notes (their previous facts are kept)", title_justify="left")
        table.add_column("note", overflow="fold")
        table.add_column("reason", overflow="fold")
        for skipped in report.skipped:
            table.add_row(Text(skipped.path), Text(skipped.reason))
        out.print(table)
