"""Ranking: relevance first, cross-source corroboration (seed 001) second.

A subject that several files of several source types talk about is better evidence than
one confident claim in one file. For each candidate subject, over all of its facts:

    score = source_count*10 + min(files per type over session, wiki, adr)*5 + total_facts

``total_facts`` counts at most ``cap`` facts per predicate, our guard against the seed's
predicate-dump pitfall (a generic predicate flooding one subject).

The seed orders subjects that already passed its question filter (LIKE on the subject); so
here corroboration orders only candidates of comparable relevance (``answer_order``):

1. the relevance tier: in semantic mode the z-band (strong, moderate, weak) of the cosine
   of the hit that makes the subject relevant, in degraded mode the number of question
   words its name matches (more first);
2. subjects a hit is about before subjects the hits merely mention (bridge.py);
3. the seed's rule: score, then source count ("cross-source first"), then max confidence;
4. then the better cosine, then the case-folded name (never the alphabet before cosine).

The tiers were chosen by answer quality on judged questions (``bench/answer_rules.py``,
``vault-ko eval --judged``; docs/ranking.md, figures in docs/benchmarks-history.md).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from pipeline.bridge import MIN_TERM_CHARS
from pipeline.model import (
    SOURCE_TYPES,
    TITLE_PREDICATE,
    Band,
    Candidate,
    Fact,
    FactView,
    SubjectRank,
    SubjectSummary,
    normalize_text,
    pool_key,
    predicate_preference,
    summaries_from_facts,
    summarize,
)

SOURCE_WEIGHT: Final = 10  # per distinct source file
TYPE_SPREAD_WEIGHT: Final = 5  # per file of the least represented source type
CRYSTAL_MIN_TYPES: Final = 2  # "session noise" is not crystal-ready
CRYSTAL_MIN_FILES: Final = 3
CRYSTAL_MIN_CONFIDENCE: Final = 0.85
#: Tier order of the answer label's z-bands.
BAND_TIER: Final[Mapping[str, int]] = {"strong": 0, "moderate": 1, "weak": 2}
#: Evidence a hit is about the subject, before evidence it only mentions it.
EVIDENCE_GROUP: Final[Mapping[str, int]] = {"own": 0, "title": 0, "words": 0, "mentioned": 1}

#: band_of(cosine) -> the z-band of a candidate's cosine (None: no calibration to judge by).
BandOf = Callable[[float], Band | None]


@dataclass(frozen=True)
class OrderRule:
    """Which semantic candidates count as comparably relevant, and where mentions go.

    ``tiers``: ``band``, the same z-band of the answer label; ``margin``, the same step of
    ``margin_sigmas`` vault σ below the best hit's cosine; ``cosine``, only equal cosines
    (corroboration merely breaks ties); ``blend`` (the default), no steps: the σ below the best
    hit's cosine less ``blend_sigmas`` per tenfold of the seed's score, so a subject ten times
    better corroborated leads one up to half a σ more relevant, and a small change of cosine
    never makes a jump in the order. ``mentions``: a subject the hits only mention
    follows the subjects a hit is about of its own tier (``tier``), of its z-band
    (``band``), or all of them (``last``).
    """

    tiers: Literal["band", "margin", "cosine", "blend"] = "blend"
    margin_sigmas: float = 0.25
    #: ``blend``: σ of cosine that ten times the seed's score makes up for.
    blend_sigmas: float = 0.5
    mentions: Literal["tier", "band", "last"] = "last"
    #: Degraded mode: a step of this share of the best hit's word score is one tier.
    bm25_step: float = 0.1

    def tier(
        self, cosine: float, band: Band | None, top: float, sigma: float | None, score: int = 0
    ) -> float:
        """The tier of a candidate's cosine (smaller = more relevant)."""
        if self.tiers == "blend" and sigma:
            return max(top - cosine, 0.0) / sigma - self.blend_sigmas * math.log10(max(score, 1))
        if self.tiers == "band" and band is not None:
            return BAND_TIER[band]
        if self.tiers == "margin" and sigma:
            return math.floor(max(top - cosine, 0.0) / (self.margin_sigmas * sigma) + 1e-9)
        return -cosine

    def key(
        self,
        cosine: float,
        band: Band | None,
        top: float,
        sigma: float | None,
        group: int,
        score: int = 0,
    ) -> tuple[float, ...]:
        """Relevance part of a semantic candidate's sort key: tier and evidence group."""
        tier = self.tier(cosine, band, top, sigma, score)
        if self.mentions == "last":
            return (group, tier)
        if self.mentions == "band":
            return (BAND_TIER.get(band or "", len(BAND_TIER)), group, tier)
        return (tier, group)

    def bm25_key(self, score: float, best: float, group: int) -> tuple[float, ...]:
        """Relevance part of a degraded candidate's key: its word score's tier below the
        best hit's (no z-bands without a cosine, so ``band`` places mentions last too)."""
        share = 1.0 - score / best if best > 0 else 1.0
        tier = math.floor(max(share, 0.0) / self.bm25_step + 1e-9)
        return (tier, group) if self.mentions == "tier" else (group, tier)


DEFAULT_ORDER: Final = OrderRule()


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


def display_name(spellings: Mapping[str, int]) -> str:
    """The spelling most facts use (spelling -> facts); ties go to the smallest string, so
    output is stable."""
    return min(spellings, key=lambda s: (-spellings[s], s))


#: The group a question asking who adds to its words (``bridge.asks_who``): the folded
#: words of predicates that name people, a team or a role, in English and Hungarian. Matched
#: whole, not as prefixes: "author" is not "authorization", "host" would be "hostname".
WHO: Final = tuple(
    sorted(
        """
        owner owners lead leads leader leaders member members manager managers maintainer
        maintainers decider deciders participant participants attendee attendees author
        authors assignee assignees reviewer reviewers approver approvers contact contacts
        chair chairs liaison liaisons operator operators responsible role roles team teams
        people person sponsor sponsors organiser organisers organizer organizers
        coordinator coordinators steward stewards staff
        tulajdonos tulajdonosok felelos felelosok vezeto vezetok tag tagok tagja tagjai
        resztvevo resztvevok donteshozo donteshozok szerzo szerzok szerep szerepe szerepkor
        kapcsolattarto gazda gazdaja ugyeletes csapat
        """.split()
    )
)
_PEOPLE: Final = frozenset(WHO)
#: "<verb>_by" names who did it ("owned_by", "reviewed_by"); "superseded_by" or
#: "blocked_by" names a thing.
_DONE_BY: Final = frozenset(
    """
    owned maintained decided approved reviewed written authored assigned managed led run
    created signed requested reported hosted organised organized chaired
    """.split()
)


def names_people(words: Sequence[str]) -> bool:
    """Whether a predicate's folded words name people, a team or a role (``WHO``): its
    last word, the one the others qualify ("tech_lead", not "lead_time" or "team_size"),
    or "<verb> by"."""
    if not words:
        return False
    if words[-1] in _PEOPLE:
        return True
    return len(words) >= 2 and words[-1] == "by" and words[-2] in _DONE_BY


def question_words(
    facts: Sequence[Fact], question: Sequence[tuple[str, ...]]
) -> tuple[tuple[str, ...], ...]:
    """The question's words (``text.query_groups``: each word's spellings) that the
    subject's name does not hold: "who owns the billing service?" asks of Billing service
    who owns it. A letter or two split off a word ("O'Neill", "V8's") asks for nothing: as
    a prefix it would name half of all predicates. ``WHO`` is kept whatever the name."""
    if not question or not facts:
        return ()
    from pipeline.kodb import text  # the package loads SQLAlchemy: not on --help

    name = text.words(facts[0].subject_norm)
    return tuple(
        g
        for g in question
        if g == WHO or (max(map(len, g)) >= MIN_TERM_CHARS and not _holds(name, g))
    )


def speaks(fact: Fact, asked: Sequence[tuple[str, ...]]) -> int:
    """How many of the words ``asked`` the fact's predicate holds (a folded word of it
    starting with one of a word's spellings, as excerpts match): "owner" or "owners" when
    asked who owns it, "lead" who leads it; ``WHO``, a predicate naming people, a team or a
    role ("members" for "who is on the team?"). Only the predicate: a fact whose object
    merely uses a question's word ("8.7 TB per copy" for "do we still keep a copy …?")
    crowded out the one that answers (its status: superseded)."""
    if not asked or predicate_preference(fact.predicate)[0] == 2:
        return 0
    from pipeline.kodb import text

    named = text.words(fact.predicate.replace("_", " "))
    people = names_people(named)
    return sum(1 for g in asked if (people if g == WHO else _holds(named, g)))


def _holds(words: Sequence[str], spellings: tuple[str, ...]) -> bool:
    """Whether one of ``words`` starts with one of a question word's ``spellings``."""
    return any(w.startswith(spellings) for w in words)


def representative_facts(
    facts: Sequence[Fact],
    n: int,
    evidence: Mapping[str, float] | None = None,
    question: Sequence[tuple[str, ...]] = (),
) -> tuple[FactView, ...]:
    """Up to n facts: those from ``evidence`` files (the hit notes, path → cosine) first,
    and among them one of each predicate naming more of the ``question``'s words
    (``speaks``; only those files are read for it: KO-DB's stored sample of the others
    does not depend on the question); then, among those and then the rest, informative
    predicates before other properties before structural ones
    (``model.predicate_preference``); within that, spread over source types and
    predicates, then the better hit, the preferred predicate and the highest confidence.
    A fact that only restates the subject's name (its note's ``title``) comes last."""
    if n <= 0 or not facts:
        return ()
    files = evidence or {}
    asked = question_words(facts, question)

    def restates_name(f: Fact) -> bool:
        return f.predicate == TITLE_PREDICATE and normalize_text(f.object) == f.subject_norm

    pool = sorted(
        facts,
        key=lambda f: (
            -files.get(f.source_file, -math.inf),
            predicate_preference(f.predicate),
            *pool_key(f),
        ),
    )
    # A fact from a hit beats the others; then one whose predicate holds more of the
    # question's words, until a fact of that predicate is shown; then an informative
    # predicate beats a structural one; then an unseen type and predicate beat the rest;
    # pool order (better hit, the preferred predicate, confidence) breaks ties. Each pick
    # is the first fact in pool order with the smallest (restates, not from a hit, words,
    # tier, seen count): the scan stops at the first one that reaches the smallest key
    # still possible (the flags as first computed bound it: words only ever drop to 0).
    flags = [
        (
            restates_name(f),
            f.source_file not in files,
            -speaks(f, asked) if f.source_file in files else 0,
            predicate_preference(f.predicate)[0],
        )
        for f in pool
    ]
    left = Counter(flags)
    taken = [False] * len(pool)
    chosen: list[Fact] = []
    seen_types: set[str] = set()
    seen_preds: set[str] = set()

    def seen_count(f: Fact) -> int:
        return (f.source_type in seen_types) + (f.predicate in seen_preds)

    while len(chosen) < n and len(chosen) < len(pool):
        floor = (*min(k for k, c in left.items() if c), 0)
        best, best_key = -1, None
        for i, fact in enumerate(pool):
            if taken[i]:
                continue
            restates, elsewhere, words, tier = flags[i]
            if words and fact.predicate in seen_preds:
                words = 0  # the asked predicate once ("deciders" thrice said less)
            key = (restates, elsewhere, words, tier, seen_count(fact))
            if best_key is None or key < best_key:
                best, best_key = i, key
                if key == floor:
                    break
        fact = pool[best]
        taken[best] = True
        left[flags[best]] -= 1
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
    candidate: Candidate | None = None,
    band: Band | None = None,
    evidence_files: Mapping[str, float] | None = None,
    question: Sequence[tuple[str, ...]] = (),
) -> SubjectRank:
    """Rank one subject on all of its facts (its summary with every fact as the sample)."""
    return rank_summary(
        summarize(facts),
        facts_per_subject=facts_per_subject,
        facts_per_predicate_cap=facts_per_predicate_cap,
        candidate=candidate,
        band=band,
        evidence_files=evidence_files,
        question=question,
    )


def answer_order(
    relevance: tuple[float, ...],
    score: int,
    source_count: int,
    max_confidence: float,
    best_cosine: float | None,
    subject: str,
) -> tuple[object, ...]:
    """The sort key of a subject in an answer (module docstring): its relevance (tier and
    evidence), then the seed's rule (score, then cross-source, then confidence), then
    cosine, then name."""
    cosine = best_cosine if best_cosine is not None else -math.inf
    return (
        relevance,
        -score,
        -source_count,
        -max_confidence,
        -cosine,
        normalize_text(subject),
        subject,
    )


def rank_subjects(
    facts: Iterable[Fact],
    *,
    top_k: int,
    facts_per_subject: int,
    facts_per_predicate_cap: int,
    candidates: Mapping[str, Candidate] | None = None,
    band_of: BandOf | None = None,
    top_cosine: float | None = None,
    sigma: float | None = None,
    top_bm25: float | None = None,
    order: OrderRule = DEFAULT_ORDER,
    evidence_files: Mapping[str, float] | None = None,
    crystal_only: bool = False,
    question: Sequence[tuple[str, ...]] = (),
) -> list[SubjectRank]:
    """Group facts by case-folded subject, rank each, order (``answer_order``), keep K.

    ``candidates`` (subject_norm → Candidate) say why each subject is relevant; facts of
    other subjects are ranked after them all. ``band_of`` gives a semantic candidate's
    band, ``top_cosine`` and ``sigma`` (the answer's best hit and the vault's σ) place it in
    ``order``'s tiers, ``top_bm25`` (the best word score) a degraded one;
    ``evidence_files`` (hit path → its score) and ``question`` (the question's words,
    ``text.query_groups``) pick the facts shown.
    """
    return rank_summaries(
        summaries_from_facts(facts).values(),
        top_k=top_k,
        facts_per_subject=facts_per_subject,
        facts_per_predicate_cap=facts_per_predicate_cap,
        candidates=candidates,
        band_of=band_of,
        top_cosine=top_cosine,
        sigma=sigma,
        top_bm25=top_bm25,
        order=order,
        evidence_files=evidence_files,
        crystal_only=crystal_only,
        question=question,
    )


def _band(candidate: Candidate | None, band_of: BandOf | None) -> Band | None:
    cosine = candidate.cosine if candidate is not None else None
    return band_of(cosine) if band_of is not None and cosine is not None else None


def _relevance(
    score: int,
    candidate: Candidate | None,
    band: Band | None,
    top_cosine: float | None,
    sigma: float | None,
    top_bm25: float | None,
    order: OrderRule,
) -> tuple[float, ...]:
    """The relevance part of a ranked subject's ``answer_order`` key."""
    evidence = candidate.evidence if candidate is not None else None
    group = EVIDENCE_GROUP.get(evidence or "own", 0)
    cosine = candidate.cosine if candidate is not None else None
    if candidate is not None and candidate.rank_cosine is not None:
        cosine = candidate.rank_cosine  # hybrid: the fused order, on the cosine scale
    if cosine is not None:
        top = top_cosine if top_cosine is not None else cosine
        return (0, *order.key(cosine, band, top, sigma, group, score))
    if candidate is not None and candidate.bm25 is not None:
        best = top_bm25 if top_bm25 is not None else candidate.bm25
        return (0, *order.bm25_key(candidate.bm25, best, group))
    if candidate is not None and candidate.evidence == "words":
        return (1, -candidate.words, group)  # degraded: more question words first
    return (2, group)


@dataclass(frozen=True)
class _Tally:
    """What a subject's counts alone give (no fact read): all of its rank but the facts."""

    subject: str
    per_type: dict[str, int]
    predicates: dict[str, int]
    total_facts: int
    score: int
    crystal_ready: bool


def _tally(summary: SubjectSummary, cap: int) -> _Tally:
    per_type = {t: summary.per_type.get(t, 0) for t in SOURCE_TYPES}
    predicates = dict(sorted(summary.predicates.items()))
    total = sum(c if c < cap else cap for c in predicates.values())
    types = sum(1 for c in per_type.values() if c)
    return _Tally(
        subject=display_name(summary.spellings),
        per_type=per_type,
        predicates=predicates,
        total_facts=total,
        score=score_of(summary.source_count, per_type, total),
        crystal_ready=is_crystal_ready(types, summary.source_count, summary.max_confidence),
    )


def _ranked(
    summary: SubjectSummary,
    tally: _Tally,
    *,
    facts_per_subject: int,
    candidate: Candidate | None,
    band: Band | None,
    evidence_files: Mapping[str, float] | None,
    question: Sequence[tuple[str, ...]],
) -> SubjectRank:
    return SubjectRank(
        subject=tally.subject,
        score=tally.score,
        source_count=summary.source_count,
        per_type=tally.per_type,
        total_facts=tally.total_facts,
        raw_facts=summary.raw_facts,
        max_confidence=summary.max_confidence,
        best_cosine=candidate.cosine if candidate else None,
        best_bm25=candidate.bm25 if candidate else None,
        crystal_ready=tally.crystal_ready,
        predicates=tally.predicates,
        facts=representative_facts(summary.sample, facts_per_subject, evidence_files, question),
        band=band,
        evidence=candidate.evidence if candidate else None,
    )


def rank_summary(
    summary: SubjectSummary,
    *,
    facts_per_subject: int,
    facts_per_predicate_cap: int,
    candidate: Candidate | None = None,
    band: Band | None = None,
    evidence_files: Mapping[str, float] | None = None,
    question: Sequence[tuple[str, ...]] = (),
) -> SubjectRank:
    """``rank_subject`` from a summary: the same SubjectRank as on all of the subject's
    facts when the sample holds every fact ``representative_facts`` would pick."""
    return _ranked(
        summary,
        _tally(summary, facts_per_predicate_cap),
        facts_per_subject=facts_per_subject,
        candidate=candidate,
        band=band,
        evidence_files=evidence_files,
        question=question,
    )


def rank_summaries(
    summaries: Iterable[SubjectSummary],
    *,
    top_k: int,
    facts_per_subject: int,
    facts_per_predicate_cap: int,
    candidates: Mapping[str, Candidate] | None = None,
    band_of: BandOf | None = None,
    top_cosine: float | None = None,
    sigma: float | None = None,
    top_bm25: float | None = None,
    order: OrderRule = DEFAULT_ORDER,
    evidence_files: Mapping[str, float] | None = None,
    crystal_only: bool = False,
    question: Sequence[tuple[str, ...]] = (),
) -> list[SubjectRank]:
    """``rank_subjects`` on per-subject summaries (``KoDB.subject_summaries``) instead of
    all facts: the same list, at a cost that does not grow with a subject's facts."""
    known = candidates or {}
    # The order needs the counts alone: only the subjects kept read their facts.
    ranked: list[tuple[tuple[object, ...], SubjectSummary, _Tally, Candidate | None, Any]] = []
    for summary in summaries:
        candidate = known.get(summary.subject_norm)
        band = _band(candidate, band_of)
        tally = _tally(summary, facts_per_predicate_cap)
        if crystal_only and not tally.crystal_ready:
            continue
        relevance = _relevance(tally.score, candidate, band, top_cosine, sigma, top_bm25, order)
        key = answer_order(
            relevance,
            tally.score,
            summary.source_count,
            summary.max_confidence,
            candidate.cosine if candidate else None,
            tally.subject,
        )
        ranked.append((key, summary, tally, candidate, band))
    ranked.sort(key=lambda row: row[0])
    return [
        _ranked(
            summary,
            tally,
            facts_per_subject=facts_per_subject,
            candidate=candidate,
            band=band,
            evidence_files=evidence_files,
            question=question,
        )
        for _, summary, tally, candidate, band in ranked[:top_k]
    ]
