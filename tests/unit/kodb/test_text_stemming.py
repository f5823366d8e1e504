"""The full-text index's words stemmed per language: the same for a note and a question,
accents read before they are folded away, and "none" exactly today's whole words."""

from __future__ import annotations

import threading

import pytest

from pipeline import languages
from pipeline.kodb import text


def test_english_stems_meet_across_inflections() -> None:
    assert text.words("Caching the caches", language="english") == ["cach", "the", "cach"]
    assert text.query_words(["cached"], ["english"]) == text.query_words(["caching"], ["english"])


def test_hungarian_is_stemmed_before_its_accents_are_folded() -> None:
    # The Hungarian rules read the accents: "döntések" loses its plural, then its marks.
    assert text.words("Döntések, gyorsítótárak", language="hungarian") == [
        "dontes",
        "gyorsitotar",
    ]
    assert text.words("döntés", language="hungarian") == ["dontes"]


def test_a_word_typed_with_or_without_accents_meets_its_note_either_way() -> None:
    note = set(text.words("Az adatbázisból töröltük", language="hungarian"))
    assert set(text.query_words(["adatbazisbol"], ["hungarian"])) <= note
    assert set(text.query_words(["adatbázisból"], ["hungarian"])) & note
    plain_note = set(text.words("Az adatbazisbol toroltuk", language="hungarian"))
    assert set(text.query_words(["adatbázisból"], ["hungarian"])) & plain_note


def test_marks_that_do_not_compose_are_dropped_not_word_breaks() -> None:
    assert text.words("İstanbul", language="english") == text.words("Istanbul", language="english")
    assert text.words("كَتَبَ", language="arabic") == text.words("كتب", language="arabic")


def test_none_and_a_missing_language_keep_whole_words_as_before() -> None:
    sample = "Caching Gyorsítótárak ﬁle_names 2026-05"
    assert (
        text.words(sample, language="none")
        == text.words(sample)
        == [
            "caching",
            "gyorsitotarak",
            "file",
            "names",
            "2026",
            "05",
        ]
    )


def test_stemmed_words_split_as_whole_words_do() -> None:
    sample = "Ligatures ﬁle, snake_case, kebab-case, Ünnep 2026"
    stemmed = text.words(sample, language="porter")
    assert len(stemmed) == len(text.words(sample))


def test_index_text_caps_the_words_before_stemming() -> None:
    assert text.index_text("runs " * 10, "english").split() == ["run"] * 10
    assert len(
        text.words("runs " * (text.MAX_INDEX_WORDS + 5), text.MAX_INDEX_WORDS, "english")
    ) == (text.MAX_INDEX_WORDS)


def test_a_question_takes_the_stems_of_every_language_in_the_index() -> None:
    words = text.query_words(["caching döntések"], ["english", "hungarian", None])
    assert words == ["cach", "dontesek", "caching", "dontes"]
    assert text.query_words(["x"], []) == []


def test_a_question_word_groups_its_spellings_across_languages() -> None:
    groups = text.query_groups(["feature flags, adatbázisból"], ["english", "hungarian"])
    assert groups == [("featur", "featu"), ("flag", "flags"), ("adatbazisbol", "adatbazis")]
    # Words sharing a spelling are one term, in the place of the first.
    assert text.query_groups(["caching now cache"], ["english", "hungarian", None]) == [
        ("cach", "caching", "cache"),
        ("now",),
    ]
    flat = text.query_words(["caching döntések"], ["english", "hungarian", None])
    grouped = text.query_groups(["caching döntések"], ["english", "hungarian", None])
    assert sorted(w for g in grouped for w in g) == sorted(flat)
    assert text.query_groups(["x"], []) == []


@pytest.mark.parametrize(
    ("value", "language"),
    [
        ("en", "english"),
        ("en-GB", "english"),
        ("hu_HU", "hungarian"),
        ("Hungarian", "hungarian"),
        ("magyar", "hungarian"),
        ("none", "none"),
        (" de ", "german"),
        ("klingon", None),
        (False, "norwegian"),  # YAML's reading of a bare `lang: no`
        ("", None),
        (3, None),
        (None, None),
    ],
)
def test_a_notes_lang_names_a_stemmer_by_code_or_name(value: object, language: str | None) -> None:
    assert languages.language_of(value) == language


def test_the_copied_list_is_pystemmers_own() -> None:
    import Stemmer

    assert tuple(Stemmer.algorithms()) == languages.SNOWBALL
    assert set(languages.ISO_639_1.values()) <= set(languages.SNOWBALL)


def test_stemming_from_many_threads_gives_the_same_words() -> None:
    sample = "caching running flagged managed döntések " * 200
    expected = text.words(sample, language="english")
    out: list[list[str]] = []

    def work() -> None:
        for _ in range(50):
            out.append(text.words(sample, language="english"))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(out) == 200 and all(w == expected for w in out)
