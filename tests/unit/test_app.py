"""The composition root: stores opened once on first use; KO-DB and the graph before the
model; answers through the App's Pipeline."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pipeline import embed
from pipeline.app import App
from pipeline.config import load_settings
from pipeline.errors import EmbedderError, GraphUnavailable, KodbError


class UpGraph:
    def __init__(self, down: bool = False) -> None:
        self.down = down
        self.pings = 0
        self.closed = False

    def ping(self) -> float:
        self.pings += 1
        if self.down:
            raise GraphUnavailable("connection refused")
        return 1.0

    def vector_search(self, vector: np.ndarray, k: int) -> list:
        return []

    def close(self) -> None:
        self.closed = True


class CountingModel:
    model_id = "sentence-transformers/all-MiniLM-L6-v2"
    dims = 384

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.ones((len(texts), 384), dtype=np.float32) / np.sqrt(384)


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every model load that may load torch, recorded instead of loading it; a question's
    preload (never torch) finds no prepared model here."""
    seen: list[str] = []

    def fake_get_embedder(
        settings: object, *, torch_allowed: bool = True, **_: Any
    ) -> CountingModel:
        if not torch_allowed:
            raise EmbedderError("not prepared in this test")
        seen.append("load")
        return CountingModel()

    monkeypatch.setattr(embed, "get_embedder", fake_get_embedder)
    return seen


def unreachable_kodb(tmp_path: Path) -> str:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where KO-DB's folder should be")
    return f"sqlite:///{blocker / 'sub' / 'ko.db'}"


def test_an_unreachable_kodb_fails_the_question_before_the_model_loads(
    tmp_path: Path, loads: list[str]
) -> None:
    # Issue 15 item 9: the graph answered, so the model was loaded (15 s) before KO-DB
    # was opened and failed.
    settings = load_settings(tmp_path, env={}).replace(kodb_url=unreachable_kodb(tmp_path))
    graph = UpGraph()
    with App(settings, graph=graph) as app:  # type: ignore[arg-type]
        with pytest.raises(KodbError, match="not-a-folder/sub does not exist"):
            app.pipeline().ask("why did we choose redis for the warm cache?")
        assert graph.pings >= 1
        assert loads == []
        assert not app.model_loaded


def test_a_dead_graph_fails_before_the_model_loads(tmp_path: Path, loads: list[str]) -> None:
    settings = load_settings(tmp_path, env={})
    with App(settings, graph=UpGraph(down=True)) as app:  # type: ignore[arg-type]
        with pytest.raises(GraphUnavailable):
            app.load_model()
        assert loads == []


def test_the_model_loads_after_kodb_and_the_graph_and_says_so(
    tmp_path: Path, loads: list[str]
) -> None:
    said: list[str] = []
    settings = load_settings(tmp_path, env={})
    graph = UpGraph()
    app = App(settings, graph=graph, on_model_load=lambda: said.append("loading"))  # type: ignore[arg-type]
    with app:
        model = app.load_model()
        assert isinstance(model, CountingModel)
        assert (loads, said, graph.pings) == (["load"], ["loading"], 1)
        assert app.model_loaded
        app.load_model()  # once per process
        assert loads == ["load"]


def test_stores_open_once_and_close_together(tmp_path: Path) -> None:
    settings = load_settings(tmp_path, env={})
    graph = UpGraph()
    app = App(settings, graph=graph)  # type: ignore[arg-type]
    assert app.kodb is app.kodb
    assert app.pipeline() is app.pipeline()
    assert app.pipeline(include_private=True) is not app.pipeline()
    app.close()
    assert graph.closed
    assert (tmp_path / ".vault-ko" / "ko.db").exists()


def test_a_degraded_answer_never_loads_the_model(tmp_path: Path, loads: list[str]) -> None:
    settings = load_settings(tmp_path, env={})
    with App(settings, graph=UpGraph(down=True)) as app:  # type: ignore[arg-type]
        answer = app.pipeline().ask("warm cache")
        assert answer.mode == "fallback"
    assert loads == []


def test_a_new_calibration_is_picked_up(tmp_path: Path) -> None:
    import time

    from pipeline.model import Calibration

    settings = load_settings(tmp_path, env={})
    with App(settings, graph=UpGraph()) as app:  # type: ignore[arg-type]
        p = app.pipeline()
        assert app.refresh_calibration() is False
        before = p.basis()
        model = app.embedder.model_id
        app.kodb.save_calibration(
            Calibration(model, 384, 2, 0.25, 0.14, 0.3, 60, 1770, 60, time.time())
        )
        assert app.refresh_calibration() is True
        assert p.basis() != before and p.basis().source == "vault"
