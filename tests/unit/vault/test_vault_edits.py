"""Notes edited since the last sync, counted for a cold answer (pipeline/vault/edits.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from pipeline.config import load_settings
from pipeline.model import NoteStamp, UnsyncedEdits
from pipeline.vault.edits import VERIFY_LIMIT, unsynced_edits
from pipeline.vault.parse import read_note


def vault_with(tmp_path: Path, notes: dict[str, str]) -> tuple[Any, dict[str, NoteStamp]]:
    """A vault of ``notes`` and the registry a sync of it leaves (mtime, size, hash)."""
    for rel, text in notes.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    settings = load_settings(tmp_path, env={})
    registry = {}
    for rel in notes:
        parsed = read_note(tmp_path, rel, "wiki", settings.vault_max_note_bytes)
        st = (tmp_path / rel).stat()
        registry[rel] = NoteStamp(st.st_mtime, st.st_size, parsed.content_hash)
    return settings, registry


NOTES = {"wiki/redis.md": "# Redis\n\nA store.\n", "wiki/kafka.md": "# Kafka\n\nA log.\n"}


def test_a_synced_vault_has_no_unsynced_edits(tmp_path: Path) -> None:
    settings, registry = vault_with(tmp_path, NOTES)
    assert unsynced_edits(settings, registry) == UnsyncedEdits(0, 0, 0)


def test_edited_new_and_deleted_notes_are_counted(tmp_path: Path) -> None:
    settings, registry = vault_with(tmp_path, NOTES)
    (tmp_path / "wiki/redis.md").write_text("# Redis\n\nA store, and a cache.\n")
    (tmp_path / "wiki/kafka.md").unlink()
    (tmp_path / "wiki/new.md").write_text("# New\n\nText.\n")
    assert unsynced_edits(settings, registry) == UnsyncedEdits(changed=1, added=1, removed=1)


def test_a_touched_note_with_the_same_bytes_is_no_edit(tmp_path: Path) -> None:
    settings, registry = vault_with(tmp_path, NOTES)
    later = registry["wiki/redis.md"].mtime + 60
    os.utime(tmp_path / "wiki/redis.md", (later, later))
    assert unsynced_edits(settings, registry).total == 0


def test_files_sync_would_skip_are_no_edits_but_are_counted_unreadable(tmp_path: Path) -> None:
    """A new file that will not parse, one over the size limit, and a registered note grown
    past it or turned bad: sync skips each (keeping what the note said) and says why, so
    they are no edits to apply; but the answer cannot see what they say now."""
    settings, registry = vault_with(tmp_path, {**NOTES, "wiki/grown.md": "# Grown\n"})
    limit = settings.vault_max_note_bytes
    (tmp_path / "wiki/broken.md").write_text("---\ntitle: [unclosed\n---\n# Broken\n")
    (tmp_path / "wiki/huge.md").write_text("x" * (limit + 1))
    (tmp_path / "wiki/grown.md").write_text("# Grown\n" + "x" * limit)
    (tmp_path / "wiki/redis.md").write_text("---\ntitle: [unclosed\n---\n# Redis\n")
    edits = unsynced_edits(settings, registry)
    assert edits == UnsyncedEdits(unreadable=4) and edits.total == 0


def test_a_note_that_cannot_be_opened_is_unreadable_and_one_gone_since_the_scan_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings, registry = vault_with(tmp_path, NOTES)
    (tmp_path / "wiki/locked.md").write_text("# Locked\n")
    (tmp_path / "wiki/gone.md").write_text("# Gone\n")
    real = Path.read_bytes

    def read_bytes(self: Path) -> bytes:
        if self.name == "locked.md":
            raise PermissionError(13, "Permission denied")
        if self.name == "gone.md":
            raise FileNotFoundError(2, "No such file or directory")
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    assert unsynced_edits(settings, registry) == UnsyncedEdits(unreadable=1)


def test_files_over_the_size_limit_are_no_edits_even_past_the_read_limit(
    tmp_path: Path,
) -> None:
    """Past the read limit nothing is read, and oversized files still count as unreadable,
    by their size alone."""
    settings, registry = vault_with(tmp_path, NOTES)
    for i in range(VERIFY_LIMIT + 1):
        (tmp_path / f"wiki/huge{i}.md").write_text("x" * (settings.vault_max_note_bytes + 1))
    assert unsynced_edits(settings, registry) == UnsyncedEdits(unreadable=VERIFY_LIMIT + 1)


def test_the_state_folder_and_skipped_folders_are_not_notes(tmp_path: Path) -> None:
    settings, registry = vault_with(tmp_path, NOTES)
    (tmp_path / ".vault-ko").mkdir(exist_ok=True)
    (tmp_path / ".vault-ko" / "x.md").write_text("# state\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "y.md").write_text("# git\n")
    assert unsynced_edits(settings, registry).total == 0


def test_past_the_limit_differing_notes_count_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkout touching every note before a sync: counting must not read them all."""
    many = {f"wiki/n{i}.md": f"# N{i}\n" for i in range(VERIFY_LIMIT + 1)}
    settings, registry = vault_with(tmp_path, many)
    for rel in many:
        later = registry[rel].mtime + 60
        os.utime(tmp_path / rel, (later, later))

    def unread(*args: object, **kw: object) -> bytes:
        raise AssertionError("a note was read")

    monkeypatch.setattr(Path, "read_bytes", unread)
    assert unsynced_edits(settings, registry) == UnsyncedEdits(changed=VERIFY_LIMIT + 1)


def test_an_answer_s_notes_edited_or_deleted_since_the_sync_are_told_apart(tmp_path: Path) -> None:
    from pipeline.vault.edits import since_sync

    notes = {**NOTES, "wiki/same.md": "# Same\n\nText.\n"}
    settings, registry = vault_with(tmp_path, notes)
    (tmp_path / "wiki/redis.md").write_text("# Redis\n\nA store, and a cache.\n")
    (tmp_path / "wiki/kafka.md").unlink()
    later = registry["wiki/same.md"].mtime + 60
    os.utime(tmp_path / "wiki/same.md", (later, later))  # touched, the same bytes
    paths = ["wiki/redis.md", "wiki/kafka.md", "wiki/same.md", "wiki/unknown.md"]
    assert since_sync(settings, registry, paths) == {
        "wiki/redis.md": "edited",
        "wiki/kafka.md": "deleted",
    }
