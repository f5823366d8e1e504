"""KO-DB: the SQL facts database (SQLAlchemy 2 Core; SQLite by default, PostgreSQL by URL).

Public surface: ``KoDB`` (the store), ``ImportResult``, and the pure matching helpers that
define subject search semantics (``reference_search`` is the reference both databases agree
with).
"""

from __future__ import annotations

from pipeline.kodb.match import (
    contains_pattern,
    escape_like,
    normalize_term,
    reference_search,
    word_boundary_match,
)
from pipeline.kodb.schema import SCHEMA_VERSION, subject_key
from pipeline.kodb.scratch import scratch_database
from pipeline.kodb.store import KoDB
from pipeline.kodb.writes import ImportResult

__all__ = [
    "SCHEMA_VERSION",
    "ImportResult",
    "KoDB",
    "contains_pattern",
    "escape_like",
    "normalize_term",
    "reference_search",
    "scratch_database",
    "subject_key",
    "word_boundary_match",
]
