"""Subject matching semantics, in plain Python: the reference every SQL path must agree with.

A subject matches a term when the normalised term occurs in the subject's ``subject_norm``
at some place where neither the character before nor the character after (when present) is a
Unicode word character (``\\w``). Every occurrence is checked, overlapping ones included, so
"warm" matches "warmstart and warm cache" (the second occurrence) but not "warmstart".

Every search (the store's SQL in ``subject_search.py``, the resident copy's word index in
``resident.py``) only finds candidates, a superset of the matches; ``TermSearch`` plans the
terms and decides on the candidates, so each returns exactly what ``reference_search``
returns over the same ``subject_norm`` values.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pipeline.errors import InputError
from pipeline.model import normalize_text

#: The escape character of every LIKE pattern we build (rendered as ``ESCAPE '\\'``).
LIKE_ESCAPE = "\\"

# Python's `re` treats str patterns as Unicode: `\w` is every alphanumeric code point plus "_",
# so accented Hungarian letters ("ő", "ű") are word characters, as they must be.
_WORD_CHAR = re.compile(r"\w")


def normalize_term(term: str) -> str:
    """The form a search term is compared in: ``normalize_text(term).strip()``.

    Raises InputError for a term that is empty once normalised and stripped.
    """
    norm = normalize_text(term).strip()
    if not norm:
        raise InputError("the search term is empty")
    return norm


def escape_like(text: str, escape: str = LIKE_ESCAPE) -> str:
    """Escape LIKE's wildcards (``%``, ``_``) and the escape character itself in user text."""
    return (
        text.replace(escape, escape + escape).replace("%", escape + "%").replace("_", escape + "_")
    )


def contains_pattern(term_norm: str) -> str:
    """A LIKE pattern matching any value that contains ``term_norm`` literally."""
    return f"%{escape_like(term_norm)}%"


def is_word_char(ch: str) -> bool:
    """True when ``ch`` (one character) is a Unicode word character (``\\w``)."""
    return _WORD_CHAR.match(ch) is not None


_WORD_RUN = re.compile(r"\w+")


def runs_of(text: str) -> list[str]:
    """The runs of word characters of ``text``, in order (the word index's words)."""
    return _WORD_RUN.findall(text)


def word_runs(text: str) -> str:
    """The runs of word characters of ``text``, joined by one space: the form the SQLite
    word index holds. Where a term lies in a subject between boundaries, the term's runs are
    consecutive runs of the subject, so ``word_runs(term)`` is a phrase of
    ``word_runs(subject)``; the index finds a superset of the matches (empty for a term
    without a word character, which the index cannot look up)."""
    return " ".join(runs_of(text))


def word_boundary_match(term_norm: str, subject_norm: str) -> bool:
    """True when ``term_norm`` occurs in ``subject_norm`` delimited by non-word characters.

    Both arguments are already normalised. Every occurrence is tried (a later one may be
    delimited when an earlier one is not); an empty term never matches.
    """
    if not term_norm:
        return False
    size = len(term_norm)
    start = subject_norm.find(term_norm)
    while start != -1:
        end = start + size
        before_ok = start == 0 or not is_word_char(subject_norm[start - 1])
        after_ok = end == len(subject_norm) or not is_word_char(subject_norm[end])
        if before_ok and after_ok:
            return True
        # Step one character, not one term length: occurrences may overlap ("aa" in "aaa").
        start = subject_norm.find(term_norm, start + 1)
    return False


def reference_search(
    term: str, subject_norms: Iterable[str], limit: int | None = None
) -> list[str]:
    """The reference semantics: distinct ``subject_norms`` matching ``term``, sorted.

    ``term`` is raw user text (normalised here); the result is sorted by code point, as
    Python sorts strings, and cut to ``limit`` when given.
    """
    term_norm = normalize_term(term)
    found = sorted({s for s in subject_norms if word_boundary_match(term_norm, s)})
    return found if limit is None else found[:limit]


@dataclass(frozen=True)
class TermSearch:
    """One subject search over many terms, as every implementation runs it: the terms
    normalised, those with a word character looked up by their runs in a word index, the
    others by substring, and each candidate then checked at word boundaries (``results``).
    A term holding a NUL matches nothing (neither database can take it as a parameter)."""

    #: Each term as given -> its normalised form.
    norms: Mapping[str, str]
    #: Normalised terms with a word character -> their runs (all consecutive runs of any
    #: subject holding the term at word boundaries).
    worded: Mapping[str, tuple[str, ...]]
    #: Normalised terms without a word character, found by substring.
    others: tuple[str, ...]

    @classmethod
    def of(cls, terms: Sequence[str]) -> TermSearch:
        """The plan for these terms (InputError for a term that is empty once normalised)."""
        norms = {term: normalize_term(term) for term in terms}
        worded: dict[str, tuple[str, ...]] = {}
        others: list[str] = []
        for norm in sorted(set(norms.values())):
            if "\x00" in norm:
                continue
            runs = tuple(runs_of(norm))
            if runs:
                worded[norm] = runs
            else:
                others.append(norm)
        return cls(norms, worded, tuple(others))

    def results(
        self, candidates: Mapping[str, Iterable[str]], limit: int | None
    ) -> dict[str, list[str]]:
        """Per term as given, its candidates that hold it at word boundaries, sorted and
        cut to ``limit``."""
        found = {
            n: sorted({s for s in candidates.get(n, ()) if word_boundary_match(n, s)})
            for n in set(self.norms.values())
        }
        return {
            term: found[n] if limit is None else found[n][:limit] for term, n in self.norms.items()
        }
