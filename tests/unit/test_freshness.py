"""The freshness check with a real vault on disk and in-memory stand-ins for KO-DB and graph."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families
from pydantic import ValidationError

from pipeline import freshness as fr
from pipeline.app import App
from pipeline.cli.freshness import freshness_standalone, to_rich
from pipeline.config import Settings, load_settings
from pipeline.embed import BUNDLED_MODEL_ID, model_identity
from pipeline.errors import GraphUnavailable
from pipeline.fallback_log import record_fallback
from pipeline.freshness import FreshnessOptions, check_freshness, to_prometheus
from pipeline.freshness import check as fr_check
from pipeline.graph import GraphStatus, NoteState
from pipeline.model import Calibration, Note
from pipeline.service.bodies import FreshnessBody
from pipeline.vault.parse import read_note
from pipeline.vault.passages import text_version as rules_version
from pipeline.vault.scan import scan_vault

#: The text rules of a sync under the default setting (long notes as passages).
EMBED_TEXT_VERSION = rules_version("passages")

NOTES = {
    "wiki/alpha.md": "# Alpha\n\nAlpha talks to [[Beta]].\n",
    "wiki/beta.md": "---\ntitle: Beta\n---\nBeta is a service.\n",
    "adr/0001-use-beta.md": "# 1. Use Beta\n\n## Status\n\nAccepted\n",
    "sessions/2026-01-05-debug.md": "# Debugging Alpha\n\nFixed the Alpha timeout.\n",
}
MINILM_DIMS = 384
GRAPH_UP = GraphStatus(True, "bolt://fake:7687", "arcadedb", "ArcadeDB/26", 1.5, None)


class FakeRegistry:
    """KO-DB's registry, facts by source file and calibrations, in memory."""

    dialect = "sqlite"

    def __init__(self, notes: Mapping[str, Note], facts: Mapping[str, int] | None = None):
        self._notes = dict(notes)
        self.facts = dict(facts or {})
        self.calibrations: list[Calibration] = []

    def notes(self) -> dict[str, Note]:
        return dict(self._notes)

    def fact_source_files(self) -> dict[str, int]:
        return dict(self.facts)

    def latest_calibration(
        self, embedder: str | None = None, dims: int | None = None
    ) -> Calibration | None:
        found = [
            c
            for c in self.calibrations
            if (embedder is None or c.embedder == embedder) and (dims is None or c.dims == dims)
        ]
        return max(found, key=lambda c: c.measured_at) if found else None


class FakeGraph:
    """The graph's probe and note states; counts the note-state round trips."""

    def __init__(self, states: Mapping[str, NoteState], status: GraphStatus = GRAPH_UP):
        self.states = dict(states)
        self.status = status
        self.state_calls = 0
        self.fail_states: Exception | None = None

    def probe(self) -> GraphStatus:
        return self.status

    def note_states(self) -> dict[str, NoteState]:
        self.state_calls += 1
        if self.fail_states is not None:
            raise self.fail_states
        return dict(self.states)


def write_vault(root: Path, notes: Mapping[str, str] = NOTES) -> Path:
    for rel, text in notes.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def settings_for(vault: Path, **overrides: object) -> Settings:
    return load_settings(vault, overrides=overrides, env={}, cwd=vault)


def registry_of(settings: Settings) -> dict[str, Note]:
    """What an ingest run would register for the vault as it is now."""
    return {
        f.path: read_note(settings.vault, f.path, f.source_type, settings.vault_max_note_bytes).note
        for f in scan_vault(settings)
    }


def states_of(
    registry: Mapping[str, Note],
    *,
    model: str = BUNDLED_MODEL_ID,
    dims: int = MINILM_DIMS,
    embedded_at: float = 1_000.0,
    text_version: int = EMBED_TEXT_VERSION,
) -> dict[str, NoteState]:
    """What an embed run would leave in the graph for this registry."""
    return {
        p: NoteState(p, n.content_hash, model, dims, embedded_at, text_version)
        for p, n in registry.items()
    }


def calibration(vault_notes: int, *, measured_at: float | None = None) -> Calibration:
    return Calibration(
        embedder=BUNDLED_MODEL_ID,
        dims=MINILM_DIMS,
        probe_set_version=2,
        noise_floor=0.3,
        sigma=0.14,
        mu=0.2,
        n_notes=vault_notes,
        n_pairs=vault_notes * (vault_notes - 1) // 2,
        vault_notes_at_calibration=vault_notes,
        measured_at=time.time() if measured_at is None else measured_at,
    )


@pytest.fixture
def synced(tmp_path: Path) -> tuple[Settings, FakeRegistry, FakeGraph]:
    """A vault just after `vault-ko sync`: registry, graph and calibration all current."""
    settings = settings_for(write_vault(tmp_path / "vault"))
    registry = registry_of(settings)
    kodb = FakeRegistry(registry, facts={p: 2 for p in registry})
    kodb.calibrations.append(calibration(len(registry)))
    return settings, kodb, FakeGraph(states_of(registry))


def run(synced: tuple[Settings, FakeRegistry, FakeGraph], **options: object) -> fr.FreshnessReport:
    settings, kodb, graph = synced
    return check_freshness(
        settings, FreshnessOptions.from_settings(settings, **options), kodb=kodb, graph=graph
    )


def append(settings: Settings, rel: str, text: str) -> None:
    path = settings.vault / rel
    path.write_text(path.read_text(encoding="utf-8") + text, encoding="utf-8")


# -- note states ----------------------------------------------------------------------------


def test_synced_vault_is_fresh_with_full_coverage_per_type(synced) -> None:
    report = run(synced)
    assert report.status == "fresh" and report.exit_code == 0
    assert report.counts == {"missing": 0, "stale": 0, "orphaned": 0, "model_mismatch": 0}
    assert set(report.classification.fresh) == set(NOTES)
    assert {t.source_type: (t.notes, t.coverage) for t in report.by_type} == {
        "wiki": (2, 1.0),
        "adr": (1, 1.0),
        "session": (1, 1.0),
    }
    assert report.calibration.status == "ok"
    assert synced[2].state_calls == 1  # one graph round trip for all note states


def test_unchanged_files_are_trusted_from_the_registry_without_reading(
    synced, monkeypatch: pytest.MonkeyPatch
) -> None:
    def must_not_read(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"read {args[1]}")

    monkeypatch.setattr(fr_check, "read_note", must_not_read)
    report = run(synced)
    assert report.status == "fresh"
    assert report.reread == 0


def test_touched_but_unchanged_note_is_reread_and_still_fresh(synced) -> None:
    settings = synced[0]
    path = settings.vault / "wiki/alpha.md"
    os.utime(path, (time.time() + 5, time.time() + 5))
    report = run(synced)
    assert report.reread == 1
    assert report.status == "fresh"


def test_edited_note_is_the_only_stale_one_and_exits_1(synced) -> None:
    settings = synced[0]
    append(settings, "wiki/beta.md", "One more line.\n")
    before = time.time()
    report = run(synced)
    after = time.time()
    assert report.status == "stale" and report.exit_code == 1
    assert report.classification.stale == ("wiki/beta.md",)
    assert report.counts == {"missing": 0, "stale": 1, "orphaned": 0, "model_mismatch": 0}
    mtime = (settings.vault / "wiki/beta.md").stat().st_mtime
    assert report.oldest_stale_seconds is not None
    assert before - mtime - 1 <= report.oldest_stale_seconds <= after - mtime + 1
    wiki = next(t for t in report.by_type if t.source_type == "wiki")
    assert (wiki.stale, wiki.fresh, wiki.coverage) == (1, 1, 0.5)
    assert any("1 stale" in r for r in report.reasons)


def test_notes_embedded_under_older_text_rules_are_stale(synced) -> None:
    graph = synced[2]
    old = graph.states["wiki/alpha.md"]
    graph.states["wiki/alpha.md"] = NoteState(
        old.path, old.content_hash, old.model, old.dims, old.embedded_at, EMBED_TEXT_VERSION - 1
    )
    report = run(synced)
    assert report.status == "stale" and report.exit_code == 1
    assert report.classification.stale == ("wiki/alpha.md",)


def test_deleted_note_is_orphaned_and_counted_under_its_type(synced) -> None:
    settings = synced[0]
    (settings.vault / "adr/0001-use-beta.md").unlink()
    report = run(synced)
    assert report.classification.orphaned == ("adr/0001-use-beta.md",)
    assert report.counts["orphaned"] == 1 and report.exit_code == 1
    adr = next(t for t in report.by_type if t.source_type == "adr")
    assert (adr.notes, adr.orphaned) == (0, 1)


def test_new_note_is_missing_from_the_graph(synced) -> None:
    settings = synced[0]
    write_vault(settings.vault, {"wiki/gamma.md": "# Gamma\n"})
    report = run(synced)
    assert report.classification.missing == ("wiki/gamma.md",)
    assert report.oldest_stale_seconds is not None


def test_switching_the_model_makes_every_note_a_model_mismatch(synced) -> None:
    settings, kodb, graph = synced
    switched = settings.replace(embed_model="BAAI/bge-m3")
    report = check_freshness(switched, kodb=kodb, graph=graph)
    assert report.model == "BAAI/bge-m3" and report.dims == 1024  # from the profile
    assert sorted(report.classification.model_mismatch) == sorted(NOTES)
    assert report.classification.stale == ()
    assert report.calibration.status == "outdated"
    assert any("bge-m3" in r for r in report.calibration.reasons)


def test_other_dims_with_the_same_model_id_is_a_model_mismatch(synced) -> None:
    settings, kodb, _ = synced
    graph = FakeGraph(states_of(kodb.notes(), dims=768))
    report = check_freshness(settings, kodb=kodb, graph=graph)
    assert sorted(report.classification.model_mismatch) == sorted(NOTES)


def test_bad_input_note_is_skipped_with_its_reason_never_stale_or_orphaned(synced) -> None:
    settings = synced[0]
    (settings.vault / "wiki/beta.md").write_text("---\ntitle: [unclosed\n---\nx\n")
    report = run(synced)
    assert [s.path for s in report.skipped] == ["wiki/beta.md"]
    assert "line" in report.skipped[0].reason or "YAML" in report.skipped[0].reason
    assert report.counts == {"missing": 0, "stale": 0, "orphaned": 0, "model_mismatch": 0}
    assert report.status == "fresh"
    wiki = next(t for t in report.by_type if t.source_type == "wiki")
    assert (wiki.skipped, wiki.coverage) == (1, 1.0)


# -- thresholds and calibration -----------------------------------------------------------


def test_max_stale_and_max_stale_ratio_each_relax_the_default(synced) -> None:
    append(synced[0], "wiki/beta.md", "edit\n")
    assert run(synced).status == "stale"
    assert run(synced, max_stale=1).status == "fresh"
    assert run(synced, max_stale_ratio=0.25).status == "fresh"  # 1 of 4
    assert run(synced, max_stale_ratio=0.2).status == "stale"


def test_defaults_come_from_settings(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, freshness_max_stale=3, freshness_max_stale_ratio=0.5)
    opts = FreshnessOptions.from_settings(settings, max_stale=None)
    assert (opts.max_stale, opts.max_stale_ratio, opts.check_calibration) == (3, 0.5, True)


def test_missing_calibration_is_stale_unless_the_check_is_off(synced) -> None:
    synced[1].calibrations.clear()
    report = run(synced)
    assert report.status == "stale"
    assert report.calibration.status == "missing"
    assert any(r.startswith("calibration:") for r in report.reasons)
    relaxed = run(synced, check_calibration=False)
    assert relaxed.status == "fresh"
    assert relaxed.calibration.status == "missing" and not relaxed.calibration.checked


def test_calibration_is_outdated_by_note_drift_and_by_age(synced) -> None:
    settings, kodb, graph = synced
    kodb.calibrations[:] = [calibration(2)]  # 4 notes now: drift 100%
    report = check_freshness(settings, kodb=kodb, graph=graph)
    assert report.calibration.status == "outdated"
    assert any("drifted" in r for r in report.calibration.reasons)
    looser = settings.replace(calibration_max_drift=1.5)
    assert check_freshness(looser, kodb=kodb, graph=graph).calibration.status == "ok"

    kodb.calibrations[:] = [calibration(4, measured_at=time.time() - 10 * 86400)]
    aged = check_freshness(settings.replace(calibration_max_age_days=5), kodb=kodb, graph=graph)
    assert aged.calibration.status == "outdated"
    assert any("days old" in r for r in aged.calibration.reasons)
    assert aged.calibration.age_seconds == pytest.approx(10 * 86400, rel=0.01)


# -- stores --------------------------------------------------------------------------------


def test_graph_down_is_an_error_with_the_probe_reason_and_no_comparison(synced) -> None:
    settings, kodb, _ = synced
    down = FakeGraph({}, GraphStatus(False, "bolt://127.0.0.1:1", None, None, None, "refused"))
    report = check_freshness(settings, kodb=kodb, graph=down)
    assert report.status == "error" and report.exit_code == 2
    assert any("127.0.0.1:1" in r and "refused" in r for r in report.reasons)
    assert down.state_calls == 0 and not report.compared
    assert all(t.coverage is None for t in report.by_type)
    assert report.to_dict()["graph"]["up"] is False


def test_graph_failing_mid_check_is_an_error(synced) -> None:
    settings, kodb, graph = synced
    graph.fail_states = GraphUnavailable("graph at bolt://fake timed out")
    report = check_freshness(settings, kodb=kodb, graph=graph)
    assert report.status == "error"
    assert any("timed out" in r for r in report.reasons)


def test_unreachable_kodb_is_an_error(tmp_path: Path) -> None:
    vault = write_vault(tmp_path / "vault")
    # A SQLite file whose folder cannot be created: unreachable without any network.
    settings = settings_for(vault, kodb_url="sqlite:////proc/no-such-folder/ko.db")
    app = App(settings, graph=FakeGraph({}))  # type: ignore[arg-type]
    report = check_freshness(settings, app=app)  # the fake graph has nothing to close
    assert report.status == "error" and not report.kodb.up
    assert any(r.startswith("KO-DB unreachable") for r in report.reasons)


def test_facts_whose_source_file_is_gone_are_counted(synced) -> None:
    settings, kodb, graph = synced
    kodb.facts.update({"wiki/removed.md": 3, "imports/elsewhere.md": 4})
    (settings.vault / "imports").mkdir()
    (settings.vault / "imports/elsewhere.md").write_text("not a note path the scan skips\n")
    report = check_freshness(settings, kodb=kodb, graph=graph)
    assert report.kodb.orphan_fact_files == ("wiki/removed.md",)
    assert report.kodb.orphan_facts == 3
    assert report.kodb.facts == 2 * len(NOTES) + 3 + 4


def test_fallback_answers_are_counted_since_the_previous_check(synced) -> None:
    settings = synced[0]
    settings.state_dir.mkdir(parents=True, exist_ok=True)  # a synced vault's
    record_fallback(settings.state_dir, "graph down")
    record_fallback(settings.state_dir, "graph down")
    assert run(synced).fallback_answers == 2
    assert run(synced).fallback_answers == 0
    record_fallback(settings.state_dir, "graph down")
    assert run(synced, advance_fallback_mark=False).fallback_answers == 1
    assert run(synced).fallback_answers == 1


# -- output -------------------------------------------------------------------------------


def test_json_document_has_the_contract_keys(synced) -> None:
    append(synced[0], "wiki/alpha.md", "edit\n")
    data = json.loads(json.dumps(run(synced).to_dict()))
    assert data["status"] == "stale"
    assert data["counts"] == {
        "missing": 0,
        "stale": 1,
        "orphaned": 0,
        "model_mismatch": 0,
        "fresh": 3,
    }
    assert data["notes"]["stale"] == ["wiki/alpha.md"]
    assert set(data["by_type"]) == {"wiki", "adr", "session"}
    assert data["calibration"]["status"] == "ok" and data["calibration"]["reasons"] == []
    assert data["graph"]["up"] is True and data["graph"]["dialect"] == "arcadedb"
    assert data["kodb"] == data["kodb"] | {"facts": 2 * len(NOTES), "orphan_facts": 0}
    assert isinstance(data["fallback_answers"], int)


def test_the_json_document_in_every_state_is_what_the_service_declares(synced) -> None:
    settings, kodb, _ = synced
    append(settings, "wiki/alpha.md", "edit\n")
    (settings.vault / "wiki" / "bad.md").write_bytes(b"\xff\xfe not text")
    down = FakeGraph({}, GraphStatus(False, "bolt://127.0.0.1:1", None, None, None, "refused"))
    reports = [
        run(synced),
        check_freshness(settings, kodb=kodb, graph=down),
        fr.FreshnessReport.failed("bad settings", vault=str(settings.vault)),
    ]
    assert reports[0].skipped and reports[0].by_type and not reports[1].compared
    for report in reports:
        sent = json.loads(json.dumps(report.to_dict()))
        FreshnessBody.model_validate(sent)
        schema = FreshnessBody.model_json_schema()
        assert set(schema["required"]) == set(sent) == set(schema["properties"])
    with pytest.raises(ValidationError, match="new_key"):
        FreshnessBody.model_validate(reports[0].to_dict() | {"new_key": 1})


def test_prometheus_text_parses_and_carries_the_counts(synced, promtool) -> None:
    settings, kodb, _ = synced
    append(settings, "wiki/alpha.md", "edit\n")
    odd = GraphStatus(True, "bolt://x", "memgraph", 'Memgraph "3.0" \\ beta\nx', 2.5, None)
    report = check_freshness(settings, kodb=kodb, graph=FakeGraph(synced[2].states, odd))
    text = to_prometheus(report)
    promtool(text)
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert all(name.startswith("vault_ko_") for name in families)
    assert text.count("# HELP ") == text.count("# TYPE ") == len(families)

    def value(name: str, **labels: str) -> float:
        (sample,) = [s for s in families[name].samples if s.labels == labels]
        return sample.value

    assert value("vault_ko_notes", state="stale") == 1
    assert value("vault_ko_notes", state="fresh") == 3
    assert value("vault_ko_notes_by_type", type="wiki", state="stale") == 1
    assert value("vault_ko_coverage_ratio", type="wiki") == 0.5
    assert value("vault_ko_freshness_status", status="stale") == 1
    assert value("vault_ko_freshness_status", status="fresh") == 0
    assert value("vault_ko_graph_up") == 1
    assert value("vault_ko_graph_latency_seconds") == pytest.approx(0.0025)
    assert value("vault_ko_graph_info", dialect="memgraph", agent=odd.agent) == 1
    assert value("vault_ko_calibration_ok") == 1
    assert value("vault_ko_oldest_stale_seconds") >= 0


def test_prometheus_leaves_out_unknown_values_when_the_graph_is_down(synced) -> None:
    settings, kodb, _ = synced
    down = FakeGraph({}, GraphStatus(False, "bolt://h:1", None, None, None, "refused"))
    text = to_prometheus(check_freshness(settings, kodb=kodb, graph=down))
    samples = {f.name: f.samples for f in text_string_to_metric_families(text)}
    assert samples["vault_ko_graph_latency_seconds"] == []  # declared, no value
    assert samples["vault_ko_coverage_ratio"] == []
    assert "vault_ko_graph_up 0" in text
    assert 'vault_ko_freshness_status{status="error"} 1' in text


def test_table_lists_states_types_and_health(synced) -> None:
    from rich.console import Console

    append(synced[0], "wiki/alpha.md", "edit\n")
    console = Console(width=120, record=True)
    console.print(to_rich(run(synced)))
    text = console.export_text()
    for expected in ("stale", "wiki/alpha.md", "coverage by source type", "session", "arcadedb"):
        assert expected in text


def test_the_table_counts_a_private_notes_path_without_listing_it(synced) -> None:
    from rich.console import Console

    from pipeline.privacy import PrivateNotes

    append(synced[0], "wiki/alpha.md", "edit\n")
    append(synced[0], "wiki/beta.md", "edit\n")
    console = Console(width=160, record=True)
    console.print(to_rich(run(synced), private=PrivateNotes(("wiki/alpha.md",))))
    text = console.export_text()
    assert "wiki/alpha.md" not in text
    assert "wiki/beta.md, 1 private (--include-private lists them)" in text


def test_the_table_counts_a_private_skipped_note_whatever_its_reason_says(synced) -> None:
    from rich.console import Console

    from pipeline.privacy import PrivateNotes

    (synced[0].vault / "wiki" / "diary-1.md").write_bytes(b"# Diary\n\n\xff\xfe secret\n")
    report = run(synced)
    assert "(" in report.skipped[0].reason  # "line 3: not valid UTF-8 (byte 0xff …)"
    console = Console(width=200, record=True)
    console.print(to_rich(report, private=PrivateNotes(("**/diary-*.md",))))
    text = console.export_text()
    assert "diary-1.md" not in text and "1 private (--include-private lists them)" in text


# -- model id without the model, and the CLI shell ----------------------------------------


def test_model_identity_reads_the_bundled_folder_without_importing_torch() -> None:
    code = (
        "import sys\n"
        "from pipeline.freshness.check import model_identity\n"
        "from pipeline.config import load_settings\n"
        "print(model_identity(load_settings('.', env={})))\n"
        "print([m for m in ('torch', 'sentence_transformers') if m in sys.modules])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.split("\n")[:2] == [f"('{BUNDLED_MODEL_ID}', 384)", "[]"]


def _st_folder(root: Path, modules: list[dict[str, str]], configs: dict[str, dict]) -> Path:
    root.mkdir()
    (root / "modules.json").write_text(json.dumps(modules))
    for sub, config in configs.items():
        (root / sub).mkdir()
        (root / sub / "config.json").write_text(json.dumps(config))
    return root


def test_model_identity_of_a_folder_uses_dense_then_pooling_width(tmp_path: Path) -> None:
    pooling = {"type": "sentence_transformers.models.Pooling", "path": "1_Pooling"}
    dense = {"type": "sentence_transformers.models.Dense", "path": "2_Dense"}
    two_modes = {
        "word_embedding_dimension": 256,
        "pooling_mode_mean_tokens": True,
        "pooling_mode_max_tokens": True,
    }
    a = _st_folder(tmp_path / "a", [pooling], {"1_Pooling": two_modes})
    b = _st_folder(
        tmp_path / "b", [pooling, dense], {"1_Pooling": two_modes, "2_Dense": {"out_features": 64}}
    )
    broken = _st_folder(tmp_path / "c", [pooling], {"1_Pooling": {"oops": 1}})
    assert model_identity(str(a)) == (str(a), 512)
    assert model_identity(str(b)) == (str(b), 64)
    assert model_identity(str(broken)) == (str(broken), None)
    assert model_identity("some-org/unknown-model") == ("some-org/unknown-model", None)


def test_cli_reports_a_graph_that_is_not_started_as_error_exit_2(tmp_path: Path) -> None:
    vault = write_vault(tmp_path / "vault")
    result = CliRunner().invoke(freshness_standalone, ["--vault", str(vault), "--json"])
    assert result.exit_code == 2, result.output
    data = json.loads(result.output)
    assert data["status"] == "error" and data["graph"]["up"] is False
    assert any("graph up" in r for r in data["reasons"])


def test_cli_bad_settings_still_print_an_error_report(tmp_path: Path) -> None:
    vault = write_vault(tmp_path / "vault")
    (vault / "vault-ko.toml").write_text("[graph]\nnot_a_setting = 1\n")
    result = CliRunner().invoke(
        freshness_standalone, ["--vault", str(vault), "--format", "prometheus"]
    )
    assert result.exit_code == 3  # a bad setting, as for every command
    names = {f.name for f in text_string_to_metric_families(result.output)}
    assert "vault_ko_freshness_status" in names
    assert 'vault_ko_freshness_status{status="error"} 1' in result.output
    # The check stopped before the stores: "down" or "0 notes" would raise false alerts.
    samples = {s.name for f in text_string_to_metric_families(result.output) for s in f.samples}
    unknown = {"vault_ko_graph_up", "vault_ko_kodb_up", "vault_ko_kodb_facts"}
    assert not samples & (unknown | {"vault_ko_vault_notes", "vault_ko_calibration_ok"})
    as_json = CliRunner().invoke(freshness_standalone, ["--vault", str(vault), "--json"])
    data = json.loads(as_json.output)
    assert as_json.exit_code == 3 and "not_a_setting" in data["reasons"][0]
    assert (data["graph"]["up"], data["graph"]["checked"]) == (None, False)
    assert (data["kodb"]["up"], data["kodb"]["checked"]) == (None, False)
    shown = CliRunner().invoke(freshness_standalone, ["--vault", str(vault)], terminal_width=200)
    assert "DOWN" not in shown.output and "--no-calibration-check" not in shown.output
    from_env = CliRunner().invoke(
        freshness_standalone, ["--json"], env={"VAULT_KO_VAULT": str(vault)}
    )
    assert json.loads(from_env.output)["vault"] == str(vault)  # not "."


def test_cli_textfile_is_written_whole_for_the_node_exporter(tmp_path: Path) -> None:
    vault = write_vault(tmp_path / "vault")
    target = tmp_path / "textfile" / "vault_ko.prom"
    target.parent.mkdir()
    result = CliRunner().invoke(
        freshness_standalone, ["--vault", str(vault), "--json", "--textfile", str(target)]
    )
    assert result.exit_code == 2, result.output  # the graph is not started: an error report
    assert json.loads(result.output)["status"] == "error"
    names = {f.name for f in text_string_to_metric_families(target.read_text())}
    assert {"vault_ko_freshness_status", "vault_ko_graph_up"} <= names
    assert [p.name for p in target.parent.iterdir()] == ["vault_ko.prom"]  # no temp left


# -- the graph down: unknown, not 0, and the reason once in words (issue 36, item 5) -------

DRIVER_TEXT = (
    "graph at bolt://127.0.0.1:43251 unavailable: Couldn't connect to 127.0.0.1:43251 "
    "(resolved to ('127.0.0.1:43251',)): Failed to establish connection to "
    "ResolvedIPv4Address(('127.0.0.1', 43251)) (reason [Errno 111] Connection refused)"
)
IN_WORDS = "the graph is not reachable at 127.0.0.1:43251 (connection refused)"


@pytest.fixture
def graph_down(synced) -> fr.FreshnessReport:
    """A synced vault checked while the graph refuses connections, as the driver says it."""
    settings, kodb, _ = synced
    status = GraphStatus(False, "bolt://127.0.0.1:43251", None, None, None, DRIVER_TEXT)
    return check_freshness(settings, kodb=kodb, graph=FakeGraph({}, status))


def test_graph_down_json_has_null_counts_and_says_why_in_words(graph_down) -> None:
    data = json.loads(json.dumps(graph_down.to_dict()))
    assert data["status"] == "error" and data["reasons"] == [IN_WORDS]
    assert data["counts"] == dict.fromkeys(
        ("missing", "stale", "orphaned", "model_mismatch", "fresh")
    )
    assert data["counts_unknown_reason"] == IN_WORDS
    assert data["notes"] == dict.fromkeys(("missing", "stale", "orphaned", "model_mismatch"))
    assert data["skipped"] == []  # the scan reads the disk: known
    for per_type in data["by_type"].values():
        assert per_type["fresh"] is per_type["missing"] is per_type["stale"] is None
        assert per_type["coverage"] is None
        assert per_type["notes"] > 0 and per_type["skipped"] == 0  # read from disk: known
    assert data["graph"]["reason"] == IN_WORDS and data["graph"]["detail"] == DRIVER_TEXT
    assert data["notes_on_disk"] == len(NOTES)


def test_graph_down_prometheus_declares_the_counts_without_a_zero_sample(graph_down) -> None:
    text = to_prometheus(graph_down)
    families = {f.name: f.samples for f in text_string_to_metric_families(text)}
    assert [s.labels for s in families["vault_ko_notes"]] == [{"state": "skipped"}]
    assert {s.labels["state"] for s in families["vault_ko_notes_by_type"]} == {"skipped"}
    assert families["vault_ko_coverage_ratio"] == [] and families["vault_ko_graph_notes"] == []
    for name in ("vault_ko_notes", "vault_ko_coverage_ratio", "vault_ko_graph_notes"):
        assert f"# HELP {name} " in text and f"# TYPE {name} gauge" in text
    assert 'vault_ko_notes{state="fresh"}' not in text


def test_graph_down_table_says_unknown_and_the_reason_once_in_words(graph_down) -> None:
    from rich.console import Console

    console = Console(width=100, record=True)
    console.print(to_rich(graph_down))
    text = console.export_text()
    assert text.count("the graph is not reachable at 127.0.0.1:43251") == 1
    assert "connection refused" in text and "Couldn't connect" not in text
    rows = {line.split()[0]: line.split() for line in text.splitlines() if line.strip()}
    assert rows["fresh"][1] == rows["missing"][1] == rows["stale"][1] == "unknown"
    assert rows["wiki"][2:7] == ["?"] * 5  # fresh … model≠ of the wiki notes
    console = Console(width=100, record=True)
    console.print(to_rich(graph_down, verbose=True))
    assert "ResolvedIPv4Address" in console.export_text()  # the driver's text only with -v


def test_cli_graph_refusing_connections_in_all_three_formats(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the command, with a real refused connection (nothing listens on port 1)."""
    vault = write_vault(tmp_path / "vault")
    monkeypatch.setenv("VAULT_KO_GRAPH_URL", "bolt://127.0.0.1:1")
    monkeypatch.setenv("COLUMNS", "100")
    base = ["--vault", str(vault)]
    table = CliRunner().invoke(freshness_standalone, base)
    assert table.exit_code == 2, table.output
    assert table.output.count("not reachable at 127.0.0.1:1 (connection refused)") == 1
    assert "Errno" not in table.output and "unknown" in table.output
    data = json.loads(CliRunner().invoke(freshness_standalone, [*base, "--json"]).output)
    # No KO-DB either (never synced): its reason comes first; both are listed once.
    assert data["counts"]["fresh"] is None and data["counts_unknown_reason"]
    assert any(r.endswith("127.0.0.1:1 (connection refused)") for r in data["reasons"])
    prom = CliRunner().invoke(freshness_standalone, [*base, "--format", "prometheus"]).output
    assert 'vault_ko_notes{state="fresh"}' not in prom and "# TYPE vault_ko_notes gauge" in prom


def test_unrecognised_graph_errors_are_kept_as_given() -> None:
    assert fr_check.graph_reason(
        "the local graph is not started; run `vault-ko graph up`", None
    ) == ("the local graph is not started; run `vault-ko graph up`")
    assert fr_check.graph_reason("graph at bolt://u@h:7 timed out", "bolt://u:***@h:7") == (
        "the graph is not reachable at h:7 (timed out)"
    )
    assert fr_check.graph_reason("odd", "bolt://h:7") == "the graph is not reachable at h:7: odd"
    assert fr_check.graph_reason("graph at h:7: odd", "bolt://h:7") == "graph at h:7: odd"


def test_graph_down_prometheus_passes_promtool(graph_down, promtool) -> None:
    promtool(to_prometheus(graph_down))


def test_a_vault_embedded_by_its_head_is_stale_once_long_notes_are_cut(synced) -> None:
    graph = synced[2]
    for path, old in list(graph.states.items()):
        graph.states[path] = NoteState(
            path, old.content_hash, old.model, old.dims, old.embedded_at, rules_version("head")
        )
    report = run(synced)
    assert report.status == "stale" and set(report.classification.stale) == set(graph.states)


def test_a_fact_file_that_cannot_be_read_is_not_called_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Path.exists() raises PermissionError for a file in a folder we may not search: the
    # whole check died with it, and reported the graph and KO-DB as down.
    (tmp_path / "here.md").write_text("x")
    settings = Settings(vault=tmp_path, state_dir=tmp_path / ".vault-ko")
    real = Path.stat

    def stat(self: Path, **kw: object) -> os.stat_result:
        if self.name == "locked.md":
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "stat", stat)
    files = {"here.md": 1, "locked.md": 1, "gone.md": 1}
    assert fr_check.orphan_fact_files(settings, files, []) == ("gone.md",)
