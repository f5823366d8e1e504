"""KO-DB's full-text index of the notes, on a real SQLite file and a real PostgreSQL database:
kept by ingest, ranked title first, diacritics folded, and no question read as syntax."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline import ingest as ingest_module
from pipeline.config import load_settings
from pipeline.ingest import ingest_vault
from pipeline.kodb import KoDB
from pipeline.kodb import notes as kodb_notes
from pipeline.kodb import schema as kodb_schema
from pipeline.model import Note, NoteText
from tests.integration.kodb.test_kodb_store import (
    as_code_before_migration_7,
    as_code_before_migration_15,
)

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]


def note(path: str) -> Note:
    return Note(path, Path(path).stem, "wiki", "h", 1.0, 10)


def found(db: KoDB, *terms: str) -> list[str]:
    return [p for p, _ in db.search_notes(list(terms), 20)]


@pytest.fixture
def db(kodb_url: str):  # type: ignore[no-untyped-def]
    with KoDB.open(kodb_url) as store:
        yield store


def test_a_title_word_counts_more_than_a_body_word(db: KoDB) -> None:
    db.apply_ingest(
        [(note("wiki/a.md"), []), (note("wiki/b.md"), [])],
        [],
        texts=[
            NoteText("wiki/a.md", "Kafka consumers", "Lag of the consumers was high."),
            NoteText("wiki/b.md", "Billing", "The billing events go through Kafka."),
        ],
    )
    ranked = db.search_notes(["kafka"], 10)
    assert [p for p, _ in ranked] == ["wiki/a.md", "wiki/b.md"]
    assert ranked[0][1] > ranked[1][1] > 0  # larger is better, on both databases
    assert found(db, "nothing-like-it") == []


def test_diacritics_and_case_are_folded_on_both_sides(db: KoDB) -> None:
    db.apply_ingest(
        [(note("wiki/hu.md"), [])],
        [],
        texts=[NoteText("wiki/hu.md", "Gyorsítótár-invalidálás", "A RÉGI bejegyzések törlése.")],
    )
    for query in ("gyorsitotar", "Gyorsítótár", "GYORSÍTÓTÁR", "invalidalas", "regi", "Régi"):
        assert found(db, query) == ["wiki/hu.md"], query


def test_an_edited_note_is_reindexed_a_deleted_one_removed_in_the_same_transaction(
    db: KoDB,
) -> None:
    db.apply_ingest([(note("wiki/a.md"), [])], [], texts=[NoteText("wiki/a.md", "A", "zebra")])
    assert found(db, "zebra") == ["wiki/a.md"]
    db.apply_ingest([(note("wiki/a.md"), [])], [], texts=[NoteText("wiki/a.md", "A", "okapi")])
    assert found(db, "zebra") == [] and found(db, "okapi") == ["wiki/a.md"]
    assert db.note_text_count() == 1
    db.apply_ingest([], ["wiki/a.md"])
    assert found(db, "okapi") == [] and db.note_text_count() == 0


@pytest.mark.parametrize(
    "hostile",
    [
        '"',
        '"unclosed',
        "*",
        "redis*",
        "NEAR(redis cache)",
        "redis NEAR cache",
        "-redis",
        "title:redis",
        "^redis",
        "a & b | !c",
        "(redis",
        "redis'); DROP TABLE notes; --",
        "AND OR NOT",
        "\\",
        "%_",
    ],
)
def test_fts_and_tsquery_syntax_in_a_question_never_raises(db: KoDB, hostile: str) -> None:
    db.apply_ingest(
        [(note("wiki/r.md"), [])], [], texts=[NoteText("wiki/r.md", "Redis", "cache near title")]
    )
    got = found(db, hostile)
    assert got in ([], ["wiki/r.md"])
    assert db.count_notes() == 1  # nothing was dropped


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(min_size=1, max_size=40))
def test_any_string_is_searched_as_words(db: KoDB, query: str) -> None:
    db.search_notes([query], 5)  # never raises, whatever the characters


def test_ingest_keeps_the_index_and_an_old_kodb_gets_it_at_the_next_ingest(
    kodb_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    vault = tmp_path / "vault"
    shutil.copytree(REPO / "examples" / "vault", vault, ignore=shutil.ignore_patterns(".vault-ko"))
    settings_ = load_settings(vault, env={}).replace(kodb_url=kodb_url)
    # A KO-DB an older vault-ko made (schema 4, extractor version 2, no full text).
    with monkeypatch.context() as patch:
        patch.setattr(kodb_schema, "MIGRATIONS", kodb_schema.MIGRATIONS[:4])
        patch.setattr(ingest_module, "EXTRACTOR_VERSION", 2)
        as_code_before_migration_7(patch)
        patch.setattr(kodb_notes, "replace_texts", lambda conn, dialect, texts, removed: None)
        with KoDB.open(kodb_url) as old:
            ingest_vault(settings_, old)
    with KoDB.open(kodb_url) as db:
        assert db.note_text_count() == 0  # migrated, but nothing indexed yet
        report = ingest_vault(settings_, db)
        assert report.updated == report.notes_total == db.note_text_count() == 91
        assert found(db, "gyorsitotar")[0].startswith(("adr/0018", "wiki/gyors"))
        # An edit is reindexed, a deletion removed, by the next incremental ingest.
        (vault / "wiki" / "redis.md").write_text("# Redis\n\nNow about okapis only.\n", "utf-8")
        (vault / "wiki" / "kafka.md").unlink()
        ingest_vault(settings_, db)
        assert found(db, "okapis") == ["wiki/redis.md"]
        assert "wiki/kafka.md" not in found(db, "kafka")
        assert db.note_text_count() == 90


@pytest.mark.parametrize("limit", [3, 12, 40])
def test_equal_scores_go_to_the_path_whatever_the_limit(db: KoDB, limit: int) -> None:
    """25 notes with the same text tie; the cut keeps the first paths (the tie margin and the
    exact fallback past it), and better notes still come first."""
    paths = [f"wiki/t{i:02d}.md" for i in reversed(range(25))]
    texts = [NoteText(p, "Same title", "Okapi herds graze.") for p in paths]
    texts.append(NoteText("wiki/best.md", "Okapi", "Okapi okapi herds."))
    db.apply_ingest([(note(x.path), []) for x in texts], [], texts=texts)
    got = db.search_notes(["okapi"], limit)
    assert [p for p, _ in got] == ["wiki/best.md", *sorted(paths)][:limit]
    assert all(score > 0 for _, score in got)
    assert got[0][1] > got[1][1]


def _stemming_vault(root: Path) -> Path:
    vault = root / "vault"
    (vault / "wiki").mkdir(parents=True)
    (vault / "wiki" / "cache.md").write_text(
        "# Caching strategies\n\nWe cached the rendered pages for an hour.\n", "utf-8"
    )
    (vault / "wiki" / "dontes.md").write_text(
        "---\nlang: hu\n---\n# Döntések\n\nA gyorsítótárak kulcsait verziózzuk.\n", "utf-8"
    )
    (vault / "wiki" / "roses.md").write_text("# Roses\n\nPrune them in winter.\n", "utf-8")
    return vault


def test_a_vault_is_stemmed_in_its_language_and_a_note_in_its_own_lang(
    kodb_url: str, tmp_path: Path
) -> None:
    vault = _stemming_vault(tmp_path)
    with KoDB.open(kodb_url) as db:
        ingest_vault(load_settings(vault, env={}).replace(kodb_url=kodb_url), db)
        assert db.index_languages() == ("english", "hungarian")
        assert found(db, "cache") == ["wiki/cache.md"]  # "caching", "cached": one stem
        assert found(db, "caches") == ["wiki/cache.md"]
        # The Hungarian note by its own rules: singular question, plural note.
        assert found(db, "döntés") == ["wiki/dontes.md"]
        assert found(db, "gyorsitotar") == ["wiki/dontes.md"]  # typed without accents


def test_an_old_kodb_answers_as_before_until_the_next_ingest_stems_it(
    kodb_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Migration 13 on a KO-DB an older vault-ko indexed with whole words: questions meet
    those words as before (no stem that matches nothing), and the next ingest re-indexes
    every note stemmed, without being asked."""
    vault = _stemming_vault(tmp_path)
    settings_ = load_settings(vault, env={}).replace(kodb_url=kodb_url)
    with monkeypatch.context() as patch:
        patch.setattr(kodb_schema, "MIGRATIONS", kodb_schema.MIGRATIONS[:12])
        as_code_before_migration_7(patch)
        with KoDB.open(kodb_url) as old:
            ingest_vault(settings_, old)
    with KoDB.open(kodb_url) as db:
        assert db.index_languages() == (None,)
        assert found(db, "caching") == ["wiki/cache.md"]
        assert found(db, "cache") == []  # whole words still
        report = ingest_vault(settings_, db)
        assert report.updated == report.notes_total == 3
        assert db.index_languages() == ("english", "hungarian")
        assert found(db, "cache") == ["wiki/cache.md"]
        assert ingest_vault(settings_, db).updated == 0  # done once


def test_a_changed_language_setting_re_indexes_every_note(kodb_url: str, tmp_path: Path) -> None:
    vault = _stemming_vault(tmp_path)
    english = load_settings(vault, env={}).replace(kodb_url=kodb_url)
    with KoDB.open(kodb_url) as db:
        ingest_vault(english, db)
        whole = english.replace(vault_language="none")
        report = ingest_vault(whole, db)
        assert report.updated == report.notes_total == 3
        assert db.index_languages() == (None, "hungarian")  # the note's own lang stays
        assert found(db, "cache") == []
        assert found(db, "caching") == ["wiki/cache.md"]


def test_an_english_word_quoted_in_hungarian_notes_is_not_rare_for_them(
    kodb_url: str, tmp_path: Path
) -> None:
    """The Hungarian stemmer leaves "flags" whole, so only the Hungarian notes that quote
    it held that spelling: scored as a word of its own it was rare, and they outranked the
    English notes about flags. One term per question word ranks the English ones first."""
    vault = tmp_path / "vault"
    (vault / "wiki").mkdir(parents=True)
    for i in range(4):
        (vault / "wiki" / f"flags-{i}.md").write_text(
            f"# Release {i}\n\nFeature flags gate the rollout; flags are managed by the team.\n",
            "utf-8",
        )
    for i in range(6):
        (vault / "wiki" / f"other-{i}.md").write_text(f"# Other {i}\n\nUnrelated text.\n", "utf-8")
    (vault / "wiki" / "atadas.md").write_text(
        "---\nlang: hu\n---\n# Ügyeleti átadás\n\nNyugodt hét volt, a feature flags "
        "kapcsolói rendben, két riasztás, egyik sem érintett ügyfelet.\n",
        "utf-8",
    )
    with KoDB.open(kodb_url) as db:
        ingest_vault(load_settings(vault, env={}).replace(kodb_url=kodb_url), db)
        ranked = found(db, "feature", "flags")
        assert ranked[:4] == [f"wiki/flags-{i}.md" for i in range(4)]
        assert ranked[4:] == ["wiki/atadas.md"]


def test_a_word_most_notes_hold_still_ranks_them_on_both_databases(db: KoDB) -> None:
    """BM25 orders what the database found: "server", held by four notes of five, still
    lifts the note holding it over a shorter one that holds only "crash" (FTS5's own bm25()
    takes such a word as worthless; ts_rank_cd is not BM25)."""
    texts = [NoteText(f"wiki/s{i}.md", "Notes", f"The server room {i}.") for i in range(3)]
    texts += [
        NoteText("wiki/short.md", "Notes", "A crash."),
        NoteText("wiki/both.md", "Notes", "A server crash."),
    ]
    db.apply_ingest([(note(x.path), []) for x in texts], [], texts=texts)
    ranked = db.search_notes(["server", "crash"], 10)
    assert [p for p, _ in ranked][:2] == ["wiki/both.md", "wiki/short.md"]
    assert [p for p, _ in ranked][2:] == ["wiki/s0.md", "wiki/s1.md", "wiki/s2.md"]


def test_every_keeps_the_notes_holding_each_word_in_title_or_body(db: KoDB) -> None:
    texts = [
        NoteText("wiki/both.md", "Server", "A crash at night."),
        NoteText("wiki/body.md", "Notes", "The server crash, twice."),
        NoteText("wiki/one.md", "Notes", "A server room."),
        NoteText("wiki/none.md", "Notes", "Nothing here."),
    ]
    db.apply_ingest([(note(x.path), []) for x in texts], [], texts=texts)
    every = [p for p, _ in db.search_notes(["server", "crash"], 10, every=True)]
    assert sorted(every) == ["wiki/body.md", "wiki/both.md"]
    assert "wiki/one.md" in found(db, "server", "crash")  # any word, without it
    assert db.search_notes(["server", "banana"], 10, every=True) == []


def test_every_finds_the_notes_holding_each_word_past_the_any_word_pool(db: KoDB) -> None:
    """Ranked by any word, 550 short notes of one word each came before the long notes
    holding both, and a filter over the best 100 of them found none or a few."""
    texts = [NoteText(f"wiki/c{i}.md", "Notes", "A crash happened here.") for i in range(150)]
    texts += [NoteText(f"wiki/s{i}.md", "Notes", "Server room.") for i in range(400)]
    filler = " ".join(f"filler{i}" for i in range(300))
    texts += [NoteText(f"wiki/both{i}.md", "Notes", f"Server crash. {filler}") for i in range(7)]
    db.apply_ingest([(note(x.path), []) for x in texts], [], texts=texts)
    every = db.search_notes(["server", "crash"], 10, every=True)
    assert sorted(p for p, _ in every) == [f"wiki/both{i}.md" for i in range(7)]


def test_migration_14_counts_the_words_of_notes_indexed_before_it(
    kodb_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = [
        NoteText("wiki/a.md", "Kafka consumers", "Lag of the consumers was high."),
        NoteText("wiki/b.md", "", "Billing events."),
    ]
    with monkeypatch.context() as patch:
        patch.setattr(kodb_schema, "MIGRATIONS", kodb_schema.MIGRATIONS[:13])
        as_code_before_migration_15(patch)
        with KoDB.open(kodb_url) as old:
            old.apply_ingest([(note(x.path), []) for x in texts], [], texts=texts)
    t = kodb_schema.note_texts
    engine = sa.create_engine(kodb_url)
    try:
        with engine.begin() as conn:  # the table as migration 13 left it
            conn.exec_driver_sql(f"DROP INDEX {kodb_schema.TEXT_WORDS_INDEX}")
            conn.exec_driver_sql("ALTER TABLE note_texts DROP COLUMN words")
        with KoDB.open(kodb_url) as db:
            assert db.schema_versions()[-1] == kodb_schema.SCHEMA_VERSION
            assert found(db, "consumers") == ["wiki/a.md"]
        with engine.begin() as conn:
            counts = dict(conn.execute(sa.select(t.c.path, t.c.words)).all())
    finally:
        engine.dispose()
    assert counts == {"wiki/a.md": 2 + 6, "wiki/b.md": 0 + 2}
