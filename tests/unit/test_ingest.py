"""Ingestion runs on a real SQLite KO-DB: incremental updates, bad notes, the CLI."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.config import Settings, load_settings
from pipeline.ingest import IngestReport, LinkResolver, ingest_vault
from pipeline.kodb import KoDB
from pipeline.model import Fact, Note
from pipeline.vault.edits import unsynced_edits
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


def expected_facts(
    vault: Path, paths: list[str], limit: int = SMALL_LIMIT
) -> set[tuple[str, str, str, str]]:
    """What the extractor yields for these notes, computed without KO-DB."""
    settings = settings_for(vault, vault_max_note_bytes=limit)
    types = {f.path: f.source_type for f in scan_vault(settings)}
    notes = [read_note(vault, path, types[path], limit) for path in paths]
    resolver = LinkResolver.from_parsed(notes)
    return {
        (f.source_file, f.subject, f.predicate, f.object)
        for note in notes
        for f in extract_facts(note, resolver)
    }


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


def test_ingest_skips_yaml_alias_bomb_and_deep_nesting_with_their_lines(
    vault: Path, kodb: KoDB, deadline: Callable[[float], AbstractContextManager[None]]
) -> None:
    bomb = ["---"]
    bomb.append("a: &a [" + ", ".join(["lol"] * 9) + "]")
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        bomb.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
    bomb += ["---", "Links to [[Redis]].", ""]
    (vault / "wiki" / "bomb.md").write_text("\n".join(bomb), encoding="utf-8")
    deep = "---\ntitle: Deep\nx: " + "[" * 990 + "]" * 990 + "\n---\nSee [[Redis]].\n"
    (vault / "wiki" / "deep.md").write_text(deep, encoding="utf-8")
    deep_map = "---\nx: " + "{a: " * 990 + "1" + "}" * 990 + "\n---\nSee [[Redis]].\n"
    (vault / "wiki" / "deep-map.md").write_text(deep_map, encoding="utf-8")
    with deadline(30):
        report = run(vault, kodb, vault_max_note_bytes=100_000)
    reasons = {s.path: s.reason for s in report.skipped}
    assert reasons["wiki/bomb.md"].startswith("line ") and "alias" in reasons["wiki/bomb.md"]
    assert reasons["wiki/deep.md"].startswith("line 3: ")
    assert reasons["wiki/deep-map.md"].startswith("line 2: ")
    assert sorted(kodb.notes()) == sorted([*GOOD, "wiki/huge.md"])
    # huge.md fits the raised size limit, so it is a good note here.
    assert stored(kodb) == expected_facts(vault, [*GOOD, "wiki/huge.md"], limit=100_000)


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


def test_a_touched_unchanged_note_gets_its_new_stamp(vault: Path, kodb: KoDB) -> None:
    """So neither the next run nor a cold answer's comparison reads it again."""
    run(vault, kodb)
    bump_mtime(vault / "wiki/Redis.md")
    run(vault, kodb)
    st = (vault / "wiki/Redis.md").stat()
    stamp = kodb.note_stamps()["wiki/Redis.md"]
    assert (stamp.mtime, stamp.bytes) == (st.st_mtime, st.st_size)


def test_a_note_that_changed_between_scan_and_read_keeps_its_old_stamp(
    vault: Path, kodb: KoDB, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bytes hashed were not the ones the scan stamped (a sync tool wrote the old text
    back with another mtime): restamping would tie that stamp to the old hash, and a later
    copy of the new text with its mtime kept would go unseen."""
    from pipeline import ingest as ingest_module

    run(vault, kodb)
    before = kodb.note_stamps()["wiki/Redis.md"]
    bump_mtime(vault / "wiki/Redis.md")
    real = ingest_module.read_note_bytes

    def raced(vault_dir: Path, rel: str, max_bytes: int) -> tuple[bytes, float]:
        raw, mtime = real(vault_dir, rel, max_bytes)
        return raw, mtime + 5  # the file as read is not the file as scanned

    monkeypatch.setattr(ingest_module, "read_note_bytes", raced)
    report = run(vault, kodb)
    assert (report.updated, report.unchanged) == (0, 3)
    assert kodb.note_stamps()["wiki/Redis.md"] == before


def test_deleted_note_loses_its_facts(vault: Path, kodb: KoDB) -> None:
    run(vault, kodb)
    (vault / "adr/0001-use-redis.md").unlink()
    report = run(vault, kodb)
    assert report.removed == 1
    assert "adr/0001-use-redis.md" not in kodb.notes()
    assert not any(path == "adr/0001-use-redis.md" for path, *_ in stored(kodb))


def _unlistable(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """``folder`` cannot be listed, as a chmod 000 folder cannot (root reads it anyway)."""
    real = os.scandir

    def scandir(path: object = ".") -> object:
        if Path(os.fsdecode(path)).resolve() == folder.resolve():  # type: ignore[arg-type]
            raise PermissionError(13, "Permission denied", os.fsdecode(path))  # type: ignore[arg-type]
        return real(path)  # type: ignore[call-overload]

    monkeypatch.setattr(os, "scandir", scandir)


@pytest.mark.parametrize("folder", ["adr", "."], ids=["a folder", "the vault itself"])
def test_a_folder_that_cannot_be_listed_keeps_its_notes(
    vault: Path, kodb: KoDB, monkeypatch: pytest.MonkeyPatch, folder: str
) -> None:
    run(vault, kodb)
    before, notes = stored(kodb), set(kodb.notes())
    _unlistable(monkeypatch, vault / folder)
    report = run(vault, kodb)
    assert report.removed == 0
    assert set(kodb.notes()) == notes and stored(kodb) == before
    shown = "." if folder == "." else f"{folder}/"
    (skip,) = [s for s in report.skipped if s.path == shown]
    assert "cannot list this folder (Permission denied)" in skip.reason
    kept = sum(folder == "." or p.startswith("adr/") for p in notes)
    assert f"the {kept} notes synced from it keep their facts" in skip.reason
    assert unsynced_edits(settings_for(vault), kodb.note_stamps()).removed == 0


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


def test_imported_fact_identical_to_an_extracted_one_survives_the_next_ingest(
    vault: Path, kodb: KoDB
) -> None:
    run(vault, kodb)
    extracted = next(
        f for f in kodb.facts_for_subjects(["redis"]) if f.source_file == "wiki/Redis.md"
    )
    same = replace(extracted, extractor="import")
    assert kodb.import_facts([same]).inserted == 1  # its own row, owned by "import"
    redis = vault / "wiki/Redis.md"
    redis.write_text(redis.read_text(encoding="utf-8") + "\nEdited.\n", encoding="utf-8")
    bump_mtime(redis)
    assert run(vault, kodb).updated == 1
    redis.unlink()
    assert run(vault, kodb).removed == 1
    assert stored(kodb, extractor="import") == {
        (same.source_file, same.subject, same.predicate, same.object)
    }


def test_ingest_stores_its_fact_beside_an_identical_imported_one(vault: Path, kodb: KoDB) -> None:
    first = run(vault, kodb)
    extracted = kodb.facts_for_subjects(kodb.subject_norms())
    kodb.close()
    for path in (vault / ".vault-ko").glob("ko.db*"):
        path.unlink()
    with KoDB.open(settings_for(vault).effective_kodb_url) as fresh:
        fresh.import_facts([replace(f, extractor="import") for f in extracted])
        second = run(vault, fresh)
        assert second.facts_total == 2 * first.facts_total
        assert stored(fresh) == stored(fresh, extractor="import")


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


# --- link resolution --------------------------------------------------------------------

ADR_PATH = "adr/0007-use-redis.md"
ADR_TITLE = "0007 Use Redis as the warm cache"
LINKERS = {
    "wiki/warm-cache.md": "# Warm cache\n\nBacked by [[0007-use-redis]] since October.\n",
    "sessions/2026-03-04.md": "# Rollout\n\nShipped what [[adr/0007-use-redis]] decided.\n",
}


def write(vault: Path, rel: str, text: str) -> None:
    path = vault / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    bump_mtime(path)


@pytest.fixture
def linked_vault(tmp_path: Path) -> Path:
    """An ADR whose file name differs from its title, and notes linking it by stem and path."""
    vault = tmp_path / "linked"
    write(vault, ADR_PATH, f"---\ntitle: {ADR_TITLE}\nstatus: accepted\n---\nWe use [[Redis]].\n")
    for rel, text in LINKERS.items():
        write(vault, rel, text)
    return vault


@pytest.fixture
def linked_kodb(linked_vault: Path) -> Iterator[KoDB]:
    with KoDB.open(settings_for(linked_vault).effective_kodb_url) as db:
        yield db


def from_scratch(vault: Path, tmp_path: Path) -> set[tuple[str, str, str, str]]:
    """The facts a full ingest of the vault into a new KO-DB stores."""
    url = f"sqlite:///{tmp_path / f'scratch-{len(list(tmp_path.iterdir()))}.db'}"
    with KoDB.open(url) as db:
        run(vault, db)
        return stored(db)


def files_of(facts: set[tuple[str, str, str, str]], subject: str) -> set[str]:
    return {path for path, s, _, _ in facts if s == subject}


def test_links_by_file_stem_and_by_path_resolve_to_the_title_subject(
    linked_vault: Path, linked_kodb: KoDB
) -> None:
    run(linked_vault, linked_kodb)
    facts = stored(linked_kodb)
    assert files_of(facts, ADR_TITLE) == {ADR_PATH, *LINKERS}
    assert ("wiki/warm-cache.md", "Warm cache", "links_to", ADR_TITLE) in facts
    assert ("sessions/2026-03-04.md", "Rollout", "links_to", ADR_TITLE) in facts
    assert not any("0007-use-redis" in (s, o) for _, s, _, o in facts)
    assert kodb_subject(linked_kodb, ADR_PATH) == ADR_TITLE


def kodb_subject(kodb: KoDB, path: str) -> str | None:
    return kodb.notes()[path].subject


def test_frontmatter_subject_is_stored_and_used_for_links(
    linked_vault: Path, linked_kodb: KoDB
) -> None:
    write(
        linked_vault,
        ADR_PATH,
        f"---\ntitle: {ADR_TITLE}\nsubject: Warm cache ADR\nstatus: accepted\n---\nx\n",
    )
    run(linked_vault, linked_kodb)
    assert kodb_subject(linked_kodb, ADR_PATH) == "Warm cache ADR"
    assert files_of(stored(linked_kodb), "Warm cache ADR") == {ADR_PATH, *LINKERS}


def test_ambiguous_stem_stays_raw_but_a_path_still_resolves(
    linked_vault: Path, linked_kodb: KoDB
) -> None:
    write(linked_vault, "wiki/0007-use-redis.md", "# Redis notes\n\nScratch.\n")
    run(linked_vault, linked_kodb)
    facts = stored(linked_kodb)
    # [[0007-use-redis]] names two files now: Obsidian needs a path, the link stays raw.
    assert ("wiki/warm-cache.md", "Warm cache", "links_to", "0007-use-redis") in facts
    assert ("sessions/2026-03-04.md", "Rollout", "links_to", ADR_TITLE) in facts


def test_retitling_a_note_reextracts_the_notes_linking_to_it(
    linked_vault: Path, linked_kodb: KoDB, tmp_path: Path
) -> None:
    run(linked_vault, linked_kodb)
    write(linked_vault, ADR_PATH, "---\ntitle: 0007 Redis warm cache\n---\nWe use [[Redis]].\n")
    report = run(linked_vault, linked_kodb)
    assert (report.updated, report.relinked, report.unchanged) == (1, len(LINKERS), 2)
    facts = stored(linked_kodb)
    assert not any(ADR_TITLE in (s, o) for _, s, _, o in facts)
    assert files_of(facts, "0007 Redis warm cache") == {ADR_PATH, *LINKERS}
    assert facts == from_scratch(linked_vault, tmp_path)
    # The run after that has nothing left to re-link.
    assert run(linked_vault, linked_kodb).relinked == 0


def test_changing_a_notes_subject_reextracts_the_notes_linking_to_it(
    linked_vault: Path, linked_kodb: KoDB, tmp_path: Path
) -> None:
    adr = f"---\ntitle: {ADR_TITLE}\nsubject: {{}}\nstatus: accepted\n---\nx\n"
    write(linked_vault, ADR_PATH, adr.format("Redis warm cache"))
    run(linked_vault, linked_kodb)
    write(linked_vault, ADR_PATH, adr.format("Warm cache decision"))
    report = run(linked_vault, linked_kodb)
    assert report.relinked == len(LINKERS)
    facts = stored(linked_kodb)
    assert files_of(facts, "Warm cache decision") == {ADR_PATH, *LINKERS}
    assert not any("Redis warm cache" in (s, o) for _, s, _, o in facts)
    assert facts == from_scratch(linked_vault, tmp_path)


def test_adding_the_linked_note_moves_stem_link_facts_onto_it_and_deleting_moves_them_back(
    linked_vault: Path, linked_kodb: KoDB, tmp_path: Path
) -> None:
    write(linked_vault, "wiki/redis-notes.md", "# Redis notes\n\nSee [[kafka-runbook]].\n")
    run(linked_vault, linked_kodb)
    assert ("wiki/redis-notes.md", "kafka-runbook", "mentioned_in", "Redis notes") in stored(
        linked_kodb
    )

    write(linked_vault, "wiki/kafka-runbook.md", "# Kafka runbook\n\nRestart brokers.\n")
    report = run(linked_vault, linked_kodb)
    assert (report.added, report.relinked) == (1, 1)
    facts = stored(linked_kodb)
    assert ("wiki/redis-notes.md", "Kafka runbook", "mentioned_in", "Redis notes") in facts
    assert ("wiki/redis-notes.md", "Redis notes", "links_to", "Kafka runbook") in facts
    assert files_of(facts, "kafka-runbook") == set()
    assert facts == from_scratch(linked_vault, tmp_path)

    (linked_vault / "wiki/kafka-runbook.md").unlink()
    report = run(linked_vault, linked_kodb)
    assert (report.removed, report.relinked) == (1, 1)
    facts = stored(linked_kodb)
    assert ("wiki/redis-notes.md", "kafka-runbook", "mentioned_in", "Redis notes") in facts
    assert files_of(facts, "Kafka runbook") == set()
    assert facts == from_scratch(linked_vault, tmp_path)


def test_registry_rows_without_a_subject_are_reextracted_once(
    linked_vault: Path, linked_kodb: KoDB
) -> None:
    run(linked_vault, linked_kodb)
    # Rows as a database migrated from schema 2 holds them: no subject recorded.
    legacy = [(replace(n, subject=None), ()) for n in linked_kodb.notes().values()]
    linked_kodb.apply_ingest(legacy, [])
    report = run(linked_vault, linked_kodb)
    assert report.updated == len(legacy)
    assert stored(linked_kodb) == expected_facts(linked_vault, sorted(linked_kodb.notes()))
    assert all(n.subject for n in linked_kodb.notes().values())
    assert run(linked_vault, linked_kodb).updated == 0


@pytest.mark.parametrize("old_version", [None, 1])
def test_notes_extracted_under_other_rules_are_reextracted_once(
    linked_vault: Path, linked_kodb: KoDB, old_version: int | None
) -> None:
    from pipeline.vault.extract import EXTRACTOR_VERSION

    run(linked_vault, linked_kodb)
    fresh = stored(linked_kodb)
    # Rows as an older vault-ko left them: other rules, no summary, none of today's facts.
    legacy = [
        (replace(n, extractor_version=old_version, summary=None), ())
        for n in linked_kodb.notes().values()
    ]
    linked_kodb.apply_ingest(legacy, [])
    assert stored(linked_kodb) != fresh
    report = run(linked_vault, linked_kodb)
    assert report.updated == len(legacy)
    assert stored(linked_kodb) == fresh
    notes = linked_kodb.notes().values()
    assert {n.extractor_version for n in notes} == {EXTRACTOR_VERSION}
    assert any(n.summary for n in notes)
    assert run(linked_vault, linked_kodb).updated == 0


# --- the resolver itself ----------------------------------------------------------------


def reg(path: str, title: str, subject: str | None = None) -> Note:
    return Note(path, title, "wiki", "h", 0.0, 1, subject)


def test_resolver_keys_are_path_stem_and_title_case_insensitive() -> None:
    resolver = LinkResolver.build([reg("adr/0007-use-redis.md", "0007 Use Redis")])
    for target in (
        "0007-use-redis",
        "0007-USE-REDIS",
        "adr/0007-use-redis",
        "0007 use redis",
        "adr/0007-use-redis.md",
    ):
        assert resolver(target) == "0007 Use Redis", target
    assert resolver("use-redis") is None
    assert resolver("wiki/0007-use-redis") is None


def test_resolver_ambiguous_stem_is_none_and_stronger_keys_win() -> None:
    resolver = LinkResolver.build(
        [reg("a/x.md", "Alpha"), reg("b/x.md", "Beta"), reg("x.md", "Root"), reg("c/y.md", "x")]
    )
    assert resolver("a/x") == "Alpha" and resolver("b/x") == "Beta"
    # "x" is the root note's path: a path beats the shared stem and the title "x".
    assert resolver("x") == "Root"
    two = LinkResolver.build([reg("a/x.md", "Alpha"), reg("b/x.md", "Beta")])
    assert two("x") is None
    same = LinkResolver.build([reg("a/x.md", "Alpha"), reg("b/x.md", "Other", "Alpha")])
    assert same("x") == "Alpha"  # both name the same subject: nothing to choose


def test_resolver_affected_terms_cover_changed_keys_their_segments_and_old_subjects() -> None:
    kafka = reg("wiki/kafka.md", "Kafka")
    old = LinkResolver.build([reg("adr/0007.md", "Old title", "Old subject"), kafka])
    new = LinkResolver.build([reg("adr/0007.md", "New title"), kafka])
    terms = old.affected_terms(new)
    assert {"adr/0007", "0007", "old title", "new title", "old subject"} <= terms
    assert not terms & {"kafka", "wiki/kafka"}
    assert old.affected_terms(old) == set()


def test_resolver_resolves_no_key_of_a_private_note_for_a_public_note() -> None:
    notes = [
        reg("private/plan-a.md", "Plan A draft", "Project Nightjarquux"),
        reg("wiki/vendor-review.md", "Vendor review"),
        reg("wiki/plan-b.md", "plan-a"),  # a public title equal to the private stem
    ]
    resolver = LinkResolver.build(notes, lambda p: p.startswith("private/"))
    for target in ("plan-a", "private/plan-a", "PRIVATE/plan-a.md", "plan a draft"):
        assert resolver(target) == "Project Nightjarquux", target  # a private note's link
        assert resolver.public(target) is None, target  # a public note's: as written
    # The stem outranks the public title "plan-a": the link names the private note.
    assert resolver.public("vendor-review") == resolver("vendor-review") == "Vendor review"
    assert resolver.private_subjects() == {"project nightjarquux"}
    assert LinkResolver.build(notes).public("plan-a") == "Project Nightjarquux"  # no globs


def test_resolver_affected_terms_cover_a_note_turned_private() -> None:
    notes = [reg("plans/plan-a.md", "Plan A", "Nightjarquux"), reg("wiki/x.md", "X")]
    public = LinkResolver.build(notes)
    private = LinkResolver.build(notes, lambda p: p.startswith("plans/"))
    terms = public.affected_terms(private)
    assert {"plan-a", "plans/plan-a", "plan a", "nightjarquux"} <= terms
    assert not terms & {"x", "wiki/x"}


PUBLIC_LINKER = "wiki/vendor-review.md"
PRIVATE_PLAN = "private/plan-a.md"
PLAN_NOTE = (
    "---\nsubject: Project Nightjarquux\naliases: [Nightjar alias]\n---\n"
    "# Plan A draft\n\nThe nightjarquux budget. See [[vendor-review]] and [[plan-b]].\n"
)
LINKER_NOTE = (
    "# Vendor review\n\nWe compared vendors; see [[plan-a]] for the plan "
    "and [[private/plan-a|its budget]].\n"
)


def secret_facts(facts: set[tuple[str, str, str, str]], path: str) -> set[tuple[str, ...]]:
    """The facts of ``path`` that carry anything the private plan says."""
    words = ("nightjar", "plan a draft")
    return {f for f in facts if f[0] == path and any(w in " ".join(f).casefold() for w in words)}


@pytest.fixture
def private_vault(tmp_path: Path) -> Path:
    vault = tmp_path / "private-vault"
    write(vault, PRIVATE_PLAN, PLAN_NOTE)
    write(vault, "private/plan-b.md", "---\nsubject: Plan B secret\n---\n# Plan B\n\nx\n")
    write(vault, PUBLIC_LINKER, LINKER_NOTE)
    return vault


PRIVATE = {"vault_private_globs": ("private/**",)}


def test_a_private_glob_that_matches_no_note_is_warned_of_once_a_process(
    private_vault: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    globs = {"vault_private_globs": ("private/**", "Private/", "privte/**")}
    with KoDB.open(f"sqlite:///{tmp_path / 'ko.db'}") as db, caplog.at_level("WARNING"):
        run(private_vault, db, **globs)
        run(private_vault, db, **globs)
    warned = [r.getMessage() for r in caplog.records if "matches no note" in r.getMessage()]
    assert len(warned) == 2  # a watcher ingests again and again: said once
    assert all("'Private/'" in w or "'privte/**'" in w for w in warned)


def test_notes_sharing_a_title_without_a_subject_are_warned_of_when_one_is_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    vault = tmp_path / "titles"
    write(vault, "sessions/a.md", "# Standup\n\nKafka lag.\n")
    write(vault, "sessions/b.md", "# Standup\n\nRedis failover.\n")
    write(vault, "wiki/c.md", "---\nsubject: Standup\n---\n# How we run standups\n\nx\n")
    with KoDB.open(f"sqlite:///{tmp_path / 'ko.db'}") as db, caplog.at_level("WARNING"):
        run(vault, db)
        first = [r.getMessage() for r in caplog.records if "titled" in r.getMessage()]
        caplog.clear()
        run(vault, db)  # nothing read: nothing said again
        assert not [r for r in caplog.records if "titled" in r.getMessage()]
        write(vault, "sessions/d.md", "# standup\n\nDeploy freeze.\n")
        run(vault, db)
        again = [r.getMessage() for r in caplog.records if "titled" in r.getMessage()]
    assert first == [
        "2 notes are titled 'Standup' (sessions/a.md, sessions/b.md): their facts are one "
        "subject; a `subject:` in a note's frontmatter tells it apart"
    ]
    assert len(again) == 1 and again[0].startswith("3 notes are titled")


def test_a_public_link_to_a_private_note_keeps_the_target_as_written(
    private_vault: Path, tmp_path: Path
) -> None:
    with KoDB.open(f"sqlite:///{tmp_path / 'ko.db'}") as db:
        run(private_vault, db, **PRIVATE)
        facts = stored(db)
    assert secret_facts(facts, PUBLIC_LINKER) == set()
    links = {o for p, _, pred, o in facts if p == PUBLIC_LINKER and pred == "links_to"}
    assert links == {"plan-a"}  # both links, by stem and by path: the target as written
    assert (PUBLIC_LINKER, "plan-a", "mentioned_in", "Vendor review") in facts
    # The private note's own links resolve as before: to a public and to a private note.
    assert (PRIVATE_PLAN, "Project Nightjarquux", "links_to", "Vendor review") in facts
    assert (PRIVATE_PLAN, "Project Nightjarquux", "links_to", "Plan B secret") in facts


def test_globs_covering_a_linked_note_later_re_extract_the_public_notes_linking_it(
    private_vault: Path, tmp_path: Path
) -> None:
    # A public note that names the private subject in its own words keeps its facts.
    write(private_vault, "wiki/own-words.md", "# Own words\n\nAbout [[Project Nightjarquux]].\n")
    with KoDB.open(f"sqlite:///{tmp_path / 'ko.db'}") as db:
        run(private_vault, db)  # no globs yet: the link resolves to the plan's subject
        assert secret_facts(stored(db), PUBLIC_LINKER)
        report = run(private_vault, db, **PRIVATE)
        # The two notes the globs now cover are read again (their opening lines stop
        # counting towards template lines), the public one linking the plan re-extracted.
        assert (report.updated, report.relinked) == (2, 1)
        assert run(private_vault, db, **PRIVATE).updated == 0
        facts = stored(db)
        assert secret_facts(facts, PUBLIC_LINKER) == set()
        assert facts == from_scratch_with(private_vault, tmp_path, **PRIVATE)
        assert run(private_vault, db, **PRIVATE).relinked == 0


def test_moving_a_linked_note_under_a_private_glob_re_extracts_the_public_notes_linking_it(
    private_vault: Path, tmp_path: Path
) -> None:
    (private_vault / PRIVATE_PLAN).rename(private_vault / "wiki/plan-a.md")
    with KoDB.open(f"sqlite:///{tmp_path / 'ko.db'}") as db:
        run(private_vault, db, **PRIVATE)
        assert secret_facts(stored(db), PUBLIC_LINKER)  # the plan is public here
        (private_vault / "wiki/plan-a.md").rename(private_vault / PRIVATE_PLAN)
        report = run(private_vault, db, **PRIVATE)
        assert (report.added, report.removed, report.relinked) == (1, 1, 1)
        assert secret_facts(stored(db), PUBLIC_LINKER) == set()
        assert stored(db) == from_scratch_with(private_vault, tmp_path, **PRIVATE)


def from_scratch_with(vault: Path, tmp_path: Path, **overrides: object) -> set[tuple[str, ...]]:
    """The facts a full ingest of the vault into a new KO-DB stores, with these settings."""
    url = f"sqlite:///{tmp_path / f'scratch-{len(list(tmp_path.iterdir()))}.db'}"
    with KoDB.open(url) as db:
        run(vault, db, **overrides)
        return stored(db)


def test_parsing_in_worker_processes_ingests_exactly_what_one_process_does(
    vault: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pipeline.ingest as ingest_module

    (vault / "wiki" / "Redis.md").write_text(  # a frontmatter mapping crosses the processes
        "---\naliases: [Remote Dictionary Server]\nowner: platform\n---\n# Redis\n\n"
        "An in-memory store, see [[Warm cache]].\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(ingest_module, "PARALLEL_MIN_NOTES", 2)
    pools: list[int] = []

    class CountedPool(ingest_module.ProcessPoolExecutor):
        def __init__(self, max_workers: int, **kw: object) -> None:
            pools.append(max_workers)
            super().__init__(max_workers, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(ingest_module, "ProcessPoolExecutor", CountedPool)
    reports = []
    contents = []
    for workers, name in ((1, "one.db"), (2, "two.db")):
        s = settings_for(
            vault, vault_parse_workers=workers, kodb_url=f"sqlite:///{tmp_path / name}"
        )
        with KoDB.open(s.effective_kodb_url) as db:
            report = ingest_vault(s, db)
            reports.append(replace(report, seconds=0.0))
            contents.append((db.notes(), stored(db), db.note_texts()))
    assert pools == [2]  # one process parsed the first vault, two the second
    assert reports[0] == reports[1]
    assert reports[0].added == len(GOOD) and len(reports[0].skipped) == len(BAD)
    assert contents[0] == contents[1]
    assert contents[0][0]["wiki/Redis.md"].title == "Redis"


def test_negative_parse_workers_is_a_config_error(vault: Path, kodb: KoDB) -> None:
    from pipeline.errors import ConfigError

    with pytest.raises(ConfigError, match="parse_workers"):
        run(vault, kodb, vault_parse_workers=-1)


def test_a_parsing_worker_that_dies_is_one_clear_error_and_nothing_is_written(
    vault: Path, kodb: KoDB, monkeypatch: pytest.MonkeyPatch
) -> None:
    from concurrent.futures.process import BrokenProcessPool

    import pipeline.ingest as ingest_module
    from pipeline.errors import VaultKoError

    class DyingPool:
        def __init__(self, *args: object, **kw: object) -> None: ...

        def __enter__(self) -> DyingPool:
            return self

        def __exit__(self, *exc: object) -> None: ...

        def map(self, *args: object, **kw: object) -> Iterator[object]:
            raise BrokenProcessPool("A process in the process pool was terminated abruptly")

    monkeypatch.setattr(ingest_module, "PARALLEL_MIN_NOTES", 2)
    monkeypatch.setattr(ingest_module, "ProcessPoolExecutor", DyingPool)
    with pytest.raises(VaultKoError, match="parse_workers = 1"):
        run(vault, kodb, vault_parse_workers=2)
    assert kodb.notes() == {} and kodb.count_facts() == 0


@pytest.mark.parametrize(
    ("front", "language", "warned"),
    [
        ("", "english", False),
        ("lang: hu\n", "hungarian", False),
        ("lang: de-AT\n", "german", False),
        ("lang: none\n", "none", False),
        ("lang: klingon\n", "english", True),
        ("language: Rust\n", "english", False),  # a property, not the note's language
    ],
)
def test_a_note_is_indexed_in_its_own_lang_else_the_vaults(
    front: str, language: str, warned: bool, caplog: pytest.LogCaptureFixture
) -> None:
    from pipeline.ingest import note_text
    from pipeline.vault.parse import parse_note

    raw = f"---\n{front}title: X\n---\nBody.\n".encode()
    with caplog.at_level("WARNING", logger="pipeline.ingest"):
        text = note_text(parse_note(raw, "wiki/x.md", "wiki"), "english")
    assert text.language == language
    assert ("wiki/x.md: lang 'klingon' names no stemmer" in caplog.text) is warned


def test_a_title_or_subject_that_is_a_list_is_warned_of(caplog: pytest.LogCaptureFixture) -> None:
    # It was dropped without a word: "Pangolin" was never the note's subject.
    from pipeline.ingest import note_text
    from pipeline.vault.parse import parse_note

    raw = b"---\ntitle: [First, Second]\nsubject: [Pangolin, Armadillo]\n---\n# Heading\n"
    with caplog.at_level("WARNING", logger="pipeline.ingest"):
        note = parse_note(raw, "wiki/x.md", "wiki")
        note_text(note, "english")
    assert note.title == "Heading"
    assert "wiki/x.md: title is a list or a mapping, not text" in caplog.text
    assert "wiki/x.md: subject is a list or a mapping, not text; its title is used" in caplog.text


def test_a_note_whose_stated_day_cannot_be_read_is_ingested_undated_with_a_warning(
    vault: Path, kodb: KoDB, caplog: pytest.LogCaptureFixture
) -> None:
    (vault / "wiki" / "swapped.md").write_text("---\ndate: 2023-13-10\n---\n# Swapped\n\nText.\n")
    with caplog.at_level("WARNING", logger="pipeline.ingest"):
        report = run(vault, kodb)
    assert "wiki/swapped.md" not in {s.path for s in report.skipped}
    assert kodb.notes()["wiki/swapped.md"].date is None
    said = [r.getMessage() for r in caplog.records if "swapped" in r.getMessage()]
    assert said == [
        "wiki/swapped.md: its date '2023-13-10' is not a day as YYYY-MM-DD: the note is undated"
    ]
    caplog.clear()
    with caplog.at_level("WARNING", logger="pipeline.ingest"):
        run(vault, kodb)  # unchanged: not read again, not said again
    assert not [r for r in caplog.records if "swapped" in r.getMessage()]
