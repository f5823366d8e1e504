"""KoDB: the facts database behind one small API (SQLite file by default, PostgreSQL by URL).

This module is the one place that turns SQLAlchemy's exceptions into ``KodbError``
(``KoDB._translate`` in transactions, ``_refused`` around engines). Every method runs in one
transaction; writes on SQLite take the write lock up front (``BEGIN IMMEDIATE``) so two
writers queue instead of failing mid-transaction.

Subject search (``search_subjects``): a pre-filter in SQL over the distinct subjects, then
the word-boundary check of ``match.py`` in Python on the candidates, so the result is
exactly ``match.reference_search`` over the same data.
- A term with a word character: the word index over ``subjects.words`` (the name's runs of
  ``\\w``, computed in Python): SQLite's FTS5 ``subject_words`` by phrase, PostgreSQL's GIN
  index on the runs as an array by containment. One statement for all such terms.
- Other terms, SQLite: an FTS5 trigram phrase query from 3 characters, else an escaped
  ``LIKE '%t%'`` that scans the distinct-subjects table (not the facts table).
- Other terms, PostgreSQL: an escaped ``LIKE '%t%'`` that the ``pg_trgm`` GIN index serves;
  the planner falls back to a scan by itself when a term yields no trigrams.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import sqlite3
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import Connection, Engine

from pipeline.config import mask_url
from pipeline.errors import KodbError
from pipeline.kodb import schema, summaries, text
from pipeline.kodb.match import (
    LIKE_ESCAPE,
    contains_pattern,
    normalize_term,
    word_boundary_match,
    word_runs,
)
from pipeline.kodb.schema import from_row
from pipeline.model import Calibration, Fact, Note, NoteText, SubjectSummary

if TYPE_CHECKING:
    from pipeline.kodb.resident import ResidentFacts

#: Values per IN list / rows per executemany batch: far below SQLite's 32766 bound
#: parameters and small enough for PostgreSQL's planner to treat as a short list.
CHUNK = 500
#: Rows per SQLite executemany (the driver binds each row; this bounds the tuples built).
SQLITE_ROWS_PER_EXECUTEMANY = 5000
#: SQLite's largest rowid: past it new rows take unused rowids at random.
SQLITE_MAX_ROWID = 2**63 - 1
#: Rows per PostgreSQL json_to_recordset() insert (one JSON parameter).
PG_ROWS_PER_STATEMENT = 5000
#: Facts an import reads and inserts at a time (its memory is a few batches, not the file).
IMPORT_BATCH = 20_000
#: ``_ahead``'s end-of-items marker.
_END = object()
#: SQLite page cache (KiB) of ingest's write transaction, and of any other (SQLite's default).
#: Inserting 594k facts into their indexes at 20,000 notes: ingest 67.0 / 71.9 s with 2 MB,
#: 59.3 / 56.5 s with 64 MB (alternated pairs). A 1M-row facts import gained nothing from it
#: (111.0 against 109.3 s) and peaked at 218 MB instead of 97, so it keeps the default.
SQLITE_INGEST_CACHE_KIB = 65_536
SQLITE_CACHE_KIB = 2_000
#: Terms per UNION ALL statement in search_subjects_many (one round trip each).
TERMS_PER_STATEMENT = 100
#: Terms per word-index statement (one JSON parameter, so no bound-parameter limit).
WORD_TERMS_PER_STATEMENT = 1000
#: How much more a word in a note's title (or alias) counts than one in its body, in
#: SQLite's bm25() column weights (chosen on the eval collections, see README "Degraded
#: mode"); PostgreSQL's ts_rank_cd weighs the title class A over the body class B the same.
TITLE_WEIGHT = 3.0
#: Rows past the limit a full-text search reads to put equal scores in path order.
FTS_TIE_MARGIN = 10
#: ts_rank_cd's normalisation flag (0: none; 1: divide by 1 + log(length); 32: r/(r+1)).
PG_RANK_NORMALIZATION = 0
#: Most files ``subject_summaries`` may leave out (NOT IN lists of ``CHUNK`` values; SQLite
#: takes 32766 parameters a statement since 3.32); privacy.py falls back to all facts above.
MAX_EXCLUDED_FILES = 10_000
#: PostgreSQL advisory lock key serialising schema migrations ("vkokodb" in ASCII).
_PG_MIGRATE_LOCK = 0x766B6F6B6F6462
_SUPPORTED = ("sqlite", "postgresql")
#: Allowed prefixes of scratch database names (the name is an identifier, not a parameter).
_SCRATCH_PREFIX = re.compile(r"[a-z_][a-z0-9_]{0,40}")


@dataclass(frozen=True)
class ImportResult:
    """Outcome of ``import_facts``: new rows and rows whose fact_key was already present."""

    inserted: int
    existing: int


def subject_key(subject_norm: str) -> str:
    """SHA-256 of a subject_norm: the fixed-size key indexed instead of unbounded text."""
    return hashlib.sha256(subject_norm.encode("utf-8", "surrogatepass")).hexdigest()


def _chunks(items: Sequence[Any], size: int = CHUNK) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _batches(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    """Lists of up to ``size`` items from any iterable, read lazily."""
    it = iter(items)
    while batch := list(itertools.islice(it, size)):
        yield batch


def _pg_json(rows: Sequence[dict[str, Any]]) -> str:
    """Rows as the JSON text json_to_recordset() reads (allow_nan=False: JSON has no NaN;
    validation at the edges keeps it out)."""
    return json.dumps(list(rows), ensure_ascii=False, allow_nan=False)


def _ahead(fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[Any]:
    """``fn`` of each item in order, the next one computed in a thread while the caller
    uses this one: the JSON of the next chunk is written while the server inserts this
    one (psycopg waits for the server without the GIL). An exception in ``fn`` is raised
    here, at its item; leaving early waits for the one result in flight."""
    it = iter(items)
    first, second = next(it, _END), next(it, _END)
    if second is _END:  # one item or none: no thread to start
        if first is not _END:
            yield fn(first)
        return
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="kodb-ahead") as pool:
        pending = pool.submit(fn, first)
        for item in itertools.chain([second], it):
            done, pending = pending, pool.submit(fn, item)
            yield done.result()
        yield pending.result()


def _parse_url(url: str) -> sa.URL:
    """Parse a URL (KodbError when it is none); a bare ``postgresql://`` (or ``postgres://``)
    uses psycopg 3."""
    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError as exc:
        raise KodbError(f"KO-DB URL {mask_url(url)!r} is not a valid SQLAlchemy URL") from exc
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def _short(exc: BaseException) -> str:
    """The first line of the driver's message (SQLAlchemy adds SQL and links after it)."""
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip()
    # A driver may quote the URL it was given, password included.
    return mask_url(text.splitlines()[0]) if text else type(exc).__name__


def _fts_phrase(term_norm: str) -> str:
    """An FTS5 query matching the term as one literal phrase (quotes doubled inside)."""
    return '"' + term_norm.replace('"', '""') + '"'


#: Words of a long term the trigram pre-filter asks for (the longest ones).
PREFILTER_WORDS = 2


def _fts_prefilter(term_norm: str) -> str:
    """The trigram query for a subject search: the term's longest words, each a phrase, all
    required. A subject holding the term holds each of its words, so this finds a superset
    that the word-boundary check then narrows; a long title as one phrase reads the position
    lists of every one of its trigrams (measured 2x slower on 20,000-note titles)."""
    words = sorted(
        {w for w in term_norm.split() if len(w) >= schema.TRIGRAM}, key=lambda w: (-len(w), w)
    )
    if len(words) < 2:
        return _fts_phrase(term_norm)
    return " AND ".join(_fts_phrase(w) for w in words[:PREFILTER_WORDS])


class KoDB:
    """The KO-DB store. Open with ``KoDB.open(url)``; usable as a context manager."""

    def __init__(self, engine: Engine, url: str) -> None:
        self._engine = engine
        self._url = url
        self._dialect = engine.dialect.name

    # --- lifecycle ----------------------------------------------------------------------

    @classmethod
    def open(cls, url: str) -> KoDB:
        """Connect to ``url``, creating or migrating the schema (and a SQLite file's folder)."""
        shown = mask_url(url)
        parsed = _parse_url(url)
        backend = parsed.get_backend_name()
        if backend not in _SUPPORTED:
            raise KodbError(f"KO-DB URL {shown!r}: only sqlite and postgresql are supported")
        if backend == "sqlite":
            engine = _sqlite_engine(parsed, shown)
        else:
            with _refused(f"KO-DB at {shown}"):
                engine = sa.create_engine(
                    parsed, pool_pre_ping=True, connect_args={"connect_timeout": 5}
                )
        db = cls(engine, shown)
        try:
            db._migrate()
        except BaseException:
            engine.dispose()
            raise
        return db

    def close(self) -> None:
        """Release the connection pool."""
        self._engine.dispose()

    def __enter__(self) -> KoDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def dialect(self) -> str:
        """``"sqlite"`` or ``"postgresql"``."""
        return self._dialect

    @property
    def url(self) -> str:
        """The database URL with any password masked (for messages and reports)."""
        return self._url

    # --- transactions and error translation ---------------------------------------------

    @contextmanager
    def _translate(self) -> Iterator[None]:
        """The one boundary where SQLAlchemy (and driver) errors become KodbError."""
        try:
            yield
        except schema.SchemaTooNew as exc:
            raise KodbError(f"KO-DB at {self._url}: {exc}; upgrade vault-ko") from exc
        except sa.exc.SQLAlchemyError as exc:
            raise KodbError(f"KO-DB ({self._dialect}) at {self._url}: {_short(exc)}") from exc

    @contextmanager
    def _tx(self, write: bool = False, *, ingest: bool = False) -> Iterator[Connection]:
        """One transaction; committed on success, rolled back on any exception (``ingest``:
        a write with SQLite's larger page cache)."""
        with self._translate(), self._engine.connect() as conn:
            if write:
                conn.execution_options(kodb_write=True, kodb_ingest=ingest)
            with conn.begin():
                yield conn

    def _migrate(self) -> None:
        with self._tx(write=True) as conn:
            if self._dialect == "postgresql":
                conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_PG_MIGRATE_LOCK)))
            schema.migrate(conn, self._dialect)

    def schema_versions(self) -> list[int]:
        """Applied migration versions, ascending."""
        with self._tx() as conn:
            return sorted(schema.applied_versions(conn))

    def _insert(self, table: sa.Table) -> Any:
        module = sqlite_dialect if self._dialect == "sqlite" else pg_dialect
        return module.insert(table)

    def _one_of(self, column: sa.ColumnElement[Any], values: Sequence[Any]) -> Any:
        """``schema.one_of`` in this database's dialect."""
        return schema.one_of(column, values, self._dialect)

    # --- vault registry -----------------------------------------------------------------

    def notes(self) -> dict[str, Note]:
        """The vault registry: path -> Note."""
        t = schema.notes
        with self._tx() as conn:
            rows = conn.execute(sa.select(t)).all()
        return {r.path: from_row(Note, r) for r in rows}

    def count_notes(self, source_type: str | None = None) -> int:
        """Registered notes (of one source type when given)."""
        t = schema.notes
        stmt = sa.select(sa.func.count()).select_from(t)
        if source_type is not None:
            stmt = stmt.where(t.c.source_type == source_type)
        with self._tx() as conn:
            return int(conn.execute(stmt).scalar_one())

    def notes_at(self, paths: Iterable[str]) -> dict[str, Note]:
        """Registry rows of these note paths (paths without a row are left out)."""
        t = schema.notes
        wanted = sorted(set(paths))
        found: dict[str, Note] = {}
        with self._tx() as conn:
            for chunk in _chunks(wanted):
                for row in conn.execute(sa.select(t).where(t.c.path.in_(chunk))):
                    found[row.path] = from_row(Note, row)
        return found

    def apply_ingest(
        self,
        upserts: Sequence[tuple[Note, Sequence[Fact]]],
        removed: Sequence[str],
        extractor: str = "ingest",
        texts: Sequence[NoteText] = (),
    ) -> None:
        """Record one ingest run in ONE transaction.

        Upserts the notes rows; for each upserted note replaces that file's facts of this
        ``extractor`` with the given ones (stored with this extractor; duplicates by
        fact_key are ignored); for each removed path deletes its notes row and this
        extractor's facts of that file. Facts of other extractors are never touched.
        ``texts`` replace those notes' full text; a removed note's text goes with it.
        The changed subjects' stored summaries are dropped and stored anew in that
        transaction too.
        """
        now = time.time()
        note_rows = [asdict(note) | {"ingested_at": now} for note, _ in upserts]
        paths = list(dict.fromkeys([n.path for n, _ in upserts] + list(removed)))
        new_facts = [f for _, fs in upserts for f in fs]
        with self._tx(write=True, ingest=True) as conn:
            summaries.lock(conn, self._dialect)
            if note_rows:
                stmt = self._insert(schema.notes)
                stmt = stmt.on_conflict_do_update(
                    index_elements=[schema.notes.c.path],
                    set_={name: stmt.excluded[name] for name in note_rows[0] if name != "path"},
                )
                for chunk in _chunks(note_rows):
                    conn.execute(stmt, list(chunk))
            touched = self._delete_file_facts(conn, paths, extractor)
            removed_list = list(dict.fromkeys(removed))
            for chunk in _chunks(removed_list):
                conn.execute(schema.notes.delete().where(self._one_of(schema.notes.c.path, chunk)))
            self._insert_facts(conn, new_facts, now, extractor=extractor, summarise=True)
            self._prune_subjects(conn, touched)
            self._replace_texts(conn, texts, removed_list)
            self._refresh_stats(conn)
            self._flush_gin(conn)

    def _replace_texts(
        self, conn: Connection, texts: Sequence[NoteText], removed: Sequence[str]
    ) -> None:
        """Delete the full text of changed and removed notes, insert the new text (the
        SQLite triggers and PostgreSQL's generated column keep the indexes in step)."""
        t = schema.note_texts
        gone = list(dict.fromkeys([x.path for x in texts] + list(removed)))
        for chunk in _chunks(gone):
            conn.execute(t.delete().where(self._one_of(t.c.path, chunk)))
        rows = [
            {"path": x.path, "title": text.index_text(x.title), "body": text.index_text(x.body)}
            for x in {x.path: x for x in texts}.values()
        ]
        self._insert_rows(conn, t, rows, None)

    def search_notes(
        self,
        terms: Sequence[str],
        limit: int,
        *,
        title_weight: float = TITLE_WEIGHT,
        pg_normalization: int = PG_RANK_NORMALIZATION,
    ) -> list[tuple[str, float]]:
        """Notes matching any of these words, best first: (path, score), larger is better.

        SQLite ranks with FTS5's ``bm25()`` (negative-is-better, so negated here), a title
        word counting ``title_weight`` times a body word; PostgreSQL with ``ts_rank_cd`` on
        the weighted tsvector (not BM25: a cover-density rank; ``pg_normalization`` is its
        length normalisation flag). The defaults are the measured choices
        (bench/retrieval_rules.py). Ties go to the path. The words are folded like the index
        (kodb/text.py) and passed as one parameter, so no question can be read as FTS or
        tsquery syntax.
        """
        wanted = text.query_words(terms)
        if not wanted or limit <= 0:
            return []
        t = schema.note_texts
        with self._tx() as conn:
            if self._dialect == "sqlite":
                return self._search_notes_fts5(conn, wanted, limit, float(title_weight))
            else:
                tsv = sa.literal_column(f"note_texts.{schema.NOTE_TSV}")
                query = sa.func.to_tsquery(
                    sa.literal_column("'simple'::regconfig"), " | ".join(wanted)
                )
                # Weights per class {D, C, B, A}: the body is B, the title A.
                weights = sa.bindparam(
                    "weights",
                    [0.0, 0.0, 1.0 / float(title_weight), 1.0],
                    type_=pg_dialect.ARRAY(sa.Float),
                )
                rank = sa.func.ts_rank_cd(
                    sa.cast(weights, pg_dialect.ARRAY(sa.REAL)), tsv, query, int(pg_normalization)
                )
                stmt = (
                    sa.select(t.c.path, rank.label("score"))
                    .where(tsv.op("@@")(query))
                    .order_by(rank.desc(), t.c.path.asc())
                    .limit(limit)
                )
            return [(path, float(score)) for path, score in conn.execute(stmt)]

    def _search_notes_fts5(
        self, conn: Connection, words: Sequence[str], limit: int, title_weight: float
    ) -> list[tuple[str, float]]:
        """SQLite's half of ``search_notes``. FTS5 sorts by its own ``rank`` column (bm25
        with these weights) without a join, 1.5x faster at 20,000 notes than ordering the
        join by ``bm25()``; a margin of ``FTS_TIE_MARGIN`` more rows then gives ties their
        path order, and when the ties reach past it the join decides (exact either way)."""
        f, t = schema.note_texts_fts, schema.note_texts
        match = " OR ".join(f'"{w}"' for w in words)
        weights = f"bm25({title_weight!r}, 1.0)"
        stmt = (
            sa.select(f.c.rowid, f.c.rank)
            .where(f.c.note_texts_fts.match(match), f.c.rank.match(weights))
            .order_by(f.c.rank)
            .limit(limit + FTS_TIE_MARGIN)
        )
        ranked = [(int(rowid), float(rank)) for rowid, rank in conn.execute(stmt)]
        if len(ranked) > limit and ranked[limit - 1][1] == ranked[-1][1]:
            bm25 = sa.func.bm25(f.c.note_texts_fts, title_weight, 1.0)
            stmt = (
                sa.select(t.c.path, (-bm25).label("score"))
                .select_from(f.join(t, t.c.id == f.c.rowid))
                .where(f.c.note_texts_fts.match(match))
                .order_by(bm25.asc(), t.c.path.asc())
                .limit(limit)
            )
            return [(path, float(score)) for path, score in conn.execute(stmt)]
        paths = dict(
            conn.execute(
                sa.select(t.c.id, t.c.path).where(t.c.id.in_([r for r, _ in ranked]))
            ).all()
        )
        found = sorted((rank, paths[rowid]) for rowid, rank in ranked if rowid in paths)
        return [(path, -rank) for rank, path in found[:limit]]

    def note_texts(self) -> dict[str, tuple[str, str]]:
        """Every indexed note: path -> (title words, body words), folded and space-separated
        as the index holds them (the eval's BM25 baseline ranks the same words)."""
        t = schema.note_texts
        with self._tx() as conn:
            rows = conn.execute(sa.select(t.c.path, t.c.title, t.c.body)).all()
        return {path: (title, body) for path, title, body in rows}

    def note_text_count(self) -> int:
        """Notes in the full-text index."""
        with self._tx() as conn:
            stmt = sa.select(sa.func.count()).select_from(schema.note_texts)
            return int(conn.execute(stmt).scalar_one())

    # --- facts --------------------------------------------------------------------------

    def import_facts(
        self, facts: Iterable[Fact], *, batch_size: int = IMPORT_BATCH
    ) -> ImportResult:
        """Insert facts (keeping each one's extractor) in one transaction; idempotent.

        ``facts`` may be a stream: it is consumed in batches of ``batch_size``, so memory
        stays flat whatever its length, and any exception raised while it is read (a bad
        row) rolls the whole import back. ``existing`` counts the given facts whose fact_key
        was already stored, or repeated earlier in ``facts``. The key covers the extractor,
        so a fact that another extractor (ingest) states as well is stored as a row of its
        own and outlives that one.
        """
        inserted = seen = 0
        now = time.time()
        with self._tx(write=True) as conn:
            summaries.lock(conn, self._dialect)
            for batch in _batches(facts, batch_size):
                seen += len(batch)
                inserted += self._insert_facts(conn, batch, now)
            self._refresh_stats(conn)
            self._flush_gin(conn)
        return ImportResult(inserted=inserted, existing=seen - inserted)

    def _insert_facts(
        self,
        conn: Connection,
        facts: Sequence[Fact],
        now: float,
        extractor: str | None = None,
        *,
        summarise: bool = False,
    ) -> int:
        """Insert facts not yet stored (by fact_key) and their subjects; return the count.

        ``extractor`` stores every fact under that extractor (ingest's own); the key is taken
        after it, since the extractor is part of a fact's identity. ``summarise``: store
        the summaries of the subjects whose facts are all among those inserted, from the
        rows in hand (``summaries.store_whole``); the caller writes no more facts of them
        in this transaction.
        """
        if extractor is not None:
            facts = [
                f if f.extractor == extractor else replace(f, extractor=extractor) for f in facts
            ]
        by_key: dict[str, Fact] = {}
        for fact in facts:
            by_key.setdefault(fact.key, fact)
        keys = list(by_key)
        present: set[str] = set()
        t = schema.facts
        for chunk in _chunks(keys):
            present.update(
                conn.execute(
                    sa.select(t.c.fact_key).where(self._one_of(t.c.fact_key, chunk))
                ).scalars()
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
        if not rows:
            return 0
        # ON CONFLICT DO NOTHING: a concurrent writer may have stored the same fact after our
        # look-up (PostgreSQL's READ COMMITTED does not show it to us); _insert_rows tells
        # which rows this transaction really inserted (RETURNING, or SQLite's new rowids),
        # so the counts stay exact.
        older = (
            summaries.with_facts(conn, {r["subject_key"] for r in rows}, CHUNK)
            if summarise
            else set()
        )
        ids = dict(self._insert_rows(conn, t, rows, t.c.fact_key, returning=(t.c.fact_key, t.c.id)))
        subjects = {r["subject_key"]: r["subject_norm"] for r in rows if r["fact_key"] in ids}
        self._add_subjects(conn, subjects)
        summaries.invalidate(conn, subjects, CHUNK)
        if summarise:
            summaries.store_whole(conn, rows, ids, older, CHUNK)
        return len(ids)

    def _add_subjects(self, conn: Connection, subjects: dict[str, str]) -> None:
        s = schema.subjects
        rows = [
            {"subject_key": k, "subject_norm": v, "words": word_runs(v)}
            for k, v in sorted(subjects.items())
        ]
        self._insert_rows(conn, s, rows, s.c.subject_key)

    def _insert_rows(
        self,
        conn: Connection,
        table: sa.Table,
        rows: Sequence[dict[str, Any]],
        key: sa.Column[Any] | None,
        *,
        returning: Sequence[sa.Column[Any]] = (),
    ) -> list[Any]:
        """INSERT … ON CONFLICT (key) DO NOTHING for many rows (a plain INSERT without
        ``key``); the ``returning`` columns of the rows really inserted, as tuples.

        PostgreSQL gets one ``INSERT … SELECT FROM json_to_recordset(:rows)`` per chunk: the
        rows travel as one JSON text, which Python's C encoder writes and the server parses
        far faster than psycopg dumps one array per column (measured: array dumping was a
        third of a 20,000-note ingest's write time) or binds a multi-row VALUES list.
        SQLite uses the driver's executemany.
        """
        if not rows:
            return []
        names = list(rows[0])
        found: list[Any] = []
        if self._dialect == "postgresql":
            data_param = sa.cast(sa.bindparam("rows", type_=sa.Text), pg_dialect.JSON)
            source = (
                sa.func.json_to_recordset(data_param)
                .table_valued(*(sa.column(n, table.c[n].type) for n in names))
                .render_derived(name="src", with_types=True)
            )
            stmt = pg_dialect.insert(table).from_select(
                names, sa.select(*(source.c[n] for n in names))
            )
            if key is not None:
                stmt = stmt.on_conflict_do_nothing(index_elements=[key])
            if returning:
                stmt = stmt.returning(*returning)
            for data in _ahead(_pg_json, _chunks(rows, PG_ROWS_PER_STATEMENT)):
                result = conn.execute(stmt, {"rows": data})
                if returning:
                    found.extend(tuple(r) for r in result)
            return found
        stmt = sqlite_dialect.insert(table)
        if key is not None:
            stmt = stmt.on_conflict_do_nothing(index_elements=[key])
        rowid = sa.literal_column("rowid")
        # This transaction holds SQLite's write lock, so the rows past the largest rowid are
        # the ones it inserts; at the largest rowid SQLite takes unused ones at random.
        last = 0
        if returning:
            last = conn.execute(sa.select(sa.func.max(rowid)).select_from(table)).scalar() or 0
            if last >= SQLITE_MAX_ROWID:
                for chunk in _chunks(rows):
                    result = conn.execute(stmt.returning(*returning), list(chunk))
                    found.extend(tuple(r) for r in result)
                return found
        # The statement compiled once by Core, the rows bound by the driver as tuples (with
        # the columns' own conversions, Float's to_float): SQLAlchemy's executemany handles
        # each row's parameters in Python (300,000 facts: 8.6–9.2 s against 5.1–5.5 s so).
        compiled = stmt.compile(dialect=conn.dialect, column_keys=names)
        order = compiled.positiontup or []
        convert = [
            (i, f)
            for i, n in enumerate(order)
            if (f := table.c[n].type.bind_processor(conn.dialect)) is not None
        ]

        def bound(row: dict[str, Any]) -> tuple[Any, ...]:
            values = [row[n] for n in order]
            for i, f in convert:
                values[i] = f(values[i])
            return tuple(values)

        inserted = 0
        for chunk in _chunks(rows, SQLITE_ROWS_PER_EXECUTEMANY):
            result = conn.exec_driver_sql(compiled.string, [bound(r) for r in chunk])
            inserted += result.rowcount
        if returning:
            found = [tuple(r) for r in conn.execute(sa.select(*returning).where(rowid > last))]
            if len(found) != inserted:  # the write lock failed us: say so, write nothing
                raise KodbError(
                    f"{table.name}: {inserted} rows inserted but {len(found)} found past "
                    f"rowid {last}; nothing was written"
                )
        return found

    def _delete_file_facts(
        self, conn: Connection, paths: Sequence[str], extractor: str
    ) -> set[str]:
        """Delete one extractor's facts of these files; return the subject keys they had."""
        t = schema.facts
        touched: set[str] = set()
        for chunk in _chunks(list(paths)):
            where = sa.and_(t.c.extractor == extractor, self._one_of(t.c.source_file, chunk))
            touched.update(conn.execute(sa.select(t.c.subject_key).where(where)).scalars())
            conn.execute(t.delete().where(where))
        summaries.invalidate(conn, touched, CHUNK)
        return touched

    def _prune_subjects(self, conn: Connection, keys: Iterable[str]) -> None:
        """Drop distinct-subject rows (and their trigram entries) no fact refers to anymore."""
        s, t = schema.subjects, schema.facts
        orphan = ~sa.exists().where(t.c.subject_key == s.c.subject_key)
        for chunk in _chunks(sorted(keys)):
            conn.execute(s.delete().where(self._one_of(s.c.subject_key, chunk), orphan))

    def facts_for_subjects(self, subject_norms: Iterable[str]) -> list[Fact]:
        """All facts whose subject_norm is in the set (chunked IN lists on the subject key).

        Sorted by subject_norm, then predicate, object, source_file, extractor.
        """
        wanted = set(subject_norms)
        keys = sorted({subject_key(n) for n in wanted})
        t = schema.facts
        cols = (
            t.c.subject,
            t.c.subject_norm,
            t.c.predicate,
            t.c.object,
            t.c.confidence,
            t.c.source_type,
            t.c.source_file,
            t.c.extractor,
        )
        rows: list[Any] = []
        with self._tx() as conn:
            for chunk in _chunks(keys):
                rows.extend(conn.execute(sa.select(*cols).where(t.c.subject_key.in_(chunk))))
        # The hash selects; the stored norm decides (guards against a key collision).
        rows = [r for r in rows if r.subject_norm in wanted]
        rows.sort(key=lambda r: (r.subject_norm, r.predicate, r.object, r.source_file, r.extractor))
        return [from_row(Fact, r) for r in rows]

    def subject_source_files(self, subject_norms: Iterable[str]) -> set[str]:
        """The distinct source files of these subjects' facts (privacy.py checks them)."""
        wanted = set(subject_norms)
        t = schema.facts
        found: set[str] = set()
        with self._tx() as conn:
            for chunk in _chunks(sorted({subject_key(n) for n in wanted})):
                stmt = (
                    sa.select(t.c.subject_norm, t.c.source_file)
                    .where(t.c.subject_key.in_(chunk))
                    .distinct()
                )
                found.update(f for norm, f in conn.execute(stmt) if norm in wanted)
        return found

    def subject_summaries(
        self,
        subject_norms: Iterable[str],
        *,
        sample_size: int,
        evidence_files: Iterable[str] = (),
        only_files: Iterable[str] | None = None,
        exclude_files: Iterable[str] = (),
        cache: summaries.ReadCache | None = None,
    ) -> dict[str, SubjectSummary]:
        """subject_norm -> SubjectSummary for these subjects: the counts over their facts and
        a sample of them holding every fact ``rank.representative_facts`` picks with
        n = ``sample_size`` and these evidence files (summaries.py says why), so
        ``rank.rank_summaries`` equals ``rank.rank_subjects`` on all facts.

        Read from ``subject_stats`` where a subject's stored summary is current and can serve
        the sample, else computed from its facts: counts by GROUP BY and at most
        ``sample_size`` facts per partition of (subject, predicate, source type, the file if
        it is one of ``evidence_files``, the object if the predicate is ``title``).
        ``only_files`` keeps only the facts of these files, ``exclude_files`` leaves these
        files' facts out (at most ``MAX_EXCLUDED_FILES``; both computed from the facts);
        subjects without facts left are not in the result. ``cache`` (summaries.ReadCache)
        keeps the stored rows and sample facts read, for a caller that drops it on writes.
        """
        wanted = set(subject_norms)
        excluded = sorted(set(exclude_files))
        if len(excluded) > MAX_EXCLUDED_FILES:
            raise ValueError(f"at most {MAX_EXCLUDED_FILES} excluded files, not {len(excluded)}")
        only = None if only_files is None else sorted(set(only_files))
        evidence = sorted(set(evidence_files))
        keys = sorted({subject_key(n) for n in wanted})
        t = schema.facts
        agg: dict[str, dict[str, Any]] = {}
        sample: dict[str, list[Fact]] = defaultdict(list)
        with self._tx() as conn:
            stored: dict[str, SubjectSummary] = {}
            if only is None and not excluded:
                stored = summaries.read(
                    conn, keys, wanted, sample_size, evidence, CHUNK, self._code_point, cache
                )
            rest = [subject_key(n) for n in sorted(wanted - stored.keys())]
            for chunk in _chunks(rest):
                where = [t.c.subject_key.in_(chunk)]
                if only is not None:
                    where.append(t.c.source_file.in_(only))
                where.extend(t.c.source_file.not_in(part) for part in _chunks(excluded))
                summaries.counts(conn, where, wanted, agg)
                if sample_size > 0:
                    for fact in summaries.sample(
                        conn, where, sample_size, evidence, self._code_point
                    ):
                        if fact.subject_norm in wanted:
                            sample[fact.subject_norm].append(fact)
        found = summaries.summaries_from_agg(agg, sample)
        found.update(stored)
        return dict(sorted(found.items()))

    def resident_copy(self, is_private: Callable[[str], bool] | None = None) -> ResidentFacts:
        """Every fact as in-memory columns for answers (``resident.py``), read in one
        statement; the facts of files ``is_private`` names are left out."""
        from pipeline.kodb import resident

        with self._tx() as conn:
            return resident.build(conn, is_private)

    def refresh_subject_stats(self) -> int:
        """Store the summary of every subject that has none (a KO-DB just upgraded; ingest
        and import store theirs in their own transaction); return how many were stored."""
        with self._tx() as conn:  # a read first: nothing missing takes no write lock
            if not summaries.missing_keys(conn):
                return 0
        with self._tx(write=True) as conn:
            summaries.lock(conn, self._dialect)
            return self._refresh_stats(conn)

    def _refresh_stats(self, conn: Connection) -> int:
        """In the caller's write transaction (holding ``summaries.lock``): store the missing
        subject summaries, so the facts and their summaries commit together (a run cut short
        leaves neither)."""
        stored = 0
        missing = summaries.missing_keys(conn)
        if self._dialect == "postgresql" and len(missing) > summaries.REFRESH_CHUNK:
            # A bulk write in this same transaction: autovacuum cannot have seen its rows,
            # and with the old statistics the planner scans all facts for every chunk
            # (measured: 14 s of a 20,000-note ingest). ANALYZE sees our own rows.
            conn.exec_driver_sql("ANALYZE facts")
        for chunk in _chunks(missing, summaries.REFRESH_CHUNK):
            stored += summaries.store(conn, chunk, self._code_point)
        return stored

    def _flush_gin(self, conn: Connection) -> None:
        """PostgreSQL: move the GIN indexes' pending entries into the indexes proper, in the
        writer's transaction. GIN defers the index work of new rows to a pending list that
        every search reads through; after a 20,000-note ingest it held every subject, and
        looking 20 titles up by word took 187 ms instead of 2.6. Autovacuum would flush it
        only later. The function is for an index's owner (or a superuser): a writer that
        owns none leaves the lists to autovacuum."""
        if self._dialect != "postgresql":
            return
        indexes = ", ".join(f"to_regclass('{name}')" for name in schema.PG_GIN_INDEXES)
        conn.exec_driver_sql(
            "SELECT gin_clean_pending_list(c.oid) FROM pg_class c "
            f"WHERE c.oid IN ({indexes}) AND pg_has_role(c.relowner, 'USAGE')"
        )

    def _code_point(self, column: Any) -> Any:
        """``column`` ordered by code point, as Python orders str: SQLite's default BINARY
        collation compares UTF-8 bytes (the same order); PostgreSQL needs ``COLLATE "C"``."""
        return column if self._dialect == "sqlite" else sa.collate(column, "C")

    def subjects_for_source_files(self, paths: Iterable[str]) -> set[str]:
        """subject_norms of the facts coming from these source files."""
        return set().union(*self.subjects_by_source_file(paths).values())

    def subjects_by_source_file(self, paths: Iterable[str]) -> dict[str, set[str]]:
        """For each of these source files, the subject_norms of its facts (every path is a
        key; a file without facts maps to an empty set)."""
        t = schema.facts
        files = sorted(set(paths))
        found: dict[str, set[str]] = {f: set() for f in files}
        with self._tx() as conn:
            for chunk in _chunks(files):
                stmt = (
                    sa.select(t.c.source_file, t.c.subject_norm)
                    .where(t.c.source_file.in_(chunk))
                    .distinct()
                )
                for source_file, subject_norm in conn.execute(stmt):
                    found[source_file].add(subject_norm)
        return found

    def fact_objects(
        self, predicates: Sequence[str], extractor: str = "ingest"
    ) -> set[tuple[str, str]]:
        """Distinct (source_file, object) of one extractor's facts with these predicates.

        Ingest reads the ``links_to`` objects to find the notes whose links may resolve
        differently after notes were added, removed or retitled.
        """
        t = schema.facts
        stmt = (
            sa.select(t.c.source_file, t.c.object)
            .where(t.c.extractor == extractor, t.c.predicate.in_(list(predicates)))
            .distinct()
        )
        with self._tx() as conn:
            return {(f, o) for f, o in conn.execute(stmt)}

    def subject_norms(self) -> list[str]:
        """Every distinct subject_norm, sorted by code point."""
        with self._tx() as conn:
            return sorted(conn.execute(sa.select(schema.subjects.c.subject_norm)).scalars())

    def count_facts(self) -> int:
        """Number of stored facts."""
        with self._tx() as conn:
            return int(
                conn.execute(sa.select(sa.func.count()).select_from(schema.facts)).scalar_one()
            )

    def facts_by_predicate(self) -> dict[str, int]:
        """predicate -> fact count, sorted by predicate."""
        t = schema.facts
        with self._tx() as conn:
            rows = conn.execute(sa.select(t.c.predicate, sa.func.count()).group_by(t.c.predicate))
            return dict(sorted((p, int(n)) for p, n in rows))

    def fact_source_files(self) -> dict[str, int]:
        """source_file -> fact count, sorted by path (freshness looks for orphan facts)."""
        t = schema.facts
        with self._tx() as conn:
            stmt = sa.select(t.c.source_file, sa.func.count()).group_by(t.c.source_file)
            return dict(sorted((f, int(n)) for f, n in conn.execute(stmt)))

    # --- subject search -----------------------------------------------------------------

    def _candidate_select(self, term_norm: str, tag: int) -> sa.Select[Any]:
        """SQL pre-filter for one normalised term, tagged with ``tag``: a superset of the
        subjects holding it at word boundaries (the caller checks each exactly).

        Used for terms without a word character (the others go to ``_word_select``):
        SQLite's trigrams, or LIKE below three characters; PostgreSQL's LIKE (pg_trgm)."""
        if self._dialect == "sqlite" and len(term_norm) >= schema.TRIGRAM:
            f = schema.subjects_fts
            return sa.select(
                sa.literal(tag, sa.Integer).label("tag"), f.c.subject_norm.label("subject_norm")
            ).where(f.c.subject_norm.match(_fts_prefilter(term_norm)))
        s = schema.subjects
        return sa.select(
            sa.literal(tag, sa.Integer).label("tag"), s.c.subject_norm.label("subject_norm")
        ).where(s.c.subject_norm.like(contains_pattern(term_norm), escape=LIKE_ESCAPE))

    def search_subjects(self, term: str, limit: int | None = None) -> list[str]:
        """subject_norms matching ``term`` at word boundaries, sorted; at most ``limit``.

        Raises InputError when the term is empty once normalised.
        """
        return self.search_subjects_many([term], limit=limit)[term]

    def search_subjects_many(
        self, terms: Sequence[str], limit: int | None = None
    ) -> dict[str, list[str]]:
        """``search_subjects`` for many terms, one UNION ALL statement per 100 terms.

        Keyed by the terms as given; each list is sorted and cut to ``limit``.
        """
        norms = {term: normalize_term(term) for term in terms}
        distinct = sorted(set(norms.values()))
        candidates: dict[str, set[str]] = defaultdict(set)
        # A NUL can be stored by neither database's text type path we use, and PostgreSQL
        # rejects it as a parameter: such a term matches nothing.
        searchable = [n for n in distinct if "\x00" not in n]
        # The terms with a word character go to the word index in one statement of fixed
        # shape (its compiled form is cached; building a UNION of 20 selects cost 3 ms an
        # answer); the others by trigram or LIKE.
        runs = {n: word_runs(n) for n in searchable}
        worded = [n for n in searchable if runs[n]]
        others = [n for n in searchable if not runs[n]]
        if searchable:
            with self._tx() as conn:
                for chunk in _chunks(worded, WORD_TERMS_PER_STATEMENT):
                    phrases = json.dumps([self._word_term(runs[n]) for n in chunk])
                    for tag, norm in conn.execute(self._word_select(), {"phrases": phrases}):
                        candidates[chunk[int(tag)]].add(norm)
                for chunk in _chunks(others, TERMS_PER_STATEMENT):
                    selects = [self._candidate_select(n, i) for i, n in enumerate(chunk)]
                    stmt = selects[0] if len(selects) == 1 else sa.union_all(*selects)
                    for tag, norm in conn.execute(stmt):
                        candidates[chunk[tag]].add(norm)
        found = {n: sorted(s for s in candidates[n] if word_boundary_match(n, s)) for n in distinct}
        return {term: found[n] if limit is None else found[n][:limit] for term, n in norms.items()}

    def _word_term(self, runs: str) -> str:
        """A term's runs as ``_word_select`` takes them: an FTS5 phrase (SQLite), or the
        space-separated runs themselves (PostgreSQL splits them into an array)."""
        return _fts_phrase(runs) if self._dialect == "sqlite" else runs

    def _word_select(self) -> sa.Select[Any]:
        """(position in ``:phrases``, subject_norm) for a JSON list of terms, each looked up
        in the word index: SQLite's FTS5 ``subject_words`` (migration 8) by phrase,
        PostgreSQL's GIN index (migration 9) by containment of the term's runs. Both are
        supersets of the word-boundary matches (a term between boundaries consists of
        whole runs of the subject); the caller checks each candidate exactly."""
        s = schema.subjects
        if self._dialect != "sqlite":
            data = sa.cast(sa.bindparam("phrases", type_=sa.Text), pg_dialect.JSON)
            terms = (
                sa.func.json_array_elements_text(data)
                .table_valued("value", with_ordinality="ord")
                .render_derived(name="terms")
            )
            # The index's own expression (schema.PG_WORDS_EXPR), the separator inlined as
            # a constant so the planner can match it.
            space = sa.literal_column("' '")
            words = sa.func.string_to_array(s.c.words, space)
            wanted = sa.func.string_to_array(terms.c.value, space)
            return (
                sa.select((terms.c.ord - 1).label("tag"), s.c.subject_norm)
                .select_from(terms)
                .join(s, words.op("@>")(wanted))
            )
        w = schema.subject_words
        terms = sa.func.json_each(sa.bindparam("phrases", type_=sa.Text)).table_valued(
            "key", "value", name="terms"
        )
        return (
            sa.select(terms.c.key.label("tag"), s.c.subject_norm)
            .select_from(terms)
            .join(w, w.c.words.match(terms.c.value))
            .join(s, s.c.id == w.c.rowid)
        )

    def explain_search(self, term: str) -> str:
        """The database's query plan for one term's pre-filter (to check index use)."""
        norm = normalize_term(term)
        if word_runs(norm):
            stmt = self._word_select().params(
                phrases=json.dumps([self._word_term(word_runs(norm))])
            )
        else:
            stmt = self._candidate_select(norm, 0)
        compiled = stmt.compile(
            dialect=self._engine.dialect, compile_kwargs={"literal_binds": True}
        )
        prefix = "EXPLAIN QUERY PLAN " if self._dialect == "sqlite" else "EXPLAIN "
        with self._tx() as conn:
            rows = conn.exec_driver_sql(prefix + str(compiled)).all()
        return "\n".join(" ".join(str(v) for v in row) for row in rows)

    def analyze(self) -> None:
        """Refresh planner statistics (worth it after a large import)."""
        with self._tx(write=True) as conn:
            if self._dialect == "postgresql":
                conn.exec_driver_sql("ANALYZE facts")
                conn.exec_driver_sql("ANALYZE subjects")
            else:
                conn.exec_driver_sql("ANALYZE")

    # --- calibrations -------------------------------------------------------------------

    def save_calibration(self, cal: Calibration) -> None:
        """Store one calibration measurement (history is kept)."""
        with self._tx(write=True) as conn:
            conn.execute(schema.calibrations.insert().values(**asdict(cal)))

    def latest_calibration(
        self, embedder: str | None = None, dims: int | None = None
    ) -> Calibration | None:
        """The most recent calibration, optionally for one embedder and/or dimension."""
        c = schema.calibrations
        stmt = sa.select(c)
        if embedder is not None:
            stmt = stmt.where(c.c.embedder == embedder)
        if dims is not None:
            stmt = stmt.where(c.c.dims == dims)
        stmt = stmt.order_by(c.c.measured_at.desc(), c.c.id.desc()).limit(1)
        with self._tx() as conn:
            row = conn.execute(stmt).first()
        return None if row is None else from_row(Calibration, row)


def _sqlite_engine(url: sa.URL, shown: str) -> Engine:
    """A SQLite engine with real transactions (DDL included), WAL and a busy timeout."""
    database = url.database
    if database and database != ":memory:" and not database.startswith("file:"):
        try:
            Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise KodbError(f"KO-DB at {shown}: cannot create its folder: {exc}") from exc
    with _refused(f"KO-DB at {shown}"):
        engine = sa.create_engine(url, connect_args={"timeout": 30})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Take transaction control from the sqlite3 module (it would not BEGIN before DDL)
        # and emit BEGIN ourselves in _on_begin.
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        try:
            if database and database != ":memory:":
                _use_wal(cursor)
            cursor.execute("PRAGMA foreign_keys=ON")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        # Writers lock at BEGIN so a read-then-write transaction never fails to upgrade.
        options = conn.get_execution_options()
        write = options.get("kodb_write", False)
        # Ingest's index B-trees outgrow the default 2 MB cache; every other transaction (the
        # service's pooled readers included) goes back to it, so the larger one lives only there.
        cache = SQLITE_INGEST_CACHE_KIB if options.get("kodb_ingest") else SQLITE_CACHE_KIB
        if conn.info.get("kodb_cache_kib") != cache:  # per DBAPI connection: set on a change
            conn.exec_driver_sql(f"PRAGMA cache_size=-{cache}")
            conn.info["kodb_cache_kib"] = cache
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine


def _use_wal(cursor: Any, wait_s: float = 30.0) -> None:
    """Switch a SQLite file to WAL once. WAL persists in the file, so later connections only
    read the mode; the switch itself needs the file to themselves and SQLite reports "database
    is locked" at once, without waiting, when first opens race (several processes creating one
    KO-DB), so it is retried for as long as the busy timeout."""
    if str(cursor.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal":
        return
    deadline = time.monotonic() + wait_s
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@contextmanager
def scratch_database(server_url: str, prefix: str = "vaultko_scratch") -> Iterator[str]:
    """A new, empty PostgreSQL database on the server of ``server_url``, for benchmarks and
    tests: yields its URL, then drops it (ending the connections still open to it).

    ``server_url`` names any database the user may connect to (``postgres`` will do); the new
    database is ``<prefix>_<random hex>``. Raises KodbError when the server refuses.
    """
    shown = mask_url(server_url)
    if not _SCRATCH_PREFIX.fullmatch(prefix):
        raise KodbError(f"scratch database prefix {prefix!r}: use a-z, 0-9 and _ only")
    parsed = _parse_url(server_url)
    if parsed.get_backend_name() != "postgresql":
        raise KodbError(f"KO-DB URL {shown!r}: a scratch database needs PostgreSQL")
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    activity = sa.table("pg_stat_activity", sa.column("pid"), sa.column("datname"))
    terminate = sa.select(sa.func.pg_terminate_backend(activity.c.pid)).where(
        activity.c.datname == name
    )
    with _refused(f"PostgreSQL at {shown}"):
        admin = sa.create_engine(
            parsed, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 5}
        )
    quoted = admin.dialect.identifier_preparer.quote(name)
    try:
        with _refused(f"PostgreSQL at {shown}"), admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE {quoted}")
        try:
            yield parsed.set(database=name).render_as_string(hide_password=False)
        finally:
            with _refused(f"PostgreSQL at {shown}"), admin.connect() as conn:
                conn.execute(terminate)
                conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {quoted}")
    finally:
        admin.dispose()


@contextmanager
def _refused(where: str) -> Iterator[None]:
    """KodbError ``"<where>: <driver's first line>"`` for what SQLAlchemy, the server or a
    missing driver refuses outside a KoDB transaction (engines, scratch databases)."""
    try:
        yield
    except (sa.exc.SQLAlchemyError, ImportError) as exc:
        raise KodbError(f"{where}: {_short(exc)}") from exc
