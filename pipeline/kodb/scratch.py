"""Scratch PostgreSQL databases for tests and benchmarks: made, handed over, dropped."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa

from pipeline.config import mask_url
from pipeline.errors import KodbError
from pipeline.kodb.dialects import PostgresDialect
from pipeline.kodb.engine import parse_url, refused

#: Allowed prefixes of scratch database names (the name is an identifier, not a parameter).
_SCRATCH_PREFIX = re.compile(r"[a-z_][a-z0-9_]{0,40}")


@contextmanager
def scratch_database(server_url: str, prefix: str = "vaultko_scratch") -> Iterator[str]:
    """A new, empty PostgreSQL database on the server of ``server_url``, for benchmarks and
    tests: yields its URL, then drops it (ending the connections still open to it).

    ``server_url`` names any database the user may connect to (``postgres`` will do); the new
    database is ``<prefix>_<random hex>``. Raises KodbError when the server refuses.
    """
    shown = mask_url(server_url)
    if not _SCRATCH_PREFIX.fullmatch(prefix):
        raise KodbError(f"scratch database prefix {prefix!r}: use a-z, 0-9 and _ only")
    parsed, dialect = parse_url(server_url)
    if not isinstance(dialect, PostgresDialect):
        raise KodbError(f"KO-DB URL {shown!r}: a scratch database needs PostgreSQL")
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    activity = sa.table("pg_stat_activity", sa.column("pid"), sa.column("datname"))
    terminate = sa.select(sa.func.pg_terminate_backend(activity.c.pid)).where(
        activity.c.datname == name
    )
    with refused(f"PostgreSQL at {shown}"):
        admin = sa.create_engine(
            parsed, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 5}
        )
    quoted = admin.dialect.identifier_preparer.quote(name)
    try:
        with refused(f"PostgreSQL at {shown}"), admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE {quoted}")
        try:
            yield parsed.set(database=name).render_as_string(hide_password=False)
        finally:
            with refused(f"PostgreSQL at {shown}"), admin.connect() as conn:
                conn.execute(terminate)
                conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {quoted}")
    finally:
        admin.dispose()
