"""KoDB on a real SQLite file and a real PostgreSQL database (the `kodb_url` fixture)."""

from __future__ import annotations

import random
import time
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.errors import ConfigError, InputError, KodbError
from pipeline.kodb import SCHEMA_VERSION, ImportResult, KoDB, reference_search, scratch_database
from pipeline.kodb import schema as kodb_schema
from pipeline.kodb import summaries as kodb_summaries
from pipeline.kodb import text as kodb_text
from pipeline.kodb import writes as kodb_writes
from pipeline.model import Calibration, Fact, Note, NoteStamp, NoteText

pytestmark = pytest.mark.integration


#: Text PostgreSQL can store (no NUL) and Python can encode (no lone surrogates).
_TEXT = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")

#: A PostgreSQL URL that is never connected to (the prefix is refused first).
PG_URL = "postgresql+psycopg://postgres@127.0.0.1:1/none"


def fact(subject: str, source_file: str = "wiki/a.md", **kw: object) -> Fact:
    values: dict[str, object] = {
        "predicate": "is",
        "object": "x",
        "confidence": 0.5,
        "source_type": "wiki",
        "extractor": "import",
    }
    values.update(kw)
    return Fact(subject=subject, source_file=source_file, **values)  # type: ignore[arg-type]


def note(path: str, content_hash: str = "h1") -> Note:
    return Note(
        path=path,
        title=Path(path).stem,
        source_type="wiki",
        content_hash=content_hash,
        mtime=1.0,
        bytes=10,
    )


@pytest.fixture
def db(kodb_url: str) -> KoDB:
    with KoDB.open(kodb_url) as store:
        yield store


def test_open_creates_schema_records_migrations_and_reopens(kodb_url: str) -> None:
    with KoDB.open(kodb_url) as first:
        assert first.dialect in ("sqlite", "postgresql")
        assert first.schema_versions() == [m.version for m in kodb_schema.MIGRATIONS]
        first.import_facts([fact("Redis")])
    with KoDB.open(kodb_url) as again:  # no migration runs twice; data kept
        assert again.schema_versions()[-1] == SCHEMA_VERSION
        assert again.count_facts() == 1


def test_sqlite_parent_directory_is_created(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'deep' / 'state' / 'ko.db'}"
    with KoDB.open(url) as store:
        assert store.count_facts() == 0
    assert (tmp_path / "deep" / "state" / "ko.db").is_file()


def test_sqlite_ingest_writes_get_the_large_page_cache_and_others_the_default(
    tmp_path: Path,
) -> None:
    from pipeline.kodb.dialects import sqlite as kodb_sqlite

    def cache(store: KoDB, write: bool, ingest: bool = False) -> int:
        with store._tx(write=write, ingest=ingest) as conn:
            return int(conn.exec_driver_sql("PRAGMA cache_size").scalar_one())

    with KoDB.open(f"sqlite:///{tmp_path / 'ko.db'}") as store:
        assert cache(store, write=True, ingest=True) == -kodb_sqlite.INGEST_CACHE_KIB
        # The same pooled connection, used next: back to the small cache.
        assert cache(store, write=False) == -kodb_sqlite.CACHE_KIB
        assert cache(store, write=True, ingest=True) == -kodb_sqlite.INGEST_CACHE_KIB
        assert cache(store, write=True) == -kodb_sqlite.CACHE_KIB
        store.apply_ingest([(note("wiki/a.md"), [fact("Redis")])], removed=[])
        store.import_facts([fact("Kafka")])
        assert store.count_facts() == 2


def test_database_migrated_by_a_newer_version_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ko.db'}"
    KoDB.open(url).close()
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(
            kodb_schema.migrations_table.insert().values(
                version=SCHEMA_VERSION + 1, name="future", applied_at=time.time()
            )
        )
    engine.dispose()
    with pytest.raises(KodbError, match="newer"):
        KoDB.open(url)


def test_an_unreachable_url_raises_kodb_error() -> None:
    with pytest.raises(KodbError):
        KoDB.open("postgresql+psycopg://postgres@127.0.0.1:1/none")


@pytest.mark.parametrize("url", ["mysql://u@h/db", "not a url"])
def test_a_url_that_is_no_kodb_url_is_a_setting_to_mend(url: str) -> None:
    with pytest.raises(ConfigError) as info:
        KoDB.open(url)
    assert info.value.exit_code == 3


def test_scratch_database_is_new_and_dropped_even_with_connections_open(
    pg_server_url: str,
) -> None:
    with scratch_database(pg_server_url, "vaultko_scratch_test") as url:
        assert url != pg_server_url
        store = KoDB.open(url)  # its pooled connection is still open at the drop
        store.import_facts([fact("Redis")])
        assert store.count_facts() == 1
    store.close()
    with pytest.raises(KodbError, match="does not exist"):
        KoDB.open(url)


@pytest.mark.parametrize(
    ("url", "prefix", "refused"),
    [
        ("sqlite:///x.db", "vaultko", KodbError),
        ("not a url", "vaultko", ConfigError),
        (PG_URL, "Bad-Name", KodbError),
    ],
)
def test_scratch_database_refuses_other_backends_and_bad_prefixes(
    url: str, prefix: str, refused: type[Exception]
) -> None:
    with pytest.raises(refused), scratch_database(url, prefix):
        pass


def test_import_is_idempotent_and_counts_existing(db: KoDB) -> None:
    facts = [fact("Redis"), fact("Kafka"), fact("Redis")]  # the last repeats the first
    assert db.import_facts(facts) == ImportResult(inserted=2, existing=1)
    assert db.import_facts(facts) == ImportResult(inserted=0, existing=3)
    assert db.count_facts() == 2
    assert db.subject_norms() == ["kafka", "redis"]


def test_facts_keep_their_fields_and_extractor(db: KoDB) -> None:
    f = fact("Gyorsítótár Őrző", "sessions/s.md", confidence=0.75, source_type="session")
    f2 = fact("gyorsítótár őrző", "adr/1.md", extractor="mine", source_type="adr")
    db.import_facts([f, f2])
    assert db.facts_for_subjects(["gyorsítótár őrző"]) == sorted(
        [f, f2], key=lambda x: (x.predicate, x.object, x.source_file)
    )
    assert db.facts_for_subjects(["absent"]) == []


#: Text that a row encoding must carry unchanged: quotes, backslashes, JSON and array
#: syntax, control characters, line separators, astral and combining characters.
AWKWARD = 'a "quoted" \\ back\\slash {x,y} [1] NULL null \t tab\nline \u2028 ☃ 🧪 e\u0301'


def test_awkward_text_survives_the_bulk_insert_exactly(db: KoDB) -> None:
    facts = [
        fact(f"{AWKWARD} {i}", f"wiki/{AWKWARD}-{i}.md", object=AWKWARD, confidence=0.1 * i)
        for i in range(1, 4)
    ]
    db.apply_ingest(
        [(note("wiki/n.md"), facts)],
        [],
        extractor="import",
        texts=[NoteText("wiki/n.md", AWKWARD, AWKWARD)],
    )
    stored = db.facts_for_subjects(f.subject_norm for f in facts)
    assert sorted(stored, key=lambda f: f.confidence) == facts
    assert [f.confidence for f in stored] == [0.1 * i for i in range(1, 4)]  # bit for bit
    folded = kodb_text.index_text(AWKWARD)
    assert db.note_texts() == {"wiki/n.md": (folded, folded)}


def test_facts_for_many_subjects_uses_chunked_in_lists(db: KoDB) -> None:
    facts = [fact(f"subject {i}", f"f{i % 7}.md") for i in range(1300)]
    db.import_facts(facts)
    wanted = {f"subject {i}" for i in range(0, 1300, 2)}
    got = db.facts_for_subjects(wanted | {"nope"})
    assert {f.subject_norm for f in got} == wanted
    assert db.subjects_for_source_files(["f0.md"]) == {f"subject {i}" for i in range(0, 1300, 7)}
    by_file = db.subjects_by_source_file([f"f{i}.md" for i in range(7)] + ["none.md"])
    assert by_file["none.md"] == set()
    for i in range(7):
        assert by_file[f"f{i}.md"] == {f"subject {j}" for j in range(i, 1300, 7)}
    assert db.fact_source_files()["f0.md"] == len(range(0, 1300, 7))
    assert db.facts_by_predicate() == {"is": 1300}


@given(
    stored=st.lists(st.text(_TEXT, min_size=1, max_size=12), max_size=40, unique=True),
    wanted=st.lists(st.text(_TEXT, max_size=12), max_size=60),
)
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_one_of_matches_what_an_in_list_matches_with_one_statement_text(
    db: KoDB, stored: list[str], wanted: list[str]
) -> None:
    t = kodb_schema.notes
    with db._tx(write=True) as conn:
        conn.execute(t.delete())
        for path in stored:
            row = {"path": path, "title": "t", "source_type": "wiki", "content_hash": "h"}
            conn.execute(t.insert(), row | {"mtime": 1.0, "bytes": 1, "ingested_at": 1.0})
        picked = [*wanted, *stored[::3]]
        by_in = conn.execute(sa.select(t.c.path).where(t.c.path.in_(picked))).scalars()
        by_any = conn.execute(
            sa.select(t.c.path).where(db.sql_dialect.one_of(t.c.path, picked))
        ).scalars()
        assert sorted(by_any) == sorted(by_in) == sorted(set(stored) & set(picked))
        if db.dialect == "postgresql":  # one text whatever the count: psycopg parses it once
            texts = {
                str(
                    sa.select(t.c.path)
                    .where(db.sql_dialect.one_of(t.c.path, ["a"] * n))
                    .compile(conn)
                )
                for n in (1, 7, 500)
            }
            assert len(texts) == 1


def test_apply_ingest_replaces_only_its_extractors_facts(db: KoDB) -> None:
    imported = fact("Redis", "wiki/redis.md", predicate="owner", object="ops")
    db.import_facts([imported])
    n1 = note("wiki/redis.md")
    n2 = note("wiki/kafka.md")
    db.apply_ingest(
        [
            (n1, [fact("Redis", "wiki/redis.md", predicate="links_to", object="Kafka")]),
            (n2, [fact("Kafka", "wiki/kafka.md"), fact("Old subject", "wiki/kafka.md")]),
        ],
        removed=[],
    )
    assert set(db.notes()) == {"wiki/redis.md", "wiki/kafka.md"}
    assert db.count_facts() == 4
    # Re-ingest kafka.md with new content: its old ingest facts go, the subject row too.
    db.apply_ingest([(note("wiki/kafka.md", "h2"), [fact("Kafka", "wiki/kafka.md")])], [])
    assert db.notes()["wiki/kafka.md"].content_hash == "h2"
    assert "old subject" not in db.subject_norms()
    assert db.search_subjects("old") == []
    # Remove redis.md: its ingest facts and notes row go; the imported fact stays.
    db.apply_ingest([], removed=["wiki/redis.md"])
    assert set(db.notes()) == {"wiki/kafka.md"}
    remaining = db.facts_for_subjects(["redis"])
    assert remaining == [imported]
    assert db.search_subjects("redis") == ["redis"]
    ingested = db.facts_for_subjects(["kafka"])
    assert [f.extractor for f in ingested] == ["ingest"]


def test_apply_ingest_is_one_transaction(db: KoDB) -> None:
    db.apply_ingest([(note("a.md"), [fact("A", "a.md")])], [])
    bad = Fact("B", "is", "x", 7.0, "wiki", "b.md")  # violates the confidence check
    with pytest.raises(KodbError):
        db.apply_ingest([(note("b.md"), [bad])], removed=["a.md"])
    assert set(db.notes()) == {"a.md"}
    assert db.subject_norms() == ["a"]


@pytest.mark.parametrize("largest", [None, 2**63 - 1])
def test_sqlite_bulk_insert_knows_its_rows_ids_even_past_the_largest_rowid(
    tmp_path: Path, largest: int | None
) -> None:
    """SQLite's inserts take the rows past the largest id as theirs; once that id is
    2**63 - 1, SQLite picks unused ids at random and the insert asks RETURNING instead."""
    with KoDB.open(f"sqlite:///{tmp_path / 'ko.db'}") as db:
        db.import_facts([fact("Old", "wiki/old.md")])
        if largest is not None:
            with db._tx(write=True) as conn:
                conn.execute(kodb_schema.facts.update().values(id=largest))
        new = [fact("Redis", f"wiki/r{i}.md", object=f"v{i}", confidence=i / 10) for i in range(6)]
        db.apply_ingest([(note(f.source_file), [f]) for f in new], [], extractor="ingest")
        got = db.subject_summaries(["redis"], sample_size=8)["redis"]
        assert got.raw_facts == 6 and got.max_confidence == 0.5
        # The stored sample names the facts by id: the right ids bring back the right facts.
        assert sorted(got.sample, key=lambda f: f.object) == db.facts_for_subjects(["redis"])
        assert db.import_facts([fact("Kafka"), fact("Old", "wiki/old.md")]) == ImportResult(1, 1)
        assert db.count_facts() == 8


def test_notes_keep_their_subject_and_none_stays_none(db: KoDB) -> None:
    titled = replace(note("adr/0007-use-redis.md"), title="0007 Use Redis", subject="Redis ADR")
    db.apply_ingest([(titled, []), (note("wiki/plain.md"), [])], [])
    assert db.notes()["adr/0007-use-redis.md"] == titled
    assert db.notes()["wiki/plain.md"].subject is None
    db.apply_ingest([(replace(titled, subject="Warm cache ADR"), [])], [])
    assert db.notes()["adr/0007-use-redis.md"].subject == "Warm cache ADR"


def test_notes_dated_are_the_newest_in_the_days_asked_for_ties_by_path(db: KoDB) -> None:
    days = {"a.md": "2026-03-04", "b.md": "2026-03-25", "c.md": "2026-03-25", "d.md": "2026-04-01"}
    db.apply_ingest([(replace(note(p), date=d), []) for p, d in days.items()], [])
    db.apply_ingest([(note("undated.md"), [])], [])

    def dated(start: str | None, end: str, limit: int) -> list[str]:
        return [n.path for n in db.notes_dated(start, end, limit)]

    assert dated("2026-03-01", "2026-03-31", 10) == ["b.md", "c.md", "a.md"]  # both ends in
    assert dated(None, "2026-03-31", 2) == ["b.md", "c.md"]
    assert dated(None, "2026-12-06", 10) == ["d.md", "b.md", "c.md", "a.md"]  # never undated
    assert dated("2026-03-05", "2026-03-24", 10) == []
    assert db.notes_dated(None, "2026-04-01", 1)[0] == db.notes()["d.md"]  # the whole row


def test_word_shares_count_the_notes_holding_each_word_as_the_index_stems_it(db: KoDB) -> None:
    texts = {
        "a.md": "Caching the TSC minutes",
        "b.md": "the TSC cached node modules",
        "c.md": "TSC meeting about node",
        "d.md": "kafka",
    }
    db.apply_ingest(
        [(note(p), []) for p in texts],
        [],
        texts=[NoteText(p, "", t, "english") for p, t in texts.items()],
    )
    shares = db.word_shares(["tsc", "cache", "node_modules", "kafka", "redis"])
    assert shares == {
        "tsc": 0.75,
        "cache": 0.5,  # "caching", "cached": one stem
        "node_modules": 0.25,  # a compound is as rare as its rarest word
        "kafka": 0.25,
        "redis": 0.0,
    }


def test_note_stamps_are_each_notes_mtime_size_and_hash_as_the_registry_holds_them(
    db: KoDB,
) -> None:
    db.apply_ingest([(note("adr/0007-use-redis.md"), []), (note("wiki/plain.md"), [])], [])
    stamps = db.note_stamps()
    assert stamps == {p: NoteStamp(n.mtime, n.bytes, n.content_hash) for p, n in db.notes().items()}
    assert set(stamps) == {"adr/0007-use-redis.md", "wiki/plain.md"}


def test_fact_objects_lists_one_extractors_objects_of_given_predicates(db: KoDB) -> None:
    db.apply_ingest(
        [
            (
                note("wiki/a.md"),
                [
                    fact("A", "wiki/a.md", predicate="links_to", object="0007-use-redis"),
                    fact("A", "wiki/a.md", predicate="links_to", object="Kafka"),
                    fact("Kafka", "wiki/a.md", predicate="mentioned_in", object="A"),
                ],
            )
        ],
        [],
    )
    db.import_facts([fact("B", "wiki/b.md", predicate="links_to", object="Redis")])
    assert db.fact_objects(["links_to"]) == {
        ("wiki/a.md", "0007-use-redis"),
        ("wiki/a.md", "Kafka"),
    }
    assert db.fact_objects(["links_to"], extractor="import") == {("wiki/b.md", "Redis")}
    assert db.fact_objects(["superseded_by"]) == set()


def as_code_before_migration_7(patch: pytest.MonkeyPatch) -> None:
    """The code of a vault-ko before migration 7, which never wrote ``subject_stats`` nor
    ``subjects.words``."""
    patch.setattr(KoDB, "refresh_subject_stats", lambda self: 0)
    patch.setattr(kodb_writes, "refresh_stats", lambda conn, dialect: 0)
    patch.setattr(kodb_summaries, "invalidate", lambda conn, dialect, keys, chunk: None)
    patch.setattr(kodb_summaries, "store_whole", lambda conn, rows, ids, older, chunk: 0)
    as_code_before_migration_11(patch)

    def add_subjects(conn: Any, dialect: Any, subjects: dict[str, str]) -> None:
        s = kodb_schema.subjects_v1
        rows = [{"subject_key": k, "subject_norm": v} for k, v in sorted(subjects.items())]
        dialect.insert_rows(conn, s, rows, s.c.subject_key)

    patch.setattr(kodb_writes, "add_subjects", add_subjects)


def as_code_before_migration_11(patch: pytest.MonkeyPatch) -> None:
    """The code of a vault-ko before migration 11, which never wrote ``decisions`` nor
    (migration 12) ``notes.date`` nor (migration 13) the stemmer of a note's words."""
    from pipeline.kodb import decisions
    from pipeline.kodb import notes as kodb_notes
    from pipeline.kodb import text as kodb_text

    patch.setattr(decisions, "rebuild", lambda conn: 0)
    _registry_without(patch, {"date", "text_language", "private"})

    def texts_unstemmed(conn: Any, dialect: Any, texts: Any, removed: Any) -> None:
        t = kodb_schema.note_texts
        gone = list(dict.fromkeys([x.path for x in texts] + list(removed)))
        if gone:
            conn.execute(t.delete().where(t.c.path.in_(gone)))
        rows = [
            {
                "path": x.path,
                "title": kodb_text.index_text(x.title),
                "body": kodb_text.index_text(x.body),
            }
            for x in {x.path: x for x in texts}.values()
        ]
        dialect.insert_rows(conn, t, rows, None)

    patch.setattr(kodb_notes, "replace_texts", texts_unstemmed)
    _no_openings(patch)


def as_code_before_migration_15(patch: pytest.MonkeyPatch) -> None:
    """The code of a vault-ko before migration 15, which neither read nor wrote
    ``note_openings`` nor (migration 16) ``notes.private`` (a summary was a note's first
    paragraph of five words)."""
    _registry_without(patch, {"private"})
    _no_openings(patch)


def _registry_without(patch: pytest.MonkeyPatch, later: set[str]) -> None:
    """Registry writes and reads of an older vault-ko, without the ``later`` columns."""
    from pipeline.kodb import notes as kodb_notes

    upsert = kodb_notes.upsert_notes

    def upsert_without_later(conn: Any, dialect: Any, rows: Any) -> None:
        upsert(conn, dialect, [{k: v for k, v in r.items() if k not in later} for r in rows])

    patch.setattr(kodb_notes, "upsert_notes", upsert_without_later)

    def rows_without_later(conn: Any, paths: Any = None) -> dict[str, Note]:
        t = kodb_schema.notes
        stmt = sa.select(*[c for c in t.c if c.name not in later])
        if paths is not None:
            stmt = stmt.where(t.c.path.in_(sorted(set(paths))))
        made = {}
        for r in conn.execute(stmt):
            made[r.path] = Note(**{f.name: getattr(r, f.name, None) for f in fields(Note)})
        return made

    patch.setattr(kodb_notes, "all_notes", lambda conn: rows_without_later(conn))
    patch.setattr(kodb_notes, "notes_at", rows_without_later)


def _no_openings(patch: pytest.MonkeyPatch) -> None:
    """Ingest without ``note_openings``: no keys written, no template lines."""
    from pipeline import ingest
    from pipeline.kodb import notes as kodb_notes

    patch.setattr(kodb_notes, "replace_openings", lambda conn, dialect, openings, removed: None)

    def no_templates(
        settings: Any, kodb: Any, on_disk: Any, written: Any, *rest: Any
    ) -> tuple[dict[str, Any], set[str], list[Any]]:
        return dict(written), set(), []

    patch.setattr(ingest, "_shared_openings", no_templates)


def test_migration_11_fills_the_decisions_of_an_existing_database(
    kodb_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as patch:
        patch.setattr(kodb_schema, "MIGRATIONS", kodb_schema.MIGRATIONS[:10])
        as_code_before_migration_11(patch)
        with KoDB.open(kodb_url) as old:
            old.import_facts(
                [
                    fact(
                        "0006 Flags vendor",
                        "adr/0006.md",
                        predicate="adr_status",
                        object="superseded",
                    ),
                    fact(
                        "0014 Flags in-house",
                        "adr/0014.md",
                        predicate="supersedes",
                        object="0006 Flags vendor",
                    ),
                ]
            )
    with KoDB.open(kodb_url) as upgraded:
        assert 11 in upgraded.schema_versions()
        old_one = upgraded.succession().of("0006 flags vendor")
        assert old_one is not None and old_one.successor == "0014 Flags in-house"


def test_decisions_follow_every_write(db: KoDB) -> None:
    old, new = note("adr/0006.md"), note("adr/0014.md")
    db.apply_ingest(
        [
            (old, [fact("0006", "adr/0006.md", predicate="adr_status", object="accepted")]),
            (new, [fact("0014", "adr/0014.md", predicate="adr_status", object="accepted")]),
        ],
        [],
    )
    assert db.succession().of("0006").status == "current"  # type: ignore[union-attr]
    db.import_facts([fact("0014", "adr/0014.md", predicate="supersedes", object="0006")])
    got = db.succession().of("0006")
    assert got is not None and (got.status, got.successor) == ("superseded", "0014")
    assert got.path == "adr/0006.md" and got.successor_path == "adr/0014.md"
    db.apply_ingest([], ["adr/0006.md"])  # its note deleted: its facts and decision go
    assert db.succession().of("0006") is not None  # the import still says it was replaced
    assert db.succession().of("0006").path is None  # type: ignore[union-attr]


def test_migration_3_upgrades_a_schema_2_database_keeping_its_rows(
    kodb_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlalchemy as sa

    with monkeypatch.context() as patch:
        patch.setattr(kodb_schema, "MIGRATIONS", kodb_schema.MIGRATIONS[:2])
        as_code_before_migration_7(patch)
        with KoDB.open(kodb_url) as old:
            assert old.schema_versions() == [1, 2]
            old.import_facts([fact("Redis")])
    engine = sa.create_engine(kodb_url)
    try:
        with engine.begin() as conn:
            columns = {c["name"] for c in sa.inspect(conn).get_columns("notes")}
            assert "subject" not in columns  # a real schema-2 notes table
            conn.execute(
                kodb_schema.notes_v1.insert().values(
                    path="wiki/redis.md",
                    title="Redis",
                    source_type="wiki",
                    content_hash="h0",
                    mtime=1.0,
                    bytes=10,
                    ingested_at=1.0,
                )
            )
    finally:
        engine.dispose()

    with KoDB.open(kodb_url) as upgraded:
        assert upgraded.schema_versions() == [m.version for m in kodb_schema.MIGRATIONS]
        assert upgraded.schema_versions()[:3] == [1, 2, 3]
        assert upgraded.count_facts() == 1
        assert upgraded.notes()["wiki/redis.md"] == replace(
            note("wiki/redis.md", "h0"), title="Redis"
        )
        assert upgraded.notes()["wiki/redis.md"].subject is None
        with_subject = replace(note("wiki/redis.md", "h1"), subject="Redis")
        upgraded.apply_ingest([(with_subject, [])], [])
        assert upgraded.notes()["wiki/redis.md"] == with_subject
    with KoDB.open(kodb_url) as again:  # migration 3 is recorded and not run twice
        assert again.schema_versions() == [m.version for m in kodb_schema.MIGRATIONS]


def test_migration_4_adds_summary_and_extractor_version_as_null(
    kodb_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlalchemy as sa

    schema_3 = sa.MetaData()
    notes_v3 = sa.Table("notes", schema_3, *(c._copy() for c in kodb_schema.notes_v1.columns))
    notes_v3.append_column(sa.Column("subject", sa.Text, nullable=True))
    with monkeypatch.context() as patch:
        patch.setattr(kodb_schema, "MIGRATIONS", kodb_schema.MIGRATIONS[:3])
        with KoDB.open(kodb_url):
            pass
    engine = sa.create_engine(kodb_url)
    try:
        with engine.begin() as conn:
            columns = {c["name"] for c in sa.inspect(conn).get_columns("notes")}
            assert not {"summary", "extractor_version"} & columns  # a real schema-3 table
            conn.execute(
                notes_v3.insert().values(
                    path="wiki/redis.md",
                    title="Redis",
                    source_type="wiki",
                    content_hash="h0",
                    mtime=1.0,
                    bytes=10,
                    ingested_at=1.0,
                    subject="Redis",
                )
            )
    finally:
        engine.dispose()
    with KoDB.open(kodb_url) as upgraded:
        row = upgraded.notes()["wiki/redis.md"]
        assert (row.subject, row.summary, row.extractor_version) == ("Redis", None, None)
        written = replace(row, summary="An in-memory store.", extractor_version=2)
        upgraded.apply_ingest([(written, [])], [])
        assert upgraded.notes()["wiki/redis.md"] == written


def test_migration_8_fills_subject_words_and_search_finds_the_old_subjects(
    kodb_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlalchemy as sa

    names = ["Warm cache", "Redis warm-cache policy", "gyorsítótár_x", "C++ build", "Ő\u0301r"]
    with monkeypatch.context() as patch:
        patch.setattr(kodb_schema, "MIGRATIONS", kodb_schema.MIGRATIONS[:7])
        as_code_before_migration_7(patch)
        with KoDB.open(kodb_url) as old:
            old.import_facts([fact(n, f"wiki/{i}.md") for i, n in enumerate(names)])
    engine = sa.create_engine(kodb_url)
    try:
        with engine.begin() as conn:
            assert "words" not in {c["name"] for c in sa.inspect(conn).get_columns("subjects")}
    finally:
        engine.dispose()
    with KoDB.open(kodb_url) as upgraded:
        assert upgraded.schema_versions()[-1] == SCHEMA_VERSION
        with upgraded._tx() as conn:
            words = dict(conn.execute(sa.text("SELECT subject_norm, words FROM subjects")).all())
        assert words["redis warm-cache policy"] == "redis warm cache policy"
        assert words["c++ build"] == "c build"
        norms = upgraded.subject_norms()
        for term in ("warm", "warm cache", "cache", "c", "ő", "gyorsítótár", "x", "++"):
            assert upgraded.search_subjects(term) == reference_search(term, norms), term
        # The index finds by words; the match stays literal ("warm-cache" is not "warm cache").
        assert upgraded.search_subjects("warm cache") == ["warm cache"]
        assert upgraded.search_subjects("cache") == ["redis warm-cache policy", "warm cache"]
        upgraded.import_facts([fact("Warm cache tuning", "wiki/new.md")])  # the new code
        assert "warm cache tuning" in upgraded.search_subjects("warm cache")


def test_migration_9_indexes_the_words_of_a_schema_8_postgresql_database(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlalchemy as sa

    def word_index() -> list[str]:
        engine = sa.create_engine(pg_url)
        try:
            with engine.begin() as conn:
                stmt = "SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_subjects_words_gin'"
                return list(conn.exec_driver_sql(stmt).scalars())
        finally:
            engine.dispose()

    names = ["Warm cache", "Redis warm-cache policy", "gyorsítótár_x", "C++ build"]
    with monkeypatch.context() as patch:
        patch.setattr(kodb_schema, "MIGRATIONS", kodb_schema.MIGRATIONS[:8])
        as_code_before_migration_11(patch)
        with KoDB.open(pg_url) as old:
            old.import_facts([fact(n, f"wiki/{i}.md") for i, n in enumerate(names)])
    assert word_index() == []
    with KoDB.open(pg_url) as upgraded:
        assert upgraded.schema_versions()[-1] == SCHEMA_VERSION
        assert word_index() == [
            "CREATE INDEX ix_subjects_words_gin ON public.subjects "
            "USING gin (string_to_array(words, ' '::text))"
        ]
        norms = upgraded.subject_norms()
        for term in ("warm", "warm cache", "cache", "c", "gyorsítótár", "x", "++", "x_"):
            assert upgraded.search_subjects(term) == reference_search(term, norms), term
        upgraded.import_facts([fact("Warm cache tuning", "wiki/new.md")])
        assert upgraded.search_subjects("warm cache") == ["warm cache", "warm cache tuning"]


def test_migration_10_indexes_facts_by_file_and_subject_in_a_schema_9_database(
    kodb_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlalchemy as sa

    def file_indexes() -> dict[str, list[str]]:
        engine = sa.create_engine(kodb_url)
        try:
            with engine.begin() as conn:
                found = sa.inspect(conn).get_indexes("facts")
                return {
                    ix["name"]: ix["column_names"] for ix in found if "source_file" in ix["name"]
                }
        finally:
            engine.dispose()

    with monkeypatch.context() as patch:
        patch.setattr(kodb_schema, "MIGRATIONS", kodb_schema.MIGRATIONS[:9])
        as_code_before_migration_11(patch)
        with KoDB.open(kodb_url) as old:
            old.import_facts([fact("Redis", "wiki/a.md"), fact("Kafka", "wiki/a.md")])
            old.import_facts([fact("Redis", "wiki/b.md", predicate="uses")])
    # The layout before migration 10 (the table definition now carries the new index).
    engine = sa.create_engine(kodb_url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(f"DROP INDEX {kodb_schema.FILE_INDEX}")
            conn.exec_driver_sql(
                "CREATE INDEX ix_facts_source_file_extractor ON facts (source_file, extractor)"
            )
    finally:
        engine.dispose()
    assert file_indexes() == {"ix_facts_source_file_extractor": ["source_file", "extractor"]}
    with KoDB.open(kodb_url) as upgraded:
        assert upgraded.schema_versions()[-1] == SCHEMA_VERSION
        assert file_indexes() == {
            kodb_schema.FILE_INDEX: ["source_file", "subject_key", "extractor"]
        }
        got = upgraded.subject_summaries(
            ["redis"], sample_size=3, evidence_files={"wiki/b.md": 0.9}
        )["redis"]
        assert [(f.predicate, f.source_file) for f in got.sample] == [
            ("is", "wiki/a.md"),
            ("uses", "wiki/b.md"),
        ]
        # Ingest's deletes by file and extractor still find their rows, and only theirs.
        upgraded.apply_ingest([(note("wiki/a.md"), [fact("Zinc", "wiki/a.md")])], [])
        assert upgraded.subjects_by_source_file(["wiki/a.md"]) == {
            "wiki/a.md": {"redis", "kafka", "zinc"}
        }
        upgraded.apply_ingest([(note("wiki/a.md", "h2"), [])], [])
        assert upgraded.subjects_by_source_file(["wiki/a.md"]) == {"wiki/a.md": {"redis", "kafka"}}


def _pending_after(url: str) -> dict[str, int]:
    """Pages each GIN index still held in its pending list (flushed by this call)."""
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            return {
                name: int(conn.exec_driver_sql(f"SELECT gin_clean_pending_list('{name}')").scalar())
                for name in kodb_schema.PG_GIN_INDEXES
            }
    finally:
        engine.dispose()


def bulk_write(db: KoDB, n: int = 600) -> None:
    facts = [fact(f"Subject {i} of the bulk", f"wiki/{i % 40}.md") for i in range(n)]
    texts = [NoteText(f"wiki/{i}.md", f"Title {i}", f"body words {i} here") for i in range(40)]
    db.apply_ingest([(note(f"wiki/{i}.md"), []) for i in range(40)], [], texts=texts)
    db.import_facts(facts)


def test_a_postgresql_write_leaves_no_gin_pending_entries(pg_url: str) -> None:
    # Searches read a GIN pending list through: a write flushes its own entries.
    with KoDB.open(pg_url) as db:
        bulk_write(db)
        assert db.search_subjects("bulk")[:2] == ["subject 0 of the bulk", "subject 1 of the bulk"]
    assert _pending_after(pg_url) == dict.fromkeys(kodb_schema.PG_GIN_INDEXES, 0)


def test_a_postgresql_writer_that_owns_no_index_still_writes(pg_url: str) -> None:
    import uuid

    import sqlalchemy as sa

    role = f"vaultko_writer_{uuid.uuid4().hex[:8]}"
    with KoDB.open(pg_url):
        pass  # the schema, owned by the admin role
    admin = sa.create_engine(pg_url)
    try:
        with admin.begin() as conn:
            conn.exec_driver_sql(f"CREATE ROLE {role} LOGIN")
            conn.exec_driver_sql(f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {role}")
            conn.exec_driver_sql(f"GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {role}")
            conn.exec_driver_sql(f"GRANT USAGE ON SCHEMA public TO {role}")
        writer_url = sa.make_url(pg_url).set(username=role).render_as_string(hide_password=False)
        with KoDB.open(writer_url) as db:
            bulk_write(db)
            assert db.count_facts() == 600
        assert sum(_pending_after(pg_url).values()) > 0  # left to autovacuum
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP OWNED BY {role}")
            conn.exec_driver_sql(f"DROP ROLE {role}")
        admin.dispose()


def _schema_3_fact_key(subject: str, predicate: str, obj: str, source_file: str) -> str:
    """fact_key as schema 3 stored it: the extractor was not part of a fact's identity."""
    import hashlib
    import unicodedata

    parts = (unicodedata.normalize("NFC", p) for p in (subject, predicate, obj, source_file))
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()


def test_fact_owner_migration_rekeys_schema_3_rows_by_extractor_keeping_them_all(
    kodb_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlalchemy as sa

    from pipeline.kodb.schema import subject_key
    from pipeline.model import normalize_text

    schema_3 = [m for m in kodb_schema.MIGRATIONS if m.version <= 3]
    old_rows = [
        fact("Redis", "wiki/redis.md", predicate="links_to", object="Kafka", extractor="ingest"),
        fact("Redis", "wiki/redis.md", predicate="owner", object="ops", extractor="import"),
        fact("Kafka", "adr/1.md", predicate="is", object="a log", extractor="mine"),
    ]
    with monkeypatch.context() as patch:
        patch.setattr(kodb_schema, "MIGRATIONS", tuple(schema_3))
        with KoDB.open(kodb_url) as old:
            assert old.schema_versions() == [1, 2, 3]
    engine = sa.create_engine(kodb_url)
    try:
        with engine.begin() as conn:  # rows as schema 3 wrote them, with its fact_key
            for i, f in enumerate(old_rows):
                norm = normalize_text(f.subject)
                conn.execute(
                    kodb_schema.facts.insert().values(
                        subject=f.subject,
                        subject_norm=norm,
                        subject_key=subject_key(norm),
                        predicate=f.predicate,
                        object=f.object,
                        confidence=f.confidence,
                        source_type=f.source_type,
                        source_file=f.source_file,
                        extractor=f.extractor,
                        fact_key=_schema_3_fact_key(
                            f.subject, f.predicate, f.object, f.source_file
                        ),
                        created_at=float(i),
                    )
                )
            for norm in sorted({normalize_text(f.subject) for f in old_rows}):
                conn.execute(
                    kodb_schema.subjects.insert().values(
                        subject_key=subject_key(norm), subject_norm=norm
                    )
                )
    finally:
        engine.dispose()

    with KoDB.open(kodb_url) as upgraded:
        assert upgraded.schema_versions() == [m.version for m in kodb_schema.MIGRATIONS]
        assert upgraded.count_facts() == 3
        stored = upgraded.facts_for_subjects(["redis", "kafka"])
        assert sorted(stored, key=repr) == sorted(old_rows, key=repr)
        # Every row now carries the new key: re-importing or re-ingesting the same facts
        # finds them, and an imported copy of the ingest fact is a row of its own.
        assert upgraded.import_facts(old_rows[1:]) == ImportResult(inserted=0, existing=2)
        copy = replace(old_rows[0], extractor="import")
        assert upgraded.import_facts([copy]) == ImportResult(inserted=1, existing=0)
        upgraded.apply_ingest([], removed=["wiki/redis.md"])
        assert sorted(upgraded.facts_for_subjects(["redis"]), key=repr) == sorted(
            [old_rows[1], copy], key=repr
        )
    with KoDB.open(kodb_url) as again:  # recorded, not run twice
        assert again.count_facts() == 3


def test_a_fact_is_owned_by_its_extractor_so_ingest_never_deletes_an_imported_copy(
    db: KoDB,
) -> None:
    said = {"predicate": "links_to", "object": "Kafka"}
    by_ingest = fact("Redis", "wiki/redis.md", extractor="ingest", **said)
    by_import = fact("Redis", "wiki/redis.md", extractor="import", **said)
    db.apply_ingest([(note("wiki/redis.md"), [by_ingest])], [])
    assert db.import_facts([by_import]) == ImportResult(inserted=1, existing=0)
    assert db.import_facts([by_import]) == ImportResult(inserted=0, existing=1)
    assert db.facts_for_subjects(["redis"]) == [by_import, by_ingest]  # sorted by extractor
    # Re-ingesting the note without that fact, then removing it, leaves the import alone.
    db.apply_ingest([(note("wiki/redis.md", "h2"), [])], [])
    assert db.facts_for_subjects(["redis"]) == [by_import]
    db.apply_ingest([(note("wiki/redis.md", "h3"), [by_ingest])], [])
    db.apply_ingest([], removed=["wiki/redis.md"])
    assert db.facts_for_subjects(["redis"]) == [by_import]
    assert db.search_subjects("redis") == ["redis"]


def test_calibrations_latest_by_embedder_and_dims(db: KoDB) -> None:
    def cal(embedder: str, dims: int, at: float) -> Calibration:
        return Calibration(embedder, dims, 1, 0.3, 0.05, 0.2, 40, 780, 40, at)

    assert db.latest_calibration() is None
    db.save_calibration(cal("minilm", 384, 10.0))
    db.save_calibration(cal("minilm", 384, 20.0))
    db.save_calibration(cal("bge-m3", 1024, 15.0))
    assert db.latest_calibration() == cal("minilm", 384, 20.0)
    assert db.latest_calibration("bge-m3") == cal("bge-m3", 1024, 15.0)
    assert db.latest_calibration("minilm", 1024) is None


# --- search ----------------------------------------------------------------------------

SAMPLE = [
    "Warm cache",
    "warmstart",
    "Warmstart and warm cache",
    "prewarm",
    "warm_cache",
    "Gyorsítótár őrző",
    "ŐRZŐ",
    "őrzőház",
    "50% discount",
    "a_b c",
    'it\'s "quoted"',
    "back\\slash",
]


def test_search_finds_whole_words_case_insensitively(db: KoDB) -> None:
    db.import_facts([fact(s) for s in SAMPLE])
    assert db.search_subjects("warm") == ["warm cache", "warmstart and warm cache"]
    assert db.search_subjects("WARM", limit=1) == ["warm cache"]
    assert db.search_subjects("őrző") == ["gyorsítótár őrző", "őrző"]
    assert db.search_subjects("Gyorsítótár") == ["gyorsítótár őrző"]
    assert db.search_subjects("50%") == ["50% discount"]
    assert db.search_subjects("%") == []  # a literal percent sign, not "anything"
    assert db.search_subjects("_") == []
    assert db.search_subjects("a_b") == ["a_b c"]
    assert db.search_subjects('"quoted"') == ['it\'s "quoted"']
    assert db.search_subjects("it's") == ['it\'s "quoted"']
    assert db.search_subjects("back\\slash") == ["back\\slash"]
    with pytest.raises(InputError):
        db.search_subjects("  ")


def test_search_many_answers_each_term(db: KoDB) -> None:
    db.import_facts([fact(s) for s in SAMPLE])
    terms = ["warm", "őrző", "a", "zzz", "WARM", "50%"]
    result = db.search_subjects_many(terms)
    assert set(result) == set(terms)
    norms = db.subject_norms()
    for term in terms:
        assert result[term] == reference_search(term, norms)


_CHARS = "aábcdeéőűöüsz z__%%''\"\\.-,ŐÉ1"
# Characters where word-character rules could differ between Python and a tokenizer: a
# private-use one, a symbol, a numeric other than a digit, a title-case letter, a combining
# accent, a zero-width joiner and an Arabic-Indic digit.
_EXOTIC = "\ue000+²ǅ\u0301\u200d٣"
_WORDS = ["warm", "warmstart", "cache", "őrző", "gyorsítótár", "50%", "a_b", "it's", "c\\d"]


def _random_subject(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(1, 4)):
        if rng.random() < 0.5:
            parts.append(rng.choice(_WORDS))
        else:
            chars = _CHARS + _EXOTIC if rng.random() < 0.3 else _CHARS
            parts.append("".join(rng.choice(chars) for _ in range(rng.randint(1, 8))))
    sep = rng.choice([" ", "", "-", "_", ", "])
    text = sep.join(parts)
    return text.upper() if rng.random() < 0.2 else text


def _random_term(rng: random.Random, subjects: list[str]) -> str:
    roll = rng.random()
    if roll < 0.4:  # a piece of a real subject: short, medium or long
        s = rng.choice(subjects)
        i = rng.randrange(len(s))
        term = s[i : i + rng.choice([1, 2, 3, 5, 12, 40])]
    elif roll < 0.7:
        term = rng.choice(_WORDS)
    else:
        term = "".join(rng.choice(_CHARS) for _ in range(rng.randint(1, 6)))
    return term if term.strip() else "x"


def test_search_agrees_with_the_python_reference_on_generated_data(db: KoDB) -> None:
    rng = random.Random(20240502)
    subjects = [_random_subject(rng) for _ in range(1500)]
    db.import_facts([fact(s, f"f{i % 50}.md") for i, s in enumerate(subjects)])
    norms = db.subject_norms()
    terms = [_random_term(rng, subjects) for _ in range(400)]
    hits = 0
    for term in terms:
        expected = reference_search(term, norms)
        assert db.search_subjects(term) == expected, term
        hits += bool(expected)
    many = db.search_subjects_many(terms)
    assert all(many[t] == reference_search(t, norms) for t in terms)
    assert hits > 50  # the generator must exercise matches, not only misses


def test_search_agrees_with_the_reference_for_arbitrary_terms(db: KoDB) -> None:
    rng = random.Random(7)
    subjects = [_random_subject(rng) for _ in range(300)]
    db.import_facts([fact(s) for s in subjects])
    norms = db.subject_norms()
    alphabet = st.sampled_from([*_CHARS, *_EXOTIC, "ß", "İ", "ﬁ"])

    @settings(
        max_examples=150,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(term=st.text(alphabet, min_size=1, max_size=8).filter(lambda t: t.strip()))
    def check(term: str) -> None:
        assert db.search_subjects(term) == reference_search(term, norms)

    check()


def test_search_uses_the_word_or_trigram_index(db: KoDB) -> None:
    if db.dialect == "sqlite":
        # A term with a word character is looked up by its words, short ones included.
        for term in ("warm", "wa", "warm cache", "c++"):
            plan = db.explain_search(term)
            assert "subject_words" in plan and "VIRTUAL TABLE" in plan, (term, plan)
        # Without one, three characters or more go by trigram; shorter scan distinct subjects.
        assert "subjects_fts" in db.explain_search("+++")
        plan = db.explain_search("++")
        assert "subjects_fts" not in plan and "subject_words" not in plan
        return
    # PostgreSQL: with 50k subjects and a selective term the planner must pick the pg_trgm
    # GIN index (a term found in a large share of rows rightly gets a sequential scan).
    rng = random.Random(1)
    letters = "abcdefghijklmnopqrstuvwxyzáéőű"
    subjects = ["".join(rng.choice(letters) for _ in range(10)) + f" {i}" for i in range(50_000)]
    subjects[123] = "Warmstart tuning"
    subjects[45_678] = "the warmstart path"
    subjects[7] = "+++ notation"
    db.import_facts([fact(s, f"f{i % 100}.md") for i, s in enumerate(subjects)])
    db.analyze()
    # A term with a word character goes by its runs (migration 9), short ones included.
    for term in ("warmstart", "wa", "warmstart path", "c++"):
        plan = db.explain_search(term)
        assert "ix_subjects_words_gin" in plan, (term, plan)
    assert db.search_subjects("warmstart") == ["the warmstart path", "warmstart tuning"]
    assert db.search_subjects("warmstart path") == ["the warmstart path"]
    # Without one, pg_trgm has no trigram to look up either ("+++" yields none): a scan.
    assert db.search_subjects("+++") == ["+++ notation"]


def test_concurrent_writers_and_openers_all_succeed(kodb_url: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    def work(n: int) -> ImportResult:
        # Each worker opens its own store (first open migrates) and imports overlapping facts.
        with KoDB.open(kodb_url) as store:
            return store.import_facts([fact(f"subject {i}") for i in range(n, n + 50)])

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(work, [0, 25, 50, 75]))
    with KoDB.open(kodb_url) as store:
        assert store.count_facts() == 125
        assert len(store.subject_norms()) == 125
    assert sum(r.inserted for r in results) == 125


def test_opening_keys_are_kept_counted_and_replaced_with_their_notes(
    db: KoDB, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipeline.kodb import notes as kodb_notes

    edge = [-(2**63), 2**63 - 1, -1, 0, 2**53 + 1]
    db.apply_ingest(
        [(note(f"wiki/{n}.md"), []) for n in "abc"],
        [],
        openings={"wiki/a.md": edge, "wiki/b.md": [0, 7, 7], "wiki/c.md": [7]},
    )
    assert db.openings_of(["wiki/a.md", "wiki/b.md", "wiki/none.md"]) == {
        "wiki/a.md": set(edge),
        "wiki/b.md": {0, 7},  # a note counts once per key
    }
    counts = {k: 1 for k in edge} | {0: 2, 7: 2}
    assert db.opening_counts([*edge, 7, 99]) == counts
    with monkeypatch.context() as patch:  # many keys: one pass over the table
        patch.setattr(kodb_notes, "OPENING_LOOKUPS", 2)
        assert db.opening_counts([*edge, 7, 99]) == counts
    assert db.notes_opening_with([7, 99]) == {"wiki/b.md", "wiki/c.md"}
    # An upsert without openings drops the note's; a removal drops them too.
    db.apply_ingest([(note("wiki/b.md", "h2"), [])], ["wiki/c.md"])
    assert db.opening_counts([0, 7]) == {0: 1}
    assert db.notes_opening_with([7]) == set()
