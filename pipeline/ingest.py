"""Vault ingestion: scan the notes, extract facts from new and changed ones, record the run.

Incremental: a note whose (mtime, size) matches its registry row is not read at all; one
whose bytes hash to the registered ``content_hash`` keeps its facts. Only new and changed
notes are parsed and extracted. Notes gone from disk (or now excluded) are removed with
their facts. A note that has become bad input (invalid YAML, not UTF-8, binary, too big) is
reported in ``skipped`` and keeps its previous registry row and facts: nothing is lost and
the run never aborts for one note. Everything is written in one KO-DB transaction.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from pipeline.config import Settings
from pipeline.errors import InputError
from pipeline.model import SOURCE_TYPES, Fact, Note
from pipeline.vault.extract import EXTRACTOR, extract_facts
from pipeline.vault.parse import content_hash, parse_note, read_note_bytes
from pipeline.vault.scan import ScannedFile, scan_vault

if TYPE_CHECKING:
    from pipeline.kodb import KoDB

#: progress(done, total): called after each scanned note is handled.
Progress = Callable[[int, int], None]


class SkippedNote(NamedTuple):
    """A note that could not be ingested this run, and why (its old facts were kept).

    A named pair, so ``for path, reason in report.skipped`` works too.
    """

    path: str
    reason: str


@dataclass(frozen=True)
class IngestReport:
    """The outcome of one ingest run; counts of notes and facts are read back from KO-DB."""

    notes_total: int
    notes_by_type: dict[str, int]
    facts_total: int
    facts_by_predicate: dict[str, int]
    skipped: tuple[SkippedNote, ...]
    added: int
    updated: int
    removed: int
    unchanged: int
    seconds: float
    scanned: int = 0
    facts_written: int = 0  # facts extracted from the added and updated notes

    @property
    def by_type(self) -> dict[str, int]:
        """Registered notes per source type (same as ``notes_by_type``)."""
        return self.notes_by_type

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of ``vault-ko ingest --json``."""
        return {
            "notes": {"total": self.notes_total, "by_type": dict(self.notes_by_type)},
            "facts": {"total": self.facts_total, "by_predicate": dict(self.facts_by_predicate)},
            "skipped": [{"path": s.path, "reason": s.reason} for s in self.skipped],
            "changes": {
                "scanned": self.scanned,
                "added": self.added,
                "updated": self.updated,
                "removed": self.removed,
                "unchanged": self.unchanged,
                "skipped": len(self.skipped),
                "facts_written": self.facts_written,
            },
            "seconds": round(self.seconds, 3),
        }


def skip_reason(exc: InputError) -> str:
    """The reason of a skipped note without its path (the report names the path)."""
    if exc.line is not None:
        return f"line {exc.line}: {exc.reason}"
    return exc.reason


def ingest_vault(
    settings: Settings,
    kodb: KoDB,
    progress: Progress | None = None,
    *,
    force: bool = False,
) -> IngestReport:
    """Bring KO-DB's registry and ``ingest`` facts in line with the vault on disk.

    ``force`` re-reads and re-extracts every note (after an upgrade of the extraction rules).
    """
    started = time.perf_counter()
    registry = kodb.notes()
    files = scan_vault(settings)
    on_disk = {f.path for f in files}

    upserts: list[tuple[Note, Sequence[Fact]]] = []
    skipped: list[SkippedNote] = []
    counts: Counter[str] = Counter()

    for done, scanned in enumerate(files, start=1):
        outcome = _ingest_one(settings, scanned, registry.get(scanned.path), force, upserts)
        if isinstance(outcome, SkippedNote):
            skipped.append(outcome)
        else:
            counts[outcome] += 1
        if progress is not None:
            progress(done, len(files))

    removed = sorted(set(registry) - on_disk)
    if upserts or removed:
        kodb.apply_ingest(upserts, removed, extractor=EXTRACTOR)

    notes = kodb.notes()
    by_type = Counter(n.source_type for n in notes.values())
    return IngestReport(
        notes_total=len(notes),
        notes_by_type={t: by_type.get(t, 0) for t in SOURCE_TYPES},
        facts_total=kodb.count_facts(),
        facts_by_predicate=dict(
            sorted(kodb.facts_by_predicate().items(), key=lambda kv: (-kv[1], kv[0]))
        ),
        skipped=tuple(skipped),
        added=counts["added"],
        updated=counts["updated"],
        removed=len(removed),
        unchanged=counts["unchanged"],
        seconds=time.perf_counter() - started,
        scanned=len(files),
        facts_written=sum(len(fs) for _, fs in upserts),
    )


def _ingest_one(
    settings: Settings,
    scanned: ScannedFile,
    known: Note | None,
    force: bool,
    upserts: list[tuple[Note, Sequence[Fact]]],
) -> str | SkippedNote:
    """Handle one scanned note; return "added" / "updated" / "unchanged" or why it was skipped."""
    # A note whose source type changed (the globs were edited) must be re-extracted: every
    # fact carries its source type.
    reuse = known if not force and known and known.source_type == scanned.source_type else None
    if reuse is not None and (reuse.mtime, reuse.bytes) == (scanned.mtime, scanned.bytes):
        return "unchanged"  # cheap path: the file was not touched since the last run
    try:
        raw, mtime = read_note_bytes(settings.vault, scanned.path, settings.vault_max_note_bytes)
        if reuse is not None and reuse.content_hash == content_hash(raw):
            # Touched but not changed (a checkout, a sync tool): its facts stand. The row keeps
            # its old mtime, so the next run hashes it again; cheap next to parsing.
            return "unchanged"
        parsed = parse_note(raw, scanned.path, scanned.source_type, mtime=mtime)
    except InputError as exc:
        return SkippedNote(scanned.path, skip_reason(exc))
    upserts.append((parsed.note, extract_facts(parsed)))
    return "added" if known is None else "updated"
