"""No password in anything a command prints: stdout, stderr, -vv logs, JSON, state files.

Every command that prints runs as a real process (so its logging is the CLI's own, at
``-vv``) with a KO-DB URL carrying a percent-encoded password (the real PostgreSQL, which
trusts local connections, so the commands really read and write it) and either a graph URL
carrying a password with "@" and ":" in it (the driver refuses such a URL before
connecting) or a graph password in the environment for a graph that is down (so the
fallback, the breaker and their messages run). Every byte printed and every text file left
in the state dir is searched for each password and for fragments that would give one away.

No real graph is used: wrong credentials sent to the session's ArcadeDB make it refuse the
right ones for a while, which would fail the other graph tests.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BIN = Path(sys.executable).parent
GRAPH_URL_PASSWORD = "gr@ph:Pw0rd"  # raw "@" and ":": the URL's last "@" ends it
KODB_PASSWORD = "kodb@Secr3t"  # percent-encoded in the URL: kodb%40Secr3t
ENV_PASSWORD = "EnvPassw0rd"
#: Pieces that must never appear: each password, its encoded form, and their tails.
LEAKS = ("Pw0rd", "ph:Pw", "Secr3t", "kodb%40", "kodb@", ENV_PASSWORD)


def commands(vault: Path, facts: Path, prompts: Path, out: Path) -> list[list[str]]:
    vk = [str(BIN / "vault-ko"), "-vv", "--vault", str(vault)]
    runs = [
        ["config", "show"],
        ["config", "show", "--json"],
        ["ingest"],
        ["ingest", "--json", "--force"],
        ["facts", "import", str(facts)],
        ["facts", "import", str(facts), "--json"],
        ["facts", "search", "redis"],
        ["facts", "search", "redis", "--json"],
        ["graph", "status"],
        ["graph", "status", "--json"],
        ["graph", "down"],
        ["graph", "down", "--json"],
        ["embed"],
        ["embed", "--json"],
        ["calibrate"],
        ["calibrate", "--json"],
        ["sync"],
        ["sync", "--json"],
        ["query", "why redis for the warm cache?"],
        ["query", "why redis for the warm cache?", "--json"],
        ["query", "why redis for the warm cache?", "--format", "md"],
        ["query", "warm cache", "--no-semantic", "--json"],
        ["load-context", str(prompts), "--out", str(out / "jsonl"), "--format", "jsonl"],
        ["load-context", str(prompts), "--out", str(out / "md"), "--format", "md", "--json"],
        ["freshness"],
        ["freshness", "--json"],
        ["freshness", "--format", "prometheus"],
    ]
    return [
        *([*vk, *args] for args in runs),
        [str(BIN / "vault-ko-query"), "--vault", str(vault), "--json", "warm cache"],
        [str(BIN / "vault-embed-freshness"), "--vault", str(vault), "--json"],
    ]


def url_with_password(url: str, password: str) -> str:
    return sa.make_url(url).set(password=password).render_as_string(hide_password=False)


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("graph", ["password-in-url", "password-in-env"])
def test_no_command_prints_or_stores_a_password(graph: str, pg_url: str, tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    shutil.copytree(EXAMPLES / "vault", vault)
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("warm cache\nwhy kafka?\n", encoding="utf-8")
    host = f"127.0.0.1:{closed_port()}"
    kodb_url = url_with_password(pg_url, KODB_PASSWORD)
    assert "kodb%40Secr3t" in kodb_url
    env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_KO_")}
    env |= {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VAULT_KO_KODB_URL": kodb_url}
    if graph == "password-in-url":
        env["VAULT_KO_GRAPH_URL"] = f"bolt://vault:{GRAPH_URL_PASSWORD}@{host}"
    else:
        env |= {"VAULT_KO_GRAPH_URL": f"bolt://{host}", "VAULT_KO_GRAPH_PASSWORD": ENV_PASSWORD}
    env["VAULT_KO_GRAPH_DATABASE"] = "vault"

    printed: list[tuple[str, str]] = []
    for argv in commands(vault, EXAMPLES / "facts.jsonl", prompts, tmp_path / "packs"):
        done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
        shown = " ".join(argv[1:])
        assert "Traceback" not in done.stderr, f"{shown}:\n{done.stderr}"
        printed.append((shown, done.stdout + done.stderr))
    # The runs reached the stores: KO-DB was written, the graph was refused or unreachable.
    assert any('"added": 68' in text or "68 notes" in text for _, text in printed)
    refused = "unavailable" if graph == "password-in-env" else "invalid configuration"
    assert any(refused in text for _, text in printed)
    for shown, text in printed:
        for leak in LEAKS:
            assert leak not in text, f"{shown} printed {leak!r}:\n{text}"
    for path in (vault / ".vault-ko").rglob("*"):
        if path.is_file() and not path.name.startswith("ko.db"):
            data = path.read_bytes().decode("utf-8", "replace")
            for leak in LEAKS:
                assert leak not in data, f"{path} holds {leak!r}"
