"""Rendering: the JSON contract, notes before subjects for people, and silence in one line."""

from __future__ import annotations

import math

from rich.console import Console

from pipeline.model import Answer, FactView, Hit, Relevance, SubjectRank
from pipeline.render import to_context_pack, to_dict, to_markdown
from pipeline.render_text import TextAnswer, short_path

LONG_PATH = "sessions/2026-02-05-gyorsitotar-invalidalas-hibakereses-and-a-very-long-tail.md"
HIT = Hit("wiki/redis.md", "Redis", "wiki", 0.123456, "Redis is our in-memory store.")
LONG_HIT = Hit(LONG_PATH, "A session with a long name " * 4, "session", 0.1, "word " * 200)


def relevance(label: str, top: float | None = 0.5) -> Relevance:
    return Relevance(label, top, math.nan if top is None else 1.2, 0.3, 0.1, 0.3, "vault", False)  # type: ignore[arg-type]


def subject(name: str = "Redis", long: bool = False) -> SubjectRank:
    obj = "a fact that goes on and on " * 8 if long else "infra/cache"
    fact = FactView("tagged", obj, 0.9, "wiki", LONG_PATH if long else "wiki/redis.md")
    return SubjectRank(
        name,
        38,
        3,
        {"session": 1, "wiki": 1, "adr": 1},
        3,
        4,
        0.9,
        0.5,
        True,
        {"tagged": 4},
        (fact, fact),
        "strong",
        "own",
    )


def text_of(answer: Answer, width: int = 100) -> str:
    console = Console(record=True, width=width)
    console.print(TextAnswer(answer))
    return console.export_text()


def test_json_contract_keys_and_non_finite_numbers_as_null() -> None:
    a = Answer("q", "semantic", None, relevance("strong", None), (HIT,), (subject(),), {"x": 1.26})
    d = to_dict(a)
    assert list(d) == [
        "schema_version",
        "query",
        "mode",
        "degraded_reason",
        "relevance",
        "hits",
        "subjects",
        "time_window",
        "recency",
        "notice",
        "unsynced",
        "word_matches",
        "word_match_count",
        "timings_ms",
    ]
    assert d["relevance"]["z"] is None
    assert d["hits"][0] == {
        "path": "wiki/redis.md",
        "title": "Redis",
        "source_type": "wiki",
        "cosine": 0.1235,
        "bm25": None,
        "excerpt": "Redis is our in-memory store.",
        "status": None,
        "superseded_by": None,
        "date": None,
        "since_sync": None,
    }
    s = d["subjects"][0]
    assert s["score"] == 38 and s["per_type"] == {"session": 1, "wiki": 1, "adr": 1}
    assert (s["band"], s["evidence"], s["best_cosine"]) == ("strong", "own", 0.5)
    assert s["facts"][0]["source_file"] == "wiki/redis.md"


def test_no_match_is_one_line_in_markdown_and_in_the_table() -> None:
    a = Answer("banana bread", "semantic", None, relevance("no_match", 0.08), (HIT,), ())
    md = to_markdown(a)
    assert "no_match: nothing in this vault is about this question" in md
    assert "0.080 ≤ floor 0.300" in md and "wiki/redis.md" not in md
    assert len([line for line in md.splitlines() if line.strip()]) == 2  # heading + the line
    text = text_of(a)
    assert "no_match" in text and "wiki/redis.md" not in text
    assert len([line for line in text.splitlines() if line.strip()]) == 2


def test_no_match_names_the_notes_holding_every_word_of_the_question() -> None:
    from dataclasses import replace

    from pipeline.render import answer_from_dict

    found = Hit("adr/0020-users.md", "20. User models", "adr", None, bm25=4.56)
    a = Answer("who is Cameron Dixon?", "semantic", None, relevance("no_match", 0.16), (HIT,), ())
    a = replace(a, word_matches=(found,))
    said = "every word of the question is in 1 note, which the model did not find close"
    assert said in to_markdown(a) and "20. User models (adr/0020-users.md)" in to_markdown(a)
    assert said in " ".join(text_of(a, 300).split())
    assert "wiki/redis.md" not in text_of(a)  # the hits stay unshown
    assert to_context_pack(a, max_chars=4000) is None  # the hook stays silent
    d = to_dict(a)
    assert d["word_matches"] == [
        {
            "path": "adr/0020-users.md",
            "title": "20. User models",
            "source_type": "adr",
            "bm25": 4.56,
        }
    ]
    assert answer_from_dict(d).word_matches == (found,)
    two = replace(a, word_matches=(found, HIT))
    assert "is in 2 notes" in to_markdown(two) and "answers from them" in to_markdown(two)


def test_no_match_counts_the_notes_holding_the_words_when_it_names_three_of_them() -> None:
    from dataclasses import replace

    from pipeline.render import answer_from_dict

    found = tuple(Hit(f"wiki/w{i}.md", f"Team {i}", "wiki", None, bm25=5.0 - i) for i in range(3))
    a = Answer("Okafor", "semantic", None, relevance("no_match", 0.12), (HIT,), ())
    a = replace(a, word_matches=found, word_match_count=31)
    said = (
        "every word of the question is in 31 notes, none of which the model found close in "
        "meaning; those that hold them most: Team 0 (wiki/w0.md); Team 1 (wiki/w1.md); "
        "Team 2 (wiki/w2.md)"
    )
    assert said in to_markdown(a) and said in " ".join(text_of(a, 300).split())
    d = to_dict(a)
    assert d["word_match_count"] == 31 and len(d["word_matches"]) == 3
    assert answer_from_dict(d).word_match_count == 31
    many = replace(a, word_match_count=101)
    assert "is in more than 100 notes" in to_markdown(many)


def test_a_weak_answer_names_the_notes_holding_every_word_that_it_does_not_show() -> None:
    from dataclasses import replace

    found = Hit("meetings/2024-01-17.md", "TSC Meeting 2024-01-17", "session", None, bm25=9.1)
    a = Answer("Maël Nison", "semantic", None, relevance("weak", 0.245), (HIT,), ())
    a = replace(a, word_matches=(found,))
    said = (
        "every word of the question is in 1 note not among the notes below, which the model "
        "did not find close in meaning: TSC Meeting 2024-01-17 (meetings/2024-01-17.md)"
    )
    text = " ".join(text_of(a, 300).split())
    assert said in text and text.index(said) < text.index("wiki/redis.md")
    assert said in to_markdown(a) and said in (to_context_pack(a, max_chars=8000) or "")


def test_a_label_whose_note_the_period_left_out_says_so_beside_the_period() -> None:
    from dataclasses import replace

    from pipeline.model import TimeWindow

    low = Hit("adr/0031.md", "31. Adopt htmx", "adr", 0.246, date="2026-04-15")
    window = TimeWindow("in 2026", "2026-01-01", "2026-12-31", True, 0, 27)
    a = Answer("decisions in 2026?", "semantic", None, relevance("strong", 0.552), (low,), ())
    a = replace(a, time_window=window)
    said = "the label is that of the best note found (cosine 0.552), which is not among the"
    for out in (to_markdown(a), " ".join(text_of(a, 300).split())):
        assert said in out and "the best of them has 0.246" in out
    assert said in (to_context_pack(a, max_chars=8000) or "")
    held = replace(a, hits=(replace(low, cosine=0.552),))
    assert said not in to_markdown(held)  # the label's note is among those shown
    assert said not in to_markdown(replace(a, time_window=None))  # no time: all notes are


def test_every_output_says_how_many_more_values_a_shown_property_has() -> None:
    """A meeting's one participant shown had read, in the hook's pack, as its only one."""
    fact = FactView("participants", "Bert Belder (TSC)", 0.8, "wiki", "meetings/2017-10-25.md")
    summary = FactView("summary", "The meeting.", 0.75, "wiki", "meetings/2017-10-25.md")
    meeting = SubjectRank(
        "2017-10-25 TSC meeting", 20, 1, {"wiki": 1}, 14, 14, 0.8, 0.5, False,
        {"participants": 12, "summary": 2}, (fact, summary), "strong", "own",
    )  # fmt: skip
    a = Answer("who attended?", "semantic", None, relevance("strong"), (HIT,), (meeting,))
    pack = to_context_pack(a, max_chars=8000) or ""
    assert "participants: Bert Belder (TSC) (+11 more) [meetings/2017-10-25.md]" in pack
    assert "summary: The meeting. [" in pack  # prose says nothing by its count
    assert "Bert Belder (TSC) (+11 more) [wiki: meetings/2017-10-25.md" in to_markdown(a)
    assert "Bert Belder (TSC) (+11 more)" in " ".join(text_of(a, 300).split())


def test_people_read_the_best_notes_first_then_the_subjects() -> None:
    a = Answer("redis", "semantic", None, relevance("strong"), (HIT,), (subject(),))
    for out in (to_markdown(a), text_of(a)):
        assert out.index("Redis is our in-memory store.") < out.index("infra/cache")
        assert out.index("wiki/redis.md") < out.index("tagged")


def test_the_answer_fits_100_columns_wrapping_facts_and_keeping_names_whole() -> None:
    a = Answer("q", "semantic", None, relevance("strong"), (LONG_HIT, HIT), (subject(long=True),))
    text = text_of(a, 100)
    assert max(len(line) for line in text.splitlines()) <= 100
    words = set(text.split())
    assert (
        "sessions/2026-02-05-gyorsitotar-invalidalas-hibakereses-and-a-very-long-tail.md" in words
    )
    facts = [line for line in text.splitlines() if line.lstrip().startswith("tagged:")]
    assert len(facts) == 2  # each fact starts its own line
    assert "on and on a… · note 1" in text  # cut at a word, its source kept


def test_short_path_leaves_out_folders_never_part_of_a_name() -> None:
    assert short_path("wiki/redis.md") == "wiki/redis.md"
    deep = "projects/2026/q1/cache/notes/2026-02-03-warm-cache-design-spike.md"
    assert short_path(deep, 60) == "projects/…/cache/notes/2026-02-03-warm-cache-design-spike.md"
    assert short_path(deep, 50) == "projects/…/2026-02-03-warm-cache-design-spike.md"
    assert short_path(deep, 44) == "…/2026-02-03-warm-cache-design-spike.md"
    assert short_path(deep, 38) == "2026-02-03-warm-cache-design-spike.md"
    assert short_path(deep, 10) == "…/2026-02-03-warm-cache-design-spike.md"  # whole name
    assert short_path(LONG_PATH, 30).endswith(LONG_PATH.rsplit("/", 1)[1])


def test_routing_answer_lists_its_notes() -> None:
    a = Answer("where is redis", "semantic", None, relevance("moderate"), (HIT,), ())
    assert "wiki/redis.md" in to_markdown(a)
    assert "wiki/redis.md" in text_of(a)


def test_a_notice_says_why_a_preset_found_nothing() -> None:
    a = Answer(
        "q", "semantic", None, relevance("strong"), (), (), notice="no session notes in this vault"
    )
    assert "no session notes in this vault" in to_markdown(a)
    assert "no session notes in this vault" in text_of(a)


def test_markdown_marks_crystal_ready_relevance_and_provenance() -> None:
    md = to_markdown(Answer("redis", "semantic", None, relevance("strong"), (HIT,), (subject(),)))
    assert "**Redis** (strong · its note; score 38" in md and "crystal-ready" in md
    assert "[wiki: wiki/redis.md, 0.90]" in md


def test_a_subject_of_one_file_says_file_in_markdown_and_in_the_context_pack() -> None:
    one = SubjectRank("Redis", 12, 1, {"session": 0, "wiki": 1, "adr": 0}, 1, 1, 0.9, 0.5,
                      False, {"tagged": 1}, (), "strong", "own")  # fmt: skip
    answer = Answer("redis", "semantic", None, relevance("strong"), (HIT,), (one, subject("B")))
    md = to_markdown(answer)
    pack = to_context_pack(answer, max_chars=8000) or ""
    assert (
        "score 12; 1 file: wiki 1)" in md and "score 38; 3 files: session 1, wiki 1, adr 1)" in md
    )
    assert "- Redis (1 file: wiki 1)" in pack and "- B (3 files: session 1, wiki 1, adr 1" in pack


def test_an_answer_read_back_from_its_full_precision_json_renders_the_same() -> None:
    from pipeline.model import Answer, FactView, Hit, Relevance, SubjectRank
    from pipeline.render import answer_from_dict

    rel = Relevance("moderate", 0.123456789, 1.987654321, 0.19, 0.135, 0.19, "vault", True, "h")
    subject = SubjectRank(
        "Redis",
        30,
        3,
        {"session": 1, "wiki": 1, "adr": 1},
        3,
        4,
        0.95,
        0.123456789,
        True,
        {"decided_in": 1},
        (FactView("decided_in", "0007", 0.85, "adr", "adr/0007.md"),),
        "moderate",
        "own",
    )
    answer = Answer(
        "q",
        "semantic",
        None,
        rel,
        (Hit("wiki/redis.md", "Redis", "wiki", 0.123456789, "x"),),
        (subject,),
        {"total_ms": 3.5},
        "note",
    )
    back = answer_from_dict(to_dict(answer, digits=None))
    assert back == answer
    assert to_dict(back) == to_dict(answer)
    assert to_markdown(back) == to_markdown(answer)


def test_an_answer_says_what_its_band_is_measured_to_mean() -> None:
    """Issue 40, item 4: relevance.precision in the JSON (schema 3), and in words for
    people, markdown and the hook's context."""
    from dataclasses import replace

    from pipeline.model import BandPrecision
    from pipeline.render import answer_from_dict, to_context_pack

    rel = replace(relevance("strong"), precision=BandPrecision(0.796, 232, 6))
    answer = Answer("why redis?", "semantic", None, rel, (HIT,), (subject(),))
    d = to_dict(answer)
    assert d["schema_version"] == 9
    assert d["relevance"]["precision"] == {
        "value": 0.796,
        "n": 232,
        "collections": 6,
        "lowest": None,
    }
    assert answer_from_dict(d).relevance.precision == BandPrecision(0.796, 232, 6)
    said = "a strong answer's best note was right 8 times in 10 on 6 judged collections"
    assert said in text_of(answer, width=300).splitlines()[1]
    assert said in to_markdown(answer)
    assert said in (to_context_pack(answer, max_chars=20_000) or "")
    plain = Answer("why redis?", "semantic", None, relevance("strong"), (HIT,), (subject(),))
    assert to_dict(plain)["relevance"]["precision"] is None
    assert "times in 10" not in to_markdown(plain)


def test_the_measured_meaning_names_the_hardest_collection_when_it_differs() -> None:
    """The mean over collections hides a collection where the band meant much less: the
    words say both, and the JSON carries ``lowest`` (schema 4), read back unchanged."""
    from dataclasses import replace

    from pipeline.model import BandPrecision
    from pipeline.render import answer_from_dict, precision_in_words

    measured = BandPrecision(0.79612, 232, 6, 0.38461)
    rel = replace(relevance("strong"), precision=measured)
    answer = Answer("why redis?", "semantic", None, rel, (HIT,), (subject(),))
    d = to_dict(answer)
    assert d["relevance"]["precision"]["lowest"] == 0.3846
    assert answer_from_dict(d).relevance.precision == BandPrecision(0.7961, 232, 6, 0.3846)
    said = (
        "a strong answer's best note was right 8 times in 10 on 6 judged collections, "
        "4 in 10 on the hardest"
    )
    assert said in text_of(answer, width=300).splitlines()[1]
    for lowest in (0.78, 0.95):  # the same in words, or above the mean: nothing to add
        assert precision_in_words("strong", BandPrecision(0.8, 50, 3, lowest)) == (
            "a strong answer's best note was right 8 times in 10 on 3 judged collections"
        )


def test_the_first_line_says_what_the_label_means_in_words() -> None:
    """Issue 36, item 1: the header gave numbers only ("strong · z 3.41 · floor …")."""
    answer = Answer("why redis?", "semantic", None, relevance("moderate"), (HIT,), (subject(),))
    first = text_of(answer, width=300).splitlines()[1]
    assert first.startswith("moderate: the vault knows something about this: the best note is")
    assert "1.2 σ above what off-topic questions reach here" in first


def test_the_first_line_names_the_note_the_label_measures_when_it_is_not_the_first() -> None:
    # Notes come in fused order: the closest in meaning (cosine 0.5, the label's) is third.
    hits = (
        Hit("a.md", "A", "wiki", 0.46, bm25=9.0),
        Hit("b.md", "B", "wiki", 0.47),
        Hit("c.md", "C", "wiki", 0.5),
    )
    answer = Answer("why redis?", "semantic", None, relevance("moderate"), hits, ())
    first = text_of(answer, width=300).splitlines()[1]
    assert ": the best note, note 3, is 1.2 σ above" in first
    first = Answer("why redis?", "semantic", None, relevance("moderate"), hits[2:], ())
    assert ": the best note is 1.2 σ above" in text_of(first, width=300).splitlines()[1]


def test_the_legend_explains_every_column_mark_and_evidence_value() -> None:
    """Issue 36, item 3: nothing explained `s/w/a`, `score`, `✦` or the "why" values."""
    from pipeline.render import EVIDENCE_WORDS, legend

    answer = Answer("why redis?", "semantic", None, relevance("strong"), (HIT,), (subject(),))
    text = legend(answer)
    for term in ("label", "cos", "where it is", "score", "s/w/a", "✦ crystal-ready", "facts"):
        assert term in text, term
    for words in EVIDENCE_WORDS.values():
        assert words in text, words
    assert "source files × 10" in text and "× 5" in text
    degraded = Answer("q", "fallback", "graph down", relevance("unscored", None), (), ())
    assert "mode       fallback: graph down" in legend(degraded)


def test_the_legend_fits_100_columns_breaks_no_word_and_explains_the_marks() -> None:
    from rich.cells import cell_len

    from pipeline.render import legend

    answer = Answer("why redis?", "semantic", None, relevance("strong"), (HIT,), (subject(),))
    lines = legend(answer).splitlines()
    assert max(cell_len(line) for line in lines) <= 100
    assert not [line for line in lines if line.endswith("-")]  # "off-" then "topic"
    marks = " ".join(" ".join(lines).split())
    for said in ("superseded by", "deprecated, rejected, proposed", "edited or deleted since"):
        assert said in marks, said
    assert "the note's date or undated" in marks


def test_a_no_match_says_the_period_it_read() -> None:
    from dataclasses import replace

    from pipeline.model import TimeWindow

    window = TimeWindow("márciusban", "2026-03-01", "2026-03-31", applied=True)
    a = Answer("mi történt márciusban?", "semantic", None, relevance("no_match", 0.1), (), ())
    a = replace(a, time_window=window)
    said = "period márciusban (2026-03-01 – 2026-03-31): only notes dated within it"
    assert said in to_markdown(a) and said in " ".join(text_of(a, 300).split())


def test_a_word_answer_names_no_calibration_it_did_not_use() -> None:
    from pipeline.render import label_line

    words = Answer("q", "fallback", "graph down", relevance("unscored", None), (HIT,), ())
    assert "calibration" not in label_line(words)
    meant = Answer("q", "semantic", None, relevance("strong"), (HIT,), ())
    assert "calibration" in label_line(meant)


def test_a_markdown_excerpt_is_cut_at_a_word() -> None:
    from dataclasses import replace

    long = "Cloudfront " * 40
    a = Answer("q", "semantic", None, relevance("strong"), (replace(HIT, excerpt=long),), ())
    line = next(x for x in to_markdown(a).splitlines() if "wiki/redis.md" in x)
    assert line.endswith("Cloudfront…")


def test_an_answer_says_how_many_notes_edited_since_the_last_sync_it_cannot_see() -> None:
    """JSON ``unsynced`` (schema 4, null when not compared), read back unchanged, and the
    same words in the text, the markdown (a no_match one too) and the hook's context."""
    from dataclasses import replace

    from pipeline.model import UnsyncedEdits
    from pipeline.render import answer_from_dict, to_context_pack, unsynced_words

    edits = UnsyncedEdits(changed=2, added=1, removed=0)
    answer = replace(
        Answer("why redis?", "semantic", None, relevance("strong"), (HIT,), (subject(),)),
        unsynced=edits,
    )
    d = to_dict(answer)
    assert d["unsynced"] == {"changed": 2, "added": 1, "removed": 0, "unreadable": 0}
    assert answer_from_dict(d).unsynced == edits
    said = (
        "this answer does not reflect notes edited since the last sync (2 changed, 1 new): "
        "`vault-ko sync` applies them, `vault-ko watch` keeps the vault current"
    )
    assert unsynced_words(edits) == said
    assert f"note: {said}" in text_of(answer, width=400)
    assert f"_note: {said}_" in to_markdown(answer)
    assert f"[{said}]" in (to_context_pack(answer, max_chars=20_000) or "")
    silent = replace(answer, relevance=relevance("no_match"), subjects=())
    assert f"note: {said}" in text_of(silent, width=400)
    assert f"_note: {said}_" in to_markdown(silent)
    one = unsynced_words(UnsyncedEdits(removed=1))
    assert one is not None and "reflect a note edited since the last sync (1 deleted)" in one
    for nothing in (None, UnsyncedEdits()):
        assert unsynced_words(nothing) is None
    plain = Answer("why redis?", "semantic", None, relevance("strong"), (HIT,), (subject(),))
    assert to_dict(plain)["unsynced"] is None
    assert "last sync" not in text_of(plain, width=400)


def test_a_weak_or_silent_answer_says_notes_it_cannot_read_and_a_confident_one_does_not() -> None:
    """A note sync skips as it stands may be the one the question is about: a weak,
    unscored or no_match answer says so in every format; a strong or moderate one found its
    notes, and the count stays in the JSON alone. A schema-5 answer (no count) reads as 0."""
    from dataclasses import replace

    from pipeline.model import UnsyncedEdits
    from pipeline.render import answer_from_dict, to_context_pack, unread_words

    base = Answer("zebra printer?", "semantic", None, relevance("weak"), (HIT,), (subject(),))
    weak = replace(base, unsynced=UnsyncedEdits(unreadable=1))
    said = unread_words(weak)
    assert said is not None and said.startswith("a note of this vault cannot be read")
    assert "`vault-ko sync` says which and why" in said
    assert f"note: {said}" in text_of(weak, width=400)
    assert f"_note: {said}_" in to_markdown(weak)
    assert f"[{said}]" in (to_context_pack(weak, max_chars=20_000) or "")
    silent = replace(weak, relevance=relevance("no_match"), subjects=())
    assert f"note: {said}" in text_of(silent, width=400)
    assert f"_note: {said}_" in to_markdown(silent)
    two = unread_words(replace(weak, unsynced=UnsyncedEdits(unreadable=2)))
    assert two is not None and two.startswith("2 notes of this vault cannot be read as they")
    for label in ("strong", "moderate"):
        sure = replace(weak, relevance=relevance(label))
        assert unread_words(sure) is None
        assert "cannot be read" not in text_of(sure, width=400)
        assert to_dict(sure)["unsynced"]["unreadable"] == 1
    assert unread_words(base) is None
    d = to_dict(weak)
    assert answer_from_dict(d).unsynced == UnsyncedEdits(unreadable=1)
    del d["unsynced"]["unreadable"]
    assert answer_from_dict(d).unsynced == UnsyncedEdits()


def test_an_answer_ordered_newest_first_says_so_and_dates_its_notes() -> None:
    """A question asking for the latest: the JSON's ``recency`` (schema 5), a line in the
    text, markdown and the hook's context, and each note's date beside its title."""
    from dataclasses import replace

    from pipeline.model import Recency
    from pipeline.render import answer_from_dict, to_context_pack

    dated = replace(HIT, date="2026-03-04")
    undated = replace(HIT, path="wiki/cache.md", title="Cache")
    answer = Answer(
        "what was the latest work on redis?",
        "semantic",
        None,
        relevance("strong"),
        (dated, undated),
        (subject(),),
        recency=Recency("latest", 0.5),
    )
    d = to_dict(answer)
    assert d["recency"] == {"text": "latest", "within_sigma": 0.5}
    assert answer_from_dict(d).recency == answer.recency
    said = "newest first (latest): of the notes within 0.5 σ of the best, the most recent first"
    text = text_of(answer, width=200)
    assert said in text
    assert "Redis [2026-03-04]" in text and "Cache [undated]" in text
    assert said in to_markdown(answer)
    assert said in to_context_pack(answer, max_chars=4000)
    alone = replace(answer, recency=Recency("the last meeting", None))
    assert "newest first (the last meeting): the notes found, the most recent first" in (
        text_of(alone, width=200)
    )
    assert to_dict(replace(answer, recency=None))["recency"] is None


def test_a_window_of_one_day_is_said_as_a_day() -> None:
    from pipeline.model import TimeWindow
    from pipeline.render import window_words

    iso = TimeWindow("2026-04-01", "2026-04-01", "2026-04-01")
    assert window_words(iso) == "day 2026-04-01: only notes dated on it"
    named = TimeWindow("April 1", "2026-04-01", "2026-04-01", applied=False)
    assert window_words(named) == (
        "day April 1 (2026-04-01): no note is dated on it, so it was not applied"
    )
    april = TimeWindow("in April", "2026-04-01", "2026-04-30", outside=2)
    assert window_words(april) == (
        "period in April (2026-04-01 – 2026-04-30): only notes dated within it; "
        "2 dated outside it left out"
    )


def test_a_note_edited_or_deleted_since_the_sync_is_marked_in_every_format() -> None:
    from dataclasses import replace

    from pipeline.render import answer_from_dict, to_context_pack

    gone = replace(HIT, since_sync="deleted")
    answer = Answer("why redis?", "semantic", None, relevance("strong"), (gone,), (subject(),))
    assert "deleted since the last sync" in text_of(answer, width=400)
    assert "deleted since the last sync" in to_markdown(answer)
    assert "deleted since the last sync" in (to_context_pack(answer, max_chars=20_000) or "")
    d = to_dict(answer)
    assert d["hits"][0]["since_sync"] == "deleted"
    assert answer_from_dict(d).hits[0].since_sync == "deleted"
    assert to_dict(replace(answer, hits=(HIT,)))["hits"][0]["since_sync"] is None
