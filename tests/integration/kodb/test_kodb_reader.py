"""KodbReader: the store and its three views implement the whole interface explicitly, and
the private view filters every method that returns notes, subjects or facts, alone and under
the other views, on both databases."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest

from pipeline.batch.memo import CachedKodb
from pipeline.kodb import KoDB
from pipeline.kodb.reader import READER_METHODS, KodbReader
from pipeline.kodb.resident import ResidentKodb
from pipeline.model import Calibration, NoteText
from pipeline.privacy import PrivateNotes, PublicKodb
from tests.integration.kodb.test_kodb_store import fact, note

pytestmark = pytest.mark.integration

VIEWS = (KoDB, ResidentKodb, PublicKodb, CachedKodb)
PRIVATE = PrivateNotes(("private/**",))
SECRET_FILE = "private/secret.md"
SECRET_SUBJECT = "vault password"
SECRET_WORD = "hunter"

#: For each reader method, the call that would show a private note, subject or fact if the
#: view let one through (every method of the interface must have one).
CALLS: dict[str, Callable[[KodbReader], Any]] = {
    "notes": lambda r: r.notes(),
    "notes_at": lambda r: r.notes_at(["wiki/pub.md", SECRET_FILE]),
    "count_notes": lambda r: r.count_notes(),
    "notes_dated": lambda r: r.notes_dated(None, "2999-12-31", 1),
    "search_notes": lambda r: (
        r.search_notes([SECRET_WORD, "redis"], 10),
        r.search_notes([SECRET_WORD], 10, every=True),
    ),
    "note_texts": lambda r: r.note_texts(),
    "index_languages": lambda r: r.index_languages(),
    "word_shares": lambda r: r.word_shares(["redis", "password"]),
    "note_languages": lambda r: r.note_languages(["wiki/pub.md", SECRET_FILE]),
    "subject_norms": lambda r: r.subject_norms(),
    "search_subjects": lambda r: r.search_subjects("vault"),
    "search_subjects_many": lambda r: r.search_subjects_many(["vault", "password", "redis"]),
    "subjects_by_source_file": lambda r: r.subjects_by_source_file(["wiki/pub.md", SECRET_FILE]),
    "subjects_for_source_files": lambda r: r.subjects_for_source_files(
        ["wiki/pub.md", SECRET_FILE]
    ),
    "facts_for_subjects": lambda r: r.facts_for_subjects(["redis", SECRET_SUBJECT]),
    "subject_source_files": lambda r: r.subject_source_files(["redis", SECRET_SUBJECT]),
    "subject_summaries": lambda r: r.subject_summaries(
        ["redis", SECRET_SUBJECT], sample_size=5, evidence_files=[SECRET_FILE]
    ),
    "latest_calibration": lambda r: r.latest_calibration(),
    "succession": lambda r: r.succession(),
    "decision_facts": lambda r: r.decision_facts(),
    "close": lambda r: r.close(),
}


def test_every_reader_method_has_a_probe() -> None:
    assert set(CALLS) == set(READER_METHODS)
    assert len(READER_METHODS) >= 15


@pytest.mark.parametrize("cls", VIEWS, ids=lambda c: c.__name__)
def test_each_view_writes_every_reader_method_itself(cls: type) -> None:
    assert "__getattr__" not in vars(cls), "no fall-through: each method is written out"
    missing = [m for m in READER_METHODS if m not in vars(cls)]
    assert missing == []


@pytest.mark.parametrize("cls", VIEWS, ids=lambda c: c.__name__)
def test_each_view_takes_the_interfaces_arguments(cls: type) -> None:
    for name in READER_METHODS:
        wanted = inspect.signature(getattr(KodbReader, name)).parameters
        given = inspect.signature(getattr(cls, name)).parameters
        assert list(wanted) == list(given)[: len(wanted)], f"{cls.__name__}.{name}"
        for p in list(given)[len(wanted) :]:
            assert given[p].default is not inspect.Parameter.empty, f"{cls.__name__}.{name}({p})"


@pytest.fixture
def store(kodb_url: str) -> Iterator[KoDB]:
    with KoDB.open(kodb_url) as db:
        db.apply_ingest(
            [
                (
                    # Dated, the private note the newer: a read by date must not show it.
                    replace(note("wiki/pub.md"), date="2026-01-02"),
                    [fact("Redis", "wiki/pub.md"), fact("Cache", "wiki/pub.md")],
                ),
                (
                    replace(note(SECRET_FILE), date="2026-03-04"),
                    [
                        fact("Redis", SECRET_FILE, object="the admin is hunter2"),
                        fact("Vault password", SECRET_FILE, object=SECRET_WORD + "2"),
                        # A private decision replacing a public subject: no public answer
                        # may say the public one is superseded, nor by what.
                        fact(
                            "Redis", SECRET_FILE, predicate="superseded_by", object="Vault password"
                        ),
                        fact(
                            "Vault password", SECRET_FILE, predicate="adr_status", object="accepted"
                        ),
                    ],
                ),
            ],
            removed=[],
            texts=[
                NoteText("wiki/pub.md", "pub", "redis is our cache"),
                NoteText(SECRET_FILE, "secret", f"redis password {SECRET_WORD}"),
            ],
        )
        db.save_calibration(
            Calibration(
                embedder="m",
                dims=3,
                probe_set_version=1,
                noise_floor=0.2,
                sigma=0.1,
                mu=0.3,
                n_notes=2,
                n_pairs=1,
                vault_notes_at_calibration=2,
                measured_at=1.0,
            )
        )
        yield db


def _views(store: KoDB) -> dict[str, KodbReader]:
    public = PublicKodb(store, PRIVATE)
    resident = ResidentKodb(public, store.resident_copy(PRIVATE.is_private), PRIVATE.is_private)
    return {
        "PublicKodb": public,
        "CachedKodb over PublicKodb": CachedKodb(public),
        "ResidentKodb over PublicKodb": resident,
        "ResidentKodb over CachedKodb": resident.over(CachedKodb(public)),
    }


def _shows_a_secret(value: Any) -> bool:
    text = repr(value).casefold()
    return SECRET_FILE in text or SECRET_SUBJECT in text or SECRET_WORD in text


def test_the_store_itself_shows_the_secrets_the_probes_look_for(store: KoDB) -> None:
    shown = [m for m, call in CALLS.items() if _shows_a_secret(call(store))]
    assert {"notes", "note_texts", "subject_norms", "facts_for_subjects"} <= set(shown)
    assert {"search_subjects", "search_subjects_many", "subject_source_files"} <= set(shown)
    assert {"succession", "decision_facts", "notes_dated"} <= set(shown)
    assert store.succession().of("redis").status == "superseded"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "view",
    [
        "PublicKodb",
        "CachedKodb over PublicKodb",
        "ResidentKodb over PublicKodb",
        "ResidentKodb over CachedKodb",
    ],
)
def test_the_private_view_filters_every_method(store: KoDB, view: str) -> None:
    reader = _views(store)[view]
    leaks = {m: call(reader) for m, call in CALLS.items() if _shows_a_secret(call(reader))}
    assert leaks == {}
    assert reader.count_notes() == 1
    # Shares among the public notes: what the private note holds moves none.
    assert reader.word_shares(["redis", "password"]) == {"redis": 1.0, "password": 0.0}
    assert store.word_shares(["redis", "password"]) == {"redis": 1.0, "password": 0.5}
    # The newest public note, though the private one is newer and the limit is one.
    assert [n.path for n in reader.notes_dated(None, "2999-12-31", 1)] == ["wiki/pub.md"]
    assert reader.search_subjects_many(["redis"])["redis"] == ["redis"]
    summary = reader.subject_summaries(["redis"], sample_size=5)["redis"]
    assert summary.source_count == 1, "the private note's fact is not counted"
    assert reader.latest_calibration() == store.latest_calibration()
    assert reader.succession().of("redis") is None, "only a private note said it was replaced"
