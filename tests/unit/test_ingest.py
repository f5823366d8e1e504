"""Ingestion runs on a real SQLite KO-DB: incremental updates, bad notes, the CLI."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.config import Settings, load_settings
from pipeline.ingest import IngestReport, ingest_vault
from pipeline.kodb import KoDB
from pipeline.model import Fact
from pipeline.vault.extract import extract_facts
from pipeline.vault.parse import read_note
from pipeline.vault.scan import scan_vault

TEST_DATA_NOTES = Path(__file__).resolve().parents[1] / "data" / "notes"
GOOD = ["adr/0001-use-redis.md", "sessions/2024-03-01.md", "wiki/Redis.md"]
BAD = {
    "wiki/binary.md": "NUL byte",
    "wiki/huge.md": "more than the limit of 2048",
    "wiki/latin1.md": "not valid UTF-8",
    "wiki/list-frontmatter.md": "must be a mapping",
    "wiki/malformed-yaml.md": "line 4: invalid YAML frontmatter",
}
SMALL_LIMIT = 2048  # the good test notes are far below it, huge.md far above


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    dest = tmp_path / "vault"
    shutil.copytree(TEST_DATA_NOTES, dest)
    return dest


def settings_for(vault: Path, **overrides: object) -> Settings:
    return load_settings(
        vault, overrides={"vault_max_note_bytes": SMALL_LIMIT, **overrides}, env={}, cwd=vault
    )


@pytest.fixture
def kodb(vault: Path) -> Iterator[KoDB]:
    db = KoDB.open(settings_for(vault).effective_kodb_url)
    try:
        yield db
    finally:
        db.close()


def run(vault: Path, kodb: KoDB, **overrides: object) -> IngestReport:
    return ingest_vault(settings_for(vault, **overrides), kodb)


def stored(kodb: KoDB, extractor: str | None = "ingest") -> set[tuple[str, str, str, str]]:
    facts = kodb.facts_for_subjects(kodb.subject_norms())
    return {
        (f.source_file, f.subject, f.predicate, f.object)
        for f in facts
        if extractor is None or f.extractor == extractor
    }


def expected_facts(vault: Path, paths: list[str]) -> set[tuple[str, str, str, str]]:
    """What the extractor yields for these notes, computed without KO-DB."""
    settings = settings_for(vault)
    types = {f.path: f.source_type for f in scan_vault(settings)}
    out = set()
    for path in paths:
        note = read_note(vault, path, types[path], SMALL_LIMIT)
        out |= {(f.source_file, f.subject, f.predicate, f.object) for f in extract_facts(note)}
    return out


def bump_mtime(path: Path) -> None:
    st = path.stat()
    os.utime(path, (st.st_atime, st.st_mtime + 10))


def test_bad_notes_are_reported_and_the_good_ones_ingested(vault: Path, kodb: KoDB) -> None:
    report = run(vault, kodb)
    assert {s.path: s.reason for s in report.skipped}.keys() == BAD.keys()
    for skipped in report.skipped:
        assert BAD[skipped.path] in skipped.reason
    assert sorted(kodb.notes()) == GOOD
    assert report.notes_total == 3
    assert report.notes_by_type == {"session": 1, "wiki": 1, "adr": 1}
    assert report.added == 3 and report.updated == report.removed == report.unchanged == 0
    assert stored(kodb) == expected_facts(vault, GOOD)
    assert report.facts_total == len(stored(kodb)) == kodb.count_facts()
    assert report.facts_by_predicate == kodb.facts_by_predicate()


def test_redis_gathers_facts_from_all_three_source_types(vault: Path, kodb: KoDB) -> None:
    run(vault, kodb)
    redis = [f for f in kodb.facts_for_subjects(["redis"]) if f.subject == "Redis"]
    assert {f.source_type for f in redis} == {"session", "wiki", "adr"}
    assert {f.source_file for f in redis} == set(GOOD)


def test_second_run_changes_nothing(vault: Path, kodb: KoDB) -> None:
    first = run(vault, kodb)
    before = stored(kodb)
    second = run(vault, kodb)
    assert (second.added, second.updated, second.removed, second.unchanged) == (0, 0, 0, 3)
    assert second.facts_total == first.facts_total
    assert stored(kodb) == before
    assert len(second.skipped) == len(BAD)


def test_edited_note_has_its_facts_replaced(vault: Path, kodb: KoDB) -> None:
    run(vault, kodb)
    session = vault / "sessions/2024-03-01.md"
    session.write_text("# Session 2024-03-01\n\nToday only [[Kafka]] lag.\n", encoding="utf-8")
    bump_mtime(session)
    report = run(vault, kodb)
    assert report.updated == 1 and report.unchanged == 2
    facts = {t for t in stored(kodb) if t[0] == "sessions/2024-03-01.md"}
    assert ("sessions/2024-03-01.md", "Kafka", "context", "Today only Kafka lag.") in facts
    assert not any(subject == "Redis" for _, subject, _, _ in facts)
    assert stored(kodb) == expected_facts(vault, GOOD)


def test_touched_but_unchanged_note_is_not_reextracted(vault: Path, kodb: KoDB) -> None:
    run(vault, kodb)
    bump_mtime(vault / "wiki/Redis.md")
    report = run(vault, kodb)
    assert (report.updated, report.unchanged) == (0, 3)


def test_deleted_note_loses_its_facts(vault: Path, kodb: KoDB) -> None:
    run(vault, kodb)
    (vault / "adr/0001-use-redis.md").unlink()
    report = run(vault, kodb)
    assert report.removed == 1
    assert "adr/0001-use-redis.md" not in kodb.notes()
    assert not any(path == "adr/0001-use-redis.md" for path, *_ in stored(kodb))


def test_note_turned_bad_keeps_its_old_facts(vault: Path, kodb: KoDB) -> None:
    run(vault, kodb)
    before = stored(kodb)
    redis = vault / "wiki/Redis.md"
    redis.write_bytes(b"---\ntitle: [broken\n---\nNow broken.\n")
    bump_mtime(redis)
    report = run(vault, kodb)
    assert "wiki/Redis.md" in {s.path for s in report.skipped}
    assert "wiki/Redis.md" in kodb.notes()
    assert stored(kodb) == before
    assert report.notes_total == 3


def test_bad_note_fixed_later_is_added(vault: Path, kodb: KoDB) -> None:
    run(vault, kodb)
    (vault / "wiki/latin1.md").write_text("# Café notes\n\nNow UTF-8.\n", encoding="utf-8")
    report = run(vault, kodb)
    assert report.added == 1
    assert "wiki/latin1.md" not in {s.path for s in report.skipped}
    assert kodb.notes()["wiki/latin1.md"].title == "Café notes"


def test_source_type_change_reextracts_with_the_new_type(vault: Path, kodb: KoDB) -> None:
    run(vault, kodb)
    report = run(vault, kodb, vault_adr_globs=["adr/**", "wiki/Redis.md"])
    assert report.updated == 1
    assert kodb.notes()["wiki/Redis.md"].source_type == "adr"
    types = {
        f.source_type
        for f in kodb.facts_for_subjects(["redis"])
        if f.source_file == "wiki/Redis.md"
    }
    assert types == {"adr"}


def test_imported_facts_are_left_alone(vault: Path, kodb: KoDB) -> None:
    imported = Fact("Redis", "runs_on", "k8s", 0.5, "wiki", "wiki/Redis.md", extractor="import")
    kodb.import_facts([imported])
    run(vault, kodb)
    (vault / "wiki/Redis.md").unlink()
    run(vault, kodb)
    assert ("wiki/Redis.md", "Redis", "runs_on", "k8s") in stored(kodb, extractor="import")


def test_force_reextracts_every_good_note(vault: Path, kodb: KoDB) -> None:
    run(vault, kodb)
    report = ingest_vault(settings_for(vault), kodb, force=True)
    assert report.updated == 3 and report.unchanged == 0


def test_progress_is_reported_per_note(vault: Path, kodb: KoDB) -> None:
    calls: list[tuple[int, int]] = []
    ingest_vault(settings_for(vault), kodb, progress=lambda d, t: calls.append((d, t)))
    total = len(GOOD) + len(BAD)
    assert calls == [(i, total) for i in range(1, total + 1)]


# --- CLI ------------------------------------------------------------------------------


def test_cli_json_shape_and_exit_zero_with_skipped_notes(
    vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VAULT_KO_VAULT_MAX_NOTE_BYTES", str(SMALL_LIMIT))
    result = CliRunner().invoke(cli, ["ingest", str(vault), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["notes"] == {"total": 3, "by_type": {"session": 1, "wiki": 1, "adr": 1}}
    assert data["facts"]["total"] == sum(data["facts"]["by_predicate"].values())
    assert {"links_to", "mentioned_in", "context", "adr_status"} <= data["facts"][
        "by_predicate"
    ].keys()
    assert sorted(s["path"] for s in data["skipped"]) == sorted(BAD)
    assert all(s["reason"] for s in data["skipped"])
    assert (vault / ".vault-ko" / "ko.db").is_file()


def test_cli_human_summary_lists_types_predicates_and_skipped(
    vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VAULT_KO_VAULT_MAX_NOTE_BYTES", str(SMALL_LIMIT))
    result = CliRunner().invoke(cli, ["--vault", str(vault), "ingest"])
    assert result.exit_code == 0, result.output
    assert "3 notes (1 session, 1 wiki, 1 adr)" in result.stdout
    assert "links_to" in result.stdout
    for path in BAD:
        assert path in result.stdout
