"""The local graph's files, as every graph module reads them (no process, no network).

``local.py`` starts and stops the server and writes these files; the client reads them to
find the server (``graph_url`` unset) and its password. Both import this module, which
imports neither, so there is no import circle between the client and the local manager.

    <state_dir>/graph/local.json       pid, bolt/http ports, database, started_at (no secret)
    <state_dir>/graph/root.password    the generated root password, mode 0600
    <state_dir>/graph/server.log       the server's stdout and stderr
    <state_dir>/graph/server/          ArcadeDB's root: databases/, config/, log/, backups/
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import LocalGraphError
from pipeline.statefile import pid_alive

HOST = "127.0.0.1"
DATABASE = "vault"
ROOT_USER = "root"
SERVER_CLASS = "com.arcadedb.server.ArcadeDBServer"
_ROOT_FLAG = b"-Darcadedb.server.rootPath="


@dataclass(frozen=True)
class LocalRecord:
    """``local.json``: where the local server listens and whether it was started."""

    bolt_port: int
    http_port: int
    https_port: int
    database: str = DATABASE
    pid: int | None = None
    started_at: float | None = None
    stopped_at: float | None = None

    @property
    def url(self) -> str:
        return f"bolt://{HOST}:{self.bolt_port}"

    @property
    def http_url(self) -> str:
        return f"http://{HOST}:{self.http_port}"


class LocalFiles:
    """The paths of one state dir's local graph, and the reading of its record and secret."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = Path(state_dir)
        self.dir = self.state_dir / "graph"
        self.record_path = self.dir / "local.json"
        self.password_path = self.dir / "root.password"
        self.log_path = self.dir / "server.log"
        self.root_path = self.dir / "server"

    def read_record(self) -> LocalRecord | None:
        """The recorded ports and pid, or None when `graph up` never ran here."""
        try:
            data = json.loads(self.record_path.read_text(encoding="utf-8"))
            known = {k: data[k] for k in LocalRecord.__dataclass_fields__ if k in data}
            return LocalRecord(**known)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError) as exc:
            raise LocalGraphError(
                f"unreadable local graph record {self.record_path}: {exc}"
            ) from exc

    def password(self) -> str | None:
        """The generated root password, or None before the first `graph up`."""
        try:
            return self.password_path.read_text(encoding="utf-8").strip() or None
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise LocalGraphError(f"cannot read {self.password_path}: {exc}") from exc

    def is_our_server(self, pid: int) -> bool:
        """Whether ``pid`` is this state dir's ArcadeDB server: alive, and started with this
        root path (a copied vault's record names the original's server, whose password the
        copy also holds)."""
        if not pid_alive(pid):
            return False
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return True  # no /proc (macOS): trust the live pid
        given = [a[len(_ROOT_FLAG) :] for a in cmdline if a.startswith(_ROOT_FLAG)]
        if SERVER_CLASS.encode() not in cmdline or len(given) != 1:
            return False
        # The same folder however it was spelled when the server started (a relative or
        # linked state dir): the server's own working directory anchors a relative one.
        path = Path(os.fsdecode(given[0]))
        try:
            if not path.is_absolute():
                path = Path(os.readlink(f"/proc/{pid}/cwd")) / path
            return os.path.samefile(path, self.root_path)
        except OSError:
            return os.path.abspath(path) == os.path.abspath(self.root_path)
