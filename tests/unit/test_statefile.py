"""The one state-file writer: atomic replace, unique temp names, modes, the lock."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from pipeline import statefile


def test_write_replaces_the_file_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "state.json"
    statefile.write_json(target, {"a": 1})
    statefile.write_json(target, {"a": 2})
    assert statefile.read_json(target) == {"a": 2}
    assert [p.name for p in target.parent.iterdir()] == ["state.json"]


def test_a_secret_file_is_never_readable_by_others(tmp_path: Path) -> None:
    target = tmp_path / "secret"
    statefile.write_text(target, "pw\n", mode=0o600)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_a_failed_write_keeps_the_old_content_and_removes_its_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "state.json"
    statefile.write_text(target, "old")

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        statefile.write_text(target, "new")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_concurrent_writers_never_leave_a_torn_file(tmp_path: Path) -> None:
    # A fixed temp name (the old fallback mark's `.tmp`) made two writers rename each
    # other's half-written file or fail with FileNotFoundError.
    target = tmp_path / "mark"
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for _ in range(200):
                statefile.write_text(target, str(n) * 1000)
        except BaseException as exc:  # collected for the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    text = target.read_text()
    assert len(text) == 1000 and len(set(text)) == 1


def test_read_json_of_a_missing_file_is_none(tmp_path: Path) -> None:
    assert statefile.read_json(tmp_path / "nothing.json") is None
    assert statefile.remove(tmp_path / "nothing.json") is False


def test_locked_serialises_read_modify_write(tmp_path: Path) -> None:
    target = tmp_path / "counter"
    statefile.write_text(target, "0")

    def bump() -> None:
        for _ in range(50):
            with statefile.locked(target):
                statefile.write_text(target, str(int(target.read_text()) + 1))

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert target.read_text() == "200"
