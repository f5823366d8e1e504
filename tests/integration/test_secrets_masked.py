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

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

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
    if graph == "password-in-env":
        # The runs reached the stores: KO-DB was written, the graph was unreachable.
        assert any('"added": 91' in text or "91 notes" in text for _, text in printed)
        assert any("unavailable" in text for _, text in printed)
    else:  # refused with the settings by every command (Prometheus' text holds no reasons)
        said = [t for shown, t in printed if "prometheus" not in shown]
        assert all("takes no user or password" in text for text in said)
    for shown, text in printed:
        for leak in LEAKS:
            assert leak not in text, f"{shown} printed {leak!r}:\n{text}"
    for path in (vault / ".vault-ko").rglob("*"):
        if path.is_file() and not path.name.startswith("ko.db"):
            data = path.read_bytes().decode("utf-8", "replace")
            for leak in LEAKS:
                assert leak not in data, f"{path} holds {leak!r}"


# --- issue 35, item 5: every character class a password may hold, on every surface -----
#: Each password holds its class between two markers that must never be printed: a
#: printed fragment of it would hold one of them.
CLASSES = {
    "space": " ",
    "at": "@",
    "colon": ":",
    "slash": "/",
    "percent": "%",
    "hash": "#",
    "question": "?",
    "non-ascii": "ü密",
    "quotes": "'\"",
    "backslash": "\\",
}
HEAD, TAIL = "Zq7", "Wx9"


def _graph_url(password: str, host: str, *, encode: bool) -> str:
    """A Bolt URL with the password raw where the driver's parser (urllib) takes it, else
    percent-encoded ("/", "?", "#" end urllib's authority; "%" must start an escape)."""
    raw = not encode and not any(c in password for c in "/?#%")
    return f"bolt://root:{password if raw else quote(password, safe='')}@{host}"


def _kodb_url(password: str, port: int, *, encode: bool) -> str:
    """A PostgreSQL URL with the password raw where SQLAlchemy's parser takes it, else
    percent-encoded (its first "@" ends the password; "%" must start an escape)."""
    raw = not encode and not any(c in password for c in "@%")
    written = password if raw else quote(password, safe="")
    return f"postgresql+psycopg://postgres:{written}@127.0.0.1:{port}/rt"


@pytest.fixture(scope="module")
def ingested_vault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample vault ingested into its SQLite KO-DB (no graph)."""
    vault = tmp_path_factory.mktemp("masked") / "vault"
    shutil.copytree(EXAMPLES / "vault", vault, ignore=shutil.ignore_patterns(".vault-ko"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_KO_")}
    done = subprocess.run(
        [str(BIN / "vault-ko"), "--vault", str(vault), "ingest"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return vault


@pytest.mark.parametrize("encode", [False, True], ids=["raw", "percent-encoded"])
@pytest.mark.parametrize("chars", CLASSES.values(), ids=CLASSES.keys())
def test_a_password_of_any_characters_is_masked_on_every_surface(
    chars: str, encode: bool, ingested_vault: Path, tmp_path: Path
) -> None:
    """Query errors, config show, freshness --json, serve -vv, an answer's degraded_reason
    (CLI and service), graph status and fallback.log, with the KO-DB URL's password (a
    PostgreSQL nobody listens on) and the graph's (a closed port); a graph URL holding the
    password is refused at load, the password masked."""
    password = f"{HEAD}{chars}{TAIL}"
    vault = tmp_path / "vault"
    shutil.copytree(ingested_vault, vault)
    host = f"127.0.0.1:{closed_port()}"
    base = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_KO_")}
    base |= {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    # The Bolt URL takes no password (refused at load); the graph's is its own setting.
    base |= {"VAULT_KO_GRAPH_URL": f"bolt://{host}", "VAULT_KO_GRAPH_PASSWORD": password}
    in_url = base | {"VAULT_KO_GRAPH_URL": _graph_url(password, host, encode=encode)}
    base["COLUMNS"] = "400"  # nothing folded across lines by rich
    with_pg = base | {"VAULT_KO_KODB_URL": _kodb_url(password, closed_port(), encode=encode)}
    vk = [str(BIN / "vault-ko"), "-vv", "--vault", str(vault)]

    printed: list[tuple[str, str]] = []

    def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([*vk, *args], capture_output=True, text=True, env=env, timeout=300)
        assert "Traceback" not in done.stderr, f"{args}:\n{done.stderr}"
        printed.append((" ".join(args), done.stdout + done.stderr))
        return done

    run(["config", "show"], with_pg)
    run(["config", "show", "--json"], with_pg)
    assert run(["config", "show"], in_url).returncode == 3
    assert run(["query", "warm cache", "--no-service", "--json"], in_url).returncode == 3
    run(["freshness", "--json"], with_pg)
    run(["graph", "status"], with_pg)
    run(["freshness", "--json"], base)
    run(["freshness"], base)
    run(["graph", "status", "--json"], base)
    refused = run(["query", "warm cache", "--no-service"], with_pg)
    assert refused.returncode == 2 and "KO-DB" in refused.stderr
    degraded = run(["query", "warm cache", "--no-service", "--json"], base)
    reason = json.loads(degraded.stdout)["degraded_reason"]
    assert reason.startswith(f"the graph is not reachable at {host}"), reason  # in words
    run(["serve"], with_pg)  # KO-DB refused at start, logged at -vv
    if encode:  # the service's own run (it loads the model) once per class is enough
        _assert_no_leak(printed, vault)
        return

    serve = subprocess.Popen(
        [*vk, "serve", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=base,
    )
    try:
        assert serve.stdout is not None
        line = serve.stdout.readline()
        assert line, serve.stderr.read() if serve.stderr else ""
        served = run(["query", "warm cache", "--json"], base)
        assert json.loads(served.stdout)["degraded_reason"], served.stdout
    finally:
        serve.send_signal(signal.SIGTERM)
        out, errors = serve.communicate(timeout=60)
    printed.append(("serve -vv", line + out + errors))
    _assert_no_leak(printed, vault)


def _assert_no_leak(printed: list[tuple[str, str]], vault: Path) -> None:
    for shown, text in printed:
        for leak in (HEAD, TAIL):
            assert leak not in text, f"{shown} printed {leak!r}:\n{text}"
    log = vault / ".vault-ko" / "fallback.log"
    assert log.is_file() and "not reachable at 127.0.0.1:" in log.read_text(encoding="utf-8")
    for path in (vault / ".vault-ko").rglob("*"):
        if path.is_file() and not path.name.startswith("ko.db"):
            data = path.read_bytes().decode("utf-8", "replace")
            for leak in (HEAD, TAIL):
                assert leak not in data, f"{path} holds {leak!r}"
