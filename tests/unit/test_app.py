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


def _damaged_kodb(settings: Any) -> Path:
    """A KO-DB of some hundred pages, then 4 KB of random bytes written into its middle."""
    from pipeline.model import Fact

    with App(settings) as app:  # a writer: it records the file it verified and wrote
        app.kodb.import_facts(
            Fact(f"Subject {i}", "is", "x" * 200, 0.5, "wiki", f"n/{i}.md", "import")
            for i in range(3000)
        )
    path = settings.state_dir / "ko.db"
    data = bytearray(path.read_bytes())
    middle = len(data) // 2 // 4096 * 4096
    data[middle : middle + 4096] = np.random.default_rng(7).bytes(4096)
    path.write_bytes(bytes(data))
    return path


def test_a_writer_refuses_a_damaged_kodb_and_writes_nothing(tmp_path: Path) -> None:
    """Issue 35, item 7: 4 KB of random bytes in ko.db passed ingest and sync."""
    settings = load_settings(tmp_path, env={})
    path = _damaged_kodb(settings)
    before = path.read_bytes()
    with App(settings) as app, pytest.raises(KodbError, match=r"is damaged .*vault-ko sync"):
        app.kodb  # noqa: B018
    assert path.read_bytes() == before


def test_a_reader_of_a_damaged_kodb_fails_before_the_model_loads(
    tmp_path: Path, loads: list[str]
) -> None:
    settings = load_settings(tmp_path, env={})
    _damaged_kodb(settings)
    with App(settings, graph=UpGraph(), creates_kodb=False) as app:  # type: ignore[arg-type]
        with pytest.raises(KodbError, match="is damaged"):
            app.pipeline().ask("why did we choose redis for the warm cache?")
        assert loads == []


def test_a_reader_checks_a_kodb_once_until_its_file_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipeline.kodb import KoDB

    settings = load_settings(tmp_path, env={})
    with App(settings) as app:
        app.kodb.import_facts([])
    checks: list[str] = []
    real = KoDB.check_integrity
    monkeypatch.setattr(KoDB, "check_integrity", lambda db: checks.append("x") or real(db))
    for _ in range(3):
        with App(settings, creates_kodb=False) as reader:
            reader.kodb  # noqa: B018
    assert checks == [], "the writer's own file is trusted by readers"
    path = settings.state_dir / "ko.db"
    path.write_bytes(path.read_bytes())  # the file changed outside vault-ko
    for _ in range(3):
        with App(settings, creates_kodb=False) as reader:
            reader.kodb  # noqa: B018
    assert checks == ["x"], "checked once after the change, then trusted again"


@pytest.mark.parametrize("record", [b'{"trunc', b"\xff\xfe not text"])
def test_a_damaged_check_record_is_checked_again_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, record: bytes
) -> None:
    """The state dir lives in the vault, which sync tools copy: a half-copied record."""
    from pipeline.app import VERIFIED_FILE
    from pipeline.kodb import KoDB

    settings = load_settings(tmp_path, env={})
    with App(settings) as app:
        app.kodb.import_facts([])
    (settings.state_dir / VERIFIED_FILE).write_bytes(record)
    checks: list[str] = []
    real = KoDB.check_integrity
    monkeypatch.setattr(KoDB, "check_integrity", lambda db: checks.append("x") or real(db))
    for _ in range(2):
        with App(settings, creates_kodb=False) as reader:
            reader.kodb  # noqa: B018
    assert checks == ["x"], "checked once, and the record written again"


def test_a_graph_that_fails_at_once_and_a_word_search_never_start_reading_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The preload reads the model beside the graph's round trip; a stopped local graph
    (or an open circuit) has none, and a word search needs no model: on a 2-core machine
    the read would only slow the fallback answer."""
    from pipeline.embed import LazyEmbedder
    from pipeline.query import QueryOptions

    preloads: list[int] = []
    monkeypatch.setattr(LazyEmbedder, "preload", lambda self: preloads.append(1))
    settings = load_settings(tmp_path, env={})  # its local graph was never started
    with App(settings) as app:
        stopped = app.pipeline().ask("warm cache")
        assert stopped.mode == "fallback" and "vault-ko graph up" in (stopped.degraded_reason or "")
        words = QueryOptions.from_settings(settings, semantic=False)
        assert app.pipeline().ask("warm cache", words).mode == "fallback"
    assert preloads == []
    with App(settings, graph=UpGraph()) as app:  # type: ignore[arg-type]
        app.pipeline().ask("warm cache")
    assert preloads == [1]


def test_a_sharing_app_reads_the_registry_from_its_owner_s_store(tmp_path: Path) -> None:
    """The service answers through a memo or the resident facts (no registry stamps there);
    comparing the vault with KO-DB reads the store they are views of."""
    settings = load_settings(tmp_path, env={})
    with App(settings, graph=UpGraph()) as app:  # type: ignore[arg-type]
        view = app.sharing(kodb=object())  # type: ignore[arg-type]
        assert view.store is app.kodb and app.store is app.kodb
        assert view.sharing(kodb=object()).store is app.kodb  # type: ignore[arg-type]
