"""A vault full of hostile files: every bad note is skipped with its path and a reason, the
good ones are ingested, nothing outside the vault is read, no YAML tag is executed, and a
second run changes nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from pipeline.config import load_settings
from pipeline.ingest import ingest_vault
from pipeline.kodb import KoDB
from pipeline.model import normalize_text
from pipeline.vault import extract

FIFTY_MB = 50 * 1024 * 1024


def _write(vault: Path, name: str | bytes, data: bytes) -> None:
    target = os.path.join(os.fsencode(vault), name if isinstance(name, bytes) else name.encode())
    with open(target, "wb") as fh:
        fh.write(data)


def hostile_vault(root: Path, marker: Path) -> tuple[Path, dict[str, str], set[str]]:
    """(vault, {skipped path: reason fragment}, paths that must be ingested)."""
    vault = root / "vault"
    vault.mkdir()
    outside = root / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("# Secret\n\nThe launch code is 0000.\n")
    good = b"# Good\n\nThis note is about [[Redis]] as the warm cache of the API.\n"
    _write(vault, "good.md", good)
    # Names that are legal on Linux and hostile to terminals and logs.
    _write(vault, b"new\nline.md", b"# Newline name\n\nA note whose file name holds a newline.\n")
    _write(vault, "rtl\u202egpj.md", b"# RTL name\n\nA right-to-left override in the name.\n")
    _write(vault, b"latin1-\xe9t\xe9.md", b"# Latin-1 name\n")
    # Content.
    tag = f"---\nx: !!python/object/apply:os.system ['touch {marker}']\n---\n# Tag\n"
    _write(vault, "yaml-tag.md", tag.encode())
    _write(vault, "malformed.md", b"---\na: [1, 2\nb: }\n---\n# M\n")
    _write(vault, "nested.md", b"---\na: " + b"[" * 5000 + b"]" * 5000 + b"\n---\n# N\n")
    _write(vault, "unhashable-key.md", b"---\n? [a, b]\n: c\n---\n# K\n")
    typed = (
        b"---\ndate: 2024-01-02\nat: 2024-01-02T10:00:00\nn: 3\nf: 1.5\nyes: true\n"
        b"none: null\nnan: .nan\ninf: -.inf\n2024-05-05: a date key\n7: an int key\n"
        b"lst: [2024-01-01, 3, false, {a: 1}]\n---\n# Typed\n\nValues of every YAML type.\n"
    )
    _write(vault, "typed.md", typed)
    _write(vault, "utf16.md", "# UTF-16\n\nhello".encode("utf-16"))
    _write(vault, "nul.md", b"# Nul\n\nabc\x00def\n")
    _write(vault, "binary.md", bytes(range(256)) * 8)
    _write(vault, "latin1.md", "# Café\n".encode("latin-1"))
    _write(vault, "cesu-surrogate.md", b"# S\n\n\xed\xa0\x80 an encoded lone surrogate\n")
    # Obsidian syntax the parser stands in for internally (escapes, entities, code inside
    # links, a literal U+FFFC): the stand-in must never reach a fact.
    table = (
        "| Setting | Where |\n|---|---|\n"
        "| folder | [[Configuration folder\\|Config directory]] |\n"
        "| mixed | [[AT&amp;T]] [[a\\_b]] [[x `y` z]] [[obj\ufffcect]] `c\ufffcode` |\n\n"
        "owner:: [[Ops team\\|Ops]]\n"
    )
    _write(vault, "placeholders.md", table.encode())
    _write(vault, "unclosed.md", b"---\nsubject: Lost\ntags: [x]\n\n# Unclosed\n")
    _write(vault, "duplicate-key.md", b"---\nsubject: A\nsubject: B\n---\n# Dup\n")
    long_list = "".join(f"  - t{i}\n" for i in range(100_000))
    _write(vault, "long-list.md", f"---\ntags:\n{long_list}---\n# Long\n".encode())
    many_tags = " ".join(f"#t{i}" for i in range(100_000))
    _write(vault, "many-tags.md", f"# Many tags\n\n{many_tags}\n".encode())
    _write(vault, "2026-02-30 impossible.md", b"# Impossible\n\nNo such day exists.\n")
    _write(vault, "bad-date.md", b"---\ndate: 2026-02-30\n---\n# Bad date\n")
    with open(vault / "fifty-mb.md", "wb") as fh:
        fh.write(b"# Huge\n\n")
        fh.truncate(FIFTY_MB)
    # Links: loops and ways out of the vault.
    (vault / "loop-dir").symlink_to(vault)
    (vault / "ring-a").symlink_to(vault / "ring-b")
    (vault / "ring-b").symlink_to(vault / "ring-a")
    (vault / "self.md").symlink_to(vault / "self.md")
    (vault / "a.md").symlink_to(vault / "b.md")
    (vault / "b.md").symlink_to(vault / "a.md")
    (vault / "out-dir").symlink_to(outside)
    (vault / "out.md").symlink_to(outside / "secret.md")
    (vault / "passwd.md").symlink_to("/etc/passwd")
    # A link that stays inside is the note it leads to, read once there.
    (vault / "inside.md").symlink_to(vault / "good.md")
    skipped = {
        "latin1-\\xe9t\\xe9.md": "file name is not valid UTF-8",
        "yaml-tag.md": "could not determine a constructor for the tag",
        "malformed.md": "invalid YAML frontmatter",
        "nested.md": "nesting depth",
        "unhashable-key.md": "invalid YAML frontmatter",
        "utf16.md": "binary content",
        "nul.md": "binary content",
        "binary.md": "binary content",
        "latin1.md": "not valid UTF-8",
        "cesu-surrogate.md": "not valid UTF-8",
        "fifty-mb.md": "bytes",
        "unclosed.md": "line 1: frontmatter opened by '---' is never closed",
        "duplicate-key.md": "line 3: invalid YAML frontmatter: duplicate key 'subject'",
        "long-list.md": "100,000 items",
        # Links that are skipped are said to be, with why.
        "self.md": "a symlink loop",
        "a.md": "a symlink loop",
        "b.md": "a symlink loop",
        "out.md": "a symlink that leads out of the vault",
        "passwd.md": "a symlink that leads out of the vault",
        "inside.md": "a symlink to good.md, read once there",
    }
    ingested = {
        *("good.md", "new\nline.md", "rtl\u202egpj.md", "typed.md"),
        *("placeholders.md", "many-tags.md", "2026-02-30 impossible.md", "bad-date.md"),
    }
    return vault, skipped, ingested


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[Path, dict[str, str], set[str], Path]:
    marker = tmp_path / "yaml-tag-executed"
    vault, skipped, ingested = hostile_vault(tmp_path, marker)
    return vault, skipped, ingested, marker


def test_a_hostile_vault_is_ingested_with_every_bad_note_skipped_and_named(
    hostile: tuple[Path, dict[str, str], set[str], Path],
    deadline: Callable[[float], AbstractContextManager[None]],
    dump_kodb: Callable[[str], dict[str, list[tuple[Any, ...]]]],
    record_property: Callable[[str, object], None],
) -> None:
    vault, skipped, ingested, marker = hostile
    record_property("inputs", len(list(vault.iterdir())))
    settings = load_settings(vault, env={}, cwd=vault)
    with deadline(120.0), KoDB.open(settings.effective_kodb_url) as kodb:
        report = ingest_vault(settings, kodb)
        stored = set(kodb.notes())
    reasons = dict(report.skipped)
    assert set(reasons) == set(skipped)
    for path, fragment in skipped.items():
        assert fragment in reasons[path], (path, reasons[path])
    # The good notes, and nothing reached through a loop or a link out of the vault.
    assert stored == ingested
    assert not marker.exists()  # the YAML tag was never executed
    facts = dump_kodb(settings.effective_kodb_url)["facts"]
    assert not any("launch code" in repr(row) or "root:x:0" in repr(row) for row in facts)
    before = dump_kodb(settings.effective_kodb_url)
    with deadline(120.0), KoDB.open(settings.effective_kodb_url) as kodb:
        again = ingest_vault(settings, kodb)
    assert (again.added, again.updated, again.removed) == (0, 0, 0)
    assert dump_kodb(settings.effective_kodb_url) == before


def test_no_internal_stand_in_or_unbounded_count_reaches_the_facts(
    hostile: tuple[Path, dict[str, str], set[str], Path],
    dump_kodb: Callable[[str], dict[str, list[tuple[Any, ...]]]],
) -> None:
    vault, _, _, _ = hostile
    settings = load_settings(vault, env={}, cwd=vault)
    names = ("placeholders", "Configuration folder", "Many tags", "Impossible", "Bad date")
    with KoDB.open(settings.effective_kodb_url) as kodb:
        ingest_vault(settings, kodb)
        facts = {
            name: [(f.predicate, f.object) for f in kodb.facts_for_subjects([normalize_text(name)])]
            for name in names
        }
    dump = dump_kodb(settings.effective_kodb_url)
    # Every stored value but the full-text index, which keeps each note's body as written.
    leaks = [
        (name, row)
        for name, rows in dump.items()
        if "fts" not in name
        for row in rows
        if any("\ufffc" in str(value) for value in row)
    ]
    assert leaks == []
    table = set(facts["placeholders"])
    assert {("links_to", "Configuration folder"), ("owner", "Ops team")} <= table
    assert {("links_to", s) for s in ("AT&T", "a_b", "x y z", "object")} <= table
    assert ("mentioned_in", "placeholders") in facts["Configuration folder"]
    tagged = [o for p, o in facts["Many tags"] if p == "tagged"]
    assert tagged[:2] == ["t0", "t1"]
    assert len(facts["Many tags"]) <= extract.MAX_TAGS + 5  # and its title, summary …
    assert ("title", "Impossible") in facts["Impossible"]
    assert not any(p == "date" for p, _ in facts["Impossible"])
    assert ("date", "2026-02-30") in facts["Bad date"]  # as the author typed it, as text


def test_typed_frontmatter_values_become_plain_text_facts(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    _write(
        vault,
        "typed.md",
        b"---\ndate: 2024-01-02\nn: 3\nflag: true\n2024-05-05: a date key\n7: an int key\n"
        b"lst: [2024-01-01, false]\n---\n# Typed\n",
    )
    settings = load_settings(vault, env={}, cwd=vault)
    with KoDB.open(settings.effective_kodb_url) as kodb:
        report = ingest_vault(settings, kodb)
        facts = {(f.predicate, f.object) for f in kodb.facts_for_subjects(["typed"])}
    assert report.skipped == ()
    assert {
        ("date", "2024-01-02"),
        ("n", "3"),
        ("flag", "true"),
        ("2024-05-05", "a date key"),
        ("7", "an int key"),
        ("lst", "2024-01-01"),
        ("lst", "false"),
    } <= facts


def test_the_ingest_cli_reports_hostile_names_without_a_traceback(
    hostile: tuple[Path, dict[str, str], set[str], Path],
) -> None:
    vault, skipped, _, _ = hostile
    exe = str(Path(sys.executable).with_name("vault-ko"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_KO_")}
    for extra, encoding in (([], "utf-8"), (["--json"], "ascii")):
        done = subprocess.run(
            [exe, "--vault", str(vault), "ingest", *extra],
            capture_output=True,
            env={**env, "PYTHONIOENCODING": encoding},
            timeout=180,
        )
        assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
        assert b"Traceback" not in done.stderr
    report = json.loads(done.stdout)
    assert {s["path"] for s in report["skipped"]} == set(skipped)


def _ingest(vault: Path) -> tuple[Any, set[str]]:
    settings = load_settings(vault, env={}, cwd=vault)
    with KoDB.open(settings.effective_kodb_url) as kodb:
        return ingest_vault(settings, kodb), set(kodb.notes())


def test_symlink_loops_in_the_vault_are_skipped_not_followed(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    _write(vault, "good.md", b"# Good\n")
    (vault / "a.md").symlink_to(vault / "b.md")
    (vault / "b.md").symlink_to(vault / "a.md")
    (vault / "ring").symlink_to(vault / "ring")
    (vault / "up").symlink_to(vault)
    report, stored = _ingest(vault)
    assert stored == {"good.md"}
    assert dict(report.skipped) == {"a.md": "a symlink loop", "b.md": "a symlink loop"}


def test_a_note_whose_name_is_not_utf8_is_skipped_with_its_name_escaped(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    _write(vault, "good.md", b"# Good\n")
    _write(vault, b"caf\xe9.md", b"# Cafe\n")
    report, stored = _ingest(vault)
    assert stored == {"good.md"}
    assert dict(report.skipped) == {"caf\\xe9.md": "the file name is not valid UTF-8"}


def test_output_on_a_console_that_cannot_encode_it_is_escaped_not_a_traceback(
    tmp_path: Path,
) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    _write(vault, "gyors.md", "# Gyorsítótár ✦\n\nA note about the warm cache.\n".encode())
    _ingest(vault)
    exe = str(Path(sys.executable).with_name("vault-ko"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_KO_")}
    for encoding, escaped in (("ascii", b"Gyors\\xedt\\xf3t\\xe1r"), ("latin-1", b"\\u2726")):
        done = subprocess.run(
            [exe, "--vault", str(vault), "facts", "search", "gyorsítótár"],
            capture_output=True,
            env={**env, "PYTHONIOENCODING": encoding},
            timeout=120,
        )
        assert b"Traceback" not in done.stderr, done.stderr.decode(encoding, "replace")
        assert done.returncode == 0
        assert escaped in done.stdout
