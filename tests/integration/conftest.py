"""Integration fixtures: one real local ArcadeDB server for the whole test session.

``local_graph`` starts the server through ``pipeline/graph/local.py`` (the code users run)
in a temporary state dir on free ports, and stops it at the end of the session. Locally a
server that cannot start skips the graph tests; on CI (CI=true) it fails them.

``graph_settings`` gives each test settings pointed at that server with an EMPTY graph and
its own state dir (so breaker files never leak between tests). ``graph_env`` turns settings
into the VAULT_KO_* variables a child process or a CLI run needs to reach the same graph.

``served`` is one vault with its own local graph and a running `vault-ko serve`, shared by
the service, hook and MCP tests (a service start loads the model: once per session).

``backend_settings`` is the one fixture of the backend contract suite, parametrized over the
backends: ArcadeDB is the session's local server (it always runs, and on CI it must);
Memgraph and Neo4j run when VAULT_KO_TEST_MEMGRAPH_URL / VAULT_KO_TEST_NEO4J_URL point at a
throwaway server (its Note nodes are deleted), and are otherwise reported as skipped with
"not run: set …" — the one skip allowed on CI, which starts neither.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pipeline.config import Settings
from pipeline.errors import LocalGraphError
from pipeline.graph.local import LocalGraph, LocalRecord


@dataclass(frozen=True)
class LocalGraphHandle:
    """The session's running local graph."""

    local: LocalGraph
    record: LocalRecord

    @property
    def state_dir(self) -> Path:
        return self.local.state_dir

    @property
    def url(self) -> str:
        return self.record.url

    def settings(self, vault: Path, state_dir: Path | None = None, **overrides: Any) -> Settings:
        """Settings for ``vault`` pointed at this server; the state dir defaults to
        ``<vault>/.vault-ko`` (the server's own files stay in the session's state dir).

        Long notes are embedded by their head unless a test asks for passages (the
        default a user gets): the modules that check how notes are found and scored (cold
        query, embed sync, long notes, load-context, the warm copy) ask for them; the
        others test later stages, and passages would only multiply their syncs' time."""
        overrides.setdefault("embed_long_notes", "head")
        base = Settings(vault=vault, state_dir=state_dir or vault / ".vault-ko")
        return self.local.settings_for(base).replace(
            state_dir=state_dir or vault / ".vault-ko", **overrides
        )


@pytest.fixture(scope="session")
def local_graph(
    require_server: Callable[[str], None], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalGraphHandle]:
    """A real local ArcadeDB server (Bolt + HTTP on free ports), stopped at session end."""
    state_dir = tmp_path_factory.mktemp("local-graph") / ".vault-ko"
    local = LocalGraph(state_dir)
    try:
        result = local.up()
    except LocalGraphError as exc:
        local.down()
        require_server(f"the local graph could not start: {exc}")
        raise  # unreachable: require_server skips or fails
    try:
        yield LocalGraphHandle(local=local, record=result.record)
    finally:
        local.down()


def _graph_env(settings: Settings, **extra: str) -> dict[str, str]:
    env = {
        "VAULT_KO_GRAPH_URL": settings.graph_url,
        "VAULT_KO_GRAPH_HTTP_URL": settings.graph_http_url,
        "VAULT_KO_GRAPH_DATABASE": settings.graph_database,
        "VAULT_KO_GRAPH_USER": settings.graph_user,
        "VAULT_KO_GRAPH_PASSWORD": settings.password(),
        "VAULT_KO_GRAPH_DIALECT": settings.graph_dialect,
        **extra,
    }
    return {k: v for k, v in env.items() if v}


@pytest.fixture(scope="session")
def graph_env() -> Callable[..., dict[str, str]]:
    """``graph_env(settings, **extra)``: the VAULT_KO_* variables (unset ones left out) that
    point a child process or a CLI run at the graph of ``settings``, plus ``extra``."""
    return _graph_env


@pytest.fixture
def graph_settings(local_graph: LocalGraphHandle, tmp_path: Path) -> Settings:
    """Settings for a fresh vault pointed at the session's graph, emptied for this test."""
    from pipeline.graph import GraphClient

    vault = tmp_path / "vault"
    vault.mkdir(exist_ok=True)
    settings = local_graph.settings(vault)
    with GraphClient(settings) as client:
        paths = list(client.note_states())
        client.delete_notes(paths)
    return settings


#: The servers of the contract suite besides the local ArcadeDB: (URL variable, prefix of
#: the optional USER / PASSWORD / DATABASE variables, default user).
REMOTE_BACKENDS = {
    "memgraph": ("VAULT_KO_TEST_MEMGRAPH_URL", "VAULT_KO_TEST_MEMGRAPH", None),
    "neo4j": ("VAULT_KO_TEST_NEO4J_URL", "VAULT_KO_TEST_NEO4J", "neo4j"),
}


def _empty_graph(settings: Settings) -> None:
    from pipeline.graph import GraphClient

    with GraphClient(settings) as client:
        client.ensure_schema(384)  # a graph from before passages gains their index
        client.delete_notes(list(client.note_states()))
        client.delete_orphan_passages()


@pytest.fixture(params=["arcadedb", "memgraph", "neo4j"])
def backend_settings(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    """Settings for an EMPTY graph of one backend, with this test's own state dir."""
    vault = tmp_path / "vault"
    vault.mkdir(exist_ok=True)
    if request.param == "arcadedb":
        settings = request.getfixturevalue("local_graph").settings(vault)
    else:
        url_var, prefix, default_user = REMOTE_BACKENDS[request.param]
        url = os.environ.get(url_var)
        if not url:
            pytest.skip(f"not run: set {url_var} to run the contract suite on {request.param}")
        settings = Settings(
            vault=vault,
            state_dir=vault / ".vault-ko",
            graph_url=url,
            graph_user=os.environ.get(f"{prefix}_USER") or default_user or "",
            graph_password=os.environ.get(f"{prefix}_PASSWORD") or None,
            graph_database=os.environ.get(f"{prefix}_DATABASE") or None,
        )
    _empty_graph(settings)
    return settings


# -- one running service for the service, hook and MCP tests ---------------------------------

#: A note under the served vault's private glob: it talks about Redis and the warm cache, so
#: without the filter it would be among the hits of the Redis questions.
PRIVATE_NOTE = """---
subject: Zanzibar salary review
---
# Zanzibar salary review

The Zanzibar raise is paid from the warm cache savings: [[Redis]] let us drop two database
replicas, and the warm cache budget moves to salaries.
"""
PRIVATE_PATH = "private/zanzibar-salary-review.md"
EXAMPLE_VAULT = Path(__file__).resolve().parents[2] / "examples" / "vault"
#: A cold service start loads the model: 10–30 s on this 2-core machine under load.
SERVICE_START_TIMEOUT = 240.0


def hermetic_env(**extra: str) -> dict[str, str]:
    """The environment of a child vault-ko process: no VAULT_KO_* of the developer's shell,
    the model offline."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_KO_")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", **extra)
    return env


def vault_ko_exe() -> str:
    """The installed `vault-ko` console script of this interpreter's venv."""
    import sys

    return str(Path(sys.executable).with_name("vault-ko"))


def private_vault_copy(dest: Path) -> Path:
    """A copy of the sample vault with a private folder and its glob in vault-ko.toml."""
    import shutil

    shutil.copytree(EXAMPLE_VAULT, dest, ignore=shutil.ignore_patterns(".vault-ko"))
    (dest / "private").mkdir()
    (dest / PRIVATE_PATH).write_text(PRIVATE_NOTE, encoding="utf-8")
    (dest / "vault-ko.toml").write_text('[vault]\nprivate_globs = ["private/**"]\n')
    return dest


@dataclass
class Served:
    """A vault (the sample plus a private note) with its own local graph, synced, and its
    `vault-ko serve` running in a child process."""

    vault: Path
    settings: Settings
    url: str
    pid: int
    env: dict[str, str]
    #: ``GET /healthz`` read as soon as the service announced itself, before any question.
    at_start: dict[str, Any]

    def cli(
        self, *args: str, stdin: str | None = None, timeout: float = 300.0
    ) -> subprocess.CompletedProcess[str]:
        """Run `vault-ko --vault <vault> ARGS` as a new process."""
        return subprocess.run(
            [vault_ko_exe(), "--vault", str(self.vault), *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=self.env,
            timeout=timeout,
        )


def start_service(
    vault: Path, env: dict[str, str], *extra: str, log: Path
) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    """`vault-ko serve --json EXTRA` for ``vault``; its start line once it accepts
    connections."""
    import select

    proc = subprocess.Popen(
        [vault_ko_exe(), "--vault", str(vault), "serve", "--json", *extra],
        stdout=subprocess.PIPE,
        stderr=log.open("w"),
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], SERVICE_START_TIMEOUT)
    line = proc.stdout.readline() if ready else ""
    if not line:
        proc.kill()
        proc.wait()
        raise AssertionError(f"the service did not start: {log.read_text()}")
    return proc, json.loads(line)


def stop_service(proc: subprocess.Popen[str], timeout: float = 60.0) -> int:
    """SIGTERM, then the exit code (SIGKILL after ``timeout``)."""
    import signal

    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


@pytest.fixture(scope="session")
def served(
    require_server: Callable[[str], None], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """One service for the service, hook and MCP tests (starting one loads the model)."""
    from pipeline.app import App
    from pipeline.config import load_settings
    from pipeline.sync import sync_vault

    root = tmp_path_factory.mktemp("served")
    vault = private_vault_copy(root / "vault")
    env = hermetic_env()
    settings = load_settings(vault, env={})
    local = LocalGraph(settings.state_dir, heap="512m")
    try:
        local.up(settings=settings)
    except LocalGraphError as exc:
        local.down()
        require_server(f"the served vault's local graph could not start: {exc}")
        raise
    proc = None
    try:
        with App(settings) as app:
            sync_vault(settings, app.kodb, app.graph, app.load_model())
        proc, started = start_service(vault, env, log=root / "serve.log")
        import httpx

        at_start = httpx.get(started["url"] + "/healthz", timeout=60).json()
        yield Served(vault, settings, started["url"], started["pid"], env, at_start)
    finally:
        if proc is not None:
            stop_service(proc)
        local.down()


@pytest.fixture(scope="session")
def service_kit() -> Any:
    """The helpers above for test modules (conftest modules are not importable)."""
    from types import SimpleNamespace

    return SimpleNamespace(
        hermetic_env=hermetic_env,
        private_vault_copy=private_vault_copy,
        start_service=start_service,
        stop_service=stop_service,
        exe=vault_ko_exe,
        PRIVATE_PATH=PRIVATE_PATH,
    )
