"""The watcher: which file events count, one watcher per vault, one run per burst, and a
failed run tried again; with real file events on a temporary folder."""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path

import pytest

from pipeline.config import load_settings
from pipeline.errors import GraphUnavailable, VaultBusy
from pipeline.watch import NoteFilter, Watch, only_watcher, read_state, watcher_status


def settings_of(tmp_path: Path, **overrides: object):  # type: ignore[no-untyped-def]
    vault = tmp_path / "vault"
    (vault / "wiki").mkdir(parents=True, exist_ok=True)
    return load_settings(vault=vault, overrides={"vault_exclude_globs": ["drafts/**"], **overrides})


@pytest.mark.parametrize(
    ("rel", "counts"),
    [
        ("wiki/redis.md", True),
        ("wiki", True),  # a folder moved or deleted: its notes go with it
        ("wiki/.redis.md.swp", False),
        ("wiki/redis.md~", False),
        ("wiki/.#redis.md", False),
        ("wiki/~$redis.md", False),
        ("wiki/redis.md.tmp", False),
        (".obsidian/workspace.json", False),
        (".obsidian/plugins/x.md", False),
        (".git/index", False),
        (".trash/old.md", False),
        (".vault-ko/ko.db", False),
        ("drafts/idea.md", False),
        ("wiki/diagram.png", False),
    ],
)
def test_only_changes_to_notes_start_a_run(tmp_path: Path, rel: str, counts: bool) -> None:
    settings = settings_of(tmp_path)
    assert NoteFilter(settings)(None, str(settings.vault / rel)) is counts


def test_a_second_watcher_is_refused_naming_the_first(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with only_watcher(state):
        (state / "watcher.json").write_text('{"pid": 4242, "started_at": 1.0}')
        with pytest.raises(VaultBusy, match="pid 4242"), only_watcher(state):
            pass
        assert watcher_status(state)["running"] is True
    assert watcher_status(state) == {"running": False, "pid": None, "last_run": None, "lag_s": None}


def _wait(predicate, seconds: float = 20.0) -> bool:  # type: ignore[no-untyped-def]
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_a_burst_is_one_run_and_a_failed_run_is_tried_again_a_second_later(tmp_path: Path) -> None:
    settings = settings_of(tmp_path)
    runs: list[float] = []
    fail = [True]

    def sync() -> str:
        runs.append(time.time())
        if len(runs) == 2 and fail[0]:
            fail[0] = False
            raise GraphUnavailable("graph at bolt://h:1 unavailable: connection refused")
        return "ok"

    said: list[str] = []
    watch = Watch(settings, sync, report=said.append, debounce_ms=300, polling=False)
    thread = threading.Thread(target=watch.run, daemon=True)
    thread.start()
    try:
        assert _wait(lambda: len(runs) == 1)  # the catch-up run at start
        for i in range(50):  # a checkout: many notes at once
            (settings.vault / "wiki" / f"n{i}.md").write_text(f"# N{i}\n\nbody\n")
        assert _wait(lambda: any("run failed" in s for s in said))
        assert len(runs) == 2
        assert any("connection refused" in s and "or in 1 s" in s for s in said)
        assert read_state(settings.state_dir).pending_since is not None  # type: ignore[union-attr]
        assert _wait(lambda: len(runs) == 3, 10.0)  # tried again a second later, no change
        assert runs[2] - runs[1] >= 0.9
        assert _wait(lambda: watcher_status(settings.state_dir)["lag_s"] is None)
        time.sleep(1.0)
        assert len(runs) == 3  # the burst was one run, not fifty
    finally:
        watch.stop.set()
        thread.join(10)
    assert not thread.is_alive()
    assert watcher_status(settings.state_dir)["running"] is False


def test_failed_runs_in_a_row_wait_twice_as_long_each_time_up_to_the_cap(tmp_path: Path) -> None:
    settings = settings_of(tmp_path)
    runs: list[float] = []

    def sync() -> str:
        runs.append(time.monotonic())
        if len(runs) <= 3:
            raise GraphUnavailable("graph at bolt://h:1 unavailable: connection refused")
        return "ok"

    said: list[str] = []
    watch = Watch(settings, sync, report=said.append, debounce_ms=100, polling=False)
    thread = threading.Thread(target=watch.run, daemon=True)
    thread.start()
    try:
        assert _wait(lambda: len(runs) == 4, 20.0)  # start, then after 1, 2 and 4 s
        gaps = [b - a for a, b in itertools.pairwise(runs)]
        # Each wait as said, give or take the loop's tick and a loaded machine.
        assert all(w <= g < w + 3.0 for w, g in zip((1, 2, 4), gaps, strict=True)), gaps
        assert [s.split(" (")[1].split(")")[0] for s in said if "run failed" in s] == [
            "tried again at the next change or in 1 s",
            "tried again at the next change or in 2 s",
            "tried again at the next change or in 4 s",
        ]
        assert _wait(lambda: watcher_status(settings.state_dir)["lag_s"] is None)
    finally:
        watch.stop.set()
        thread.join(10)


def test_a_retry_waits_for_the_breaker_and_an_unexpected_error_is_a_failed_run(
    tmp_path: Path,
) -> None:
    settings = settings_of(tmp_path)
    runs: list[float] = []

    def sync() -> str:
        runs.append(time.monotonic())
        if len(runs) == 1:
            raise RuntimeError("a bug, not a store")
        if len(runs) == 2:
            raise GraphUnavailable("circuit open", retry_in=3.0)
        return "ok"

    said: list[str] = []
    watch = Watch(settings, sync, report=said.append, debounce_ms=100, polling=False)
    thread = threading.Thread(target=watch.run, daemon=True)
    thread.start()
    try:
        assert _wait(lambda: len(runs) == 3, 20.0)
        assert "RuntimeError: a bug, not a store" in said[0]
        assert "or in 3 s" in said[1]  # not 2 s: the breaker would refuse it until then
        assert runs[2] - runs[1] >= 2.9
        assert thread.is_alive()
    finally:
        watch.stop.set()
        thread.join(10)


def test_the_catch_up_run_counts_as_a_change_waiting_until_it_is_done(tmp_path: Path) -> None:
    settings = settings_of(tmp_path)
    release = threading.Event()

    def sync() -> str:
        assert release.wait(10)
        return "ok"

    watch = Watch(settings, sync, report=lambda _: None, debounce_ms=100, polling=False)
    thread = threading.Thread(target=watch.run, daemon=True)
    thread.start()
    try:
        assert _wait(lambda: watcher_status(settings.state_dir)["running"])
        assert _wait(lambda: watcher_status(settings.state_dir)["lag_s"] is not None)
        release.set()
        assert _wait(lambda: watcher_status(settings.state_dir)["lag_s"] is None)
    finally:
        release.set()
        watch.stop.set()
        thread.join(10)


def test_every_run_ok_or_failed_hands_freed_memory_back_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_of(tmp_path)
    events: list[str] = []
    monkeypatch.setattr("pipeline.watch.release_free_memory", lambda: events.append("trim"))

    def sync() -> str:
        events.append("run")
        if events.count("run") == 1:
            raise GraphUnavailable("graph at bolt://h:1 unavailable: connection refused")
        return "ok"

    watch = Watch(settings, sync, report=lambda _: None, debounce_ms=100, polling=False)
    thread = threading.Thread(target=watch.run, daemon=True)
    thread.start()
    try:
        assert _wait(lambda: events.count("trim") == 2, 20.0)  # the failure, then its retry
        assert events[:4] == ["run", "trim", "run", "trim"]
    finally:
        watch.stop.set()
        thread.join(10)


@pytest.mark.parametrize(
    "data",
    [
        '{"pid": "123", "started_at": 1.0}',
        '{"pid": 123, "started_at": 1.0, "last_run": "yesterday"}',
        '{"pid": 123, "started_at": 1.0, "pending_since": "now"}',
        '{"pid": true, "started_at": 1.0}',
        '{"pid": 123, "started_at": 1.0, "last_outcome": 5}',
        "[1, 2]",
    ],
)
def test_a_watcher_state_of_the_wrong_shape_is_no_state(tmp_path: Path, data: str) -> None:
    """A hand-edited watcher.json had been counted with: its lag raised a TypeError, which
    turned /healthz and /metrics into 500s while the watcher ran."""
    from pipeline.watch import STATE_FILE

    tmp_path.joinpath(STATE_FILE).write_text(data)
    assert read_state(tmp_path) is None


def test_a_watcher_state_as_a_watcher_writes_it_is_read(tmp_path: Path) -> None:
    from pipeline.watch import STATE_FILE

    tmp_path.joinpath(STATE_FILE).write_text(
        '{"pid": 123, "started_at": 1.5, "last_run": 2, "pending_since": null}'
    )
    state = read_state(tmp_path)
    assert state is not None and (state.pid, state.last_run) == (123, 2)
