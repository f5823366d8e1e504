"""KO-DB's URLs and engines, and the one place outside a transaction where SQLAlchemy's and
the drivers' exceptions become ``KodbError`` (``refused``; ``KoDB._translate`` is the
other, inside transactions)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from pipeline.config import mask_url
from pipeline.errors import ConfigError, KodbError
from pipeline.kodb.dialects import Dialect, dialect_for


def parse_url(url: str) -> tuple[sa.URL, Dialect]:
    """Parse a URL, with its database's driver settled (``Dialect.driver_url``), and its
    dialect; ConfigError (exit 3) when it is no URL, names a database KO-DB does not run
    on, or has a port that is no number."""
    shown = mask_url(url)
    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError as exc:
        raise ConfigError(f"KO-DB URL {shown!r} is not a valid SQLAlchemy URL") from exc
    except ValueError:
        # SQLAlchemy's int() of the port; its text may hold a raw "@" password's tail.
        raise ConfigError(
            f"KO-DB URL {shown!r} has a port that is not a number (an '@' in its "
            "password must be written %40)"
        ) from None
    dialect = dialect_for(parsed.get_backend_name(), shown)
    return dialect.driver_url(parsed), dialect


def open_engine(
    url: str,
    *,
    create: bool = True,
    base_dir: Path | None = None,
    confine_to: Path | None = None,
) -> tuple[Engine, Dialect, Path | None]:
    """An engine for ``url``, its database's dialect, and the database's file if it is one
    (KodbError when refused; a KO-DB that does not exist is made only when ``create``:
    ``Dialect.locate``)."""
    shown = mask_url(url)
    parsed, dialect = parse_url(url)
    parsed, file = dialect.locate(
        parsed, shown, create=create, base_dir=base_dir, confine_to=confine_to
    )
    with refused(f"KO-DB at {shown}"):
        return dialect.create_engine(parsed, shown), dialect, file


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
