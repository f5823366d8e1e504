"""The service's KO-DB memo depends on the KO-DB file, its WAL and the graph stamp, and is
never used for a KO-DB it cannot watch (PostgreSQL); its vectors follow the graph's
generation."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from pipeline import statefile
from pipeline.app import App
from pipeline.config import load_settings
from pipeline.errors import GraphUnavailable
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


class _FakePipeline:
    """Records each ask_many's arguments and, as the real one does after embedding, runs
    its batch search; the graph's index search records that it answered."""

    def __init__(self) -> None:
        self.calls: list[dict[str, object]] = []
        self.index_searches = 0
        self.graph = type("G", (), {"note_states": lambda self: {}})()
        self.kodb = None

    def index_search(self, vector: object, k: int) -> list[object]:
        self.index_searches += 1
        return []

    def ask_many(self, questions: list[str], opts: object, **kw: object) -> list[str]:
        self.calls.append(kw)
        search = kw.get("search")
        if callable(search):
            search(np.ones((1, 384), np.float32), 3)
        return ["answer"]


class _FakeGraph:
    url = "bolt://127.0.0.1:1"

    def __init__(self, fail: bool) -> None:
        self.fail = fail

    def generation(self) -> int:
        if self.fail:
            raise GraphUnavailable("graph unavailable at bolt://127.0.0.1:1: refused")
        return 7


class _FakeKodb:
    def check_file(self) -> None:  # a server's database: nothing to look up
        pass


class _FakeApp:
    def __init__(self, settings: object, fail: bool) -> None:
        self.settings = settings
        self.kodb = _FakeKodb()
        self.graph = _FakeGraph(fail)
        self.the_pipeline = _FakePipeline()

    def refresh_calibration(self) -> None:
        pass

    def pipeline(self) -> _FakePipeline:
        return self.the_pipeline


def test_a_graph_that_does_not_answer_the_generation_read_takes_the_cli_path(
    tmp_path: Path,
) -> None:
    settings = load_settings(tmp_path, env={}).replace(kodb_url="postgresql+psycopg://u@h/db")
    app = _FakeApp(settings, fail=True)
    warm = WarmAnswers(app)  # type: ignore[arg-type]
    assert warm.ask("warm cache", None) == "answer"  # type: ignore[arg-type]
    # The generation read failed once the question was embedded: the question goes the
    # CLI's way, whose own graph check decides between the index and the fallback.
    calls = app.the_pipeline.calls
    assert len(calls) == 2 and calls[0]["graph_checked"] is True
    # Without a watcher, both ways say what the answer cannot see of the vault on disk.
    assert calls[1] == {"check_edits": True, "edits_reuse_s": 5.0}
    assert warm.vector_loads == 0 and app.the_pipeline.index_searches == 0


def test_vectors_load_in_the_background_once_per_generation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipeline.batch import exact

    loads: list[object] = []

    def fake_load(graph: object, kodb: object) -> object:
        loads.append(graph)
        return exact.ExactSearch(["a.md"], ["A"], ["wiki"], np.ones((1, 384), np.float32))

    monkeypatch.setattr(exact.ExactSearch, "load", staticmethod(fake_load))
    settings = load_settings(tmp_path, env={}).replace(kodb_url="postgresql+psycopg://u@h/db")
    app = _FakeApp(settings, fail=False)
    app.the_pipeline.embedder = type("E", (), {"dims": 384})()  # type: ignore[attr-defined]
    warm = WarmAnswers(app)  # type: ignore[arg-type]
    assert warm.warm_vectors == 0
    warm.ask("warm cache", None)  # type: ignore[arg-type]
    warm.settle(10)
    assert warm.warm_vectors == 1
    for _ in range(3):
        warm.ask("warm cache", None)  # type: ignore[arg-type]
    assert warm.vector_loads == 1 and len(loads) == 1
    calls = app.the_pipeline.calls
    assert all(call["graph_checked"] is True for call in calls)
    # The first question did not wait for the load: the index answered it; the others
    # were searched in memory.
    assert app.the_pipeline.index_searches == 1


def _loading(monkeypatch: pytest.MonkeyPatch, release: threading.Event) -> list[object]:
    """ExactSearch.load faked to hold one vector once ``release`` is set."""
    from pipeline.batch import exact

    loads: list[object] = []

    def fake_load(graph: object, kodb: object) -> object:
        release.wait(10)
        loads.append(graph)
        return exact.ExactSearch(["a.md"], ["A"], ["wiki"], np.ones((1, 384), np.float32))

    monkeypatch.setattr(exact.ExactSearch, "load", staticmethod(fake_load))
    return loads


def _fake_warm(tmp_path: Path) -> tuple[_FakeApp, WarmAnswers]:
    settings = load_settings(tmp_path, env={}).replace(kodb_url="postgresql+psycopg://u@h/db")
    app = _FakeApp(settings, fail=False)
    app.the_pipeline.embedder = type("E", (), {"dims": 384})()  # type: ignore[attr-defined]
    return app, WarmAnswers(app)  # type: ignore[arg-type]


def test_priming_leaves_the_vectors_in_memory_and_answers_through_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    release.set()
    loads = _loading(monkeypatch, release)
    app, warm = _fake_warm(tmp_path)
    assert warm.prime("warm up the model", 10) is True
    assert warm.warm_vectors == 1 and len(loads) == 1
    # The first answer started the load (the index answered it), the second was searched
    # in memory, and so is the first question a client asks.
    assert app.the_pipeline.index_searches == 1
    warm.ask("warm cache", None)  # type: ignore[arg-type]
    assert app.the_pipeline.index_searches == 1 and warm.vector_loads == 1


def test_priming_gives_up_waiting_after_its_timeout_and_the_load_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    loads = _loading(monkeypatch, release)
    _, warm = _fake_warm(tmp_path)
    t0 = time.monotonic()
    assert warm.prime("warm up the model", 0.2) is False
    assert time.monotonic() - t0 < 5 and warm.warm_vectors == 0
    release.set()
    warm.settle(10)
    assert warm.warm_vectors == 1 and len(loads) == 1
