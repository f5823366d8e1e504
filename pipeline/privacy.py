"""Private notes: vault globs (``vault_private_globs``) whose notes never reach an answer.

Answers go to agents (the hook, the MCP server, the service, load-context packs), so a note
the user marks private must never appear in one: not as a hit, not as the excerpt of a hit,
not through its facts (a fact whose ``source_file`` is private), not as a subject known only
from it. The filter sits at one boundary, the stores a Pipeline answers from:

* ``PublicGraph`` hides private notes from the vector search (it over-fetches so the answer
  still gets its ``k`` public notes, and the label is computed on the best public note),
  from ``all_vectors`` (load-context's exact search) and from ``note_states``;
* ``PublicKodb`` hides private notes from the registry and their facts from every lookup,
  so a subject known only from private notes has no facts and is never ranked;
* ``redact`` is the last check on every Answer the Pipeline returns: any hit or fact that
  still names a private path is dropped (a store method added later and not wrapped here
  cannot leak one).

``App.pipeline(include_private=True)`` (`vault-ko query --include-private`, for the owner at
a terminal) is the one way to answer with them. Maintenance commands (ingest, embed,
calibrate, freshness) use the stores themselves and see every note.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

from pipeline.model import Answer, Fact, Note, SubjectSummary

if TYPE_CHECKING:
    from pipeline.config import Settings
    from pipeline.graph.reader import GraphReader
    from pipeline.kodb.reader import KodbReader
    from pipeline.model import Calibration
    from pipeline.succession import Succession


@dataclass(frozen=True)
class PrivateNotes:
    """The private globs of a vault; false when there are none (then nothing is wrapped)."""

    globs: tuple[str, ...] = ()

    @classmethod
    def from_settings(cls, settings: Settings) -> PrivateNotes:
        return cls(tuple(g for g in settings.vault_private_globs if g.strip()))

    def __bool__(self) -> bool:
        return bool(self.globs)

    @cached_property
    def _patterns(self) -> tuple[Any, ...]:
        # Imported here: the vault package pulls in the markdown parser, which answers
        # without private globs (and the hook's fast path) never need.
        from pipeline.vault.scan import compile_glob

        return tuple(compile_glob(g) for g in self.globs)

    def is_private(self, path: str | None) -> bool:
        """Whether a vault-relative path is under a private glob."""
        return bool(path) and any(p.match(path) for p in self._patterns)


class PublicKodb:
    """KO-DB as an answer may see it: private notes and their facts are not there, nor a
    subject only private notes state. Every ``KodbReader`` method is written here, so what
    is filtered is visible: everything that returns notes, subjects or facts."""

    def __init__(self, kodb: KodbReader, private: PrivateNotes) -> None:
        self._kodb = kodb
        self._private = private

    def _public_notes(self, notes: Mapping[str, Note]) -> dict[str, Note]:
        return {p: n for p, n in notes.items() if not self._private.is_private(p)}

    def _public_paths(self, paths: Iterable[str]) -> list[str]:
        return [p for p in paths if not self._private.is_private(p)]

    def _public_subjects(self, subject_norms: Iterable[str]) -> set[str]:
        """Those of these subjects with at least one public fact."""
        return set(self.subject_summaries(subject_norms, sample_size=0))

    # --- the registry and the notes' full text ------------------------------------------

    def notes(self) -> dict[str, Note]:
        return self._public_notes(self._kodb.notes())

    def notes_at(self, paths: Iterable[str]) -> dict[str, Note]:
        return self._public_notes(self._kodb.notes_at(self._public_paths(paths)))

    def count_notes(self, source_type: str | None = None) -> int:
        if not self._private:
            return int(self._kodb.count_notes(source_type))
        return sum(1 for n in self.notes().values() if source_type in (None, n.source_type))

    def search_notes(
        self, terms: Sequence[str], limit: int, *, every: bool = False
    ) -> list[tuple[str, float]]:
        """The ``limit`` best public notes of a full-text search (asked again for more while
        private notes crowd the public ones out)."""
        want = limit * _OVERFETCH_FACTOR
        while True:
            found = self._kodb.search_notes(terms, want, every=every)
            public = [(p, s) for p, s in found if not self._private.is_private(p)]
            if len(public) >= limit or len(found) < want:
                return public[:limit]
            want *= _OVERFETCH_FACTOR

    def notes_dated(
        self, start: str | None, end: str, limit: int, source_type: str | None = None
    ) -> list[Note]:
        """The ``limit`` newest public notes dated from ``start`` to ``end`` (asked again
        for more while private notes crowd the public ones out)."""
        if not self._private:
            return self._kodb.notes_dated(start, end, limit, source_type)  # type: ignore[no-any-return]
        want = limit * _OVERFETCH_FACTOR
        while True:
            found = self._kodb.notes_dated(start, end, want, source_type)
            public = [n for n in found if not self._private.is_private(n.path)]
            if len(public) >= limit or len(found) < want:
                return public[:limit]
            want *= _OVERFETCH_FACTOR

    def note_texts(self) -> dict[str, tuple[str, str]]:
        return {p: t for p, t in self._kodb.note_texts().items() if not self._private.is_private(p)}

    def note_languages(self, paths: Iterable[str]) -> dict[str, str | None]:
        return self._kodb.note_languages(self._public_paths(paths))  # type: ignore[no-any-return]

    def index_languages(self) -> tuple[str | None, ...]:
        return self._kodb.index_languages()  # type: ignore[no-any-return]

    def word_shares(self, terms: Sequence[str]) -> dict[str, float]:
        """Over the public notes alone: whether a word is common among them must not
        depend on what the private ones hold."""
        if not self._private:
            return self._kodb.word_shares(terms)  # type: ignore[no-any-return]
        hidden = [p for p in self._kodb.notes() if self._private.is_private(p)]
        if not hidden:  # none (left) to leave out: a view over a view already left them out
            return self._kodb.word_shares(terms)  # type: ignore[no-any-return]
        # The innermost private view stands on the store, the one reader that counts around.
        return self._kodb.word_shares(terms, hidden)  # type: ignore[call-arg, no-any-return]

    # --- subjects -----------------------------------------------------------------------

    def subject_norms(self) -> list[str]:
        """Every subject with a public fact (the evaluation reads them; a scan of the
        facts' counts, never on an answer's path)."""
        names = self._kodb.subject_norms()
        if not self._private:
            return names
        public = self._public_subjects(names)
        return [n for n in names if n in public]

    def search_subjects(self, term: str, limit: int | None = None) -> list[str]:
        """The store's subject search, keeping subjects with at least one public fact."""
        return self.search_subjects_many([term], limit=limit)[term]

    def search_subjects_many(
        self, terms: Sequence[str], limit: int | None = None
    ) -> dict[str, list[str]]:
        """The store's subject search for many terms, keeping subjects with at least one
        public fact, asked again for more while private ones crowd the public ones out."""
        if not self._private:
            return self._kodb.search_subjects_many(terms, limit=limit)
        out: dict[str, list[str]] = {}
        want = None if limit is None else limit * _OVERFETCH_FACTOR
        todo = list(dict.fromkeys(terms))
        while todo:
            found = self._kodb.search_subjects_many(todo, limit=want)
            public = self._public_subjects({n for names in found.values() for n in names})
            more = []
            for term in todo:
                kept = [n for n in found[term] if n in public]
                if want is None or len(kept) >= (limit or 0) or len(found[term]) < want:
                    out[term] = kept[:limit]
                else:
                    more.append(term)
            todo = more
            want = None if want is None else want * _OVERFETCH_FACTOR
        return {term: list(out[term]) for term in terms}

    def subjects_by_source_file(self, paths: Iterable[str]) -> dict[str, set[str]]:
        return self._kodb.subjects_by_source_file(self._public_paths(paths))

    def subjects_for_source_files(self, paths: Iterable[str]) -> set[str]:
        return self._kodb.subjects_for_source_files(self._public_paths(paths))

    # --- facts --------------------------------------------------------------------------

    def facts_for_subjects(self, subject_norms: Iterable[str]) -> list[Fact]:
        return [
            f
            for f in self._kodb.facts_for_subjects(subject_norms)
            if not self._private.is_private(f.source_file)
        ]

    def subject_source_files(self, subject_norms: Iterable[str]) -> set[str]:
        files = self._kodb.subject_source_files(subject_norms)
        return {f for f in files if not self._private.is_private(f)}

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
        """The store's summaries over public facts only: the subjects' private source files
        are left out in SQL (counts and sample alike); past the store's bound on left-out
        files, the summaries are computed from the public facts instead."""
        from pipeline.kodb.facts import MAX_EXCLUDED_FILES
        from pipeline.model import summaries_from_facts

        wanted = set(subject_norms)
        files = self._kodb.subject_source_files(wanted)
        private = sorted(set(exclude_files) | {f for f in files if self._private.is_private(f)})
        if len(private) > MAX_EXCLUDED_FILES:
            keep = None if only_files is None else set(only_files)
            drop = set(private)
            facts = self.facts_for_subjects(wanted)
            return summaries_from_facts(
                f
                for f in facts
                if (keep is None or f.source_file in keep) and f.source_file not in drop
            )
        more: dict[str, Any] = {"exclude_files": private} if private else {}
        if cache is not None:  # a memo's (batch/memo.py), passed on to the store
            more["cache"] = cache
        return self._kodb.subject_summaries(
            wanted,
            sample_size=sample_size,
            evidence_files=evidence_files,
            only_files=only_files,
            **more,
        )

    # --- calibration and lifecycle ------------------------------------------------------

    def latest_calibration(
        self, embedder: str | None = None, dims: int | None = None
    ) -> Calibration | None:
        """The store's: a calibration names no note."""
        return self._kodb.latest_calibration(embedder, dims)

    def succession(self) -> Succession:
        """The store's, or, when notes are private, the decisions public facts and notes
        state (a private note's word never marks a public decision replaced)."""
        if not self._private:
            return self._kodb.succession()
        from pipeline.kodb.decisions import recomputed

        return recomputed(self.decision_facts(), self.notes())

    def decision_facts(self) -> list[Fact]:
        return [
            f for f in self._kodb.decision_facts() if not self._private.is_private(f.source_file)
        ]

    def close(self) -> None:
        """The owner of the store closes it."""


#: How many more notes the first over-fetch asks for when private notes are hidden; it
#: doubles until k public notes are found or the graph has no more.
_OVERFETCH_FACTOR = 2


class PublicGraph:
    """The graph as an answer may see it (``GraphReader``, every method written out):
    private notes are not there."""

    def __init__(self, graph: GraphReader, private: PrivateNotes) -> None:
        self._graph = graph
        self._private = private

    def ping(self) -> float:
        """The graph's: a round trip names no note."""
        return self._graph.ping()

    def note_vector_sets(self, paths: Sequence[str]) -> dict[str, Any]:
        return self._graph.note_vector_sets([p for p in paths if not self._private.is_private(p)])

    def close(self) -> None:
        """The owner of the client closes it."""

    def vector_search(self, vector: Any, k: int) -> list[Any]:
        """The ``k`` best public notes (the search is repeated with a larger ``k`` while
        private notes crowd the public ones out)."""
        if k <= 0:
            return []
        want = k * _OVERFETCH_FACTOR
        while True:
            hits = self._graph.vector_search(vector, want)
            public = [h for h in hits if not self._private.is_private(h.path)]
            if len(public) >= k or len(hits) < want:
                return public[:k]
            want *= _OVERFETCH_FACTOR

    def all_vectors(self) -> tuple[list[Any], Any]:
        states, matrix = self._graph.all_vectors()
        keep = [i for i, s in enumerate(states) if not self._private.is_private(s.path)]
        if len(keep) == len(states):
            return states, matrix
        return [states[i] for i in keep], matrix[keep]

    def note_states(self) -> dict[str, Any]:
        return {
            p: s for p, s in self._graph.note_states().items() if not self._private.is_private(p)
        }


def redact(answer: Answer, private: PrivateNotes) -> Answer:
    """``answer`` without any hit, word match or fact of a private note; a subject left with
    no fact is dropped (it was known through private notes only)."""
    if not private:
        return answer
    hits = tuple(h for h in answer.hits if not private.is_private(h.path))
    matches = tuple(h for h in answer.word_matches if not private.is_private(h.path))
    subjects = []
    for s in answer.subjects:
        facts = tuple(f for f in s.facts if not private.is_private(f.source_file))
        if facts or not s.facts:
            subjects.append(s if len(facts) == len(s.facts) else replace(s, facts=facts))
    same = len(subjects) == len(answer.subjects) and all(
        a is b for a, b in zip(subjects, answer.subjects, strict=True)
    )
    if same and len(hits) == len(answer.hits) and len(matches) == len(answer.word_matches):
        return answer
    # A count that held a private note would tell of it: dropped with it.
    count = answer.word_match_count if len(matches) == len(answer.word_matches) else None
    return replace(
        answer,
        hits=hits,
        subjects=tuple(subjects),
        word_matches=matches,
        word_match_count=count if matches else None,
    )


def redact_freshness(report: dict[str, Any], private: PrivateNotes) -> dict[str, Any]:
    """A freshness JSON document (``FreshnessReport.to_dict``) without the paths of private
    notes (the service and the MCP server serve it to agents; the counts stay)."""
    if not private:
        return report
    out = dict(report)
    out["notes"] = {
        state: None if paths is None else [p for p in paths if not private.is_private(p)]
        for state, paths in report.get("notes", {}).items()
    }
    out["skipped"] = [s for s in report.get("skipped", []) if not private.is_private(s["path"])]
    kodb = dict(report.get("kodb", {}))
    if "orphan_fact_files" in kodb:
        kodb["orphan_fact_files"] = [
            p for p in kodb["orphan_fact_files"] if not private.is_private(p)
        ]
    out["kodb"] = kodb
    return out
