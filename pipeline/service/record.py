"""The service record, ``<state_dir>/service.json``: where the service of a vault listens.

Written (mode 0600: it may hold the bearer token) through ``pipeline.statefile`` once the
service accepts connections, removed at shutdown. A record counts only while its pid is
alive, names the same vault and was started with the settings that shape an answer (the
same KO-DB, graph, model, private globs: ``settings_digest``), so a crashed service (its
record left behind), a copied state dir, or a client pointed at another KO-DB is never
answered by it.
"""

from __future__ import annotations

import hashlib
import ipaddress
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pipeline import statefile

RECORD_NAME = "service.json"
#: Addresses a service binds to that clients on this machine reach through loopback.
_ANY_ADDRESS = {"0.0.0.0", "::", ""}


@dataclass(frozen=True)
class ServiceRecord:
    host: str
    port: int
    pid: int
    vault: str
    token: str | None = None
    started_at: float | None = None
    version: str | None = None
    settings_digest: str | None = None

    @property
    def url(self) -> str:
        """The base URL a client on this machine uses."""
        host = self.host
        if host in _ANY_ADDRESS:
            host = "127.0.0.1"
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def settings_digest(settings: Any) -> str:
    """A digest of the settings an answer depends on (never shown: the KO-DB URL may hold a
    password)."""
    parts = (
        settings.effective_kodb_url,
        settings.graph_url or "",
        settings.graph_database or "",
        settings.embed_model,
        "\x1e".join(settings.vault_private_globs),
        str(settings.graph_candidates),
        str(settings.query_facts_per_predicate_cap),
        settings.query_latest,
        str(settings.state_dir),
    )
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:24]


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the service on this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def record_path(state_dir: Path) -> Path:
    return Path(state_dir) / RECORD_NAME


def write_record(state_dir: Path, record: ServiceRecord) -> None:
    statefile.write_json(record_path(state_dir), record.to_dict(), mode=0o600)


def read_record(state_dir: Path) -> ServiceRecord | None:
    """The record, or None when there is none or it cannot be read as one."""
    try:
        data = statefile.read_json(record_path(state_dir))
        if not isinstance(data, dict):
            return None
        known = {k: data[k] for k in ServiceRecord.__dataclass_fields__ if k in data}
        record = ServiceRecord(**known)
        return record if isinstance(record.port, int) and isinstance(record.pid, int) else None
    except (OSError, ValueError, TypeError):
        return None


def remove_record(state_dir: Path, pid: int) -> None:
    """Remove the record if it is still this process's (a newer service keeps its own)."""
    record = read_record(state_dir)
    if record is not None and record.pid == pid:
        statefile.remove(record_path(state_dir))


def live_record(state_dir: Path, vault: Path, digest: str | None = None) -> ServiceRecord | None:
    """The record of a service running for ``vault`` (with settings of ``digest``, when
    given), or None (no network I/O)."""
    record = read_record(state_dir)
    if record is None or record.vault != str(vault) or not statefile.pid_alive(record.pid):
        return None
    if digest is not None and record.settings_digest != digest:
        return None
    return record
