"""Long notes as passages, end to end: the real model cuts and embeds them, the real local
graph stores and searches them, and every path that scores notes (the graph's search, the
exact search of load-context and the service, calibration) agrees on a long note's score."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from pipeline.batch.exact import ExactSearch
from pipeline.calibrate import calibrate_vault
from pipeline.config import Settings
from pipeline.embed import get_embedder
from pipeline.embed_sync import sync_embeddings
from pipeline.graph import GraphClient
from pipeline.graph.scoring import PASSAGE_DISCOUNT, note_score
from pipeline.ingest import ingest_vault
from pipeline.kodb import KoDB
from tests.integration.conftest import LocalGraphHandle

pytestmark = pytest.mark.integration

QUESTION = "how do we rotate the TLS certificates on the load balancer?"
LONG = "wiki/operations-handbook.md"

SECTIONS = [
    ("Release trains", "Releases leave every second Tuesday from the main branch"),
    ("Database backups", "Nightly snapshots of PostgreSQL are copied to a second region"),
    ("Paging", "The on-call engineer is paged by the alerting service after five minutes"),
    ("Log retention", "Application logs are kept for thirty days, audit logs for a year"),
    ("Capacity reviews", "Every quarter the team reviews CPU and memory headroom per service"),
    ("Dependency updates", "Library upgrades are batched into one pull request per week"),
    (
        "Certificate rotation",
        "The TLS certificates of the load balancer are renewed by certbot and rotated "
        "without downtime by reloading the balancer after the new chain is uploaded",
    ),
]


def _long_note() -> str:
    parts = ["# Operations handbook", ""]
    for heading, sentence in SECTIONS:
        # Each section long enough that the whole note is far past the model's 256 tokens.
        parts += [f"## {heading}", "", " ".join([sentence + "."] * 6), ""]
    return "\n".join(parts)


SHORT = {
    "wiki/load-balancer.md": "# Load balancer\n\nHAProxy in front of the web tier.\n",
    "wiki/postgres.md": "# PostgreSQL\n\nThe system of record for accounts.\n",
    "wiki/alerting.md": "# Alerting\n\nAlerts go to the on-call rota.\n",
}


def _vault(root: Path) -> Path:
    for rel, text in {**SHORT, LONG: _long_note()}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def _sync(settings: Settings) -> None:
    with KoDB.open(settings.effective_kodb_url) as kodb, GraphClient(settings) as graph:
        graph.delete_notes(list(graph.note_states()))  # other modules share the server
        ingest_vault(settings, kodb)
        sync_embeddings(settings, kodb, graph, get_embedder(settings))


@pytest.fixture
def synced(local_graph: LocalGraphHandle, kodb_url: str, tmp_path: Path) -> Iterator[Settings]:
    settings = local_graph.settings(
        _vault(tmp_path / "vault"), kodb_url=kodb_url, embed_long_notes="passages"
    )
    _sync(settings)
    yield settings
    with GraphClient(settings) as graph:
        graph.delete_notes(list(graph.note_states()))


def test_a_long_note_is_found_by_its_last_section_with_one_score_everywhere(
    synced: Settings,
) -> None:
    embedder = get_embedder(synced)
    query = embedder.embed([QUESTION])[0]
    with GraphClient(synced) as graph, KoDB.open(synced.effective_kodb_url) as kodb:
        sets = graph.note_vector_sets([LONG, "wiki/load-balancer.md"])
        assert len(sets[LONG]) >= 1 + len(SECTIONS)  # its own vector, then a passage a section
        assert len(sets["wiki/load-balancer.md"]) == 1

        hits = graph.vector_search(query, 4)
        assert hits[0].path == LONG
        own, *parts = (float(np.dot(query, v) / np.linalg.norm(v)) for v in sets[LONG])
        assert hits[0].cosine == pytest.approx(note_score(own, parts), abs=1e-5)
        assert hits[0].cosine > own  # the passage, less its discount, beats the head
        assert max(parts) - PASSAGE_DISCOUNT == pytest.approx(hits[0].cosine, abs=1e-5)

        exact = ExactSearch.load(graph, kodb)
        assert exact.notes == 1 + len(SHORT) and len(exact.paths) == len(sets[LONG]) + 3
        found = exact.top_k(query, exact.shortlist_scores(query[None, :])[0], 4)
        assert found is not None
        assert [(h.path, round(h.cosine, 6)) for h in found] == [
            (h.path, round(h.cosine, 6)) for h in hits
        ]


def test_calibration_counts_notes_and_a_head_only_vault_loses_the_section(
    synced: Settings, local_graph: LocalGraphHandle, kodb_url: str, tmp_path: Path
) -> None:
    embedder = get_embedder(synced)
    with GraphClient(synced) as graph, KoDB.open(synced.effective_kodb_url) as kodb:
        cal = calibrate_vault(kodb, graph, embedder, max_pairs=1000)
        assert cal.n_notes == 1 + len(SHORT)
        long_score = graph.vector_search(embedder.embed([QUESTION])[0], 4)[0].cosine

    head = synced.replace(embed_long_notes="head")
    _sync(head)  # the setting changed: every note is embedded again, without passages
    with GraphClient(head) as graph:
        assert len(graph.note_vector_sets([LONG])[LONG]) == 1
        hits = graph.vector_search(embedder.embed([QUESTION])[0], 4)
        by_path = {h.path: h.cosine for h in hits}
        assert by_path[LONG] < long_score  # the head never read the last section
