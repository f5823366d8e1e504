"""Rendering: the JSON contract, and silence that stays silent in markdown and tables."""

from __future__ import annotations

import math

from rich.console import Console

from pipeline.model import Answer, FactView, Hit, Relevance, SubjectRank
from pipeline.render import answer_to_dict, to_markdown, to_rich

HIT = Hit("wiki/redis.md", "Redis", "wiki", 0.123456)


def relevance(label: str, top: float | None = 0.5) -> Relevance:
    return Relevance(label, top, math.nan if top is None else 1.2, 0.3, 0.1, 0.3, "vault", False)  # type: ignore[arg-type]


def subject() -> SubjectRank:
    fact = FactView("tagged", "infra/cache", 0.9, "wiki", "wiki/redis.md")
    return SubjectRank(
        "Redis",
        38,
        3,
        {"session": 1, "wiki": 1, "adr": 1},
        3,
        4,
        0.9,
        0.5,
        True,
        {"tagged": 4},
        (fact,),
    )


def test_json_contract_keys_and_non_finite_numbers_as_null() -> None:
    a = Answer("q", "semantic", None, relevance("strong", None), (HIT,), (subject(),), {"x": 1.26})
    d = answer_to_dict(a)
    assert list(d) == [
        "query",
        "mode",
        "degraded_reason",
        "relevance",
        "hits",
        "subjects",
        "timings_ms",
    ]
    assert d["relevance"]["z"] is None
    assert d["hits"][0]["cosine"] == 0.1235
    s = d["subjects"][0]
    assert s["score"] == 38 and s["per_type"] == {"session": 1, "wiki": 1, "adr": 1}
    assert s["facts"][0]["source_file"] == "wiki/redis.md"


def test_no_match_markdown_says_nothing_relevant_and_lists_no_notes() -> None:
    md = to_markdown(
        Answer("banana bread", "semantic", None, relevance("no_match", 0.08), (HIT,), ())
    )
    assert "nothing relevant" in md
    assert "wiki/redis.md" not in md


def test_no_match_table_lists_no_notes() -> None:
    console = Console(record=True, width=120)
    console.print(
        to_rich(Answer("banana", "semantic", None, relevance("no_match", 0.08), (HIT,), ()))
    )
    text = console.export_text()
    assert "nothing relevant" in text and "wiki/redis.md" not in text


def test_routing_answer_lists_its_notes() -> None:
    a = Answer("where is redis", "semantic", None, relevance("moderate"), (HIT,), ())
    assert "wiki/redis.md" in to_markdown(a)
    console = Console(record=True, width=120)
    console.print(to_rich(a))
    assert "wiki/redis.md" in console.export_text()


def test_markdown_marks_crystal_ready_and_provenance() -> None:
    md = to_markdown(Answer("redis", "semantic", None, relevance("strong"), (HIT,), (subject(),)))
    assert "**Redis**" in md and "crystal-ready" in md
    assert "[wiki: wiki/redis.md, 0.90]" in md
