"""The count of fallback answers that the freshness monitor reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline import fallback_log
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


def test_a_long_log_keeps_its_newer_half_and_the_count_of_what_it_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fallback_log, "LOG_MAX_BYTES", 2_000)
    for i in range(10):
        record_fallback(tmp_path, f"counted {i}")
    assert fallbacks_since_last_check(tmp_path) == 10
    for i in range(60):  # about 3,600 bytes: trimmed at least once
        record_fallback(tmp_path, f"graph unavailable {i}")
    log = tmp_path / LOG_NAME
    assert log.stat().st_size <= 2_000
    assert log.read_text().splitlines()[-1].endswith('"graph unavailable 59"}')
    assert log.stat().st_mode & 0o777 == 0o600
    assert fallbacks_since_last_check(tmp_path, advance=False) == 60
    assert fallbacks_since_last_check(tmp_path) == 60
    assert fallbacks_since_last_check(tmp_path) == 0
    record_fallback(tmp_path, "after the check")
    assert fallbacks_since_last_check(tmp_path) == 1


def test_a_log_never_checked_is_trimmed_and_still_counted_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fallback_log, "LOG_MAX_BYTES", 1_000)
    for i in range(200):
        record_fallback(tmp_path, f"down {i}")
    assert (tmp_path / LOG_NAME).stat().st_size <= 1_000
    assert fallbacks_since_last_check(tmp_path) == 200


def test_a_peek_waits_for_a_trim_in_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A trim replaces the log, then the mark, under the mark's lock: a peek (/freshness)
    # that read between the two would count the cut lines once in the mark and again in
    # the log. It waits for the lock instead.
    import threading

    from pipeline import statefile
    from pipeline.fallback_log import MARK_NAME

    monkeypatch.setattr(fallback_log, "LOG_MAX_BYTES", 2_000)
    for i in range(30):
        record_fallback(tmp_path, f"down {i}")
    before = fallbacks_since_last_check(tmp_path, advance=False)
    counted: list[int] = []
    with statefile.locked(tmp_path / MARK_NAME):
        log = tmp_path / LOG_NAME
        lines = log.read_bytes().splitlines(keepends=True)
        log.write_bytes(b"".join(lines[10:]))  # the log cut, its mark not yet written
        peek = threading.Thread(
            target=lambda: counted.append(fallbacks_since_last_check(tmp_path, advance=False))
        )
        peek.start()
        peek.join(0.5)
        assert peek.is_alive()  # it waits for the trim
        (tmp_path / MARK_NAME).write_text("0 10")
    peek.join(5)
    assert counted == [before] == [30]


def test_a_peek_from_an_account_that_cannot_write_the_lock_still_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import contextlib

    from pipeline import statefile

    for i in range(3):
        record_fallback(tmp_path, f"down {i}")

    @contextlib.contextmanager
    def read_only(path: Path):  # type: ignore[no-untyped-def]
        raise PermissionError(13, "Permission denied", str(path) + ".lock")
        yield

    monkeypatch.setattr(statefile, "locked", read_only)
    assert fallbacks_since_last_check(tmp_path, advance=False) == 3
    with pytest.raises(PermissionError):  # moving the mark needs the lock
        fallbacks_since_last_check(tmp_path)
