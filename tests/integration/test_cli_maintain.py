"""`vault-ko sync` as a user meets it when the graph is down: one error line, then what was
written (nothing) and what can be done meanwhile."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def test_a_sync_the_graph_refuses_says_nothing_was_written_and_what_to_do(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "note.md").write_text("# A note\n\nAbout redis.\n")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("VAULT_KO_")},
        "VAULT_KO_GRAPH_URL": "bolt://127.0.0.1:1",
        "VAULT_KO_GRAPH_RETRY_DEADLINE": "0",
        "VAULT_KO_GRAPH_CONNECT_TIMEOUT": "0.2",
    }
    exe = Path(sys.executable).with_name("vault-ko")
    done = subprocess.run(
        [str(exe), "--vault", str(vault), "sync"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    lines = done.stderr.splitlines()
    assert done.returncode == 2, done.stderr
    assert lines[0].startswith("error: the graph") and "127.0.0.1:1" in lines[0]
    assert lines[1].startswith("nothing was synced (KO-DB and the graph are as they were)")
    assert "`vault-ko ingest` updates KO-DB alone" in lines[1]
    assert not (vault / ".vault-ko" / "ko.db").exists()  # KO-DB not even made
