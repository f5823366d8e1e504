"""A resident copy of KO-DB's facts: what answers read, held in memory as columns.

On a large vault a warm answer's KO-DB statements (the bridge's title look-ups and files'
subjects, the candidates' counts, the stored-list facts read by id, the question's own
files) are mostly page reads and row decoding. The service holds instead every fact the
answers may see as integer columns over sorted string tables (``ResidentFacts``, about 100
bytes a fact; figures in docs/benchmarks-history.md), built by one scan in one read
transaction (``build``), and answers the bridge and the summaries from it
(``ResidentKodb``):

* facts are kept in *partition order*: by subject, then the partitions of the stored
  summaries (predicate, source type, the object when the predicate is ``title``), then the
  order ``rank.representative_facts`` prefers (confidence first, then by code point). A
  subject's sample for a question is, per partition, its first ``n`` facts from files that
  are not evidence plus the first ``n`` of each evidence file: exactly the partitions of
  ``summaries.sample_select``, so ranking on it equals ranking on all facts;
* counts (source files, files per type, facts per predicate and per spelling, the best
  confidence) are computed for every subject at build time by sorting integer keys;
* the files' subjects and a word index over every subject name (the runs of ``\\w``; a
  term at word boundaries is a phrase of whole runs, so intersecting the runs' postings
  gives a superset that ``match.word_boundary_match`` then checks) answer the bridge;
* the registry (the notes table) answers the hits' rows, so an answer reads no statement.

Facts and registry rows of private notes are left out when the copy is built
(``is_private``), which is what ``privacy.PublicKodb`` does in SQL; the word index still
holds every subject name, as the store's does. A copy is a snapshot: its owner
(``service/warm.py``) drops it when KO-DB changes. SQL only through SQLAlchemy Core, in the
caller's transaction (store.py).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from pipeline.kodb import schema
from pipeline.kodb.match import TermSearch, runs_of
from pipeline.kodb.summaries import _summary
from pipeline.model import (
    POOL_ORDER,
    SAMPLE_PARTITION,
    SOURCE_TYPES,
    TITLE_PREDICATE,
    Calibration,
    Fact,
    Note,
    SubjectSummary,
    predicate_preference,
)
from pipeline.succession import Succession

#: Rows fetched per step of the scan (the scan's memory is one step plus the columns).
SCAN_CHUNK: Final = 20_000
#: Subjects' counts and facts kept made across answers before the caches start over.
CACHE_ENTRIES: Final = 100_000
#: A word-index candidate list this short is checked directly instead of intersected further.
DIRECT_CHECK: Final = 64

_TYPE_CODE: Final = {t: i for i, t in enumerate(SOURCE_TYPES)}


@dataclass(frozen=True, eq=False)
class ResidentFacts:
    """Every visible fact as columns, in partition order (see the module docstring).

    String tables are sorted by code point, so comparing codes compares the strings as
    Python and the stores' ``_order`` do. ``part_start``: where each partition starts (and
    the end); ``subj_parts``: each subject's first partition (and the end); ``subj_start``:
    each subject's first fact. The by-file index lists fact positions sorted by (file,
    subject, position) with ``file_key`` = file * subjects + subject.
    """

    norms: list[str]  # subject_norm by subject code (every subject of the facts table)
    spellings: list[str]
    predicates: list[str]
    files: list[str]
    extractors: list[str]
    object_blob: bytes  # the objects' UTF-8, in code order
    object_ends: np.ndarray  # int64: where each object ends in the blob
    subj: np.ndarray
    spell: np.ndarray
    pred: np.ndarray
    obj: np.ndarray
    conf: np.ndarray  # float64
    stype: np.ndarray  # int8: SOURCE_TYPES index
    file: np.ndarray
    extr: np.ndarray
    part_start: np.ndarray
    subj_parts: np.ndarray
    subj_start: np.ndarray
    by_file: np.ndarray  # fact positions sorted by (file, subject, position)
    file_key: np.ndarray  # int64, sorted: file * len(norms) + subject of by_file
    # Counts per subject over its visible facts.
    max_conf: np.ndarray
    source_count: np.ndarray
    per_type: np.ndarray  # (subjects, len(SOURCE_TYPES)): distinct files
    pred_start: np.ndarray  # per subject: where its (predicate, count) rows start
    pred_code: np.ndarray
    pred_count: np.ndarray
    spell_start: np.ndarray
    spell_code: np.ndarray
    spell_count: np.ndarray
    # The files' subjects: per file code, its subject codes in file_subjects[a:b].
    file_subj_start: np.ndarray
    file_subjects: np.ndarray
    # Word index over every subject name: run -> subject codes.
    words: dict[str, np.ndarray]
    # The vault registry (what answers may see of it): path -> Note.
    notes: dict[str, Note] = field(default_factory=dict)

    @property
    def facts(self) -> int:
        return int(self.subj.size)

    @property
    def nbytes(self) -> int:
        """Bytes held by the columns, indexes and string tables (an estimate)."""
        arrays = sum(v.nbytes for v in vars(self).values() if isinstance(v, np.ndarray))
        strings = sum(
            sum(len(s) + 50 for s in table)
            for table in (self.norms, self.spellings, self.predicates, self.files, self.extractors)
        )
        postings = sum(p.nbytes + len(w) + 100 for w, p in self.words.items())
        return arrays + strings + postings + len(self.object_blob)


class _Interner:
    """Codes for the strings of one column, in first-seen order (re-coded sorted later)."""

    def __init__(self) -> None:
        self.codes: dict[str, int] = {}

    def codes_of(self, values: Iterable[str], count: int) -> np.ndarray:
        table = self.codes
        add = table.setdefault
        return np.fromiter((add(v, len(table)) for v in values), dtype=np.int32, count=count)

    def sorted_table(self) -> tuple[list[str], np.ndarray]:
        """The strings sorted by code point, and old code -> new code."""
        strings = list(self.codes)
        order = sorted(range(len(strings)), key=strings.__getitem__)
        remap = np.empty(len(strings), dtype=np.int32)
        remap[np.asarray(order, dtype=np.int64)] = np.arange(len(strings), dtype=np.int32)
        return [strings[i] for i in order], remap


def build(conn: Connection, is_private: Callable[[str], bool] | None = None) -> ResidentFacts:
    """Read every fact (one statement, streamed) and the registry, and build the copy; the
    facts and notes of files ``is_private`` names are left out (their subjects' names stay
    searchable)."""
    facts = _build_facts(conn, is_private)
    registry: dict[str, Note] = {}
    for row in conn.execute(sa.select(schema.notes)):
        if is_private is None or not is_private(row.path):
            registry[row.path] = schema.from_row(Note, row)
    return replace(facts, notes=registry)


def _build_facts(
    conn: Connection, is_private: Callable[[str], bool] | None = None
) -> ResidentFacts:
    t = schema.facts
    stmt = sa.select(
        t.c.subject,
        t.c.subject_norm,
        t.c.predicate,
        t.c.object,
        t.c.confidence,
        t.c.source_type,
        t.c.source_file,
        t.c.extractor,
    )
    spelling, norm, predicate, obj, source_file, extractor = (_Interner() for _ in range(6))
    columns: list[list[np.ndarray]] = [[] for _ in range(8)]
    result = conn.execution_options(stream_results=True, yield_per=SCAN_CHUNK).execute(stmt)
    for rows in result.partitions(SCAN_CHUNK):
        n = len(rows)
        columns[0].append(spelling.codes_of((r[0] for r in rows), n))
        columns[1].append(norm.codes_of((r[1] for r in rows), n))
        columns[2].append(predicate.codes_of((r[2] for r in rows), n))
        columns[3].append(obj.codes_of((r[3] for r in rows), n))
        columns[4].append(np.fromiter((r[4] for r in rows), dtype=np.float64, count=n))
        columns[5].append(
            np.fromiter((_TYPE_CODE.get(r[5], -1) for r in rows), dtype=np.int8, count=n)
        )
        columns[6].append(source_file.codes_of((r[6] for r in rows), n))
        columns[7].append(extractor.codes_of((r[7] for r in rows), n))
    spell_c, subj_c, pred_c, obj_c, conf, stype, file_c, extr_c = (
        np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32) for parts in columns
    )
    conf = conf.astype(np.float64)
    stype = stype.astype(np.int8)
    if stype.size and int(stype.min()) < 0:
        raise ValueError("a fact has a source type outside " + ", ".join(SOURCE_TYPES))
    tables = []
    for interner, codes in (
        (spelling, spell_c),
        (norm, subj_c),
        (predicate, pred_c),
        (obj, obj_c),
        (source_file, file_c),
        (extractor, extr_c),
    ):
        strings, remap = interner.sorted_table()
        codes[:] = remap[codes] if codes.size else codes
        tables.append(strings)
    spellings, norms, predicates, objects, files, extractors = tables
    words = _word_index(norms)
    if is_private is not None:
        hidden = np.fromiter((is_private(f) for f in files), dtype=bool, count=len(files))
        if hidden.any():
            keep = ~hidden[file_c]
            spell_c, subj_c, pred_c, obj_c, conf, stype, file_c, extr_c = (
                a[keep] for a in (spell_c, subj_c, pred_c, obj_c, conf, stype, file_c, extr_c)
            )
    return _assemble(
        norms,
        spellings,
        predicates,
        objects,
        files,
        extractors,
        words,
        subj=subj_c,
        spell=spell_c,
        pred=pred_c,
        obj=obj_c,
        conf=conf,
        stype=stype,
        file=file_c,
        extr=extr_c,
    )


def _word_index(norms: Sequence[str]) -> dict[str, np.ndarray]:
    postings: dict[str, list[int]] = {}
    for code, name in enumerate(norms):
        for run in set(runs_of(name)):
            postings.setdefault(run, []).append(code)
    return {run: np.asarray(codes, dtype=np.int32) for run, codes in postings.items()}


def _group_counts(keys: np.ndarray, per: int, subjects: int) -> tuple[np.ndarray, ...]:
    """Distinct ``keys`` (subject * per + code) with their counts: (start per subject,
    codes, counts)."""
    uniq, counts = np.unique(keys, return_counts=True)
    owner = uniq // per
    start = np.searchsorted(owner, np.arange(subjects + 1))
    return start, (uniq % per).astype(np.int32), counts.astype(np.int64)


def _partition_order(columns: Mapping[str, np.ndarray]) -> np.ndarray:
    """The facts' order by subject, then ``model.SAMPLE_PARTITION``, then
    ``model.POOL_ORDER`` (codes of sorted string tables order as the strings do)."""
    keys = ["subject", *SAMPLE_PARTITION]
    keys += [name for name, _ in POOL_ORDER if name not in keys]
    descending = dict(POOL_ORDER)
    # np.lexsort: the last key is the primary one.
    return np.lexsort(
        tuple(-columns[k] if descending.get(k) else columns[k] for k in reversed(keys))
    )


def _assemble(
    norms: list[str],
    spellings: list[str],
    predicates: list[str],
    objects: list[str],
    files: list[str],
    extractors: list[str],
    words: dict[str, np.ndarray],
    **cols: np.ndarray,
) -> ResidentFacts:
    """The copy from the facts' columns (codes into the sorted string tables): the facts
    in partition order, where each subject and partition starts, the per-file index, the
    counts, and the objects as one UTF-8 blob."""
    title = predicates.index(TITLE_PREDICATE) if TITLE_PREDICATE in predicates else -1
    title_obj = np.where(cols["pred"] == title, cols["obj"], -1)
    order = _partition_order(
        {
            "subject": cols["subj"],
            "title_object": title_obj,
            "predicate": cols["pred"],
            "source_type": cols["stype"],
            "source_file": cols["file"],
            "object": cols["obj"],
            "extractor": cols["extr"],
            "confidence": cols["conf"],
        }
    )
    cols = {name: a[order] for name, a in cols.items()}
    sizes = (len(norms), len(files), len(predicates), len(spellings))
    encoded = [s.encode("utf-8", "surrogatepass") for s in objects]
    object_ends = np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)))
    return ResidentFacts(
        norms=norms,
        spellings=spellings,
        predicates=predicates,
        files=files,
        extractors=extractors,
        object_blob=b"".join(encoded),
        object_ends=object_ends,
        words=words,
        **cols,
        **_layout(cols, title_obj[order], len(norms)),
        **_counts(cols, *sizes),
    )


def _layout(cols: Mapping[str, np.ndarray], title_obj: np.ndarray, subjects: int) -> dict[str, Any]:
    """Where each partition and subject starts in partition order, and the index of the
    facts by (file, subject)."""
    subj, pred, stype, file = cols["subj"], cols["pred"], cols["stype"], cols["file"]
    n = int(subj.size)
    changes = np.ones(n, dtype=bool)
    if n:
        changes[1:] = (
            (subj[1:] != subj[:-1])
            | (pred[1:] != pred[:-1])
            | (stype[1:] != stype[:-1])
            | (title_obj[1:] != title_obj[:-1])
        )
    part_start = np.append(np.flatnonzero(changes), n).astype(np.int64)
    subj_start = np.searchsorted(subj, np.arange(subjects + 1)).astype(np.int64)
    positions = np.arange(n, dtype=np.int64)
    by_file = np.lexsort((positions, subj, file)).astype(np.int64)
    return {
        "part_start": part_start,
        "subj_start": subj_start,
        "subj_parts": np.searchsorted(part_start[:-1], subj_start).astype(np.int64),
        "by_file": by_file,
        "file_key": file[by_file].astype(np.int64) * subjects + subj[by_file],
    }


def _counts(
    cols: Mapping[str, np.ndarray], subjects: int, files: int, predicates: int, spellings: int
) -> dict[str, Any]:
    """Every subject's counts (best confidence, source files in all and per type, facts per
    predicate and per spelling) and each file's subjects, by sorting integer keys."""
    subj, pred, stype, conf = cols["subj"], cols["pred"], cols["stype"], cols["conf"]
    file, spell = cols["file"], cols["spell"]
    subj_start = np.searchsorted(subj, np.arange(subjects + 1))
    max_conf = np.full(subjects, -np.inf)
    filled = subj_start[:-1] < subj_start[1:]
    if subj.size:
        max_conf[filled] = np.maximum.reduceat(conf, subj_start[:-1][filled])
    nf, nt = max(files, 1), len(SOURCE_TYPES)
    pairs = np.unique(subj.astype(np.int64) * nf + file)
    typed = np.unique((subj.astype(np.int64) * nt + stype) * nf + file)
    per_type = np.bincount(typed // nf, minlength=subjects * nt).reshape(subjects, nt)
    pred_start, pred_code, pred_count = _group_counts(
        subj.astype(np.int64) * max(predicates, 1) + pred, max(predicates, 1), subjects
    )
    spell_start, spell_code, spell_count = _group_counts(
        subj.astype(np.int64) * max(spellings, 1) + spell, max(spellings, 1), subjects
    )
    by_pair = np.unique(file.astype(np.int64) * max(subjects, 1) + subj)
    return {
        "max_conf": max_conf,
        "source_count": np.bincount(pairs // nf, minlength=subjects).astype(np.int64),
        "per_type": per_type,
        "pred_start": pred_start,
        "pred_code": pred_code,
        "pred_count": pred_count,
        "spell_start": spell_start,
        "spell_code": spell_code,
        "spell_count": spell_count,
        "file_subj_start": np.searchsorted(by_pair // max(subjects, 1), np.arange(files + 1)),
        "file_subjects": (by_pair % max(subjects, 1)).astype(np.int32),
    }


class ResidentKodb:
    """KO-DB as answers read it (``KodbReader``), from a ``ResidentFacts`` copy: the
    registry, the bridge's look-ups and the summaries. What the copy does not hold (full
    text, every fact of a subject, calibrations, summaries restricted to some files) is
    read from ``base`` (the store, or its memo), method by method below.

    ``private`` names the notes left out of the copy: their paths are no keys of
    ``subjects_by_source_file``, as with ``privacy.PublicKodb``."""

    def __init__(
        self, base: Any, data: ResidentFacts, private: Callable[[str], bool] | None = None
    ) -> None:
        self._base = base
        self._data = data
        self._private = private
        self._norm_code = {s: i for i, s in enumerate(data.norms)}
        self._file_code = {f: i for i, f in enumerate(data.files)}
        # Python lists of the columns answers walk fact by fact (numpy scalars are slow).
        self._part_start = data.part_start.tolist()
        self._subj_parts = data.subj_parts.tolist()
        self._part_pred = data.pred[data.part_start[:-1]].tolist()
        self._part_type = data.stype[data.part_start[:-1]].tolist()
        self._note_counts: dict[str | None, int] = {None: len(data.notes)}
        for note in data.notes.values():
            kind = note.source_type
            self._note_counts[kind] = self._note_counts.get(kind, 0) + 1
        # Question-independent results kept across answers (shared by ``over`` views).
        self._counted: dict[int, Mapping[str, Any]] = {}
        self._made: dict[int, Fact] = {}
        self._succession: Succession | None = None
        titles = [i for i, p in enumerate(data.predicates) if p == TITLE_PREDICATE]
        self._title_pred = titles[0] if titles else -1
        self._pred_pref = [predicate_preference(p) for p in data.predicates]

    def over(self, base: Any) -> ResidentKodb:
        """The same copy over another base (its look-up tables are shared)."""
        view = ResidentKodb.__new__(ResidentKodb)
        view.__dict__.update(self.__dict__)
        view._base = base
        view._succession = None  # another base may hide other decisions
        return view

    @property
    def facts(self) -> int:
        return self._data.facts

    # -- the registry ---------------------------------------------------------------------
    def notes(self) -> dict[str, Note]:
        """The vault registry: path -> Note (a copy)."""
        return dict(self._data.notes)

    def notes_at(self, paths: Iterable[str]) -> dict[str, Note]:
        """Registry rows of these note paths (paths without a row are left out)."""
        registry = self._data.notes
        return {p: n for p in sorted(set(paths)) if (n := registry.get(p)) is not None}

    def count_notes(self, source_type: str | None = None) -> int:
        """Registered notes (of one source type when given)."""
        return self._note_counts.get(source_type, 0)

    def notes_dated(
        self, start: str | None, end: str, limit: int, source_type: str | None = None
    ) -> list[Note]:
        """The ``limit`` newest notes (of ``source_type``) dated from ``start`` (None: any
        day) to ``end``: the newest found without sorting them all, then ties by path."""
        dated = [
            n
            for n in self._data.notes.values()
            if n.date is not None
            and n.date <= end
            and (start is None or n.date >= start)
            and source_type in (None, n.source_type)
        ]
        if not dated or limit <= 0:
            return []
        cut = heapq.nlargest(limit, (n.date or "" for n in dated))[-1]
        chosen = sorted((n for n in dated if (n.date or "") >= cut), key=lambda n: n.path)
        chosen.sort(key=lambda n: n.date or "", reverse=True)
        return chosen[:limit]

    def search_notes(
        self, terms: Sequence[str], limit: int, *, every: bool = False
    ) -> list[tuple[str, float]]:
        """The base's full-text search (the copy holds no text)."""
        return self._base.search_notes(terms, limit, every=every)  # type: ignore[no-any-return]

    def note_texts(self) -> dict[str, tuple[str, str]]:
        """The base's (the copy holds no text)."""
        return self._base.note_texts()  # type: ignore[no-any-return]

    def note_languages(self, paths: Iterable[str]) -> dict[str, str | None]:
        """The base's (the copy holds no text)."""
        return self._base.note_languages(paths)  # type: ignore[no-any-return]

    def word_shares(self, terms: Sequence[str]) -> dict[str, float]:
        """The base's (the copy holds no text)."""
        return self._base.word_shares(terms)  # type: ignore[no-any-return]

    def index_languages(self) -> tuple[str | None, ...]:
        """The base's (the copy holds no text)."""
        return self._base.index_languages()  # type: ignore[no-any-return]

    # -- the bridge -----------------------------------------------------------------------
    def subject_norms(self) -> list[str]:
        """The base's (the copy's names include subjects only private notes state)."""
        return self._base.subject_norms()  # type: ignore[no-any-return]

    def search_subjects(self, term: str, limit: int | None = None) -> list[str]:
        """The base's single-term search (the facts search command's, not an answer's)."""
        return self._base.search_subjects(term, limit=limit)  # type: ignore[no-any-return]

    def search_subjects_many(
        self, terms: Sequence[str], limit: int | None = None
    ) -> dict[str, list[str]]:
        """The store's word-boundary subject search (``match.TermSearch``), from the word
        index; terms without a word character go to the base."""
        plan = TermSearch.of(terms)
        candidates = {n: self._by_words(runs) for n, runs in plan.worded.items()}
        if plan.others:
            candidates.update(self._base.search_subjects_many(list(plan.others)))
        return plan.results(candidates, limit)

    def _by_words(self, runs: Sequence[str]) -> list[str]:
        """Names holding all these runs (a superset of the word-boundary matches), each a
        subject with facts in the copy: a subject only private notes state is not there."""
        words = self._data.words
        postings = []
        for run in set(runs):
            codes = words.get(run)
            if codes is None:
                return []
            postings.append(codes)
        postings.sort(key=len)
        codes = postings[0]
        for more in postings[1:]:
            if codes.size <= DIRECT_CHECK:  # checking these few is cheaper than intersecting
                break
            codes = np.intersect1d(codes, more, assume_unique=True)
            if not codes.size:
                return []
        names, starts = self._data.norms, self._data.subj_start
        return [names[c] for c in codes.tolist() if starts[c] < starts[c + 1]]

    def subjects_by_source_file(self, paths: Iterable[str]) -> dict[str, set[str]]:
        """Per file, the subject_norms of its visible facts."""
        d = self._data
        out: dict[str, set[str]] = {}
        for path in sorted(set(paths)):
            if self._private is not None and self._private(path):
                continue
            code = self._file_code.get(path)
            if code is None:
                out[path] = set()
                continue
            a, b = int(d.file_subj_start[code]), int(d.file_subj_start[code + 1])
            out[path] = {d.norms[c] for c in d.file_subjects[a:b].tolist()}
        return out

    def subjects_for_source_files(self, paths: Iterable[str]) -> set[str]:
        return set().union(*self.subjects_by_source_file(paths).values())

    # -- facts ----------------------------------------------------------------------------
    def facts_for_subjects(self, subject_norms: Iterable[str]) -> list[Fact]:
        """The base's (all of a subject's facts: the copy answers with samples)."""
        return self._base.facts_for_subjects(subject_norms)  # type: ignore[no-any-return]

    def subject_source_files(self, subject_norms: Iterable[str]) -> set[str]:
        """The base's."""
        return self._base.subject_source_files(subject_norms)  # type: ignore[no-any-return]

    def latest_calibration(
        self, embedder: str | None = None, dims: int | None = None
    ) -> Calibration | None:
        """The base's (a calibration changes without the facts changing)."""
        return self._base.latest_calibration(embedder, dims)  # type: ignore[no-any-return]

    def succession(self) -> Succession:
        """The base's, read once: it changes with the facts, and so does this copy."""
        if self._succession is None:
            self._succession = self._base.succession()
        return self._succession

    def decision_facts(self) -> list[Fact]:
        return self._base.decision_facts()  # type: ignore[no-any-return]

    # -- the summaries --------------------------------------------------------------------
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
        """``KoDB.subject_summaries`` from the copy (restricted to some files: the base's)."""
        drop = list(exclude_files)
        if only_files is not None or drop:
            more: dict[str, Any] = {"exclude_files": drop} if drop else {}
            return self._base.subject_summaries(  # type: ignore[no-any-return]
                subject_norms,
                sample_size=sample_size,
                evidence_files=evidence_files,
                only_files=only_files,
                **more,
            )
        d = self._data
        wanted = []
        for norm in sorted(set(subject_norms)):
            s = self._norm_code.get(norm)
            if s is not None and d.subj_start[s] < d.subj_start[s + 1]:
                wanted.append((norm, s))
        picked: dict[int, list[int]] = {}
        if sample_size > 0 and wanted:
            own = self._evidence_facts([s for _, s in wanted], evidence_files, sample_size)
            picked = {s: self._sample(s, sample_size, own.get(s)) for _, s in wanted}
        facts = self._facts([i for _, s in wanted for i in picked.get(s, ())])
        found: dict[str, SubjectSummary] = {}
        for norm, s in wanted:
            sample = [facts[i] for i in picked.get(s, ())]
            found[norm] = _summary(norm, self._counts(s), sample)
        return found

    def _counts(self, s: int) -> Mapping[str, Any]:
        counted = self._counted.get(s)
        if counted is None:
            if len(self._counted) >= CACHE_ENTRIES:
                self._counted.clear()
            counted = self._counted[s] = self._count(s)
        return counted

    def _count(self, s: int) -> Mapping[str, Any]:
        d = self._data
        a, b = int(d.pred_start[s]), int(d.pred_start[s + 1])
        predicates = dict(
            zip(
                [d.predicates[c] for c in d.pred_code[a:b].tolist()],
                d.pred_count[a:b].tolist(),
                strict=True,
            )
        )
        a, b = int(d.spell_start[s]), int(d.spell_start[s + 1])
        spellings = dict(
            zip(
                [d.spellings[c] for c in d.spell_code[a:b].tolist()],
                d.spell_count[a:b].tolist(),
                strict=True,
            )
        )
        per_type = {SOURCE_TYPES[i]: n for i, n in enumerate(d.per_type[s].tolist()) if n}
        return {
            "spellings": spellings,
            "source_count": int(d.source_count[s]),
            "per_type": per_type,
            "predicates": predicates,
            "raw_facts": int(d.subj_start[s + 1] - d.subj_start[s]),
            "max_confidence": float(d.max_conf[s]),
        }

    def _evidence_facts(
        self, subjects: Sequence[int], evidence_files: Iterable[str], n: int
    ) -> dict[int, tuple[set[int], list[int]]]:
        """Per subject, the positions of its facts in the evidence files, and of those the
        first ``n`` per (partition, file): the by-file index read once per file."""
        d = self._data
        codes = sorted({c for f in evidence_files if (c := self._file_code.get(f)) is not None})
        if not codes:
            return {}
        total = len(d.norms)
        bounds = np.asarray(codes, dtype=np.int64) * total
        lo = np.searchsorted(d.file_key, bounds, "left")
        hi = np.searchsorted(d.file_key, bounds + total, "left")
        positions = np.concatenate([d.by_file[a:b] for a, b in zip(lo, hi, strict=True)])
        keep = np.isin(d.subj[positions], np.asarray(subjects, dtype=np.int32))
        positions = positions[keep]
        if not positions.size:
            return {}
        parts = (np.searchsorted(d.part_start, positions, "right") - 1).tolist()
        owners = d.subj[positions].tolist()
        files = d.file[positions].tolist()
        out: dict[int, tuple[set[int], list[int]]] = {}
        taken: dict[tuple[int, int], int] = {}
        # by_file lists each (file, subject) in partition order, so the first ones count.
        for pos, part, owner, f in zip(positions.tolist(), parts, owners, files, strict=True):
            seen, chosen = out.setdefault(owner, (set(), []))
            seen.add(pos)
            k = taken.get((part, f), 0)
            if k < n:
                taken[(part, f)] = k + 1
                chosen.append(pos)
        return out

    def _sample(self, s: int, n: int, own: tuple[set[int], list[int]] | None) -> list[int]:
        """Positions of subject ``s``'s sample: the first ``n`` facts of each partition in
        each evidence file (``own``) and the first ``n`` of each partition from other
        files (what ``summaries.sample_select`` takes), less the facts
        ``rank.representative_facts`` can never pick.

        Its picks go class by class (evidence files, then other files; within each,
        informative, other and structural predicates: ``model.predicate_preference``), and
        within a class a pick is the first fact in pool order (better hit, preferred
        predicate, confidence, predicate, type, …) with the fewest of its type and
        predicate already shown; after ``j`` picks at most ``j`` of each are shown. Within a
        class spanning at least ``n`` predicates outside ``title``, a predicate not shown
        is always left, so a partition's second fact (type and predicate shown) never
        wins; and, in other files, a partition's first fact wins only while fewer than
        ``n`` first facts of its type come before it (their predicates cannot all be
        shown; in evidence files a predicate naming the question's words comes first, so
        every first fact is kept there). With ``n`` facts
        of evidence files outside ``title`` (none restates the name), no other fact is
        picked. A smaller pool holding every pick gives the same picks in the same order.
        Facts under ``title`` (which may restate the name) are all kept."""
        seen, chosen = own if own is not None else (set(), [])
        picked = self._evidence_tier(chosen, n)
        title = self._title_pred
        outside = sum(1 for i in chosen if self._data.pred[i] != title)
        if outside >= n:
            return picked
        starts, pred_of = self._part_start, self._part_pred
        heads: dict[int, int] = {}  # partition -> its first fact of other files
        for p in range(self._subj_parts[s], self._subj_parts[s + 1]):
            i, hi = starts[p], starts[p + 1]
            while i < hi and i in seen:
                i += 1
            if i < hi:
                heads[p] = i
        kept, spanning = self._kept_heads(
            {p: (head, pred_of[p], self._part_type[p]) for p, head in heads.items()}, n
        )
        for p, head in heads.items():
            if pred_of[p] != title and self._class_of(pred_of[p]) in spanning:
                if p in kept:
                    picked.append(head)
                continue
            hi = starts[p + 1]
            taken, i = 0, head
            while i < hi and taken < n:
                if i not in seen:
                    picked.append(i)
                    taken += 1
                i += 1
        return picked

    def _evidence_tier(self, chosen: Sequence[int], n: int) -> list[int]:
        """The evidence files' facts that may be picked: all of a predicate class that
        spans fewer than ``n`` predicates; of the others, in each file the first fact of
        each partition (see ``_sample``). Not only the first ``n`` of each type: a
        predicate that names a word of the question comes first (``rank.speaks``), and
        this copy does not know the question."""
        if not chosen:
            return []
        d = self._data
        idx = np.asarray(chosen, dtype=np.int64)
        parts = (np.searchsorted(d.part_start, idx, "right") - 1).tolist()
        files, preds = d.file[idx].tolist(), d.pred[idx].tolist()
        title = self._title_pred
        spanning = self._spanning_classes(preds, n)
        firsts: dict[tuple[int, int], int] = {}
        picked: list[int] = []
        for pos, part, f, pred in zip(chosen, parts, files, preds, strict=True):
            if pred == title or self._class_of(pred) not in spanning:
                picked.append(pos)
            else:
                firsts.setdefault((f, part), pos)  # chosen is in partition order
        picked.extend(firsts.values())
        return picked

    def _class_of(self, pred: int) -> int:
        """The predicate's tier (``model.predicate_preference``)."""
        return self._pred_pref[pred][0]

    def _spanning_classes(self, preds: Iterable[int], n: int) -> set[int]:
        """The predicate tiers holding at least ``n`` predicates outside ``title``."""
        per_class: dict[int, set[int]] = {}
        for pred in preds:
            if pred != self._title_pred:
                per_class.setdefault(self._class_of(pred), set()).add(pred)
        return {c for c, found in per_class.items() if len(found) >= n}

    def _kept_heads(
        self, heads: Mapping[int, tuple[int, int, int]], n: int
    ) -> tuple[set[int], set[int]]:
        """Of other files' partitions (partition -> (first fact, predicate, type)): the
        predicate tiers spanning ``n`` predicates, and those of their partitions whose
        first fact may be picked (``_first_per_type``)."""
        spanning = self._spanning_classes((pred for _, pred, _ in heads.values()), n)
        of_spanning = {p: h for p, h in heads.items() if self._class_of(h[1]) in spanning}
        return self._first_per_type(of_spanning, n), spanning

    def _first_per_type(self, heads: Mapping[int, tuple[int, int, int]], n: int) -> set[int]:
        """Of partitions' first facts (partition -> (position, predicate, type)) of one
        tier of files, the partitions outside ``title`` whose first fact comes among the
        first ``n`` of its type and predicate class in pool order: by the predicate's
        preference, confidence, then predicate (one partition per predicate and type, so
        nothing else ties)."""
        conf, title, pref = self._data.conf, self._title_pred, self._pred_pref
        groups: dict[tuple[int, int], list[tuple[tuple[int, int], float, int, int]]] = {}
        for part, (head, pred, kind) in heads.items():
            if pred != title:
                key = (pref[pred][0], kind)
                groups.setdefault(key, []).append((pref[pred], -float(conf[head]), pred, part))
        return {entry[-1] for group in groups.values() for entry in sorted(group)[:n]}

    def _facts(self, positions: Sequence[int]) -> dict[int, Fact]:
        """The facts at these positions (those made before from the cache; a hub's best
        facts are in most answers), the others' columns gathered once."""
        made = self._made
        found = {p: f for p in positions if (f := made.get(p)) is not None}
        todo = [p for p in positions if p not in found]
        if todo:
            if len(made) + len(todo) > CACHE_ENTRIES:
                made.clear()
            fresh = self._gather(todo)
            made.update(fresh)
            found.update(fresh)
        return found

    def _gather(self, positions: Sequence[int]) -> dict[int, Fact]:
        d = self._data
        idx = np.asarray(positions, dtype=np.int64)
        objs = d.obj[idx]
        ends = d.object_ends[objs].tolist()
        starts = np.where(objs > 0, d.object_ends[objs - 1], 0).tolist()
        blob = d.object_blob
        spellings, predicates, files, extractors = (
            d.spellings,
            d.predicates,
            d.files,
            d.extractors,
        )
        return {
            pos: Fact(
                spellings[sp],
                predicates[pr],
                blob[a:b].decode("utf-8", "surrogatepass"),
                conf,
                SOURCE_TYPES[st],
                files[fi],
                extractors[ex],
            )
            for pos, sp, pr, a, b, conf, st, fi, ex in zip(
                positions,
                d.spell[idx].tolist(),
                d.pred[idx].tolist(),
                starts,
                ends,
                d.conf[idx].tolist(),
                d.stype[idx].tolist(),
                d.file[idx].tolist(),
                d.extr[idx].tolist(),
                strict=True,
            )
        }

    def close(self) -> None:
        """The owner of the base closes it."""
