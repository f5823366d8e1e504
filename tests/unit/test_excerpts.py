"""A hit's excerpt is the paragraph of its note that meets the question: the rare question
words count most, a heading's words count for what is under it, a word in a link's address
does not count, the summary stays when nothing does better or the note cannot be read."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.excerpts import (
    EXCERPT_CHARS,
    best_paragraph,
    paragraphs,
    row_text,
    searchable,
    with_excerpts,
)
from pipeline.kodb.text import query_groups
from pipeline.model import Hit

MINUTES = """---
title: TSC meeting
tags: [minutes]
---
# TSC meeting 2017-04-06

Minutes doc: https://docs.example.com/minutes/2017-04-06 · present: Anna, Rod, Mary

## Announcements

- Anna: the security release goes out on Tuesday.
- Rod: the TSC chair election opens in May.

## Code of Conduct

We agreed that one **Code of Conduct** applies to every repository of the TSC, and the
[moderation team](https://example.com/mod) enforces it.

```sh
conduct --check  # a code block is never an excerpt
```

| item | owner |
|------|-------|
| moderation policy | Mary |
"""

SUMMARY = "Minutes doc: https://docs.example.com/minutes/2017-04-06 · present: Anna, Rod, Mary"


def stems(question: str, language: str = "english") -> list[tuple[str, ...]]:
    from pipeline.bridge import query_terms

    return query_groups(query_terms(question), (language,))


def test_paragraphs_leave_out_frontmatter_and_code_and_know_their_heading() -> None:
    paras = paragraphs(MINUTES)
    shown = [paras.shown(i) for i in range(len(paras.texts))]
    assert not any("title:" in s or "conduct --check" in s for s in shown)
    # Each list item is its own paragraph, shown under its heading, marks gone.
    assert "Announcements — Anna: the security release goes out on Tuesday." in shown
    assert any(s.startswith("Code of Conduct — We agreed that one Code of Conduct") for s in shown)
    # A link by its text, a table row as cells.
    assert any("the moderation team enforces it" in s for s in shown)
    assert "Code of Conduct — item · owner — moderation policy · Mary" in [s.strip() for s in shown]


def test_each_table_row_is_a_paragraph_of_its_cells_shown_under_its_header_row() -> None:
    note = (
        "# Staff\n\nWho does what.\n"
        "| role | person |\n|---|---|\n"
        "| programme lead | [[Helen Marsh\\|Helen]] |\n"
        "| curator | [[Bob Smith|Bob]] |\n"
        "| shell | `ls | wc -l` counts, and a \\| stays a pipe |\n"
        "| | the first cell empty |\n\n"
        "| year | budget |\n| 2026 | £12,000 |\n"
    )
    paras = paragraphs(note)
    assert [paras.shown(i) for i in range(len(paras.texts))] == [
        "Who does what.",  # the paragraph above a table is not a row
        "role · person",
        # an alias, escaped as a table needs it, is one link; a row says what its cells are
        "role · person — programme lead · Helen",
        "role · person — curator · Bob",
        "role · person — shell · ls | wc -l counts, and a | stays a pipe",
        "role · person — the first cell empty",
        "year · budget",  # another table, another header
        "year · budget — 2026 · £12,000",
    ]
    got = best_paragraph(searchable(note), stems("who is the programme lead?"), "Who does what.")
    assert got == "role · person — programme lead · Helen"


@pytest.mark.parametrize(
    ("row", "cells"),
    [
        ("| `a | [[B]] | c |", "`a · [[B]] · c"),  # an unclosed backtick is text
        ("| `dir\\` | [[B]] | y |", "`dir\\` · [[B]] · y"),  # no escape inside code
        ("| \\`a | b` | [[B]] |", "\\`a · b` · [[B]]"),  # an escaped backtick opens none
        ("| ``a|`b`` | c |", "``a|`b`` · c"),  # closed by a run as long
    ],
)
def test_a_row_s_code_spans_are_read_as_commonmark_reads_them(row: str, cells: str) -> None:
    assert row_text(row) == cells


def test_a_rule_above_a_table_keeps_no_earlier_table_s_header() -> None:
    note = "| a | b |\n|---|---|\n| 1 | 2 |\n\nText.\n\n---\n| c | d |\n|---|---|\n| 3 | 4 |\n"
    paras = paragraphs(note)
    shown = [paras.shown(i) for i in range(len(paras.texts))]
    assert shown == ["a · b", "a · b — 1 · 2", "Text.", "c · d", "c · d — 3 · 4"]


def test_a_table_in_a_quote_in_a_list_item_is_rows_nested_in_the_item() -> None:
    paras = paragraphs("- the staff\n  > | role | person |\n  > |---|---|\n  > | lead | Helen |\n")
    assert paras.texts == ("the staff", "role · person", "lead · Helen")
    assert paras.parent == (None, 0, 1)  # the row under its header row, in the item
    assert paras.enclosing(2) == [1, 0]


def test_a_callout_s_marker_is_no_part_of_its_paragraph() -> None:
    found = paragraphs("> [!note]+ Superseded by [[0014-flags]] in April.\n> More text.\n")
    assert found.texts == ("Superseded by [[0014-flags]] in April. More text.",)
    assert paragraphs("> [!warning]\n> Careful here.\n").texts == ("Careful here.",)


def test_the_paragraph_holding_the_rare_question_words_is_the_excerpt() -> None:
    got = best_paragraph(
        searchable(MINUTES), stems("what did the TSC decide on the code of conduct?"), SUMMARY
    )
    assert got is not None and got.startswith("Code of Conduct — We agreed that one Code")


def test_a_heading_s_words_count_for_the_paragraphs_under_it() -> None:
    got = best_paragraph(searchable(MINUTES), stems("announcements"), SUMMARY)
    assert got == "Announcements — Anna: the security release goes out on Tuesday."


def test_the_title_s_words_count_for_no_paragraph() -> None:
    # A level-1 heading is the note's title: as much about every paragraph as about the
    # first, which it would otherwise pick ("Date: …" for every question naming Django).
    note = (
        "# 10. Django Templates\n\nDate: 2022-09-26\n\n## Decision\n\nWe render HTML with Django.\n"
    )
    got = best_paragraph(searchable(note), stems("why did we pick django?"), None)
    assert got == "Decision — We render HTML with Django."


def test_question_words_meet_their_inflections_through_the_stemmer() -> None:
    got = best_paragraph(searchable(MINUTES), stems("when are elections held"), SUMMARY)
    assert got == "Announcements — Rod: the TSC chair election opens in May."


def test_a_word_inside_a_link_address_does_not_count() -> None:
    # "minutes" and "example" are in the summary's link only.
    assert best_paragraph(searchable(MINUTES), stems("example minutes"), SUMMARY) is None


def test_the_summary_stays_when_no_paragraph_holds_more_of_the_question() -> None:
    assert best_paragraph(searchable(MINUTES), stems("present anna rod"), SUMMARY) is None
    assert best_paragraph(searchable(MINUTES), stems("banana bread walnuts"), SUMMARY) is None


def test_a_long_paragraph_is_clipped_around_the_first_question_word() -> None:
    filler = " ".join(f"word{i}" for i in range(200))
    note = f"# Long\n\n{filler} the quokka census closed early. {filler}\n"
    got = best_paragraph(searchable(note), stems("quokka census"), None)
    assert got is not None and len(got) <= EXCERPT_CHARS
    assert got.startswith("…") and got.endswith("…") and "quokka census closed early" in got


def test_hungarian_words_meet_with_or_without_their_accents() -> None:
    note = "# Jegyzet\n\nBevezető bekezdés az ügyről.\n\nA döntések listája: Redis marad.\n"
    for question in ("milyen döntés született", "milyen dontes szuletett"):
        got = best_paragraph(searchable(note), stems(question, "hungarian"), None)
        assert got == "A döntések listája: Redis marad.", (
            question
        )  # the title (level 1) is not shown


def test_every_hit_gets_its_note_s_excerpt_and_unreadable_notes_keep_their_summary(
    tmp_path: Path,
) -> None:
    (tmp_path / "minutes.md").write_text(MINUTES, encoding="utf-8")
    (tmp_path / "latin1.md").write_bytes("caf\xe9 conduct".encode("latin-1"))
    (tmp_path / "big.md").write_text("# Big\n\nconduct " * 100, encoding="utf-8")
    hits = [
        Hit(p, p, "session", 0.5, excerpt="its summary")
        for p in ("minutes.md", "gone.md", "latin1.md", "big.md")
    ]
    got = with_excerpts(hits, ["code", "conduct"], tmp_path, 1_000, {}, "english")
    assert got[0].excerpt is not None and got[0].excerpt.startswith("Code of Conduct — We agreed")
    # Gone, not UTF-8, over the size limit: the registry's summary, as before.
    assert [h.excerpt for h in got[1:]] == ["its summary"] * 3
    assert with_excerpts(hits, [], tmp_path, 1_000, {}, "english") == hits


def _minutes(day: str, news: str) -> str:
    return (
        f"# TSC meeting {day}\n\n## Present\n\n- Anna\n- Rod\n\n## Board Updates\n\n"
        "Extracted from the agenda's issues before the meeting.\n\n"
        f"## Announcements\n\n- {news}\n\n## Calendar\n\nSee the project calendar.\n"
    )


def test_a_paragraph_other_notes_of_the_answer_hold_gives_way_to_the_note_s_own(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.md").write_text(_minutes("A", "The meeting moved to Wednesdays."), "utf-8")
    (tmp_path / "b.md").write_text(_minutes("B", "Security releases are out."), "utf-8")
    (tmp_path / "c.md").write_text(_minutes("C", "Rod chairs the next meeting."), "utf-8")
    hits = [Hit(p, p, "wiki", 0.5, excerpt="Anna") for p in ("a.md", "b.md", "c.md")]
    got = with_excerpts(hits, ["happened", "meeting"], tmp_path, 10_000, {}, "english")
    # Each note's own line about the meeting, not the template's line every note holds,
    # though the template's comes first and holds as much of the question.
    assert got[0].excerpt == "Announcements — The meeting moved to Wednesdays."
    assert got[2].excerpt == "Announcements — Rod chairs the next meeting."
    # A note with no line of its own on the question shows the template's.
    template = "Board Updates — Extracted from the agenda's issues before the meeting."
    assert got[1].excerpt == template
    # Alone in its answer, a note's best paragraph is chosen as it always was: the first.
    (alone,) = with_excerpts(hits[:1], ["happened", "meeting"], tmp_path, 10_000, {}, "english")
    assert alone.excerpt == template


def test_a_paragraph_s_score_is_weighted_by_how_few_notes_hold_it() -> None:
    note = searchable("# N\n\nThe quokka census.\n\nA quokka census on Rottnest.\n")
    question = stems("quokka census rottnest")
    assert best_paragraph(note, question, None) == "A quokka census on Rottnest."
    assert best_paragraph(note, question, None, (3.0, 1.0)) == "The quokka census."
    assert best_paragraph(note, question, None, (1.0, 1.0)) == "A quokka census on Rottnest."
    # A paragraph holding no question word is never chosen for being rare.
    assert best_paragraph(note, stems("rottnest"), None, (9.0, 0.5)) == (
        "A quokka census on Rottnest."
    )
    # The summary stays when it holds as much of the question as the paragraph chosen,
    # whatever the weights.
    assert best_paragraph(note, stems("census"), "The quokka census.", (0.1, 5.0)) is None


def test_a_file_found_twice_weighs_its_paragraphs_as_once() -> None:
    from pipeline.excerpts import _rarities

    n, m = searchable("# N\n\nShared line.\n\nOwn line.\n"), searchable("# M\n\nShared line.\n")
    alone = _rarities([("n.md", n), ("m.md", m)])
    assert _rarities([("n.md", n), ("n.md", n), ("m.md", m), None]) == [*alone[:1], *alone, ()]
    assert alone[0][0] < alone[0][1]  # shared with m weighs less than its own line


NESTED = """# TSC meeting

## nodejs/TSC

* Proposal: drop mandatory meeting attendance requirement #1338
  * Does not seem to be any objections
  * Colin will submit the charter PR
    1. The email goes to the CPC for approval
* Mascot #828
  * Waiting on OpenJS staff

    An indented paragraph continues the item above it.

Back at the margin: no list around.

-\x20
  text of an item whose mark stands alone
  - nested in it

* \n* an item after an empty one
  * nested in it
"""


def test_a_nested_list_item_knows_the_items_it_sits_in() -> None:
    paras = paragraphs(NESTED)
    assert paras.texts[:6] == (
        "Proposal: drop mandatory meeting attendance requirement #1338",
        "Does not seem to be any objections",
        "Colin will submit the charter PR",
        "The email goes to the CPC for approval",
        "Mascot #828",
        "Waiting on OpenJS staff",
    )
    assert paras.parent[:9] == (None, 0, 0, 2, None, 4, 5, None, None)
    assert paras.enclosing(3) == [2, 0]
    assert paras.texts[6] == "An indented paragraph continues the item above it."
    assert paras.texts[7] == "Back at the margin: no list around."
    # An item whose mark stands alone takes the text below it; what is nested in it
    # nests in that item (and no item ever nests in itself or a later one).
    assert paras.texts[8:] == (
        "text of an item whose mark stands alone",
        "nested in it",
        "an item after an empty one",
        "nested in it",
    )
    assert paras.parent[8:] == (None, 8, None, 10)
    assert all(q is None or q < i for i, q in enumerate(paras.parent))
    assert paras.shown(3) == (
        "nodejs/TSC — Colin will submit the charter PR — The email goes to the CPC for approval"
    )


def test_a_nested_item_holds_the_words_of_the_items_it_sits_in() -> None:
    note = searchable(NESTED)
    got = best_paragraph(note, stems("what became of the attendance requirement?"), None)
    # The discussion under the item, shown after the item: the item alone says what was
    # proposed, not what became of it; every nested item holds its words, the first wins.
    assert got == (
        "nodejs/TSC — Proposal: drop mandatory meeting attendance requirement #1338 — "
        "Does not seem to be any objections"
    )
    # The words of every item a paragraph is nested in count; the item shown above it is
    # the nearest holding one of the question's words.
    got = best_paragraph(note, stems("attendance approval email"), None)
    assert got == (
        "nodejs/TSC — Proposal: drop mandatory meeting attendance requirement #1338 — "
        "The email goes to the CPC for approval"
    )
    got = best_paragraph(note, stems("charter approval email"), None)
    assert got == (
        "nodejs/TSC — Colin will submit the charter PR — The email goes to the CPC for approval"
    )


def test_a_long_enclosing_item_is_clipped_around_its_match_before_the_nested_one() -> None:
    from pipeline.excerpts import PARENT_CHARS

    item = "Proposal " + "lorem ipsum dolor " * 12 + "drop the attendance requirement #1338"
    note = searchable(f"# N\n\n* {item} " + "sit amet " * 30 + "\n  * no objections\n")
    got = best_paragraph(note, stems("attendance"), None)
    assert got is not None and got.endswith(" — no objections")
    shown_item = got.removesuffix(" — no objections")
    assert len(shown_item) <= PARENT_CHARS and "attendance requirement" in shown_item


def test_only_the_first_nested_paragraph_is_followed_one_level_down() -> None:
    note = searchable(
        "# N\n\n## TSC\n\n* Proposal: drop attendance #1338\n  * Discussion\n"
        "    * Anna agrees with Rod\n"
    )
    assert best_paragraph(note, stems("attendance"), None) == (
        "TSC — Proposal: drop attendance #1338 — Discussion"
    )


def test_what_a_paragraph_is_nested_in_follows_the_marks_indentation() -> None:
    paras = paragraphs(
        "# N\n\n* Proposal\n  * Mascot\n\n  Resolved: optional from May.\n\n"
        "\t* tabbed\n\t\t* nested by tabs\n\n- a\n\n---\n\n  - after a break\n\n"
        "- b\n\n```\ncode\n```\n\n  - after a fence\n"
    )
    assert paras.texts == (
        "Proposal",
        "Mascot",
        "Resolved: optional from May.",
        "tabbed",
        "nested by tabs",
        "a",
        "after a break",
        "b",
        "after a fence",
    )
    # A tab is four columns: the tabbed list sits in "Proposal" (its text at column 2).
    assert paras.parent == (None, 0, 0, 0, 3, None, None, None, None)


def test_an_embed_on_a_line_of_its_own_is_no_paragraph() -> None:
    note = searchable(
        "# Handover\n\nQuiet week, three pages.\n\n## Flags flipped\n\n"
        "- indexer-bulk-mode on for the reindex\n\n![[On-call#What pages]]\n\n- ![[map.png]]\n\n"
        "![[a.png|200]] ![rota](rota.png)\n\n![[b.png]] shows the on-call rota\n"
    )
    assert note.paras.texts == (
        "Quiet week, three pages.",
        "indexer-bulk-mode on for the reindex",
        "![[b.png]] shows the on-call rota",  # text beside an embed is the note's own
    )
    # The embeds alone are no paragraph to show for the question.
    got = best_paragraph(note, stems("what are our on-call rules?"), "Quiet week.")
    assert got == "Flags flipped — b.png shows the on-call rota"


def test_a_note_edited_since_it_was_last_searched_is_read_again(tmp_path: Path) -> None:
    import os

    note = tmp_path / "n.md"
    note.write_text("# N\n\nIntro words here.\n\nThe quokka lives on Rottnest.\n", "utf-8")
    hit = [Hit("n.md", "N", "wiki", 0.5, excerpt="Intro words here.")]
    first = with_excerpts(hit, ["quokka"], tmp_path, 10_000, {}, "english")
    assert first[0].excerpt == "The quokka lives on Rottnest."
    note.write_text("# N\n\nIntro words here.\n\nNo quokka was seen on Penguin Island.\n", "utf-8")
    later = note.stat().st_mtime_ns + 10**9
    os.utime(note, ns=(later, later))
    again = with_excerpts(hit, ["quokka"], tmp_path, 10_000, {}, "english")
    assert again[0].excerpt == "No quokka was seen on Penguin Island."


def test_only_what_the_scan_would_read_is_excerpted(tmp_path: Path) -> None:
    import os

    vault, outside = tmp_path / "vault", tmp_path / "outside"
    (vault / "private").mkdir(parents=True)
    outside.mkdir()
    secret = "# S\n\nThe quokka password is hunter2.\n"
    (outside / "secret.md").write_text(secret, "utf-8")
    (vault / "private" / "p.md").write_text(secret, "utf-8")
    (vault / "inside.md").write_text("# I\n\nIntro.\n\nA quokka seen at dawn.\n", "utf-8")
    os.symlink(outside / "secret.md", vault / "out.md")
    os.symlink(vault / "private" / "p.md", vault / "to-private.md")
    os.symlink(vault / "inside.md", vault / "alias.md")
    os.mkfifo(vault / "fifo.md")  # reading it would block an answer for ever
    names = ("out.md", "to-private.md", "fifo.md", "../outside/secret.md", "alias.md")
    hits = [Hit(p, p, "wiki", 0.5, excerpt="its summary") for p in names]
    got = with_excerpts(
        hits, ["quokka"], vault, 10_000, {}, "english", lambda rel: not rel.startswith("private/")
    )
    assert [h.excerpt for h in got[:4]] == ["its summary"] * 4
    assert got[4].excerpt == "A quokka seen at dawn."  # a link inside the vault is followed


def test_markup_the_index_never_reads_is_never_an_excerpt() -> None:
    note = (
        "\ufeff---\ntags: [quokka]\n---\n# N\n\nIntro.\n\n"
        "<!-- internal: the quokka password is hunter2\n-->\n\n"
        '<div class="x">\nquokka in html\n</div>\n\n'
        "- a list item\n\n      ```sh\n      quokka --feed\n      ```\n\n"
        "See [[quokka-care|the quokka page]] for the feeding times.\n"
    )
    paras = searchable(note).paras
    shown = " | ".join(paras.shown(i) for i in range(len(paras.texts)))
    for hidden in ("tags:", "hunter2", "in html", "--feed"):
        assert hidden not in shown
    # An aliased wikilink is a link, not table cells.
    got = best_paragraph(searchable(note), stems("quokka feeding"), "Intro.")
    assert got == "See the quokka page for the feeding times."


def test_a_heading_s_closing_hashes_are_not_its_words() -> None:
    got = best_paragraph(
        searchable("## Feeding ##\n\nQuokkas eat leaves.\n"), stems("leaves"), None
    )
    assert got == "Feeding — Quokkas eat leaves."


def test_a_word_the_stemmer_changes_still_meets_itself(tmp_path: Path) -> None:
    # English stems "query" to "queri", which no note's "query" starts with.
    (tmp_path / "n.md").write_text("# N\n\nIntro.\n\nThe query planner is slow.\n", "utf-8")
    hit = [Hit("n.md", "N", "wiki", 0.5, excerpt="Intro.")]
    got = with_excerpts(hit, ["query"], tmp_path, 10_000, {}, "english")
    assert got[0].excerpt == "The query planner is slow."


def test_other_scripts_fold_as_their_questions_do() -> None:
    note = "# N\n\nمقدمة قصيرة.\n\nأمن الشبكة مهم.\n"  # the hamza on the alef is a mark
    assert best_paragraph(searchable(note), stems("أمن"), None) == "أمن الشبكة مهم."


def test_the_excerpt_is_clipped_around_the_match_whatever_folding_does() -> None:
    filler = " ".join(["Straße"] * 80)  # ß folds to "ss": the folded text is longer
    got = best_paragraph(searchable(f"# N\n\n{filler} the quokka.\n"), stems("quokka"), None)
    assert got is not None and "quokka" in got


def test_code_and_html_edges_keep_the_text_around_them() -> None:
    note = (
        "# N\n\nUse `<!--` to open a comment.\n\n"
        "````\n```\nsecret_code()\n```\n````\n\n"
        "<b>Note:</b> the quokka cache is rebuilt nightly.\n"
    )
    paras = searchable(note).paras
    shown = [paras.shown(i) for i in range(len(paras.texts))]
    assert "secret_code()" not in " ".join(shown)
    assert best_paragraph(searchable(note), stems("quokka"), None) == (
        "Note: the quokka cache is rebuilt nightly."
    )


def test_a_link_counts_by_its_text_not_its_target() -> None:
    note = "# N\n\nSee [[quokka-care|the care page]].\n\nNothing else.\n"
    assert best_paragraph(searchable(note), stems("quokka"), None) is None


def test_markdown_escapes_are_shown_as_the_characters_they_keep() -> None:
    """Minutes escape brackets ("\\[Converge\\]"): an excerpt shows what a reader of the
    rendered note sees, not the backslashes."""
    shown = paragraphs(
        "# T\n\n## \\[Converge\\] child_process #22\n\nA C:\\\\temp path, 5 \\< 6.\n"
    )
    assert shown.shown(0) == "[Converge] child_process #22 — A C:\\temp path, 5 < 6."
