"""`vault-ko embed`: bring the graph's note embeddings up to date with the vault registry."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from pipeline.cli._common import (
    AppContext,
    emit_json,
    err,
    json_option,
    no_wait_option,
    out,
    pass_app,
    prepare_query_model,
    progress_bar,
    writer_lock,
)

if TYPE_CHECKING:
    from pipeline.embed_sync import EmbedReport


@click.command("embed")
@click.argument("vault", required=False, type=click.Path(file_okay=False, path_type=str))
@click.option("--full", is_flag=True, help="Re-embed every note, not only new and changed ones.")
@click.option("--model", help="Embedding model name or folder [setting embed_model].")
@click.option("--batch-size", type=click.IntRange(min=1), help="Notes per model batch [16].")
@no_wait_option
@json_option
@pass_app
def embed_command(
    app: AppContext,
    vault: str | None,
    full: bool,
    model: str | None,
    batch_size: int | None,
    no_wait: bool,
    as_json: bool,
) -> None:
    """Embed new and changed notes into the graph, delete removed ones, and set links.

    Compares the registry filled by `vault-ko ingest` with the graph (content hash, model,
    dimensions). Each window of batches is committed on its own, so an interrupted run
    resumes where it stopped. Exit 2 when the graph cannot be reached or the model cannot be
    loaded. One run writes to a vault at a time: a second one waits (or exits 2 with
    --no-wait).
    """
    # Imported here so `vault-ko --help` loads neither the graph driver nor the sync code.
    from pipeline.app import App
    from pipeline.embed_sync import sync_embeddings

    settings = app.settings(vault, embed_model=model, embed_batch_size=batch_size)
    with (
        writer_lock(settings, "vault-ko embed", no_wait=no_wait, creates=False),
        App(settings, creates_kodb=False) as stores,
    ):
        # Reach the graph before opening KO-DB, so a dead graph fails within the retry
        # deadline; the model loads only if a note needs embedding.
        stores.graph.ping()
        with progress_bar("embedding notes", enabled=not as_json) as progress:
            report = sync_embeddings(
                settings, stores.kodb, stores.graph, stores.embedder, full=full, progress=progress
            )

    query_model = prepare_query_model(settings, quiet=as_json)
    if as_json:
        emit_json({**report.to_dict(), "query_model": query_model})
        return
    for path, reason in report.skipped:
        err.print(f"skipped {path}: {reason}", markup=False, soft_wrap=True)
    if not (report.embedded or report.moved or report.unchanged or report.skipped):
        err.print(
            "the vault registry is empty: run `vault-ko ingest` first", markup=False, soft_wrap=True
        )
    out.print(summary_line(report), markup=False, soft_wrap=True)


def summary_line(report: EmbedReport) -> str:
    """One line for people: what changed, how long it took, with which model."""
    skipped = f", {len(report.skipped)} skipped" if report.skipped else ""
    moved = f", moved {report.moved}" if report.moved else ""
    if report.passages:  # long notes' passages, beside the notes they belong to
        moved += f" ({report.passages} passages of long notes)"
    return (
        f"embedded {report.embedded}{moved}, deleted {report.deleted}, "
        f"unchanged {report.unchanged}, "
        f"links {report.links}{skipped} in {report.seconds:.1f} s "
        f"({report.model}, {report.dims} dims)"
    )
