"""The words of a note as the full-text index stores them, the same on both databases.

SQLite FTS5 and PostgreSQL full text tokenize differently (hyphens, underscores, which
letters lose their accents), so the text is tokenized here, in Python, and both databases
only ever see space-separated, already folded words: a question then matches the same words
on either one. Folding is Unicode case folding plus the removal of combining marks, so the
Hungarian "gyorsítótár" and "gyorsitotar" are one word; a word is a run of letters and
digits (an underscore or hyphen separates words).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from typing import Final

#: Words of a note's body that are indexed: a note can be 2 MB, and PostgreSQL refuses a
#: tsvector over 1 MB; the head of a note is what people search for.
MAX_INDEX_WORDS: Final = 60_000
_WORD = re.compile(r"[^\W_]+")


def fold(text: str) -> str:
    """Case-folded text without combining marks ("Gyorsítótár" → "gyorsitotar")."""
    if text.isascii():
        # ASCII has no combining marks and normalises to itself: most notes take this
        # path, which skips a Python-level pass over every character (a tenth of ingest).
        return text.casefold()
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return unicodedata.normalize(
        "NFC", "".join(c for c in decomposed if not unicodedata.combining(c))
    )


def words(text: str, limit: int | None = None) -> list[str]:
    """The folded words of ``text``, in order (at most ``limit``)."""
    out = _WORD.findall(fold(text))
    return out if limit is None else out[:limit]


def index_text(text: str) -> str:
    """What the index stores for a field: its folded words, space-separated."""
    return " ".join(words(text, MAX_INDEX_WORDS))


def query_words(terms: Iterable[str]) -> list[str]:
    """The distinct folded words of query terms, in first-seen order (none is empty and
    none holds FTS or tsquery syntax: a word is letters and digits only)."""
    seen: dict[str, None] = {}
    for term in terms:
        for w in words(term):
            seen.setdefault(w, None)
    return list(seen)
