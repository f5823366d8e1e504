"""Ingesting the sample vault into KO-DB on a real SQLite file and a real PostgreSQL database."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.config import Settings, load_settings
from pipeline.ingest import IngestReport, ingest_vault
from pipeline.kodb import KoDB
from pipeline.model import Fact
from pipeline.vault.extract import extract_facts
from pipeline.vault.parse import read_note
from pipeline.vault.scan import scan_vault

pytestmark = pytest.mark.integration

BROKEN = Path(__file__).resolve().parents[1] / "data" / "notes" / "wiki"
BROKEN_NOTES = ["binary.md", "huge.md", "latin1.md", "list-frontmatter.md", "malformed-yaml.md"]
LIMIT = 64_000  # above every sample note; huge.md is made bigger than this below

Row = tuple[str, str, str, str, str, float]


@pytest.fixture
def vault(vault_copy: Path) -> Path:
    """The sample vault plus the deliberately broken notes in wiki/broken/."""
    if not any(vault_copy.rglob("*.md")):
        pytest.fail("examples/vault has no notes")
    broken = vault_copy / "wiki" / "broken"
    broken.mkdir(parents=True)
    for name in BROKEN_NOTES:
        shutil.copy(BROKEN / name, broken / name)
    (broken / "huge.md").write_text("# Huge\n\n" + "[[Redis]] " * 8000, encoding="utf-8")
    return vault_copy


def settings_for(vault: Path) -> Settings:
    return load_settings(vault, overrides={"vault_max_note_bytes": LIMIT}, env={}, cwd=vault)


@pytest.fixture
def kodb(kodb_url: str) -> Iterator[KoDB]:
    db = KoDB.open(kodb_url)
    try:
        yield db
    finally:
        db.close()


def rows(kodb: KoDB) -> set[Row]:
    return {
        (f.source_file, f.subject, f.predicate, f.object, f.extractor, f.confidence)
        for f in kodb.facts_for_subjects(kodb.subject_norms())
    }


def expected_rows(vault: Path) -> set[Row]:
    """The extractor's output for every readable note, computed without any database."""
    settings = settings_for(vault)
    out: set[Row] = set()
    for scanned in scan_vault(settings):
        if scanned.path.startswith("wiki/broken/"):
            continue
        note = read_note(vault, scanned.path, scanned.source_type, LIMIT)
        out |= {
            (f.source_file, f.subject, f.predicate, f.object, f.extractor, f.confidence)
            for f in extract_facts(note)
        }
    return out


def ingest(vault: Path, kodb: KoDB) -> IngestReport:
    return ingest_vault(settings_for(vault), kodb)


def touch(path: Path) -> None:
    st = path.stat()
    os.utime(path, (st.st_atime, st.st_mtime + 10))


def test_sample_vault_ingests_with_broken_notes_reported(vault: Path, kodb: KoDB) -> None:
    report = ingest(vault, kodb)
    assert sorted(s.path for s in report.skipped) == [f"wiki/broken/{n}" for n in BROKEN_NOTES]
    assert report.notes_total == len(list(vault.rglob("*.md"))) - len(BROKEN_NOTES)
    assert min(report.notes_by_type.values()) > 0
    assert rows(kodb) == expected_rows(vault)
    assert "has_value" not in report.facts_by_predicate


def test_reingest_is_idempotent(vault: Path, kodb: KoDB) -> None:
    first = ingest(vault, kodb)
    before = rows(kodb)
    for note in vault.rglob("*.md"):
        touch(note)  # force the content-hash path too
    second = ingest(vault, kodb)
    assert rows(kodb) == before
    assert second.facts_total == first.facts_total
    assert (second.added, second.updated, second.removed) == (0, 0, 0)
    assert second.unchanged == first.notes_total


def test_deleted_note_facts_are_gone(vault: Path, kodb: KoDB) -> None:
    ingest(vault, kodb)
    victim = sorted((vault / "sessions").glob("*.md"))[0]
    rel = victim.relative_to(vault).as_posix()
    assert any(r[0] == rel for r in rows(kodb))
    victim.unlink()
    report = ingest(vault, kodb)
    assert report.removed == 1
    assert not any(r[0] == rel for r in rows(kodb))
    assert rel not in kodb.notes()


def test_edited_note_facts_are_replaced(vault: Path, kodb: KoDB) -> None:
    ingest(vault, kodb)
    target = sorted((vault / "wiki").glob("*.md"))[0]
    rel = target.relative_to(vault).as_posix()
    target.write_text("# Rewritten\n\nOnly about [[Zebra stripes]] now. #zoo\n", encoding="utf-8")
    touch(target)
    report = ingest(vault, kodb)
    assert report.updated == 1
    mine = {r[1:4] for r in rows(kodb) if r[0] == rel}
    assert mine == {
        ("Rewritten", "links_to", "Zebra stripes"),
        ("Rewritten", "tagged", "zoo"),
        ("Zebra stripes", "mentioned_in", "Rewritten"),
        ("Zebra stripes", "context", "Only about Zebra stripes now."),
    }
    assert rows(kodb) == expected_rows(vault)


def test_note_that_turns_bad_keeps_old_facts(vault: Path, kodb: KoDB) -> None:
    ingest(vault, kodb)
    before = rows(kodb)
    target = sorted((vault / "adr").glob("*.md"))[0]
    rel = target.relative_to(vault).as_posix()
    target.write_bytes(target.read_bytes() + b"\n\xff\xfe broken bytes\n")
    report = ingest(vault, kodb)
    assert rel in {s.path for s in report.skipped}
    assert rows(kodb) == before
    assert rel in kodb.notes()


def test_imported_facts_are_untouched_by_ingest(vault: Path, kodb: KoDB) -> None:
    path = sorted((vault / "wiki").glob("*.md"))[0]
    rel = path.relative_to(vault).as_posix()
    imported = [
        Fact("Imported subject", "noted", "by hand", 0.4, "wiki", rel, extractor="import"),
        Fact("Other", "noted", "gone file", 0.4, "session", "sessions/gone.md", extractor="import"),
    ]
    kodb.import_facts(imported)
    ingest(vault, kodb)
    path.write_text("# Replaced\n", encoding="utf-8")
    touch(path)
    ingest(vault, kodb)
    path.unlink()
    ingest(vault, kodb)
    kept = {r for r in rows(kodb) if r[4] == "import"}
    assert kept == {
        (f.source_file, f.subject, f.predicate, f.object, "import", 0.4) for f in imported
    }


def test_same_counts_on_sqlite_and_postgresql(vault: Path, tmp_path: Path, pg_url: str) -> None:
    reports: list[IngestReport] = []
    stored: list[set[Row]] = []
    for url in (f"sqlite:///{tmp_path / 'same.db'}", pg_url):
        with KoDB.open(url) as db:
            reports.append(ingest(vault, db))
            stored.append(rows(db))
    sqlite, pg = reports
    assert stored[0] == stored[1]
    assert (sqlite.notes_total, sqlite.notes_by_type) == (pg.notes_total, pg.notes_by_type)
    assert (sqlite.facts_total, sqlite.facts_by_predicate) == (
        pg.facts_total,
        pg.facts_by_predicate,
    )
    assert sqlite.skipped == pg.skipped
