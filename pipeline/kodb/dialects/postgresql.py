"""PostgreSQL (psycopg 3): lists as one array or JSON parameter, bulk inserts from
``json_to_recordset``, a weighted tsvector for the notes' full text, GIN indexes for the
subjects' words and trigrams, advisory locks for migrations and writers."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.engine import Connection, Engine

from pipeline.kodb import schema
from pipeline.kodb.chunking import chunks
from pipeline.kodb.dialects.base import Dialect
from pipeline.kodb.match import LIKE_ESCAPE, contains_pattern

#: Rows per json_to_recordset() insert (one JSON parameter).
ROWS_PER_STATEMENT = 5000
#: Advisory lock key serialising schema migrations ("vkokodb" in ASCII).
MIGRATE_LOCK = 0x766B6F6B6F6462
#: Advisory lock key serialising fact writes with a summary refresh ("vkostat").
STATS_LOCK = 0x766B6F73746174
#: ``ahead``'s end-of-items marker.
_END = object()


def to_json(rows: Sequence[dict[str, Any]]) -> str:
    """Rows as the JSON text json_to_recordset() reads (allow_nan=False: JSON has no NaN;
    validation at the edges keeps it out)."""
    return json.dumps(list(rows), ensure_ascii=False, allow_nan=False)


def ahead(fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[Any]:
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


class PostgresDialect(Dialect):
    """KO-DB on a PostgreSQL server."""

    name: ClassVar[str] = "postgresql"
    explain_prefix: ClassVar[str] = "EXPLAIN "

    # --- engines and transactions -------------------------------------------------------

    def driver_url(self, url: sa.URL) -> sa.URL:
        """psycopg 3 for a bare ``postgresql://`` (or ``postgres://``)."""
        if url.drivername in ("postgresql", "postgres"):
            return url.set(drivername="postgresql+psycopg")
        return url

    def locate(
        self,
        url: sa.URL,
        shown: str,
        *,
        create: bool,
        base_dir: Path | None,
        confine_to: Path | None,
    ) -> tuple[sa.URL, Path | None]:
        """The server's database as named, and no file (the server owns them): vault-ko
        never creates one (the server refuses a connection to a database that does not
        exist)."""
        return url, None

    def create_engine(self, url: sa.URL, shown: str) -> Engine:
        return sa.create_engine(url, pool_pre_ping=True, connect_args={"connect_timeout": 5})

    def lock_migrations(self, conn: Connection) -> None:
        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(MIGRATE_LOCK)))

    def lock_writers(self, conn: Connection) -> None:
        """One advisory lock, so a refresh never stores counts that a concurrent writer is
        changing."""
        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(STATS_LOCK)))

    # --- statements ---------------------------------------------------------------------

    def insert(self, table: sa.Table) -> Any:
        return pg_dialect.insert(table)

    def one_of(self, column: sa.ColumnElement[Any], values: Sequence[Any]) -> Any:
        """``column = ANY(:values)``, one array parameter: an IN list is one placeholder
        per value, so each chunk's statement would be new text that SQLAlchemy renders and
        psycopg splits again; the ANY form is one statement text whatever the count, and
        uses the same btree index."""
        array = sa.bindparam(None, list(values), type_=pg_dialect.ARRAY(column.type))
        return column == sa.any_(array)

    def code_point(self, column: Any) -> Any:
        """``COLLATE "C"``: the database's own collation may order by language rules."""
        return sa.collate(column, "C")

    def ids_select(self, param: str) -> sa.Select[Any]:
        data = sa.cast(sa.bindparam(param, type_=sa.Text), pg_dialect.JSON)
        values = sa.func.json_array_elements_text(data).table_valued("value")
        return sa.select(sa.cast(values.c.value, sa.BigInteger))

    def insert_rows(
        self,
        conn: Connection,
        table: sa.Table,
        rows: Sequence[dict[str, Any]],
        key: sa.Column[Any] | None,
        returning: Sequence[sa.Column[Any]] = (),
    ) -> list[Any]:
        """One ``INSERT … SELECT FROM json_to_recordset(:rows)`` per chunk: the rows travel
        as one JSON text, which Python's C encoder writes and the server parses far faster
        than psycopg dumps one array per column or binds a multi-row VALUES list. The next
        chunk's JSON is written while the server inserts this one (``ahead``)."""
        if not rows:
            return []
        names = list(rows[0])
        data_param = sa.cast(sa.bindparam("rows", type_=sa.Text), pg_dialect.JSON)
        source = (
            sa.func.json_to_recordset(data_param)
            .table_valued(*(sa.column(n, table.c[n].type) for n in names))
            .render_derived(name="src", with_types=True)
        )
        stmt = pg_dialect.insert(table).from_select(names, sa.select(*(source.c[n] for n in names)))
        if key is not None:
            stmt = stmt.on_conflict_do_nothing(index_elements=[key])
        if returning:
            stmt = stmt.returning(*returning)
        found: list[Any] = []
        for data in ahead(to_json, chunks(rows, ROWS_PER_STATEMENT)):
            result = conn.execute(stmt, {"rows": data})
            if returning:
                found.extend(tuple(r) for r in result)
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
        """``ts_rank_cd`` on the weighted tsvector (a cover-density rank, not BM25), the
        title class A weighing ``title_weight`` times the body's class B;
        ``pg_normalization`` is its length normalisation flag."""
        t = schema.note_texts
        tsv = sa.literal_column(f"note_texts.{schema.NOTE_TSV}")
        said = " | ".join(words)
        if every:
            said = " & ".join("(" + " | ".join(g) + ")" for g in every)
        query = sa.func.to_tsquery(sa.literal_column("'simple'::regconfig"), said)
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

    def notes_holding(self, conn: Connection, words: Sequence[str]) -> dict[str, int]:
        """A count per word through the GIN index of the tsvector."""
        tsv = sa.literal_column(f"note_texts.{schema.NOTE_TSV}")
        simple = sa.literal_column("'simple'::regconfig")
        out: dict[str, int] = {}
        for word in dict.fromkeys(words):
            query = sa.func.to_tsquery(simple, sa.bindparam("word", word))
            stmt = sa.select(sa.func.count()).select_from(schema.note_texts)
            n = conn.execute(stmt.where(tsv.op("@@")(query))).scalar_one()
            if n:
                out[word] = int(n)
        return out

    def word_term(self, runs: str) -> str:
        """The space-separated runs themselves (split into an array by the server)."""
        return runs

    def word_select(self) -> sa.Select[Any]:
        """The GIN index over the words as an array (migration 9), by containment of each
        term's runs."""
        s = schema.subjects
        data = sa.cast(sa.bindparam("phrases", type_=sa.Text), pg_dialect.JSON)
        terms = (
            sa.func.json_array_elements_text(data)
            .table_valued("value", with_ordinality="ord")
            .render_derived(name="terms")
        )
        # The index's own expression (schema.PG_WORDS_EXPR), the separator inlined as a
        # constant so the planner can match it.
        space = sa.literal_column("' '")
        words = sa.func.string_to_array(s.c.words, space)
        wanted = sa.func.string_to_array(terms.c.value, space)
        return (
            sa.select((terms.c.ord - 1).label("tag"), s.c.subject_norm)
            .select_from(terms)
            .join(s, words.op("@>")(wanted))
        )

    def candidate_select(self, term_norm: str, tag: int) -> sa.Select[Any]:
        """An escaped ``LIKE '%t%'`` that the pg_trgm GIN index serves; the planner falls
        back to a scan by itself when a term yields no trigrams."""
        s = schema.subjects
        return sa.select(
            sa.literal(tag, sa.Integer).label("tag"), s.c.subject_norm.label("subject_norm")
        ).where(s.c.subject_norm.like(contains_pattern(term_norm), escape=LIKE_ESCAPE))

    # --- maintenance --------------------------------------------------------------------

    def damage(self, conn: Connection) -> str | None:
        """None: the server checks its own pages (data checksums, its logs)."""
        return None

    def analyze(self, conn: Connection) -> None:
        conn.exec_driver_sql("ANALYZE facts")
        conn.exec_driver_sql("ANALYZE subjects")

    def before_bulk_refresh(self, conn: Connection, missing: int, step: int) -> None:
        """More than one step of summaries after a bulk write in this same transaction:
        autovacuum cannot have seen its rows, and with the old statistics the planner would
        scan all facts for every step. ANALYZE sees the transaction's own rows."""
        if missing > step:
            conn.exec_driver_sql("ANALYZE facts")

    def flush_indexes(self, conn: Connection) -> None:
        """Move the GIN indexes' pending entries into the indexes proper, in the writer's
        transaction. GIN defers the index work of new rows to a pending list that every
        search reads through, until autovacuum flushes it some time later; after a large
        ingest the list holds every subject. The function is for an index's owner (or a
        superuser): a writer that owns none leaves the lists to autovacuum."""
        indexes = ", ".join(f"to_regclass('{name}')" for name in schema.PG_GIN_INDEXES)
        conn.exec_driver_sql(
            "SELECT gin_clean_pending_list(c.oid) FROM pg_class c "
            f"WHERE c.oid IN ({indexes}) AND pg_has_role(c.relowner, 'USAGE')"
        )

    # --- migrations ---------------------------------------------------------------------

    def m002_subject_trigram_index(self, conn: Connection) -> None:
        conn.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        conn.exec_driver_sql(
            "CREATE INDEX IF NOT EXISTS ix_subjects_norm_trgm "
            "ON subjects USING gin (subject_norm gin_trgm_ops)"
        )

    def m005_note_full_text_index(self, conn: Connection) -> None:
        """A generated ``tsv`` column, the title weighted ``A`` and the body ``B`` under the
        ``simple`` configuration (no stemming, like unicode61), with a GIN index."""
        conn.exec_driver_sql(
            f"ALTER TABLE note_texts ADD COLUMN IF NOT EXISTS {schema.NOTE_TSV} tsvector "
            "GENERATED ALWAYS AS ("
            "setweight(to_tsvector('simple'::regconfig, title), 'A') || "
            "setweight(to_tsvector('simple'::regconfig, body), 'B')) STORED"
        )
        conn.exec_driver_sql(
            "CREATE INDEX IF NOT EXISTS ix_note_texts_tsv "
            f"ON note_texts USING gin ({schema.NOTE_TSV})"
        )

    def m008_subject_word_index(self, conn: Connection) -> None:
        """Nothing to do: PostgreSQL's word index came with migration 9."""

    def m014_note_text_lengths(self, conn: Connection, fill: Callable[[], None]) -> None:
        """``fill`` alone (its index is made after it, so the rows' new versions can stay
        on their pages); the tsvector's GIN index counts the notes holding a word."""
        fill()

    def m009_subject_word_index(self, conn: Connection) -> None:
        """A GIN index over ``subjects.words`` split into its runs, so a term with a word
        character is looked up by containment of its runs instead of a pg_trgm LIKE per
        term. The runs come from Python (``match.word_runs``), so no text-search parser's
        idea of a word is involved."""
        conn.exec_driver_sql(
            f"CREATE INDEX IF NOT EXISTS {schema.PG_WORDS_INDEX} "
            f"ON subjects USING gin ({schema.PG_WORDS_EXPR})"
        )
