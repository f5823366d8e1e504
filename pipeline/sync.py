"""`vault-ko sync`: the one command to run after editing notes.

Order: ingest (vault → KO-DB registry and facts), embed (registry → graph), then
calibrate when the stored calibration is missing, outdated or the note count drifted, or
when this run re-embedded more than the drift share of the notes (edited in bulk, or
re-embedded under new text rules): the noise floor is a property of the vectors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pipeline.calibrate import calibrate_vault, outdated_reasons
from pipeline.config import Settings
from pipeline.model import Calibration

if TYPE_CHECKING:
    from pipeline.embed import Embedder
    from pipeline.embed_sync import EmbedReport
    from pipeline.graph import GraphClient
    from pipeline.ingest import IngestReport
    from pipeline.kodb import KoDB


@dataclass(frozen=True)
class SyncReport:
    ingest: IngestReport
    embed: EmbedReport
    calibration: Calibration | None
    calibrated: bool
    calibration_reasons: tuple[str, ...]


def calibration_needed(
    settings: Settings, kodb: KoDB, embedder: Embedder, *, vault_notes: int | None = None
) -> tuple[Calibration | None, list[str]]:
    """The stored calibration for this model and why it must be redone (empty: it need not);
    ``vault_notes``: the registry's size when the caller knows it."""
    cal = kodb.latest_calibration(embedder.model_id, embedder.dims)
    if cal is None:
        cal = kodb.latest_calibration()
    reasons = outdated_reasons(
        cal,
        model_id=embedder.model_id,
        dims=embedder.dims,
        vault_notes=len(kodb.notes()) if vault_notes is None else vault_notes,
        max_drift=settings.calibration_max_drift,
        max_age_days=settings.calibration_max_age_days,
    )
    return cal, reasons


def sync_vault(
    settings: Settings,
    kodb: KoDB,
    graph: GraphClient,
    embedder: Embedder,
    *,
    full: bool = False,
    force_calibration: bool = False,
    progress: Any = None,
) -> SyncReport:
    """Ingest, embed, and recalibrate when needed."""
    from pipeline.embed_sync import sync_embeddings
    from pipeline.ingest import ingest_vault

    ingest = ingest_vault(settings, kodb)
    registry = kodb.notes()  # read once: embed leaves the registry as ingest left it
    embed = sync_embeddings(
        settings, kodb, graph, embedder, full=full, progress=progress, registry=registry
    )
    notes = len(registry)
    cal, reasons = calibration_needed(settings, kodb, embedder, vault_notes=notes)
    if not reasons and notes and embed.embedded / notes > settings.calibration_max_drift:
        reasons = [f"{embed.embedded} of {notes} notes re-embedded by this run"]
    if not reasons and notes and cal is not None:
        # Re-embedded since, by `vault-ko embed` or by runs each under the drift share (a
        # change of embed_long_notes, an interrupted re-embed): the floor measured vectors
        # that are mostly gone.
        since = sum(s.embedded_at > cal.measured_at for s in graph.note_states().values())
        if since / notes > settings.calibration_max_drift:
            reasons = [f"{since} of {notes} notes embedded since it was measured"]
    if force_calibration and not reasons:
        reasons = ["requested with --calibrate"]
    calibrated = bool(reasons)
    if calibrated:
        cal = calibrate_vault(kodb, graph, embedder, max_pairs=settings.calibration_max_pairs)
    return SyncReport(ingest, embed, cal, calibrated, tuple(reasons))
