"""Vault scanning: which files are notes, their order, and their source types."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipeline.config import load_settings
from pipeline.vault.scan import glob_match, scan_vault, scans_folder


def make(root: Path, *paths: str) -> None:
    for rel in paths:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {path.stem}\n", encoding="utf-8")


def scan(root: Path, **overrides: object) -> list[tuple[str, str]]:
    settings = load_settings(root, overrides=overrides, env={}, cwd=root)
    return [(f.path, f.source_type) for f in scan_vault(settings)]


def test_skips_editor_trash_git_state_dir_and_non_markdown(tmp_path: Path) -> None:
    make(
        tmp_path,
        "wiki/Redis.md",
        ".obsidian/workspace.md",
        ".trash/old.md",
        ".git/notes.md",
        ".vault-ko/cache.md",
        "wiki/diagram.png",
        "wiki/readme.txt",
        "wiki/Kafka.markdown",
        "Top.md",
    )
    assert scan(tmp_path) == [("Top.md", "wiki"), ("wiki/Redis.md", "wiki")]


def test_source_types_from_default_globs(tmp_path: Path) -> None:
    make(
        tmp_path,
        "sessions/2024/01/monday.md",
        "daily/2024-01-02.md",
        "journal/j.md",
        "adr/0001-x.md",
        "decisions/d.md",
        "wiki/w.md",
        "notes/adr/not-top-level.md",
    )
    assert dict(scan(tmp_path)) == {
        "sessions/2024/01/monday.md": "session",
        "daily/2024-01-02.md": "session",
        "journal/j.md": "session",
        "adr/0001-x.md": "adr",
        "decisions/d.md": "adr",
        "wiki/w.md": "wiki",
        "notes/adr/not-top-level.md": "wiki",
    }


def test_configured_globs_and_excludes(tmp_path: Path) -> None:
    make(tmp_path, "log/a.md", "rfc/b.md", "wiki/draft-c.md", "wiki/deep/draft-d.md", "x/e.md")
    found = scan(
        tmp_path,
        vault_session_globs=["log/**"],
        vault_adr_globs="rfc/*.md",
        vault_exclude_globs=["draft-*.md", "x/**"],
    )
    assert found == [("log/a.md", "session"), ("rfc/b.md", "adr")]


def test_custom_state_dir_inside_the_vault_is_skipped(tmp_path: Path) -> None:
    make(tmp_path, "wiki/a.md", "state/inner.md")
    settings = load_settings(
        tmp_path, env={"VAULT_KO_STATE_DIR": str(tmp_path / "state")}, cwd=tmp_path
    )
    assert [f.path for f in scan_vault(settings)] == ["wiki/a.md"]


def test_paths_are_sorted_posix_with_size_and_mtime(tmp_path: Path) -> None:
    make(tmp_path, "b/z.md", "a/y.md", "a.md", "B.md")
    settings = load_settings(tmp_path, env={}, cwd=tmp_path)
    files = scan_vault(settings)
    assert [f.path for f in files] == ["B.md", "a.md", "a/y.md", "b/z.md"]
    stat = (tmp_path / "a/y.md").stat()
    assert (files[2].bytes, files[2].mtime) == (stat.st_size, stat.st_mtime)


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symlinks on this platform")
def test_symlinks_escaping_the_vault_are_skipped(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    outside = tmp_path / "outside"
    make(vault, "wiki/a.md")
    make(outside, "secret.md", "dir/inner.md")
    (vault / "wiki/link-out.md").symlink_to(outside / "secret.md")
    (vault / "linked-dir").symlink_to(outside / "dir")
    (vault / "wiki/link-in.md").symlink_to(vault / "wiki/a.md")
    (vault / "wiki/loop").symlink_to(vault / "wiki")
    (vault / "wiki/self-a.md").symlink_to(vault / "wiki/self-b.md")
    (vault / "wiki/self-b.md").symlink_to(vault / "wiki/self-a.md")
    (vault / "wiki/dangling.md").symlink_to(vault / "wiki/gone.md")
    make(vault, ".hidden/b.md", "docs/x.md")
    (vault / "wiki/to-hidden.md").symlink_to(vault / ".hidden/b.md")
    (vault / "a-docs").symlink_to(vault / "docs")  # walked first, under the link's name
    (vault / "wiki/x.md").symlink_to(vault / "docs/x.md")
    (vault / "wiki/x-again.md").symlink_to(vault / "docs/x.md")
    rejected: list[tuple[str, str]] = []
    settings = load_settings(vault, env={}, cwd=vault)
    # A link to a note of the vault is that note, read once (it counted as a second source
    # of every fact), wherever the walk met it.
    assert [f.path for f in scan_vault(settings, rejected)] == ["a-docs/x.md", "wiki/a.md"]
    assert dict(rejected) == {
        "wiki/dangling.md": "a symlink to nothing (its target is gone)",
        "wiki/link-in.md": "a symlink to wiki/a.md, read once there",
        "wiki/link-out.md": "a symlink that leads out of the vault (not followed)",
        "wiki/self-a.md": "a symlink loop",
        "wiki/self-b.md": "a symlink loop",
        "wiki/to-hidden.md": "a symlink into a hidden folder (not read)",
        "wiki/x-again.md": "a symlink to a-docs/x.md, read once there",
        "wiki/x.md": "a symlink to a-docs/x.md, read once there",
    }


def test_hidden_folders_and_notes_are_not_scanned(tmp_path: Path) -> None:
    # Obsidian shows none of them: a sync tool's old versions would answer as current notes.
    make(tmp_path, "a.md", ".stversions/a~20260101.md", ".github/PULL_REQUEST_TEMPLATE.md")
    make(tmp_path, "wiki/.draft.md", "wiki/b.md")
    assert [p for p, _ in scan(tmp_path)] == ["a.md", "wiki/b.md"]


@pytest.mark.parametrize(
    ("path", "pattern", "expected"),
    [
        ("sessions/a.md", "sessions/**", True),
        ("sessions/x/y/a.md", "sessions/**", True),
        ("wiki/sessions/a.md", "sessions/**", False),
        ("a.md", "**/a.md", True),
        ("x/y/a.md", "**/a.md", True),
        ("x/a.md", "*/a.md", True),
        ("x/y/a.md", "*/a.md", False),
        ("x/y/tmp-1.md", "tmp-?.md", True),
        ("x/y/tmp-12.md", "tmp-?.md", False),
        ("adr/0001.md", "adr/[0-9]*.md", True),
        ("adr/x001.md", "adr/[!0-9]*.md", True),
        ("adr/0001.md", "adr/[!0-9]*.md", False),
        ("Sessions/a.md", "sessions/**", False),
    ],
)
def test_glob_semantics(path: str, pattern: str, expected: bool) -> None:
    assert glob_match(path, [pattern]) is expected


def test_a_folder_listed_but_not_entered_is_unreadable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # chmod -R 644: the names can be listed, each note's lstat fails; not "removed".
    make(tmp_path, "a.md", "locked/b.md", "locked/c.md")
    real = os.lstat

    def lstat(path: object, *args: object, **kw: object) -> os.stat_result:
        if "locked" in os.fsdecode(path):  # type: ignore[arg-type]
            raise PermissionError(13, "Permission denied", os.fsdecode(path))  # type: ignore[arg-type]
        return real(path, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "lstat", lstat)
    unreadable: list[tuple[str, str]] = []
    settings = load_settings(tmp_path, env={}, cwd=tmp_path)
    assert [f.path for f in scan_vault(settings, unreadable=unreadable)] == ["a.md"]
    assert unreadable == [("locked", "Permission denied")]


def test_a_folder_is_scanned_when_notes_written_there_would_be_read(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    make(vault, "wiki/a.md")
    settings = load_settings(vault, overrides={"vault_exclude_globs": ["x/**"]}, env={}, cwd=vault)
    for folder, read in (
        (vault, True),
        (vault / "packs", True),  # not made yet
        (vault / "wiki" / "deep" / "packs", True),
        (vault / ".packs", False),
        (vault / "wiki" / ".hidden" / "packs", False),
        (vault / ".vault-ko" / "packs", False),
        (vault / "x" / "packs", False),
        (tmp_path / "packs", False),
        (vault / ".." / "packs", False),
    ):
        assert scans_folder(settings, folder) is read, folder


@pytest.mark.parametrize(
    ("path", "pattern", "expected"),
    [
        # As .gitignore writes a folder, and a leading "./".
        ("Private/diary.md", "Private/", True),
        ("Private/deep/diary.md", "Private/", True),
        ("wiki/Private/diary.md", "Private/", True),
        ("Private.md", "Private/", False),
        ("Private/diary.md", "Private", True),
        ("wiki/Private/diary.md", "Private", True),
        ("wiki/Privately.md", "Private", False),
        ("Private/diary.md", "./Private/**", True),
        ("wiki/Private/diary.md", "./Private/**", False),
        ("docs/Private/a.md", "docs/Private/", True),
        ("Private/diary.md", "private/**", False),  # case-sensitive, as the file system
    ],
)
def test_folder_globs_are_read_as_gitignore_reads_them(
    path: str, pattern: str, expected: bool
) -> None:
    assert glob_match(path, [pattern]) is expected


@pytest.mark.parametrize("pattern", ["./Private", "/Private", "./Private/", "/Private/"])
def test_a_leading_slash_or_dot_ties_a_folder_name_to_the_vault_top(pattern: str) -> None:
    assert glob_match("Private/a.md", [pattern])
    assert not glob_match("notes/Private/a.md", [pattern])
