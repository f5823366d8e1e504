"""The service's resident copy of KO-DB's facts (``kodb/resident.py``) against the store.

On a real SQLite file and a real PostgreSQL database: the copy's subject search equals the
store's and ``reference_search``; its files' subjects and counts equal the store's; ranked
answers from its samples equal ranking on every fact, also where a partition needs more
than its first fact; private notes' facts are left out the way ``PublicKodb`` leaves them.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.kodb import KoDB, reference_search
from pipeline.kodb.resident import ResidentKodb
from pipeline.model import SOURCE_TYPES, Candidate, Fact, Note
from pipeline.privacy import PrivateNotes, PublicKodb
from pipeline.rank import rank_subjects, rank_summaries

pytestmark = pytest.mark.integration

PRIVATE = PrivateNotes(("private/**",))
_examples = itertools.count()


@pytest.fixture
def db(kodb_url: str) -> Iterator[KoDB]:
    with KoDB.open(kodb_url) as store:
        yield store


def _fact(subject: str, predicate: str = "is", obj: str = "x", **kw: object) -> Fact:
    values: dict[str, object] = {
        "confidence": 0.5,
        "source_type": "wiki",
        "source_file": "wiki/a.md",
        "extractor": "import",
    }
    values.update(kw)
    return Fact(subject, predicate, obj, **values)  # type: ignore[arg-type]


def _ranked(
    view: object,
    facts_view: object,
    norms: list[str],
    n: int,
    evidence: dict,
    question: tuple[tuple[str, ...], ...] = (),
) -> tuple:
    """(ranking on every fact, ranking on the view's summaries) of the same subjects."""
    candidates = {s: Candidate(s, "own", 0.6, None) for s in norms}
    opts = {
        "top_k": 50,
        "facts_per_subject": n,
        "facts_per_predicate_cap": 3,
        "candidates": candidates,
        "evidence_files": evidence,
        "question": question,
    }
    old = rank_subjects(facts_view.facts_for_subjects(norms), **opts)  # type: ignore[attr-defined]
    found = view.subject_summaries(norms, sample_size=n, evidence_files=evidence)  # type: ignore[attr-defined]
    return old, rank_summaries(found.values(), **opts)


_CHARS = "aábcdeéőűöüsz z__%%''\"\\.-,ŐÉ1"
_EXOTIC = "\ue000+²ǅ\u0301\u200d٣ßİﬁ"
_WORDS = ["warm", "warmstart", "cache", "őrző", "gyorsítótár", "50%", "a_b", "it's", "c\\d"]


def _random_subject(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(1, 4)):
        if rng.random() < 0.5:
            parts.append(rng.choice(_WORDS))
        else:
            chars = _CHARS + _EXOTIC if rng.random() < 0.3 else _CHARS
            parts.append("".join(rng.choice(chars) for _ in range(rng.randint(1, 8))))
    text = rng.choice([" ", "", "-", "_", ", "]).join(parts)
    return text.upper() if rng.random() < 0.2 else text


def test_resident_search_equals_the_store_and_the_reference(db: KoDB) -> None:
    rng = random.Random(20261203)
    subjects = [_random_subject(rng) for _ in range(1200)]
    db.import_facts([_fact(s, source_file=f"f{i % 40}.md") for i, s in enumerate(subjects)])
    resident = ResidentKodb(db, db.resident_copy())
    norms = db.subject_norms()
    terms = []
    for _ in range(400):
        roll = rng.random()
        if roll < 0.5:  # a piece of a real subject
            s = rng.choice(subjects)
            i = rng.randrange(len(s))
            terms.append(s[i : i + rng.choice([1, 2, 3, 5, 12, 40])])
        elif roll < 0.75:
            terms.append(rng.choice(_WORDS).upper())
        else:
            terms.append("".join(rng.choice(_CHARS + _EXOTIC) for _ in range(rng.randint(1, 6))))
    terms = [t for t in terms if t.strip()] + ["+++", "%", "\x00x"]
    got = resident.search_subjects_many(terms)
    assert got == db.search_subjects_many(terms)
    assert all(got[t] == reference_search(t, norms) for t in terms if "\x00" not in t)
    assert sum(bool(v) for v in got.values()) > 100  # matches, not only misses
    assert resident.search_subjects_many(["warm"], limit=1) == db.search_subjects_many(
        ["warm"], limit=1
    )


def test_resident_counts_and_files_subjects_equal_the_store(db: KoDB) -> None:
    rng = random.Random(5)
    spellings = ("Redis", "REDIS", "redis", "Kafka", "Straße", "STRASSE", "café", "cafe\u0301")
    facts = [
        _fact(
            rng.choice(spellings),
            rng.choice(("is", "title", "has_value", "ä")),
            rng.choice(("x", "Redis", "y", "")),
            confidence=rng.choice((0.0, 0.5, 0.9, 1.0)),
            source_type=rng.choice(SOURCE_TYPES),
            source_file=rng.choice(("wiki/a.md", "adr/b.md", "sessions/c.md", "Wiki/a.md")),
            extractor=rng.choice(("import", "ingest")),
        )
        for _ in range(400)
    ]
    db.import_facts(facts)
    resident = ResidentKodb(db, db.resident_copy())
    norms = [*db.subject_norms(), "absent"]
    assert resident.subject_summaries(norms, sample_size=0) == db.subject_summaries(
        norms, sample_size=0
    )
    paths = ["wiki/a.md", "adr/b.md", "Wiki/a.md", "missing.md"]
    assert resident.subjects_by_source_file(paths) == db.subjects_by_source_file(paths)
    assert resident.subjects_for_source_files(paths) == db.subjects_for_source_files(paths)


#: Few predicates and files, many facts a partition: second and third facts of a
#: partition matter (a subject with fewer predicates than facts shown).
few_predicate_rows = st.lists(
    st.tuples(
        st.sampled_from(("Hub", "hub", "Other")),
        st.sampled_from(("is", "is", "has", "title", "decision", "mentioned_in")),
        st.sampled_from(("a", "b", "Hub", "hub", "c")),
        st.sampled_from((0.2, 0.5, 0.5, 0.9)),
        st.sampled_from(SOURCE_TYPES),
        st.sampled_from(("wiki/a.md", "wiki/b.md", "adr/c.md", "sessions/d.md", "private/p.md")),
        st.sampled_from(("import", "ingest")),
    ),
    min_size=1,
    max_size=40,
)


def test_resident_samples_rank_like_all_facts_when_partitions_need_more_facts(
    db: KoDB,
) -> None:
    @settings(
        max_examples=150 if db.dialect == "sqlite" else 60,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        rows=few_predicate_rows,
        n=st.integers(1, 4),
        evidence=st.dictionaries(
            st.sampled_from(("wiki/a.md", "wiki/b.md", "adr/c.md", "private/p.md")),
            st.sampled_from((0.3, 0.7, 0.7)),
            max_size=3,
        ),
        public=st.booleans(),
    )
    def check(rows: list[tuple], n: int, evidence: dict, public: bool) -> None:
        tag = f"r{next(_examples)}"
        facts = [
            Fact(f"{s} {tag}", p, f"{o} {tag}" if o.lower() == "hub" else o, c, t, f, e)
            for s, p, o, c, t, f, e in rows
        ]
        db.import_facts(facts)
        norms = sorted({f.subject_norm for f in facts})
        if public:
            base = PublicKodb(db, PRIVATE)
            view = ResidentKodb(base, db.resident_copy(PRIVATE.is_private), PRIVATE.is_private)
        else:
            base, view = db, ResidentKodb(db, db.resident_copy())
        old, new = _ranked(view, base, norms, n, evidence)
        assert new == old

    check()


def test_a_partition_of_one_predicate_shows_its_second_and_third_facts(db: KoDB) -> None:
    facts = [
        _fact("Solo", "is", f"o{i}", confidence=1.0 - i / 10, source_file=f"wiki/{i}.md")
        for i in range(5)
    ]
    db.import_facts(facts)
    resident = ResidentKodb(db, db.resident_copy())
    got = resident.subject_summaries(["solo"], sample_size=3, evidence_files={"wiki/0.md": 0.5})
    old, new = _ranked(resident, db, ["solo"], 3, {"wiki/0.md": 0.5})
    assert new == old
    assert [f.object for f in new[0].facts] == ["o0", "o1", "o2"]  # type: ignore[attr-defined]
    assert {f.object for f in got["solo"].sample} >= {"o0", "o1", "o2"}


def test_private_facts_stay_out_and_a_subject_only_they_state_is_not_found(db: KoDB) -> None:
    db.import_facts(
        [
            _fact("Secret project", source_file="private/p.md"),
            _fact("Redis", "is", "public", source_file="wiki/a.md"),
            _fact("Redis", "is", "hidden", source_file="private/p.md", confidence=1.0),
        ]
    )
    public = PublicKodb(db, PRIVATE)
    resident = ResidentKodb(public, db.resident_copy(PRIVATE.is_private), PRIVATE.is_private)
    assert resident.search_subjects_many(["secret", "redis"]) == {"secret": [], "redis": ["redis"]}
    assert public.search_subjects_many(["secret", "redis"]) == {"secret": [], "redis": ["redis"]}
    assert resident.subject_summaries(["secret project"], sample_size=3) == {}
    got = resident.subject_summaries(["redis"], sample_size=3)
    assert got == public.subject_summaries(["redis"], sample_size=3)
    assert [f.object for f in got["redis"].sample] == ["public"]
    paths = ["private/p.md", "wiki/a.md"]
    assert resident.subjects_by_source_file(paths) == public.subjects_by_source_file(paths)
    assert "private/p.md" not in resident.subjects_by_source_file(paths)


def test_an_empty_kodb_gives_an_empty_copy(db: KoDB) -> None:
    data = db.resident_copy()
    resident = ResidentKodb(db, data)
    assert data.facts == 0
    assert resident.search_subjects_many(["redis"]) == {"redis": []}
    assert resident.subject_summaries(["redis"], sample_size=3) == {}
    assert resident.subjects_by_source_file(["a.md"]) == {"a.md": set()}


def test_summaries_restricted_to_some_files_go_to_the_base(db: KoDB) -> None:
    db.import_facts(
        [_fact("Redis", source_file="wiki/a.md"), _fact("Redis", "has", "y", source_file="b.md")]
    )
    resident = ResidentKodb(db, db.resident_copy())
    for kw in ({"only_files": ["b.md"]}, {"exclude_files": ["b.md"]}):
        got = resident.subject_summaries(["redis"], sample_size=2, **kw)  # type: ignore[arg-type]
        assert got == db.subject_summaries(["redis"], sample_size=2, **kw)  # type: ignore[arg-type]
        assert got["redis"].raw_facts == 1


#: Several predicates in every source type: each type holds a partition per predicate, so
#: the copy keeps only each type's first partitions (``ResidentKodb._reachable``).
rich_rows = st.lists(
    st.tuples(
        st.sampled_from(
            ("p1", "p2", "decision", "summary", "mentioned_in", "context", "lead", "owner")
        ),
        st.sampled_from(SOURCE_TYPES),
        st.sampled_from((0.3, 0.5, 0.5, 0.9)),
        st.sampled_from(("wiki/a.md", "wiki/b.md", "adr/c.md", "sessions/d.md")),
        st.sampled_from(("x", "y")),
    ),
    min_size=6,
    max_size=40,
)


def test_resident_samples_rank_like_all_facts_when_every_type_has_many_predicates(
    db: KoDB,
) -> None:
    @settings(
        max_examples=150 if db.dialect == "sqlite" else 60,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        rows=rich_rows,
        n=st.integers(1, 3),
        evidence=st.dictionaries(
            st.sampled_from(("wiki/a.md", "adr/c.md")), st.sampled_from((0.3, 0.7)), max_size=1
        ),
        question=st.sampled_from(((), (("lead", "leads"),), (("own", "owns"), ("cont",)))),
    )
    def check(rows: list[tuple], n: int, evidence: dict, question: tuple) -> None:
        tag = f"rich{next(_examples)}"
        facts = [
            _fact(f"Hub {tag}", p, o, confidence=c, source_type=t, source_file=f)
            for p, t, c, f, o in rows
        ]
        db.import_facts(facts)
        resident = ResidentKodb(db, db.resident_copy())
        old, new = _ranked(resident, db, [f"hub {tag}"], n, evidence, question)
        assert new == old

    check()


def test_a_hit_notes_predicate_named_by_the_question_is_in_the_copys_sample(db: KoDB) -> None:
    # Three better "other property" facts in the hit note: the copy kept only the first
    # three of the class, so the lead the question asks for was missing from its sample.
    hit = "wiki/billing.md"
    db.import_facts(
        [
            *(_fact("Billing", p, "v", confidence=0.9, source_file=hit) for p in ("tier", "plan")),
            _fact("Billing", "region", "eu", confidence=0.9, source_file=hit),
            _fact("Billing", "lead", "Ann", confidence=0.5, source_file=hit),
        ]
    )
    resident = ResidentKodb(db, db.resident_copy())
    old, new = _ranked(resident, db, ["billing"], 3, {hit: 0.8}, (("lead", "leads"),))
    assert new == old
    assert [f.predicate for f in new[0].facts] == ["lead", "plan", "region"]  # type: ignore[attr-defined]


def test_the_third_fact_comes_from_a_third_type_and_a_third_predicate(db: KoDB) -> None:
    """wiki holds the best facts under p1..p3; session and adr the same predicates with
    less confidence: the picks are wiki/p1, session/p2, adr/p3."""
    confidence = {"wiki": 0.9, "session": 0.5, "adr": 0.4}
    db.import_facts(
        [
            _fact("Spread", p, f"{t}-{p}", confidence=c, source_type=t, source_file=f"{t}.md")
            for t, c in confidence.items()
            for p in ("p1", "p2", "p3")
        ]
    )
    resident = ResidentKodb(db, db.resident_copy())
    old, new = _ranked(resident, db, ["spread"], 3, {})
    assert new == old
    assert [f.object for f in new[0].facts] == ["wiki-p1", "session-p2", "adr-p3"]  # type: ignore[attr-defined]


def _note(path: str, source_type: str = "wiki") -> Note:
    return Note(path, path.rsplit("/", 1)[-1].removesuffix(".md"), source_type, "h", 1.0, 10)  # type: ignore[arg-type]


def test_the_registry_is_answered_from_the_copy_as_the_store_answers_it(db: KoDB) -> None:
    notes = [
        _note("wiki/a.md"),
        _note("adr/b.md", "adr"),
        _note("sessions/c.md", "session"),
        _note("private/p.md"),
    ]
    db.apply_ingest([(n, [_fact("Redis", source_file=n.path)]) for n in notes], [])
    for private in (None, PRIVATE):
        base = db if private is None else PublicKodb(db, private)
        is_private = None if private is None else private.is_private
        resident = ResidentKodb(base, db.resident_copy(is_private), is_private)
        assert resident.notes() == base.notes()
        paths = ["wiki/a.md", "private/p.md", "missing.md", "adr/b.md"]
        assert resident.notes_at(paths) == base.notes_at(paths)
        for kind in (None, "wiki", "adr", "session"):
            assert resident.count_notes(kind) == base.count_notes(kind)
    assert "private/p.md" not in ResidentKodb(db, db.resident_copy(PRIVATE.is_private)).notes()
