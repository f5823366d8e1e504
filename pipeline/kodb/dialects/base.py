"""What differs between the databases KO-DB runs on, behind one class per database.

``sqlite.py`` and ``postgresql.py`` mirror each other: how an engine is made, how many rows
are inserted at once, how a list travels as one parameter, the full-text and word indexes
and how they are searched, locks, planner statistics, and the DDL of the migrations that
differ. Everything else in KO-DB is written once, in SQLAlchemy Core, against this class:
no module outside this package asks which database it is talking to.

A dialect holds no state; one instance serves every store of its database.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine


class Dialect(ABC):
    """One database's side of KO-DB."""

    #: SQLAlchemy's backend name: ``"sqlite"`` or ``"postgresql"``.
    name: ClassVar[str]
    #: What turns a statement into its query plan.
    explain_prefix: ClassVar[str]

    # --- engines and transactions -------------------------------------------------------

    def driver_url(self, url: sa.URL) -> sa.URL:
        """``url`` with the driver KO-DB uses when it names none."""
        return url

    @abstractmethod
    def locate(
        self,
        url: sa.URL,
        shown: str,
        *,
        create: bool,
        base_dir: Path | None,
        confine_to: Path | None,
    ) -> tuple[sa.URL, Path | None]:
        """``url`` as the engine should open it, checked first, and the database's file
        when vault-ko manages one (its identity is checked while open:
        ``KoDB.check_file``; None for a server's). A KO-DB that does not exist is made only
        when ``create`` (a writer), its missing folders only inside ``confine_to`` (the
        state dir; anywhere when None); a relative file path is read from ``base_dir`` (the
        vault) when given. KodbError otherwise."""

    @abstractmethod
    def create_engine(self, url: sa.URL, shown: str) -> Engine:
        """An engine for ``url`` (``shown``: the URL with its password masked, for errors)."""

    @abstractmethod
    def lock_migrations(self, conn: Connection) -> None:
        """Serialise schema migrations of concurrent openers (in the migrating transaction)."""

    @abstractmethod
    def lock_writers(self, conn: Connection) -> None:
        """Serialise fact writes with summary refreshes until this transaction ends."""

    # --- statements ---------------------------------------------------------------------

    @abstractmethod
    def insert(self, table: sa.Table) -> Any:
        """An INSERT of ``table`` that supports ON CONFLICT."""

    def one_of(self, column: sa.ColumnElement[Any], values: Sequence[Any]) -> Any:
        """``column IN (values)``."""
        return column.in_(values)

    def code_point(self, column: Any) -> Any:
        """``column`` ordered by code point, as Python orders str."""
        return column

    @abstractmethod
    def ids_select(self, param: str) -> sa.Select[Any]:
        """The integers of the JSON list bound to ``param``, as a one-column SELECT."""

    @abstractmethod
    def insert_rows(
        self,
        conn: Connection,
        table: sa.Table,
        rows: Sequence[dict[str, Any]],
        key: sa.Column[Any] | None,
        returning: Sequence[sa.Column[Any]] = (),
    ) -> list[Any]:
        """INSERT … ON CONFLICT (key) DO NOTHING for many rows (a plain INSERT without
        ``key``); the ``returning`` columns of the rows really inserted, as tuples."""

    # --- full text and subject search ---------------------------------------------------

    @abstractmethod
    def search_notes(
        self,
        conn: Connection,
        words: Sequence[str],
        limit: int,
        title_weight: float,
        pg_normalization: int,
        every: Sequence[Sequence[str]] = (),
    ) -> list[tuple[str, float]]:
        """The candidates of a full-text search: notes holding any of these folded words
        (with ``every``, groups of spellings, notes holding one spelling of each group),
        best first by the database's own measure, (path, score), larger is better; ties in
        path order (``notes.search_notes`` then orders them by BM25)."""

    @abstractmethod
    def notes_holding(self, conn: Connection, words: Sequence[str]) -> dict[str, int]:
        """How many indexed notes hold each of these folded words (a word none holds is
        left out)."""

    @abstractmethod
    def word_term(self, runs: str) -> str:
        """A term's word runs as ``word_select`` takes them."""

    @abstractmethod
    def word_select(self) -> sa.Select[Any]:
        """(position in the JSON list ``:phrases``, subject_norm) for each term's candidates
        from the word index: a superset of its word-boundary matches."""

    @abstractmethod
    def candidate_select(self, term_norm: str, tag: int) -> sa.Select[Any]:
        """(``tag``, subject_norm) candidates of a term without a word character: a
        superset of its word-boundary matches."""

    # --- maintenance --------------------------------------------------------------------

    @abstractmethod
    def damage(self, conn: Connection) -> str | None:
        """What a quick integrity check of the database finds wrong (None: nothing)."""

    @abstractmethod
    def analyze(self, conn: Connection) -> None:
        """Refresh the planner's statistics."""

    @abstractmethod
    def before_bulk_refresh(self, conn: Connection, missing: int, step: int) -> None:
        """Called in a write transaction before ``missing`` subject summaries are stored,
        ``step`` at a time."""

    @abstractmethod
    def flush_indexes(self, conn: Connection) -> None:
        """Bring deferred index work up to date at the end of a write transaction."""

    # --- the DDL of migrations that differ per database (the rest is in schema.py) ------

    @abstractmethod
    def m002_subject_trigram_index(self, conn: Connection) -> None:
        """Substring search over the distinct subjects."""

    @abstractmethod
    def m005_note_full_text_index(self, conn: Connection) -> None:
        """The notes' full-text index over ``note_texts``."""

    @abstractmethod
    def m014_note_text_lengths(self, conn: Connection, fill: Callable[[], None]) -> None:
        """Run ``fill`` (it writes ``note_texts.words`` on every row) without rebuilding the
        full-text index, and make whatever ``notes_holding`` reads."""

    @abstractmethod
    def m008_subject_word_index(self, conn: Connection) -> None:
        """The word index over ``subjects.words``, where migration 8 builds it."""

    @abstractmethod
    def m009_subject_word_index(self, conn: Connection) -> None:
        """The word index over ``subjects.words``, where migration 9 builds it."""
