"""Decision status and succession: read from facts, contradictions resolved, and the rule
that puts the current decision in the answer next to the old one."""

from __future__ import annotations

from pipeline.model import Fact, SubjectRank
from pipeline.succession import Succession, decisions_from, order_with_successors

OLD = "0006 Use LaunchDarkly for feature flags"
NEW = "0014 Move feature flags in-house on PostgreSQL"
OWNERS = {
    OLD.casefold(): (OLD, "adr/0006.md"),
    NEW.casefold(): (NEW, "adr/0014.md"),
    "redis": ("Redis", "wiki/redis.md"),
}


def fact(subject: str, predicate: str, obj: str, source: str = "adr/x.md") -> Fact:
    return Fact(subject, predicate, obj, 0.9, "adr", source, "ingest")


def test_a_successor_makes_the_old_decision_superseded_and_accepted_is_current() -> None:
    got = decisions_from(
        [
            fact(OLD, "adr_status", "superseded", "adr/0006.md"),
            fact(OLD, "superseded_by", NEW, "adr/0006.md"),
            fact(NEW, "adr_status", "accepted", "adr/0014.md"),
        ],
        OWNERS,
    )
    old, new = got[OLD.casefold()], got[NEW.casefold()]
    assert (old.status, old.successor, old.successor_path) == ("superseded", NEW, "adr/0014.md")
    assert (old.path, new.path, new.status, new.successor) == (
        "adr/0006.md",
        "adr/0014.md",
        "current",
        None,
    )


def test_supersedes_on_the_new_note_alone_is_enough() -> None:
    got = decisions_from(
        [
            fact(OLD, "adr_status", "accepted", "adr/0006.md"),  # the old note was not updated
            fact(NEW, "supersedes", OLD, "adr/0014.md"),
        ],
        OWNERS,
    )
    assert got[OLD.casefold()].status == "superseded"
    assert got[OLD.casefold()].successor == NEW


def test_a_cycle_marks_nothing_replaced_and_a_dangling_successor_keeps_its_name() -> None:
    got = decisions_from(
        [
            fact("A", "superseded_by", "B"),
            fact("B", "superseded_by", "A"),
            fact("A", "adr_status", "accepted"),
            fact("C", "superseded_by", "0099 Nowhere"),
        ],
        {},
    )
    assert got["a"].status == "current" and got["a"].successor is None
    assert "b" not in got  # no status word and no successor left
    c = got["c"]
    assert (c.status, c.successor, c.successor_path) == ("superseded", "0099 Nowhere", None)


def test_the_own_note_s_status_word_wins_and_unknown_words_are_ignored() -> None:
    got = decisions_from(
        [
            fact(OLD, "adr_status", "deprecated", "adr/0006.md"),
            fact(OLD, "adr_status", "accepted", "adr/other.md"),
            fact(OLD, "adr_status", "accepted", "adr/third.md"),
            fact("Redis", "adr_status", "active", "wiki/redis.md"),
        ],
        OWNERS,
    )
    assert got[OLD.casefold()].status == "deprecated"
    assert "redis" not in got


def rank(name: str, cosine: float = 0.5, evidence: str = "own") -> SubjectRank:
    return SubjectRank(name, 10, 1, {"adr": 1}, 1, 1, 0.9, cosine, False, {}, (), None, evidence)  # type: ignore[arg-type]


SUCCESSION = Succession(
    decisions_from(
        [
            fact(OLD, "superseded_by", NEW, "adr/0006.md"),
            fact(NEW, "adr_status", "accepted", "adr/0014.md"),
        ],
        OWNERS,
    )
)


def test_a_successor_below_the_old_decision_moves_right_before_it() -> None:
    subjects = [rank("Feature flags"), rank(OLD), rank("Kafka"), rank(NEW)]
    got = order_with_successors(subjects, SUCCESSION, lambda *_: None, 20)
    assert [s.subject for s in got] == ["Feature flags", NEW, OLD, "Kafka"]
    assert (got[1].status, got[2].status, got[2].superseded_by) == ("current", "superseded", NEW)
    assert got[0].status is None and got[0].superseded_by is None


def test_a_missing_successor_joins_right_before_and_top_k_holds() -> None:
    asked: list[str] = []

    def join(norm: str, old: SubjectRank) -> SubjectRank:
        asked.append(norm)
        return rank(NEW, old.best_cosine or 0.0, "successor")

    subjects = [rank(OLD, 0.6), rank("Kafka"), rank("Redis")]
    got = order_with_successors(subjects, SUCCESSION, join, 3)
    assert [s.subject for s in got] == [NEW, OLD, "Kafka"]
    assert asked == [NEW.casefold()]
    assert got[0].evidence == "successor" and got[0].best_cosine == 0.6


def test_a_successor_that_cannot_join_leaves_the_answer_as_it_was() -> None:
    subjects = [rank(OLD), rank("Kafka")]
    got = order_with_successors(subjects, SUCCESSION, lambda *_: None, 20)
    assert [s.subject for s in got] == [OLD, "Kafka"]
    assert got[0].superseded_by == NEW


def test_a_chain_puts_the_newest_first() -> None:
    chain = Succession(
        decisions_from(
            [fact("A", "superseded_by", "B"), fact("B", "superseded_by", "C")],
            {"a": ("A", "a.md"), "b": ("B", "b.md"), "c": ("C", "c.md")},
        )
    )
    got = order_with_successors([rank("A"), rank("B"), rank("C")], chain, lambda *_: None, 20)
    assert [s.subject for s in got] == ["C", "B", "A"]
