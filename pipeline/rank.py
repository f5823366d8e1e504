"""Cross-source corroboration ranking (seed 001).

A subject that several files of several source types talk about is better evidence than
one confident claim in one file. For each candidate subject:

    score = source_count*10 + min(files per type over session, wiki, adr)*5 + total_facts

``total_facts`` counts at most ``cap`` facts per predicate, our guard against the seed's
predicate-dump pitfall (a generic predicate flooding one subject). Ties: more source files
first ("cross-source first"), then the higher confidence, then the case-folded name.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from pipeline.model import SOURCE_TYPES, Fact, FactView, SubjectRank, normalize_text

SOURCE_WEIGHT: Final = 10  # per distinct source file
TYPE_SPREAD_WEIGHT: Final = 5  # per file of the least represented source type
CRYSTAL_MIN_TYPES: Final = 2  # "session noise" is not crystal-ready
CRYSTAL_MIN_FILES: Final = 3
CRYSTAL_MIN_CONFIDENCE: Final = 0.85


def score_of(source_count: int, per_type: Mapping[str, int], total_facts: int) -> int:
    """The seed's score from its three ingredients."""
    spread = min(per_type.get(t, 0) for t in SOURCE_TYPES)
    return source_count * SOURCE_WEIGHT + spread * TYPE_SPREAD_WEIGHT + total_facts


def is_crystal_ready(types: int, source_count: int, max_confidence: float) -> bool:
    """≥ 2 source types, ≥ 3 source files and a confident fact: ready to become evergreen."""
    return (
        types >= CRYSTAL_MIN_TYPES
        and source_count >= CRYSTAL_MIN_FILES
        and max_confidence >= CRYSTAL_MIN_CONFIDENCE
    )


def display_name(facts: Sequence[Fact]) -> str:
    """The spelling most facts use; ties go to the smallest string, so output is stable."""
    counts = Counter(f.subject for f in facts)
    return min(counts, key=lambda s: (-counts[s], s))


def representative_facts(facts: Sequence[Fact], n: int) -> tuple[FactView, ...]:
    """Up to n facts: highest confidence first, spread over source types and predicates."""
    pool = sorted(
        facts,
        key=lambda f: (-f.confidence, f.predicate, f.source_type, f.source_file, f.object),
    )
    chosen: list[Fact] = []
    seen_types: set[str] = set()
    seen_preds: set[str] = set()
    while pool and len(chosen) < n:
        # Unseen type and unseen predicate beat confidence; pool order breaks the rest.
        best = min(
            range(len(pool)),
            key=lambda i: (
                (pool[i].source_type in seen_types) + (pool[i].predicate in seen_preds),
                i,
            ),
        )
        fact = pool.pop(best)
        chosen.append(fact)
        seen_types.add(fact.source_type)
        seen_preds.add(fact.predicate)
    return tuple(
        FactView(f.predicate, f.object, f.confidence, f.source_type, f.source_file) for f in chosen
    )


def rank_subject(
    facts: Sequence[Fact],
    *,
    facts_per_subject: int,
    facts_per_predicate_cap: int,
    best_cosine: float | None = None,
) -> SubjectRank:
    """Rank one subject on all of its facts."""
    files_by_type: dict[str, set[str]] = defaultdict(set)
    for f in facts:
        files_by_type[f.source_type].add(f.source_file)
    per_type = {t: len(files_by_type.get(t, ())) for t in SOURCE_TYPES}
    source_count = len({f.source_file for f in facts})
    predicates = dict(sorted(Counter(f.predicate for f in facts).items()))
    total = sum(min(c, facts_per_predicate_cap) for c in predicates.values())
    max_conf = max(f.confidence for f in facts)
    types = sum(1 for c in per_type.values() if c)
    return SubjectRank(
        subject=display_name(facts),
        score=score_of(source_count, per_type, total),
        source_count=source_count,
        per_type=per_type,
        total_facts=total,
        raw_facts=len(facts),
        max_confidence=max_conf,
        best_cosine=best_cosine,
        crystal_ready=is_crystal_ready(types, source_count, max_conf),
        predicates=predicates,
        facts=representative_facts(facts, facts_per_subject),
    )


def sort_key(s: SubjectRank) -> tuple[int, int, float, str, str]:
    return (-s.score, -s.source_count, -s.max_confidence, normalize_text(s.subject), s.subject)


def rank_subjects(
    facts: Iterable[Fact],
    *,
    top_k: int,
    facts_per_subject: int,
    facts_per_predicate_cap: int,
    best_cosine: Mapping[str, float] | None = None,
    crystal_only: bool = False,
) -> list[SubjectRank]:
    """Group facts by case-folded subject, rank each, sort, keep the top K."""
    groups: dict[str, list[Fact]] = defaultdict(list)
    for f in facts:
        groups[f.subject_norm].append(f)
    cosines = best_cosine or {}
    ranked = [
        rank_subject(
            group,
            facts_per_subject=facts_per_subject,
            facts_per_predicate_cap=facts_per_predicate_cap,
            best_cosine=cosines.get(norm),
        )
        for norm, group in groups.items()
    ]
    if crystal_only:
        ranked = [s for s in ranked if s.crystal_ready]
    ranked.sort(key=sort_key)
    return ranked[:top_k]
