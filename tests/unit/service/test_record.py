"""The service record: written 0600 through the state-file helper, found only while its pid
lives and names the same vault; the bind rule; the stdlib client's error translation."""

from __future__ import annotations

import os
import stat
from dataclasses import replace
from pathlib import Path

import pytest

from pipeline.errors import ConfigError, ServiceError
from pipeline.service.client import ServiceClient, find_service
from pipeline.service.record import (
    ServiceRecord,
    is_loopback,
    live_record,
    read_record,
    record_path,
    remove_record,
    settings_digest,
    write_record,
)
from pipeline.service.server import bind, check_bind


def record(vault: Path, pid: int | None = None, port: int = 1) -> ServiceRecord:
    return ServiceRecord("127.0.0.1", port, pid or os.getpid(), str(vault), token="t0ken")


def test_the_record_is_private_and_read_back(tmp_path: Path) -> None:
    write_record(tmp_path, record(tmp_path))
    assert stat.S_IMODE(record_path(tmp_path).stat().st_mode) == 0o600
    assert read_record(tmp_path) == record(tmp_path)
    assert live_record(tmp_path, tmp_path) == record(tmp_path)


def test_a_dead_pid_another_vault_or_junk_is_no_service(tmp_path: Path) -> None:
    write_record(tmp_path, record(tmp_path, pid=2**22 + 12345))
    assert live_record(tmp_path, tmp_path) is None
    write_record(tmp_path, record(tmp_path / "other"))
    assert live_record(tmp_path, tmp_path) is None
    record_path(tmp_path).write_text("{")
    assert read_record(tmp_path) is None


def test_a_service_with_other_settings_does_not_answer_for_us(tmp_path: Path) -> None:
    from pipeline.config import load_settings

    ours = load_settings(tmp_path, env={})
    other = ours.replace(kodb_url="postgresql+psycopg://u@h/other")
    rec = ServiceRecord(
        "127.0.0.1", 1, os.getpid(), str(ours.vault), settings_digest=settings_digest(other)
    )
    write_record(ours.state_dir, rec)
    assert find_service(ours) is None
    write_record(ours.state_dir, replace(rec, settings_digest=settings_digest(ours)))
    found = find_service(ours)
    assert found is not None and found.record.port == 1
    assert "postgresql" not in record_path(ours.state_dir).read_text()


def test_a_service_ordering_the_latest_otherwise_does_not_answer_for_us(tmp_path: Path) -> None:
    """query_latest decides an answer's order and is not in the request: a service started
    with the other value must not answer this client's questions."""
    from pipeline.config import load_settings

    ours = load_settings(tmp_path, env={})
    theirs = ours.replace(query_latest="relevance")
    assert settings_digest(theirs) != settings_digest(ours)


def test_only_its_own_record_is_removed(tmp_path: Path) -> None:
    write_record(tmp_path, record(tmp_path))
    remove_record(tmp_path, os.getpid() + 1)
    assert read_record(tmp_path) is not None
    remove_record(tmp_path, os.getpid())
    assert read_record(tmp_path) is None


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("10.1.2.3", False),
    ],
)
def test_loopback_addresses(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_a_non_loopback_bind_needs_a_token() -> None:
    with pytest.raises(ConfigError, match="needs a bearer token"):
        check_bind("0.0.0.0", None)
    check_bind("0.0.0.0", "secret")
    check_bind("127.0.0.1", None)


def test_a_client_of_a_closed_port_raises_service_error(tmp_path: Path) -> None:
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    sock.close()
    client = ServiceClient(record(tmp_path, port=port))
    with pytest.raises(ServiceError, match="failed"):
        client.call("GET", "/healthz", timeout=0.5)
    assert client.healthy(0.5) is False


def test_an_address_in_use_is_a_clear_error() -> None:
    sock = bind("127.0.0.1", 0)
    try:
        with pytest.raises(ServiceError, match="cannot listen"):
            bind("127.0.0.1", sock.getsockname()[1])
    finally:
        sock.close()
