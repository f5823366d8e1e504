"""Query terms for degraded mode and the semantic bridge's nominations."""

from __future__ import annotations

from pipeline.bridge import query_terms, semantic_candidates, term_candidates
from pipeline.kodb.match import reference_search
from pipeline.model import Hit, normalize_text


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
    def __init__(self, by_file: dict[str, set[str]]) -> None:
        self.by_file = by_file
        self.norms = {s for v in by_file.values() for s in v}

    def subjects_by_source_file(self, paths):  # type: ignore[no-untyped-def]
        return {p: set(self.by_file.get(p, set())) for p in paths}

    def search_subjects_many(self, terms):  # type: ignore[no-untyped-def]
        return {t: reference_search(t, self.norms) for t in terms}

    def facts_for_subjects(self, subject_norms):  # type: ignore[no-untyped-def]
        return []


def test_bridge_nominates_hit_files_and_titles_above_the_floor_only() -> None:
    kodb = Subjects(
        {
            "a.md": {"redis", "kafka"},
            "b.md": {"warm cache"},
            "c.md": {"warmstart"},
        }
    )
    hits = [
        Hit("a.md", "Redis", "wiki", 0.7),
        Hit("b.md", "Warm cache design", "session", 0.5),
        Hit("c.md", "Warmstart", "session", 0.1),
    ]
    got = semantic_candidates(hits, 0.2, kodb)
    assert got == {"redis": 0.7, "kafka": 0.7, "warm cache": 0.5}
    assert "warmstart" not in got
    everything = semantic_candidates(hits, None, kodb)
    assert everything["warmstart"] == 0.1


def test_fallback_terms_match_at_word_boundaries() -> None:
    kodb = Subjects({"x.md": {normalize_text("Warm cache"), "warmstart"}})
    assert list(term_candidates("the warm one", kodb)) == ["warm cache"]
