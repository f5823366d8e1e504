"""`vault-ko watch` as people run it: a real process on a real vault and the session's
ArcadeDB. Edits, new and deleted notes reach KO-DB and the graph without a `sync`; a second
watcher is refused; Ctrl-C stops it cleanly."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pipeline.config import Settings

pytestmark = [pytest.mark.integration, pytest.mark.model]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "vault"
BIN = Path(sys.executable).parent
NOTES = ("wiki/redis.md", "wiki/kafka.md", "adr/0007-use-redis-as-the-warm-cache.md")


def _freshness(vault: Path, env: dict[str, str]) -> dict:
    done = subprocess.run(
        [str(BIN / "vault-embed-freshness"), "--vault", str(vault), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    return json.loads(done.stdout)


def _until(check: Callable[[], bool], seconds: float = 90.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.5)
    return False


def test_a_watched_vault_stays_current_and_stops_cleanly(
    graph_settings: Settings, graph_env: Callable[..., dict[str, str]]
) -> None:
    vault = graph_settings.vault
    for rel in NOTES:
        (vault / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(EXAMPLES / rel, vault / rel)
    env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_KO_")}
    env |= graph_env(graph_settings, HF_HUB_OFFLINE="1", VAULT_KO_WATCH_DEBOUNCE="0.3")
    watch = subprocess.Popen(
        [str(BIN / "vault-ko"), "--vault", str(vault), "watch"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        # The catch-up run embeds the three notes.
        assert _until(lambda: _freshness(vault, env)["counts"]["fresh"] == 3)
        report = _freshness(vault, env)
        assert report["watcher"]["running"] is True and report["watcher"]["pid"] == watch.pid
        second = subprocess.run(
            [str(BIN / "vault-ko"), "--vault", str(vault), "watch"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
        assert second.returncode == 2 and f"pid {watch.pid}" in second.stderr
        # An edit, a new note, a deleted one, and an editor's swap file: no sync is run.
        (vault / "wiki" / "redis.md").write_text("# Redis\n\nNow about okapis.\n", "utf-8")
        (vault / "wiki" / "okapi.md").write_text("# Okapi\n\nA forest giraffe.\n", "utf-8")
        (vault / "wiki" / "kafka.md").unlink()
        (vault / "wiki" / ".redis.md.swp").write_bytes(b"\0" * 10)

        def applied() -> bool:
            r = _freshness(vault, env)
            counts = r["counts"]
            return (
                counts["fresh"] == 3
                and counts["stale"] == counts["missing"] == counts["orphaned"] == 0
                and r["watcher"]["lag_s"] is None
            )

        assert _until(applied)
        assert _freshness(vault, env)["status"] == "fresh"
    finally:
        watch.send_signal(signal.SIGINT)
        _, err = watch.communicate(timeout=60)
    assert watch.returncode == 0, err
    assert "watch: stopped" in err and "Traceback" not in err
    assert _freshness(vault, env)["watcher"]["running"] is False
