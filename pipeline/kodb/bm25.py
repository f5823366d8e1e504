"""BM25 over the full-text index's words, the same on both databases.

The databases only find the candidates (SQLite FTS5's ``bm25()``, PostgreSQL's
``ts_rank_cd``); this module orders them. FTS5's BM25 takes a word held by more than half the
notes as worthless (its IDF is clamped to almost zero), and ``ts_rank_cd`` is not BM25 at
all: on vaults where a question's words are common, both ranked well below plain BM25
(docs/degraded-mode.md). Here the IDF is Lucene's, which never reaches zero, with the
constants of the eval's yardstick (the ``bm25s`` library): k1 1.5, b 0.75. A title word
counts ``title_weight`` times a body word, as FTS5's column weights count it; a note's length
is its indexed words, title and body.

A question word is one term however many spellings it has in the index: its stem under each
of the index's languages, and its unaccented spelling's (kodb/text.py, ``query_groups``).
The term's frequency in a note and the notes holding it are those of its most frequent
spelling. Scored as separate words, an English word the Hungarian stemmer leaves whole
("flags") was a rare word held only by the few Hungarian notes that quote it, and its high
IDF put those notes above the English ones about flags.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

K1: Final = 1.5
B: Final = 0.75


#: A question word's spellings in the index (its stem per language, its unaccented stem).
Term = tuple[str, ...]


@dataclass(frozen=True)
class IndexStats:
    """What BM25 needs of the whole index: how many notes, their mean length in words, and
    how many notes hold each word (each spelling) asked about."""

    notes: int
    mean_words: float
    holding: Mapping[str, int]


@dataclass(frozen=True)
class Candidate:
    """One note the database found: its title and body words as the index holds them
    (space-separated) and how many words it indexes."""

    path: str
    title: str
    body: str
    words: int


def idf(notes: int, holding: int) -> float:
    """Lucene's inverse document frequency: positive however common the word."""
    return math.log(1.0 + (notes - holding + 0.5) / (holding + 0.5))


def score(
    candidate: Candidate, wanted: Sequence[Term], stats: IndexStats, title_weight: float
) -> float:
    """The note's BM25 for these (distinct) terms."""
    norm = K1 * (1.0 - B + B * candidate.words / stats.mean_words) if stats.mean_words else K1
    title = candidate.title.split()
    body = candidate.body.split()
    total = 0.0
    for term in wanted:
        holding = max((stats.holding.get(w, 0) for w in term), default=0)
        if not holding:
            continue
        tf = max(title_weight * title.count(w) + body.count(w) for w in term)
        if tf:
            total += idf(stats.notes, holding) * tf * (K1 + 1.0) / (tf + norm)
    return total


def holds_every(candidate: Candidate, wanted: Sequence[Term]) -> bool:
    """Whether the note holds each term, in its title or body, in one of its spellings."""
    held = set(candidate.title.split()) | set(candidate.body.split())
    return all(any(w in held for w in term) for term in wanted)


def rank(
    candidates: Sequence[Candidate],
    wanted: Sequence[Term],
    stats: IndexStats,
    title_weight: float,
    limit: int,
    *,
    every: bool = False,
) -> list[tuple[str, float]]:
    """The ``limit`` best candidates: (path, BM25), best first, ties in path order; a
    candidate holding none of the terms (it cannot, once found by them) is left out, and
    with ``every`` one missing any of them."""
    if every:
        candidates = [c for c in candidates if holds_every(c, wanted)]
    scored = [(score(c, wanted, stats, title_weight), c.path) for c in candidates]
    scored.sort(key=lambda sp: (-sp[0], sp[1]))
    return [(path, s) for s, path in scored[:limit] if s > 0]
