"""`vault-ko calibrate` and `vault-ko sync`: keep the graph and the noise floor current."""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import TYPE_CHECKING

import click
from rich.table import Table

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
from pipeline.render import CalibrationView, to_dict

if TYPE_CHECKING:
    from pipeline.app import App
    from pipeline.config import Settings
    from pipeline.graph import GraphClient


def _open(settings: Settings, *, writer: bool) -> App:
    from pipeline.app import App

    return App(settings, creates_kodb=writer)


def _print_calibration(data: dict) -> None:
    table = Table(title="calibration", show_header=False)
    stored = data.get("stored") or {}
    for key in ("embedder", "dims", "probe_set_version", "n_notes", "n_pairs"):
        if key in stored:
            table.add_row(key, str(stored[key]))
    for key in ("noise_floor", "sigma", "mu"):
        if key in stored:
            table.add_row(f"measured {key}", f"{stored[key]:.4f}")
    if "trusted" in stored:
        table.add_row("trusted (≥30 notes, ≥100 pairs)", "yes" if stored["trusted"] else "no")
    table.add_row("answers use", str(data.get("used")))
    if data.get("floor_cosine") is not None:
        table.add_row("no_match floor (cosine)", f"{data['floor_cosine']:.4f}")
    table.add_row("tight vault", "yes" if data.get("tight_vault") else "no")
    out.print(table)
    if data.get("warning"):
        err.print(f"warning: {data['warning']}")


@click.command("calibrate")
@no_wait_option
@json_option
@pass_app
def calibrate_cmd(app: AppContext, no_wait: bool, as_json: bool) -> None:
    """Measure the vault's noise floor N, note spread σ and mean μ, and store them.

    N comes from off-topic probe questions scored against every embedded note (the probe
    set of the model's profile); μ and σ from note-to-note cosines (a seeded sample of
    pairs on large vaults; the sample size is reported). Fewer than 30 notes or 100
    pairs: the measurement is stored but answers keep using the embedder defaults.
    """
    from pipeline.calibrate import calibrate_vault, choose_basis

    settings = app.settings()
    with (
        writer_lock(settings, "vault-ko calibrate", no_wait=no_wait, creates=False),
        _open(settings, writer=False) as p,
    ):
        p.graph.ping()  # a dead graph fails here, before KO-DB and the model
        cal = calibrate_vault(
            p.kodb, p.graph, p.embedder, max_pairs=p.settings.calibration_max_pairs
        )
        data = to_dict(
            CalibrationView(cal, choose_basis(cal, p.embedder.model_id, p.embedder.dims))
        )
    if as_json:
        emit_json(data)
    else:
        _print_calibration(data)


def _graph_first(graph: GraphClient) -> None:
    """A dead graph fails the sync here, before KO-DB and the model: nothing is written, and
    the error is followed by what can be done meanwhile."""
    from pipeline.errors import GraphUnavailable

    try:
        graph.ping()
    except GraphUnavailable as exc:
        exc.hint = (
            "nothing was synced (KO-DB and the graph are as they were): `vault-ko ingest` "
            "updates KO-DB alone, so that answers by words see the edits, and `vault-ko sync` "
            "does the rest once the graph answers"
        )
        raise


@click.command("sync")
@click.argument("vault", required=False, type=click.Path(file_okay=False))
@click.option("--full", is_flag=True, help="Re-embed every note, not only changed ones.")
@click.option("--calibrate", "force", is_flag=True, help="Recalibrate even when not outdated.")
@no_wait_option
@json_option
@pass_app
def sync_cmd(
    app: AppContext, vault: str | None, full: bool, force: bool, no_wait: bool, as_json: bool
) -> None:
    """Ingest, embed changed notes, and recalibrate when needed: run it after editing notes.

    Recalibrates when no calibration is stored, the model or probe set changed, the note
    count drifted by more than calibration_max_drift (10%), or it is older than
    calibration_max_age_days (90).
    """
    from pipeline.sync import sync_vault

    t0 = time.perf_counter()
    settings = app.settings(vault)
    with (
        writer_lock(settings, "vault-ko sync", no_wait=no_wait),
        _open(settings, writer=True) as p,
        progress_bar("embedding notes", enabled=not as_json) as progress,
    ):
        _graph_first(p.graph)
        report = sync_vault(
            p.settings,
            p.kodb,
            p.graph,
            p.embedder,
            full=full,
            force_calibration=force,
            progress=progress,
        )
        cal = to_dict(CalibrationView(report.calibration))
    query_model = prepare_query_model(settings, quiet=as_json)
    data = {
        "ingest": {
            "notes": report.ingest.notes_total,
            "by_type": report.ingest.notes_by_type,
            "facts": report.ingest.facts_total,
            "skipped": [{"path": p, "reason": r} for p, r in report.ingest.skipped],
        },
        "embed": {k: v for k, v in asdict(report.embed).items() if k != "skipped"},
        "calibrated": report.calibrated,
        "calibration_reasons": list(report.calibration_reasons),
        "calibration": cal["stored"],
        "query_model": query_model,
        "seconds": round(time.perf_counter() - t0, 3),
    }
    if as_json:
        emit_json(data)
        return
    e = report.embed
    moved = f", moved {e.moved}" if e.moved else ""
    if e.passages:
        moved += f" ({e.passages} passages of long notes)"
    out.print(
        f"ingested {report.ingest.notes_total} notes ({report.ingest.facts_total} facts); "
        f"embedded {e.embedded}{moved}, deleted {e.deleted}, unchanged {e.unchanged}, "
        f"links {e.links}"
    )
    if report.ingest.skipped:
        for path, reason in report.ingest.skipped:
            err.print(f"skipped {path}: {reason}")
    if report.calibrated:
        c = report.calibration
        assert c is not None
        out.print(
            f"recalibrated ({'; '.join(report.calibration_reasons)}): N {c.noise_floor:.3f}, "
            f"σ {c.sigma:.3f}, μ {c.mu:.3f} over {c.n_notes} notes / {c.n_pairs} pairs"
        )
    else:
        out.print("calibration is current")
