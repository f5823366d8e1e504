"""What KO-DB holds, counted (status, freshness and eval read it), and the noise-floor
calibrations. Functions of one open connection; ``store.py`` owns transactions."""

from __future__ import annotations

from dataclasses import asdict

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from pipeline.kodb import schema
from pipeline.kodb.schema import from_row
from pipeline.model import Calibration


def subject_norms(conn: Connection) -> list[str]:
    """Every distinct subject_norm, sorted by code point."""
    return sorted(conn.execute(sa.select(schema.subjects.c.subject_norm)).scalars())


def count_facts(conn: Connection) -> int:
    """Number of stored facts."""
    return int(conn.execute(sa.select(sa.func.count()).select_from(schema.facts)).scalar_one())


def facts_by_predicate(conn: Connection) -> dict[str, int]:
    """predicate -> fact count, sorted by predicate."""
    t = schema.facts
    rows = conn.execute(sa.select(t.c.predicate, sa.func.count()).group_by(t.c.predicate))
    return dict(sorted((p, int(n)) for p, n in rows))


def fact_source_files(conn: Connection) -> dict[str, int]:
    """source_file -> fact count, sorted by path (freshness looks for orphan facts)."""
    t = schema.facts
    stmt = sa.select(t.c.source_file, sa.func.count()).group_by(t.c.source_file)
    return dict(sorted((f, int(n)) for f, n in conn.execute(stmt)))


def save_calibration(conn: Connection, cal: Calibration) -> None:
    """Store one calibration measurement (history is kept)."""
    conn.execute(schema.calibrations.insert().values(**asdict(cal)))


def latest_calibration(
    conn: Connection, embedder: str | None = None, dims: int | None = None
) -> Calibration | None:
    """The most recent calibration, optionally for one embedder and/or dimension."""
    c = schema.calibrations
    stmt = sa.select(c)
    if embedder is not None:
        stmt = stmt.where(c.c.embedder == embedder)
    if dims is not None:
        stmt = stmt.where(c.c.dims == dims)
    stmt = stmt.order_by(c.c.measured_at.desc(), c.c.id.desc()).limit(1)
    row = conn.execute(stmt).first()
    return None if row is None else from_row(Calibration, row)
