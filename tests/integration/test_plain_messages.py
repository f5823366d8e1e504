"""With the graph down, people read what failed in words: commands, answers, freshness and
`graph status` name the host and the cause, never the driver's text (that is for -v), and
print no escape codes when their output is not a terminal.

Real processes, a real vault copy with its SQLite KO-DB, and a graph URL whose port nothing
listens on (connection refused)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "vault"
VAULT_KO = str(Path(sys.executable).parent / "vault-ko")
FRESHNESS = str(Path(sys.executable).parent / "vault-embed-freshness")
#: What the driver says, which people should not have to read.
DRIVER_WORDS = ("Errno", "ResolvedIPv4Address", "Couldn't connect", "circuit open")


@pytest.fixture(scope="module")
def down(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str], str]:
    vault = tmp_path_factory.mktemp("plain") / "vault"
    shutil.copytree(EXAMPLES, vault, ignore=shutil.ignore_patterns(".vault-ko"))
    with socket.socket() as s:  # a port nothing listens on once it is closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_KO_")}
    env |= {"VAULT_KO_GRAPH_URL": f"bolt://127.0.0.1:{port}", "HF_HUB_OFFLINE": "1"}
    env.pop("FORCE_COLOR", None)
    ingest = subprocess.run(
        [VAULT_KO, "--vault", str(vault), "ingest"], env=env, capture_output=True, check=False
    )
    assert ingest.returncode == 0, ingest.stderr
    return vault, env, f"the graph is not reachable at 127.0.0.1:{port} (connection refused)"


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=120, check=False)


def plain(text: str) -> None:
    assert "\x1b[" not in text
    for words in DRIVER_WORDS:
        assert words not in text, words


def test_a_command_stopped_by_the_graph_says_why_in_one_line(down) -> None:  # type: ignore[no-untyped-def]
    vault, env, words = down
    done = run([VAULT_KO, "--vault", str(vault), "embed"], env)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith(f"error: {words}")
    plain(done.stderr + done.stdout)
    verbose = run([VAULT_KO, "-v", "--vault", str(vault), "embed"], env)
    assert "Connection refused" in verbose.stderr  # the driver's text, asked for


def test_a_degraded_answer_says_what_failed_and_when_it_is_retried(down) -> None:  # type: ignore[no-untyped-def]
    vault, env, words = down
    first = run([VAULT_KO, "--vault", str(vault), "query", "warm cache", "--no-service"], env)
    assert first.returncode == 0, first.stderr
    assert f"degraded: {words}; answering from the notes' words" in " ".join(first.stdout.split())
    plain(first.stdout + first.stderr)
    again = run(
        [VAULT_KO, "--vault", str(vault), "query", "warm cache", "--no-service", "--json"], env
    )
    reason = json.loads(again.stdout)["degraded_reason"]
    assert reason.startswith(f"{words}; answering from the notes' words; it will be retried in ")
    plain(reason)


def test_freshness_and_graph_status_say_it_in_words(down) -> None:  # type: ignore[no-untyped-def]
    vault, env, words = down
    fresh = run([FRESHNESS, "--vault", str(vault)], env)
    assert fresh.returncode == 2
    assert fresh.stdout.count(words) == 1 and "unknown" in fresh.stdout
    plain(fresh.stdout + fresh.stderr)
    status = run([VAULT_KO, "--vault", str(vault), "graph", "status"], env)
    assert status.returncode == 2
    assert "not reachable at" in status.stdout and "connection" in status.stdout
    plain(status.stdout + status.stderr)
