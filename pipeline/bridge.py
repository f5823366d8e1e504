"""The semantic bridge: from graph hits (or, degraded, from query words) to candidate subjects.

The bridge only nominates subjects; each one is then ranked on all of its facts in KO-DB,
so a subject's source count does not depend on how many of its notes happened to be hit.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Final, Protocol

from pipeline.model import Hit, normalize_text

MIN_TERM_CHARS: Final = 3  # shorter words are mostly noise, and trigram search needs 3

# Common function words of the two languages our users write in. Content words stay.
STOP_WORDS_EN: Final = frozenset(
    """
    about above after again against all also and any are aren't because been before being
    below between both but can can't cannot could did didn't does doesn't doing don't down
    during each few for from further had has have having her here hers herself him himself
    his how into isn't it's its itself just let's more most much must myself nor not now off
    once only other ought our ours ourselves out over own same she should so some such than
    that the their theirs them themselves then there these they this those through too under
    until very was wasn't were weren't what when where which while who whom why will with
    would you your yours yourself yourselves know knows tell does anything something thing
    things use used using get got way ways want need
    """.split()
)
STOP_WORDS_HU: Final = frozenset(
    """
    az egy és is nem hogy meg még már csak de ha mint vagy volt van lesz lett ezt azt ez
    az ami aki amely amit akkor ahol itt ott mert mit mi ki kik hol hogyan miért mikor
    melyik milyen minden sem sok kell lehet nagyon után alatt felett között előtt mellett
    nélkül szerint által számára pedig tehát vagyis illetve valamint azonban amikor ahogy
    egyik másik mely vannak voltak legyen neki nekem nekünk ezek azok ezen azon ebben abban
    erről arról arra erre ide oda fel vissza tudunk tudok tudsz tud
    """.split()
)
STOP_WORDS: Final = STOP_WORDS_EN | STOP_WORDS_HU

_WORD = re.compile(r"\w+(?:['’]\w+)?")


def query_terms(text: str) -> list[str]:
    """Lower-cased words of at least 3 characters, stop words removed, in first-seen order."""
    seen: dict[str, None] = {}
    for match in _WORD.finditer(normalize_text(text)):
        word = match.group(0).replace("’", "'")
        if len(word) >= MIN_TERM_CHARS and word not in STOP_WORDS and not word.isdigit():
            seen.setdefault(word, None)
    return list(seen)


class SubjectSource(Protocol):
    def subjects_by_source_file(self, paths: Iterable[str]) -> dict[str, set[str]]: ...

    def search_subjects_many(self, terms: Sequence[str]) -> dict[str, list[str]]: ...

    def facts_for_subjects(self, subject_norms: Iterable[str]) -> list: ...


def semantic_candidates(
    hits: Sequence[Hit], floor_cosine: float | None, kodb: SubjectSource
) -> dict[str, float]:
    """subject_norm → best cosine of a hit that nominated it.

    A hit above the floor nominates the subjects of facts from its file and the subjects
    that contain its title at word boundaries.
    """
    live = [h for h in hits if floor_cosine is None or h.cosine > floor_cosine]
    if not live:
        return {}
    best: dict[str, float] = {}

    def nominate(subject_norm: str, cosine: float) -> None:
        if cosine > best.get(subject_norm, float("-inf")):
            best[subject_norm] = cosine

    by_file = kodb.subjects_by_source_file([h.path for h in live])
    for h in live:
        for s in by_file.get(h.path, ()):
            nominate(s, h.cosine)
    titles = sorted({h.title for h in live if h.title.strip()})
    matched = kodb.search_subjects_many(titles) if titles else {}
    for h in live:
        for s in matched.get(h.title, ()):
            nominate(s, h.cosine)
    return best


def term_candidates(text: str, kodb: SubjectSource) -> dict[str, None]:
    """Degraded mode: subjects matching any query term at word boundaries."""
    terms = query_terms(text)
    found: dict[str, None] = {}
    if not terms:
        return found
    matched = kodb.search_subjects_many(terms)
    for term in terms:
        for s in matched.get(term, ()):
            found.setdefault(s, None)
    return found
