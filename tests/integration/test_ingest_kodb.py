"""Ingesting the sample vault into KO-DB on a real SQLite file and a real PostgreSQL database."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pipeline.config import Settings, load_settings
from pipeline.ingest import IngestReport, LinkResolver, ingest_vault
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
    notes = [
        read_note(vault, scanned.path, scanned.source_type, LIMIT)
        for scanned in scan_vault(settings)
        if not scanned.path.startswith("wiki/broken/")
    ]
    resolver = LinkResolver.from_parsed(notes)
    return {
        (f.source_file, f.subject, f.predicate, f.object, f.extractor, f.confidence)
        for note in notes
        for f in extract_facts(note, resolver)
    }


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
        ("Rewritten", "title", "Rewritten"),
        ("Rewritten", "summary", "Only about Zebra stripes now. #zoo"),
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


def test_a_sync_after_edits_leaves_nothing_unsynced_for_a_cold_answer(
    vault: Path, kodb: KoDB
) -> None:
    """Every note touched (a checkout: more than the check reads), one edited, one turned
    bad, one new: before the ingest a cold answer's comparison counts them; after it, no edit
    (the bad one and the broken notes count as unreadable),
    and touched notes carry their new stamps, so the next comparison reads nothing."""
    from pipeline.model import UnsyncedEdits
    from pipeline.vault.edits import VERIFY_LIMIT, unsynced_edits

    settings = settings_for(vault)
    ingest(vault, kodb)
    # The deliberately broken notes (and the huge one) are no edits, but no answer sees them.
    broken = len(list((vault / "wiki" / "broken").glob("*.md")))
    assert unsynced_edits(settings, kodb.note_stamps()) == UnsyncedEdits(unreadable=broken)
    notes = sorted(vault.rglob("*.md"))
    assert len(notes) > VERIFY_LIMIT
    for note in notes:
        touch(note)
    adrs = sorted((vault / "adr").glob("*.md"))
    adrs[0].write_bytes(adrs[0].read_bytes() + b"\nEdited.\n")
    adrs[1].write_bytes(adrs[1].read_bytes() + b"\n\xff\xfe broken bytes\n")
    (vault / "wiki" / "new-note.md").write_text("# New note\n\nText.\n", encoding="utf-8")
    assert unsynced_edits(settings, kodb.note_stamps()).total > VERIFY_LIMIT
    ingest(vault, kodb)
    # The ADR turned bad keeps what it said before: unreadable as it stands, no edit.
    assert unsynced_edits(settings, kodb.note_stamps()) == UnsyncedEdits(unreadable=broken + 1)
    rel = adrs[2].relative_to(vault).as_posix()
    assert kodb.note_stamps()[rel].mtime == adrs[2].stat().st_mtime


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


# --- link resolution --------------------------------------------------------------------

ADR_0007 = "adr/0007-use-redis-as-the-warm-cache.md"
ADR_0007_TITLE = "0007 Use Redis as the warm cache"


def from_scratch(vault: Path, tmp_path: Path, name: str) -> set[Row]:
    """Every fact a full ingest of the vault into a new database stores."""
    with KoDB.open(f"sqlite:///{tmp_path / f'{name}.db'}") as db:
        ingest(vault, db)
        return rows(db)


def edit(vault: Path, rel: str, old: str, new: str) -> None:
    path = vault / rel
    text = path.read_text(encoding="utf-8")
    assert old in text, (rel, old)
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    touch(path)


def test_adr_linked_by_file_name_gathers_the_linking_notes_facts(vault: Path, kodb: KoDB) -> None:
    ingest(vault, kodb)
    about = {r for r in rows(kodb) if r[1] == ADR_0007_TITLE}
    files = {r[0] for r in about}
    assert ADR_0007 in files
    assert {"wiki/warm-cache.md", "wiki/redis.md"} <= files
    assert {r[2] for r in about if r[0] != ADR_0007} >= {"mentioned_in", "context"}
    assert not any(r[1] == "0007-use-redis-as-the-warm-cache" for r in rows(kodb))


def test_incremental_ingest_equals_a_full_ingest_after_a_sequence_of_edits(
    vault: Path, kodb: KoDB, tmp_path: Path
) -> None:
    ingest(vault, kodb)
    steps: list[tuple[str, Callable[[], None]]] = [
        (
            "retitle an ADR linked by file name",
            lambda: edit(vault, ADR_0007, ADR_0007_TITLE, "0007 Redis for the warm cache"),
        ),
        (
            "give an ADR a frontmatter subject",
            lambda: edit(
                vault,
                "adr/0020-move-billing-events-off-the-shared-cluster.md",
                "title:",
                "subject: Billing events cluster\ntitle:",
            ),
        ),
        (
            "add a note some notes already linked to",
            lambda: (vault / "wiki" / "CI runner disk.md").write_text(
                "---\ntitle: CI runner disk space\n---\nRunners fill up with [[Docker]] layers.\n",
                encoding="utf-8",
            ),
        ),
        (
            "add a second file with an ADR's stem (ambiguous)",
            lambda: (vault / "wiki" / "0007-use-redis-as-the-warm-cache.md").write_text(
                "# Draft of the warm cache ADR\n\nSee [[Redis]].\n", encoding="utf-8"
            ),
        ),
        (
            "rename a linked ADR file",
            lambda: (vault / "adr" / "0014-move-feature-flags-in-house-on-postgresql.md").rename(
                vault / "adr" / "0014-feature-flags-in-house.md"
            ),
        ),
        ("delete the ambiguous copy", lambda: (vault / "wiki" / ADR_0007.split("/")[1]).unlink()),
        ("delete the added note", lambda: (vault / "wiki" / "CI runner disk.md").unlink()),
    ]
    relinked = 0
    for n, (what, step) in enumerate(steps):
        step()
        report = ingest(vault, kodb)
        relinked += report.relinked
        assert rows(kodb) == from_scratch(vault, tmp_path, f"step{n}"), what
        assert report.unchanged + report.added + report.updated + len(report.skipped) == (
            report.scanned
        )
    assert relinked > 0  # the steps did make unchanged notes resolve differently


LAST_NOTES = "Last week's notes are linked here: https://docs.example.com/d/{:04d}x"


def meeting(day: int, own: str, *, template: bool = True) -> str:
    """A meeting note as a minutes template writes it: a link to the last notes and the
    attendees above what was said."""
    head = (
        f"{LAST_NOTES.format(day)}\n\n"
        "## Team\n\n* Ada Example @ada (core team member)\n"
        "* Grace Sample @grace (core team member)\n\n"
        if template
        else ""
    )
    return f"# Meeting 2026-03-{day:02d}\n\n{head}## Agenda\n\n{own}\n"


def summaries(kodb: KoDB) -> dict[str, str | None]:
    return {p: n.summary for p, n in kodb.notes().items() if p.startswith("minutes/")}


def openings(kodb: KoDB) -> dict[str, set[int]]:
    return kodb.openings_of(kodb.notes())


def assert_as_a_full_ingest(vault: Path, kodb: KoDB, tmp_path: Path, name: str) -> None:
    """The facts (summaries among them) and the opening keys a full ingest stores."""
    with KoDB.open(f"sqlite:///{tmp_path / f'{name}.db'}") as db:
        ingest(vault, db)
        assert (rows(kodb), openings(kodb)) == (rows(db), openings(db)), name


def test_template_lines_are_no_summary_and_incremental_runs_follow_the_count(
    tmp_path: Path, kodb: KoDB
) -> None:
    vault = tmp_path / "minutes-vault"
    (vault / "minutes").mkdir(parents=True)
    said = {
        d: f"Security releases for the {w} line went out on Tuesday after a long review."
        for d, w in ((4, "first"), (11, "second"), (18, "third"), (25, "fourth"))
    }
    for d, text in said.items():
        (vault / "minutes" / f"2026-03-{d:02d}.md").write_text(meeting(d, text), encoding="utf-8")
    # A note that opens with a template line only keeps it, whatever the count.
    (vault / "minutes" / "2026-03-28.md").write_text(meeting(28, "Short."), encoding="utf-8")
    only = {"minutes/2026-03-28.md": LAST_NOTES.format(28)}
    first = ingest(vault, kodb)
    assert first.resummarised == 0
    # Five notes open with the link to the last notes and the attendees: templates.
    assert summaries(kodb) == {f"minutes/2026-03-{d:02d}.md": t for d, t in said.items()} | only
    assert_as_a_full_ingest(vault, kodb, tmp_path, "five")

    # Three notes go: the template lines open two notes now, so they are the two left's own
    # words again, and the unchanged notes are re-read for it (the one whose summary stays
    # is not written).
    for d in (18, 25, 28):
        (vault / "minutes" / f"2026-03-{d:02d}.md").unlink()
    report = ingest(vault, kodb)
    assert (report.removed, report.resummarised) == (3, 2)
    assert set(summaries(kodb).values()) == {LAST_NOTES.format(4), LAST_NOTES.format(11)}
    assert_as_a_full_ingest(vault, kodb, tmp_path, "two")

    # A third minutes note makes them templates again; one written without the template
    # does not.
    (vault / "minutes" / "2026-03-30.md").write_text(
        meeting(30, "Nothing was decided.", template=False), encoding="utf-8"
    )
    assert ingest(vault, kodb).resummarised == 0
    (vault / "minutes" / "2026-03-18.md").write_text(meeting(18, said[18]), encoding="utf-8")
    report = ingest(vault, kodb)
    assert (report.added, report.resummarised) == (1, 2)
    assert summaries(kodb) == {
        **{f"minutes/2026-03-{d:02d}.md": said[d] for d in (4, 11, 18)},
        "minutes/2026-03-30.md": "Nothing was decided.",
    }
    assert_as_a_full_ingest(vault, kodb, tmp_path, "three")
    assert ingest(vault, kodb).resummarised == 0  # nothing changed: nothing re-read

    # An edit drops the link from one note: it opens two notes, and is their summary again;
    # the attendees still open three.
    edit(vault, "minutes/2026-03-18.md", LAST_NOTES.format(18), "")
    report = ingest(vault, kodb)
    assert (report.updated, report.resummarised) == (1, 2)
    assert summaries(kodb)["minutes/2026-03-04.md"] == LAST_NOTES.format(4)
    assert summaries(kodb)["minutes/2026-03-18.md"] == said[18]
    assert_as_a_full_ingest(vault, kodb, tmp_path, "edited")


#: Meeting days and a word each says of its own (digits do not tell paragraphs apart).
WORDS = {4: "spring", 11: "security", 18: "nightly"}


def test_private_notes_do_not_make_template_lines(tmp_path: Path, kodb: KoDB) -> None:
    vault = tmp_path / "minutes-vault"
    for folder in ("minutes", "private"):
        (vault / folder).mkdir(parents=True)
    (vault / "vault-ko.toml").write_text('[vault]\nprivate_globs = ["private/**"]\n', "utf-8")
    said = {d: f"The {w} release was approved by the whole team." for d, w in WORDS.items()}
    for d, folder in ((4, "minutes"), (11, "minutes"), (18, "private")):
        (vault / folder / f"2026-03-{d:02d}.md").write_text(meeting(d, said[d]), "utf-8")
    ingest(vault, kodb)
    # Two public notes open with the line; the private third does not count.
    assert summaries(kodb) == {
        "minutes/2026-03-04.md": LAST_NOTES.format(4),
        "minutes/2026-03-11.md": LAST_NOTES.format(11),
    }
    assert "private/2026-03-18.md" not in openings(kodb)
    assert_as_a_full_ingest(vault, kodb, tmp_path, "private")

    # The globs change: the note turns public, is read again and counts; then private again.
    toml = vault / "vault-ko.toml"
    toml.write_text('[vault]\nprivate_globs = ["secret/**"]\n', "utf-8")
    report = ingest(vault, kodb)
    assert (report.updated, report.resummarised) == (1, 2)
    assert summaries(kodb) == {
        "minutes/2026-03-04.md": said[4],
        "minutes/2026-03-11.md": said[11],
    }
    assert kodb.notes()["private/2026-03-18.md"].summary == said[18]
    assert "private/2026-03-18.md" in openings(kodb)
    assert_as_a_full_ingest(vault, kodb, tmp_path, "public")
    toml.write_text('[vault]\nprivate_globs = ["private/**"]\n', "utf-8")
    report = ingest(vault, kodb)
    assert (report.updated, report.resummarised) == (1, 2)
    assert "private/2026-03-18.md" not in openings(kodb)
    assert_as_a_full_ingest(vault, kodb, tmp_path, "private-again")


def test_an_old_kodb_gets_summaries_without_template_lines_at_the_next_ingest(
    tmp_path: Path, kodb_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipeline import ingest as ingest_module
    from pipeline.kodb import schema as kodb_schema
    from tests.integration.kodb.test_kodb_store import as_code_before_migration_15

    vault = tmp_path / "minutes-vault"
    (vault / "minutes").mkdir(parents=True)
    said = {d: f"The {w} release was approved by the whole team." for d, w in WORDS.items()}
    for d, text in said.items():
        (vault / "minutes" / f"2026-03-{d:02d}.md").write_text(meeting(d, text), "utf-8")
    settings_ = load_settings(vault, env={}).replace(kodb_url=kodb_url)
    with monkeypatch.context() as patch:  # a KO-DB vault-ko wrote before migration 15
        patch.setattr(kodb_schema, "MIGRATIONS", kodb_schema.MIGRATIONS[:14])
        patch.setattr(ingest_module, "EXTRACTOR_VERSION", 9)
        as_code_before_migration_15(patch)
        with KoDB.open(kodb_url) as old:
            ingest_vault(settings_, old)
            assert set(summaries(old).values()) == {LAST_NOTES.format(d) for d in WORDS}
    with KoDB.open(kodb_url) as db:
        assert openings(db) == {}  # migrated: the table is there, empty
        report = ingest_vault(settings_, db)
        assert report.updated == report.notes_total == 3
        assert summaries(db) == {f"minutes/2026-03-{d:02d}.md": t for d, t in said.items()}
        assert len(openings(db)) == 3
        assert ingest_vault(settings_, db).updated == 0  # done once
