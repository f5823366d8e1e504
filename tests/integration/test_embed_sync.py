"""`vault-ko embed` against the real local ArcadeDB (Bolt), a real KO-DB and the real model.

One copy of the sample vault is ingested and synced once for the module into the session's
local graph (the `local_graph` fixture). Each test puts back what it changes (notes, registry,
graph), so the tests do not depend on their order.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from pipeline.config import Settings
from pipeline.embed import Embedder, get_embedder
from pipeline.embed_sync import EmbedReport, sync_embeddings
from pipeline.graph import GraphClient
from pipeline.ingest import ingest_vault
from pipeline.kodb import KoDB
from pipeline.vault.passages import text_version

#: The text rules the default setting stores (long notes as passages).
EMBED_TEXT_VERSION = text_version("passages")

if TYPE_CHECKING:
    from tests.integration.conftest import LocalGraphHandle

pytestmark = [pytest.mark.integration, pytest.mark.model]

REPO = Path(__file__).resolve().parents[2]
GraphEnv = Callable[..., dict[str, str]]
EXAMPLE_VAULT = REPO / "examples" / "vault"
EDITED_NOTE = "wiki/kafka.md"
DELETED_NOTE = "wiki/pgbouncer.md"


@dataclass(frozen=True)
class Synced:
    """The module's vault after its first sync."""

    root: Path
    settings: Settings
    kodb: KoDB
    graph: GraphClient
    embedder: Embedder
    first: EmbedReport
    edges: frozenset[tuple[str, str]]


def edges_of(graph: GraphClient, paths: list[str]) -> frozenset[tuple[str, str]]:
    return frozenset((a, b) for a, b, outgoing in graph.neighbors(paths) if outgoing)


def node_paths(graph: GraphClient) -> list[str]:
    """Every Note node's path, duplicates included (note_states() would hide them, and
    all_vectors() has a row per passage of a long note)."""
    with graph._session() as session:
        return [r["path"] for r in session.run("MATCH (n:Note) RETURN n.path AS path")]


@pytest.fixture(scope="module")
def synced(
    local_graph: LocalGraphHandle, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Synced]:
    """A copy of the sample vault, ingested and synced once into the session's graph."""
    root = tmp_path_factory.mktemp("embed-sync") / "vault"
    shutil.copytree(EXAMPLE_VAULT, root, ignore=shutil.ignore_patterns(".vault-ko"))
    settings = local_graph.settings(root, embed_long_notes="passages")
    kodb = KoDB.open(settings.effective_kodb_url)
    graph = GraphClient(settings)
    try:
        graph.delete_notes(list(graph.note_states()))  # other modules share the server
        ingest_vault(settings, kodb)
        embedder = get_embedder(settings)
        first = sync_embeddings(settings, kodb, graph, embedder)
        edges = edges_of(graph, sorted(kodb.notes()))
        yield Synced(root, settings, kodb, graph, embedder, first, edges)
    finally:
        graph.delete_notes(list(graph.note_states()))
        graph.close()
        kodb.close()


def sync(s: Synced, **kw: object) -> EmbedReport:
    return sync_embeddings(s.settings, s.kodb, s.graph, s.embedder, **kw)  # type: ignore[arg-type]


@pytest.fixture
def restore(synced: Synced) -> Iterator[None]:
    """Put the notes a test edits or deletes back, then re-ingest and re-sync."""
    saved = {p: (synced.root / p).read_bytes() for p in (EDITED_NOTE, DELETED_NOTE)}
    yield
    for rel, data in saved.items():
        (synced.root / rel).write_bytes(data)
    ingest_vault(synced.settings, synced.kodb)
    sync(synced)


def test_first_sync_embeds_every_registry_note(synced: Synced) -> None:
    registry = synced.kodb.notes()
    assert len(registry) > 40
    assert synced.first.embedded == len(registry)
    assert (synced.first.deleted, synced.first.unchanged, synced.first.skipped) == (0, 0, ())
    states = synced.graph.note_states()
    assert set(states) == set(registry)
    for path, state in states.items():
        assert state.content_hash == registry[path].content_hash
        assert (state.model, state.dims) == ("sentence-transformers/all-MiniLM-L6-v2", 384)
    assert sorted(node_paths(synced.graph)) == sorted(registry)
    # Wikilinks by title ("[[Rate limiting]]" in api-gateway.md) became edges.
    assert ("wiki/api-gateway.md", "wiki/rate-limiting.md") in synced.edges
    assert synced.first.links == len(synced.edges)


def test_nodes_record_the_text_rules_and_older_ones_are_re_embedded(
    synced: Synced, restore: None
) -> None:
    assert {s.text_version for s in synced.graph.note_states().values()} == {EMBED_TEXT_VERSION}
    # A node as an older release wrote it: no text_version property.
    with synced.graph._session() as session:
        session.run("MATCH (n:Note {path: $path}) SET n.text_version = null", path=EDITED_NOTE)
    assert synced.graph.note_states()[EDITED_NOTE].text_version == 0
    report = sync(synced)
    assert (report.embedded, report.deleted) == (1, 0)
    assert synced.graph.note_states()[EDITED_NOTE].text_version == EMBED_TEXT_VERSION


def test_second_sync_embeds_nothing(synced: Synced) -> None:
    report = sync(synced)
    assert (report.embedded, report.deleted, report.links) == (0, 0, 0)
    assert report.unchanged == len(synced.kodb.notes())


def test_editing_one_note_re_embeds_exactly_it(synced: Synced, restore: None) -> None:
    before = synced.graph.note_states()[EDITED_NOTE]
    with (synced.root / EDITED_NOTE).open("a", encoding="utf-8") as fh:
        fh.write("\nConsumers now also read the audit topic.\n")
    ingest_vault(synced.settings, synced.kodb)
    report = sync(synced)
    assert (report.embedded, report.deleted) == (1, 0)
    assert report.unchanged == len(synced.kodb.notes()) - 1
    after = synced.graph.note_states()[EDITED_NOTE]
    assert after.content_hash != before.content_hash
    assert after.content_hash == synced.kodb.notes()[EDITED_NOTE].content_hash


def test_a_deleted_note_loses_its_node_and_edges(synced: Synced, restore: None) -> None:
    assert any(DELETED_NOTE in edge for edge in synced.edges)
    (synced.root / DELETED_NOTE).unlink()
    ingest_vault(synced.settings, synced.kodb)
    report = sync(synced)
    assert (report.embedded, report.deleted) == (0, 1)
    assert DELETED_NOTE not in synced.graph.note_states()
    remaining = sorted(synced.kodb.notes())
    assert all(DELETED_NOTE not in edge for edge in edges_of(synced.graph, remaining))


KILLABLE_SYNC = textwrap.dedent(
    """
    import sys
    from pipeline.app import App
    from pipeline.config import load_settings
    from pipeline.embed_sync import sync_embeddings

    settings = load_settings(sys.argv[1]).replace(embed_batch_size=1)
    app = App(settings)
    embedder = app.load_model()

    def progress(done, total):
        print(done, total, flush=True)

    sync_embeddings(settings, app.kodb, app.graph, embedder, progress=progress)
    print("finished", flush=True)
    """
)


def test_a_sync_killed_midway_converges_without_duplicates(
    synced: Synced, graph_env: GraphEnv
) -> None:
    everything = sorted(synced.kodb.notes())
    synced.graph.delete_notes(everything)
    assert node_paths(synced.graph) == []

    env = {**os.environ, **graph_env(synced.settings), "HF_HUB_OFFLINE": "1"}
    child = subprocess.Popen(
        [sys.executable, "-c", KILLABLE_SYNC, str(synced.root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=REPO,
    )
    try:
        assert child.stdout is not None
        for line in child.stdout:
            done = line.split()[0]
            if done.isdigit() and int(done) >= 2:  # a window of one-note batches is committed
                os.kill(child.pid, signal.SIGKILL)
                break
    finally:
        child.kill()
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL

    partial = node_paths(synced.graph)
    assert 2 <= len(partial) < len(everything)  # killed midway, whole batches kept

    report = sync(synced)
    assert report.embedded == len(everything) - len(partial)
    assert report.unchanged == len(partial)
    paths = node_paths(synced.graph)
    assert sorted(paths) == everything  # every note, each exactly once
    assert edges_of(synced.graph, everything) == synced.edges  # links repaired too


def test_cli_embed_json_reports_counts_model_and_dims(synced: Synced, graph_env: GraphEnv) -> None:
    from pipeline.cli import cli

    runner = CliRunner(env=graph_env(synced.settings))
    result = runner.invoke(cli, ["--vault", str(synced.root), "embed", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert list(data) == [
        "embedded",
        "deleted",
        "unchanged",
        "moved",
        "passages",
        "links",
        "seconds",
        "model",
        "dims",
        "skipped",
        "query_model",
    ]
    assert data["embedded"] == data["moved"] == 0
    assert data["query_model"]["ready"] is True  # embed prepares the query-time model
    assert data["unchanged"] == len(synced.kodb.notes())
    assert (data["model"], data["dims"]) == ("sentence-transformers/all-MiniLM-L6-v2", 384)


def test_cli_embed_with_the_graph_down_exits_2_with_one_line(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "VAULT_KO_GRAPH_URL": f"bolt://127.0.0.1:{port}", "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        [str(Path(sys.executable).parent / "vault-ko"), "--vault", str(tmp_path), "embed"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr
