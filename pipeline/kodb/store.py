"""KoDB: the facts database behind one small API (SQLite file by default, PostgreSQL by URL).

The store owns the engine and the transactions: every method runs in one transaction, and
SQLite's writers take the write lock up front (``BEGIN IMMEDIATE``) so two writers queue
instead of failing mid-transaction. ``_translate`` is the one place inside a transaction
where SQLAlchemy's exceptions become ``KodbError`` (``engine.refused`` is the other, outside).
The work is done by one module per job, each a set of functions of an open connection:

engine.py          URLs and engines (scratch.py: throwaway PostgreSQL databases)
notes.py           the vault registry and the notes' full text
writes.py          ingest runs and facts imports (facts, subjects, summaries, texts together)
facts.py           facts by subject or file, per-subject summaries for ranking
subject_search.py  subjects holding a term at word boundaries
stats.py           counts and calibrations
dialects/          what differs between SQLite and PostgreSQL, one class each
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from pipeline.config import mask_url
from pipeline.errors import KodbError
from pipeline.kodb import (
    decisions,
    facts,
    notes,
    schema,
    stats,
    subject_search,
    summaries,
    writes,
)
from pipeline.kodb.dialects import Dialect
from pipeline.kodb.engine import open_engine, short
from pipeline.kodb.notes import PG_RANK_NORMALIZATION, TITLE_WEIGHT
from pipeline.kodb.writes import IMPORT_BATCH, ImportResult
from pipeline.model import Calibration, Fact, Note, NoteStamp, NoteText, SubjectSummary
from pipeline.succession import Succession

if TYPE_CHECKING:
    from pipeline.kodb.resident import ResidentFacts


class KoDB:
    """The KO-DB store. Open with ``KoDB.open(url)``; usable as a context manager."""

    def __init__(
        self, engine: Engine, url: str, dialect: Dialect, file: Path | None = None
    ) -> None:
        self._engine = engine
        self._url = url
        self._sql = dialect
        self._file = file
        self._identity = _identity(file) if file is not None else None

    # --- lifecycle ----------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        url: str,
        *,
        create: bool = True,
        base_dir: Path | None = None,
        confine_to: Path | None = None,
    ) -> KoDB:
        """Connect to ``url``, migrating the schema. A SQLite file that does not exist is
        made only when ``create`` (writers: ingest, import, sync), with its missing folders
        only inside ``confine_to`` (the state dir); a relative path is read from
        ``base_dir`` (the vault). KodbError for a reader of a missing KO-DB."""
        engine, dialect, file = open_engine(
            url, create=create, base_dir=base_dir, confine_to=confine_to
        )
        db = cls(engine, mask_url(url), dialect, file)
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
        return self._sql.name

    @property
    def sql_dialect(self) -> Dialect:
        """The database's side of KO-DB (``dialects/``)."""
        return self._sql

    def check_file(self) -> None:
        """KodbError when the database file this store opened was deleted or replaced since
        (a long-lived reader, the service, asks before each answer: its pooled connections
        would otherwise answer from a deleted file); nothing for a server's database."""
        if self._file is None or self._identity is None:
            return
        now = _identity(self._file)
        if now is None:
            raise KodbError(
                f"KO-DB at {self._file} was deleted while open; nothing is answered from it "
                "(`vault-ko sync` makes it again; then restart)"
            )
        if now != self._identity:
            raise KodbError(
                f"KO-DB at {self._file} was replaced by another file while open; restart to "
                "answer from the new one"
            )

    def file_stamp(self) -> list[Any] | None:
        """The database file's path, identity, size and modification time (what a verified
        integrity check is recorded against); None for a server's database or a file gone."""
        st = _stat(self._file) if self._file is not None else None
        if st is None:
            return None
        return [str(self._file), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]

    def check_integrity(self) -> None:
        """KodbError naming what is damaged, when a quick check of the database finds
        anything (writers refuse to write into a damaged KO-DB, readers to answer from it)."""
        try:
            with self._tx() as conn:
                found = self._sql.damage(conn)
        except KodbError as exc:  # a damaged header fails before the check can run
            found = str(exc)
        if found:
            found = " ".join(found.split())  # SQLite lists the damage a line each: one line
            raise KodbError(
                f"KO-DB at {self._url} is damaged ({found[:300]}); nothing was read or "
                "written. Restore it from a backup, or delete it and run `vault-ko sync` to "
                "rebuild it from the vault (imported facts must be imported again)"
            )

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
            raise KodbError(f"KO-DB ({self.dialect}) at {self._url}: {short(exc)}") from exc

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
            self._sql.lock_migrations(conn)
            schema.migrate(conn, self._sql)

    def schema_versions(self) -> list[int]:
        """Applied migration versions, ascending."""
        with self._tx() as conn:
            return sorted(schema.applied_versions(conn))

    # --- vault registry and full text ---------------------------------------------------

    def notes(self) -> dict[str, Note]:
        """The vault registry: path -> Note."""
        with self._tx() as conn:
            return notes.all_notes(conn)

    def notes_by_type(self) -> dict[str, int]:
        """Registered notes per source type (one statement, no rows read)."""
        with self._tx() as conn:
            return notes.notes_by_type(conn)

    def count_notes(self, source_type: str | None = None) -> int:
        """Registered notes (of one source type when given)."""
        with self._tx() as conn:
            return notes.count_notes(conn, source_type)

    def note_stamps(self) -> dict[str, NoteStamp]:
        """The registry's mtime, size and content hash of every note (``notes.note_stamps``)."""
        with self._tx() as conn:
            return notes.note_stamps(conn)

    def notes_at(self, paths: Iterable[str]) -> dict[str, Note]:
        """Registry rows of these note paths (paths without a row are left out)."""
        with self._tx() as conn:
            return notes.notes_at(conn, paths)

    def notes_dated(
        self, start: str | None, end: str, limit: int, source_type: str | None = None
    ) -> list[Note]:
        """The ``limit`` newest notes (of ``source_type``) dated from ``start`` (None: any
        day) to ``end`` (``notes.notes_dated``)."""
        with self._tx() as conn:
            return notes.notes_dated(conn, self._sql, start, end, limit, source_type)

    def search_notes(
        self,
        terms: Sequence[str],
        limit: int,
        *,
        every: bool = False,
        title_weight: float = TITLE_WEIGHT,
        pg_normalization: int = PG_RANK_NORMALIZATION,
    ) -> list[tuple[str, float]]:
        """Notes matching any of these words (with ``every``, all of them), best first:
        (path, BM25), larger is better.

        The database finds the candidates by its own measure (SQLite FTS5's ``bm25()``,
        PostgreSQL's ``ts_rank_cd`` with ``pg_normalization`` as its length normalisation
        flag) and kodb/bm25.py orders them, the same on both; a title word counts
        ``title_weight`` times a body word in each. The defaults are the measured choices
        (bench/retrieval_rules.py). Ties go to the path.
        """
        with self._tx() as conn:
            return notes.search_notes(
                conn, self._sql, terms, limit, title_weight, pg_normalization, every=every
            )

    def note_texts(self) -> dict[str, tuple[str, str]]:
        """Every indexed note: path -> (title words, body words), as the index holds them."""
        with self._tx() as conn:
            return notes.note_texts(conn)

    def word_shares(self, terms: Sequence[str], excluding: Sequence[str] = ()) -> dict[str, float]:
        """term -> the share of the indexed notes (but ``excluding``) holding it
        (``notes.word_shares``)."""
        with self._tx() as conn:
            return notes.word_shares(conn, self._sql, terms, excluding)

    def index_languages(self) -> tuple[str | None, ...]:
        """The stemmers the indexed words went through (None: whole words); a question is
        looked up under each (``text.query_words``)."""
        with self._tx() as conn:
            return notes.index_languages(conn)

    def note_languages(self, paths: Iterable[str]) -> dict[str, str | None]:
        """The stemmer each of these notes' words went through (None: whole words)."""
        with self._tx() as conn:
            return notes.note_languages(conn, paths)

    def openings_of(self, paths: Iterable[str]) -> dict[str, set[int]]:
        """The stored opening keys of these notes (``notes.openings_of``)."""
        with self._tx() as conn:
            return notes.openings_of(conn, self._sql, paths)

    def opening_counts(self, keys: Iterable[int]) -> dict[int, int]:
        """How many notes open with each of these keys (``notes.opening_counts``)."""
        with self._tx() as conn:
            return notes.opening_counts(conn, self._sql, keys)

    def notes_opening_with(self, keys: Iterable[int]) -> set[str]:
        """The notes holding any of these opening keys (``notes.notes_opening_with``)."""
        with self._tx() as conn:
            return notes.notes_opening_with(conn, self._sql, keys)

    def note_text_count(self) -> int:
        """Notes in the full-text index."""
        with self._tx() as conn:
            return notes.note_text_count(conn)

    # --- writes -------------------------------------------------------------------------

    def apply_ingest(
        self,
        upserts: Sequence[tuple[Note, Sequence[Fact]]],
        removed: Sequence[str],
        extractor: str = "ingest",
        texts: Sequence[NoteText] = (),
        openings: Mapping[str, Iterable[int]] | None = None,
    ) -> None:
        """Record one ingest run in ONE transaction.

        Upserts the notes rows; for each upserted note replaces that file's facts of this
        ``extractor`` with the given ones (stored with this extractor; duplicates by
        fact_key are ignored); for each removed path deletes its notes row and this
        extractor's facts of that file. Facts of other extractors are never touched.
        ``texts`` replace those notes' full text, and ``openings`` (path -> the keys of
        its openings, ``ParsedNote.openings``) their openings (an upserted note left out
        keeps none); a removed note's text and openings go with it. The changed subjects'
        stored summaries are dropped and stored anew in that transaction too.
        """
        with self._tx(write=True, ingest=True) as conn:
            writes.apply_ingest(conn, self._sql, upserts, removed, extractor, texts, openings or {})

    def restamp(self, stamps: Sequence[tuple[str, float, int]]) -> None:
        """New (path, mtime, bytes) for notes whose bytes did not change (``notes.restamp``)."""
        if not stamps:
            return  # no write transaction for nothing: a no-op sync takes no write lock
        with self._tx(write=True) as conn:
            notes.restamp(conn, stamps)

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
        with self._tx(write=True) as conn:
            return writes.import_facts(conn, self._sql, facts, batch_size)

    def refresh_subject_stats(self) -> int:
        """Store the summary of every subject that has none (a KO-DB just upgraded; ingest
        and import store theirs in their own transaction); return how many were stored."""
        with self._tx() as conn:  # a read first: nothing missing takes no write lock
            if not summaries.missing_keys(conn):
                return 0
        with self._tx(write=True) as conn:
            self._sql.lock_writers(conn)
            return writes.refresh_stats(conn, self._sql)

    def analyze(self) -> None:
        """Refresh planner statistics (worth it after a large import)."""
        with self._tx(write=True) as conn:
            self._sql.analyze(conn)

    # --- reading facts ------------------------------------------------------------------

    def facts_for_subjects(self, subject_norms: Iterable[str]) -> list[Fact]:
        """All facts of these subject_norms, sorted by subject_norm, then predicate, object,
        source_file, extractor."""
        with self._tx() as conn:
            return facts.facts_for_subjects(conn, subject_norms)

    def subject_source_files(self, subject_norms: Iterable[str]) -> set[str]:
        """The distinct source files of these subjects' facts (privacy.py checks them)."""
        with self._tx() as conn:
            return facts.subject_source_files(conn, subject_norms)

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
        files' facts out (at most ``facts.MAX_EXCLUDED_FILES``; both computed from the
        facts); subjects without facts left are not in the result. ``cache``
        (summaries.ReadCache) keeps the stored rows and sample facts read, for a caller that
        drops it on writes.
        """
        with self._tx() as conn:
            return facts.subject_summaries(
                conn,
                self._sql,
                subject_norms,
                sample_size=sample_size,
                evidence_files=evidence_files,
                only_files=only_files,
                exclude_files=exclude_files,
                cache=cache,
            )

    def subjects_for_source_files(self, paths: Iterable[str]) -> set[str]:
        """subject_norms of the facts coming from these source files."""
        return set().union(*self.subjects_by_source_file(paths).values())

    def subjects_by_source_file(self, paths: Iterable[str]) -> dict[str, set[str]]:
        """For each of these source files, the subject_norms of its facts (every path is a
        key; a file without facts maps to an empty set)."""
        with self._tx() as conn:
            return facts.subjects_by_source_file(conn, paths)

    def fact_objects(
        self, predicates: Sequence[str], extractor: str = "ingest"
    ) -> set[tuple[str, str]]:
        """Distinct (source_file, object) of one extractor's facts with these predicates.

        Ingest reads the ``links_to`` objects to find the notes whose links may resolve
        differently after notes were added, removed or retitled.
        """
        with self._tx() as conn:
            return facts.fact_objects(conn, predicates, extractor)

    def resident_copy(self, is_private: Callable[[str], bool] | None = None) -> ResidentFacts:
        """Every fact as in-memory columns for answers (``resident.py``), read in one
        statement; the facts of files ``is_private`` names are left out."""
        from pipeline.kodb import resident

        with self._tx() as conn:
            return resident.build(conn, is_private)

    # --- subject search -----------------------------------------------------------------

    def search_subjects(self, term: str, limit: int | None = None) -> list[str]:
        """subject_norms matching ``term`` at word boundaries, sorted; at most ``limit``."""
        return self.search_subjects_many([term], limit=limit)[term]

    def search_subjects_many(
        self, terms: Sequence[str], limit: int | None = None
    ) -> dict[str, list[str]]:
        """``search_subjects`` for many terms, keyed by the terms as given; each list is
        sorted and cut to ``limit``."""
        with self._tx() as conn:
            return subject_search.search_subjects_many(conn, self._sql, terms, limit)

    def explain_search(self, term: str) -> str:
        """The database's query plan for one term's pre-filter (to check index use)."""
        with self._tx() as conn:
            return subject_search.explain(conn, self._sql, term)

    # --- counts and calibrations --------------------------------------------------------

    def subject_norms(self) -> list[str]:
        """Every distinct subject_norm, sorted by code point."""
        with self._tx() as conn:
            return stats.subject_norms(conn)

    def count_facts(self) -> int:
        """Number of stored facts."""
        with self._tx() as conn:
            return stats.count_facts(conn)

    def facts_by_predicate(self) -> dict[str, int]:
        """predicate -> fact count, sorted by predicate."""
        with self._tx() as conn:
            return stats.facts_by_predicate(conn)

    def fact_source_files(self) -> dict[str, int]:
        """source_file -> fact count, sorted by path (freshness looks for orphan facts)."""
        with self._tx() as conn:
            return stats.fact_source_files(conn)

    def save_calibration(self, cal: Calibration) -> None:
        """Store one calibration measurement (history is kept)."""
        with self._tx(write=True) as conn:
            stats.save_calibration(conn, cal)

    def latest_calibration(
        self, embedder: str | None = None, dims: int | None = None
    ) -> Calibration | None:
        """The most recent calibration, optionally for one embedder and/or dimension."""
        with self._tx() as conn:
            return stats.latest_calibration(conn, embedder, dims)

    def succession(self) -> Succession:
        """Every decision's status and successor (the ``decisions`` table)."""
        with self._tx() as conn:
            return decisions.read(conn)

    def decision_facts(self) -> list[Fact]:
        """The facts decisions are read from (statuses and successions)."""
        with self._tx() as conn:
            return decisions.decision_facts(conn)


def _stat(path: Path) -> os.stat_result | None:
    """The file's stat; None when it is gone."""
    try:
        return path.stat()
    except FileNotFoundError:
        return None


def _identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of a file; None when it is gone."""
    st = _stat(path)
    return None if st is None else (st.st_dev, st.st_ino)
