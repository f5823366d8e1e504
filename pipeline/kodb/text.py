"""The words of a note as the full-text index stores them, the same on both databases.

SQLite FTS5 and PostgreSQL full text tokenize differently (hyphens, underscores, which
letters lose their accents), so the text is tokenized here, in Python, and both databases
only ever see space-separated, already folded words: a question then matches the same words
on either one. Folding is Unicode case folding plus the removal of combining marks, so the
Hungarian "gyorsítótár" and "gyorsitotar" are one word; a word is a run of letters and
digits (an underscore or hyphen separates words).

Stemming (a Snowball stemmer per language, PyStemmer) makes "caching" and "cache" one
word. A word is stemmed before its marks are removed, since the Hungarian rules read the
accents ("döntések" → "döntés" → "dontes"), and after case folding, the same for a note and
a question. ``language`` "none" (or None: rows indexed before stemming) keeps the words
whole. A question is looked up with the stems of every language the index holds, so a vault
mixing English and Hungarian notes finds each in its own words.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Iterable
from typing import Any, Final

from pipeline.languages import NO_STEMMING

#: Words of a note's body that are indexed: a note can be 2 MB, and PostgreSQL refuses a
#: tsvector over 1 MB; the head of a note is what people search for.
MAX_INDEX_WORDS: Final = 60_000
_WORD = re.compile(r"[^\W_]+")
#: The Combining Diacritical Marks block but U+034F, the grapheme joiner (not a mark).
_LATIN_MARKS = re.compile(r"[\u0300-\u034e\u0350-\u036f]")
_PAST_LATIN_MARKS = re.compile(r"[^\u0000-\u036f]")

# PyStemmer's stemmers keep a cache and are not safe to share between threads.
_local = threading.local()


def _stemmer(language: str) -> Any:
    stemmers: dict[str, Any] | None = getattr(_local, "stemmers", None)
    if stemmers is None:
        stemmers = _local.stemmers = {}
    stemmer = stemmers.get(language)
    if stemmer is None:
        import Stemmer  # PyStemmer: C, imported on the first stemmed word

        stemmer = stemmers[language] = Stemmer.Stemmer(language)
    return stemmer


def fold(text: str) -> str:
    """Case-folded text without combining marks ("Gyorsítótár" → "gyorsitotar")."""
    if text.isascii():
        # ASCII has no combining marks and normalises to itself: most notes take this
        # path, which skips a Python-level pass over every character (a tenth of ingest).
        return text.casefold()
    return unicodedata.normalize("NFC", _unmarked(unicodedata.normalize("NFKD", text.casefold())))


def _unmarked(text: str) -> str:
    """``text`` without its combining marks: those of Latin, Greek and Cyrillic by one
    regex, any other script's looked up for the text's distinct characters only (a pass of
    Python over every character cost more than the rest of an answer's excerpts)."""
    out = _LATIN_MARKS.sub("", text)
    if _PAST_LATIN_MARKS.search(out):
        marks = {ord(c): None for c in set(out) if unicodedata.combining(c)}
        if marks:
            out = out.translate(marks)
    return out


def words(text: str, limit: int | None = None, language: str | None = None) -> list[str]:
    """The folded words of ``text``, in order (at most ``limit``), stemmed by
    ``language``'s rules unless it is None or "none"."""
    if language is None or language == NO_STEMMING:
        out = _WORD.findall(fold(text))
        return out if limit is None else out[:limit]
    lowered = text.casefold()
    if not lowered.isascii():
        # Letters with their accents composed, as the stemmer reads them; a mark that does
        # not compose (the dot of a folded "İ", Arabic or Hebrew vowel signs) is dropped, as
        # fold drops it, rather than splitting its word.
        lowered = _unmarked(unicodedata.normalize("NFKC", lowered))
    tokens = _WORD.findall(lowered)
    if limit is not None:
        tokens = tokens[:limit]
    stemmer = _stemmer(language)
    # Folded after stemming, all at once (a stem holds no space, and folding adds none).
    stems = fold(" ".join(stemmer.stemWords(tokens))).split(" ")
    accented = [i for i, t in enumerate(tokens) if not t.isascii()]
    if not accented:
        return [w for w in stems if w]
    # The rules read accents, so a word typed without them stems differently
    # ("adatbázisból" → "adatbazis", "adatbazisbol" → "adatbazisbol"): an accented word
    # also gives its unaccented spelling's stem, on the notes' side and the questions'.
    plain = stemmer.stemWords([fold(tokens[i]) for i in accented])
    also = {i: s for i, s in zip(accented, plain, strict=True) if s != stems[i]}
    out: list[str] = []
    for i, stem in enumerate(stems):
        if stem:
            out.append(stem)
        if i in also:
            out.append(also[i])
    return out


def index_text(text: str, language: str | None = None) -> str:
    """What the index stores for a field: its folded (and stemmed) words, space-separated."""
    return " ".join(words(text, MAX_INDEX_WORDS, language))


def query_groups(
    terms: Iterable[str], languages: Iterable[str | None] = (None,)
) -> list[tuple[str, ...]]:
    """The question's words, each as the tuple of its spellings in the index (its stem under
    each of ``languages``, its unaccented spelling's stem), in first-seen order; words
    sharing a spelling ("caching", "cache" → "cach") are one. BM25 scores a tuple as one
    term (kodb/bm25.py)."""
    languages = list(dict.fromkeys(languages))
    groups: list[dict[str, None]] = []
    for term in terms:
        lowered = _unmarked(unicodedata.normalize("NFKC", term.casefold()))
        for token in _WORD.findall(lowered):
            spellings = dict.fromkeys(w for lang in languages for w in words(token, language=lang))
            if not spellings:
                continue
            joined = [i for i, g in enumerate(groups) if not spellings.keys().isdisjoint(g)]
            if not joined:
                groups.append(spellings)
                continue
            merged: dict[str, None] = {}
            for i in joined:
                merged.update(groups[i])
            merged.update(spellings)
            groups[joined[0]] = merged
            groups = [g for i, g in enumerate(groups) if i not in joined[1:]]
    return [tuple(g) for g in groups]


def query_words(terms: Iterable[str], languages: Iterable[str | None] = (None,)) -> list[str]:
    """The distinct folded words of query terms, in first-seen order, under each of
    ``languages`` (the index's: a question is stemmed as each note was); none is empty and
    none holds FTS or tsquery syntax: a word is letters and digits only."""
    seen: dict[str, None] = {}
    terms = list(terms)
    for language in dict.fromkeys(languages):
        for term in terms:
            for w in words(term, language=language):
                seen.setdefault(w, None)
    return list(seen)
