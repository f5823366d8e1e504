"""The sample rule (model.POOL_ORDER, model.SAMPLE_PARTITION) is the one every execution
follows: ranking's Python sort, KO-DB's SQL windows and the resident copy's numpy order."""

from __future__ import annotations

import operator
import random

import numpy as np
import sqlalchemy as sa

from pipeline.kodb import summaries
from pipeline.kodb.resident import _partition_order
from pipeline.model import POOL_ORDER, SAMPLE_PARTITION, Fact, pool_key


def _facts(n: int, seed: int = 3) -> list[Fact]:
    rng = random.Random(seed)
    return [
        Fact(
            subject=rng.choice(["A", "B"]),
            predicate=rng.choice(["is", "title", "uses"]),
            object=rng.choice(["x", "y", "z"]),
            confidence=rng.choice([0.5, 0.7, 0.9]),
            source_type=rng.choice(["wiki", "adr", "session"]),
            source_file=rng.choice(["a.md", "b.md"]),
            extractor=rng.choice(["ingest", "import"]),
        )
        for _ in range(n)
    ]


def test_pool_key_sorts_by_the_pool_order_fields_with_confidence_first_and_descending() -> None:
    facts = _facts(200)
    by_key = sorted(facts, key=pool_key)
    assert POOL_ORDER[0] == ("confidence", True)
    expected = sorted(
        facts,
        key=lambda f: (-f.confidence, *(getattr(f, name) for name, _ in POOL_ORDER[1:])),
    )
    assert by_key == expected
    rows = [{name: getattr(f, name) for name, _ in POOL_ORDER} for f in facts]
    assert sorted(rows, key=lambda r: pool_key(r, operator.getitem)) == [
        {name: getattr(f, name) for name, _ in POOL_ORDER} for f in expected
    ]


def test_the_sql_order_follows_the_pool_order() -> None:
    order = summaries._order(lambda c: c)
    rendered = [str(c.compile(compile_kwargs={"literal_binds": True})) for c in order]
    assert rendered == [
        f"facts.{name} DESC" if desc else f"facts.{name}" for name, desc in POOL_ORDER
    ]
    partition = [str(c.compile()) for c in summaries._partition()]
    assert partition[0] == "facts.subject_norm"
    assert partition[1:3] == [f"facts.{n}" for n in SAMPLE_PARTITION[:2]]
    assert isinstance(summaries._partition()[3], sa.Case)


def test_the_resident_order_is_subject_then_partition_then_pool_order() -> None:
    rng = np.random.default_rng(5)
    n = 500
    cols = {
        name: rng.integers(0, 4, n)
        for name in ("subject", "predicate", "source_type", "source_file", "object", "extractor")
    }
    cols["title_object"] = np.where(cols["predicate"] == 1, cols["object"], -1)
    cols["confidence"] = rng.choice([0.5, 0.7, 0.9], n)
    got = _partition_order(cols).tolist()
    keys = ["subject", *SAMPLE_PARTITION, *(k for k, _ in POOL_ORDER if k not in SAMPLE_PARTITION)]
    desc = dict(POOL_ORDER)

    def key(i: int) -> tuple[float, ...]:
        return tuple(-cols[k][i] if desc.get(k) else cols[k][i] for k in keys)

    assert [key(i) for i in got] == sorted(key(i) for i in range(n))
