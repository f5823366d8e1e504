"""KO-DB schema: SQLAlchemy Core tables and the ordered list of migrations.

The tables describe the current schema. A database is brought up to date by running, in
order, every migration not yet recorded in ``kodb_migrations`` (one row per applied
migration, in the style of sqlite-utils' migrations): each is a small function taking the
connection and the database's dialect (``dialects/``, which holds the DDL that differs),
run in the same transaction as its record. A later schema
change is a new function appended to ``MIGRATIONS``; applied ones are never edited.

Search support:
- ``subjects`` holds each distinct ``subject_norm`` once (keyed by its SHA-256, since a btree
  over arbitrary long text has a size limit on PostgreSQL); the store keeps it in step with
  ``facts`` in the same transactions, so the trigram index covers distinct subjects rather
  than every fact row.
- SQLite: ``subjects_fts``, an FTS5 table with the ``trigram`` tokenizer over
  ``subjects.subject_norm`` (external content, kept in sync by triggers on ``subjects``).
- SQLite (migration 8): ``subject_words``, an FTS5 table over ``subjects.words``: the
  subject's runs of Unicode word characters (``\\w``) joined by spaces, computed in Python
  (``match.word_runs``), so a term's runs as one phrase find every subject holding the term
  at word boundaries, by word rather than by trigram (much faster on long titles).
  Terms without a word character keep the trigram (or LIKE) path.
- PostgreSQL: ``pg_trgm`` and a GIN ``gin_trgm_ops`` index on ``subjects.subject_norm``, which
  the planner uses for ``LIKE '%…%'`` patterns.
- Notes' full text (migration 5): ``note_texts`` holds each note's folded words (title and
  aliases apart from the body), indexed by SQLite FTS5 (``note_texts_fts``) or by a
  PostgreSQL tsvector with a GIN index; ingest keeps it in the same
  transaction as the note's facts. Migration 13 records each note's stemmer
  (``note_texts.language``): the words are stemmed in Python (kodb/text.py), so both
  databases index them as they are. Migration 14 stores each note's length in words
  (``note_texts.words``) and, on SQLite, a vocabulary table over the index
  (``note_texts_vocab``), so the candidates either database finds by its own measure
  (FTS5's ``bm25()``, ``ts_rank_cd``) are ranked by the same BM25 in Python (kodb/bm25.py);
  SQLite's update trigger then fires on the indexed columns only.
- Notes' openings (migration 15): ``note_openings`` holds the keys of the paragraphs each
  note's summary is chosen from, so ingest can tell a template line (one that opens many
  notes) by counting the notes holding its key, without reading the other notes.
  Migration 16 records whether each note was private when written (``notes.private``).
"""

from __future__ import annotations

import hashlib
import json
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

if TYPE_CHECKING:
    from pipeline.kodb.dialects import Dialect

metadata = sa.MetaData()

#: The facts' index by file (migration 10 made it the one by file, subject and extractor).
FILE_INDEX = "ix_facts_source_file_subject"
#: The index that lists the stemmers of the notes' full text (migration 13).
TEXT_LANGUAGE_INDEX = "ix_note_texts_language"
TEXT_WORDS_INDEX = "ix_note_texts_words"


def subject_key(subject_norm: str) -> str:
    """SHA-256 of a subject_norm: the fixed-size key indexed instead of unbounded text."""
    return hashlib.sha256(subject_norm.encode("utf-8", "surrogatepass")).hexdigest()


migrations_table = sa.Table(
    "kodb_migrations",
    metadata,
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("applied_at", sa.Float, nullable=False),
)

facts = sa.Table(
    "facts",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("subject", sa.Text, nullable=False),
    # Case-folded in Python (model.normalize_text): both databases compare this column only.
    sa.Column("subject_norm", sa.Text, nullable=False),
    sa.Column("subject_key", sa.String(64), nullable=False),  # sha256(subject_norm)
    sa.Column("predicate", sa.Text, nullable=False),
    sa.Column("object", sa.Text, nullable=False),
    sa.Column("confidence", sa.Float, nullable=False),
    sa.Column("source_type", sa.String(16), nullable=False),
    sa.Column("source_file", sa.Text, nullable=False),
    sa.Column("extractor", sa.String(100), nullable=False),
    sa.Column("fact_key", sa.String(64), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.UniqueConstraint("fact_key", name="uq_facts_fact_key"),
    sa.CheckConstraint("confidence >= 0 AND confidence <= 1", name="ck_facts_confidence"),
    sa.CheckConstraint("source_type IN ('session', 'wiki', 'adr')", name="ck_facts_source_type"),
    sa.Index("ix_facts_subject_key", "subject_key"),
    # A file's facts (deletes by file and extractor, the bridge's subjects per file), and an
    # answer's evidence: the facts of its hit files about its subjects, found in the index.
    sa.Index(FILE_INDEX, "source_file", "subject_key", "extractor"),
    sa.Index("ix_facts_predicate", "predicate"),
)


def _notes_columns() -> list[sa.Column[Any]]:
    """The columns of ``notes`` as migration 1 created them."""
    return [
        sa.Column("path", sa.Text, primary_key=True),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("source_type", sa.String(16), nullable=False),
        sa.Column("content_hash", sa.String(128), nullable=False),
        sa.Column("mtime", sa.Float, nullable=False),
        sa.Column("bytes", sa.BigInteger, nullable=False),
        sa.Column("ingested_at", sa.Float, nullable=False),
    ]


notes = sa.Table(
    "notes",
    metadata,
    *_notes_columns(),
    # The note's own subject (frontmatter ``subject:``); NULL: the same as its title, or a row
    # written before migration 3. Added by migration 3.
    sa.Column("subject", sa.Text, nullable=True),
    # Its first paragraph, clipped (answers show it as the note's excerpt). Migration 4.
    sa.Column("summary", sa.Text, nullable=True),
    # The extraction rules (extract.EXTRACTOR_VERSION) its facts came from; NULL: before
    # migration 4, so ingest re-extracts the note once.
    sa.Column("extractor_version", sa.Integer, nullable=True),
    # Its ISO day (ParsedNote.date); NULL: it has none, or a row written before migration 12
    # (extractor version 7 re-ingests those notes).
    sa.Column("date", sa.Text, nullable=True),
    # The vault's language setting its full text was indexed under (kodb/text.py); NULL: a
    # row written before migration 13 (unstemmed words), so ingest re-reads the note.
    sa.Column("text_language", sa.Text, nullable=True),
    # Whether the note was private when written (ingest._public_openings): a note that
    # turns private or public is read again, so its openings count as the globs say now.
    # NULL: a row written before migration 16.
    sa.Column("private", sa.Boolean, nullable=True),
)

#: ``notes`` as migration 1 created it (without ``subject``), kept apart from ``metadata`` so
#: migration 1 builds the same table however ``notes`` grows later.
notes_v1 = sa.Table("notes", sa.MetaData(), *_notes_columns())

calibrations = sa.Table(
    "calibrations",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("embedder", sa.Text, nullable=False),
    sa.Column("dims", sa.Integer, nullable=False),
    sa.Column("probe_set_version", sa.Integer, nullable=False),
    sa.Column("noise_floor", sa.Float, nullable=False),
    sa.Column("sigma", sa.Float, nullable=False),
    sa.Column("mu", sa.Float, nullable=False),
    sa.Column("n_notes", sa.Integer, nullable=False),
    sa.Column("n_pairs", sa.Integer, nullable=False),
    sa.Column("vault_notes_at_calibration", sa.Integer, nullable=False),
    sa.Column("measured_at", sa.Float, nullable=False),
    sa.Index("ix_calibrations_embedder_dims", "embedder", "dims", "measured_at"),
)


def _subjects_columns() -> list[Any]:
    return [
        # Integer id: the SQLite FTS5 tables use it as their rowid.
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("subject_key", sa.String(64), nullable=False),
        sa.Column("subject_norm", sa.Text, nullable=False),
        sa.UniqueConstraint("subject_key", name="uq_subjects_subject_key"),
    ]


subjects = sa.Table(
    "subjects",
    metadata,
    *_subjects_columns(),
    # match.word_runs(subject_norm) (migration 8): what the SQLite word index tokenizes.
    sa.Column("words", sa.Text, nullable=True),
)

#: ``subjects`` as migration 1 created it (without ``words``).
subjects_v1 = sa.Table("subjects", sa.MetaData(), *_subjects_columns())

#: The SQLite FTS5 trigram table over subjects.subject_norm (created by a migration, not by
#: metadata): a lightweight construct so queries on it are still built with Core.
subjects_fts = sa.table("subjects_fts", sa.column("rowid"), sa.column("subject_norm"))
#: The SQLite FTS5 word table over subjects.words (migration 8).
subject_words = sa.table("subject_words", sa.column("rowid"), sa.column("words"))

note_texts = sa.Table(
    "note_texts",
    metadata,
    # Integer id: the SQLite FTS5 table uses it as its rowid.
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("path", sa.Text, nullable=False),
    # Folded, space-separated words (kodb/text.py): the title and aliases, and the body.
    sa.Column("title", sa.Text, nullable=False),
    sa.Column("body", sa.Text, nullable=False),
    # The stemmer its words went through (kodb/text.py): the vault's language or the note's
    # own ``lang:``; "none" or NULL (before migration 13): whole words. Migration 13.
    sa.Column("language", sa.Text, nullable=True),
    # How many words the title and body index, together: a note's length in BM25
    # (kodb/bm25.py). Migration 14; its index lets the mean length be read without the text.
    sa.Column("words", sa.Integer, nullable=True),
    sa.UniqueConstraint("path", name="uq_note_texts_path"),
    sa.Index(TEXT_LANGUAGE_INDEX, "language"),
    sa.Index(TEXT_WORDS_INDEX, "words"),
)

#: Each subject's summary (kodb/summaries.py): the ranking counts and a question-independent
#: fact sample, computed once when the subject's facts change instead of on every answer.
#: A row exists only while it is current: every write of a subject's facts deletes the row in
#: the same transaction; ``KoDB.refresh_subject_stats`` fills the missing ones afterwards.
subject_stats = sa.Table(
    "subject_stats",
    metadata,
    sa.Column("subject_key", sa.String(64), primary_key=True),
    sa.Column("subject_norm", sa.Text, nullable=False),
    sa.Column("source_count", sa.Integer, nullable=False),
    sa.Column("raw_facts", sa.Integer, nullable=False),
    sa.Column("max_confidence", sa.Float, nullable=False),
    # JSON objects: source type -> files, predicate -> facts, spelling -> facts.
    sa.Column("per_type", sa.Text, nullable=False),
    sa.Column("predicates", sa.Text, nullable=False),
    sa.Column("spellings", sa.Text, nullable=False),
    # JSON list of [partition size, [fact ids, best first]] (at most ``sample_depth`` ids).
    sa.Column("sample", sa.Text, nullable=False),
    sa.Column("sample_depth", sa.Integer, nullable=False),
)

#: Each decision's status and successor (pipeline/succession.py; migration 11), rebuilt
#: from the facts that state them at the end of every write (kodb/decisions.py).
decisions = sa.Table(
    "decisions",
    metadata,
    sa.Column("subject_norm", sa.Text, primary_key=True),
    sa.Column("subject", sa.Text, nullable=False),
    sa.Column("path", sa.Text, nullable=True),
    sa.Column("status", sa.String(16), nullable=True),
    sa.Column("successor", sa.Text, nullable=True),
    sa.Column("successor_norm", sa.Text, nullable=True),
    sa.Column("successor_path", sa.Text, nullable=True),
)

#: Which notes open with which paragraphs (migration 15): the keys (``parse.opening_key``)
#: of each note's openings, the paragraphs its summary is chosen from. A key that opens
#: ``ingest.TEMPLATE_NOTES`` notes or more is a template line, never a summary; ingest keeps
#: the rows in step with the notes in the same transaction.
note_openings = sa.Table(
    "note_openings",
    metadata,
    sa.Column("path", sa.Text, primary_key=True),
    sa.Column("opening", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Index("ix_note_openings_opening", "opening"),
)

#: The SQLite FTS5 table over note_texts (external content, kept in sync by triggers).
note_texts_fts = sa.table(
    "note_texts_fts", sa.column("rowid"), sa.column("note_texts_fts"), sa.column("rank")
)
#: SQLite: FTS5's vocabulary of note_texts_fts, a row per word (migration 14).
note_texts_vocab = sa.table("note_texts_vocab", sa.column("term"), sa.column("doc"))
#: PostgreSQL: the weighted tsvector column of note_texts (generated, GIN-indexed).
NOTE_TSV = "tsv"

#: FTS5's trigram tokenizer indexes 3-character sequences; shorter terms cannot use it.
TRIGRAM = 3

_Model = TypeVar("_Model")


def from_row(cls: type[_Model], row: Any) -> _Model:
    """A model dataclass (Fact, Note, Calibration) from a row whose columns bear its field
    names: the tables name their columns after the model's fields."""
    return cls(**{f.name: getattr(row, f.name) for f in fields(cls)})


# --- migrations -------------------------------------------------------------------------


def _m001_core_tables(conn: Connection, dialect: Dialect) -> None:
    """facts, notes, calibrations and the distinct-subjects table."""
    # notes_v1 and subjects_v1: later migrations add their newer columns themselves.
    for table in (facts, notes_v1, calibrations, subjects_v1):
        table.create(conn, checkfirst=True)


def _m002_subject_trigram_index(conn: Connection, dialect: Dialect) -> None:
    """Trigram acceleration of substring search over distinct subjects."""
    dialect.m002_subject_trigram_index(conn)


def _m003_note_subject(conn: Connection, dialect: Dialect) -> None:
    """``notes.subject``: each note's own subject, so ingest can resolve links to it.

    Existing rows get NULL, which ingest reads as "registered before subjects were recorded"
    and re-extracts those notes once (their link facts predate link resolution).
    """
    present = {c["name"] for c in sa.inspect(conn).get_columns(notes.name)}
    if "subject" not in present:
        # Plain DDL that SQLite and PostgreSQL both accept; the column is nullable, so no
        # table rewrite on either database.
        conn.exec_driver_sql("ALTER TABLE notes ADD COLUMN subject TEXT")


def _m004_note_summary_and_extractor_version(conn: Connection, dialect: Dialect) -> None:
    """``notes.summary`` and ``notes.extractor_version``.

    Existing rows get NULL for both: ingest reads a NULL version as "extracted under older
    rules" and re-extracts those notes, which also fills in their summaries.
    """
    present = {c["name"] for c in sa.inspect(conn).get_columns(notes.name)}
    for name, kind in (("summary", "TEXT"), ("extractor_version", "INTEGER")):
        if name not in present:
            conn.exec_driver_sql(f"ALTER TABLE notes ADD COLUMN {name} {kind}")


def _m005_note_full_text(conn: Connection, dialect: Dialect) -> None:
    """The full-text index of the notes (degraded mode and hybrid retrieval read it).

    SQLite: FTS5 over ``note_texts`` with the ``unicode61`` tokenizer (diacritics already
    removed by kodb/text.py, so it must not fold further: ``remove_diacritics 0``), ranked
    with ``bm25()``. PostgreSQL: a generated ``tsv`` column, the title weighted ``A`` and
    the body ``B`` under the ``simple`` configuration (no stemming, like unicode61), with a
    GIN index, ranked with ``ts_rank_cd``. Existing notes get their text at the next ingest
    (the extractor version moved with this migration).
    """
    note_texts.create(conn, checkfirst=True)
    dialect.m005_note_full_text_index(conn)


def _m006_fact_key_owner(conn: Connection, dialect: Dialect) -> None:
    """``facts.fact_key`` covers the extractor (``model.fact_key``): a fact is owned by the
    extractor that stated it, so an imported fact identical to one ingest extracted is a row
    of its own instead of being merged into ingest's (and deleted with it).

    Every row keeps its data and gets its key recomputed in Python (the NFC and JSON
    encoding of ``model.fact_key``), in id order, a page at a time; no row is merged or
    dropped, since distinct old keys give distinct new ones. A new key never equals an old
    one (old keys hash text with three raw U+001F separators, new ones JSON text, which has
    none), so updating row by row cannot trip the unique constraint. Facts that an earlier
    import lost to an identical ingest fact cannot be told apart and are not restored.
    """

    def fact_key(*parts: str) -> str:
        # model.fact_key as of this migration, frozen here: a later change of the key needs
        # a migration of its own, and must not change what this one computes.
        text = json.dumps([unicodedata.normalize("NFC", p) for p in parts])
        return hashlib.sha256(text.encode("ascii")).hexdigest()

    t = sa.table(
        "facts",
        sa.column("id", sa.Integer),
        sa.column("subject", sa.Text),
        sa.column("predicate", sa.Text),
        sa.column("object", sa.Text),
        sa.column("source_file", sa.Text),
        sa.column("extractor", sa.String),
        sa.column("fact_key", sa.String),
    )
    page = 5000
    update = (
        sa.update(t)
        .where(t.c.id == sa.bindparam("row_id"))
        .values(fact_key=sa.bindparam("new_key"))
    )
    last = -1
    while True:
        rows = conn.execute(
            sa.select(
                t.c.id, t.c.subject, t.c.predicate, t.c.object, t.c.source_file, t.c.extractor
            )
            .where(t.c.id > last)
            .order_by(t.c.id)
            .limit(page)
        ).all()
        if not rows:
            return
        conn.execute(
            update,
            [{"row_id": r.id, "new_key": fact_key(*r[1:])} for r in rows],
        )
        last = rows[-1].id


def _m007_subject_stats(conn: Connection, dialect: Dialect) -> None:
    """``subject_stats``: per-subject summaries kept current by every fact write. It starts
    empty: answers compute a missing summary from the facts, and the next ingest or import
    (``KoDB.refresh_subject_stats``) stores every missing one."""
    subject_stats.create(conn, checkfirst=True)


def _m008_subject_word_index(conn: Connection, dialect: Dialect) -> None:
    """``subjects.words`` (both databases, filled for existing rows a page at a time) and,
    on SQLite, ``subject_words``: an FTS5 table over it, kept in sync by triggers.

    The column holds the runs of word characters only, so the characters where a tokenizer's
    idea of a word could differ from Python's ``\\w`` (combining marks, private use,
    joiners) never reach the tokenizer; ``tokenchars '_'`` keeps ``_`` inside a run as
    ``\\w`` does. No folding of diacritics (subject_norm is already case-folded)."""
    from pipeline.kodb.match import word_runs

    present = {c["name"] for c in sa.inspect(conn).get_columns(subjects.name)}
    if "words" not in present:
        conn.exec_driver_sql("ALTER TABLE subjects ADD COLUMN words TEXT")
    t = sa.table(
        "subjects",
        sa.column("id", sa.Integer),
        sa.column("subject_norm", sa.Text),
        sa.column("words", sa.Text),
    )
    update = sa.update(t).where(t.c.id == sa.bindparam("row_id")).values(words=sa.bindparam("w"))
    last = -1
    while True:
        rows = conn.execute(
            sa.select(t.c.id, t.c.subject_norm).where(t.c.id > last).order_by(t.c.id).limit(5000)
        ).all()
        if not rows:
            break
        conn.execute(update, [{"row_id": r.id, "w": word_runs(r.subject_norm)} for r in rows])
        last = rows[-1].id
    dialect.m008_subject_word_index(conn)


#: PostgreSQL's word index: ``subjects.words`` as an array of its runs (GIN).
PG_WORDS_INDEX = "ix_subjects_words_gin"
#: PostgreSQL's GIN indexes (trigrams, note full text, words): the store empties their
#: pending lists after each write (``Dialect.flush_indexes``).
PG_GIN_INDEXES = ("ix_subjects_norm_trgm", "ix_note_texts_tsv", PG_WORDS_INDEX)
#: The indexed expression; ``Dialect.word_select`` builds the same one (the plan test checks
#: that searches use the index).
PG_WORDS_EXPR = "string_to_array(words, ' ')"


def _m009_pg_subject_word_index(conn: Connection, dialect: Dialect) -> None:
    """PostgreSQL: a GIN index over ``subjects.words`` split into its runs, so a term with
    a word character is looked up by containment of its runs (as SQLite's ``subject_words``
    serves it) instead of a pg_trgm LIKE per term. The runs come from Python
    (``match.word_runs``), so no text-search parser's idea of a word is involved. SQLite:
    nothing to do (migration 8 built its index)."""
    dialect.m009_subject_word_index(conn)


def _m010_fact_file_subject_index(conn: Connection, dialect: Dialect) -> None:
    """The facts' index by file becomes one by (file, subject key, extractor): an answer's
    evidence (its hit files' facts about its subjects) is then found in the index. With the
    old one, every fact of the hit files was read, some 1,600 rows per answer at 1.6M facts,
    or the planner chose the subject index and read a hub subject's thousands. Deletes by
    file and extractor, and the subjects of a file, still use the index's first column."""
    conn.exec_driver_sql("DROP INDEX IF EXISTS ix_facts_source_file_extractor")
    conn.exec_driver_sql(
        f"CREATE INDEX IF NOT EXISTS {FILE_INDEX} ON facts (source_file, subject_key, extractor)"
    )


def _m011_decisions(conn: Connection, dialect: Dialect) -> None:
    """The ``decisions`` table, filled from the facts already stored (ingest re-extracts
    the notes under the new succession rules afterwards: extractor version 6)."""
    from pipeline.kodb import decisions as decision_table

    decisions.create(conn, checkfirst=True)
    decision_table.rebuild(conn)


def _m012_note_date(conn: Connection, dialect: Dialect) -> None:
    """``notes.date``, NULL in existing rows until ingest re-reads their notes (extractor
    version 7)."""
    present = {c["name"] for c in sa.inspect(conn).get_columns(notes.name)}
    if "date" not in present:
        conn.exec_driver_sql('ALTER TABLE notes ADD COLUMN "date" TEXT')


def _m013_stemmed_full_text(conn: Connection, dialect: Dialect) -> None:
    """``note_texts.language`` and ``notes.text_language``: which stemmer each note's words
    went through, and under which vault setting. Existing rows get NULL (whole words, as
    they were indexed), so questions still meet them as before, and the next ingest re-reads
    every note and indexes it stemmed (``ingest._reusable_hash``): the re-index."""
    inspector = sa.inspect(conn)
    if "text_language" not in {c["name"] for c in inspector.get_columns(notes.name)}:
        conn.exec_driver_sql("ALTER TABLE notes ADD COLUMN text_language TEXT")
    if "language" not in {c["name"] for c in inspector.get_columns(note_texts.name)}:
        conn.exec_driver_sql("ALTER TABLE note_texts ADD COLUMN language TEXT")
    conn.exec_driver_sql(
        f"CREATE INDEX IF NOT EXISTS {TEXT_LANGUAGE_INDEX} ON note_texts (language)"
    )


def _word_count(column: sa.ColumnElement[str]) -> sa.ColumnElement[int]:
    """Words of a space-separated column, in SQL both databases run."""
    spaces = sa.func.length(column) - sa.func.length(sa.func.replace(column, " ", ""))
    return sa.case((column == "", 0), else_=spaces + 1)


def _m014_note_text_lengths(conn: Connection, dialect: Dialect) -> None:
    """``note_texts.words`` (each note's indexed words, filled here from the stored text, so
    no re-ingest is needed) with its index, and what each database needs to tell how many
    notes hold a word (``Dialect.m014_note_text_lengths``)."""
    inspector = sa.inspect(conn)
    if "words" not in {c["name"] for c in inspector.get_columns(note_texts.name)}:
        conn.exec_driver_sql("ALTER TABLE note_texts ADD COLUMN words INTEGER")
    t = note_texts

    def fill() -> None:
        conn.execute(
            t.update()
            .where(t.c.words.is_(None))
            .values(words=_word_count(t.c.title) + _word_count(t.c.body))
        )

    dialect.m014_note_text_lengths(conn, fill)
    conn.exec_driver_sql(f"CREATE INDEX IF NOT EXISTS {TEXT_WORDS_INDEX} ON note_texts (words)")


def _m015_note_openings(conn: Connection, dialect: Dialect) -> None:
    """``note_openings``, empty: extractor version 10 re-reads every note, which fills it
    before any summary is chosen by it."""
    note_openings.create(conn, checkfirst=True)


def _m016_note_private(conn: Connection, dialect: Dialect) -> None:
    """``notes.private``, NULL in existing rows: ingest re-reads those notes once
    (``ingest._reusable_hash``), which records it."""
    if "private" not in {c["name"] for c in sa.inspect(conn).get_columns(notes.name)}:
        conn.exec_driver_sql('ALTER TABLE notes ADD COLUMN "private" BOOLEAN')


@dataclass(frozen=True)
class Migration:
    """One schema change: ``apply(conn, dialect)`` runs once, recorded under ``version``."""

    version: int
    name: str
    apply: Callable[[Connection, Dialect], None]


#: Ordered; append only. Versions are recorded in kodb_migrations.
MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "core_tables", _m001_core_tables),
    Migration(2, "subject_trigram_index", _m002_subject_trigram_index),
    Migration(3, "note_subject", _m003_note_subject),
    Migration(4, "note_summary_and_extractor_version", _m004_note_summary_and_extractor_version),
    Migration(5, "note_full_text", _m005_note_full_text),
    Migration(6, "fact_key_owner", _m006_fact_key_owner),
    Migration(7, "subject_stats", _m007_subject_stats),
    Migration(8, "subject_word_index", _m008_subject_word_index),
    Migration(9, "pg_subject_word_index", _m009_pg_subject_word_index),
    Migration(10, "fact_file_subject_index", _m010_fact_file_subject_index),
    Migration(11, "decisions", _m011_decisions),
    Migration(12, "note_date", _m012_note_date),
    Migration(13, "stemmed_full_text", _m013_stemmed_full_text),
    Migration(14, "note_text_lengths", _m014_note_text_lengths),
    Migration(15, "note_openings", _m015_note_openings),
    Migration(16, "note_private", _m016_note_private),
)

SCHEMA_VERSION = MIGRATIONS[-1].version


def applied_versions(conn: Connection) -> set[int]:
    """Versions recorded in kodb_migrations (empty for a new database)."""
    if not sa.inspect(conn).has_table(migrations_table.name):
        return set()
    return set(conn.execute(sa.select(migrations_table.c.version)).scalars())


def migrate(conn: Connection, dialect: Dialect) -> list[int]:
    """Apply pending migrations in order inside the caller's transaction; return their versions.

    The caller holds the write lock (SQLite ``BEGIN IMMEDIATE``, a PostgreSQL advisory lock)
    so two processes opening a new database do not both migrate it.
    """
    migrations_table.create(conn, checkfirst=True)
    done = applied_versions(conn)
    unknown = sorted(done - {m.version for m in MIGRATIONS})
    if unknown:
        raise SchemaTooNew(max(unknown))
    ran: list[int] = []
    for migration in MIGRATIONS:
        if migration.version in done:
            continue
        migration.apply(conn, dialect)
        conn.execute(
            migrations_table.insert().values(
                version=migration.version, name=migration.name, applied_at=time.time()
            )
        )
        ran.append(migration.version)
    return ran


class SchemaTooNew(Exception):
    """The database was migrated by a newer vault-ko (translated to KodbError by the store)."""

    def __init__(self, version: int) -> None:
        self.version = version
        super().__init__(f"schema version {version} is newer than this vault-ko knows")
