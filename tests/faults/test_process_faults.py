"""Processes and stores fail mid-run: `ingest` and `embed` SIGKILLed at seeded points and run
again end in exactly the state of an uninterrupted run (full dumps of KO-DB and of the
graph); PostgreSQL cut off in the middle of an ingest gives a clear error and no partial
rows; two `sync` runs at once take turns and report what each did."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from pipeline.app import App
from pipeline.config import Settings
from pipeline.embed_sync import WINDOW_BATCHES, sync_embeddings
from pipeline.graph import GraphClient

pytestmark = pytest.mark.integration

Dump = dict[str, list[tuple[Any, ...]]]


def run_cli(
    kit: SimpleNamespace, vault: Path, env: dict[str, str], *args: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [kit.exe(), "--vault", str(vault), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def start_cli(
    kit: SimpleNamespace, vault: Path, env: dict[str, str], *args: str
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [kit.exe(), "--vault", str(vault), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def dump_graph(settings: Settings) -> dict[str, Any]:
    """Every note of the graph (path, content hash, model, dims, embedding) and every
    LINKS_TO edge — all but the embedding times."""
    with GraphClient(settings) as client:
        states, vectors = client.all_vectors()
        paths = [s.path for s in states]
        return {
            "notes": [(s.path, s.content_hash, s.model, s.dims) for s in states],
            "vectors": np.asarray(vectors, dtype=np.float32),
            "links": client.neighbors(paths),
        }


def assert_same_graph(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert got["notes"] == want["notes"]
    assert got["links"] == want["links"]
    np.testing.assert_allclose(got["vectors"], want["vectors"], atol=1e-5)


def empty_graph(settings: Settings) -> None:
    with GraphClient(settings) as client:
        client.delete_notes(list(client.note_states()))


@pytest.fixture
def vault(tmp_path: Path, faults_kit: SimpleNamespace) -> Path:
    return faults_kit.copy_vault(tmp_path / "vault")


@pytest.fixture
def adr_vault(tmp_path: Path, faults_kit: SimpleNamespace) -> Path:
    """The sample vault's 21 ADRs, linked among themselves: for the runs that embed."""
    return faults_kit.copy_vault(tmp_path / "adr-vault", "adr")


def test_ingest_killed_at_seeded_points_then_rerun_ends_as_an_uninterrupted_run(
    vault: Path,
    tmp_path: Path,
    faults_kit: SimpleNamespace,
    dump_kodb: Callable[[str], Dump],
    record_property: Callable[[str, object], None],
) -> None:
    base = faults_kit.hermetic_env()
    reference_url = f"sqlite:///{tmp_path / 'reference.db'}"
    started = time.monotonic()
    done = run_cli(faults_kit, vault, {**base, "VAULT_KO_KODB_URL": reference_url}, "ingest")
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    reference = dump_kodb(reference_url)
    rng = faults_kit.rng("kill-ingest")
    points = [rng.uniform(0.05, took) for _ in range(faults_kit.kill_points(2, 10))]
    killed = 0
    for n, delay in enumerate(points):
        url = f"sqlite:///{tmp_path / f'killed-{n}.db'}"
        env = {**base, "VAULT_KO_KODB_URL": url}
        proc = start_cli(faults_kit, vault, env, "ingest")
        try:
            proc.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            proc.kill()
            killed += 1
        proc.communicate()
        again = run_cli(faults_kit, vault, env, "ingest")
        assert again.returncode == 0, again.stderr
        assert dump_kodb(url) == reference, f"kill after {delay:.2f} s"
    assert killed >= 1  # at least one kill landed while ingest ran
    record_property("faults_injected", killed)
    record_property("kill_points", len(points))


def test_embed_killed_at_seeded_points_then_rerun_ends_as_an_uninterrupted_run(
    adr_vault: Path,
    faults_graph: Any,
    faults_embedder: Any,
    faults_kit: SimpleNamespace,
    dump_kodb: Callable[[str], Dump],
    record_property: Callable[[str, object], None],
) -> None:
    vault = adr_vault
    # Batches of one note: a commit every WINDOW_BATCHES notes for a kill to fall between.
    settings = faults_graph.settings(vault, embed_batch_size=1)
    empty_graph(settings)
    env = faults_graph.env(settings, VAULT_KO_EMBED_BATCH_SIZE="1")
    assert run_cli(faults_kit, vault, env, "ingest").returncode == 0

    def embed_in_process() -> None:
        # The uninterrupted run and the rerun after a kill use the suite's loaded model
        # (the same code `vault-ko embed` runs); only the killed run is a child process.
        with App(settings, embedder=faults_embedder) as app:
            sync_embeddings(settings, app.kodb, app.graph, faults_embedder)

    embed_in_process()
    reference = dump_graph(settings)
    kodb_reference = dump_kodb(settings.effective_kodb_url)
    total = len(reference["notes"])
    assert total > 20
    rng = faults_kit.rng("kill-embed")
    # A target past the last window's start would only be reached by the finished run.
    last_window = (total - 1) // WINDOW_BATCHES * WINDOW_BATCHES
    targets = sorted(rng.sample(range(1, last_window), faults_kit.kill_points(1, 6)))
    recovered: list[float] = []
    for target in targets:
        empty_graph(settings)
        proc = start_cli(faults_kit, vault, env, "embed")
        with GraphClient(settings) as client:
            deadline = time.monotonic() + 240
            while proc.poll() is None and time.monotonic() < deadline:
                if len(client.note_states()) >= target:
                    break
                time.sleep(0.02)  # polling the graph for the kill point, not a wait
        assert proc.poll() is None, f"embed finished before {target} notes were written"
        proc.kill()
        proc.communicate()
        with GraphClient(settings) as client:
            assert target <= len(client.note_states()) < total
        started = time.monotonic()
        embed_in_process()
        recovered.append(time.monotonic() - started)
        assert_same_graph(dump_graph(settings), reference)
        assert dump_kodb(settings.effective_kodb_url) == kodb_reference
    record_property("faults_injected", len(targets))
    record_property("recover_s", round(max(recovered), 1))


def _through(url: str, port: int) -> str:
    return re.sub(r"@[^/]+/", f"@127.0.0.1:{port}/", url, count=1)


def test_postgresql_cut_off_during_ingest_gives_a_clear_error_and_no_partial_rows(
    vault: Path,
    tmp_path: Path,
    faults_kit: SimpleNamespace,
    reset_pg: Callable[[], str],
    dump_kodb: Callable[[str], Dump],
    record_property: Callable[[str, object], None],
) -> None:
    base = faults_kit.hermetic_env()
    edited = tmp_path / "edited"
    faults_kit.copy_vault(edited)
    # The second ingest has work to do: a note changed, one removed, one added.
    first = sorted(edited.rglob("*.md"))
    first[0].write_text(first[0].read_text() + "\nAn added line about [[Kafka]].\n")
    first[1].unlink()
    (edited / "new-note.md").write_text("# New note\n\nA new note about [[Redis]] and Kafka.\n")

    def before_state() -> str:
        url = reset_pg()
        done = run_cli(faults_kit, vault, {**base, "VAULT_KO_KODB_URL": url}, "ingest")
        assert done.returncode == 0, done.stderr
        return url

    url = before_state()
    before = dump_kodb(url)
    proxy = faults_kit.TcpProxy(("127.0.0.1", int(re.search(r":(\d+)/", url).group(1))))
    done = run_cli(
        faults_kit, edited, {**base, "VAULT_KO_KODB_URL": _through(url, proxy.port)}, "ingest"
    )
    assert done.returncode == 0, done.stderr
    total_bytes = proxy.sent
    proxy.cut()
    after = dump_kodb(url)
    assert after != before
    rng = faults_kit.rng("cut-postgresql")
    cuts = [rng.randrange(1, total_bytes) for _ in range(faults_kit.kill_points(2, 8))]
    for cut_at in cuts:
        url = before_state()
        proxy = faults_kit.TcpProxy(("127.0.0.1", int(re.search(r":(\d+)/", url).group(1))))
        proxy.cut_after = cut_at
        env = {**base, "VAULT_KO_KODB_URL": _through(url, proxy.port)}
        cut = run_cli(faults_kit, edited, env, "ingest")
        proxy.cut()
        assert cut.returncode == 2, (cut_at, cut.stdout, cut.stderr)
        assert "Traceback" not in cut.stderr
        assert re.search(r"KO-DB .*(unreachable|lost|closed|failed)", cut.stderr), cut.stderr
        # All or nothing: a cut after the COMMIT reached the server loses only its reply,
        # so the whole run is there (the CLI cannot know and says the connection failed).
        left = dump_kodb(url)
        assert left in (before, after), f"partial rows after a cut at byte {cut_at}"
        again = run_cli(faults_kit, edited, {**base, "VAULT_KO_KODB_URL": url}, "ingest")
        assert again.returncode == 0, again.stderr
        assert dump_kodb(url) == after
    record_property("faults_injected", len(cuts))


def test_two_concurrent_syncs_take_turns_and_report_what_each_did(
    adr_vault: Path,
    faults_graph: Any,
    faults_kit: SimpleNamespace,
    record_property: Callable[[str, object], None],
) -> None:
    vault = adr_vault
    settings = faults_graph.settings(vault)
    empty_graph(settings)
    env = faults_graph.env(settings)
    procs = [start_cli(faults_kit, vault, env, "sync", "--json") for _ in range(2)]
    results = [(p.wait(timeout=300), *p.communicate()) for p in procs]
    for code, _out, err in results:
        assert code == 0, err
        assert "Duplicated key" not in err and "ConstraintValidation" not in err
    waited = [err for _, _, err in results if "waiting for another vault-ko run" in err]
    assert len(waited) == 1
    reports = [json.loads(out) for _, out, _ in results]
    embedded = sorted(r["embed"]["embedded"] for r in reports)
    with GraphClient(settings) as client:
        in_graph = len(client.note_states())
    assert embedded == [0, in_graph]  # the second found the first one's work done
    assert in_graph == reports[0]["ingest"]["notes"]
    record_property("faults_injected", 1)
