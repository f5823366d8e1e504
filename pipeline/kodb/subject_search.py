"""Subject search: the subjects holding a term at word boundaries.

A pre-filter in SQL over the distinct subjects finds a superset; the word-boundary check of
``match.py`` then decides in Python, so the result is exactly ``match.reference_search``
over the same data, on either database.
- A term with a word character: the word index over ``subjects.words`` (the name's runs of
  ``\\w``, computed in Python), all such terms in one statement (``Dialect.word_select``).
- Other terms: trigrams or an escaped LIKE (``Dialect.candidate_select``), a UNION ALL of
  up to ``TERMS_PER_STATEMENT`` terms per statement.
Functions of one open connection; ``store.py`` owns transactions.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from pipeline.kodb.chunking import chunks
from pipeline.kodb.dialects import Dialect
from pipeline.kodb.match import TermSearch, normalize_term, word_runs

#: Terms per UNION ALL statement of candidate selects (one round trip each).
TERMS_PER_STATEMENT = 100
#: Terms per word-index statement (one JSON parameter, so no bound-parameter limit).
WORD_TERMS_PER_STATEMENT = 1000


def search_subjects_many(
    conn: Connection, dialect: Dialect, terms: Sequence[str], limit: int | None
) -> dict[str, list[str]]:
    """For each term as given, the subject_norms holding it at word boundaries, sorted and
    cut to ``limit``."""
    plan = TermSearch.of(terms)
    candidates: dict[str, set[str]] = defaultdict(set)
    # The terms with a word character go to the word index in one statement of fixed shape
    # (its compiled form is cached, where a UNION of selects is compiled anew each answer);
    # the others by trigram or LIKE.
    worded = list(plan.worded)
    for chunk in chunks(worded, WORD_TERMS_PER_STATEMENT):
        phrases = json.dumps([dialect.word_term(" ".join(plan.worded[n])) for n in chunk])
        for tag, norm in conn.execute(dialect.word_select(), {"phrases": phrases}):
            candidates[chunk[int(tag)]].add(norm)
    for chunk in chunks(plan.others, TERMS_PER_STATEMENT):
        selects = [dialect.candidate_select(n, i) for i, n in enumerate(chunk)]
        stmt = selects[0] if len(selects) == 1 else sa.union_all(*selects)
        for tag, norm in conn.execute(stmt):
            candidates[chunk[tag]].add(norm)
    return plan.results(candidates, limit)


def prefilter(dialect: Dialect, term: str) -> Any:
    """The pre-filter statement of one term, its parameters bound (to read its plan)."""
    norm = normalize_term(term)
    if word_runs(norm):
        return dialect.word_select().params(
            phrases=json.dumps([dialect.word_term(word_runs(norm))])
        )
    return dialect.candidate_select(norm, 0)


def explain(conn: Connection, dialect: Dialect, term: str) -> str:
    """The database's query plan for one term's pre-filter (to check index use)."""
    compiled = prefilter(dialect, term).compile(
        dialect=conn.dialect, compile_kwargs={"literal_binds": True}
    )
    rows = conn.exec_driver_sql(dialect.explain_prefix + str(compiled)).all()
    return "\n".join(" ".join(str(v) for v in row) for row in rows)
