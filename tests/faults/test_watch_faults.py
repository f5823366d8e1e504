"""`vault-ko watch` through faults, as a real process on a local graph of this module: the
graph killed during a watch (KO-DB is updated, the embeddings wait and are applied once the
graph is back, with no change to the notes), and the watcher itself SIGKILLed with notes
edited, added and deleted before it starts again (nothing is lost)."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pipeline.kodb import KoDB

pytestmark = [pytest.mark.integration, pytest.mark.model]

#: Bounds for a loaded CI machine (the watcher's own timings are the bench's business).
WITHIN = 120.0


@pytest.fixture(scope="module")
def own_graph(
    require_server: Callable[[str], None],
    tmp_path_factory: pytest.TempPathFactory,
    faults_kit: SimpleNamespace,
) -> Iterator[Any]:
    yield from faults_kit.start_graph(tmp_path_factory.mktemp("watch-faults"), require_server)


def _until(check: Callable[[], bool], seconds: float = WITHIN) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.3)
    return False


class Watcher:
    """A `vault-ko watch` child process and what it said."""

    def __init__(self, kit: SimpleNamespace, vault: Path, env: dict[str, str], log: Path):
        self.kit, self.vault, self.env, self.log = kit, vault, env, log
        self.proc = subprocess.Popen(
            [kit.exe(), "--vault", str(vault), "watch"],
            stdout=subprocess.DEVNULL,
            stderr=log.open("a"),
            text=True,
            env=env,
        )

    def said(self) -> str:
        return self.log.read_text(encoding="utf-8")

    def freshness(self) -> dict[str, Any]:
        freshness_exe = str(Path(self.kit.exe()).with_name("vault-embed-freshness"))
        done = subprocess.run(
            [freshness_exe, "--vault", str(self.vault), "--json"],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=120,
            check=False,
        )
        return json.loads(done.stdout)  # type: ignore[no-any-return]

    def all_fresh(self, notes: int) -> bool:
        report = self.freshness()
        counts = report["counts"]
        return (
            counts["fresh"] == notes
            and counts["stale"] == counts["missing"] == counts["orphaned"] == 0
            and report["watcher"]["running"] is True
            and report["watcher"]["lag_s"] is None
        )

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def _notes(vault: Path) -> int:
    return sum(1 for p in vault.rglob("*.md") if ".vault-ko" not in p.parts)


def test_the_graph_down_during_a_watch_leaves_kodb_current_and_embeds_once_it_is_back(
    own_graph: Any, faults_kit: SimpleNamespace, tmp_path: Path
) -> None:
    vault = faults_kit.copy_vault(tmp_path / "vault", "adr")
    settings = own_graph.settings(vault)
    env = own_graph.env(
        settings, VAULT_KO_WATCH_DEBOUNCE="0.3", VAULT_KO_GRAPH_BREAKER_COOLDOWN="1"
    )
    watcher = Watcher(faults_kit, vault, env, tmp_path / "watch.log")
    try:
        assert _until(lambda: watcher.all_fresh(_notes(vault))), watcher.said()
        own_graph.kill()
        before = watcher.said().count("run failed")
        note = sorted((vault / "adr").glob("*.md"))[0]
        note.write_text(note.read_text("utf-8") + "\nEdited while the graph was down.\n")
        assert _until(lambda: watcher.said().count("run failed") > before), watcher.said()
        # KO-DB took the edit; the embedding waits for the graph.
        rel = note.relative_to(vault).as_posix()
        with KoDB.open(settings.effective_kodb_url, create=False) as kodb:
            stored = kodb.notes()[rel].content_hash
        assert stored == hashlib.sha256(note.read_bytes()).hexdigest(), watcher.said()
        own_graph.restart()
        # No change to the notes: the retry applies it once the graph answers.
        assert _until(lambda: watcher.all_fresh(_notes(vault))), watcher.said()
    finally:
        code = watcher.stop()
    said = watcher.said()
    assert code == 0, said
    assert "Traceback" not in said and "watch: stopped" in said


def test_changes_made_while_the_watcher_was_killed_are_applied_when_it_starts_again(
    own_graph: Any, faults_kit: SimpleNamespace, tmp_path: Path
) -> None:
    vault = faults_kit.copy_vault(tmp_path / "vault", "adr")
    settings = own_graph.settings(vault)
    env = own_graph.env(settings, VAULT_KO_WATCH_DEBOUNCE="0.3")
    log = tmp_path / "watch.log"
    first = Watcher(faults_kit, vault, env, log)
    try:
        assert _until(lambda: first.all_fresh(_notes(vault))), first.said()
    finally:
        first.proc.kill()  # SIGKILL: no clean stop, the lock goes with the process
        first.proc.wait()
    notes = sorted((vault / "adr").glob("*.md"))
    notes[0].write_text(notes[0].read_text("utf-8") + "\nEdited while no watcher ran.\n")
    notes[1].unlink()
    (vault / "adr" / "9999-new-while-down.md").write_text(
        "# 9999. Written while no watcher ran\n\nA new decision.\n", "utf-8"
    )
    assert first.freshness()["watcher"]["running"] is False
    second = Watcher(faults_kit, vault, env, log)
    try:
        assert _until(lambda: second.all_fresh(_notes(vault))), second.said()
        with KoDB.open(settings.effective_kodb_url, create=False) as kodb:
            registry = kodb.notes()
        assert "adr/9999-new-while-down.md" in registry
        assert notes[1].relative_to(vault).as_posix() not in registry
    finally:
        code = second.stop()
    assert code == 0, second.said()
