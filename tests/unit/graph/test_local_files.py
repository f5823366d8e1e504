"""The local graph manager's file-level behaviour (no server is started here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import pipeline.graph
from pipeline.config import Settings
from pipeline.errors import LocalGraphError
from pipeline.graph import local as local_mod
from pipeline.graph.client import resolve_target
from pipeline.graph.local import LocalGraph, LocalRecord, hash_password
from pipeline.graph.local_state import SERVER_CLASS
from pipeline.graph.records import GraphStatus, GraphTarget


def test_password_hash_matches_arcadedb_format() -> None:
    # Stored by a real ArcadeDB 26.10.2 server for the password "testpw12345678".
    salt = "c2t0oI2eU59N7vSwEM2y9dam0JapFnKBE3cnix1fsJg="
    expected = (
        "PBKDF2WithHmacSHA256$65536$c2t0oI2eU59N7vSwEM2y9dam0JapFnKBE3cnix1fsJg="
        "$Bc3gKqxUa6qD55j6+tC+p2jJbfz/sccyBjuU+79oTyI="
    )
    assert hash_password("testpw12345678", salt) == expected
    assert hash_password("x") != hash_password("x")  # a fresh salt each time


def test_missing_package_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_mod.importlib.util, "find_spec", lambda _name: None)
    with pytest.raises(LocalGraphError, match="arcadedb-embedded"):
        local_mod.package_dir()


def test_missing_java_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "jars").mkdir()
    with pytest.raises(LocalGraphError, match="Java runtime"):
        local_mod.java_command(tmp_path)


def test_free_ports_are_distinct() -> None:
    ports = local_mod._free_ports(3)
    assert len(set(ports)) == 3 and all(1024 <= p < 65536 for p in ports)


def write_record(local: LocalGraph, **fields: object) -> None:
    record = {"bolt_port": 40001, "http_port": 40002, "https_port": 40003, **fields}
    local.dir.mkdir(parents=True, exist_ok=True)
    local.record_path.write_text(json.dumps(record))


def test_no_record_means_not_running(tmp_path: Path) -> None:
    info = LocalGraph(tmp_path).info()
    assert (info.record, info.running, info.stale_pid) == (None, False, None)
    assert LocalGraph(tmp_path).down() is False


def test_dead_pid_is_detected_as_stale(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    dead = int(done.stdout)
    local = LocalGraph(tmp_path)
    write_record(local, pid=dead)
    info = local.info()
    assert not info.running and info.stale_pid == dead


def test_live_pid_of_another_program_is_stale_too(tmp_path: Path) -> None:
    local = LocalGraph(tmp_path)
    write_record(local, pid=os.getpid())  # alive, but not our ArcadeDB server
    info = local.info()
    assert not info.running and info.stale_pid == os.getpid()


def test_down_with_a_stale_pid_clears_it_and_opens_the_breaker(tmp_path: Path) -> None:
    local = LocalGraph(tmp_path)
    write_record(local, pid=os.getpid())
    assert local.down() is False  # it was not our server: nothing was killed
    record = local.read_record()
    assert record is not None and record.pid is None and record.stopped_at is not None
    from pipeline.graph.breaker import Breaker

    assert "graph down" in (Breaker(tmp_path, record.url, 30.0).open_reason() or "")


def test_record_urls_are_loopback(tmp_path: Path) -> None:
    record = LocalRecord(bolt_port=1234, http_port=1235, https_port=1236)
    assert record.url == "bolt://127.0.0.1:1234"
    assert record.http_url == "http://127.0.0.1:1235"


def test_corrupt_record_is_a_local_graph_error(tmp_path: Path) -> None:
    local = LocalGraph(tmp_path)
    local.dir.mkdir(parents=True)
    local.record_path.write_text("{")
    with pytest.raises(LocalGraphError, match="unreadable"):
        local.read_record()


def test_public_api_is_exported() -> None:
    for name in (
        "GraphClient",
        "GraphStatus",
        "NoteState",
        "GraphNote",
        "GraphHit",
        "LocalGraph",
    ):
        assert name in pipeline.graph.__all__
        assert getattr(pipeline.graph, name) is not None
    assert set(pipeline.graph.__all__) == {
        n for n in pipeline.graph.__all__ if hasattr(pipeline.graph, n)
    }


def test_status_json_has_exactly_the_documented_keys() -> None:
    status = GraphStatus(False, "bolt://x", None, None, None, "down")
    assert list(status.to_dict()) == ["up", "url", "dialect", "agent", "latency_ms", "reason"]


def test_client_and_local_manager_do_not_import_each_other() -> None:
    # Both read the local record and password from local_state, the module below them.
    code = (
        "import sys\n"
        "import pipeline.graph.client\n"
        "a = 'pipeline.graph.local' in sys.modules\n"
        "for m in [m for m in sys.modules if m.startswith('pipeline.graph.')]:\n"
        "    del sys.modules[m]\n"
        "import pipeline.graph.local\n"
        "b = 'pipeline.graph.client' in sys.modules\n"
        "print(a, b)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"]


def _sleeper(*args: str) -> subprocess.Popen[bytes]:
    """A live process whose command line carries ``args`` (as a server's would)."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", *args])


def _target(tmp_path: Path, **values: object) -> GraphTarget:
    settings = Settings(vault=tmp_path, state_dir=tmp_path / ".vault-ko", **values)
    return resolve_target(settings)


def test_a_copied_vaults_record_does_not_reach_the_originals_server(tmp_path: Path) -> None:
    # `cp -r vault copy` copies .vault-ko: its record names the original's server, whose
    # password the copy holds too, so a sync of the copy wrote into the original's graph.
    local = LocalGraph(tmp_path / ".vault-ko")
    original = _sleeper(SERVER_CLASS, "-Darcadedb.server.rootPath=/elsewhere/graph/server")
    ours = _sleeper(SERVER_CLASS, f"-Darcadedb.server.rootPath={local.root_path}")
    try:
        write_record(local, pid=original.pid)
        target = _target(tmp_path)
        assert target.not_started is not None
        assert f"pid {original.pid}" in target.not_started and "graph up" in target.not_started
        write_record(local, pid=ours.pid)
        assert _target(tmp_path).not_started is None
        assert _target(tmp_path).url == "bolt://127.0.0.1:40001"
    finally:
        for process in (original, ours):
            process.kill()
            process.wait()


def test_a_stopped_local_graph_says_to_start_it(tmp_path: Path) -> None:
    local = LocalGraph(tmp_path / ".vault-ko")
    write_record(local, pid=None, stopped_at=1.0)
    reason = _target(tmp_path).not_started
    assert reason == "the local graph was stopped by `vault-ko graph down`; run `vault-ko graph up`"
    # A graph the settings name is the user's to run: no record is consulted for it.
    named = _target(tmp_path, graph_url="bolt://127.0.0.1:40001")
    assert named.not_started is None


def test_a_long_lived_client_follows_the_record(tmp_path: Path) -> None:
    # The service, a watcher and the MCP server keep one client for their life: started
    # while the graph was down, they must reach it after `graph up`, and never a server
    # that stopped being this vault's.
    from pipeline.graph.client import GraphClient

    local = LocalGraph(tmp_path / ".vault-ko")
    ours = _sleeper(SERVER_CLASS, f"-Darcadedb.server.rootPath={local.root_path}")
    try:
        write_record(local, pid=None, stopped_at=1.0)
        client = GraphClient(Settings(vault=tmp_path, state_dir=tmp_path / ".vault-ko"))
        assert "graph down" in (client.not_started() or "")
        write_record(local, pid=ours.pid)
        assert client.not_started() is None
        write_record(local, pid=ours.pid, bolt_port=40011)
        assert "now listens at bolt://127.0.0.1:40011" in (client.not_started() or "")
    finally:
        ours.kill()
        ours.wait()
    write_record(local, pid=ours.pid)  # gone: not this vault's server any more
    assert "is not this vault's server" in (client.not_started() or "")


def test_the_server_is_ours_however_its_root_was_spelled(tmp_path: Path) -> None:
    # A state dir reached through a link, or given relative to where `graph up` ran.
    real = tmp_path / "real"
    local = LocalGraph(real / ".vault-ko")
    local.root_path.mkdir(parents=True)
    (tmp_path / "linked").symlink_to(real)
    linked = _sleeper(
        SERVER_CLASS,
        "-Darcadedb.server.rootPath=" + str(tmp_path / "linked/.vault-ko/graph/server"),
    )
    relative = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; time.sleep(60)",
            SERVER_CLASS,
            "-Darcadedb.server.rootPath=.vault-ko/graph/server",
        ],
        cwd=real,
    )
    other = _sleeper(SERVER_CLASS, f"-Darcadedb.server.rootPath={tmp_path}/other/graph/server")
    try:
        assert local.is_our_server(linked.pid) and local.is_our_server(relative.pid)
        assert not local.is_our_server(other.pid)
    finally:
        for process in (linked, relative, other):
            process.kill()
            process.wait()
