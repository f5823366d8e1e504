"""KO-DB's URLs and engines, and the one place outside a transaction where SQLAlchemy's and
the drivers' exceptions become ``KodbError`` (``refused``; ``KoDB._translate`` is the
other, inside transactions). Scratch PostgreSQL databases for tests and benchmarks."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from pipeline.config import mask_url
from pipeline.errors import KodbError
from pipeline.kodb.dialects import Dialect, dialect_for

#: Allowed prefixes of scratch database names (the name is an identifier, not a parameter).
_SCRATCH_PREFIX = re.compile(r"[a-z_][a-z0-9_]{0,40}")


def parse_url(url: str) -> sa.URL:
    """Parse a URL (KodbError when it is none); a bare ``postgresql://`` (or ``postgres://``)
    uses psycopg 3."""
    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError as exc:
        raise KodbError(f"KO-DB URL {mask_url(url)!r} is not a valid SQLAlchemy URL") from exc
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def open_engine(url: str) -> tuple[Engine, Dialect]:
    """An engine for ``url`` and its database's dialect (KodbError when refused)."""
    shown = mask_url(url)
    parsed = parse_url(url)
    dialect = dialect_for(parsed.get_backend_name(), shown)
    with refused(f"KO-DB at {shown}"):
        return dialect.create_engine(parsed, shown), dialect


def short(exc: BaseException) -> str:
    """The first line of the driver's message (SQLAlchemy adds SQL and links after it)."""
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip()
    # A driver may quote the URL it was given, password included.
    return mask_url(text.splitlines()[0]) if text else type(exc).__name__


@contextmanager
def refused(where: str) -> Iterator[None]:
    """KodbError ``"<where>: <driver's first line>"`` for what SQLAlchemy, the server or a
    missing driver refuses outside a KoDB transaction (engines, scratch databases)."""
    try:
        yield
    except (sa.exc.SQLAlchemyError, ImportError) as exc:
        raise KodbError(f"{where}: {short(exc)}") from exc


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
    parsed = parse_url(server_url)
    if parsed.get_backend_name() != "postgresql":
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
