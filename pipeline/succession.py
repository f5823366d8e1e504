"""Which decisions are current: the status a vault gives its decisions, and what replaced
what.

Read from facts ingest extracts from what vaults already write (``vault/extract.py``):
``adr_status`` (an ADR's status word, normalised), ``superseded_by`` (the subject is
replaced by the object) and ``supersedes`` (the subject replaces the object), whether they
come from frontmatter, a Status section or a "Superseded by [[X]]" line. A subject with a
successor is ``superseded`` whatever its own status word says (the successor's note may be
the only one that says so); otherwise its word decides: accepted is ``current``.

Contradictions are resolved, never propagated: a subject named as replaced by several is
given the successor most statements name (ties: the smallest name); a cycle (A replaced by
B, B replaced by A) is dropped, edge by edge, so nothing in it is marked replaced; a
successor no note is about keeps its name and has no path.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

from pipeline.model import Fact, SubjectRank, normalize_text

#: An ADR's normalised status word -> the status an answer shows.
ANSWER_STATUS: Final = {
    "accepted": "current",
    "superseded": "superseded",
    "deprecated": "deprecated",
    "rejected": "rejected",
    "proposed": "proposed",
}
STATUSES: Final = ("current", "superseded", "deprecated", "rejected", "proposed")
STATUS_PREDICATE: Final = "adr_status"
SUCCESSOR_PREDICATE: Final = "superseded_by"
PREDECESSOR_PREDICATE: Final = "supersedes"
#: The facts this module reads (KO-DB reads only these to rebuild its table).
PREDICATES: Final = (STATUS_PREDICATE, SUCCESSOR_PREDICATE, PREDECESSOR_PREDICATE)


@dataclass(frozen=True)
class Decision:
    """A subject's decision status: ``path`` is its own note (None: no note is about it),
    ``successor`` the display name of what replaced it and ``successor_path`` that one's
    note (None when dangling)."""

    subject_norm: str
    subject: str
    path: str | None
    status: str | None
    successor: str | None = None
    successor_norm: str | None = None
    successor_path: str | None = None


@dataclass(frozen=True)
class Succession:
    """Every decision of a vault, by subject and by its note's path."""

    decisions: Mapping[str, Decision]

    @property
    def by_path(self) -> dict[str, Decision]:
        return {d.path: d for d in self.decisions.values() if d.path is not None}

    def of(self, subject_norm: str) -> Decision | None:
        return self.decisions.get(subject_norm)

    def __bool__(self) -> bool:
        return bool(self.decisions)


def decisions_from(
    facts: Iterable[Fact], owners: Mapping[str, tuple[str, str]]
) -> dict[str, Decision]:
    """The decisions the facts state. ``owners``: subject_norm -> (its name, its own note's
    path), from the registry (a note's subject, else its title)."""
    words: dict[str, Counter[str]] = {}
    own_words: dict[str, str] = {}
    names: dict[str, str] = {}
    edges: dict[str, Counter[str]] = {}
    for f in facts:
        if f.predicate == STATUS_PREDICATE:
            word = ANSWER_STATUS.get(f.object.strip().casefold())
            if word is None:
                continue
            names.setdefault(f.subject_norm, f.subject)
            words.setdefault(f.subject_norm, Counter())[word] += 1
            if owners.get(f.subject_norm, ("", None))[1] == f.source_file:
                own_words[f.subject_norm] = word
        elif f.predicate in (SUCCESSOR_PREDICATE, PREDECESSOR_PREDICATE):
            obj_norm = normalize_text(f.object.strip())
            old, new = (f.subject_norm, obj_norm)
            old_name, new_name = f.subject, f.object.strip()
            if f.predicate == PREDECESSOR_PREDICATE:
                old, new, old_name, new_name = new, old, new_name, old_name
            if not old or not new or old == new:
                continue
            names.setdefault(old, old_name)
            names.setdefault(new, new_name)
            edges.setdefault(old, Counter())[new] += 1
    successor = {old: min(counts, key=lambda n: (-counts[n], n)) for old, counts in edges.items()}
    for old in _in_cycles(successor):
        del successor[old]
    out: dict[str, Decision] = {}
    for norm in sorted(set(words) | set(successor)):
        name, path = owners.get(norm, (names.get(norm, norm), None))
        new = successor.get(norm)
        if new is not None:
            new_name, new_path = owners.get(new, (names.get(new, new), None))
            out[norm] = Decision(norm, name, path, "superseded", new_name, new, new_path)
            continue
        counts = words.get(norm, Counter())
        word = own_words.get(norm) or min(counts, key=lambda w: (-counts[w], w))
        out[norm] = Decision(norm, name, path, word)
    return out


def _in_cycles(successor: Mapping[str, str]) -> set[str]:
    """The subjects whose chain of successors comes back to them."""
    cyclic: set[str] = set()
    for start in successor:
        seen = [start]
        node = successor.get(start)
        while node is not None and node not in seen:
            seen.append(node)
            node = successor.get(node)
        if node == start:
            cyclic.add(start)
    return cyclic


#: Makes the SubjectRank of a successor that joins the answer: (successor_norm, the
#: superseded subject it follows) -> its rank, or None when it cannot join (no facts, or
#: the answer's gate, crystal-ready, refuses it).
JoinSuccessor = Callable[[str, SubjectRank], SubjectRank | None]


def order_with_successors(
    subjects: Sequence[SubjectRank],
    succession: Succession,
    join: JoinSuccessor,
    top_k: int,
) -> tuple[SubjectRank, ...]:
    """The answer's subjects with the succession rule: a successor ranked below the subject
    it replaced moves right before it; a successor not in the answer joins there too (the
    current decision first, the one it replaced right after); then the first ``top_k``.
    Every subject carries its ``status`` and ``superseded_by``."""
    out = [_marked(s, succession) for s in subjects]
    if not succession:
        return tuple(out[:top_k])
    joined: set[str] = set()
    for _ in range(len(out) + 1):  # each pass moves or joins one successor at most
        if not _one_step(out, succession, join, joined):
            break
    return tuple(out[:top_k])


def _one_step(
    out: list[SubjectRank], succession: Succession, join: JoinSuccessor, joined: set[str]
) -> bool:
    at = {normalize_text(s.subject): i for i, s in enumerate(out)}
    for i, s in enumerate(out):
        d = succession.of(normalize_text(s.subject))
        if d is None or d.successor_norm is None:
            continue
        j = at.get(d.successor_norm)
        if j is not None and j > i:
            out.insert(i, out.pop(j))
            return True
        if j is None and d.successor_norm not in joined:
            joined.add(d.successor_norm)
            new = join(d.successor_norm, s)
            if new is not None:
                out.insert(i, _marked(new, succession))
                return True
    return False


def _marked(s: SubjectRank, succession: Succession) -> SubjectRank:
    d = succession.of(normalize_text(s.subject))
    if d is None:
        return s
    return replace(s, status=d.status, superseded_by=d.successor)
