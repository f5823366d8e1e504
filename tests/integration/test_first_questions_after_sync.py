"""The first questions after a sync on a loaded machine are semantic (issue 35, item 15).

A graph server's first vector search is many times slower than the next ones; on a loaded
machine it could run past the call bound, and one call past its bound used to open the
breaker for its whole cool-down, so every question of the next 30 s was answered degraded
(an evaluation's dense and hybrid figures became fallback ones). Here a vault is synced into
a fresh local ArcadeDB of this module while two busy processes keep both cores of the
machine loaded, and questions are asked as a new process would (a new client).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pipeline.app import App
from pipeline.config import Settings
from pipeline.embed import Embedder
from pipeline.errors import LocalGraphError
from pipeline.graph import GraphClient
from pipeline.graph.local import LocalGraph

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
#: The sample vault's own prompts: the first twenty are about its notes.
QUESTIONS = (REPO / "examples" / "prompts.txt").read_text(encoding="utf-8").splitlines()[:20]
BUSY = 2


@dataclass
class Loaded:
    settings: Settings
    embedder: Embedder


@pytest.fixture(scope="module")
def loaded(
    require_server: Callable[[str], None], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Loaded]:
    """The sample vault synced into a fresh local graph (its first vector search not yet
    made by anyone but the sync) while ``BUSY`` processes spin; they keep spinning until
    the module's tests are done."""
    from pipeline.sync import sync_vault

    root = tmp_path_factory.mktemp("first-questions")
    vault = root / "vault"
    shutil.copytree(REPO / "examples" / "vault", vault, ignore=shutil.ignore_patterns(".vault-ko"))
    local = LocalGraph(root / "graph-state", heap="512m")
    try:
        local.up()
    except LocalGraphError as exc:
        local.down()
        require_server(f"the local graph could not start: {exc}")
        raise
    busy: list[subprocess.Popen[bytes]] = []
    try:
        base = Settings(vault=vault, state_dir=vault / ".vault-ko")
        settings = local.settings_for(base).replace(state_dir=vault / ".vault-ko")
        with App(settings) as app:
            embedder = app.load_model(before_stores=True)
            busy = [
                subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(BUSY)
            ]
            sync_vault(settings, app.kodb, app.graph, embedder)
        yield Loaded(settings, embedder)
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()
        local.down()


def test_the_first_20_questions_after_a_sync_on_a_loaded_machine_are_semantic(
    loaded: Loaded,
    deadline: Callable[[float], AbstractContextManager[None]],
    record_property: Callable[[str, object], None],
) -> None:
    with deadline(180.0), App(loaded.settings, embedder=loaded.embedder) as app:
        pipeline = app.pipeline()
        answers = [pipeline.ask(q) for q in QUESTIONS]
    reasons = {a.degraded_reason for a in answers if a.mode != "semantic"}
    assert [a.mode for a in answers] == ["semantic"] * len(QUESTIONS), reasons
    record_property("first_graph_ms", answers[0].timings_ms.get("graph_ms"))
    record_property("max_graph_ms", max(a.timings_ms.get("graph_ms", 0.0) for a in answers))


def test_one_search_past_its_bound_degrades_only_its_own_question(
    loaded: Loaded, deadline: Callable[[float], AbstractContextManager[None]]
) -> None:
    """The real graph, still loaded, answers the confirming ping: the breaker stays closed,
    so the question after the slow one is semantic again."""
    settings = loaded.settings.replace(state_dir=loaded.settings.state_dir / "slow-once")
    graph = GraphClient(settings)
    slow_next = threading.Event()
    attempt = graph._attempt

    def late_once(fn: Callable[[], Any], until: float, bound: float) -> Any:
        if not slow_next.is_set():
            return attempt(fn, until, bound)
        slow_next.clear()

        def late() -> Any:
            time.sleep(bound + 0.5)  # a search that runs past the call's bound
            return fn()

        return attempt(late, until, bound)

    search = graph.vector_search

    def first_search_slow(vector: Any, k: int) -> Any:
        if not searched:
            searched.append(True)
            slow_next.set()
        return search(vector, k)

    searched: list[bool] = []
    graph._attempt = late_once  # type: ignore[method-assign]
    graph.vector_search = first_search_slow  # type: ignore[method-assign]
    questions = QUESTIONS[:8]
    with deadline(120.0), App(settings, graph=graph, embedder=loaded.embedder) as app:
        pipeline = app.pipeline()
        answers = [pipeline.ask(q) for q in questions]
    modes = [a.mode for a in answers]
    assert modes == ["fallback"] + ["semantic"] * (len(questions) - 1), answers[1].degraded_reason
    assert "answers, but too slowly" in (answers[0].degraded_reason or "")
    assert graph.circuit_open_reason() is None
