"""``KoDB.subject_summaries`` + ``rank.rank_summaries`` against the all-facts path.

The answer path ranks from per-subject summaries (GROUP BY counts and a bounded sample);
these tests check, on random fact sets in a real SQLite file and a real PostgreSQL database,
that the ranked output is exactly ``rank.rank_subjects`` on every fact of the subjects, with
evidence files, episodic recall's file filter and private notes.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.batch.memo import CachedKodb
from pipeline.kodb import KoDB, subject_key, summaries
from pipeline.kodb import facts as kodb_facts
from pipeline.kodb import schema as kodb_schema
from pipeline.kodb.resident import ResidentKodb
from pipeline.model import SOURCE_TYPES, Candidate, Fact, Note
from pipeline.privacy import PrivateNotes, PublicKodb
from pipeline.rank import rank_subjects, rank_summaries

pytestmark = pytest.mark.integration

#: Spellings that fold together ("Redis"/"REDIS", "Straße"/"STRASSE", NFC/NFD "é").
SPELLINGS = ("Redis", "redis", "REDIS", "Kafka", "Straße", "STRASSE", "café", "cafe\u0301")
PREDICATES = ("title", "has_value", "is", "links_to", "Is", "ä")
#: Objects that may restate a subject's name (a ``title`` fact shown last) or not.
OBJECTS = ("Redis", "redis", "x", "X", "y", "Kafka", "strasse", "café", "", "z z")
FILES = (
    "wiki/a.md",
    "wiki/b.md",
    "Wiki/a.md",
    "adr/c.md",
    "sessions/d.md",
    "wiki/ä.md",
    "private/p.md",
    "private/q.md",
)
#: Objects that name a subject (tagged like the subjects, so a ``title`` fact restates it).
NAMES = frozenset(("Redis", "redis", "Kafka", "strasse", "café"))
CONFIDENCES = (0.0, 0.1, 0.5, 0.85, 0.9, 1.0)
PRIVATE = PrivateNotes(("private/**",))

LAYERS = (
    "store",
    "public",
    "memo",
    "memo-prefetched",
    "memo-warm",
    "public-memo",
    "public-memo-prefetched",
    "public-memo-warm",
    "resident",
    "public-resident",
    "memo-resident",
)

_examples = itertools.count()

#: Few subjects, predicates and types, so that partitions hold more than n facts.
fact_rows = st.lists(
    st.tuples(
        st.sampled_from(SPELLINGS[:3]) | st.sampled_from(SPELLINGS),
        st.sampled_from(PREDICATES[:2]) | st.sampled_from(PREDICATES),
        st.sampled_from(OBJECTS),
        st.sampled_from(CONFIDENCES),
        st.sampled_from(SOURCE_TYPES[1:]) | st.sampled_from(SOURCE_TYPES),
        st.sampled_from(FILES),
        st.sampled_from(("import", "ingest")),
    ),
    min_size=1,
    max_size=60,
)
#: Questions whose words name some predicates (``rank.speaks``), or a subject's name.
questions = st.sampled_from(
    ((), (("has",),), (("is",), ("valu", "value")), (("ä",),), (("redi", "redis"),))
)
#: Evidence cosines with ties, so the evidence order falls back to confidence.
evidence_maps = st.dictionaries(
    st.sampled_from(FILES), st.sampled_from((0.3, 0.7, 0.7, 0.9)), max_size=4
)


@pytest.fixture
def db(kodb_url: str) -> Iterator[KoDB]:
    with KoDB.open(kodb_url) as store:
        yield store


def _facts(rows: list[tuple[str, ...]], tag: str, hub: int = 0) -> list[Fact]:
    """The example's facts, their subjects (and name-like objects) tagged so examples do not
    share subjects; ``hub`` more facts on one subject make a predicate flood."""
    facts = [
        Fact(f"{s} {tag}", p, f"{o} {tag}" if o in NAMES else o, c, t, f, e)  # type: ignore[arg-type]
        for s, p, o, c, t, f, e in rows
    ]
    facts += [
        Fact(f"Redis {tag}", "has_value", f"v{i % 7}", (i % 10) / 10, "wiki", f"wiki/h{i % 3}.md")
        for i in range(hub)
    ]
    return facts


def _view(db: KoDB, layer: str, norms: list[str]) -> Any:
    """The store as an answer sees it: itself, without private notes, through a batch's
    memo (its facts prefetched, or warm from other questions' samples of the same subjects:
    the service's), the memo between two privacy views (load-context on a vault with
    private notes), or the service's resident copy of the facts (over the store, its
    public view or a memo)."""
    if layer == "resident":
        return ResidentKodb(db, db.resident_copy())
    if layer == "public-resident":
        data = db.resident_copy(PRIVATE.is_private)
        return ResidentKodb(PublicKodb(db, PRIVATE), data, PRIVATE.is_private)
    if layer == "memo-resident":
        return ResidentKodb(CachedKodb(db), db.resident_copy())
    if layer == "public":
        return PublicKodb(db, PRIVATE)
    if layer.startswith("memo"):
        memo = CachedKodb(db)
        _prepare(memo, layer, norms)
        return memo
    if layer.startswith("public-memo"):
        memo = CachedKodb(PublicKodb(db, PRIVATE))
        _prepare(memo, layer, norms)
        return PublicKodb(memo, PRIVATE)
    return db


def _prepare(memo: CachedKodb, layer: str, norms: list[str]) -> None:
    if layer.endswith("-prefetched"):
        memo.facts_for_subjects(norms)
    elif layer.endswith("-warm"):
        # Earlier questions: other sample sizes and other files of their own.
        for size, files in ((1, ["wiki/a.md"]), (4, []), (2, ["wiki/h0.md", "session/b.md"])):
            memo.subject_summaries(norms, sample_size=size, evidence_files=files)


def _both(
    db: Any,
    norms: list[str],
    *,
    n: int,
    cap: int,
    evidence: dict[str, float],
    only: bool,
    crystal_only: bool,
    question: tuple[tuple[str, ...], ...] = (),
) -> tuple[list[object], list[object]]:
    """(all-facts ranking, summaries ranking) of the same subjects and options."""
    candidates = {
        norm: Candidate(norm, "own" if i % 2 else "mentioned", 0.5 + 0.1 * (i % 3), None)
        for i, norm in enumerate(norms[:-2])
    }  # the last two (one absent) are no candidates: they are ranked after them
    opts = {
        "top_k": 50,
        "facts_per_subject": n,
        "facts_per_predicate_cap": cap,
        "candidates": candidates,
        "band_of": lambda c: "strong" if c > 0.55 else "weak",
        "top_cosine": 0.7,
        "sigma": 0.05,
        "evidence_files": evidence,
        "crystal_only": crystal_only,
        "question": question,
    }
    facts = db.facts_for_subjects(norms)
    if only:
        facts = [f for f in facts if f.source_file in evidence]
    old = rank_subjects(facts, **opts)  # type: ignore[arg-type]
    summaries = db.subject_summaries(
        norms, sample_size=n, evidence_files=evidence, only_files=evidence if only else None
    )
    new = rank_summaries(summaries.values(), **opts)  # type: ignore[arg-type]
    return old, new


def test_summaries_rank_like_all_facts_on_random_fact_sets(db: KoDB) -> None:
    @settings(
        max_examples=300 if db.dialect == "sqlite" else 100,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        rows=fact_rows,
        hub=st.sampled_from((0, 0, 40)),
        n=st.integers(0, 4) | st.integers(1, 2),
        cap=st.integers(1, 4),
        evidence=evidence_maps,
        only=st.booleans(),
        crystal_only=st.booleans(),
        layer=st.sampled_from(LAYERS),
        stored=st.booleans(),
        question=questions,
    )
    def check(
        rows: list[tuple[str, ...]],
        hub: int,
        n: int,
        cap: int,
        evidence: dict[str, float],
        only: bool,
        crystal_only: bool,
        layer: str,
        stored: bool,
        question: tuple[tuple[str, ...], ...],
    ) -> None:
        tag = f"t{next(_examples)}"
        facts = _facts(rows, tag, hub)
        db.import_facts(facts)
        if not stored:
            _forget_stored_summaries(db)
        norms = [*sorted({f.subject_norm for f in facts}), f"absent {tag}"]
        view = _view(db, layer, norms)
        old, new = _both(
            view,
            norms,
            n=n,
            cap=cap,
            evidence=evidence,
            only=only,
            crystal_only=crystal_only,
            question=question,
        )
        assert new == old

    check()


def _forget_stored_summaries(db: KoDB) -> None:
    """Every summary computed from the facts again (as before the refresh of an upgrade)."""
    with db._tx(write=True) as conn:
        conn.execute(kodb_schema.subject_stats.delete())


def _stored_count(db: KoDB) -> int:
    with db._tx() as conn:
        return int(
            conn.execute(
                sa.select(sa.func.count()).select_from(kodb_schema.subject_stats)
            ).scalar_one()
        )


def test_every_subject_has_a_stored_summary_after_import_and_ingest(db: KoDB) -> None:
    facts = _facts([("Redis", "is", "x", 0.9, "wiki", "wiki/a.md", "import")], "stored", hub=30)
    db.import_facts(facts)
    assert _stored_count(db) == len(db.subject_norms()) == 1
    # An ingest that replaces a file's facts drops the summary with them and stores the new one.
    note = Note("wiki/h0.md", "H0", "wiki", "sha", 0.0, 1)
    changed = [Fact("Redis stored", "is", "new", 1.0, "wiki", "wiki/h0.md", "ingest")]
    changed.append(Fact("Kafka stored", "is", "k", 0.5, "wiki", "wiki/h0.md", "ingest"))
    db.apply_ingest([(note, changed)], [], extractor="ingest")
    assert _stored_count(db) == len(db.subject_norms()) == 2
    norms = sorted(db.subject_norms())
    old, new = _both(
        db, [*norms, "absent"], n=3, cap=3, evidence={}, only=False, crystal_only=False
    )
    assert new == old
    got = db.subject_summaries(["redis stored"], sample_size=0)["redis stored"]
    assert got.raw_facts == 23 and got.max_confidence == 1.0 and got.sample == ()
    # A removed note's facts leave the counts too.
    db.apply_ingest([], ["wiki/h0.md"], extractor="ingest")
    assert db.subject_summaries(["redis stored"], sample_size=0)["redis stored"].raw_facts == 22
    assert "kafka stored" not in db.subject_summaries(["kafka stored"], sample_size=1)


def _stored_rows(db: KoDB) -> dict[str, tuple[Any, ...]]:
    """Every stored summary, its sample's fact ids replaced by what orders them (equal
    facts may take either id)."""
    t, s = kodb_schema.facts, kodb_schema.subject_stats
    with db._tx() as conn:
        facts = {
            r.id: (-r.confidence, r.predicate, r.source_type, r.source_file, r.object, r.extractor)
            for r in conn.execute(sa.select(t))
        }
        rows = conn.execute(sa.select(s)).all()
    out = {}
    for r in rows:
        sample = [[n, [facts[i] for i in ids]] for n, ids in json.loads(r.sample)]
        counts = (r.source_count, r.raw_facts, r.max_confidence, r.per_type, r.predicates)
        out[r.subject_key] = (r.subject_norm, *counts, r.spellings, sample, r.sample_depth)
    return out


def test_ingest_stores_the_summaries_a_refresh_computes_from_the_facts(db: KoDB) -> None:
    """An ingest computes the summaries of subjects it alone has facts of from the rows in
    hand (others, with imported facts too, from the facts): a refresh of every subject from
    the stored facts gives the same rows."""

    @settings(
        max_examples=150 if db.dialect == "sqlite" else 50,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(rows=fact_rows, hub=st.sampled_from((0, 0, 40)), imported=st.integers(0, 5))
    def check(rows: list[tuple[str, ...]], hub: int, imported: int) -> None:
        tag = f"t{next(_examples)}"
        facts = _facts(rows, tag, hub)
        db.import_facts(facts[:imported])  # these subjects are summarised from the facts
        by_file: dict[str, list[Fact]] = {}
        for fact in facts[imported:]:
            by_file.setdefault(fact.source_file, []).append(fact)
        upserts = [
            (Note(path, path, "wiki", "sha", 0.0, 1), fs) for path, fs in sorted(by_file.items())
        ]
        db.apply_ingest(upserts, [], extractor="ingest")
        ingested = _stored_rows(db)
        _forget_stored_summaries(db)
        db.refresh_subject_stats()
        assert _stored_rows(db) == ingested

    check()


def test_a_refresh_stores_what_an_upgrade_left_without_summary(db: KoDB) -> None:
    db.import_facts(_facts([("Kafka", "is", "x", 0.9, "adr", "adr/c.md", "import")], "upgrade"))
    _forget_stored_summaries(db)
    assert db.refresh_subject_stats() == len(db.subject_norms())
    assert db.refresh_subject_stats() == 0


@pytest.mark.parametrize("stored", [True, False])
def test_evidence_files_crowding_the_stored_sample_are_answered_from_the_facts(
    db: KoDB, stored: bool
) -> None:
    """The stored list holds a partition's best 8 facts; when the question's files hold all
    of them, the best facts of the other files lie beyond it."""
    hot = [Fact("Hub crowd", "is", f"hot{i}", 1.0, "wiki", f"wiki/hot{i}.md") for i in range(10)]
    cold = [Fact("Hub crowd", "is", f"cold{i}", 0.5, "wiki", "wiki/cold.md") for i in range(5)]
    db.import_facts([*hot, *cold])
    if not stored:
        _forget_stored_summaries(db)
    evidence = {f"wiki/hot{i}.md": 0.5 for i in range(8)}
    for n in (1, 3, 4):
        old, new = _both(
            db,
            ["hub crowd", "x", "y"],
            n=n,
            cap=3,
            evidence=evidence,
            only=False,
            crystal_only=False,
        )
        assert new == old
    got = db.subject_summaries(["hub crowd"], sample_size=3, evidence_files=evidence)
    assert {f.object for f in got["hub crowd"].sample} >= {"hot8", "hot9", "cold0"}


def test_private_files_beyond_the_bound_fall_back_to_public_facts(
    db: KoDB, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = [
        ("Redis", "is", "x", 0.9, "wiki", "private/p.md", "import"),
        ("Redis", "is", "y", 0.5, "wiki", "wiki/a.md", "import"),
        ("Redis", "title", "Redis", 1.0, "adr", "private/q.md", "import"),
        ("redis", "title", "x", 0.1, "adr", "adr/c.md", "import"),
    ]
    facts = _facts(rows, "fallback")
    db.import_facts(facts)
    norms = sorted({f.subject_norm for f in facts})
    view = PublicKodb(db, PRIVATE)
    monkeypatch.setattr(kodb_facts, "MAX_EXCLUDED_FILES", 1)
    for only in (False, True):
        old, new = _both(
            view, norms, n=3, cap=2, evidence={"wiki/a.md": 0.8}, only=only, crystal_only=False
        )
        assert new == old
        assert all(not f.source_file.startswith("private/") for s in new for f in s.facts)  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="at most 1 excluded"):
        db.subject_summaries(norms, sample_size=1, exclude_files=["a", "b"])


@pytest.mark.parametrize("n", [1, 2])
def test_title_facts_restating_the_name_do_not_crowd_out_other_titles(db: KoDB, n: int) -> None:
    rows = [
        ("Redis", "title", "Redis", 1.0, "wiki", "wiki/a.md", "import"),
        ("Redis", "title", "Redis", 1.0, "wiki", "wiki/b.md", "import"),
        ("Redis", "title", "redis", 0.9, "wiki", "wiki/b.md", "import"),
        ("Redis", "title", "x", 0.1, "wiki", "wiki/c.md", "import"),
        ("Redis", "title", "y", 0.1, "wiki", "wiki/c.md", "import"),
    ]
    facts = _facts(rows, f"restate{n}")
    db.import_facts(facts)
    norms = [facts[0].subject_norm]
    old, new = _both(db, norms, n=n, cap=3, evidence={}, only=False, crystal_only=False)
    assert new == old
    assert [f.object for f in new[0].facts] == ["x", "y"][:n]  # type: ignore[attr-defined]


def test_confidence_ties_go_to_the_file_then_the_object(db: KoDB) -> None:
    rows = [
        ("Redis", "is", "a", 0.5, "wiki", "wiki/z.md", "import"),
        ("Redis", "is", "b", 0.5, "wiki", "wiki/y.md", "import"),
        ("Redis", "is", "c", 0.5, "wiki", "wiki/x.md", "import"),
        ("Redis", "is", "d", 0.5, "wiki", "wiki/x.md", "ingest"),
    ]
    facts = _facts(rows, "ties")
    db.import_facts(facts)
    old, new = _both(
        db, [facts[0].subject_norm], n=2, cap=3, evidence={}, only=False, crystal_only=False
    )
    assert new == old
    assert [f.object for f in new[0].facts] == ["c", "d"]  # type: ignore[attr-defined]


def test_sample_is_bounded_by_partitions_not_by_facts(db: KoDB) -> None:
    """10,000 facts of one predicate in one file: a sample of n rows, exact counts."""
    facts = [
        Fact("Hub", "has_value", f"v{i}", (i % 100) / 100, "wiki", "wiki/hub.md")
        for i in range(10_000)
    ]
    db.import_facts(facts)
    got = db.subject_summaries(["hub"], sample_size=3, evidence_files=["wiki/hub.md"])["hub"]
    assert got.raw_facts == 10_000 and got.predicates == {"has_value": 10_000}
    assert got.source_count == 1 and got.per_type == {"wiki": 1}
    assert got.max_confidence == 0.99 and got.spellings == {"Hub": 10_000}
    assert len(got.sample) == 3
    assert all(f.confidence == 0.99 for f in got.sample)


def _statements(db: KoDB) -> list[str]:
    """The SQL statements ``db`` runs from now on (appended as they run)."""
    ran: list[str] = []

    @sa.event.listens_for(db._engine, "before_cursor_execute")
    def _record(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        ran.append(statement)

    return ran


def test_a_stored_sample_of_over_a_thousand_facts_is_read_in_one_statement(db: KoDB) -> None:
    """1,500 partitions (one fact each): every id of the stored lists goes to the database
    as one JSON parameter, and the ranking still equals the one on all facts."""
    facts = [
        Fact("Wide", f"p{i:04}", f"x{i}", (i % 10) / 10, "wiki", f"wiki/w{i % 50}.md")
        for i in range(1500)
    ]
    db.import_facts(facts)
    ran = _statements(db)
    evidence = {"wiki/w1.md": 0.9, "wiki/w2.md": 0.4}
    got = db.subject_summaries(["wide"], sample_size=3, evidence_files=evidence)["wide"]
    assert len(got.sample) == 1500
    by_id = [s for s in ran if "json_each" in s or "json_array_elements_text" in s]
    assert len(by_id) == 1, ran
    old, new = _both(
        db, ["wide", "x", "y"], n=3, cap=3, evidence=evidence, only=False, crystal_only=False
    )
    assert new == old


def test_an_answers_evidence_is_looked_up_by_file_and_subject_in_the_facts_index(
    db: KoDB,
) -> None:
    """A hub subject's 8,000 facts spread over 400 files, and two of those files as the
    question's: the evidence statement reads the (file, subject key) index, neither all of
    the hub's facts nor every fact of the files."""
    files = [f"wiki/h{i}.md" for i in range(400)]
    hub = [Fact("Hub", "has_value", f"v{i}", 0.5, "wiki", files[i % 400]) for i in range(8000)]
    rest = [Fact(f"S{i}", "is", "x", 0.5, "wiki", files[i % 400]) for i in range(8000)]
    db.import_facts([*hub, *rest])
    db.analyze()
    evidence = files[1:3]
    where = summaries.evidence_where(evidence, [subject_key("hub"), subject_key("s1")])
    stmt = summaries.sample_select(where, 3, evidence, db.sql_dialect.code_point, ["hub", "s1"])
    compiled = stmt.compile(dialect=db._engine.dialect, compile_kwargs={"literal_binds": True})
    prefix = "EXPLAIN QUERY PLAN " if db.dialect == "sqlite" else "EXPLAIN "
    with db._tx() as conn:
        plan = "\n".join(
            " ".join(map(str, r)) for r in conn.exec_driver_sql(prefix + str(compiled))
        )
        got = summaries.sample(conn, where, 3, evidence, db.sql_dialect.code_point, ["hub", "s1"])
    assert kodb_schema.FILE_INDEX in plan, plan
    assert sorted((f.subject, f.source_file) for f in got) == sorted(
        [("Hub", f) for f in evidence for _ in range(3)] + [("S1", "wiki/h1.md")]
    )


def test_a_warm_memo_reads_only_the_questions_own_files_for_a_sample_read_before(
    db: KoDB,
) -> None:
    """The service's memo keeps the stored rows and sample facts it has read: a second
    question about the same subjects reads neither again (only its own files' facts), and
    ranks exactly as the store does."""
    facts = [
        Fact("Wide", f"p{i:03}", f"x{i}", (i % 10) / 10, "wiki", f"wiki/w{i % 50}.md")
        for i in range(300)
    ]
    db.import_facts(facts)
    memo = CachedKodb(db)
    memo.subject_summaries(["wide"], sample_size=3, evidence_files={"wiki/w1.md": 0.9})
    ran = _statements(db)
    evidence = {"wiki/w2.md": 0.8, "wiki/w3.md": 0.4}
    got = memo.subject_summaries(["wide"], sample_size=3, evidence_files=evidence)
    assert not [s for s in ran if "json_each" in s or "json_array_elements_text" in s], ran
    assert not [s for s in ran if "subject_stats" in s], ran
    reads = [s for s in ran if s.lstrip().upper().startswith("SELECT")]
    assert len(reads) == 1, ran  # the evidence: the facts of wiki/w2.md and wiki/w3.md
    assert got == db.subject_summaries(["wide"], sample_size=3, evidence_files=evidence)
    old, new = _both(
        memo, ["wide", "x"], n=3, cap=3, evidence=evidence, only=False, crystal_only=False
    )
    assert new == old


def test_a_list_crowded_by_the_questions_files_keeps_its_stored_counts(db: KoDB) -> None:
    """The question's file holds the best 10 facts of a 40-fact list (stored: its first
    8): the sample comes from the subject's facts, the counts from the stored row (no
    GROUP BY), and the ranking equals the one on all facts."""
    mine = [Fact("Crowd", "is", f"m{i}", 1.0, "wiki", "wiki/mine.md") for i in range(10)]
    rest = [Fact("Crowd", "is", f"o{i}", 0.5, "wiki", f"wiki/o{i}.md") for i in range(30)]
    db.import_facts([*mine, *rest])
    evidence = {"wiki/mine.md": 0.8}
    ran = _statements(db)
    got = db.subject_summaries(["crowd"], sample_size=3, evidence_files=evidence)["crowd"]
    assert not [s for s in ran if "GROUP BY" in s.upper()], ran
    assert got.raw_facts == 40 and got.source_count == 31
    assert {f.source_file for f in got.sample} - {"wiki/mine.md"}  # the other files' best
    old, new = _both(
        db, ["crowd", "x", "y"], n=3, cap=3, evidence=evidence, only=False, crystal_only=False
    )
    assert new == old
