"""Reading facts: by subject, by source file, and as per-subject summaries for ranking.
Functions of one open connection; ``store.py`` owns transactions."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from pipeline.kodb import schema, summaries
from pipeline.kodb.chunking import CHUNK, chunks
from pipeline.kodb.dialects import Dialect
from pipeline.kodb.schema import from_row, subject_key
from pipeline.model import Fact, SubjectSummary

#: Most files ``subject_summaries`` may leave out (NOT IN lists of ``CHUNK`` values; SQLite
#: takes 32766 parameters a statement since 3.32); privacy.py falls back to all facts above.
MAX_EXCLUDED_FILES = 10_000


def facts_for_subjects(conn: Connection, subject_norms: Iterable[str]) -> list[Fact]:
    """All facts whose subject_norm is in the set (chunked IN lists on the subject key).

    Sorted by subject_norm, then predicate, object, source_file, extractor.
    """
    wanted = set(subject_norms)
    keys = sorted({subject_key(n) for n in wanted})
    t = schema.facts
    cols = (
        t.c.subject,
        t.c.subject_norm,
        t.c.predicate,
        t.c.object,
        t.c.confidence,
        t.c.source_type,
        t.c.source_file,
        t.c.extractor,
    )
    rows: list[Any] = []
    for chunk in chunks(keys):
        rows.extend(conn.execute(sa.select(*cols).where(t.c.subject_key.in_(chunk))))
    # The hash selects; the stored norm decides (guards against a key collision).
    rows = [r for r in rows if r.subject_norm in wanted]
    rows.sort(key=lambda r: (r.subject_norm, r.predicate, r.object, r.source_file, r.extractor))
    return [from_row(Fact, r) for r in rows]


def subject_source_files(conn: Connection, subject_norms: Iterable[str]) -> set[str]:
    """The distinct source files of these subjects' facts (privacy.py checks them)."""
    wanted = set(subject_norms)
    t = schema.facts
    found: set[str] = set()
    for chunk in chunks(sorted({subject_key(n) for n in wanted})):
        stmt = (
            sa.select(t.c.subject_norm, t.c.source_file)
            .where(t.c.subject_key.in_(chunk))
            .distinct()
        )
        found.update(f for norm, f in conn.execute(stmt) if norm in wanted)
    return found


def subjects_by_source_file(conn: Connection, paths: Iterable[str]) -> dict[str, set[str]]:
    """For each of these source files, the subject_norms of its facts (every path is a
    key; a file without facts maps to an empty set)."""
    t = schema.facts
    files = sorted(set(paths))
    found: dict[str, set[str]] = {f: set() for f in files}
    for chunk in chunks(files):
        stmt = (
            sa.select(t.c.source_file, t.c.subject_norm)
            .where(t.c.source_file.in_(chunk))
            .distinct()
        )
        for source_file, subject_norm in conn.execute(stmt):
            found[source_file].add(subject_norm)
    return found


def fact_objects(
    conn: Connection, predicates: Sequence[str], extractor: str
) -> set[tuple[str, str]]:
    """Distinct (source_file, object) of one extractor's facts with these predicates."""
    t = schema.facts
    stmt = (
        sa.select(t.c.source_file, t.c.object)
        .where(t.c.extractor == extractor, t.c.predicate.in_(list(predicates)))
        .distinct()
    )
    return {(f, o) for f, o in conn.execute(stmt)}


def subject_summaries(
    conn: Connection,
    dialect: Dialect,
    subject_norms: Iterable[str],
    *,
    sample_size: int,
    evidence_files: Iterable[str],
    only_files: Iterable[str] | None,
    exclude_files: Iterable[str],
    cache: summaries.ReadCache | None,
) -> dict[str, SubjectSummary]:
    """subject_norm -> SubjectSummary (``KoDB.subject_summaries`` says what each holds)."""
    wanted = set(subject_norms)
    excluded = sorted(set(exclude_files))
    if len(excluded) > MAX_EXCLUDED_FILES:
        raise ValueError(f"at most {MAX_EXCLUDED_FILES} excluded files, not {len(excluded)}")
    only = None if only_files is None else sorted(set(only_files))
    evidence = sorted(set(evidence_files))
    keys = sorted({subject_key(n) for n in wanted})
    t = schema.facts
    agg: dict[str, dict[str, Any]] = {}
    sample: dict[str, list[Fact]] = defaultdict(list)
    stored: dict[str, SubjectSummary] = {}
    if only is None and not excluded:
        stored = summaries.read(conn, dialect, keys, wanted, sample_size, evidence, CHUNK, cache)
    rest = [subject_key(n) for n in sorted(wanted - stored.keys())]
    for chunk in chunks(rest):
        where = [t.c.subject_key.in_(chunk)]
        if only is not None:
            where.append(t.c.source_file.in_(only))
        where.extend(t.c.source_file.not_in(part) for part in chunks(excluded))
        summaries.counts(conn, where, wanted, agg)
        if sample_size > 0:
            for fact in summaries.sample(conn, where, sample_size, evidence, dialect.code_point):
                if fact.subject_norm in wanted:
                    sample[fact.subject_norm].append(fact)
    found = summaries.summaries_from_agg(agg, sample)
    found.update(stored)
    return dict(sorted(found.items()))
