"""Query terms for degraded mode and the semantic bridge's nominations."""

from __future__ import annotations

import pytest

from pipeline.bridge import (
    asks_who,
    code_patterns,
    content_words,
    query_terms,
    rank_cosines,
    semantic_candidates,
    term_candidates,
)
from pipeline.kodb.match import reference_search
from pipeline.model import Candidate, Hit, Note, normalize_text


def test_terms_drop_short_words_stop_words_and_numbers() -> None:
    assert query_terms("What do we know about the Warm cache in 2026?") == ["warm", "cache"]


def test_terms_keep_hungarian_accents_and_drop_hungarian_stop_words() -> None:
    assert query_terms("Hogyan működik a gyorsítótár-invalidálás és az őrző?") == [
        "működik",
        "gyorsítótár",
        "invalidálás",
        "őrző",
    ]


def test_terms_are_deduplicated_in_first_seen_order() -> None:
    assert query_terms("redis REDIS Redis cache") == ["redis", "cache"]


def test_wildcards_and_quotes_are_not_terms() -> None:
    assert query_terms("100% of '_' \"%%\" -- ;") == []


class Subjects:
    """The bridge's view of KO-DB: a registry of notes and the subjects of each file."""

    def __init__(self, by_file: dict[str, set[str]], own: dict[str, str] | None = None) -> None:
        self.by_file = by_file
        self.own = own or {}
        self.norms = {s for v in by_file.values() for s in v}

    def notes_at(self, paths):  # type: ignore[no-untyped-def]
        return {p: Note(p, self.own[p], "wiki", "h", 0, 1) for p in paths if p in self.own}

    def subjects_by_source_file(self, paths):  # type: ignore[no-untyped-def]
        return {p: set(self.by_file.get(p, set())) for p in paths}

    def search_subjects_many(self, terms):  # type: ignore[no-untyped-def]
        return {t: reference_search(t, self.norms) for t in terms}


def test_a_hit_nominates_its_own_subject_and_subjects_named_by_its_title() -> None:
    kodb = Subjects(
        {
            "a.md": {"redis", "kafka"},
            "b.md": {"warm cache design", "redis"},
            "c.md": {"warmstart"},
            "d.md": {"redis failover runbook"},
        },
        own={"a.md": "Redis", "b.md": "Warm cache design", "c.md": "Warmstart"},
    )
    hits = [
        Hit("a.md", "Redis", "wiki", 0.7),
        Hit("b.md", "Warm cache design", "session", 0.5),
        Hit("c.md", "Warmstart", "session", 0.1),
    ]
    got = semantic_candidates(hits, 0.2, kodb)
    assert got["redis"] == Candidate("redis", "own", 0.7, "a.md")
    assert got["warm cache design"] == Candidate("warm cache design", "own", 0.5, "b.md")
    # The seed's LIKE bridge: a subject containing a hit's title at word boundaries.
    assert got["redis failover runbook"] == Candidate(
        "redis failover runbook", "title", 0.7, "a.md"
    )
    # Kafka is only linked from one hit: no evidence it is what the question is about.
    assert "kafka" not in got
    assert "warmstart" not in got  # below the floor
    assert semantic_candidates(hits, None, kodb)["warmstart"].cosine == 0.1


def test_a_subject_linked_from_two_of_the_best_hits_is_a_mentioned_candidate() -> None:
    kodb = Subjects(
        {f"{i}.md": {f"note {i}", "postgresql"} for i in range(7)},
        own={f"{i}.md": f"Note {i}" for i in range(7)},
    )
    hits = [Hit(f"{i}.md", f"Note {i}", "wiki", 0.9 - i / 10) for i in range(7)]
    got = semantic_candidates(hits, None, kodb)
    assert got["postgresql"] == Candidate("postgresql", "mentioned", 0.8, "1.md")
    # Only the best MENTION_POOL hits count: two mentions further down are not enough.
    late = Subjects(
        {"0.md": {"note 0"}, "5.md": {"note 5", "pg"}, "6.md": {"note 6", "pg"}},
        own={"0.md": "Note 0", "5.md": "Note 5", "6.md": "Note 6"},
    )
    assert "pg" not in semantic_candidates(hits, None, late)


def test_own_evidence_wins_over_a_title_match_of_a_better_hit() -> None:
    kodb = Subjects(
        {"a.md": {"redis"}, "b.md": {"redis failover runbook"}},
        own={"a.md": "Redis", "b.md": "Redis failover runbook"},
    )
    hits = [Hit("a.md", "Redis", "wiki", 0.7), Hit("b.md", "Redis failover runbook", "wiki", 0.4)]
    got = semantic_candidates(hits, None, kodb)
    assert got["redis failover runbook"] == Candidate("redis failover runbook", "own", 0.4, "b.md")


def test_fallback_terms_match_at_word_boundaries_and_count_the_words() -> None:
    kodb = Subjects({"x.md": {normalize_text("Warm cache"), "warmstart", "cache"}})
    got = term_candidates("the warm cache", kodb)
    assert got == {
        "warm cache": Candidate("warm cache", "words", words=2),
        "cache": Candidate("cache", "words", words=1),
    }


def test_content_words_of_any_length_but_not_stop_words_or_symbols() -> None:
    assert content_words("Is it CI or S3 in Go?") == ["ci", "s3", "go"]
    assert content_words("és a az hogy nem is") == []
    assert content_words("% _ 🍌 '' --") == []


def test_a_contraction_or_possessive_is_its_word_without_the_clitic() -> None:
    # Left whole, "what's" split into "what" and an "s" that prefixes half of all words.
    assert query_terms("what's the per-minute cap on the council's servers?") == [
        "per",
        "minute",
        "cap",
        "council",
        "servers",
    ]
    assert query_terms("who’s in the team and shouldn't they know?") == ["team"]
    assert content_words("what's up? it's he's") == []
    assert content_words("who's") == []
    assert content_words("won't shan't ain't") == []  # not "wo", "sha", "ai"


@pytest.mark.parametrize(
    ("question", "asks"),
    [
        ("who is on the platform team?", True),
        ("who leads it and who's in it?", True),
        ("Whose idea was the monorepo spike?", True),
        ("do you know who owns billing?", True),
        ("billing: who owns it?", True),
        ("to whom do I send the invoice?", True),
        ("can we put online a book whose author died in 1960?", False),  # relative clause
        ("find the volunteer who broke the binding", False),
        ("Ki vezeti a platform csapatot?", True),
        ("Kinek kell szólni az ügyeletben?", True),
        ("mikor adtuk ki a 2.0-s verziót?", False),  # "ki" here is the verb's particle
        ("És ki a felelős a számlázásért?", True),
        ("Szerinted ki vezeti a csapatot?", True),
        ("can you tell me who owns billing?", True),
        ("payments lead - who?", True),
        ("a doc on who owns what", True),
        ("what is the status of the monorepo?", False),
        ("whole-team retro notes", False),
        ("", False),
    ],
)
def test_a_question_asks_who_by_its_question_word(question: str, asks: bool) -> None:
    assert asks_who(question) is asks


def test_a_word_too_short_without_its_clitic_is_searched_whole() -> None:
    assert query_terms("Jo's notes") == ["jo's", "notes"]
    assert content_words("V8's compressed pointers") == ["v8", "compressed", "pointers"]


@pytest.mark.parametrize(
    ("question", "terms"),
    [
        ("V8's compressed pointers", ["v8", "compressed", "pointers"]),
        ("S3 lifecycle rules", ["s3", "lifecycle", "rules"]),
        ("X-15", ["x", "15"]),
        ("flutter of the X-15 stabilizer", ["flutter", "x", "15", "stabilizer"]),
        ("COVID-19 policy", ["covid", "19", "policy"]),
        ("x86-64 builds", ["x86", "64", "builds"]),
        ("X–15 with an en dash", ["x", "15", "dash"]),
        # A stop word stays one in a code; a digit first makes no code.
        ("Is the A-10 a good plane?", ["10", "good", "plane"]),
        (
            "1-on-1 meetings, a 3-day retention, 24-hour cover",
            ["meetings", "day", "retention", "hour", "cover"],
        ),
        # Numbers alone, dates and ranges are no codes.
        ("the 2024-03-10 meeting", ["meeting"]),
        ("2-3 weeks of work on RFC 2119", ["weeks", "work", "rfc"]),
        # An issue's or pull request's number is searched; a bare number, "#1" or an
        # ADR's "#7" (a record's number, read by its own rule) is not.
        ("#51981", ["51981"]),
        ("what happened to PR #52107?", ["happened", "52107"]),
        ("the #1 priority, ADR #7, x#123, &#39;", ["priority", "adr"]),
    ],
)
def test_a_code_of_letters_and_digits_is_searched_by_its_parts(
    question: str, terms: list[str]
) -> None:
    assert query_terms(question) == terms


def test_each_fused_place_stands_half_a_sigma_below_the_one_above() -> None:
    hits = [
        Hit("words.md", "Words", "wiki", 0.30, bm25=9.0),  # fused first by its words
        Hit("dense.md", "Dense", "wiki", 0.60),
        Hit("none.md", "No vector", "wiki", None, bm25=1.0),
        Hit("mid.md", "Mid", "wiki", 0.45),
    ]
    # The first place stands for the best cosine among the hits, each next one ½ σ less,
    # whatever its own cosine: the fused order decides, on dense mode's scale.
    ranked = rank_cosines(hits, sigma=0.1)
    assert ranked == pytest.approx({"words.md": 0.60, "dense.md": 0.55, "mid.md": 0.50})
    assert rank_cosines(hits, sigma=None) == pytest.approx(
        {"words.md": 0.60, "dense.md": 0.10, "mid.md": -0.40}
    )
    assert rank_cosines([], sigma=0.1) == {}
    # Degraded hits (no cosine at all) stand by their places alone.
    degraded = [Hit("x.md", "X", "wiki", None, bm25=1.0), Hit("y.md", "Y", "wiki", None)]
    assert rank_cosines(degraded, sigma=0.1) == {"x.md": 0.0, "y.md": -1.0}


def test_a_tenfold_corroborated_subject_climbs_one_fused_place_and_no_more() -> None:
    """The blend rule's ½ σ per tenfold score against ½ σ a place: a subject ten times better
    corroborated ties the place above it, not the one above that."""
    from pipeline.rank import DEFAULT_ORDER

    ranked = rank_cosines([Hit(f"{i}.md", str(i), "wiki", 0.5) for i in range(3)], sigma=0.1)
    top = ranked["0.md"]

    def tier(path: str, score: int) -> float:
        return DEFAULT_ORDER.tier(ranked[path], None, top, 0.1, score)

    assert tier("1.md", 100) == pytest.approx(tier("0.md", 10))
    assert tier("2.md", 100) > tier("0.md", 10)


def test_hybrid_candidates_carry_their_fused_place_and_dense_ones_do_not() -> None:
    kodb = Subjects(
        {"a.md": {"alpha"}, "b.md": {"beta"}},
        own={"a.md": "Alpha", "b.md": "Beta"},
    )
    hits = [Hit("a.md", "Alpha", "wiki", 0.3), Hit("b.md", "Beta", "wiki", 0.6)]
    fused = semantic_candidates(hits, None, kodb, fused=True, sigma=0.1)
    assert fused["alpha"] == Candidate("alpha", "own", 0.3, "a.md", rank_cosine=0.6)
    assert fused["beta"].rank_cosine == pytest.approx(0.55)  # its place, not its cosine
    dense = semantic_candidates(hits, None, kodb)
    assert dense["alpha"].rank_cosine is None


@pytest.mark.parametrize(
    ("text", "held"),
    [
        ("the X-15 stabilizer", True),
        ("the x15 airplane", True),
        ("the X–15 (an en dash)", True),
        ("an 11 x 15 in. tunnel", False),
        ("x = 15 at the wall", False),
        ("the x-150 rig", False),
        ("max-15", False),
    ],
)
def test_a_code_is_held_as_written_not_by_its_parts_apart(text: str, held: bool) -> None:
    [code] = code_patterns("what about X-15?")
    assert bool(code.search(text.lower())) is held
    assert code_patterns("the 2024-03-10 meeting about 2-3 weeks") == []
    assert code_patterns("X-15 in mid-2023", ["x", "15"]) == [code]  # the period's left out
