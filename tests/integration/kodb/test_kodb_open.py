"""Where KO-DB may be made: only by writers, never in memory, never a folder outside the
state dir; readers of a missing KO-DB are told how to make it (issue 35, item 8)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.errors import KodbError
from pipeline.kodb import KoDB

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]


def test_a_reader_of_a_missing_kodb_is_told_how_to_make_it_and_nothing_is_made(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state" / "ko.db"
    with pytest.raises(KodbError, match=r"no KO-DB at .*vault-ko sync"):
        KoDB.open(f"sqlite:///{path}", create=False)
    assert not path.parent.exists()


@pytest.mark.parametrize(
    "url", ["sqlite://", "sqlite:///:memory:", "sqlite:///file:x?mode=memory&uri=true"]
)
def test_an_in_memory_kodb_is_refused_for_writers_too(url: str) -> None:
    with pytest.raises(KodbError, match="in-memory KO-DB keeps nothing"):
        KoDB.open(url, create=True)


def test_a_writer_makes_no_folder_outside_the_state_dir(tmp_path: Path) -> None:
    state = tmp_path / "vault" / ".vault-ko"
    outside = tmp_path / "nonexistent" / "dir" / "ko.db"
    with pytest.raises(KodbError, match="does not exist; vault-ko makes folders only inside"):
        KoDB.open(f"sqlite:///{outside}", create=True, confine_to=state)
    assert not (tmp_path / "nonexistent").exists()
    inside = state / "deeper" / "ko.db"
    with KoDB.open(f"sqlite:///{inside}", create=True, confine_to=state) as db:
        assert db.count_facts() == 0
    assert inside.is_file()


def test_a_relative_path_is_read_from_the_vault_not_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    vault, elsewhere = tmp_path / "vault", tmp_path / "cwd"
    vault.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    with KoDB.open("sqlite:///relative.db", create=True, base_dir=vault) as db:
        assert db.count_notes() == 0
    assert (vault / "relative.db").is_file()
    assert not (elsewhere / "relative.db").exists()


def _vault_ko(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).with_name("vault-ko")), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})},
        cwd=REPO,
        timeout=120,
        check=False,
    )


def test_a_query_on_a_vault_never_synced_says_so_and_makes_no_kodb(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    (vault / "wiki").mkdir(parents=True)
    (vault / "wiki" / "a.md").write_text("# A\n\nredis\n", encoding="utf-8")
    done = _vault_ko("--vault", str(vault), "query", "redis", "--no-service")
    assert done.returncode == 2, done.stderr
    assert "no KO-DB at" in done.stderr and "vault-ko sync" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (vault / ".vault-ko" / "ko.db").exists()


def test_ingest_into_a_mistyped_absolute_url_makes_no_folder_at_the_root(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    (vault / "wiki").mkdir(parents=True)
    (vault / "wiki" / "a.md").write_text("# A\n\nredis\n", encoding="utf-8")
    target = tmp_path / "nonexistent" / "dir" / "ko.db"
    done = _vault_ko(
        "--vault", str(vault), "ingest", env={"VAULT_KO_KODB_URL": f"sqlite:///{target}"}
    )
    assert done.returncode == 2, done.stderr
    assert "does not exist" in done.stderr
    assert not (tmp_path / "nonexistent").exists()


def test_ingest_and_query_refuse_a_damaged_kodb_in_one_line(tmp_path: Path) -> None:
    """Issue 35, item 7: 4 KB of random bytes in ko.db passed `ingest` ("unchanged 68")
    and `sync`; a query failed only after loading the model."""
    import random

    from pipeline.app import App
    from pipeline.config import load_settings
    from pipeline.model import Fact

    vault = tmp_path / "vault"
    (vault / "wiki").mkdir(parents=True)
    (vault / "wiki" / "a.md").write_text("# A\n\nredis\n", encoding="utf-8")
    settings = load_settings(vault, env={})
    with App(settings) as app:
        app.kodb.import_facts(
            Fact(f"Subject {i}", "is", "x" * 200, 0.5, "wiki", f"n/{i}.md", "import")
            for i in range(3000)
        )
    path = settings.state_dir / "ko.db"
    data = bytearray(path.read_bytes())
    middle = len(data) // 2 // 4096 * 4096
    data[middle : middle + 4096] = random.Random(7).randbytes(4096)
    path.write_bytes(bytes(data))
    for args in (["ingest"], ["query", "redis", "--no-service"]):
        done = _vault_ko("--vault", str(vault), *args)
        assert done.returncode == 2, (args, done.stderr)
        assert "is damaged" in done.stderr and "Traceback" not in done.stderr, args
    assert path.read_bytes() == bytes(data), "nothing was written into the damaged file"
