"""SQLite: a file with WAL, FTS5 for the notes' full text and the subjects' words and
trigrams, executemany for bulk inserts."""

from __future__ import annotations

import sqlite3
import time
import urllib.parse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import Connection, Engine

from pipeline.errors import KodbError
from pipeline.kodb import schema
from pipeline.kodb.chunking import chunks
from pipeline.kodb.dialects.base import Dialect
from pipeline.kodb.match import LIKE_ESCAPE, contains_pattern

#: Rows per executemany (the driver binds each row; this bounds the tuples built).
ROWS_PER_EXECUTEMANY = 5000
#: SQLite's largest rowid: past it new rows take unused rowids at random.
MAX_ROWID = 2**63 - 1
#: Page cache (KiB) of ingest's write transaction, and of any other (SQLite's default):
#: ingest's index B-trees outgrow the default, while a large import and the service's pooled
#: readers gain nothing from a larger one but memory (BENCHMARKS.md).
INGEST_CACHE_KIB = 65_536
CACHE_KIB = 2_000
#: Rows past the limit a full-text search reads to put equal scores in path order.
FTS_TIE_MARGIN = 10
#: Words of a long term the trigram pre-filter asks for (the longest ones).
PREFILTER_WORDS = 2


def fts_phrase(term_norm: str) -> str:
    """An FTS5 query matching the term as one literal phrase (quotes doubled inside)."""
    return '"' + term_norm.replace('"', '""') + '"'


def fts_prefilter(term_norm: str) -> str:
    """The trigram query for a subject search: the term's longest words, each a phrase, all
    required. A subject holding the term holds each of its words, so this finds a superset
    that the word-boundary check then narrows; a long title as one phrase would read the
    position lists of every one of its trigrams."""
    words = sorted(
        {w for w in term_norm.split() if len(w) >= schema.TRIGRAM}, key=lambda w: (-len(w), w)
    )
    if len(words) < 2:
        return fts_phrase(term_norm)
    return " AND ".join(fts_phrase(w) for w in words[:PREFILTER_WORDS])


class SqliteDialect(Dialect):
    """KO-DB in a SQLite file."""

    name: ClassVar[str] = "sqlite"
    explain_prefix: ClassVar[str] = "EXPLAIN QUERY PLAN "

    # --- engines and transactions -------------------------------------------------------

    def locate(
        self,
        url: sa.URL,
        shown: str,
        *,
        create: bool,
        base_dir: Path | None,
        confine_to: Path | None,
    ) -> tuple[sa.URL, Path | None]:
        """A file, never memory (an in-memory KO-DB would keep nothing a command wrote);
        made only by a writer, its missing folders only inside ``confine_to``."""
        database = url.database or ""
        if not database or database == ":memory:" or "memory" in str(url.query.get("mode", "")):
            raise KodbError(
                f"KO-DB URL {shown!r} names no file, and an in-memory KO-DB keeps nothing: "
                "write sqlite:///<path to ko.db>"
            )
        if database.startswith("file:"):  # a URI filename: SQLite's own syntax, the user's
            return url, None
        path = Path(database).expanduser()
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        if path.exists():
            return _read_write(path), path
        if not create:
            raise KodbError(
                f"no KO-DB at {path}: `vault-ko sync` (or `ingest`) makes it; "
                "check the kodb url setting if it should be elsewhere"
            )
        folder = path.parent
        if not folder.is_dir():
            inside = confine_to is None or folder.resolve().is_relative_to(confine_to.resolve())
            if not inside:
                raise KodbError(
                    f"KO-DB at {shown}: the folder {folder} does not exist; vault-ko makes "
                    f"folders only inside the state dir ({confine_to})"
                )
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise KodbError(f"KO-DB at {shown}: cannot create its folder: {exc}") from exc
        try:  # made here, once: every connection after opens it read-write, never creating
            sqlite3.connect(path).close()
        except sqlite3.Error as exc:
            raise KodbError(f"KO-DB at {shown}: cannot create it: {exc}") from exc
        return _read_write(path), path

    def create_engine(self, url: sa.URL, shown: str) -> Engine:
        """Real transactions (DDL included), WAL, a busy timeout, and writers that take the
        write lock at BEGIN so two writers queue instead of failing mid-transaction."""
        database = url.database
        engine = sa.create_engine(url, connect_args={"timeout": 30})

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            # Take transaction control from the sqlite3 module (it would not BEGIN before
            # DDL) and emit BEGIN ourselves in _on_begin.
            dbapi_conn.isolation_level = None
            cursor = dbapi_conn.cursor()
            try:
                if database and database != ":memory:":
                    use_wal(cursor)
                cursor.execute("PRAGMA foreign_keys=ON")
            finally:
                cursor.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Connection) -> None:
            # Writers lock at BEGIN so a read-then-write transaction never fails to upgrade.
            options = conn.get_execution_options()
            write = options.get("kodb_write", False)
            # The larger cache lives only in ingest's transaction; every other one (the
            # service's pooled readers included) goes back to the default.
            cache = INGEST_CACHE_KIB if options.get("kodb_ingest") else CACHE_KIB
            if conn.info.get("kodb_cache_kib") != cache:  # per DBAPI connection: on a change
                conn.exec_driver_sql(f"PRAGMA cache_size=-{cache}")
                conn.info["kodb_cache_kib"] = cache
            conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

        return engine

    def lock_migrations(self, conn: Connection) -> None:
        """Nothing to add: a migration is a write, and writers are serial (BEGIN IMMEDIATE)."""

    def lock_writers(self, conn: Connection) -> None:
        """Nothing to add: writers are serial already (BEGIN IMMEDIATE)."""

    # --- statements ---------------------------------------------------------------------

    def insert(self, table: sa.Table) -> Any:
        return sqlite_dialect.insert(table)

    def ids_select(self, param: str) -> sa.Select[Any]:
        ids_text = sa.bindparam(param, type_=sa.Text)
        return sa.select(sa.func.json_each(ids_text).table_valued("value").c.value)

    def insert_rows(
        self,
        conn: Connection,
        table: sa.Table,
        rows: Sequence[dict[str, Any]],
        key: sa.Column[Any] | None,
        returning: Sequence[sa.Column[Any]] = (),
    ) -> list[Any]:
        """The driver's executemany on a statement compiled once; the rows this transaction
        inserted are the ones past the largest rowid it saw (it holds the write lock)."""
        if not rows:
            return []
        names = list(rows[0])
        stmt = sqlite_dialect.insert(table)
        if key is not None:
            stmt = stmt.on_conflict_do_nothing(index_elements=[key])
        rowid = sa.literal_column("rowid")
        last = 0
        if returning:
            last = conn.execute(sa.select(sa.func.max(rowid)).select_from(table)).scalar() or 0
            if last >= MAX_ROWID:  # rowids are no longer in insertion order
                found: list[Any] = []
                for chunk in chunks(rows):
                    result = conn.execute(stmt.returning(*returning), list(chunk))
                    found.extend(tuple(r) for r in result)
                return found
        inserted = _executemany(conn, table, stmt, names, rows)
        if not returning:
            return []
        found = [tuple(r) for r in conn.execute(sa.select(*returning).where(rowid > last))]
        if len(found) != inserted:  # the write lock failed us: say so, write nothing
            raise KodbError(
                f"{table.name}: {inserted} rows inserted but {len(found)} found past "
                f"rowid {last}; nothing was written"
            )
        return found

    # --- full text and subject search ---------------------------------------------------

    def search_notes(
        self,
        conn: Connection,
        words: Sequence[str],
        limit: int,
        title_weight: float,
        pg_normalization: int,
        every: Sequence[Sequence[str]] = (),
    ) -> list[tuple[str, float]]:
        """FTS5's ``bm25()`` with column weights (negative-is-better, so negated). FTS5
        sorts by its own ``rank`` column without a join, which is much faster than ordering
        the join by ``bm25()``; a margin of ``FTS_TIE_MARGIN`` more rows then gives ties
        their path order, and when the ties reach past it the join decides (exact either
        way). ``pg_normalization`` is PostgreSQL's and unused here."""
        f, t = schema.note_texts_fts, schema.note_texts
        match = " OR ".join(f'"{w}"' for w in words)
        if every:
            match = " AND ".join("(" + " OR ".join(f'"{w}"' for w in g) + ")" for g in every)
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

    def notes_holding(self, conn: Connection, words: Sequence[str]) -> dict[str, int]:
        """From the index's own vocabulary (``note_texts_vocab``, migration 14): a lookup
        per word, not a walk over the notes."""
        v = schema.note_texts_vocab
        out: dict[str, int] = {}
        for word in dict.fromkeys(words):
            n = conn.execute(sa.select(v.c.doc).where(v.c.term == word)).scalar()
            if n:
                out[word] = int(n)
        return out

    def word_term(self, runs: str) -> str:
        """An FTS5 phrase of the runs."""
        return fts_phrase(runs)

    def word_select(self) -> sa.Select[Any]:
        """FTS5 ``subject_words`` (migration 8), each term looked up as a phrase."""
        s, w = schema.subjects, schema.subject_words
        terms = sa.func.json_each(sa.bindparam("phrases", type_=sa.Text)).table_valued(
            "key", "value", name="terms"
        )
        return (
            sa.select(terms.c.key.label("tag"), s.c.subject_norm)
            .select_from(terms)
            .join(w, w.c.words.match(terms.c.value))
            .join(s, s.c.id == w.c.rowid)
        )

    def candidate_select(self, term_norm: str, tag: int) -> sa.Select[Any]:
        """The FTS5 trigram index from three characters, else an escaped ``LIKE '%t%'``
        over the distinct-subjects table (not the facts)."""
        label = sa.literal(tag, sa.Integer).label("tag")
        if len(term_norm) >= schema.TRIGRAM:
            f = schema.subjects_fts
            return sa.select(label, f.c.subject_norm.label("subject_norm")).where(
                f.c.subject_norm.match(fts_prefilter(term_norm))
            )
        s = schema.subjects
        return sa.select(label, s.c.subject_norm.label("subject_norm")).where(
            s.c.subject_norm.like(contains_pattern(term_norm), escape=LIKE_ESCAPE)
        )

    # --- maintenance --------------------------------------------------------------------

    def damage(self, conn: Connection) -> str | None:
        """``PRAGMA quick_check``: every page and index entry read once (not the index
        contents against the tables, which ``integrity_check`` adds at several times the
        cost); its first complaint."""
        rows = [str(r[0]) for r in conn.exec_driver_sql("PRAGMA quick_check(5)")]
        return None if rows == ["ok"] else "; ".join(rows)

    def analyze(self, conn: Connection) -> None:
        conn.exec_driver_sql("ANALYZE")

    def before_bulk_refresh(self, conn: Connection, missing: int, step: int) -> None:
        """Nothing to do: SQLite's planner reads the indexes' own statistics."""

    def flush_indexes(self, conn: Connection) -> None:
        """Nothing to do: the FTS5 tables are written by the triggers, in the transaction."""

    # --- migrations ---------------------------------------------------------------------

    def m002_subject_trigram_index(self, conn: Connection) -> None:
        """FTS5 trigrams over ``subjects.subject_norm``, kept in step by triggers.
        ``case_sensitive 1``: names and terms are case-folded in Python already, so the
        index compares code points as stored instead of folding again."""
        conn.exec_driver_sql(
            "CREATE VIRTUAL TABLE IF NOT EXISTS subjects_fts USING fts5("
            "subject_norm, content='subjects', content_rowid='id', "
            "tokenize='trigram case_sensitive 1')"
        )
        conn.exec_driver_sql(
            "CREATE TRIGGER IF NOT EXISTS subjects_fts_ai AFTER INSERT ON subjects BEGIN "
            "INSERT INTO subjects_fts(rowid, subject_norm) VALUES (new.id, new.subject_norm); "
            "END"
        )
        conn.exec_driver_sql(
            "CREATE TRIGGER IF NOT EXISTS subjects_fts_ad AFTER DELETE ON subjects BEGIN "
            "INSERT INTO subjects_fts(subjects_fts, rowid, subject_norm) "
            "VALUES ('delete', old.id, old.subject_norm); "
            "END"
        )
        conn.exec_driver_sql("INSERT INTO subjects_fts(subjects_fts) VALUES ('rebuild')")

    def m005_note_full_text_index(self, conn: Connection) -> None:
        """FTS5 over ``note_texts`` with ``unicode61``; diacritics are removed already
        (kodb/text.py), so the tokenizer must not fold further (``remove_diacritics 0``)."""
        conn.exec_driver_sql(
            "CREATE VIRTUAL TABLE IF NOT EXISTS note_texts_fts USING fts5("
            "title, body, content='note_texts', content_rowid='id', "
            "tokenize='unicode61 remove_diacritics 0')"
        )
        conn.exec_driver_sql(
            "CREATE TRIGGER IF NOT EXISTS note_texts_ai AFTER INSERT ON note_texts BEGIN "
            "INSERT INTO note_texts_fts(rowid, title, body) "
            "VALUES (new.id, new.title, new.body); END"
        )
        conn.exec_driver_sql(
            "CREATE TRIGGER IF NOT EXISTS note_texts_ad AFTER DELETE ON note_texts BEGIN "
            "INSERT INTO note_texts_fts(note_texts_fts, rowid, title, body) "
            "VALUES ('delete', old.id, old.title, old.body); END"
        )
        conn.exec_driver_sql(
            "CREATE TRIGGER IF NOT EXISTS note_texts_au AFTER UPDATE ON note_texts BEGIN "
            "INSERT INTO note_texts_fts(note_texts_fts, rowid, title, body) "
            "VALUES ('delete', old.id, old.title, old.body); "
            "INSERT INTO note_texts_fts(rowid, title, body) "
            "VALUES (new.id, new.title, new.body); END"
        )

    def m009_subject_word_index(self, conn: Connection) -> None:
        """Nothing to do: migration 8 built SQLite's word index."""

    def m014_note_text_lengths(self, conn: Connection, fill: Callable[[], None]) -> None:
        """The update trigger of migration 5 re-indexed a row whatever changed, so ``fill``
        would rebuild the whole index: it now fires on the indexed columns only. Then
        ``note_texts_vocab``: FTS5's vocabulary of ``note_texts_fts``, a row per word with
        the number of notes holding it (read from the index, nothing stored)."""
        conn.exec_driver_sql("DROP TRIGGER IF EXISTS note_texts_au")
        fill()
        conn.exec_driver_sql(
            "CREATE TRIGGER note_texts_au AFTER UPDATE OF title, body ON note_texts BEGIN "
            "INSERT INTO note_texts_fts(note_texts_fts, rowid, title, body) "
            "VALUES ('delete', old.id, old.title, old.body); "
            "INSERT INTO note_texts_fts(rowid, title, body) "
            "VALUES (new.id, new.title, new.body); END"
        )
        conn.exec_driver_sql(
            "CREATE VIRTUAL TABLE IF NOT EXISTS note_texts_vocab "
            "USING fts5vocab('note_texts_fts', 'row')"
        )

    def m008_subject_word_index(self, conn: Connection) -> None:
        """``subject_words``: FTS5 over ``subjects.words``, kept in step by triggers.
        ``tokenchars '_'`` keeps ``_`` inside a run as ``\\w`` does; no diacritic folding."""
        conn.exec_driver_sql(
            "CREATE VIRTUAL TABLE IF NOT EXISTS subject_words USING fts5("
            "words, content='subjects', content_rowid='id', "
            "tokenize=\"unicode61 remove_diacritics 0 categories 'L* N*' tokenchars '_'\")"
        )
        conn.exec_driver_sql(
            "CREATE TRIGGER IF NOT EXISTS subject_words_ai AFTER INSERT ON subjects BEGIN "
            "INSERT INTO subject_words(rowid, words) VALUES (new.id, new.words); "
            "END"
        )
        conn.exec_driver_sql(
            "CREATE TRIGGER IF NOT EXISTS subject_words_ad AFTER DELETE ON subjects BEGIN "
            "INSERT INTO subject_words(subject_words, rowid, words) "
            "VALUES ('delete', old.id, old.words); "
            "END"
        )
        conn.exec_driver_sql("INSERT INTO subject_words(subject_words) VALUES ('rebuild')")


def _read_write(path: Path) -> sa.URL:
    """A URL that opens the file read-write and never creates it: a pooled connection made
    after the file was deleted fails instead of making an empty KO-DB in its place."""
    quoted = urllib.parse.quote(str(path.resolve()))
    return sa.make_url(f"sqlite:///file:{quoted}?mode=rw&uri=true")


def _executemany(
    conn: Connection, table: sa.Table, stmt: Any, names: Sequence[str], rows: Sequence[Any]
) -> int:
    """Insert ``rows`` with the statement compiled once by Core and the rows bound by the
    driver as tuples (with the columns' own conversions, Float's to_float): SQLAlchemy's own
    executemany handles each row's parameters in Python, which costs more than the insert.
    Returns the rows inserted."""
    compiled = stmt.compile(dialect=conn.dialect, column_keys=list(names))
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
    for chunk in chunks(rows, ROWS_PER_EXECUTEMANY):
        result = conn.exec_driver_sql(compiled.string, [bound(r) for r in chunk])
        inserted += result.rowcount
    return inserted


def use_wal(cursor: Any, wait_s: float = 30.0) -> None:
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
