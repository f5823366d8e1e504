"""Freshness against the real local ArcadeDB, the real KO-DB and the real bundled model.

One copy of the sample vault is synced once for the module (graph up, ingest, embed,
calibrate); each test changes the vault, checks, and puts the vault back.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from prometheus_client.parser import text_string_to_metric_families

from pipeline.app import App
from pipeline.cli.freshness import freshness_standalone
from pipeline.config import load_settings

pytestmark = [pytest.mark.integration, pytest.mark.model]

EXAMPLE_VAULT = Path(__file__).resolve().parents[2] / "examples" / "vault"
WIKI_NOTE = "wiki/kafka.md"
ADR_NOTE = "adr/0007-use-redis-as-the-warm-cache.md"


@pytest.fixture(scope="module")
def vault(
    tmp_path_factory: pytest.TempPathFactory, require_server: Callable[[str], None]
) -> Iterator[Path]:
    """A synced copy of the sample vault with its own local graph (`vault-ko graph up`)."""
    from pipeline.errors import LocalGraphError
    from pipeline.graph import LocalGraph
    from pipeline.sync import sync_vault

    root = tmp_path_factory.mktemp("freshness") / "vault"
    shutil.copytree(EXAMPLE_VAULT, root, ignore=shutil.ignore_patterns(".vault-ko"))
    settings = load_settings(root, env={})
    graph = LocalGraph(settings.state_dir)
    try:
        graph.up(dims=384, settings=settings)
    except LocalGraphError as exc:
        require_server(f"the local graph cannot start: {exc}")
    try:
        with App(settings).pipeline() as p:
            sync_vault(p.settings, p.kodb, p.graph, p.embedder)
        yield root
    finally:
        graph.down()


def check(vault: Path, *args: str) -> tuple[Result, dict]:
    result = CliRunner().invoke(freshness_standalone, ["--vault", str(vault), "--json", *args])
    return result, json.loads(result.output)


@pytest.fixture
def restore(vault: Path) -> Iterator[None]:
    """Put back every note the test edits or deletes, and drop a vault-ko.toml it writes."""
    saved = {p: p.read_bytes() for p in (vault / WIKI_NOTE, vault / ADR_NOTE)}
    yield
    for path, data in saved.items():
        path.write_bytes(data)
    (vault / "vault-ko.toml").unlink(missing_ok=True)


def test_console_script_reports_a_synced_vault_fresh_with_every_count_zero(vault: Path) -> None:
    script = Path(sys.executable).with_name("vault-embed-freshness")
    env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_KO_")}
    result = subprocess.run(
        [str(script), "--vault", str(vault), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env | {"HF_HUB_OFFLINE": "1"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert data["status"] == "fresh"
    assert data["counts"] == {
        "missing": 0,
        "stale": 0,
        "orphaned": 0,
        "model_mismatch": 0,
        "fresh": data["notes_on_disk"],
    }
    assert data["notes_on_disk"] == len(list(vault.rglob("*.md")))
    assert data["calibration"]["status"] == "ok"
    assert data["graph"]["up"] and data["graph"]["dialect"] == "arcadedb"
    assert data["graph"]["agent"] and data["graph"]["latency_ms"] > 0
    assert data["kodb"]["facts"] > 0 and data["kodb"]["orphan_facts"] == 0
    assert data["reread"] == 0  # nothing changed since the sync: no note was read
    assert {t: v["coverage"] for t, v in data["by_type"].items()} == {
        "session": 1.0,
        "wiki": 1.0,
        "adr": 1.0,
    }


def test_editing_one_note_makes_exactly_it_stale_and_exits_1(vault: Path, restore: None) -> None:
    with (vault / WIKI_NOTE).open("a", encoding="utf-8") as fh:
        fh.write("\nOne more line about consumer lag.\n")
    result, data = check(vault)
    assert result.exit_code == 1
    assert data["status"] == "stale"
    assert data["notes"]["stale"] == [WIKI_NOTE]
    assert {k: v for k, v in data["counts"].items() if k != "fresh"} == {
        "missing": 0,
        "stale": 1,
        "orphaned": 0,
        "model_mismatch": 0,
    }
    assert data["by_type"]["wiki"]["stale"] == 1
    assert data["oldest_stale_seconds"] is not None and data["oldest_stale_seconds"] >= 0
    assert data["reread"] == 1


def test_edit_reverted_is_fresh_again(vault: Path, restore: None) -> None:
    path = vault / WIKI_NOTE
    original = path.read_bytes()
    path.write_bytes(original + b"\ntemporary\n")
    assert check(vault)[0].exit_code == 1
    path.write_bytes(original)  # new mtime, same bytes: re-read, and fresh
    result, data = check(vault)
    assert result.exit_code == 0, data["reasons"]


def test_deleting_one_note_orphans_it_and_its_facts(vault: Path, restore: None) -> None:
    (vault / ADR_NOTE).unlink()
    result, data = check(vault)
    assert result.exit_code == 1
    assert data["notes"]["orphaned"] == [ADR_NOTE]
    assert data["counts"]["orphaned"] == 1
    assert data["by_type"]["adr"]["orphaned"] == 1
    assert data["kodb"]["orphan_fact_files"] == [ADR_NOTE]
    assert data["kodb"]["orphan_facts"] > 0


def test_a_private_notes_path_is_counted_not_listed_unless_asked(
    vault: Path, restore: None
) -> None:
    # The agents' surfaces redact it; the CLI, which a script or an agent with a shell
    # reads as well, does too, and --include-private lists it.
    (vault / "vault-ko.toml").write_text('[vault]\nprivate_globs = ["adr/0007-*"]\n')
    (vault / ADR_NOTE).unlink()
    result, data = check(vault)
    assert result.exit_code == 1
    assert data["counts"]["orphaned"] == 1 and data["kodb"]["orphan_facts"] > 0
    assert ADR_NOTE not in result.output
    table = CliRunner().invoke(freshness_standalone, ["--vault", str(vault)], terminal_width=200)
    assert ADR_NOTE not in table.output
    assert "1 private (--include-private lists them)" in table.output
    _, shown = check(vault, "--include-private")
    assert shown["notes"]["orphaned"] == [ADR_NOTE]
    assert shown["kodb"]["orphan_fact_files"] == [ADR_NOTE]


def test_switching_the_model_in_config_mismatches_every_note(vault: Path, restore: None) -> None:
    # Freshness compares ids only: the other model is never loaded (nor available offline).
    (vault / "vault-ko.toml").write_text('[embed]\nmodel = "BAAI/bge-m3"\n', encoding="utf-8")
    result, data = check(vault)
    assert result.exit_code == 1
    assert data["model"] == "BAAI/bge-m3"
    notes = data["counts"]["model_mismatch"]
    assert notes == data["notes_on_disk"] == data["graph"]["notes"]
    assert data["counts"]["stale"] == data["counts"]["missing"] == 0
    assert data["calibration"]["status"] == "outdated"


def test_unreachable_graph_exits_2_with_a_clear_reason(
    vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VAULT_KO_GRAPH_URL", "bolt://127.0.0.1:1")
    result, data = check(vault)
    assert result.exit_code == 2
    assert data["status"] == "error"
    assert data["graph"]["up"] is False
    reason = "the graph is not reachable at 127.0.0.1:1 (connection refused)"
    assert reason in data["reasons"] and data["counts_unknown_reason"] == reason
    assert data["counts"] == dict.fromkeys(data["counts"])  # unknown, not 0


def test_prometheus_output_parses_with_prometheus_client(
    vault: Path, restore: None, promtool: Callable[[str], None]
) -> None:
    with (vault / WIKI_NOTE).open("a", encoding="utf-8") as fh:
        fh.write("\nedited\n")
    result = CliRunner().invoke(
        freshness_standalone, ["--vault", str(vault), "--format", "prometheus"]
    )
    assert result.exit_code == 1
    promtool(result.output)
    families = {f.name: f for f in text_string_to_metric_families(result.output)}
    assert families and all(n.startswith("vault_ko_") for n in families)
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in families.values()
        for s in f.samples
    }
    assert samples[("vault_ko_notes", (("state", "stale"),))] == 1
    assert samples[("vault_ko_notes_by_type", (("state", "stale"), ("type", "wiki")))] == 1
    assert samples[("vault_ko_graph_up", ())] == 1
    assert samples[("vault_ko_graph_latency_seconds", ())] > 0
    assert samples[("vault_ko_calibration_ok", ())] == 1
    assert samples[("vault_ko_freshness_status", (("status", "stale"),))] == 1
