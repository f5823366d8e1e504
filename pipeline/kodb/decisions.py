"""The ``decisions`` table: each decision's status and successor, as ``pipeline/succession``
reads them from the facts that state them. Rebuilt whole at the end of every write (the
facts it reads are a vault's ADR statuses and successions: a few per decision, found by the
predicate index), so it is never out of step with the facts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from pipeline.kodb import schema
from pipeline.model import Fact, Note, normalize_text
from pipeline.succession import PREDICATES, Decision, Succession, decisions_from


def decision_facts(conn: Connection) -> list[Fact]:
    """Every fact of the predicates a decision is read from."""
    t = schema.facts
    cols = [t.c[name] for name in Fact.__dataclass_fields__]
    rows = conn.execute(sa.select(*cols).where(t.c.predicate.in_(PREDICATES)))
    return [schema.from_row(Fact, row) for row in rows]


def owners(notes: Iterable[Note]) -> dict[str, tuple[str, str]]:
    """subject_norm -> (its name, its own note's path): a note's subject, else its title
    (the first path when several notes are about one subject)."""
    out: dict[str, tuple[str, str]] = {}
    for note in sorted(notes, key=lambda n: n.path):
        name = note.subject or note.title
        out.setdefault(normalize_text(name), (name, note.path))
    return out


def _notes(conn: Connection) -> list[Note]:
    n = schema.notes
    rows = conn.execute(sa.select(n.c.path, n.c.title, n.c.subject, n.c.source_type))
    return [Note(r.path, r.title, r.source_type, "", 0.0, 0, subject=r.subject) for r in rows]


def rebuild(conn: Connection) -> int:
    """Replace the table with the decisions the stored facts state; return how many."""
    found = decisions_from(decision_facts(conn), owners(_notes(conn)))
    conn.execute(sa.delete(schema.decisions))
    if found:
        conn.execute(
            sa.insert(schema.decisions),
            [_row(d) for d in found.values()],
        )
    return len(found)


def _row(d: Decision) -> dict[str, str | None]:
    return {
        "subject_norm": d.subject_norm,
        "subject": d.subject,
        "path": d.path,
        "status": d.status,
        "successor": d.successor,
        "successor_norm": d.successor_norm,
        "successor_path": d.successor_path,
    }


def read(conn: Connection) -> Succession:
    """The stored decisions."""
    rows = conn.execute(sa.select(schema.decisions))
    return Succession({r.subject_norm: schema.from_row(Decision, r) for r in rows})


def recomputed(facts: Iterable[Fact], notes: Mapping[str, Note]) -> Succession:
    """The decisions these facts and notes state (a view that hides some of them)."""
    return Succession(decisions_from(facts, owners(notes.values())))
