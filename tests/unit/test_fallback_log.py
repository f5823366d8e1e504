"""The count of fallback answers that the freshness monitor reads."""

from __future__ import annotations

from pathlib import Path

from pipeline.fallback_log import LOG_NAME, fallbacks_since_last_check, record_fallback


def test_counts_since_the_previous_check(tmp_path: Path) -> None:
    assert fallbacks_since_last_check(tmp_path) == 0
    for i in range(3):
        record_fallback(tmp_path, f"graph unavailable {i}")
    assert fallbacks_since_last_check(tmp_path) == 3
    assert fallbacks_since_last_check(tmp_path) == 0
    record_fallback(tmp_path, "again")
    assert fallbacks_since_last_check(tmp_path, advance=False) == 1
    assert fallbacks_since_last_check(tmp_path) == 1


def test_a_truncated_log_starts_over(tmp_path: Path) -> None:
    record_fallback(tmp_path, "a")
    record_fallback(tmp_path, "b")
    fallbacks_since_last_check(tmp_path)
    (tmp_path / LOG_NAME).write_text("")
    record_fallback(tmp_path, "c")
    assert fallbacks_since_last_check(tmp_path) == 1


def test_recording_never_fails_the_answer(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    record_fallback(blocker / "state", "unwritable state dir")  # no exception


def test_the_fallback_log_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    """Issue 35, item 4: a degraded reason can name a store and a question's context; the
    state dir's logs are 0600, an old world-readable one included."""
    old = tmp_path / "fallback.log"
    old.write_text("")
    old.chmod(0o644)
    record_fallback(tmp_path, "graph unavailable: connection refused")
    assert old.stat().st_mode & 0o777 == 0o600


def test_a_folder_without_a_state_dir_gets_none(tmp_path: Path) -> None:
    """A degraded answer in a plain folder (the hook, with VAULT_KO_VAULT set) must not
    make a state dir: the folder search would then count the folder as a vault."""
    record_fallback(tmp_path / ".vault-ko", "graph unavailable")
    assert not (tmp_path / ".vault-ko").exists()
