"""The bodies the OpenAPI schema declares are the bodies the service sends: real answers,
in every optional part, validate against them, and no key of theirs is undeclared."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from pydantic import ValidationError

from pipeline.batch.packs import Pack
from pipeline.model import (
    Answer,
    BandPrecision,
    FactView,
    Hit,
    Recency,
    Relevance,
    SubjectRank,
    TimeWindow,
    UnsyncedEdits,
)
from pipeline.render import to_dict
from pipeline.service.bodies import AnswerBody, PacksBody

FACT = FactView("decided_in", "0007 Use Redis", 0.85, "adr", "adr/0007.md")
SUBJECT = SubjectRank(
    "Redis", 30, 3, {"session": 1, "wiki": 1, "adr": 1}, 3, 4, 0.95, 0.61, True, {"p": 3},
    (FACT,), "strong", "own", best_bm25=4.2, status="superseded", superseded_by="Valkey",
)  # fmt: skip
HIT = Hit("wiki/redis.md", "Redis", "wiki", 0.61, "An in-memory store.", bm25=3.1,
          status="current", date="2026-03-02", since_sync="edited")  # fmt: skip


def full_answer() -> Answer:
    rel = Relevance(
        "strong", 0.61, 2.9, 0.2, 0.13, 0.2, "vault", True, "tight", "a warning",
        BandPrecision(0.796, 232, 6, 0.391),
    )  # fmt: skip
    return Answer(
        "what about redis in March?",
        "semantic",
        None,
        rel,
        (HIT,),
        (SUBJECT,),
        {"graph_ms": 4.2},
        notice="a notice",
        time_window=TimeWindow("in March", "2026-03-01", "2026-03-31", True, 2, 5),
        recency=Recency("latest", 0.5),
        unsynced=UnsyncedEdits(1, 2, 3, 4),
        word_matches=(Hit("adr/0020.md", "20. Users", "adr", None, bm25=4.56),),
    )


def sparse_answer() -> Answer:
    rel = Relevance("unscored", None, math.nan, None, None, None, "none", False)
    return Answer("q", "fallback", "graph unavailable", rel, (), ())


@pytest.mark.parametrize("answer", [full_answer(), sparse_answer()], ids=["full", "sparse"])
@pytest.mark.parametrize("digits", [4, None], ids=["rounded", "full-precision"])
def test_an_answer_in_every_part_is_what_the_schema_declares(
    answer: Answer, digits: int | None
) -> None:
    AnswerBody.model_validate(to_dict(answer, digits=digits))


def test_every_key_of_an_answer_is_declared_and_required() -> None:
    body = AnswerBody.model_json_schema(by_alias=True)
    sent = to_dict(full_answer())
    assert set(body["required"]) == set(sent) == set(body["properties"])
    window = body["$defs"]["TimeWindowBody"]
    assert set(window["required"]) == set(sent["time_window"])  # "from", not "from_"


def test_a_key_the_schema_does_not_know_fails_the_check() -> None:
    sent = to_dict(full_answer()) | {"new_key": 1}
    with pytest.raises(ValidationError, match="new_key"):
        AnswerBody.model_validate(sent)
    hit = to_dict(full_answer())
    hit["hits"][0]["cosine"] = "0.61"  # a number sent as text
    with pytest.raises(ValidationError, match="cosine"):
        AnswerBody.model_validate(hit)


def test_the_packs_of_a_session_context_answer_are_declared() -> None:
    packs = [Pack("s1", "prompt one", full_answer()), Pack("s2", "two", sparse_answer())]
    PacksBody.model_validate({"packs": [to_dict(p) for p in packs]})
    missing = to_dict(replace(packs[0]))
    del missing["id"]
    with pytest.raises(ValidationError, match="id"):
        PacksBody.model_validate({"packs": [missing]})
