"""Batch session loading with fake stores: packs equal single answers, input lines, resume,
a graph that dies midway, the exact searcher against the graph's own re-scoring."""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pipeline.app import App
from pipeline.batch.exact import ExactSearch
from pipeline.batch.input import BadLine, SessionPrompt, read_sessions
from pipeline.batch.memo import CachedKodb
from pipeline.batch.packs import pack_to_markdown, safe_file_name
from pipeline.config import load_settings
from pipeline.errors import ConfigError, GraphUnavailable
from pipeline.graph.backends import score_scale
from pipeline.graph.records import Candidate, NoteState
from pipeline.graph.scoring import exact_rescore
from pipeline.kodb import text as kodb_text
from pipeline.kodb.decisions import recomputed
from pipeline.kodb.match import reference_search
from pipeline.model import Calibration, Fact, Note, SubjectSummary, summaries_from_facts
from pipeline.query import QueryOptions
from pipeline.render import to_dict
from pipeline.session import load_context
from pipeline.succession import PREDICATES, Succession

MODEL = "sentence-transformers/all-MiniLM-L6-v2"
DIMS = 8


def unit(seed: str) -> np.ndarray:
    """A deterministic unit vector per string."""
    rng = np.random.default_rng(int(hashlib.sha1(seed.encode()).hexdigest()[:8], 16))
    v = rng.standard_normal(DIMS).astype(np.float32)
    return v / np.linalg.norm(v)


class FakeEmbedder:
    model_id = MODEL
    dims = DIMS

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        return np.stack([self.vector(t) for t in texts]).astype(np.float32)

    @staticmethod
    def vector(text: str) -> np.ndarray:
        word = text.split()[0]
        if word != "banana":
            return unit(word)
        # off-topic: orthogonal to every note, so it is no_match
        notes = np.stack(list(FakeGraph().vectors.values())).astype(np.float64)
        basis, _ = np.linalg.qr(notes.T)
        v = unit(word).astype(np.float64)
        v -= basis @ (basis.T @ v)
        return (v / np.linalg.norm(v)).astype(np.float32)


NOTES = {
    "adr/0007-use-redis.md": ("Use Redis as the warm cache", "adr"),
    "wiki/redis.md": ("Redis", "wiki"),
    "wiki/warm-cache.md": ("Warm cache", "wiki"),
    "sessions/s1.md": ("Cache spike", "session"),
    "sessions/s2.md": ("Warmstart scripts", "session"),
}
# Prompts start with a word naming the note they are about: the fake embedder maps that
# word to the note's vector, so they hit it with cosine 1.
WORDS = {"redis": "wiki/redis.md", "cache": "wiki/warm-cache.md", "spike": "sessions/s1.md"}


class FakeGraph:
    """Stores note vectors; vector_search re-scores them with the real exact_rescore."""

    def __init__(self, *, fail_after: int | None = None) -> None:
        self.vectors = {p: unit(p) for p in NOTES}
        for word, path in WORDS.items():
            self.vectors[path] = unit(word)
        self.calls = 0
        self.searches = 0
        self.fail_after = fail_after

    def _tick(self) -> None:
        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            raise GraphUnavailable("graph at bolt://fake unavailable: connection refused")

    def ping(self) -> float:
        self._tick()
        return 0.1

    def vector_search(self, vector: np.ndarray, k: int) -> list:
        self._tick()
        self.searches += 1
        cands = [
            Candidate(p, NOTES[p][0], NOTES[p][1], tuple(float(x) for x in v), 0.0)
            for p, v in self.vectors.items()
        ]
        return exact_rescore(np.asarray(vector, dtype=np.float64), cands, k, score_scale("neo4j"))

    def all_vectors(self) -> tuple[list[NoteState], np.ndarray]:
        self._tick()
        paths = sorted(self.vectors)
        states = [NoteState(p, f"h:{p}", MODEL, DIMS, 0.0) for p in paths]
        return states, np.stack([self.vectors[p] for p in paths]).astype(np.float32)

    def close(self) -> None:
        pass


def F(subject: str, file: str, stype: str, pred: str = "mentioned_in", conf: float = 0.8) -> Fact:
    return Fact(subject, pred, file, conf, stype, file)  # type: ignore[arg-type]


FACTS = [
    F("Redis", "wiki/redis.md", "wiki", "tagged", 0.9),
    F("Redis", "adr/0007-use-redis.md", "adr", conf=0.95),
    F("Redis", "sessions/s1.md", "session"),
    F("Warm cache", "wiki/warm-cache.md", "wiki"),
    F("Warm cache", "sessions/s1.md", "session"),
    F("Warm cache", "adr/0007-use-redis.md", "adr", "decided", 0.9),
    F("Warmstart", "sessions/s2.md", "session"),
]


class FakeKodb:
    def __init__(self) -> None:
        self.facts = FACTS
        self.calls = 0

    def notes(self) -> dict[str, Note]:
        return {p: Note(p, t, s, f"h:{p}", 0.0, 1) for p, (t, s) in NOTES.items()}  # type: ignore[arg-type]

    def notes_at(self, paths: Iterable[str]) -> dict[str, Note]:
        self.calls += 1
        registry = self.notes()
        return {p: registry[p] for p in paths if p in registry}

    def notes_dated(
        self, start: str | None, end: str, limit: int, source_type: str | None = None
    ) -> list[Note]:
        self.calls += 1
        return []  # no note of this vault is dated

    def word_shares(self, terms: Sequence[str]) -> dict[str, float]:
        self.calls += 1
        held = [set(kodb_text.words(title)) for title, _ in NOTES.values()]
        return {t: sum(bool(set(kodb_text.words(t)) & h) for h in held) / len(held) for t in terms}

    def count_notes(self, source_type: str | None = None) -> int:
        self.calls += 1
        return sum(1 for n in self.notes().values() if source_type in (None, n.source_type))

    def note_languages(self, paths: Iterable[str]) -> dict[str, str | None]:
        self.calls += 1
        return {p: "english" for p in paths if p in NOTES}

    def search_notes(
        self, terms: Sequence[str], limit: int, *, every: bool = False
    ) -> list[tuple[str, float]]:
        self.calls += 1
        wanted = set(kodb_text.query_words(terms))
        found = [
            (p, float(len(wanted & set(kodb_text.words(title)))))
            for p, (title, _) in NOTES.items()
            if wanted & set(kodb_text.words(title))
            and (
                not every
                or all(set(kodb_text.query_words([t])) & set(kodb_text.words(title)) for t in terms)
            )
        ]
        return sorted(found, key=lambda ps: (-ps[1], ps[0]))[:limit]

    def subjects_by_source_file(self, paths: Iterable[str]) -> dict[str, set[str]]:
        self.calls += 1
        return {p: {f.subject_norm for f in self.facts if f.source_file == p} for p in paths}

    def subjects_for_source_files(self, paths: Iterable[str]) -> set[str]:
        return set().union(*self.subjects_by_source_file(paths).values())

    def search_subjects_many(self, terms: Sequence[str], limit=None) -> dict[str, list[str]]:
        self.calls += 1
        norms = {f.subject_norm for f in self.facts}
        return {t: reference_search(t, norms) for t in terms}

    def facts_for_subjects(self, subject_norms: Iterable[str]) -> list[Fact]:
        self.calls += 1
        wanted = set(subject_norms)
        rows = [f for f in self.facts if f.subject_norm in wanted]
        return sorted(
            rows,
            key=lambda f: (f.subject_norm, f.predicate, f.object, f.source_file, f.extractor),
        )

    def subject_summaries(
        self,
        subject_norms: Iterable[str],
        *,
        sample_size: int,
        evidence_files: Iterable[str] = (),
        only_files: Iterable[str] | None = None,
        cache: object = None,  # the store's read cache: every answer here is computed
    ) -> dict[str, SubjectSummary]:
        keep = None if only_files is None else set(only_files)
        facts = self.facts_for_subjects(subject_norms)
        return summaries_from_facts(f for f in facts if keep is None or f.source_file in keep)

    def decision_facts(self) -> list[Fact]:
        return [f for f in self.facts if f.predicate in PREDICATES]

    def succession(self) -> Succession:
        return recomputed(self.decision_facts(), self.notes())

    def latest_calibration(self, embedder=None, dims=None) -> Calibration:
        return Calibration(MODEL, DIMS, 2, 0.30, 0.10, 0.2, 60, 1770, 60, time.time())

    def close(self) -> None:
        pass


PROMPTS = [
    "redis why did we pick it",
    "cache invalidation story",
    "spike notes from february",
    "banana bread with walnuts",  # no_match: a random vector
    "warmstart and cache",
    "redis cluster eviction",
]


def make(tmp_path: Path, *, fail_after: int | None = None):
    vault = tmp_path / "vault"
    (vault / "sessions").mkdir(parents=True, exist_ok=True)
    # The fakes hold no SQL to copy facts from: batches answer through the memo here (the
    # resident copy is tested on real stores in tests/integration/test_session.py).
    # Dense: the fakes' graph holds no stored vectors for hybrid's words-only hits.
    settings = load_settings(vault, env={}).replace(
        service_resident_facts=0, query_retrieval="dense"
    )
    graph, emb, kodb = FakeGraph(fail_after=fail_after), FakeEmbedder(), FakeKodb()
    p = App(settings, kodb=kodb, graph=graph, embedder=emb).pipeline()  # type: ignore[arg-type]
    return p, graph, emb, kodb


def fresh_answers(tmp_path: Path, prompts: Sequence[str]) -> list[dict]:
    """What Pipeline.ask says for each prompt, on fresh fakes (timings dropped)."""
    p, *_ = make(tmp_path / "single")
    return [without_timings(to_dict(p.ask(t))) for t in prompts]


def without_timings(d: dict) -> dict:
    return {k: v for k, v in d.items() if k not in ("timings_ms", "id", "prompt")}


def read_packs(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "packs.jsonl").read_text("utf-8").splitlines()]


@pytest.mark.parametrize("search", ["exact", "index"])
@pytest.mark.parametrize("chunk", [1, 4, 256])
def test_packs_equal_single_answers_in_input_order(tmp_path: Path, search: str, chunk: int):
    p, graph, emb, _ = make(tmp_path)
    report = load_context(p, PROMPTS, tmp_path / "out", search=search, chunk_size=chunk)  # type: ignore[arg-type]
    packs = read_packs(tmp_path / "out")
    assert [pk["id"] for pk in packs] == [str(i) for i in range(1, len(PROMPTS) + 1)]
    assert [pk["prompt"] for pk in packs] == PROMPTS
    assert [without_timings(pk) for pk in packs] == fresh_answers(tmp_path, PROMPTS)
    labels = [pk["relevance"]["label"] for pk in packs]
    assert "no_match" in labels and "strong" in labels  # the fixture covers both
    assert report.search_path == search
    assert report.written == len(PROMPTS) and report.modes == {"semantic": len(PROMPTS)}
    if search == "exact":
        assert graph.searches == 0  # one matrix product instead of index queries
    assert emb.calls <= -(-len(PROMPTS) // chunk)  # one embed call per chunk at most


def test_memoised_kodb_needs_fewer_statements_than_single_queries(tmp_path: Path) -> None:
    p, _, _, kodb = make(tmp_path)
    load_context(p, PROMPTS * 5, tmp_path / "out", search="exact")
    batch_calls = kodb.calls
    single, _, _, single_kodb = make(tmp_path / "s")
    for text in PROMPTS * 5:
        single.ask(text)
    assert batch_calls < single_kodb.calls / 4


def test_a_chunk_reads_each_kind_of_kodb_row_in_one_statement(tmp_path: Path) -> None:
    p, _, _, kodb = make(tmp_path)
    sampled: list[list[str]] = []
    real = kodb.subject_summaries

    def spy(subject_norms: Iterable[str], *, sample_size: int, **more: Any) -> Any:
        if sample_size:
            sampled.append(sorted(subject_norms))
        return real(subject_norms, sample_size=sample_size, **more)

    kodb.subject_summaries = spy  # type: ignore[method-assign]
    report = load_context(p, PROMPTS * 3, tmp_path / "out", search="exact")
    # The registry, read once (the exact search's; the hits' rows come from it), the best
    # hits' files' subjects, title matches and the counts of every candidate: one statement
    # each for the chunk. Then each answer reads the facts it shows, of the top_k subjects
    # it keeps (its own evidence files pick them). And the shares of the notes holding a
    # period question's words ("spike notes from february": is "spike" a topic here?).
    assert 0 < len(sampled) <= len(PROMPTS) * 3
    assert all(len(kept) <= p.settings.query_top_k for kept in sampled)
    assert kodb.calls == 4 + len(sampled)
    assert report.kodb_statements == 5 + len(sampled)


def test_cached_kodb_returns_what_the_store_returns(tmp_path: Path) -> None:
    store = FakeKodb()
    cache = CachedKodb(store)
    for subjects in (["redis"], ["warm cache", "redis"], ["warmstart", "redis", "nope"]):
        assert cache.facts_for_subjects(subjects) == store.facts_for_subjects(subjects)
    for paths in (["sessions/s1.md"], ["wiki/redis.md", "sessions/s1.md"], ["x.md"]):
        assert cache.subjects_for_source_files(paths) == store.subjects_for_source_files(paths)
        assert cache.subjects_by_source_file(paths) == store.subjects_by_source_file(paths)
    terms = ["redis", "cache", "warm"]
    assert cache.search_subjects_many(terms) == store.search_subjects_many(terms)
    before = cache.statements
    cache.facts_for_subjects(["redis", "warm cache"])
    cache.search_subjects_many(["cache"])
    assert cache.statements == before  # all served from memory
    assert cache.notes() == store.notes()  # everything else is delegated
    paths = [*NOTES, "nowhere.md"]
    assert cache.note_languages(paths) == store.note_languages(paths)
    before = cache.statements
    assert cache.note_languages(paths[:2]) == store.note_languages(paths[:2])
    assert cache.note_languages(["nowhere.md"]) == {}
    assert cache.statements == before  # each note's language read once per batch


def test_exact_search_gives_the_cosines_of_the_graph_rescoring(tmp_path: Path) -> None:
    graph = FakeGraph()
    exact = ExactSearch.load(graph, FakeKodb())
    for word in ("redis", "cache", "banana", "warmstart"):
        q = FakeEmbedder.vector(word)
        want = graph.vector_search(q, 3)
        got = exact.top_k(q, exact.shortlist_scores(q[None, :])[0], 3)
        assert got is not None
        assert [(h.path, h.title, h.source_type) for h in got] == [
            (h.path, h.title, h.source_type) for h in want
        ]
        assert [h.cosine for h in got] == pytest.approx([h.cosine for h in want], abs=1e-12)


def test_graph_dying_midway_switches_the_rest_to_fallback_and_loses_nothing(
    tmp_path: Path,
) -> None:
    # index path, chunks of 2: ping + 2 searches per chunk; the 5th graph call fails.
    p, _, _, _ = make(tmp_path, fail_after=4)
    report = load_context(p, PROMPTS, tmp_path / "out", search="index", chunk_size=2)
    packs = read_packs(tmp_path / "out")
    assert [pk["id"] for pk in packs] == [str(i) for i in range(1, 7)]
    assert [pk["mode"] for pk in packs] == ["semantic"] * 2 + ["fallback"] * 4
    for pk in packs[2:]:
        assert pk["degraded_reason"].endswith("; answering from the notes' words")
        assert pk["relevance"]["label"] == "unscored"
    # a fallback pack is the fallback answer a single query gets when the graph is down
    down, *_ = make(tmp_path / "down", fail_after=0)
    assert [without_timings(pk) for pk in packs[2:]] == [
        without_timings(to_dict(down.ask(t))) for t in PROMPTS[2:]
    ]
    assert report.modes == {"fallback": 4, "semantic": 2}
    assert report.degraded_reasons and "connection refused" in report.degraded_reasons[0]


def test_graph_dying_inside_a_chunk_keeps_the_answers_before_it(tmp_path: Path) -> None:
    p, _, _, _ = make(tmp_path, fail_after=3)  # ping, 2 searches, then down
    load_context(p, PROMPTS, tmp_path / "out", search="index", chunk_size=256)
    assert [pk["mode"] for pk in read_packs(tmp_path / "out")] == ["semantic"] * 2 + [
        "fallback"
    ] * 4


def test_a_batch_with_the_graph_down_never_loads_the_model(tmp_path: Path) -> None:
    p, graph, emb, _ = make(tmp_path, fail_after=0)
    report = load_context(p, PROMPTS, tmp_path / "out", chunk_size=2)
    assert emb.calls == 0 and graph.searches == 0
    assert report.modes == {"fallback": len(PROMPTS)} and report.search_path == "none"


def test_bad_lines_are_reported_with_their_numbers_and_skipped_and_blank_ones_passed_over(
    tmp_path: Path,
) -> None:
    p, *_ = make(tmp_path)
    lines = [
        "redis why did we pick it",
        "",
        '{"id": "a", "prompt": "cache invalidation story"}',
        '{"id": "b", "prompt": ',
        '{"id": "c"}',
        '{"id": "a", "prompt": "spike notes"}',
        '{"id": ["x"], "prompt": "spike"}',
        b"\xff\xfe broken bytes",
        '{"id": 70, "prompt": "spike notes from february"}',
        "   ",  # an editor's last line
    ]
    seen: list[BadLine] = []
    report = load_context(p, lines, tmp_path / "out", on_bad_line=seen.append)
    assert [(b.line, re.split(r":| \(| at column", b.reason)[0]) for b in seen] == [
        (4, "bad JSON"),
        (5, "missing prompt"),
        (6, "duplicate id 'a'"),
        (7, "id must be a string or an integer"),
        (8, "not UTF-8 text"),
    ]
    assert report.bad_lines == tuple(seen)
    assert [pk["id"] for pk in read_packs(tmp_path / "out")] == ["1", "a", "70"]
    assert report.sessions == 3 and report.written == 3


def test_a_prompt_longer_than_the_service_takes_is_a_bad_line(tmp_path: Path) -> None:
    from pipeline.service.client import MAX_QUESTION_CHARS

    settings = load_settings(tmp_path, env={})
    long = "redis " * (MAX_QUESTION_CHARS // 6 + 1)
    lines = [long, json.dumps({"id": "j", "prompt": long}), "redis", "x" * MAX_QUESTION_CHARS]
    read = list(read_sessions(lines, settings))
    assert [(r.line, r.reason) for r in read if isinstance(r, BadLine)] == [
        (n, f"the prompt has {len(long.strip()):,} characters; at most 200,000 (as the "
         "service and MCP take)")
        for n in (1, 2)
    ]  # fmt: skip
    assert [r.line for r in read if isinstance(r, SessionPrompt)] == [3, 4]


def test_note_paths_become_prompts(tmp_path: Path) -> None:
    p, *_ = make(tmp_path)
    note = p.settings.vault / "sessions" / "s9.md"
    note.write_text("---\ntags: [x]\n---\n# Redis spike\n\nWe tried redis.\n", "utf-8")
    items = list(
        read_sessions(
            [
                "sessions/s9.md",
                '{"id": "n", "note": "sessions/s9.md"}',
                '{"id": "m", "note": "../outside.md"}',
                "sessions/missing.md",
                '{"id": "g", "note": "sessions/gone.md"}',
            ],
            p.settings,
        )
    )
    first, second, third, fourth, fifth = items
    assert isinstance(first, SessionPrompt) and first.id == "1"
    assert first.note == "sessions/s9.md" and "We tried redis." in first.prompt
    assert "tags:" not in first.prompt  # the note's embed text, without frontmatter
    assert isinstance(second, SessionPrompt) and second.prompt == first.prompt
    assert isinstance(third, BadLine) and "inside the vault" in third.reason
    # not an existing note: the line is a prompt like any other
    assert isinstance(fourth, SessionPrompt) and fourth.prompt == "sessions/missing.md"
    # a note asked for by name that is not there is said so
    assert isinstance(fifth, BadLine) and fifth.reason == "no note 'sessions/gone.md' in the vault"


def test_a_private_note_as_input_is_refused_unless_private_notes_are_included(
    tmp_path: Path,
) -> None:
    """Issue 35, item 2: a private note named on an input line (plain or JSON) would copy
    its whole text into the pack's prompt; it is a bad line instead, unless the caller
    includes private notes."""
    from pipeline.privacy import PrivateNotes

    vault = tmp_path / "vault"
    (vault / "private").mkdir(parents=True)
    (vault / "private" / "plan-a.md").write_text("# Plan A\n\nProject Nightjarquux.\n")
    (vault / "vault-ko.toml").write_text('[vault]\nprivate_globs = ["private/**"]\n')
    settings = load_settings(vault, env={})
    lines = ['{"id": "s4", "note": "private/plan-a.md"}', "private/plan-a.md"]

    hidden = list(read_sessions(lines, settings, PrivateNotes.from_settings(settings)))
    assert [type(i) for i in hidden] == [BadLine, BadLine]
    for bad in hidden:
        assert isinstance(bad, BadLine)
        assert "private/plan-a.md is private" in bad.reason
        assert "--include-private" in bad.reason
        assert "Nightjarquux" not in bad.reason

    included = list(read_sessions(lines, settings, PrivateNotes()))
    assert all(isinstance(i, SessionPrompt) and "Nightjarquux" in i.prompt for i in included)


def test_load_context_refuses_a_private_note_and_writes_no_private_text(tmp_path: Path) -> None:
    p, *_ = make(tmp_path)
    (p.settings.vault / "private").mkdir()
    (p.settings.vault / "private" / "plan-a.md").write_text("# Plan A\n\nNightjarquux.\n")
    settings = p.settings.replace(vault_private_globs=("private/**",))
    app = App(settings, kodb=p.app.kodb, graph=p.app.graph, embedder=p.app.embedder)
    out = tmp_path / "out"
    report = load_context(app.pipeline(), ['{"id": "s4", "note": "private/plan-a.md"}'], out)
    assert [b.line for b in report.bad_lines] == [1]
    packs = out / "packs.jsonl"
    assert not packs.exists() or "Nightjarquux" not in packs.read_text()


def test_resume_skips_committed_packs_and_redoes_torn_ones(tmp_path: Path) -> None:
    out = tmp_path / "out"
    p, *_ = make(tmp_path)
    load_context(p, PROMPTS[:3], out, chunk_size=2)
    committed = (out / "packs.jsonl").read_bytes()
    # a crash after writing a pack that was never committed, halfway through the next one
    with (out / "packs.jsonl").open("ab") as fh:
        fh.write(b'{"id":"4","prompt":"banana bread with walnuts"}\n{"id":"5","pro')
    p2, *_ = make(tmp_path / "again")  # a new process, as after a crash
    report = load_context(p2, PROMPTS, out, resume=True, chunk_size=2)
    assert report.skipped_done == 3 and report.written == 3
    packs = read_packs(out)
    assert (out / "packs.jsonl").read_bytes().startswith(committed)
    assert [pk["id"] for pk in packs] == [str(i) for i in range(1, 7)]
    assert [without_timings(pk) for pk in packs] == fresh_answers(tmp_path, PROMPTS)
    # nothing left to do: a third run writes nothing and keeps the file
    again = load_context(p2, PROMPTS, out, resume=True)
    assert again.written == 0 and again.skipped_done == 6
    assert len(read_packs(out)) == 6


def test_resume_refuses_packs_made_with_other_options(tmp_path: Path) -> None:
    p, *_ = make(tmp_path)
    load_context(p, PROMPTS, tmp_path / "out")
    with pytest.raises(ConfigError, match="other settings") as err:
        load_context(p, PROMPTS, tmp_path / "out", resume=True, options=QueryOptions(top_k=5))
    # Each changed option is named with its recorded and its new value.
    assert "top_k 20 (now 5)" in str(err.value)
    assert "retrieval 'dense' (now 'hybrid')" in str(err.value)


def test_without_resume_a_rerun_starts_over(tmp_path: Path) -> None:
    p, *_ = make(tmp_path)
    load_context(p, PROMPTS, tmp_path / "out")
    report = load_context(p, PROMPTS[:2], tmp_path / "out")
    assert report.skipped_done == 0
    assert [pk["id"] for pk in read_packs(tmp_path / "out")] == ["1", "2"]


def test_empty_input_writes_an_empty_packs_file(tmp_path: Path) -> None:
    p, _, emb, _ = make(tmp_path)
    report = load_context(p, [], tmp_path / "out")
    assert (tmp_path / "out" / "packs.jsonl").read_bytes() == b""
    assert report.written == 0 and report.sessions == 0 and report.bad_lines == ()
    assert emb.calls == 0


def test_markdown_packs_one_file_per_session_with_safe_names(tmp_path: Path) -> None:
    p, *_ = make(tmp_path)
    lines = [
        '{"id": "s1", "prompt": "redis why did we pick it"}',
        '{"id": "../../etc/passwd", "prompt": "banana bread with walnuts"}',
    ]
    report = load_context(p, lines, tmp_path / "out", fmt="md")
    files = sorted(f.name for f in (tmp_path / "out").glob("*.md"))
    assert files == sorted([safe_file_name("s1"), safe_file_name("../../etc/passwd")])
    assert all("/" not in f and not f.startswith(".") for f in files)
    redis = (tmp_path / "out" / "s1.md").read_text("utf-8")
    assert "**Redis**" in redis and "[wiki: wiki/redis.md" in redis
    assert "_semantic · strong" in redis
    nothing = (tmp_path / "out" / safe_file_name("../../etc/passwd")).read_text("utf-8")
    body = [ln for ln in nothing.splitlines()[1:] if ln]
    assert len(body) == 1 and body[0].startswith("_no_match: nothing in this vault")
    assert report.written == 2


def md_packs(out: Path) -> dict[str, str]:
    """File name -> the session id its heading names."""
    found = {}
    for path in out.glob("*.md"):
        heading = path.read_text("utf-8").splitlines()[0]
        found[path.name] = heading.removeprefix("## Context for ").split(":", 1)[0]
    return found


def test_markdown_packs_of_colliding_ids_are_both_kept_and_resume_rewrites_either(
    tmp_path: Path,
) -> None:
    p, *_ = make(tmp_path)
    out = tmp_path / "out"
    lines = [
        '{"id": "X", "prompt": "redis why did we pick it"}',
        '{"id": "x-c032adc1", "prompt": "cache warming"}',
    ]
    assert load_context(p, lines, out, fmt="md").written == 2
    assert sorted(md_packs(out).values()) == ["X", "x-c032adc1"]
    for name, session in md_packs(out).items():
        (out / name).unlink()
        report = load_context(p, lines, out, fmt="md", resume=True)
        assert (report.written, report.skipped_done) == (1, 1)
        assert sorted(md_packs(out).values()) == ["X", "x-c032adc1"], session


def test_markdown_sink_never_overwrites_another_sessions_pack_or_a_foreign_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pipeline.batch.packs as session_module

    p, *_ = make(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.md").write_text("my own notes\n", encoding="utf-8")
    # Force the improbable: two ids whose names collide (an 8-hex-digit digest clash).
    real = session_module.safe_file_name
    monkeypatch.setattr(
        session_module, "safe_file_name", lambda i: "same.md" if i in ("a", "b") else real(i)
    )
    lines = [
        '{"id": "a", "prompt": "redis why did we pick it"}',
        '{"id": "b", "prompt": "cache warming"}',
        '{"id": "notes", "prompt": "spike in the cache"}',
    ]
    assert load_context(p, lines, out, fmt="md").written == 3
    assert (out / "notes.md").read_text("utf-8") == "my own notes\n"
    packs = md_packs(out)
    assert sorted(v for k, v in packs.items() if k != "notes.md") == ["a", "b", "notes"]
    again = load_context(p, lines, out, fmt="md", resume=True)
    assert (again.written, again.skipped_done) == (0, 3)
    assert md_packs(out) == packs
    # A rerun without --resume rewrites each session's own files, no new ones.
    assert load_context(p, lines, out, fmt="md").written == 3
    assert md_packs(out) == packs


def test_markdown_shortens_a_long_note_prompt_in_the_heading(tmp_path: Path) -> None:
    p, *_ = make(tmp_path)
    from pipeline.batch.packs import Pack

    answer = p.ask("redis " + "words " * 200)
    head = pack_to_markdown(Pack("x", answer.query, answer)).splitlines()[0]
    assert len(head) < 260 and head.endswith("…")


@pytest.mark.parametrize("fmt", ["jsonl", "md"])
def test_packs_are_the_owner_s_alone_as_they_quote_the_prompts(tmp_path: Path, fmt: str) -> None:
    p, *_ = make(tmp_path)
    out = tmp_path / "out"
    (out).mkdir()
    if fmt == "jsonl":
        (out / "packs.jsonl").write_text("old\n")
        (out / "packs.jsonl").chmod(0o644)  # from a run before packs were kept private
    load_context(p, PROMPTS[:2], out, fmt=fmt)  # type: ignore[arg-type]
    packs = [f for f in out.iterdir() if not f.name.startswith(".")]
    assert packs and all(f.stat().st_mode & 0o777 == 0o600 for f in packs)


def test_an_out_folder_that_cannot_be_written_is_one_error_naming_it(tmp_path: Path) -> None:
    from pipeline.errors import InputError

    p, *_ = make(tmp_path)
    (tmp_path / "afile").write_text("x")
    with pytest.raises(InputError, match=r"afile/sub: cannot write the packs here: "):
        load_context(p, PROMPTS[:2], tmp_path / "afile" / "sub")


def test_the_search_path_is_chosen_for_the_whole_chunk_not_its_first_run(tmp_path: Path) -> None:
    """A chunk is searched in runs of equal depth (a question asking for a period is
    searched deeper); the first run alone, one question, would have chosen the index for
    the whole load-context run."""
    p, *_ = make(tmp_path)
    prompts = ["what did we do in March?", *PROMPTS * 6]  # 37: exact, by the auto rule
    report = load_context(p, prompts, tmp_path / "out", search="auto", chunk_size=64)
    assert report.search_path == "exact"
    assert [without_timings(pk) for pk in read_packs(tmp_path / "out")] == fresh_answers(
        tmp_path, prompts
    )
