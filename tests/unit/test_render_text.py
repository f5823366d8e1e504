"""The text answer people read: it fits the screen, keeps names whole and cuts no word."""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from pipeline.model import Answer, FactView
from pipeline.render import answer_from_dict
from pipeline.render_text import FACT_LINES, TEXT_SUBJECTS_SHOWN, TextAnswer

DATA = Path(__file__).resolve().parents[1] / "data" / "answers"
#: The answer `vault-ko query --json "why did we choose redis for the warm cache?"` gave on
#: examples/vault (timings dropped); the .txt files are its text at 80 and 100 columns.
REDIS = DATA / "redis-warm-cache.json"


def redis_answer() -> Answer:
    return answer_from_dict(json.loads(REDIS.read_text(encoding="utf-8")))


def text_at(answer: Answer, width: int, subjects: int | None = TEXT_SUBJECTS_SHOWN) -> str:
    console = Console(record=True, width=width, soft_wrap=True, color_system=None)
    console.print(TextAnswer(answer, subjects))
    return console.export_text()


@pytest.mark.parametrize("width", [80, 100])
def test_the_redis_answer_matches_its_snapshot(width: int) -> None:
    """Set UPDATE_SNAPSHOTS=1 to rewrite the snapshot after a deliberate change."""
    got = text_at(redis_answer(), width)
    snapshot = DATA / f"redis-warm-cache.{width}.txt"
    if os.environ.get("UPDATE_SNAPSHOTS"):
        snapshot.write_text(got, encoding="utf-8")
    assert got == snapshot.read_text(encoding="utf-8")


@pytest.mark.parametrize("width", [80, 100])
def test_every_line_fits_the_width(width: int) -> None:
    text = text_at(redis_answer(), width)
    assert max(len(line) for line in text.splitlines()) <= width


def test_the_redis_answer_fits_a_screen_and_names_what_it_leaves_out() -> None:
    answer = redis_answer()
    text = text_at(answer, 100)
    assert len(text.splitlines()) <= 46
    assert text.splitlines()[1].startswith("strong: the vault clearly knows this")
    assert f"(5 of 20; 15 more: --top-k {len(answer.subjects)})" in text
    shown = [s.subject for s in answer.subjects[:5]]
    assert all(name in text for name in shown)
    assert answer.subjects[5].subject not in text.split("subjects (", 1)[1]


def test_the_decision_is_under_its_subject() -> None:
    text = text_at(redis_answer(), 100)
    block = text.split("0007 Use Redis as the warm cache ✦", 1)[1].split("\n  3  ", 1)[0]
    assert "decision: We will build a Warm cache on our existing Redis cluster." in block


def test_a_long_fact_ends_at_a_word_within_its_lines() -> None:
    answer = redis_answer()
    objects = [" ".join(f.object.split()) for s in answer.subjects[:5] for f in s.facts]
    text = text_at(answer, 80)
    facts = re.findall(r"^ {7}(\w[\w-]*): (.*(?:\n {7}(?!\w[\w-]*: ).*)*)", text, re.M)
    assert len(facts) == sum(len(s.facts) for s in answer.subjects[:5])
    for _, body in facts:
        lines = body.count("\n") + 1
        assert lines <= FACT_LINES
        flat = " ".join(body.split()).rsplit(" · ", 1)[0]
        flat = re.sub(r" \(\+\d+ more\)$", "", flat)  # said after the object, not in it
        if flat.endswith("…"):
            kept = flat[:-1]
            assert any(o.startswith(kept) and o[len(kept)] == " " for o in objects), flat
        else:
            assert flat in objects


def test_a_web_link_longer_than_a_line_stands_whole_on_its_own() -> None:
    answer = redis_answer()
    url = (
        "https://calendar.example.com/calendar/embed?src="
        + "k" * 60
        + "%40group.calendar.example.com"
    )
    first = answer.subjects[0]
    fact = replace(first.facts[0], predicate="references", object=url)
    short = replace(first.facts[0], predicate="references", object="See https://ex.org/a and more")
    subjects = (replace(first, facts=(fact, short, *first.facts[1:])), *answer.subjects[1:])
    text = text_at(replace(answer, subjects=subjects), 80)
    lines = text.splitlines()
    at = lines.index(" " * 7 + url)  # whole, under the facts' indent: it can be copied
    assert lines[at - 1].strip() == "references:"
    assert lines[at + 1].strip().startswith("· ")  # where it is from, on the next line
    assert "references: See https://ex.org/a and more · " in text  # a short one wraps as words
    assert all(len(line) <= 80 for line in lines if url not in line)


def test_a_long_link_in_a_sentence_is_kept_and_linked_without_its_punctuation() -> None:
    answer = redis_answer()
    url = "https://calendar.example.com/embed?src=" + "k" * 70
    other = "https://docs.example.com/d/" + "q" * 70
    first = answer.subjects[0]
    short = f"Join the call at {url} (team calendar)."
    long = f"Minutes: {other}. " + "Every word of this sentence is one too many here. " * 3
    facts = (
        replace(first.facts[0], predicate="summary", object=short),
        replace(first.facts[0], predicate="context", object=long),
    )
    shown = replace(answer, subjects=(replace(first, facts=facts), *answer.subjects[1:]))
    lines = text_at(shown, 80).splitlines()
    # Whole on its own line, the words around it wrapped as words; its line comes on top of
    # the fact's two, so a short fact is not cut for it.
    at = lines.index(" " * 7 + url)
    assert lines[at - 1].strip() == "summary: Join the call at"
    assert lines[at + 1].strip() == "(team calendar). · note 1"
    # The full stop after a link stays on its line; a long fact still ends at a word.
    at = lines.index(" " * 7 + other + ".")
    assert lines[at - 1].strip() == "context: Minutes:"
    assert lines[at + 1].strip().startswith("Every word of this sentence")
    assert lines[at + 1].endswith("… · note 1")
    # In a terminal each is a link to itself, without the punctuation after it.
    console = Console(width=80, soft_wrap=True, color_system="truecolor")
    links = {
        seg.style.link
        for seg in console.render(TextAnswer(shown, TEXT_SUBJECTS_SHOWN))
        if seg.style is not None and seg.style.link
    }
    assert links == {url, other}


def test_facts_from_the_notes_above_name_the_note_by_its_number() -> None:
    text = text_at(redis_answer(), 100)
    assert "decided_in: 0007 Use Redis as the warm cache · note 1" in text


def test_without_a_limit_every_subject_is_shown_and_none_is_counted() -> None:
    answer = redis_answer()
    text = text_at(answer, 100, subjects=None)
    assert "more: --top-k" not in text
    assert all(s.subject.split()[0] in text for s in answer.subjects)


def test_a_note_found_by_its_date_alone_shows_no_score_not_a_zero() -> None:
    """Degraded, a question asking only for the latest gets notes its words did not find."""
    from dataclasses import replace

    answer = redis_answer()
    first = replace(answer.hits[0], cosine=None, bm25=None)
    second = replace(answer.hits[1], cosine=None, bm25=2.5)
    text = text_at(replace(answer, mode="fallback", hits=(first, second)), 100)
    rows = [line for line in text.splitlines() if re.match(r"\s+[12]\s", line)]
    assert rows[0].split()[:2] == ["1", "–"]
    assert rows[1].split()[:2] == ["2", "2.50"]


def test_a_property_shown_with_more_values_says_how_many_more() -> None:
    # "members: Dávid Kovács" alone read as the team's one member.
    answer = redis_answer()
    subject = answer.subjects[0]
    fact = FactView("members", "Dávid Kovács", 0.95, "wiki", "wiki/platform-team.md")
    summary = FactView("summary", "Owns the platform.", 0.75, "wiki", "wiki/platform-team.md")
    team = replace(
        subject,
        facts=(fact, summary),
        predicates={"members": 4, "summary": 1, "context": 9},
    )
    text = text_at(replace(answer, subjects=(team,)), 100)
    assert "members: Dávid Kovács (+3 more) · " in text
    assert "summary: Owns the platform. · " in text  # prose says nothing by its count
    alone = replace(team, predicates={"members": 1, "summary": 1})
    assert "more)" not in text_at(replace(answer, subjects=(alone,)), 100)
