"""The service's warm copy depends on the KO-DB file, its WAL and the graph stamp, and is
never used for a KO-DB it cannot watch (PostgreSQL)."""

from __future__ import annotations

import time
from pathlib import Path

from pipeline import statefile
from pipeline.app import App
from pipeline.config import load_settings
from pipeline.graph.client import changes_path
from pipeline.model import Calibration
from pipeline.service.warm import WarmAnswers


def test_the_signature_moves_with_kodb_commits_and_graph_writes(tmp_path: Path) -> None:
    settings = load_settings(tmp_path, env={})
    with App(settings) as app:
        warm = WarmAnswers(app)
        app.kodb  # noqa: B018 - creates the file
        first = warm.signature()
        assert first is not None and first == warm.signature()
        model = app.embedder.model_id
        app.kodb.save_calibration(Calibration(model, 384, 2, 0.2, 0.1, 0.3, 60, 10, 60, 1.0))
        second = warm.signature()
        assert second != first
        time.sleep(0.01)
        statefile.write_text(changes_path(settings.state_dir, app.graph.url), "x")
        assert warm.signature() not in (first, second)


def test_postgresql_is_never_cached(tmp_path: Path) -> None:
    settings = load_settings(tmp_path, env={}).replace(kodb_url="postgresql+psycopg://u@h/db")
    assert WarmAnswers(App(settings)).signature() is None
