"""What an answer reads from KO-DB: the one interface of the store and of every view of it.

Four classes implement it, each explicitly (no attribute fall-through, so what a view
changes and what it passes on is written in the view):

- ``store.KoDB``: the database itself;
- ``resident.ResidentKodb``: the service's in-memory copy of the facts and the registry;
- ``privacy.PublicKodb``: the store without the notes the user marked private;
- ``batch.memo.CachedKodb``: a memo of one batch of questions (load-context, the service).

A method that returns notes, subjects or facts is one a private view must filter
(``tests/unit/kodb/test_reader.py`` holds each view to it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from pipeline.model import Calibration, Fact, Note, SubjectSummary
    from pipeline.succession import Succession


@runtime_checkable
class KodbReader(Protocol):
    """KO-DB as answers, the bridge and the evaluation read it."""

    # --- the registry and the notes' full text ------------------------------------------

    def notes(self) -> Mapping[str, Note]:
        """The vault registry: path -> Note."""
        ...

    def notes_at(self, paths: Iterable[str]) -> dict[str, Note]:
        """Registry rows of these note paths (paths without a row are left out)."""
        ...

    def count_notes(self, source_type: str | None = None) -> int:
        """Registered notes (of one source type when given)."""
        ...

    def notes_dated(
        self, start: str | None, end: str, limit: int, source_type: str | None = None
    ) -> list[Note]:
        """The ``limit`` newest notes (of ``source_type`` when given) dated from ``start``
        (None: any day) to ``end``, ISO days, both inclusive: newest first, ties by path."""
        ...

    def search_notes(
        self, terms: Sequence[str], limit: int, *, every: bool = False
    ) -> list[tuple[str, float]]:
        """The ``limit`` best notes of a full-text search: (path, score), best first; with
        ``every``, only notes holding every one of the words."""
        ...

    def note_texts(self) -> dict[str, tuple[str, str]]:
        """Every indexed note: path -> (title words, body words)."""
        ...

    def note_languages(self, paths: Iterable[str]) -> dict[str, str | None]:
        """The stemmer each of these notes' words went through (None: whole words); notes
        not in the full-text index are left out."""
        ...

    def word_shares(self, terms: Sequence[str]) -> dict[str, float]:
        """term -> the share of the indexed notes holding it (0.0: none); a private view
        counts its public notes only."""
        ...

    def index_languages(self) -> tuple[str | None, ...]:
        """The stemmers the indexed words went through (None: whole words)."""
        ...

    # --- subjects -----------------------------------------------------------------------

    def subject_norms(self) -> list[str]:
        """Every subject, sorted by code point."""
        ...

    def search_subjects(self, term: str, limit: int | None = None) -> list[str]:
        """Subjects holding ``term`` at word boundaries, sorted; at most ``limit``."""
        ...

    def search_subjects_many(
        self, terms: Sequence[str], limit: int | None = None
    ) -> dict[str, list[str]]:
        """``search_subjects`` for many terms, keyed by the terms as given."""
        ...

    def subjects_by_source_file(self, paths: Iterable[str]) -> dict[str, set[str]]:
        """Per source file, the subjects of its facts."""
        ...

    def subjects_for_source_files(self, paths: Iterable[str]) -> set[str]:
        """The subjects of these files' facts."""
        ...

    # --- facts --------------------------------------------------------------------------

    def facts_for_subjects(self, subject_norms: Iterable[str]) -> list[Fact]:
        """Every fact of these subjects, in the store's order."""
        ...

    def subject_source_files(self, subject_norms: Iterable[str]) -> set[str]:
        """The source files of these subjects' facts."""
        ...

    def subject_summaries(
        self,
        subject_norms: Iterable[str],
        *,
        sample_size: int,
        evidence_files: Iterable[str] = (),
        only_files: Iterable[str] | None = None,
        exclude_files: Iterable[str] = (),
        cache: Any = None,
    ) -> dict[str, SubjectSummary]:
        """Per subject, its counts and a sample that ranks like all its facts."""
        ...

    # --- calibration and lifecycle ------------------------------------------------------

    def latest_calibration(
        self, embedder: str | None = None, dims: int | None = None
    ) -> Calibration | None:
        """The most recent noise-floor calibration (of one model and dimension if given)."""
        ...

    # --- decisions ----------------------------------------------------------------------

    def succession(self) -> Succession:
        """Every decision's status and successor (pipeline/succession.py)."""
        ...

    def decision_facts(self) -> list[Fact]:
        """The facts decisions are read from: statuses and successions."""
        ...

    def close(self) -> None:
        """Release what this reader owns (a view owns nothing: its store is closed by the
        store's owner)."""
        ...


#: The methods of ``KodbReader`` (the test of every view walks them).
READER_METHODS: tuple[str, ...] = tuple(
    name
    for name in vars(KodbReader)
    if not name.startswith("_") and callable(getattr(KodbReader, name))
)
