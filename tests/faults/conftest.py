"""Fault injection on real servers: the local ArcadeDB (own JVMs, so killing one never
touches another suite's), the real PostgreSQL, and TCP proxies and silent listeners on the
loopback that the tests cut or leave mute.

Kill points are seeded (``VAULT_KO_FAULTS_SEED``, default 15) so a failure replays. CI runs
a few of them; ``VAULT_KO_FAULTS_FULL=1`` runs many (see RELIABILITY.md). Bounds are the
configured ones (``graph_call_timeout``, the retry deadline), never a guessed wall clock —
except the product's own budget of a degraded answer from a cold CLI (3 s, DESIGN §5).
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pipeline.config import Settings
from pipeline.errors import LocalGraphError
from pipeline.graph.local import LocalGraph, LocalRecord

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_VAULT = REPO / "examples" / "vault"
FULL = os.environ.get("VAULT_KO_FAULTS_FULL", "").lower() in ("1", "true", "yes")
SEED = int(os.environ.get("VAULT_KO_FAULTS_SEED", "15"))
#: The questions of a query stream (the sample vault's ADRs answer each in semantic mode).
QUESTIONS = [
    "why did we choose redis for the warm cache?",
    "how do we invalidate the warm cache?",
    "what is the search indexer built on?",
    "how are feature flags managed?",
    "why pgbouncer in transaction mode?",
    "rate limiting at the gateway",
    "kafka topic partitioning by workspace",
    "gyorsítótár kulcsok verziózása",
]


def kill_points(quick: int, full: int) -> int:
    """How many seeded kill points a test tries: ``quick`` on CI, ``full`` in a full run."""
    return full if FULL else quick


def rng(name: str) -> random.Random:
    """A generator seeded by the run's seed and the test's name (each test replays alone)."""
    return random.Random(f"{SEED}:{name}")


@dataclass
class OwnGraph:
    """A local ArcadeDB of this suite that a test may kill, stop or restart."""

    local: LocalGraph
    record: LocalRecord

    @property
    def pid(self) -> int:
        info = self.local.info()
        assert info.record is not None and info.record.pid is not None
        return info.record.pid

    def settings(self, vault: Path, **overrides: Any) -> Settings:
        base = Settings(vault=vault, state_dir=vault / ".vault-ko")
        return self.local.settings_for(base).replace(state_dir=vault / ".vault-ko", **overrides)

    def kill(self) -> None:
        """SIGKILL the server and wait until it is gone."""
        pid = self.pid
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            if Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
                return
            time.sleep(0.02)
        raise AssertionError(f"the graph server {pid} did not die")

    def restart(self) -> None:
        """Start it again (same ports when free; the data dir keeps the notes)."""
        self.record = self.local.up().record

    def env(self, settings: Settings, **extra: str) -> dict[str, str]:
        """The environment of a child vault-ko process pointed at this graph."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_KO_")}
        env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        values = {
            "VAULT_KO_GRAPH_URL": settings.graph_url,
            "VAULT_KO_GRAPH_HTTP_URL": settings.graph_http_url,
            "VAULT_KO_GRAPH_DATABASE": settings.graph_database,
            "VAULT_KO_GRAPH_PASSWORD": settings.password(),
        }
        env.update({k: v for k, v in values.items() if v})
        env.update(extra)
        return env


def start_graph(
    root: Path, require_server: Callable[[str], None], heap: str = "512m"
) -> Iterator[OwnGraph]:
    local = LocalGraph(root / "graph-state", heap=heap)
    try:
        result = local.up()
    except LocalGraphError as exc:
        local.down()
        require_server(f"the faults suite's local graph could not start: {exc}")
        raise
    graph = OwnGraph(local, result.record)
    try:
        yield graph
    finally:
        info = local.info()
        if info.record is not None and info.record.pid is not None:
            with contextlib.suppress(ProcessLookupError):  # a test may leave it stopped
                os.kill(info.record.pid, signal.SIGCONT)
        local.down()


@pytest.fixture(scope="session")
def faults_graph(
    require_server: Callable[[str], None], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OwnGraph]:
    """A local graph the process-fault tests share (never killed itself)."""
    yield from start_graph(tmp_path_factory.mktemp("faults-graph"), require_server)


@pytest.fixture(scope="session")
def faults_embedder() -> Any:
    """The default model, loaded once for the suite's in-process runs (a child process that
    is killed loads its own)."""
    from pipeline.app import App

    with App(Settings(vault=REPO, state_dir=REPO / ".vault-ko")) as app:
        return app.load_model(before_stores=True)


def copy_vault(dest: Path, *folders: str) -> Path:
    """A copy of the sample vault (only ``folders`` of it when given: the runs that load
    the model in a child process embed fewer notes)."""
    if not folders:
        shutil.copytree(EXAMPLE_VAULT, dest, ignore=shutil.ignore_patterns(".vault-ko"))
    for folder in folders:
        shutil.copytree(EXAMPLE_VAULT / folder, dest / folder)
    return dest


def hermetic_env(**extra: str) -> dict[str, str]:
    """A child process's environment: no VAULT_KO_* of the developer's shell, model offline."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_KO_")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", **extra)
    return env


def vault_ko_exe() -> str:
    return str(Path(sys.executable).with_name("vault-ko"))


# -- a TCP proxy the test can cut -------------------------------------------------------
@dataclass
class TcpProxy:
    """Forwards 127.0.0.1:<port> to ``target``. ``cut()`` closes every connection and
    refuses new ones (the server became unreachable); ``cut_after`` bytes sent by clients
    cuts at a chosen point of a conversation."""

    target: tuple[str, int]
    cut_after: int | None = None
    sent: int = 0
    _listener: socket.socket = field(init=False)
    _conns: list[socket.socket] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _cut: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def port(self) -> int:
        return int(self._listener.getsockname()[1])

    def _accept(self) -> None:
        while not self._cut.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._cut.is_set():
                client.close()
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns += [client, upstream]
            threading.Thread(target=self._pipe, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, from_client: bool) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if from_client:
                    with self._lock:
                        self.sent += len(data)
                        over = self.cut_after is not None and self.sent >= self.cut_after
                    if over:
                        self.cut()
                        return
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        self._cut.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            conns, self._conns = self._conns, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
                s.close()
            except OSError:
                pass


class SilentListener:
    """A loopback port that accepts TCP connections and never says a word (``handshake``:
    it answers the Bolt version handshake first, then stays mute)."""

    def __init__(self, handshake: bool = False) -> None:
        self.handshake = handshake
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)
            if self.handshake:
                threading.Thread(target=self._answer_version, args=(conn,), daemon=True).start()

    @staticmethod
    def _answer_version(conn: socket.socket) -> None:
        try:
            conn.recv(20)  # the magic and four proposed versions
            conn.sendall(bytes([0, 0, 4, 4]))  # Bolt 4.4; then silence
        except OSError:
            pass

    def close(self) -> None:
        for conn in self.held:
            conn.close()
        self.sock.close()


@pytest.fixture(scope="session")
def faults_kit() -> SimpleNamespace:
    """The helpers above for the test modules (conftest modules are not importable)."""
    return SimpleNamespace(
        QUESTIONS=QUESTIONS,
        FULL=FULL,
        SEED=SEED,
        kill_points=kill_points,
        rng=rng,
        copy_vault=copy_vault,
        exe=vault_ko_exe,
        hermetic_env=hermetic_env,
        TcpProxy=TcpProxy,
        SilentListener=SilentListener,
        start_graph=start_graph,
    )
