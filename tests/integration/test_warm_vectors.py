"""The note vectors' generation lives in the graph (real ArcadeDB) and the service's warm
copy of the vectors follows it, with KO-DB on SQLite and on PostgreSQL."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.app import App
from pipeline.config import Settings
from pipeline.embed import get_embedder
from pipeline.embed_sync import sync_embeddings
from pipeline.graph import GraphClient
from pipeline.ingest import ingest_vault
from pipeline.kodb import KoDB
from pipeline.query import QueryOptions
from pipeline.service.warm import WarmAnswers
from tests.integration.conftest import EXAMPLE_VAULT, LocalGraphHandle

pytestmark = pytest.mark.integration

QUESTION = "why did we choose redis for the warm cache?"


@pytest.fixture
def vault_settings(
    local_graph: LocalGraphHandle, kodb_url: str, tmp_path: Path
) -> Iterator[Settings]:
    """The sample vault ingested and embedded into the session's graph (emptied first)."""
    root = tmp_path / "vault"
    shutil.copytree(EXAMPLE_VAULT, root, ignore=shutil.ignore_patterns(".vault-ko"))
    settings = local_graph.settings(root, kodb_url=kodb_url, embed_long_notes="passages")
    with KoDB.open(settings.effective_kodb_url) as kodb, GraphClient(settings) as graph:
        graph.delete_notes(list(graph.note_states()))  # other modules share the server
        ingest_vault(settings, kodb)
        sync_embeddings(settings, kodb, graph, get_embedder(settings))
    yield settings
    with GraphClient(settings) as graph:
        graph.delete_notes(list(graph.note_states()))


def test_every_embedding_write_bumps_the_generation_in_the_graph_and_reads_do_not(
    vault_settings: Settings,
) -> None:
    with GraphClient(vault_settings) as graph, GraphClient(vault_settings) as other:
        start = graph.generation()
        assert start > 0  # the sync wrote notes
        graph.note_states()
        graph.all_vectors()
        graph.set_links(["wiki/redis.md"], [])
        assert other.generation() == start  # another client reads it from the graph
        states = graph.note_states()
        path = sorted(states)[0]
        graph.delete_notes([path])
        assert other.generation() == start + 1
        graph.delete_notes(["no/such/note.md"])
        assert other.generation() == start + 2  # a delete that removes nothing still counts


def test_the_warm_copy_searches_in_memory_and_reloads_only_when_embed_changed_the_graph(
    vault_settings: Settings,
) -> None:
    with App(vault_settings) as app:
        warm = WarmAnswers(app)
        opts = QueryOptions.from_settings(vault_settings)
        cold = app.pipeline().ask(QUESTION, opts)
        first = warm.ask(QUESTION, opts)  # answered by the index while the vectors load
        assert first.mode == "semantic" and "graph_check_ms" not in first.timings_ms
        warm.settle(120)
        assert warm.vector_loads == 1
        exact = warm.ask(QUESTION, opts)
        # ~70 notes, 800 candidates: the index sees every note, so exact = index, digit for digit.
        assert exact.hits == first.hits == cold.hits
        warm.ask(QUESTION, opts)
        assert warm.vector_loads == 1
        loaded = warm.vectors_read

        # A note rewritten to be about the question: ingest alone leaves the graph as it is.
        target = sorted(app.kodb.notes())[-1]
        (vault_settings.vault / target).write_text(
            "# Redis warm cache decision\n\nwhy did we choose redis for the warm cache? "
            "Redis is the warm cache.\n",
            encoding="utf-8",
        )
        ingest_vault(vault_settings, app.kodb)
        warm.ask(QUESTION, opts)
        assert warm.vector_loads == 1
        sync_embeddings(vault_settings, app.kodb, app.graph, app.embedder)
        warm.ask(QUESTION, opts)
        warm.settle(120)
        assert warm.vector_loads == 2
        assert warm.vectors_read == loaded + 1  # only the changed note's vector was read
        after = warm.ask(QUESTION, opts)
        assert after.hits[0].path == target
        assert after.hits == app.pipeline().ask(QUESTION, opts).hits
