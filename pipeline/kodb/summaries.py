"""Per-subject summaries for ranking: computed from the facts, or read from ``subject_stats``.

A summary (``model.SubjectSummary``) holds a subject's counts and a fact sample that holds
every fact ``rank.representative_facts`` can pick. Computing one scans all of the subject's
facts, which for a hub subject (tens of thousands of facts) costs hundreds of milliseconds,
on every answer that names it. So each subject's summary is stored once its facts settle:

* the counts, exactly what the GROUP BY computes;
* a sample independent of the question: for each partition of (predicate, source type, the
  object if the predicate is ``title``) the first ``SAMPLE_DEPTH`` facts in
  representative_facts' order (confidence first), and the partition's size.

At answer time the sample that representative_facts needs is: the facts of the question's
evidence files (fetched, a handful of files), and of every other partition its first ``n``
facts from files that are not evidence. The stored list holds them unless evidence files
crowd it (fewer than ``n`` other facts among its ids while the partition is larger than the
list); then that subject's sample is computed from its facts, its stored counts still
holding (a hub's counts are a GROUP BY over thousands of facts). A sample holding more
facts than needed picks the same ones (representative_facts takes the best of its pool, and
the needed ones are in it), so the ranked answer equals the one from all facts.

Freshness: every write of a subject's facts deletes its row (``invalidate``) and stores the
missing rows anew (``store``) in the same transaction, so facts and summaries commit
together; a subject without a row (a KO-DB just upgraded) is computed from the facts. Writers
serialise with refreshes (``Dialect.lock_writers``), so a refresh never stores counts that
a concurrent writer is changing.

SQL only through SQLAlchemy Core; the store (store.py) owns the transactions.
"""

from __future__ import annotations

import json
import operator
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import fields
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from pipeline.kodb import schema
from pipeline.kodb.chunking import chunks
from pipeline.kodb.dialects import Dialect
from pipeline.model import (
    POOL_ORDER,
    SAMPLE_PARTITION,
    TITLE_PREDICATE,
    Fact,
    SubjectSummary,
    pool_key,
)

#: Facts kept per partition in a stored sample: answers show up to ``facts_per_subject`` (3
#: by default) per subject; the margin leaves room for facts of the question's own files.
SAMPLE_DEPTH: Final = 8
#: Subjects per refresh step (one GROUP BY and one window query each).
REFRESH_CHUNK: Final = 500

CodePoint = Callable[[Any], Any]

_FACT_COLUMNS: Final = tuple(f.name for f in fields(Fact))


def _from_row(row: Any, start: int = 0) -> Fact:
    """A Fact from a row holding its fields in order from ``start`` (answers read
    thousands: positional, not by name)."""
    return Fact(*row[start : start + len(_FACT_COLUMNS)])


# --- computed from the facts -------------------------------------------------------------


def counts(
    conn: Connection, where: Sequence[Any], wanted: set[str], agg: dict[str, dict[str, Any]]
) -> None:
    """The counts of the subjects the ``where`` clauses select: one GROUP BY of their facts,
    a row per (subject, source type, file, predicate, spelling), summed up here."""
    t = schema.facts
    groups = (t.c.subject_norm, t.c.source_type, t.c.source_file, t.c.predicate, t.c.subject)
    stmt = (
        sa.select(*groups, sa.func.count(), sa.func.max(t.c.confidence))
        .where(*where)
        .group_by(*groups)
    )
    files: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for norm, source_type, source_file, predicate, spelling, n, best in conn.execute(stmt):
        if norm not in wanted:  # the hash selects; the stored norm decides
            continue
        a = agg.setdefault(
            norm,
            {"raw_facts": 0, "max_confidence": float(best), "predicates": {}, "spellings": {}},
        )
        a["raw_facts"] += int(n)
        a["max_confidence"] = max(a["max_confidence"], float(best))
        a["predicates"][predicate] = a["predicates"].get(predicate, 0) + int(n)
        a["spellings"][spelling] = a["spellings"].get(spelling, 0) + int(n)
        files[norm][source_type].add(source_file)
    for norm, by_type in files.items():
        agg[norm]["source_count"] = len(set().union(*by_type.values()))
        agg[norm]["per_type"] = {st: len(fs) for st, fs in sorted(by_type.items())}


def _order(code_point: CodePoint) -> list[Any]:
    """``model.POOL_ORDER`` in SQL, text compared by code point as Python compares it."""
    t = schema.facts
    return [t.c[name].desc() if desc else code_point(t.c[name]) for name, desc in POOL_ORDER]


def _title_object() -> Any:
    t = schema.facts
    return sa.case((t.c.predicate == TITLE_PREDICATE, t.c.object), else_=sa.null())


def _partition() -> list[Any]:
    """``model.SAMPLE_PARTITION`` of each subject's facts, in SQL."""
    t = schema.facts
    column = {"title_object": _title_object()}
    return [t.c.subject_norm, *(column.get(name, t.c.get(name)) for name in SAMPLE_PARTITION)]


def sample_select(
    where: Sequence[Any],
    size: int,
    evidence: Sequence[str],
    code_point: CodePoint,
    subjects: Sequence[str] | None = None,
) -> sa.Select[Any]:
    """The question's sample computed from the facts: at most ``size`` facts per partition
    of (subject, predicate, source type, the file if it is evidence, the object of a title);
    ``subjects`` keeps those subject_norms only (a filter on the partitions, so ``where``
    still picks the index)."""
    t = schema.facts
    is_evidence = t.c.source_file.in_(evidence)
    rank = (
        sa.func.row_number()
        .over(
            partition_by=[*_partition(), sa.case((is_evidence, t.c.source_file), else_=sa.null())],
            order_by=_order(code_point),
        )
        .label("rank")
    )
    cols = [t.c[name] for name in _FACT_COLUMNS]
    ranked = sa.select(*cols, t.c.subject_norm, rank).where(*where).subquery("ranked")
    stmt = sa.select(*(ranked.c[name] for name in _FACT_COLUMNS)).where(ranked.c.rank <= size)
    if subjects is not None:
        stmt = stmt.where(ranked.c.subject_norm.in_(subjects))
    return stmt


def sample(
    conn: Connection,
    where: Sequence[Any],
    size: int,
    evidence: Sequence[str],
    code_point: CodePoint,
    subjects: Sequence[str] | None = None,
) -> list[Fact]:
    """``sample_select``'s facts."""
    stmt = sample_select(where, size, evidence, code_point, subjects)
    return [_from_row(r) for r in conn.execute(stmt)]


# --- stored --------------------------------------------------------------------------------


def invalidate(conn: Connection, dialect: Dialect, keys: Iterable[str], chunk: int) -> None:
    """Forget the stored summaries of these subject keys (their facts are being written)."""
    s = schema.subject_stats
    for part in chunks(sorted(set(keys)), chunk):
        conn.execute(s.delete().where(dialect.one_of(s.c.subject_key, part)))


def missing_keys(conn: Connection) -> list[str]:
    """Subject keys without a stored summary."""
    s, st = schema.subjects, schema.subject_stats
    stmt = sa.select(s.c.subject_key).where(~sa.exists().where(st.c.subject_key == s.c.subject_key))
    return sorted(conn.execute(stmt).scalars())


def store(conn: Connection, dialect: Dialect, keys: Sequence[str]) -> int:
    """Compute and store the summaries of these subject keys; return how many were stored."""
    t, st = schema.facts, schema.subject_stats
    where = [t.c.subject_key.in_(keys)]
    norms = dict(
        conn.execute(
            sa.select(schema.subjects.c.subject_key, schema.subjects.c.subject_norm).where(
                schema.subjects.c.subject_key.in_(keys)
            )
        ).all()
    )
    agg: dict[str, dict[str, Any]] = {}
    counts(conn, where, set(norms.values()), agg)
    part = _partition()
    rank = sa.func.row_number().over(partition_by=part, order_by=_order(dialect.code_point))
    size = sa.func.count().over(partition_by=part)
    ranked = (
        sa.select(
            t.c.id,
            t.c.subject_norm,
            t.c.predicate,
            t.c.source_type,
            _title_object().label("title_object"),
            rank.label("rank"),
            size.label("size"),
        )
        .where(*where)
        .subquery("ranked")
    )
    stmt = sa.select(ranked).where(ranked.c.rank <= SAMPLE_DEPTH)
    parts: dict[str, dict[tuple[str, str, str], tuple[int, list[tuple[int, int]]]]] = defaultdict(
        dict
    )
    for row in conn.execute(stmt):
        key = (row.predicate, row.source_type, row.title_object or "")
        n, ids = parts[row.subject_norm].get(key, (int(row.size), []))
        ids.append((int(row.rank), int(row.id)))
        parts[row.subject_norm][key] = (n, ids)
    rows = []
    for key, norm in sorted(norms.items()):
        if norm not in agg:
            continue  # a subject row no fact refers to any more: nothing to summarise
        a = agg[norm]
        sampled = [
            [n, [fid for _, fid in sorted(ids)]] for _, (n, ids) in sorted(parts[norm].items())
        ]
        rows.append(_stats_row(key, norm, a, sampled))
    if rows:
        conn.execute(st.insert(), rows)
    return len(rows)


def with_facts(conn: Connection, dialect: Dialect, keys: Iterable[str], chunk: int) -> set[str]:
    """Those of these subject keys that have stored facts (asked before an insert: the
    subjects whose facts will not all be the inserted ones)."""
    t = schema.facts
    found: set[str] = set()
    for part in chunks(sorted(set(keys)), chunk):
        stmt = sa.select(t.c.subject_key).where(dialect.one_of(t.c.subject_key, part))
        found.update(conn.execute(stmt.distinct()).scalars())
    return found


def store_whole(
    conn: Connection,
    rows: Sequence[Mapping[str, Any]],
    ids: Mapping[str, int],
    older: Collection[str],
    chunk: int,
) -> int:
    """Store the summaries of the subjects whose stored facts are exactly the ``rows`` just
    inserted (``schema.facts`` columns; ``ids``: the ids of those really inserted, by
    fact_key; ``older``: the subject keys that had facts before the insert, from
    ``with_facts``); return how many were stored. The rest are left to ``store``.

    The same rows as ``store`` computes from the facts, without reading them back: on a
    first ingest ``store``'s GROUP BY and window query would be a large share of the run.
    Asking which subjects had facts before the insert, rather than counting each one's
    facts after it, costs nothing on a first ingest (the index is empty).
    """
    by_key: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        by_key[row["subject_key"]].append(row)
    out = []
    for key, facts in sorted(by_key.items()):
        if key in older or any(f["fact_key"] not in ids for f in facts):
            continue  # older facts, or a row another writer stored first: ``store`` counts
        norms = {f["subject_norm"] for f in facts}
        if len(norms) != 1:
            continue  # two names share a hash: ``store`` tells them apart
        out.append(_stored_row(key, norms.pop(), facts, ids))
    for part in chunks(out, chunk):
        conn.execute(schema.subject_stats.insert(), list(part))
    return len(out)


def _stored_row(
    key: str, norm: str, facts: Sequence[Mapping[str, Any]], ids: Mapping[str, int]
) -> dict[str, Any]:
    """One subject's ``subject_stats`` row from all of its facts rows (``store``'s rules:
    ``counts``' aggregates, each partition's size and first ``SAMPLE_DEPTH`` ids in
    ``_order``, which compares text by code point as Python does)."""
    predicates: dict[str, int] = defaultdict(int)
    spellings: dict[str, int] = defaultdict(int)
    files: dict[str, set[str]] = defaultdict(set)
    parts: dict[tuple[str, str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for f in facts:
        predicates[f["predicate"]] += 1
        spellings[f["subject"]] += 1
        files[f["source_type"]].add(f["source_file"])
        title = f["object"] if f["predicate"] == TITLE_PREDICATE else ""
        parts[(f["predicate"], f["source_type"], title)].append(f)

    def order(f: Mapping[str, Any]) -> tuple[Any, ...]:
        return (*pool_key(f, operator.getitem), ids[f["fact_key"]])

    sampled = [
        [len(part), [ids[f["fact_key"]] for f in sorted(part, key=order)[:SAMPLE_DEPTH]]]
        for _, part in sorted(parts.items())
    ]
    counted = {
        "source_count": len(set().union(*files.values())),
        "raw_facts": len(facts),
        "max_confidence": float(max(f["confidence"] for f in facts)),
        "per_type": {st: len(fs) for st, fs in sorted(files.items())},
        "predicates": predicates,
        "spellings": spellings,
    }
    return _stats_row(key, norm, counted, sampled)


def _stats_row(
    key: str, norm: str, a: Mapping[str, Any], sampled: list[list[Any]]
) -> dict[str, Any]:
    """A ``subject_stats`` row from ``counts``' aggregates and the sample's id lists."""
    return {
        "subject_key": key,
        "subject_norm": norm,
        "source_count": a["source_count"],
        "raw_facts": a["raw_facts"],
        "max_confidence": a["max_confidence"],
        "per_type": json.dumps(a["per_type"], sort_keys=True),
        "predicates": json.dumps(a["predicates"], sort_keys=True, ensure_ascii=False),
        "spellings": json.dumps(a["spellings"], sort_keys=True, ensure_ascii=False),
        "sample": json.dumps(sampled),
        "sample_depth": SAMPLE_DEPTH,
    }


def evidence_where(files: Sequence[str], keys: Iterable[str]) -> list[Any]:
    """The facts of the question's files about these subjects (their keys): found in the
    facts' index by (file, subject key), ``schema.FILE_INDEX``."""
    t = schema.facts
    return [t.c.source_file.in_(files), t.c.subject_key.in_(sorted(set(keys)))]


def _facts_by_id(dialect: Dialect) -> sa.Select[Any]:
    """The facts whose ids a JSON list (``:ids``) holds: one parameter however many ids (an
    answer reads hundreds; as IN lists their bind parameters would cost more than the rows)."""
    t = schema.facts
    ids = dialect.ids_select("ids")
    return sa.select(t.c.id, *(t.c[name] for name in _FACT_COLUMNS)).where(t.c.id.in_(ids))


class ReadCache:
    """What ``read`` fetched that does not depend on the question: stored rows by subject
    key (None: the subject has none), their sample lists and counts parsed, and sample
    facts by id.

    Only for a caller that drops it whenever KO-DB may have changed (the service's memo,
    a load-context batch): a stored row and its facts are then what a read would return."""

    def __init__(self) -> None:
        self.rows: dict[str, Any | None] = {}
        self.samples: dict[str, list[list[Any]]] = {}
        self.counts: dict[str, dict[str, Any]] = {}
        self.facts: dict[int, Fact] = {}

    def entries(self) -> int:
        return len(self.rows) + len(self.facts)

    def clear(self) -> None:
        self.rows.clear()
        self.samples.clear()
        self.counts.clear()
        self.facts.clear()


def _stored_rows(
    conn: Connection, keys: Sequence[str], size: int, chunk: int, cache: ReadCache | None
) -> list[Any]:
    """The ``subject_stats`` rows of these keys (with their samples when ``size`` > 0),
    those ``cache`` lacks fetched and remembered."""
    st = schema.subject_stats
    # Counts alone (size 0, how answers rank) leave the stored sample unread.
    wanted_cols = [c for c in st.c if size > 0 or c.name != "sample"]
    if cache is None or size == 0:
        cache = None
    todo = keys if cache is None else [k for k in keys if k not in cache.rows]
    rows: list[Any] = []
    for part in chunks(todo, chunk):
        rows.extend(conn.execute(sa.select(*wanted_cols).where(st.c.subject_key.in_(part))))
    if cache is None:
        return rows
    fetched = {r.subject_key: r for r in rows}
    for key in todo:
        cache.rows[key] = fetched.get(key)
    return [r for k in keys if (r := cache.rows[k]) is not None]


def read(
    conn: Connection,
    dialect: Dialect,
    keys: Sequence[str],
    wanted: set[str],
    size: int,
    evidence: Sequence[str],
    chunk: int,
    cache: ReadCache | None = None,
) -> dict[str, SubjectSummary]:
    """The stored summaries of these subject keys that can serve a sample of ``size`` with
    these evidence files; a subject left out must be computed from its facts. ``cache``
    serves the stored rows and sample facts read before (the question's own files are read
    every time)."""
    rows = [
        r
        for r in _stored_rows(conn, keys, size, chunk, cache)
        if r.subject_norm in wanted and r.sample_depth >= size
    ]
    if not rows:
        return {}
    reading = _StoredRead(conn, dialect, size, evidence, chunk, cache)
    samples = reading.samples(rows) if size > 0 else {}
    own: dict[str, list[Fact]] = {}
    if size > 0:
        reading.fetch_lists(samples)
        own = reading.evidence_facts(rows, samples)
    found, crowded = reading.assemble(rows, samples, own)
    found.update(reading.computed(crowded))
    return found


class _StoredRead:
    """One ``read``: the facts of the stored lists it fetched by id (the cache's, when
    given), and what it needs to judge whether a list serves the question."""

    def __init__(
        self,
        conn: Connection,
        dialect: Dialect,
        size: int,
        evidence: Sequence[str],
        chunk: int,
        cache: ReadCache | None,
    ) -> None:
        self.conn, self.dialect, self.size, self.chunk = conn, dialect, size, chunk
        self.evidence = evidence
        self.cache = cache
        self.facts: dict[int, Fact] = cache.facts if cache is not None else {}
        self.is_evidence = set(evidence).__contains__
        self.by_id = _facts_by_id(dialect)

    def samples(self, rows: Sequence[Any]) -> dict[str, list[list[Any]]]:
        """Each row's stored lists: [partition size, [fact ids]] per partition."""
        parsed = self.cache.samples if self.cache is not None else {}
        out: dict[str, list[list[Any]]] = {}
        for r in rows:
            if r.subject_key not in parsed:
                parsed[r.subject_key] = json.loads(r.sample)
            out[r.subject_norm] = parsed[r.subject_key]
        return out

    def fetch(self, ids: Iterable[int]) -> None:
        """Read these facts by id (those not read yet), in the table's order."""
        wanted_ids = sorted(set(ids) - self.facts.keys())
        if wanted_ids:
            for r in self.conn.execute(self.by_id, {"ids": json.dumps(wanted_ids)}):
                self.facts[int(r.id)] = _from_row(r, 1)

    def others_in_head(self, fids: Sequence[int]) -> int:
        """Facts read from files other than the question's among a list's first ``size``."""
        facts, size = self.facts, self.size
        return sum(
            1 for f in fids[:size] if f in facts and not self.is_evidence(facts[f].source_file)
        )

    def fetch_lists(self, samples: Mapping[str, list[list[Any]]]) -> None:
        """First the best ``size`` of each list: all an answer needs unless the question's
        own files hold some of them; only those lists are then read further."""
        size = self.size
        self.fetch(fid for parts in samples.values() for _, fids in parts for fid in fids[:size])
        self.fetch(
            fid
            for parts in samples.values()
            for _, fids in parts
            if self.others_in_head(fids) < size
            for fid in fids[size:]
        )

    def evidence_facts(
        self, rows: Sequence[Any], samples: Mapping[str, Any]
    ) -> dict[str, list[Fact]]:
        """The question's files: their best ``size`` facts per partition, those about these
        subjects found in the index by (file, subject key); the stored norm decides."""
        by_subject: dict[str, list[Fact]] = defaultdict(list)
        names = sorted(samples)
        key_of = {r.subject_norm: r.subject_key for r in rows}
        for files in chunks(list(self.evidence), self.chunk):
            for part in chunks(names, self.chunk):
                where = evidence_where(files, [key_of[n] for n in part])
                for fact in sample(
                    self.conn, where, self.size, files, self.dialect.code_point, part
                ):
                    by_subject[fact.subject_norm].append(fact)
        return by_subject

    def assemble(
        self,
        rows: Sequence[Any],
        samples: Mapping[str, list[list[Any]]],
        own: Mapping[str, list[Fact]],
    ) -> tuple[dict[str, SubjectSummary], dict[str, Any]]:
        """The summaries the stored lists serve, and the rows whose lists the question's
        files crowd (their samples are computed from the facts)."""
        found: dict[str, SubjectSummary] = {}
        crowded: dict[str, Any] = {}
        for r in rows:
            norm = r.subject_norm
            pool = list(own.get(norm, ()))
            served = self._pool(samples[norm] if self.size > 0 else (), pool)
            if served is _CROWDED:
                crowded[norm] = r
            elif served:
                found[norm] = _summary(norm, _stored_counts(r, self.cache), pool)
        return found, crowded

    def _pool(self, lists: Iterable[list[Any]], pool: list[Fact]) -> bool | object:
        """Add each stored list's facts the answer may pick to ``pool``: True when every
        list served, False when a fact vanished (the row is stale in this snapshot),
        ``_CROWDED`` when the question's files crowd a list."""
        facts, size = self.facts, self.size
        for n, fids in lists:
            head = [facts[f] for f in fids[:size] if f in facts]
            if len(head) == min(size, len(fids)) and self.others_in_head(fids) >= size:
                pool.extend(head)  # holds the list's first ``size`` facts from other files
                continue
            kept = [facts[f] for f in fids if f in facts]
            if len(kept) != len(fids):
                return False
            others = sum(1 for f in kept if not self.is_evidence(f.source_file))
            if others < size and n > len(fids):
                # The counts still hold; the sample is computed from the subject's facts.
                return _CROWDED
            pool.extend(kept)
        return True

    def computed(self, crowded: Mapping[str, Any]) -> dict[str, SubjectSummary]:
        """The crowded subjects' summaries: stored counts, samples from their facts."""
        computed: dict[str, list[Fact]] = defaultdict(list)
        names = sorted(crowded)
        for part in chunks(names, self.chunk):
            where = [schema.facts.c.subject_key.in_([crowded[n].subject_key for n in part])]
            for fact in sample(self.conn, where, self.size, self.evidence, self.dialect.code_point):
                computed[fact.subject_norm].append(fact)
        return {
            norm: _summary(norm, _stored_counts(crowded[norm], self.cache), computed[norm])
            for norm in names
        }


#: ``_StoredRead._pool``'s "the question's files crowd a stored list".
_CROWDED = object()


def _stored_counts(row: Any, cache: ReadCache | None) -> dict[str, Any]:
    """A stored row's counts as ``_summary`` takes them (parsed once per ``cache``)."""
    if cache is not None and row.subject_key in cache.counts:
        return cache.counts[row.subject_key]
    counted = {
        "spellings": json.loads(row.spellings),
        "source_count": row.source_count,
        "per_type": json.loads(row.per_type),
        "predicates": json.loads(row.predicates),
        "raw_facts": row.raw_facts,
        "max_confidence": row.max_confidence,
    }
    if cache is not None:
        cache.counts[row.subject_key] = counted
    return counted


def summaries_from_agg(
    agg: Mapping[str, dict[str, Any]], sample_facts: Mapping[str, Sequence[Fact]]
) -> dict[str, SubjectSummary]:
    """SubjectSummary objects from ``counts``' aggregates and a sample per subject."""
    return {norm: _summary(norm, agg[norm], sample_facts.get(norm, ())) for norm in sorted(agg)}


def _summary(norm: str, a: Mapping[str, Any], sample: Iterable[Fact]) -> SubjectSummary:
    """One subject's summary from its aggregates (``counts``' keys) and sample facts, the
    sample de-duplicated and sorted as ``facts_for_subjects`` sorts facts."""
    unique = {(f.subject, f.predicate, f.object, f.source_file, f.extractor): f for f in sample}
    return SubjectSummary(
        subject_norm=norm,
        spellings=a["spellings"],
        source_count=int(a["source_count"]),
        per_type=a["per_type"],
        predicates=a["predicates"],
        raw_facts=int(a["raw_facts"]),
        max_confidence=float(a["max_confidence"]),
        sample=tuple(
            sorted(
                unique.values(), key=lambda f: (f.predicate, f.object, f.source_file, f.extractor)
            )
        ),
    )
