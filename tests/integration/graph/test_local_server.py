"""The local graph server lifecycle, `vault-ko graph`, and the graph's failure modes."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.config import Settings
from pipeline.errors import GraphUnavailable
from pipeline.graph import GraphClient, GraphNote, LocalGraph
from pipeline.graph.breaker import STOPPED_REASON

if TYPE_CHECKING:
    from tests.integration.conftest import LocalGraphHandle

pytestmark = pytest.mark.integration

STATUS_KEYS = ["up", "url", "dialect", "agent", "latency_ms", "reason", "detail"]


def status_json(vault: Path, env: dict[str, str] | None = None) -> tuple[int, dict]:
    result = CliRunner().invoke(cli, ["--vault", str(vault), "graph", "status", "--json"], env=env)
    return result.exit_code, json.loads(result.stdout)


def test_up_on_a_running_server_only_reports_it(local_graph: LocalGraphHandle) -> None:
    again = local_graph.local.up()
    assert not again.started
    assert again.record.pid == local_graph.record.pid
    assert again.record.bolt_port == local_graph.record.bolt_port


def test_status_json_reports_the_running_server(local_graph: LocalGraphHandle) -> None:
    code, data = status_json(local_graph.state_dir.parent)
    assert code == 0
    assert list(data) == STATUS_KEYS
    assert data["up"] is True and data["url"] == local_graph.url
    assert data["dialect"] == "arcadedb" and "ArcadeDB" in data["agent"]
    assert data["latency_ms"] > 0 and data["reason"] is None and data["detail"] is None


def test_status_json_on_a_closed_port_is_down_with_a_reason(tmp_path: Path) -> None:
    code, data = status_json(tmp_path, env={"VAULT_KO_GRAPH_URL": "bolt://127.0.0.1:1"})
    assert code == 2
    assert list(data) == STATUS_KEYS
    assert data["up"] is False and data["url"] == "bolt://127.0.0.1:1"
    assert data["dialect"] is None and data["latency_ms"] is None
    # In words, as the table and freshness say it; the driver's text beside it.
    assert data["reason"] == "the graph is not reachable at 127.0.0.1:1 (connection refused)"
    assert "unavailable" in data["detail"]


def test_status_of_a_vault_without_a_graph_says_how_to_start_it(tmp_path: Path) -> None:
    code, data = status_json(tmp_path)
    assert code == 2 and data["up"] is False
    assert "vault-ko graph up" in data["reason"]


def test_closed_port_is_unavailable_within_the_deadline_then_fails_fast(tmp_path: Path) -> None:
    settings = Settings(
        vault=tmp_path,
        state_dir=tmp_path / ".vault-ko",
        graph_url="bolt://127.0.0.1:1",
        graph_password="x",
    )
    with GraphClient(settings) as client:
        started = time.perf_counter()
        with pytest.raises(GraphUnavailable, match="unavailable"):
            client.note_states()
        assert time.perf_counter() - started < 2.5
        started = time.perf_counter()
        with pytest.raises(GraphUnavailable, match="circuit open"):
            client.note_states()
        assert time.perf_counter() - started < 0.05


def test_breaker_closes_when_the_graph_answers_after_the_cooldown(graph_settings: Settings) -> None:
    settings = graph_settings.replace(graph_breaker_cooldown=0.3)
    with GraphClient(settings) as client:
        client.ensure_schema(384)
        client.breaker.record_failure("simulated outage")
        started = time.perf_counter()
        with pytest.raises(GraphUnavailable, match="simulated outage"):
            client.note_states()
        assert time.perf_counter() - started < 0.05
        time.sleep(0.35)
        assert client.note_states() == {}  # the half-open probe went through …
        assert client.breaker.read().state == "closed"  # … and closed the circuit


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[LocalGraph]:
    """A second local server in its own state dir, stopped at the end of the test."""
    local = LocalGraph(tmp_path / "vault" / ".vault-ko")
    (tmp_path / "vault").mkdir()
    try:
        yield local
    finally:
        local.down()


def test_lifecycle_up_down_idempotent_data_kept_breaker_follows(
    own_server: LocalGraph,
    local_graph: LocalGraphHandle,
) -> None:
    local = own_server
    vault = local.state_dir.parent
    runner = CliRunner()

    first = runner.invoke(cli, ["--vault", str(vault), "graph", "up", "--dims", "4", "--json"])
    assert first.exit_code == 0, first.output
    up = json.loads(first.stdout)
    assert up["started"] is True and up["dims"] == 4
    # Two state dirs, two servers, different ports, both answering.
    assert up["url"] != local_graph.url
    assert status_json(vault)[1]["up"] is True
    assert status_json(local_graph.state_dir.parent)[1]["up"] is True
    password = local.password_path
    assert password.stat().st_mode & 0o777 == 0o600
    assert password.read_text().strip() not in (local.dir / "local.json").read_text()

    settings = Settings(vault=vault, state_dir=local.state_dir)
    vector = np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)
    with GraphClient(settings) as client:
        client.upsert_notes(
            [GraphNote("kept.md", "Kept", "wiki", "h", "m", 4, 1.0, (1.0, 0, 0, 0))]
        )

    second = runner.invoke(cli, ["--vault", str(vault), "graph", "up", "--json"])
    assert json.loads(second.stdout)["started"] is False
    assert json.loads(second.stdout)["dims"] is None  # left as it was

    down = runner.invoke(cli, ["--vault", str(vault), "graph", "down", "--json"])
    assert json.loads(down.stdout) == {"stopped": True, "state_dir": str(local.state_dir)}
    assert (
        json.loads(runner.invoke(cli, ["--vault", str(vault), "graph", "down", "--json"]).stdout)[
            "stopped"
        ]
        is False
    )
    code, data = status_json(vault)
    assert code == 2 and data["up"] is False

    with GraphClient(settings) as client:  # `graph down` opened the breaker: fail fast
        started = time.perf_counter()
        with pytest.raises(GraphUnavailable, match=STOPPED_REASON.replace("`", ".")):
            client.note_states()
        assert time.perf_counter() - started < 0.05

    again = runner.invoke(cli, ["--vault", str(vault), "graph", "up", "--json"])
    assert json.loads(again.stdout)["url"] == up["url"]  # same ports, same URL
    assert json.loads(again.stdout)["dims"] == 4  # a restart keeps the existing index
    with GraphClient(settings) as client:  # `graph up` reset the breaker; data survived
        assert client.circuit_open_reason() is None
        [hit] = client.vector_search(vector, 1)
        assert hit.path == "kept.md" and hit.cosine == pytest.approx(1.0)


def test_server_outlives_the_cli_process_that_started_it(own_server: LocalGraph) -> None:
    import subprocess
    import sys

    vault = own_server.state_dir.parent
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from pipeline.cli import main; main()",
            "--vault",
            str(vault),
            "graph",
            "up",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    pid = json.loads(done.stdout)["pid"]
    info = own_server.info()  # the CLI process has exited; the server runs on
    assert info.running and info.record is not None and info.record.pid == pid
