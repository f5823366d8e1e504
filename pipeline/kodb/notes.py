"""The vault registry (one row per note) and the notes' full text, which degraded mode and
hybrid retrieval search. Functions of one open connection; ``store.py`` owns transactions."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import fields
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from pipeline.kodb import bm25, schema, text
from pipeline.kodb.chunking import CHUNK, chunks
from pipeline.kodb.dialects import Dialect
from pipeline.kodb.schema import from_row
from pipeline.model import Note, NoteStamp, NoteText

#: How much more a word in a note's title (or alias) counts than one in its body: in the BM25
#: that orders the notes found, and in each database's own measure that finds them (SQLite's
#: bm25() column weights, PostgreSQL's ts_rank_cd class A over class B); chosen on the eval
#: collections (docs/degraded-mode.md).
TITLE_WEIGHT = 3.0
#: Notes the database's own ranking hands to BM25, at least (the limit when larger): on every
#: collection measured, BM25 over this many ranks as it does over every note.
RESCORE_POOL = 100
#: ts_rank_cd's normalisation flag (0: none; 1: divide by 1 + log(length); 32: r/(r+1)).
PG_RANK_NORMALIZATION = 0


#: The registry's columns in the order of Note's fields: rows become Notes positionally
#: (every sync and ingest reads all of them; by name it took most of the read's time).
_NOTE_FIELDS = tuple(f.name for f in fields(Note))


def all_notes(conn: Connection) -> dict[str, Note]:
    """The vault registry: path -> Note."""
    t = schema.notes
    rows = conn.execute(sa.select(*(t.c[name] for name in _NOTE_FIELDS))).all()
    return {r[0]: Note(*r) for r in rows}


def note_stamps(conn: Connection) -> dict[str, NoteStamp]:
    """path -> what the registry knows of each note's file (mtime, size, content hash): all
    a comparison with the disk needs, without the rows' text."""
    t = schema.notes
    rows = conn.execute(sa.select(t.c.path, t.c.mtime, t.c.bytes, t.c.content_hash)).all()
    return {r[0]: NoteStamp(r[1], r[2], r[3]) for r in rows}


def restamp(conn: Connection, stamps: Sequence[tuple[str, float, int]]) -> None:
    """Give these notes' rows a new mtime and size, (path, mtime, bytes) each: files touched
    without a change of bytes (a checkout), so the next comparison with the disk trusts the
    stat again instead of reading them."""
    if not stamps:
        return
    t = schema.notes
    stmt = (
        t.update()
        .where(t.c.path == sa.bindparam("b_path"))
        .values(mtime=sa.bindparam("b_mtime"), bytes=sa.bindparam("b_bytes"))
    )
    conn.execute(stmt, [{"b_path": p, "b_mtime": m, "b_bytes": b} for p, m, b in stamps])


def notes_by_type(conn: Connection) -> dict[str, int]:
    """Registered notes per source type."""
    t = schema.notes
    stmt = sa.select(t.c.source_type, sa.func.count()).group_by(t.c.source_type)
    return {str(kind): int(n) for kind, n in conn.execute(stmt).all()}


def count_notes(conn: Connection, source_type: str | None = None) -> int:
    """Registered notes (of one source type when given)."""
    t = schema.notes
    stmt = sa.select(sa.func.count()).select_from(t)
    if source_type is not None:
        stmt = stmt.where(t.c.source_type == source_type)
    return int(conn.execute(stmt).scalar_one())


def notes_at(conn: Connection, paths: Iterable[str]) -> dict[str, Note]:
    """Registry rows of these note paths (paths without a row are left out)."""
    t = schema.notes
    found: dict[str, Note] = {}
    for chunk in chunks(sorted(set(paths))):
        for row in conn.execute(sa.select(t).where(t.c.path.in_(chunk))):
            found[row.path] = from_row(Note, row)
    return found


def notes_dated(
    conn: Connection,
    dialect: Dialect,
    start: str | None,
    end: str,
    limit: int,
    source_type: str | None = None,
) -> list[Note]:
    """The ``limit`` newest notes (of ``source_type`` when given) dated from ``start``
    (None: any day) to ``end``, both ISO days and inclusive: newest first, ties by path."""
    t = schema.notes
    stmt = sa.select(*(t.c[name] for name in _NOTE_FIELDS)).where(
        t.c.date.is_not(None), t.c.date <= end
    )
    if start is not None:
        stmt = stmt.where(t.c.date >= start)
    if source_type is not None:
        stmt = stmt.where(t.c.source_type == source_type)
    stmt = stmt.order_by(t.c.date.desc(), dialect.code_point(t.c.path)).limit(limit)
    return [Note(*r) for r in conn.execute(stmt).all()]


def upsert_notes(conn: Connection, dialect: Dialect, rows: Sequence[dict[str, Any]]) -> None:
    """Insert or replace these registry rows (by path)."""
    if not rows:
        return
    stmt = dialect.insert(schema.notes)
    stmt = stmt.on_conflict_do_update(
        index_elements=[schema.notes.c.path],
        set_={name: stmt.excluded[name] for name in rows[0] if name != "path"},
    )
    for chunk in chunks(rows):
        conn.execute(stmt, list(chunk))


def delete_notes(conn: Connection, dialect: Dialect, paths: Sequence[str]) -> None:
    """Delete these notes' registry rows."""
    t = schema.notes
    for chunk in chunks(paths):
        conn.execute(t.delete().where(dialect.one_of(t.c.path, chunk)))


def replace_texts(
    conn: Connection, dialect: Dialect, texts: Sequence[NoteText], removed: Sequence[str]
) -> None:
    """Delete the full text of changed and removed notes, insert the new text (SQLite's
    triggers and PostgreSQL's generated column keep the indexes in step)."""
    t = schema.note_texts
    gone = list(dict.fromkeys([x.path for x in texts] + list(removed)))
    for chunk in chunks(gone):
        conn.execute(t.delete().where(dialect.one_of(t.c.path, chunk)))
    rows = []
    for x in {x.path: x for x in texts}.values():
        title = text.words(x.title, text.MAX_INDEX_WORDS, x.language)
        body = text.words(x.body, text.MAX_INDEX_WORDS, x.language)
        rows.append(
            {
                "path": x.path,
                "title": " ".join(title),
                "body": " ".join(body),
                "language": x.language or text.NO_STEMMING,
                "words": len(title) + len(body),
            }
        )
    dialect.insert_rows(conn, t, rows, None)


def search_notes(
    conn: Connection,
    dialect: Dialect,
    terms: Sequence[str],
    limit: int,
    title_weight: float,
    pg_normalization: int,
    *,
    every: bool = False,
) -> list[tuple[str, float]]:
    """Notes matching any of these words (with ``every``, all of them: the database
    finds only those), best first: (path, BM25), larger is better.

    The words are folded like the index (kodb/text.py) and passed as one parameter, so no
    question can be read as FTS or tsquery syntax. The database finds the candidates by its
    own measure (``Dialect.search_notes``, ``RESCORE_POOL`` of them at least) and
    ``bm25.rank`` orders them, the same on either database, a question word with several
    spellings in the index (one per language) scored as one term."""
    groups = text.query_groups(terms, index_languages(conn))
    wanted = list(dict.fromkeys(w for g in groups for w in g))
    if not wanted or limit <= 0:
        return []
    pool = max(limit, RESCORE_POOL)
    found = dialect.search_notes(
        conn, wanted, pool, float(title_weight), pg_normalization, groups if every else ()
    )
    if not found:
        return []
    stats = _index_stats(conn, dialect, wanted)
    candidates = _candidates(conn, [p for p, _ in found])
    return bm25.rank(candidates, groups, stats, title_weight, limit, every=every)


def _index_stats(conn: Connection, dialect: Dialect, wanted: Sequence[str]) -> bm25.IndexStats:
    t = schema.note_texts
    count, total = conn.execute(sa.select(sa.func.count(), sa.func.sum(t.c.words))).one()
    notes = int(count or 0)
    return bm25.IndexStats(
        notes=notes,
        mean_words=float(total or 0) / notes if notes else 0.0,
        holding=dialect.notes_holding(conn, wanted),
    )


def _candidates(conn: Connection, paths: Sequence[str]) -> list[bm25.Candidate]:
    t = schema.note_texts
    out: list[bm25.Candidate] = []
    for chunk in chunks(paths):
        stmt = sa.select(t.c.path, t.c.title, t.c.body, t.c.words).where(t.c.path.in_(chunk))
        out += [
            bm25.Candidate(p, title, body, int(n or 0)) for p, title, body, n in conn.execute(stmt)
        ]
    return out


def index_languages(conn: Connection) -> tuple[str | None, ...]:
    """The stemmers the indexed notes' words went through (None: whole words, indexed
    before migration 13), read from the index on ``language``."""
    t = schema.note_texts
    found = conn.execute(sa.select(t.c.language).distinct()).scalars().all()
    return tuple(sorted({None if x in (None, text.NO_STEMMING) else x for x in found}, key=str))


def note_languages(conn: Connection, paths: Iterable[str]) -> dict[str, str | None]:
    """The stemmer each of these notes' words went through (None: whole words); paths not
    in the full-text index are left out."""
    t = schema.note_texts
    found: dict[str, str | None] = {}
    for chunk in chunks(sorted(set(paths))):
        for path, language in conn.execute(
            sa.select(t.c.path, t.c.language).where(t.c.path.in_(chunk))
        ):
            found[path] = None if language in (None, text.NO_STEMMING) else language
    return found


def note_texts(conn: Connection) -> dict[str, tuple[str, str]]:
    """Every indexed note: path -> (title words, body words), folded and space-separated
    as the index holds them (the eval's BM25 baseline ranks the same words)."""
    t = schema.note_texts
    rows = conn.execute(sa.select(t.c.path, t.c.title, t.c.body)).all()
    return {path: (title, body) for path, title, body in rows}


def word_shares(
    conn: Connection, dialect: Dialect, terms: Sequence[str], excluding: Sequence[str] = ()
) -> dict[str, float]:
    """term -> the share of the indexed notes, but those at ``excluding`` paths, holding it
    (its most held spelling, as the question is stemmed under each of the index's
    languages; a term of several words, its least held word); 0.0 when none holds it."""
    t = schema.note_texts
    hidden: list[set[str]] = []
    for chunk in chunks(sorted(set(excluding))):
        stmt = sa.select(t.c.title, t.c.body).where(t.c.path.in_(chunk))
        hidden += [set(f"{title} {body}".split()) for title, body in conn.execute(stmt)]
    count = note_text_count(conn) - len(hidden)
    languages = index_languages(conn)
    out: dict[str, float] = {}
    for term in dict.fromkeys(terms):
        # A compound ("node_modules") is as rare as its rarest word; a word as common as
        # its most held spelling.
        held = []
        for group in text.query_groups([term], languages):
            holding = dialect.notes_holding(conn, list(group))
            held.append(
                max((n - sum(w in h for h in hidden) for w, n in holding.items()), default=0)
            )
        out[term] = min(held) / count if held and count > 0 else 0.0
    return out


def note_text_count(conn: Connection) -> int:
    """Notes in the full-text index."""
    stmt = sa.select(sa.func.count()).select_from(schema.note_texts)
    return int(conn.execute(stmt).scalar_one())


def replace_openings(
    conn: Connection,
    dialect: Dialect,
    openings: Mapping[str, Iterable[int]],
    removed: Sequence[str],
) -> None:
    """Replace the opening keys of these notes (``schema.note_openings``); a removed note's
    go with it."""
    t = schema.note_openings
    gone = list(dict.fromkeys([*openings, *removed]))
    for chunk in chunks(gone):
        conn.execute(t.delete().where(dialect.one_of(t.c.path, chunk)))
    rows = [{"path": p, "opening": k} for p, keys in openings.items() for k in sorted(set(keys))]
    dialect.insert_rows(conn, t, rows, None)


def openings_of(conn: Connection, dialect: Dialect, paths: Iterable[str]) -> dict[str, set[int]]:
    """The stored opening keys of these notes (a note without any is left out)."""
    t = schema.note_openings
    found: dict[str, set[int]] = {}
    for chunk in chunks(sorted(set(paths))):
        for path, key in conn.execute(
            sa.select(t.c.path, t.c.opening).where(dialect.one_of(t.c.path, chunk))
        ):
            found.setdefault(path, set()).add(key)
    return found


#: Keys looked up one IN list at a time up to this many, or up to a quarter of the table's
#: rows; more (a full ingest) are counted in one pass over the table, which then costs less
#: than many lists on either database.
OPENING_LOOKUPS = 5_000


def opening_counts(conn: Connection, dialect: Dialect, keys: Iterable[int]) -> dict[int, int]:
    """How many notes open with each of these keys (a key no note holds is left out)."""
    t = schema.note_openings
    wanted = set(keys)
    counts: dict[int, int] = {}
    if len(wanted) > OPENING_LOOKUPS and len(wanted) * 4 > (
        conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one()
    ):
        stmt = sa.select(t.c.opening, sa.func.count()).group_by(t.c.opening)
        rows = conn.execute(stmt.execution_options(yield_per=CHUNK))
        return {key: n for key, n in rows if key in wanted}
    for chunk in chunks(sorted(wanted)):
        stmt = (
            sa.select(t.c.opening, sa.func.count())
            .where(dialect.one_of(t.c.opening, chunk))
            .group_by(t.c.opening)
        )
        counts.update((key, n) for key, n in conn.execute(stmt))
    return counts


def notes_opening_with(conn: Connection, dialect: Dialect, keys: Iterable[int]) -> set[str]:
    """The notes holding any of these opening keys."""
    t = schema.note_openings
    paths: set[str] = set()
    for chunk in chunks(sorted(set(keys))):
        paths.update(
            conn.execute(
                sa.select(t.c.path).where(dialect.one_of(t.c.opening, chunk)).distinct()
            ).scalars()
        )
    return paths
