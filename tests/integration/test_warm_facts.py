"""The service's resident copy of KO-DB's facts (``service/warm.py``, ``kodb/resident.py``)
on the sample vault with its facts file, a real SQLite KO-DB and the real local graph: the
answers equal the CLI's, a KO-DB write takes the copy out at once, and the setting bounds
it."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.app import App
from pipeline.config import Settings
from pipeline.embed import get_embedder
from pipeline.embed_sync import sync_embeddings
from pipeline.errors import ServiceError
from pipeline.graph import GraphClient
from pipeline.ingest import ingest_vault
from pipeline.kodb import KoDB
from pipeline.model import Fact
from pipeline.query import QueryOptions
from pipeline.render import to_dict
from pipeline.service.warm import WarmAnswers, read_in_child
from tests.integration.conftest import EXAMPLE_VAULT, LocalGraphHandle

pytestmark = pytest.mark.integration

QUESTIONS = (
    "why did we choose redis for the warm cache?",
    "how do we add a column to a big postgres table",
    "kafka consumer lag triage",
    "who is on call this week and what was handed over?",
    "banana bread recipe",
)
FACTS_FILE = EXAMPLE_VAULT.parent / "facts.jsonl"


def _facts() -> list[Fact]:
    rows = [json.loads(line) for line in FACTS_FILE.read_text(encoding="utf-8").splitlines()]
    return [Fact(**row) for row in rows]


def _vault(local_graph: LocalGraphHandle, tmp_path: Path, private: bool = False) -> Settings:
    root = tmp_path / "vault"
    shutil.copytree(EXAMPLE_VAULT, root, ignore=shutil.ignore_patterns(".vault-ko"))
    if private:
        (root / "vault-ko.toml").write_text('[vault]\nprivate_globs = ["wiki/redis.md"]\n')
    settings = local_graph.settings(root)
    if private:
        settings = settings.replace(vault_private_globs=("wiki/redis.md",))
    with KoDB.open(settings.effective_kodb_url) as kodb, GraphClient(settings) as graph:
        graph.delete_notes(list(graph.note_states()))  # other modules share the server
        ingest_vault(settings, kodb)
        kodb.import_facts(_facts())
        sync_embeddings(settings, kodb, graph, get_embedder(settings))
    return settings


@pytest.fixture
def vault_settings(local_graph: LocalGraphHandle, tmp_path: Path) -> Iterator[Settings]:
    settings = _vault(local_graph, tmp_path)
    yield settings
    with GraphClient(settings) as graph:
        graph.delete_notes(list(graph.note_states()))


def _shown(answer: object) -> dict:
    data = to_dict(answer, digits=6)  # type: ignore[arg-type]
    data.pop("timings_ms", None)
    return data


def _warm(app: App, opts: QueryOptions) -> WarmAnswers:
    """A WarmAnswers with the vectors and the facts in memory."""
    warm = WarmAnswers(app)
    warm.ask(QUESTIONS[0], opts)
    warm.settle(120)
    warm.settle_facts(120)
    assert warm.warm_vectors and warm.warm_facts
    return warm


def test_answers_from_the_resident_facts_equal_the_cli_answers(vault_settings: Settings) -> None:
    with App(vault_settings) as app:
        opts = QueryOptions.from_settings(vault_settings)
        warm = _warm(app, opts)
        with KoDB.open(vault_settings.effective_kodb_url) as kodb:
            assert warm.warm_facts == kodb.count_facts()
        assert warm.resident_loads == 1
        for question in QUESTIONS:
            for options in (opts, QueryOptions.from_settings(vault_settings, top_k=5)):
                served = warm.ask(question, options)
                assert _shown(served) == _shown(
                    app.pipeline().ask(question, options, check_edits=True)
                )
        strong = warm.ask(QUESTIONS[0], opts)
        assert strong.subjects and any(s.facts for s in strong.subjects)
        assert warm.resident_loads == 1  # read once while KO-DB did not change


def test_a_kodb_write_takes_the_copy_out_at_once_and_it_is_read_again(
    vault_settings: Settings,
) -> None:
    with App(vault_settings) as app:
        opts = QueryOptions.from_settings(vault_settings)
        warm = _warm(app, opts)
        before = warm.ask(QUESTIONS[0], opts)
        fresh = Fact(
            "Redis", "decided_in", "the warm cache spike of 2026", 1.0, "wiki", "wiki/redis.md"
        )
        app.kodb.import_facts([fresh])
        after = warm.ask(QUESTIONS[0], opts)  # the stale copy is not used
        assert _shown(after) == _shown(app.pipeline().ask(QUESTIONS[0], opts, check_edits=True))
        redis = next(s for s in after.subjects if s.subject == "Redis")
        assert (
            redis.raw_facts
            == next(s for s in before.subjects if s.subject == "Redis").raw_facts + 1
        )
        warm.settle_facts(120)
        warm.ask(QUESTIONS[0], opts)
        warm.settle_facts(120)
        assert warm.resident_loads >= 2 and warm.warm_facts == app.kodb.count_facts()
        assert _shown(warm.ask(QUESTIONS[0], opts)) == _shown(after)


@pytest.mark.parametrize("limit", [0, 5])
def test_the_setting_bounds_the_copy(vault_settings: Settings, limit: int) -> None:
    settings = vault_settings.replace(service_resident_facts=limit)
    with App(settings) as app:
        opts = QueryOptions.from_settings(settings)
        warm = WarmAnswers(app)
        first = warm.ask(QUESTIONS[0], opts)
        warm.settle(120)
        warm.settle_facts(120)
        again = warm.ask(QUESTIONS[0], opts)
        assert warm.warm_facts == 0
        assert warm.resident_loads == (0 if limit == 0 else 1)  # too many facts: not retried
        assert (
            _shown(again)
            == _shown(first)
            == _shown(app.pipeline().ask(QUESTIONS[0], opts, check_edits=True))
        )


def test_a_copy_of_a_vault_with_private_notes_leaves_their_facts_out(
    local_graph: LocalGraphHandle, tmp_path: Path
) -> None:
    settings = _vault(local_graph, tmp_path, private=True)
    try:
        with App(settings) as app:
            opts = QueryOptions.from_settings(settings)
            warm = _warm(app, opts)
            with KoDB.open(settings.effective_kodb_url) as kodb:
                hidden = sum(
                    1
                    for f in kodb.facts_for_subjects(["redis"])
                    if f.source_file == "wiki/redis.md"
                )
                assert hidden and warm.warm_facts < kodb.count_facts()
            for question in QUESTIONS:
                served = warm.ask(question, opts)
                assert _shown(served) == _shown(
                    app.pipeline().ask(question, opts, check_edits=True)
                )
                assert "wiki/redis.md" not in json.dumps(_shown(served))
    finally:
        with GraphClient(settings) as graph:
            graph.delete_notes(list(graph.note_states()))


def test_a_read_that_fails_leaves_the_answers_to_the_memo(
    vault_settings: Settings, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from pipeline.service import warm as warm_module

    def broken(*args: object) -> None:
        raise OSError("the child was killed")

    monkeypatch.setattr(warm_module, "read_in_child", broken)
    with App(vault_settings) as app:
        opts = QueryOptions.from_settings(vault_settings)
        warm = WarmAnswers(app)
        warm.ask(QUESTIONS[0], opts)
        warm.settle_facts(120)
        answer = warm.ask(QUESTIONS[0], opts)
        assert warm.warm_facts == 0 and warm.resident_loads == 1
        assert _shown(answer) == _shown(app.pipeline().ask(QUESTIONS[0], opts, check_edits=True))
        assert "reading KO-DB's facts into memory failed: the child was killed" in caplog.text


def test_a_child_reads_the_copy_and_says_when_kodb_is_too_large(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"sqlite:///{tmp_path / 'ko.db'}"
    with KoDB.open(url) as kodb:
        kodb.import_facts(_facts())
        count = kodb.count_facts()
    data = read_in_child(url, (), count)
    assert data is not None and data.facts == count
    hidden = read_in_child(url, ("wiki/redis.md",), count)
    assert hidden is not None and hidden.facts < count
    assert read_in_child(url, (), count - 1) is None
    assert f"KO-DB holds {count} facts, more than service_resident_facts" in caplog.text


def test_a_child_that_fails_or_dies_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(ServiceError, match="KodbError"):
        read_in_child(f"sqlite:///{tmp_path / 'file' / 'ko.db'}", (), 10)
    url = f"sqlite:///{tmp_path / 'ko.db'}"
    with KoDB.open(url) as kodb:
        kodb.import_facts(_facts())
    errors: list[BaseException] = []

    def read() -> None:
        try:
            read_in_child(url, (), 10**6)
        except BaseException as exc:
            errors.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    deadline = time.monotonic() + 30
    while not multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.005)
    for child in multiprocessing.active_children():
        os.kill(child.pid, signal.SIGKILL)  # type: ignore[arg-type]
    reader.join(60)
    assert len(errors) == 1 and isinstance(errors[0], ServiceError)
    assert "the process reading KO-DB's facts died (exit code -9" in str(errors[0])


def test_private_notes_stay_out_after_the_vectors_are_read_again_over_the_resident_facts(
    local_graph: LocalGraphHandle, tmp_path: Path
) -> None:
    """A new generation (an embed, every edit under ``serve --watch``) while the facts are
    resident: the vectors are read again through the resident facts' pipeline, which must
    hide the private notes as the memo's does."""
    settings = _vault(local_graph, tmp_path, private=True)
    try:
        with App(settings) as app:
            opts = QueryOptions.from_settings(settings)
            warm = _warm(app, opts)
            public_vectors = warm.warm_vectors
            with GraphClient(settings) as graph:
                before = graph.generation()
            with GraphClient(settings) as graph:  # KO-DB unchanged: the facts stay resident
                graph.delete_notes(["wiki/kafka.md"])
                assert graph.generation() != before
            public_vectors -= 1
            for _ in range(2):  # the copy, then the vectors read over the resident facts
                warm.ask(QUESTIONS[0], opts)
                warm.settle(120)
                warm.settle_facts(120)
            assert warm.warm_facts and warm.warm_vectors == public_vectors
            for question in QUESTIONS:
                served = warm.ask(question, opts)
                assert "wiki/redis.md" not in json.dumps(_shown(served))
                assert _shown(served) == _shown(
                    app.pipeline().ask(question, opts, check_edits=True)
                )
    finally:
        with GraphClient(settings) as graph:
            graph.delete_notes(list(graph.note_states()))
