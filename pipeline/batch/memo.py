"""A memoising view of KO-DB for one batch of questions (load-context).

The bridge and the rank stage of every prompt ask for the same files, titles and subjects
again and again; the view answers repeats from memory and fetches what is new in one
statement, so a batch costs a few set-based statements instead of several per prompt.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from pipeline.model import Calibration, Fact, Note, SubjectSummary

if TYPE_CHECKING:
    from pipeline.kodb.reader import KodbReader
    from pipeline.succession import Succession

#: KO-DB cache entries kept across chunks before the cache is emptied (memory stays flat).
CACHE_MAX_ENTRIES: Final = 200_000


class CachedKodb:
    """A memoising view of a KoDB for one batch: the bridge and the rank stage of every
    prompt ask for the same files, titles and subjects again and again.

    Results are identical to the store's (same sets, same lists, facts in the same order);
    missing keys of a call are fetched in one statement. The rest of ``KodbReader`` is
    passed on, method by method below.
    """

    def __init__(self, kodb: KodbReader, *, max_entries: int = CACHE_MAX_ENTRIES) -> None:
        self._kodb = kodb
        self._max_entries = max_entries
        self._by_file: dict[str, frozenset[str] | None] = {}
        self._by_term: dict[str, tuple[str, ...]] = {}
        self._facts: dict[str, tuple[Fact, ...]] = {}
        self._counted: dict[str, SubjectSummary | None] = {}
        self._notes: Mapping[str, Note] | None = None
        self._rows: dict[str, Note | None] = {}
        self._languages: dict[str, tuple[bool, str | None]] = {}  # path -> (indexed, language)
        self._counts: dict[str | None, int] = {}
        self._searches: dict[tuple[tuple[str, ...], int, bool], tuple[tuple[str, float], ...]] = {}
        self._dated: dict[tuple[str | None, str, int, str | None], tuple[Note, ...]] = {}
        self._shares: dict[str, float] = {}
        self._succession: Succession | None = None
        # The stored summaries' rows and sample facts: a question's sample reads only its
        # own files' facts and what no earlier question read (a hub's lists, read by most).
        from pipeline.kodb.summaries import ReadCache

        self._stored = ReadCache()
        self.statements = 0

    # -- passed on: read once per batch at most, or never on an answer's path -------------
    def note_texts(self) -> dict[str, tuple[str, str]]:
        return self._kodb.note_texts()  # type: ignore[no-any-return]

    def index_languages(self) -> tuple[str | None, ...]:
        return self._kodb.index_languages()  # type: ignore[no-any-return]

    def word_shares(self, terms: Sequence[str]) -> dict[str, float]:
        """The share of notes holding each word; the words not yet asked for, in one call."""
        missing = [t for t in dict.fromkeys(terms) if t not in self._shares]
        if missing:
            self.statements += 1
            self._shares.update(self._kodb.word_shares(missing))
        return {t: self._shares.get(t, 0.0) for t in terms}

    def subject_norms(self) -> list[str]:
        return self._kodb.subject_norms()  # type: ignore[no-any-return]

    def search_subjects(self, term: str, limit: int | None = None) -> list[str]:
        return self.search_subjects_many([term], limit=limit)[term]

    def subjects_for_source_files(self, paths: Iterable[str]) -> set[str]:
        return set().union(*self.subjects_by_source_file(paths).values())

    def subject_source_files(self, subject_norms: Iterable[str]) -> set[str]:
        return self._kodb.subject_source_files(subject_norms)  # type: ignore[no-any-return]

    def latest_calibration(
        self, embedder: str | None = None, dims: int | None = None
    ) -> Calibration | None:
        return self._kodb.latest_calibration(embedder, dims)  # type: ignore[no-any-return]

    def succession(self) -> Succession:
        """Read once per memo (a batch of questions over unchanged facts)."""
        if self._succession is None:
            self._succession = self._kodb.succession()
        return self._succession

    def decision_facts(self) -> list[Fact]:
        return self._kodb.decision_facts()  # type: ignore[no-any-return]

    # -- memoised ---------------------------------------------------------------------------
    def notes_at(self, paths: Iterable[str]) -> dict[str, Note]:
        """Registry rows of these paths; new paths are fetched in one call (none once the
        whole registry was read: the service's warm search reads it)."""
        wanted = sorted(set(paths))
        if self._notes is not None:
            return {p: row for p in wanted if (row := self._notes.get(p)) is not None}
        missing = [p for p in wanted if p not in self._rows]
        if missing:
            self.statements += 1
            found = self._kodb.notes_at(missing)
            for path in missing:
                self._rows[path] = found.get(path)
        return {p: row for p in wanted if (row := self._rows[p]) is not None}

    def note_languages(self, paths: Iterable[str]) -> dict[str, str | None]:
        """Each note's index language, read once per batch (hybrid asks for every answer's
        candidates, which repeat across prompts)."""
        wanted = sorted(set(paths))
        missing = [p for p in wanted if p not in self._languages]
        if missing:
            self.statements += 1
            found = self._kodb.note_languages(missing)
            for path in missing:
                self._languages[path] = (path in found, found.get(path))
        out: dict[str, str | None] = {}
        for path in wanted:
            indexed, language = self._languages[path]
            if indexed:
                out[path] = language
        return out

    def search_notes(
        self, terms: Sequence[str], limit: int, *, every: bool = False
    ) -> list[tuple[str, float]]:
        """Full-text note search; a repeated question (same words, same limit) is served
        from memory."""
        key = (tuple(terms), limit, every)
        if key not in self._searches:
            self.statements += 1
            self._searches[key] = tuple(self._kodb.search_notes(terms, limit, every=every))
        return list(self._searches[key])

    def notes_dated(
        self, start: str | None, end: str, limit: int, source_type: str | None = None
    ) -> list[Note]:
        """The newest notes dated from ``start`` to ``end``; the same days, limit and type
        again are served from memory."""
        key = (start, end, limit, source_type)
        if key not in self._dated:
            self.statements += 1
            self._dated[key] = tuple(self._kodb.notes_dated(start, end, limit, source_type))
        return list(self._dated[key])

    def count_notes(self, source_type: str | None = None) -> int:
        """Registered notes (of one source type), counted once per batch."""
        if source_type not in self._counts:
            self.statements += 1
            self._counts[source_type] = self._kodb.count_notes(source_type)
        return self._counts[source_type]

    def notes(self) -> Mapping[str, Note]:
        """The note registry, read once: choosing the search path and loading the exact
        search both need it, and load-context never writes to it."""
        if self._notes is None:
            self.statements += 1
            self._notes = self._kodb.notes()
        return self._notes

    def subjects_by_source_file(self, paths: Iterable[str]) -> dict[str, set[str]]:
        """Per file, the subject_norms of its facts; new files are fetched in one call."""
        wanted = sorted(set(paths))
        missing = [p for p in wanted if p not in self._by_file]
        if missing:
            self.statements += 1
            found = self._kodb.subjects_by_source_file(missing)
            for path in missing:
                self._by_file[path] = frozenset(found[path]) if path in found else None
        # Only the paths the store answered for: a private view leaves its notes' out.
        return {p: set(subjects) for p in wanted if (subjects := self._by_file[p]) is not None}

    def search_subjects_many(
        self, terms: Sequence[str], limit: int | None = None
    ) -> dict[str, list[str]]:
        """Word-boundary subject search; new terms are searched in one call."""
        if limit is not None:
            return self._kodb.search_subjects_many(terms, limit=limit)
        missing = sorted({t for t in terms if t not in self._by_term})
        if missing:
            self.statements += 1
            fetched = self._kodb.search_subjects_many(missing)
            for term in missing:
                self._by_term[term] = tuple(fetched.get(term, ()))
        return {t: list(self._by_term[t]) for t in terms}

    def facts_for_subjects(self, subject_norms: Iterable[str]) -> list[Fact]:
        """All facts of these subjects, sorted as the store sorts them; new subjects are
        fetched in one call."""
        wanted = set(subject_norms)
        missing = wanted.difference(self._facts)
        if missing:
            self.statements += 1
            grouped: dict[str, list[Fact]] = {s: [] for s in missing}
            for fact in self._kodb.facts_for_subjects(missing):
                grouped.setdefault(fact.subject_norm, []).append(fact)
            for subject, facts in grouped.items():
                self._facts[subject] = tuple(facts)
        # The store sorts by subject_norm first, and each cached list keeps its order.
        return [f for s in sorted(wanted) for f in self._facts.get(s, ())]

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
        """Summaries of these subjects. Counts alone (``sample_size`` 0, what answers rank
        on) are the store's, each subject's fetched once per batch; with a sample, computed
        from the facts when all of theirs are cached (every fact the sample: the same
        ranking as the store's summaries), else the store's (``cache``: the batch's own
        read cache unless one is given)."""
        from pipeline.model import summaries_from_facts

        wanted = set(subject_norms)
        drop = set(exclude_files)
        if sample_size == 0 and only_files is None and not drop:
            missing = wanted.difference(self._counted)
            if missing:
                self.statements += 1
                found = self._kodb.subject_summaries(missing, sample_size=0)
                for subject in missing:
                    self._counted[subject] = found.get(subject)
            return {s: c for s in sorted(wanted) if (c := self._counted[s]) is not None}
        if not wanted.issubset(self._facts):
            self.statements += 1
            more = {"exclude_files": sorted(drop)} if drop else {}
            return self._kodb.subject_summaries(  # type: ignore[no-any-return]
                wanted,
                sample_size=sample_size,
                evidence_files=evidence_files,
                only_files=only_files,
                cache=self._stored if cache is None else cache,
                **more,
            )
        keep = None if only_files is None else set(only_files)
        facts = self.facts_for_subjects(wanted)
        return summaries_from_facts(
            f
            for f in facts
            if (keep is None or f.source_file in keep) and f.source_file not in drop
        )

    def entries(self) -> int:
        """Cached rows: files, terms, summaries and facts (what ``trim`` bounds)."""
        return (
            len(self._by_file)
            + len(self._by_term)
            + len(self._rows)
            + len(self._searches)
            + len(self._shares)
            + sum(map(len, self._dated.values()))
            + len(self._counted)
            + sum(map(len, self._facts.values()))
            + self._stored.entries()
        )

    def trim(self) -> None:
        """Forget everything once the cache outgrows its bound (between chunks)."""
        if self.entries() > self._max_entries:
            self._by_file.clear()
            self._by_term.clear()
            self._rows.clear()
            self._searches.clear()
            self._dated.clear()
            self._shares.clear()
            self._facts.clear()
            self._counted.clear()
            self._stored.clear()

    def close(self) -> None:
        """The owner of the real KoDB closes it."""
