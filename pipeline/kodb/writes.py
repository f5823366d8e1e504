"""The fact write path: an ingest run and a facts import, each in the caller's one write
transaction, with the distinct subjects, their stored summaries and the full text kept in
step. ``store.py`` owns the transactions."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from pipeline.kodb import decisions, notes, schema, summaries
from pipeline.kodb.chunking import CHUNK, batches, chunks
from pipeline.kodb.dialects import Dialect
from pipeline.kodb.match import word_runs
from pipeline.kodb.schema import subject_key
from pipeline.model import Fact, Note, NoteText

#: Facts an import reads and inserts at a time (its memory is a few batches, not the file).
IMPORT_BATCH = 20_000


@dataclass(frozen=True)
class ImportResult:
    """Outcome of ``import_facts``: new rows and rows whose fact_key was already present."""

    inserted: int
    existing: int


def apply_ingest(
    conn: Connection,
    dialect: Dialect,
    upserts: Sequence[tuple[Note, Sequence[Fact]]],
    removed: Sequence[str],
    extractor: str,
    texts: Sequence[NoteText],
    openings: Mapping[str, Iterable[int]],
) -> None:
    """One ingest run (``KoDB.apply_ingest`` says what it records)."""
    now = time.time()
    note_rows = [asdict(note) | {"ingested_at": now} for note, _ in upserts]
    paths = list(dict.fromkeys([n.path for n, _ in upserts] + list(removed)))
    new_facts = [f for _, fs in upserts for f in fs]
    dialect.lock_writers(conn)
    notes.upsert_notes(conn, dialect, note_rows)
    touched = delete_file_facts(conn, dialect, paths, extractor)
    removed_list = list(dict.fromkeys(removed))
    notes.delete_notes(conn, dialect, removed_list)
    insert_facts(conn, dialect, new_facts, now, extractor=extractor, summarise=True)
    prune_subjects(conn, dialect, touched)
    notes.replace_texts(conn, dialect, texts, removed_list)
    # An upserted note whose openings are not given keeps none (no stale keys count); a
    # path that is not upserted gets none (no key without its registry row).
    notes.replace_openings(
        conn, dialect, {n.path: openings.get(n.path, ()) for n, _ in upserts}, removed_list
    )
    refresh_stats(conn, dialect)
    decisions.rebuild(conn)
    dialect.flush_indexes(conn)


def import_facts(
    conn: Connection, dialect: Dialect, facts: Iterable[Fact], batch_size: int
) -> ImportResult:
    """Insert a stream of facts, ``batch_size`` at a time (``KoDB.import_facts``)."""
    inserted = seen = 0
    now = time.time()
    dialect.lock_writers(conn)
    for batch in batches(facts, batch_size):
        seen += len(batch)
        inserted += insert_facts(conn, dialect, batch, now)
    refresh_stats(conn, dialect)
    decisions.rebuild(conn)
    dialect.flush_indexes(conn)
    return ImportResult(inserted=inserted, existing=seen - inserted)


def insert_facts(
    conn: Connection,
    dialect: Dialect,
    facts: Sequence[Fact],
    now: float,
    extractor: str | None = None,
    *,
    summarise: bool = False,
) -> int:
    """Insert facts not yet stored (by fact_key) and their subjects; return the count.

    ``extractor`` stores every fact under that extractor (ingest's own); the key is taken
    after it, since the extractor is part of a fact's identity. ``summarise``: store the
    summaries of the subjects whose facts are all among those inserted, from the rows in
    hand (``summaries.store_whole``); the caller writes no more facts of them in this
    transaction.
    """
    if extractor is not None:
        facts = [f if f.extractor == extractor else replace(f, extractor=extractor) for f in facts]
    by_key: dict[str, Fact] = {}
    for fact in facts:
        by_key.setdefault(fact.key, fact)
    rows = _new_rows(conn, dialect, by_key, now)
    if not rows:
        return 0
    # ON CONFLICT DO NOTHING: a concurrent writer may have stored the same fact after our
    # look-up (PostgreSQL's READ COMMITTED does not show it to us); insert_rows tells which
    # rows this transaction really inserted, so the counts stay exact.
    older = (
        summaries.with_facts(conn, dialect, {r["subject_key"] for r in rows}, CHUNK)
        if summarise
        else set()
    )
    t = schema.facts
    ids = dict(dialect.insert_rows(conn, t, rows, t.c.fact_key, returning=(t.c.fact_key, t.c.id)))
    subjects = {r["subject_key"]: r["subject_norm"] for r in rows if r["fact_key"] in ids}
    add_subjects(conn, dialect, subjects)
    summaries.invalidate(conn, dialect, subjects, CHUNK)
    if summarise:
        summaries.store_whole(conn, rows, ids, older, CHUNK)
    return len(ids)


def _new_rows(
    conn: Connection, dialect: Dialect, by_key: dict[str, Fact], now: float
) -> list[dict[str, object]]:
    """The rows of the facts whose key is not stored yet."""
    t = schema.facts
    present: set[str] = set()
    keys = list(by_key)
    for chunk in chunks(keys):
        present.update(
            conn.execute(sa.select(t.c.fact_key).where(dialect.one_of(t.c.fact_key, chunk)))
            .scalars()
            .all()
        )
    rows = []
    # A vault's facts share a few thousand subjects: normalise and hash each one once.
    names: dict[str, tuple[str, str]] = {}
    for key in keys:
        if key in present:
            continue
        fact = by_key[key]
        if fact.subject not in names:
            norm = fact.subject_norm
            names[fact.subject] = (norm, subject_key(norm))
        norm, skey = names[fact.subject]
        rows.append(
            {
                "subject": fact.subject,
                "subject_norm": norm,
                "subject_key": skey,
                "predicate": fact.predicate,
                "object": fact.object,
                "confidence": float(fact.confidence),
                "source_type": fact.source_type,
                "source_file": fact.source_file,
                "extractor": fact.extractor,
                "fact_key": key,
                "created_at": now,
            }
        )
    return rows


def add_subjects(conn: Connection, dialect: Dialect, subjects: dict[str, str]) -> None:
    """Distinct-subject rows (key -> norm) with their word runs, if not present."""
    s = schema.subjects
    rows = [
        {"subject_key": k, "subject_norm": v, "words": word_runs(v)}
        for k, v in sorted(subjects.items())
    ]
    dialect.insert_rows(conn, s, rows, s.c.subject_key)


def delete_file_facts(
    conn: Connection, dialect: Dialect, paths: Sequence[str], extractor: str
) -> set[str]:
    """Delete one extractor's facts of these files; return the subject keys they had."""
    t = schema.facts
    touched: set[str] = set()
    for chunk in chunks(list(paths)):
        where = sa.and_(t.c.extractor == extractor, dialect.one_of(t.c.source_file, chunk))
        touched.update(conn.execute(sa.select(t.c.subject_key).where(where)).scalars())
        conn.execute(t.delete().where(where))
    summaries.invalidate(conn, dialect, touched, CHUNK)
    return touched


def prune_subjects(conn: Connection, dialect: Dialect, keys: Iterable[str]) -> None:
    """Drop distinct-subject rows (and their index entries) no fact refers to anymore."""
    s, t = schema.subjects, schema.facts
    orphan = ~sa.exists().where(t.c.subject_key == s.c.subject_key)
    for chunk in chunks(sorted(keys)):
        conn.execute(s.delete().where(dialect.one_of(s.c.subject_key, chunk), orphan))


def refresh_stats(conn: Connection, dialect: Dialect) -> int:
    """In the caller's write transaction (holding ``Dialect.lock_writers``): store the
    missing subject summaries, so the facts and their summaries commit together (a run cut
    short leaves neither); return how many were stored."""
    stored = 0
    missing = summaries.missing_keys(conn)
    dialect.before_bulk_refresh(conn, len(missing), summaries.REFRESH_CHUNK)
    for chunk in chunks(missing, summaries.REFRESH_CHUNK):
        stored += summaries.store(conn, dialect, chunk)
    return stored
