"""One class per database KO-DB runs on, mirroring each other (see ``base.py``).

sqlite.py      a file: WAL, FTS5 (notes' full text, subjects' words and trigrams), executemany
postgresql.py  a server: array/JSON parameters, json_to_recordset inserts, tsvector, GIN
"""

from __future__ import annotations

from pipeline.errors import ConfigError
from pipeline.kodb.dialects.base import Dialect
from pipeline.kodb.dialects.postgresql import PostgresDialect
from pipeline.kodb.dialects.sqlite import SqliteDialect

DIALECTS: dict[str, Dialect] = {d.name: d for d in (SqliteDialect(), PostgresDialect())}
#: Other names SQLAlchemy URLs use for these databases.
_ALIASES = {"postgres": "postgresql"}

__all__ = ["DIALECTS", "Dialect", "PostgresDialect", "SqliteDialect", "dialect_for"]


def dialect_for(backend: str, shown: str) -> Dialect:
    """The dialect of a SQLAlchemy backend name; ConfigError (exit 3, a setting to mend)
    naming the URL (``shown``) for a database KO-DB does not run on."""
    try:
        return DIALECTS[_ALIASES.get(backend, backend)]
    except KeyError:
        raise ConfigError(
            f"KO-DB URL {shown!r}: only sqlite and postgresql are supported"
        ) from None
