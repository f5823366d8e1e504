"""The seed's ranking rules as executable examples."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.kodb.text import query_groups
from pipeline.model import SOURCE_TYPES, Fact, normalize_text, predicate_preference
from pipeline.rank import (
    WHO,
    OrderRule,
    question_words,
    rank_subjects,
    representative_facts,
    score_of,
    speaks,
)


def fact(
    subject: str, file: str, stype: str = "wiki", pred: str = "p", obj: str = "o", conf: float = 0.8
) -> Fact:
    return Fact(subject, pred, obj, conf, stype, file)  # type: ignore[arg-type]


def rank(facts: list[Fact], **kw: object) -> list:
    opts = {"top_k": 20, "facts_per_subject": 3, "facts_per_predicate_cap": 3, **kw}
    return rank_subjects(facts, **opts)  # type: ignore[arg-type]


def test_one_fact_in_three_sources_beats_five_facts_in_one() -> None:
    spread = [fact("Spread", f"f{i}.md", obj=str(i)) for i in range(3)]
    dump = [fact("Dump", "one.md", pred=f"p{i}", obj=str(i)) for i in range(5)]
    ranked = rank(spread + dump)
    assert [s.subject for s in ranked] == ["Spread", "Dump"]


def test_three_per_type_beats_nine_of_one_type() -> None:
    balanced = [
        fact("Balanced", f"{t}{i}.md", stype=t, obj=f"{t}{i}")
        for t in ("session", "wiki", "adr")
        for i in range(3)
    ]
    lopsided = [fact("Lopsided", f"s{i}.md", stype="session", obj=str(i)) for i in range(9)]
    ranked = rank(balanced + lopsided)
    assert [s.subject for s in ranked] == ["Balanced", "Lopsided"]
    assert ranked[0].per_type == {"session": 3, "wiki": 3, "adr": 3}
    assert ranked[0].score == 9 * 10 + 3 * 5 + 3  # 3 facts: one predicate, capped at 3
    assert ranked[1].score == 9 * 10 + 0 + 3


def test_equal_score_more_source_files_wins() -> None:
    # A: 2 files, 3 distinct predicates -> 20 + 3 = 23 ... B: 1 file, 13 facts over 5 preds
    a = [fact("A", "a1.md", pred="x"), fact("A", "a2.md", pred="y"), fact("A", "a2.md", pred="z")]
    b = [fact("B", "b.md", pred=f"q{i}", obj=str(j)) for i in range(4) for j in range(3)]
    b.append(fact("B", "b.md", pred="q9"))
    ranked = rank(a + b)
    assert ranked[0].score == ranked[1].score == 23
    assert [s.subject for s in ranked] == ["A", "B"]


def test_equal_source_count_broken_by_confidence() -> None:
    lo = [fact("Low", "l1.md", conf=0.6), fact("Low", "l2.md", conf=0.7, obj="2")]
    hi = [fact("High", "h1.md", conf=0.9), fact("High", "h2.md", conf=0.5, obj="2")]
    ranked = rank(lo + hi)
    assert [s.subject for s in ranked] == ["High", "Low"]


def test_full_tie_broken_by_case_folded_subject() -> None:
    ranked = rank([fact("beta", "b.md"), fact("Alpha", "a.md")])
    assert [s.subject for s in ranked] == ["Alpha", "beta"]


def test_predicate_dump_is_capped_per_predicate() -> None:
    dump = [fact("Billing", "b.md", pred="has_value", obj=str(i)) for i in range(30)]
    [s] = rank(dump)
    assert s.raw_facts == 30
    assert s.total_facts == 3
    assert s.predicates == {"has_value": 30}
    assert s.score == 10 + 0 + 3


def test_score_matches_its_fields() -> None:
    facts = [fact("S", f"{t}.md", stype=t, pred=t) for t in ("session", "wiki", "adr")]
    [s] = rank(facts)
    assert s.score == score_of(s.source_count, s.per_type, s.total_facts) == 30 + 5 + 3


def test_subject_spellings_group_case_insensitively() -> None:
    [s] = rank([fact("Redis", "a.md"), fact("redis", "b.md"), fact("Redis", "c.md")])
    assert s.subject == "Redis"
    assert s.source_count == 3


@pytest.mark.parametrize(
    ("types", "files", "conf", "ready"),
    [
        (("wiki", "session"), 3, 0.9, True),
        (("session",), 3, 0.9, False),  # session noise
        (("wiki", "adr"), 2, 0.9, False),
        (("wiki", "adr"), 3, 0.84, False),
        (("wiki", "adr"), 3, 0.85, True),
    ],
)
def test_crystal_ready_rule(types: tuple[str, ...], files: int, conf: float, ready: bool) -> None:
    facts = [fact("S", f"f{i}.md", stype=types[i % len(types)], conf=conf) for i in range(files)]
    [s] = rank(facts)
    assert s.crystal_ready is ready


def test_crystal_only_filters() -> None:
    ready = [fact("R", f"r{i}.md", stype=t, conf=0.9) for i, t in enumerate(["wiki", "adr", "adr"])]
    noise = [fact("N", f"n{i}.md", stype="session", conf=0.9) for i in range(5)]
    assert [s.subject for s in rank(ready + noise, crystal_only=True)] == ["R"]


def test_top_k_cuts() -> None:
    facts = [fact(f"S{i}", f"f{i}.md") for i in range(10)]
    assert len(rank(facts, top_k=4)) == 4


def test_representative_facts_prefer_confidence_then_spread() -> None:
    facts = [
        fact("S", "w1.md", "wiki", "a", "1", 0.95),
        fact("S", "w2.md", "wiki", "a", "2", 0.94),
        fact("S", "s1.md", "session", "b", "3", 0.60),
        fact("S", "a1.md", "adr", "c", "4", 0.70),
    ]
    picked = representative_facts(facts, 3)
    assert [f.object for f in picked] == ["1", "4", "3"]
    assert len(representative_facts(facts, 10)) == 4


def _asked(question: str) -> list[tuple[str, ...]]:
    """The question's groups as the query reads them (``Pipeline._question``)."""
    from pipeline.bridge import asks_who, query_terms

    groups = query_groups(query_terms(question), ("english", None))
    return [*groups, WHO] if asks_who(question) else groups


def _billing(owner_file: str = "wiki/billing.md") -> list[Fact]:
    def billing(file: str, stype: str, pred: str, obj: str, conf: float) -> Fact:
        return fact("Billing service", file, stype, pred, obj, conf)

    return [
        billing("wiki/billing.md", "wiki", "summary", "Turns usage into bills.", 0.75),
        billing("wiki/billing.md", "wiki", "status", "active", 0.9),
        billing(owner_file, "wiki", "owner", "Platform team", 0.9),
        billing(owner_file, "wiki", "owners", "Jonas Weber", 0.95),
        billing("wiki/billing.md", "wiki", "links_to", "Owners guild", 0.8),
        billing("s/run.md", "session", "context", "Billing owns the data.", 0.6),
    ]


HITS = {"wiki/billing.md": 0.5, "s/run.md": 0.3}


def test_a_fact_whose_predicate_names_what_is_asked_is_shown_first() -> None:
    facts = _billing()
    assert [f.predicate for f in representative_facts(facts, 3, HITS)] == [
        "summary",
        "context",
        "status",
    ]
    asked = _asked("who owns the billing service?")
    # The owners before the rest; a link to "Owners guild" is structural and says nothing.
    assert [f.predicate for f in representative_facts(facts, 3, HITS, asked)] == [
        "owners",
        "owner",
        "context",
    ]


def test_a_question_word_in_an_object_is_no_answer() -> None:
    # "8.7 TB per copy" crowded out "status: superseded" for "do we still keep a copy?".
    facts = _billing()
    asked = question_words(facts, _asked("which team owns the billing service?"))
    context, owner = facts[5], facts[2]  # "Billing owns the data.", "Platform team"
    assert (speaks(context, asked), speaks(owner, asked)) == (0, 1)


def test_the_asked_predicate_is_shown_once() -> None:
    adr = [
        fact("0026 Reject a monorepo", "adr/0026.md", "adr", "deciders", name, 0.9)
        for name in ("Maya", "Priya", "Tom")
    ]
    adr += [
        fact("0026 Reject a monorepo", "adr/0026.md", "adr", "decision", "No monorepo.", 0.8),
        fact("0026 Reject a monorepo", "adr/0026.md", "adr", "summary", "Nineteen repos.", 0.8),
    ]
    asked = _asked("what did we decide?")
    shown = representative_facts(adr, 3, {"adr/0026.md": 0.4}, asked)
    assert [f.predicate for f in shown] == ["deciders", "decision", "summary"]


def test_only_the_facts_of_hit_notes_are_read_for_the_question() -> None:
    # KO-DB's stored sample of a file that is no hit does not depend on the question, so
    # reading its facts for the question would answer unlike all of the facts do.
    facts = _billing(owner_file="wiki/team.md")
    asked = _asked("who owns the billing service?")
    shown = representative_facts(facts, 3, HITS, asked)
    assert [f.predicate for f in shown] == ["summary", "context", "status"]


def _team() -> list[Fact]:
    def team(pred: str, obj: str, conf: float = 0.9) -> Fact:
        return fact("Platform team", "wiki/platform-team.md", "wiki", pred, obj, conf)

    return [
        team("summary", "Owns the shared infrastructure.", 0.75),
        team("status", "active"),
        team("authorization", "SSO"),
        *(team("members", name) for name in ("Maya Okafor", "Dávid Kovács")),
        team("lead", "Maya Okafor"),
        team("manager", "Sam Ortiz"),
    ]


TEAM_HIT = {"wiki/platform-team.md": 0.4}


def test_a_question_asking_who_shows_the_people_first() -> None:
    # "who is on the platform team?": every other word is a stop word or the team's name.
    shown = representative_facts(_team(), 3, TEAM_HIT, _asked("who is on the platform team?"))
    assert [f.predicate for f in shown] == ["lead", "manager", "members"]
    without = representative_facts(_team(), 3, TEAM_HIT, _asked("what is the platform team?"))
    assert [f.predicate for f in without] == ["summary", "status", "authorization"]


def test_a_predicate_the_question_names_comes_before_other_people() -> None:
    asked = _asked("who leads the platform team and who's in it?")
    shown = representative_facts(_team(), 2, TEAM_HIT, asked)
    assert [f.predicate for f in shown] == ["lead", "manager"]


def test_people_predicates_are_whole_words_and_kept_whatever_the_name() -> None:
    facts = _team()
    asked = question_words(facts, [WHO])  # "team" is in the subject's name: WHO stays
    assert asked == (WHO,)
    by_pred = {f.predicate: speaks(f, asked) for f in facts}
    assert by_pred == {
        "summary": 0,
        "status": 0,
        "authorization": 0,  # not "author"
        "members": 1,
        "lead": 1,
        "manager": 1,
    }
    owned = fact("Billing", "b.md", "wiki", "owned_by", "Platform team")
    assert speaks(owned, (WHO,)) == 1
    assert speaks(fact("Billing", "b.md", "wiki", "tech_lead", "Maya"), (WHO,)) == 1
    for thing in ("superseded_by", "blocked_by", "team_size", "lead_time"):  # not people
        assert speaks(fact("Billing", "b.md", "wiki", thing, "x"), (WHO,)) == 0
    assert speaks(fact("Billing", "b.md", "wiki", "links_to", "Maintainers"), (WHO,)) == 0


def test_a_letter_split_off_a_word_asks_for_nothing() -> None:
    facts = _billing()
    assert question_words(facts, _asked("what did O'Neill change in V8's heap?")) == (
        ("neill",),
        ("chang", "change"),
        ("heap",),
    )


def test_the_words_of_the_subjects_own_name_are_not_what_is_asked() -> None:
    facts = _billing()
    asked = _asked("billing service status")
    assert [g[0] for g in question_words(facts, asked)] == ["status"]
    assert [f.predicate for f in representative_facts(facts, 1, HITS, asked)] == ["status"]
    assert representative_facts(facts, 1, HITS, _asked("billing service")) == (
        representative_facts(facts, 1, HITS)
    )


def test_the_same_triple_from_two_extractors_is_two_facts_from_one_source() -> None:
    # Ownership is part of a fact's identity, so an imported copy of an extracted fact is
    # its own row. Ranking counts facts (the seed's rule): it adds to raw_facts and to the
    # predicate's count (capped), never to source_count or per_type, which count files.
    extracted = Fact("Redis", "links_to", "Kafka", 0.8, "wiki", "wiki/redis.md", "ingest")
    imported = Fact("Redis", "links_to", "Kafka", 0.8, "wiki", "wiki/redis.md", "import")
    [alone] = rank([extracted])
    [both] = rank([extracted, imported])
    assert (both.source_count, both.per_type) == (alone.source_count, alone.per_type)
    assert (both.raw_facts, both.total_facts) == (2, 2)
    assert both.predicates == {"links_to": 2}
    assert both.score == alone.score + 1


def test_the_default_order_trades_half_a_sigma_of_cosine_for_ten_times_the_score() -> None:
    rule, top, sigma = OrderRule(), 0.60, 0.10

    def key(cosine: float, score: int) -> tuple[float, ...]:
        return rule.key(cosine, None, top, sigma, 0, score)

    assert key(0.57, 1000) < key(0.60, 100)  # 0.3 σ below the best, ten times the score: first
    assert key(0.53, 1000) > key(0.60, 100)  # 0.7 σ below: follows
    assert key(0.60, 200) < key(0.60, 100)  # equally relevant: the better corroborated first


@given(st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.integers(0, 10_000), st.integers(0, 10_000))
def test_the_default_order_never_jumps_more_cosine_or_score_never_ranks_lower(
    a: float, b: float, s: int, t: int
) -> None:
    rule = OrderRule()
    lo, hi = sorted((a, b))
    few, many = sorted((s, t))
    assert rule.key(hi, None, 1.0, 0.1, 0, few) <= rule.key(lo, None, 1.0, 0.1, 0, few)
    assert rule.key(lo, None, 1.0, 0.1, 0, many) <= rule.key(lo, None, 1.0, 0.1, 0, few)


def _picks_by_full_scan(
    facts: list[Fact], n: int, evidence: dict[str, float], question: tuple = ()
) -> list[Fact]:
    """representative_facts' rule with every remaining fact compared at each pick."""
    asked = question_words(facts, question)
    pool = sorted(
        facts,
        key=lambda f: (
            -evidence.get(f.source_file, -math.inf),
            predicate_preference(f.predicate),
            -f.confidence,
            f.predicate,
            f.source_type,
            f.source_file,
            f.object,
        ),
    )
    chosen: list[Fact] = []
    types: set[str] = set()
    preds: set[str] = set()
    while pool and len(chosen) < n:
        best = min(
            range(len(pool)),
            key=lambda i: (
                pool[i].predicate == "title"
                and normalize_text(pool[i].object) == pool[i].subject_norm,
                pool[i].source_file not in evidence,
                -speaks(pool[i], asked)
                if pool[i].source_file in evidence and pool[i].predicate not in preds
                else 0,
                predicate_preference(pool[i].predicate)[0],
                (pool[i].source_type in types) + (pool[i].predicate in preds),
                i,
            ),
        )
        fact = pool.pop(best)
        chosen.append(fact)
        types.add(fact.source_type)
        preds.add(fact.predicate)
    return chosen


@settings(max_examples=400, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from(
                ("is", "has", "title", "decision", "summary", "mentioned_in", "has_owner")
            ),
            st.sampled_from(("Redis", "redis", "x", "y")),
            st.sampled_from((0.1, 0.5, 0.5, 0.9)),
            st.sampled_from(SOURCE_TYPES),
            st.sampled_from(("a.md", "b.md", "c.md", "d.md")),
        ),
        max_size=30,
    ),
    n=st.integers(0, 5),
    evidence=st.dictionaries(st.sampled_from(("a.md", "b.md")), st.sampled_from((0.4, 0.8))),
    question=st.sampled_from(((), (("has",),), (("own", "owns"), ("is",)), (("redi",),))),
)
def test_representative_facts_picks_what_a_full_scan_picks(
    rows: list[tuple[str, str, float, str, str]],
    n: int,
    evidence: dict[str, float],
    question: tuple[tuple[str, ...], ...],
) -> None:
    facts = [Fact("Redis", p, o, c, t, f) for p, o, c, t, f in rows]  # type: ignore[arg-type]
    got = representative_facts(facts, n, evidence, question)
    expected = _picks_by_full_scan(facts, n, evidence, question)
    assert [(f.predicate, f.object, f.source_file) for f in got] == [
        (f.predicate, f.object, f.source_file) for f in expected
    ]


def test_a_fused_place_orders_subjects_and_the_real_cosine_is_still_shown() -> None:
    from pipeline.model import Candidate

    facts = [fact("Alpha", "a.md"), fact("Beta", "b.md")]
    # Beta's note has the better cosine, Alpha's the better fused place (its words).
    candidates = {
        "alpha": Candidate("alpha", "own", 0.30, "a.md", rank_cosine=0.60),
        "beta": Candidate("beta", "own", 0.60, "b.md", rank_cosine=0.30),
    }
    ranked = rank(facts, candidates=candidates, top_cosine=0.60, sigma=0.1)
    assert [r.subject for r in ranked] == ["Alpha", "Beta"]
    assert [r.best_cosine for r in ranked] == [0.30, 0.60]
    dense = {k: Candidate(c.subject_norm, "own", c.cosine, c.path) for k, c in candidates.items()}
    ranked = rank(facts, candidates=dense, top_cosine=0.60, sigma=0.1)
    assert [r.subject for r in ranked] == ["Beta", "Alpha"]
