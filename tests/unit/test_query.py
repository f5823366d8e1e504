"""The orchestrator with fake stores: the answer is about the question, silence, fallback,
presets, and one answer path for one question and a batch."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from pipeline.app import App
from pipeline.config import load_settings
from pipeline.errors import GraphQueryError, GraphUnavailable, KodbError
from pipeline.graph.cypher import CypherLoadError
from pipeline.kodb import text
from pipeline.kodb.decisions import recomputed
from pipeline.kodb.match import reference_search
from pipeline.model import (
    WORDS_ASKED,
    Calibration,
    Fact,
    Note,
    NoteStamp,
    Recency,
    SubjectSummary,
    UnsyncedEdits,
    normalize_text,
    summaries_from_facts,
)
from pipeline.query import QueryOptions
from pipeline.rank import score_of
from pipeline.succession import PREDICATES, Succession

MODEL = "sentence-transformers/all-MiniLM-L6-v2"


@dataclass(frozen=True)
class FakeHit:
    path: str
    title: str
    source_type: str
    cosine: float


class FakeGraph:
    def __init__(self, hits: list[FakeHit], down: bool = False) -> None:
        self.hits = hits
        self.down = down
        self.searches = 0
        #: Notes with a stored vector that no vector search reaches (beyond its depth).
        self.unreached: list[FakeHit] = []
        self.scored: list[str] = []  # the paths note_vector_sets was asked for

    def note_vector_sets(self, paths: Sequence[str]) -> dict[str, list[list[float]]]:
        """Each known note's stored vector: one at its hit's cosine to FakeEmbedder's
        question vector (the unit vector of four halves)."""
        self.scored += paths
        known = {h.path: h.cosine for h in [*self.hits, *self.unreached]}
        out = {}
        for path in paths:
            if path in known:
                c, s = known[path], (1 - known[path] ** 2) ** 0.5
                out[path] = [[(c + s * sign) / 2 for sign in (1, -1, 1, -1)]]
        return out

    def ping(self) -> None:
        if self.down:
            raise GraphUnavailable("connection refused")

    def vector_search(self, vector: np.ndarray, k: int) -> list[FakeHit]:
        self.searches += 1
        return self.hits[:k]

    def close(self) -> None:
        pass


class FakeEmbedder:
    model_id = MODEL
    dims = 4

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        return np.ones((len(texts), 4), dtype=np.float32) / 2


def note(path: str, title: str, summary: str | None = None) -> Note:
    stype = {"adr": "adr", "sessions": "session"}.get(path.split("/")[0], "wiki")
    return Note(path, title, stype, "h", 0.0, 1, title, summary)  # type: ignore[arg-type]


class FakeKodb:
    """The registry and the facts of a small vault, read the way the store reads them."""

    def __init__(self, notes: list[Note], facts: list[Fact], cal: Calibration | None) -> None:
        self.registry = {n.path: n for n in notes}
        # Every note states its own title about its own subject, as ingest extracts it.
        own = [
            Fact(n.subject or n.title, "title", n.title, 0.95, n.source_type, n.path) for n in notes
        ]
        self.facts = own + facts
        self.cal = cal

    def notes(self) -> dict[str, Note]:
        return dict(self.registry)

    def notes_at(self, paths: Iterable[str]) -> dict[str, Note]:
        return {p: self.registry[p] for p in paths if p in self.registry}

    def word_shares(self, terms: Sequence[str]) -> dict[str, float]:
        """The share of notes whose title or summary holds each word."""
        held = [set(text.words(f"{n.title} {n.summary or ''}")) for n in self.registry.values()]
        return {
            t: sum(bool(set(text.words(t)) & h) for h in held) / max(len(held), 1) for t in terms
        }

    def notes_dated(
        self, start: str | None, end: str, limit: int, source_type: str | None = None
    ) -> list[Note]:
        dated = [
            n
            for n in sorted(self.registry.values(), key=lambda n: n.path)
            if n.date is not None
            and (start or "") <= n.date <= end
            and source_type in (None, n.source_type)
        ]
        return sorted(dated, key=lambda n: n.date or "", reverse=True)[:limit]

    def note_stamps(self) -> dict[str, NoteStamp]:
        return {p: NoteStamp(n.mtime, n.bytes, n.content_hash) for p, n in self.registry.items()}

    def count_notes(self, source_type: str | None = None) -> int:
        return sum(1 for n in self.registry.values() if source_type in (None, n.source_type))

    def note_languages(self, paths: Iterable[str]) -> dict[str, str | None]:
        """Every note in English unless ``languages`` says otherwise."""
        langs = getattr(self, "languages", {})
        return {p: langs.get(p, "english") for p in paths if p in self.registry}

    def search_notes(
        self, terms: Sequence[str], limit: int, *, every: bool = False
    ) -> list[tuple[str, float]]:
        """A plain word search: 3 points a word in the title, 1 in the summary; with
        ``every``, of the notes holding every term."""
        wanted = set(text.query_words(terms))
        found = []
        for n in self.registry.values():
            held = set(text.words(f"{n.title} {n.summary or ''}"))
            if every and not all(set(text.query_words([t])) & held for t in terms):
                continue
            score = 3 * len(wanted & set(text.words(n.title)))
            score += len(wanted & set(text.words(n.summary or "")))
            if score:
                found.append((n.path, float(score)))
        return sorted(found, key=lambda ps: (-ps[1], ps[0]))[:limit]

    def subjects_by_source_file(self, paths: Iterable[str]) -> dict[str, set[str]]:
        return {p: {f.subject_norm for f in self.facts if f.source_file == p} for p in paths}

    def search_subjects_many(self, terms: Sequence[str]) -> dict[str, list[str]]:
        norms = {f.subject_norm for f in self.facts}
        return {t: reference_search(t, norms) for t in terms}

    def facts_for_subjects(self, subject_norms: Iterable[str]) -> list[Fact]:
        wanted = set(subject_norms)
        return [f for f in self.facts if f.subject_norm in wanted]

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
        return recomputed(self.decision_facts(), self.registry)

    def latest_calibration(self, embedder: str | None = None, dims: int | None = None):
        return self.cal

    def close(self) -> None:
        pass


def F(
    subject: str, file: str, pred: str = "mentioned_in", conf: float = 0.7, obj: str = ""
) -> Fact:
    stype = {"adr": "adr", "sessions": "session"}.get(file.split("/")[0], "wiki")
    return Fact(subject, pred, obj or file, conf, stype, file)  # type: ignore[arg-type]


NOTES = [
    note("adr/0007-use-redis.md", "0007 Use Redis as the warm cache", "We cache previews."),
    note("adr/0002-use-postgresql.md", "0002 Use PostgreSQL"),
    note("wiki/redis.md", "Redis", "An in-memory store."),
    note("wiki/warm-cache.md", "Warm cache"),
    note("wiki/postgresql.md", "PostgreSQL"),
    note("sessions/s1.md", "2026-02-03 Warm cache spike"),
    note("sessions/s2.md", "2026-02-12 Warmstart scripts"),
]
# PostgreSQL is the hub: every note links to it, so it has the most corroboration.
LINKS = [
    F("PostgreSQL", p)
    for p in ("adr/0007-use-redis.md", "wiki/redis.md", "wiki/warm-cache.md", "sessions/s1.md")
] + [
    F("PostgreSQL", "adr/0002-use-postgresql.md", "decided_in", 0.85, "0002 Use PostgreSQL"),
    F("Redis", "adr/0007-use-redis.md", "decided_in", 0.85, "0007 Use Redis as the warm cache"),
    F("Redis", "adr/0002-use-postgresql.md", "decided_in", 0.85, "0002 Use PostgreSQL"),
    F("Redis", "sessions/s1.md"),
    F("Warm cache", "adr/0007-use-redis.md"),
    F("Warm cache", "sessions/s1.md"),
    F("Redis", "wiki/redis.md", "alias", 0.95, "redis-server"),
]
CAL = Calibration(MODEL, 4, 2, 0.30, 0.10, 0.2, 60, 1770, 60, time.time())
HITS = [
    FakeHit("adr/0007-use-redis.md", "0007 Use Redis as the warm cache", "adr", 0.62),
    FakeHit("wiki/redis.md", "Redis", "wiki", 0.61),
    FakeHit("wiki/warm-cache.md", "Warm cache", "wiki", 0.55),
    FakeHit("sessions/s2.md", "2026-02-12 Warmstart scripts", "session", 0.20),
]


def make(tmp_path: Path, hits: list[FakeHit], *, down=False, cal=CAL, notes=NOTES, facts=LINKS):
    # The ranking rules measured here are dense retrieval's (the fakes' graph holds no
    # stored vectors); hybrid has its own tests below and the integration suite.
    settings = load_settings(tmp_path, env={}).replace(query_retrieval="dense")
    graph, emb, kodb = FakeGraph(hits, down), FakeEmbedder(), FakeKodb(notes, facts, cal)
    return App(settings, kodb=kodb, graph=graph, embedder=emb).pipeline(), graph, emb  # type: ignore[arg-type]


def names(answer) -> list[str]:
    return [s.subject for s in answer.subjects]


def test_the_subjects_are_what_the_hits_are_about_not_the_hub_they_all_link(
    tmp_path: Path,
) -> None:
    p, _graph, emb = make(tmp_path, HITS)
    a = p.ask("why did we choose redis for the warm cache?")
    assert a.mode == "semantic"
    assert a.relevance.label == "strong"  # z = (0.62 - 0.30) / 0.10 = 3.2
    top = names(a)[:3]
    assert "0007 Use Redis as the warm cache" in top and "Redis" in top
    # PostgreSQL, linked from every hit and the best corroborated, follows what they are about.
    assert names(a).index("PostgreSQL") > names(a).index("Warm cache")
    assert a.subjects[names(a).index("PostgreSQL")].evidence == "mentioned"
    assert "2026-02-12 Warmstart scripts" not in names(a)  # below the floor (0.30)
    redis = a.subjects[names(a).index("Redis")]
    assert redis.evidence == "own" and redis.band == "strong"
    assert redis.best_cosine == pytest.approx(0.61)  # its own note's cosine
    assert redis.source_count == 4  # ranked on all its facts, not only the hit files
    assert redis.score == score_of(redis.source_count, redis.per_type, redis.total_facts)
    assert emb.calls == 1


def test_of_two_equally_relevant_subjects_the_better_corroborated_comes_first(
    tmp_path: Path,
) -> None:
    hits = [
        FakeHit("wiki/warm-cache.md", "Warm cache", "wiki", 0.60),
        FakeHit("wiki/redis.md", "Redis", "wiki", 0.60),
    ]
    p, _, _ = make(tmp_path, hits)
    a = p.ask("cache store")
    redis, warm = a.subjects[0], a.subjects[1]
    assert (redis.subject, warm.subject) == ("Redis", "Warm cache")
    assert redis.score > warm.score  # the seed's rule decides among equals


def test_a_clearly_less_relevant_subject_follows_however_well_corroborated(
    tmp_path: Path,
) -> None:
    hits = [
        FakeHit("wiki/warm-cache.md", "Warm cache", "wiki", 0.60),
        FakeHit("wiki/redis.md", "Redis", "wiki", 0.45),  # 1.5 σ below the best hit
    ]
    p, _, _ = make(tmp_path, hits)
    a = p.ask("cache")
    warm, redis = (a.subjects[names(a).index(n)] for n in ("Warm cache", "Redis"))
    assert "Warm cache" in names(a)[:3]
    assert names(a).index("Redis") > names(a).index("Warm cache")
    assert warm.score < redis.score


def test_without_links_equal_scores_go_to_the_better_cosine_not_the_alphabet(
    tmp_path: Path,
) -> None:
    notes = [note("wiki/a.md", "Alpha"), note("wiki/z.md", "Zulu")]
    hits = [
        FakeHit("wiki/z.md", "Zulu", "wiki", 0.5001),
        FakeHit("wiki/a.md", "Alpha", "wiki", 0.5000),
    ]
    p, _, _ = make(tmp_path, hits, notes=notes, facts=[])
    assert names(p.ask("which one")) == ["Zulu", "Alpha"]


def test_a_subject_the_hits_only_mention_needs_two_of_the_best_hits(tmp_path: Path) -> None:
    once = [FakeHit("wiki/redis.md", "Redis", "wiki", 0.6)]
    p, _, _ = make(tmp_path, once)
    assert "PostgreSQL" not in names(p.ask("redis"))  # one link is what every hub gets
    twice = [*once, FakeHit("wiki/warm-cache.md", "Warm cache", "wiki", 0.58)]
    p, _, _ = make(tmp_path, twice)
    a = p.ask("redis")
    pg = a.subjects[names(a).index("PostgreSQL")]
    assert pg.evidence == "mentioned"
    assert pg.best_cosine == pytest.approx(0.58)  # the second mentioning hit's cosine


def test_facts_from_the_hit_notes_come_first(tmp_path: Path) -> None:
    p, _, _ = make(tmp_path, HITS)
    redis = next(s for s in p.ask("why redis for the warm cache?").subjects if s.subject == "Redis")
    shown = [(f.predicate, f.object) for f in redis.facts]
    assert ("decided_in", "0007 Use Redis as the warm cache") in shown
    assert ("decided_in", "0002 Use PostgreSQL") not in shown[:2]  # not a hit this time
    assert all(f.source_file in {h.path for h in HITS} for f in redis.facts[:2])
    assert not any(f.predicate == "title" for f in redis.facts)  # it only restates the name


def test_hits_carry_their_notes_summaries(tmp_path: Path) -> None:
    p, _, _ = make(tmp_path, HITS)
    a = p.ask("redis")
    assert a.hits[0].excerpt == "We cache previews."
    assert a.hits[2].excerpt is None


def test_no_match_is_silence(tmp_path: Path) -> None:
    p, _, _ = make(tmp_path, [FakeHit("wiki/redis.md", "Redis", "wiki", 0.25)])
    a = p.ask("recipe for banana bread with walnuts")
    assert a.relevance.label == "no_match"
    assert a.subjects == ()
    assert a.mode == "semantic"


def test_no_match_points_at_the_few_notes_holding_every_word_of_the_question(
    tmp_path: Path,
) -> None:
    p, _, _ = make(tmp_path, [FakeHit("wiki/redis.md", "Redis", "wiki", 0.25)])
    a = p.ask("which warmstart scripts?")  # the model placed it nowhere
    assert a.relevance.label == "no_match" and a.subjects == ()
    assert [h.path for h in a.word_matches] == ["sessions/s2.md"]
    assert a.word_matches[0].bm25 is not None and a.word_matches[0].cosine is None


@pytest.mark.parametrize(
    "question",
    [
        "which warmstart scripts in March 2026?",  # the period is no word of the note
        "what did we decide about warmstart scripts last week?",  # nor "decide", "last week"
    ],
)
def test_the_word_pointer_leaves_out_the_period_and_words_asking_about_notes(
    tmp_path: Path, question: str
) -> None:
    p, _, _ = make(tmp_path, [FakeHit("wiki/redis.md", "Redis", "wiki", 0.25)])
    a = p.ask(question, QueryOptions(today="2026-06-15"))
    assert a.relevance.label == "no_match"
    assert [h.path for h in a.word_matches] == ["sessions/s2.md"]
    episodic = QueryOptions(today="2026-06-15", preset="episodic", session_notes_only=True)
    assert p.ask(question, episodic).word_matches == ()  # recall of session notes alone


def test_no_match_points_at_nothing_when_no_note_holds_every_word(tmp_path: Path) -> None:
    p, _, _ = make(tmp_path, [FakeHit("wiki/redis.md", "Redis", "wiki", 0.25)])
    # "redis" is in notes and "banana" is in none: not every word, so no pointer.
    assert p.ask("redis banana").word_matches == ()


def test_no_match_counts_the_notes_holding_the_words_and_names_the_best_three(
    tmp_path: Path,
) -> None:
    many = [note(f"wiki/w{i}.md", f"Warm note {i}") for i in range(5)]
    p, _, _ = make(tmp_path, [FakeHit("wiki/w0.md", "Warm note 0", "wiki", 0.25)], notes=many)
    a = p.ask("warm")
    # Five notes hold the word: "nothing in this vault" would be false; three are named.
    assert a.relevance.label == "no_match"
    assert len(a.word_matches) == 3 and a.word_match_count == 5
    few = many[:3]
    p, _, _ = make(tmp_path, [FakeHit("wiki/w0.md", "Warm note 0", "wiki", 0.25)], notes=few)
    a = p.ask("warm")
    assert len(a.word_matches) == 3 and a.word_match_count == 3


def test_no_match_counts_past_the_pool_as_more_than_it(tmp_path: Path) -> None:
    from pipeline.model import WORD_POOL

    many = [note(f"wiki/w{i}.md", f"Warm note {i}") for i in range(WORD_POOL + 5)]
    p, _, _ = make(tmp_path, [FakeHit("wiki/w0.md", "Warm note 0", "wiki", 0.25)], notes=many)
    a = p.ask("warm")
    assert len(a.word_matches) == 3 and a.word_match_count == WORD_POOL + 1


def test_a_weak_answer_points_at_a_note_holding_the_words_below_the_notes_a_person_reads(
    tmp_path: Path,
) -> None:
    # Text and markdown show the first five hits: the sixth is no more seen than a miss.
    others = [p.path for p in NOTES if p.path != "sessions/s2.md"]
    hits = [FakeHit(p, p, "wiki", 0.33 - i / 100) for i, p in enumerate(others)]
    hits.append(FakeHit("sessions/s2.md", "2026-02-12 Warmstart scripts", "session", 0.25))
    p, _, _ = make(tmp_path, hits)
    a = p.ask("which warmstart scripts?")
    assert a.relevance.label == "weak" and [h.path for h in a.hits][6] == "sessions/s2.md"
    assert [h.path for h in a.word_matches] == ["sessions/s2.md"]


def test_a_weak_answer_points_at_nothing_when_too_many_notes_hold_the_words(
    tmp_path: Path,
) -> None:
    many = [note(f"wiki/w{i}.md", f"Warm note {i}") for i in range(5)]
    p, _, _ = make(tmp_path, [FakeHit("wiki/w0.md", "Warm note 0", "wiki", 0.33)], notes=many)
    a = p.ask("warm")
    assert a.relevance.label == "weak"
    assert a.word_matches == () and a.word_match_count is None  # it picks nothing out


def test_a_code_points_at_the_notes_holding_it_as_written_not_its_parts_apart(
    tmp_path: Path,
) -> None:
    # Five notes hold "x" and "15"; two of them write the code itself.
    texts = {
        "wiki/panel.md": "# Panel X-15 flutter\n\nTests on the X-15 stabilizer.\n",
        "wiki/heated.md": "# Heated x 15 panels\n\nAs on the x15 airplane.\n",
        "wiki/tunnel.md": "# Tunnel x 15 run\n\nIn the 11 x 15 in. tunnel.\n",
        "wiki/grid.md": "# Grid x 15\n\nx = 15 at the wall.\n",
        "wiki/max.md": "# Max x 15\n\nthe x-150 rig.\n",
    }
    for rel, body in texts.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(body)
    notes = [note(rel, body.splitlines()[0][2:]) for rel, body in texts.items()]
    p, _, _ = make(tmp_path, [FakeHit("wiki/grid.md", "Grid x 15", "wiki", 0.25)], notes=notes)
    a = p.ask("X-15")
    assert a.relevance.label == "no_match"
    assert sorted(h.path for h in a.word_matches) == ["wiki/heated.md", "wiki/panel.md"]


def test_a_weak_answer_points_at_the_notes_holding_every_word_that_it_does_not_show(
    tmp_path: Path,
) -> None:
    p, _, _ = make(tmp_path, [FakeHit("wiki/redis.md", "Redis", "wiki", 0.33)])
    a = p.ask("which warmstart scripts?")
    assert a.relevance.label == "weak"
    assert [h.path for h in a.word_matches] == ["sessions/s2.md"]
    shown = [FakeHit("sessions/s2.md", "2026-02-12 Warmstart scripts", "session", 0.33)]
    p, _, _ = make(tmp_path, shown)
    a = p.ask("which warmstart scripts?")
    assert a.relevance.label == "weak" and a.word_matches == ()  # it is among the notes


def test_a_relevant_answer_and_the_hook_get_no_word_pointer(tmp_path: Path) -> None:
    p, _, _ = make(tmp_path, HITS)
    assert p.ask("redis warm cache").word_matches == ()  # strong: its notes are shown
    p, _, _ = make(tmp_path, [FakeHit("wiki/redis.md", "Redis", "wiki", 0.25)])
    opts = QueryOptions(word_matches=False)
    assert p.ask("which warmstart scripts?", opts).word_matches == ()


@pytest.mark.parametrize("question", ["%", "és a az hogy nem is", "🍌🍞", "is it a ...", "_"])
@pytest.mark.parametrize("down", [False, True])
def test_a_question_without_content_words_is_no_match_in_both_modes(
    tmp_path: Path, question: str, down: bool
) -> None:
    p, graph, emb = make(tmp_path, HITS, down=down)
    a = p.ask(question)
    assert a.relevance.label == "no_match"
    assert a.subjects == () and a.hits == ()
    assert a.mode == ("fallback" if down else "semantic")
    assert emb.calls == 0 and graph.searches == 0


@pytest.mark.parametrize("question", ["CI", "S3", "Go", "ő"])
def test_short_content_words_still_count(tmp_path: Path, question: str) -> None:
    p, _, _ = make(tmp_path, HITS)
    assert p.ask(question).relevance.label != "no_match" or question == "ő"


@pytest.mark.parametrize("down", [False, True], ids=["semantic", "degraded"])
def test_a_question_made_of_a_notes_text_is_answered_without_that_note(
    tmp_path: Path, down: bool
) -> None:
    # load-context's note lines: a note is its own nearest note (cosine 1, by words too).
    p, _, _ = make(tmp_path, HITS, down=down)
    question = "redis warm cache"
    alone = p.ask_many([question])[0]
    assert "wiki/redis.md" in [h.path for h in alone.hits]
    (left,) = p.ask_many([question], sources=["wiki/redis.md"])
    assert "wiki/redis.md" not in [h.path for h in left.hits] and left.hits
    assert left.mode == alone.mode == ("fallback" if down else "semantic")


def test_fallback_when_graph_down_never_loads_the_model(tmp_path: Path) -> None:
    p, graph, emb = make(tmp_path, HITS, down=True)
    (tmp_path / ".vault-ko").mkdir(exist_ok=True)  # a synced vault's state dir
    a = p.ask("what about the warm cache?")
    assert a.mode == "fallback"
    assert (a.degraded_reason or "").endswith("; answering from the notes' words")
    assert a.relevance.label == "unscored"
    # The best word score (warm, cache in the title, cache in the summary) leads; the
    # wiki note of the same words follows in the next tier.
    assert names(a)[:2] == ["0007 Use Redis as the warm cache", "Warm cache"]
    assert "2026-02-12 Warmstart scripts" not in names(a)  # "warm" is not "warmstart"
    assert all(s.band is None and s.best_cosine is None for s in a.subjects)
    # The notes come from the full-text index, with a word score and no cosine.
    assert a.hits[0].path == "adr/0007-use-redis.md"  # warm, cache in the title; cache after
    assert "wiki/warm-cache.md" in [h.path for h in a.hits]
    assert a.hits[0].cosine is None and a.hits[0].bm25 == 7.0
    assert emb.calls == 0 and graph.searches == 0
    assert (tmp_path / ".vault-ko" / "fallback.log").read_text().count("\n") == 1
    asked = p.ask(
        "what about the warm cache?", QueryOptions.from_settings(p.settings, semantic=False)
    )
    assert asked.mode == "fallback" and asked.degraded_reason == WORDS_ASKED
    # A word search the caller asked for is no degraded answer for the monitor to count.
    assert (tmp_path / ".vault-ko" / "fallback.log").read_text().count("\n") == 1


@pytest.mark.parametrize(
    "error",
    [
        CypherLoadError("missing Cypher file pipeline/cypher_files/neo4j/ping.cypher"),
        GraphQueryError("the graph at bolt://x runs Memgraph 2.21.1; vault-ko needs 3.0"),
    ],
    ids=["missing-cypher", "query-error"],
)
def test_a_graph_error_that_is_not_an_outage_still_answers_in_fallback(
    tmp_path: Path, error: GraphQueryError
) -> None:
    p, graph, emb = make(tmp_path, HITS)

    def broken_ping() -> None:
        raise error

    graph.ping = broken_ping  # type: ignore[method-assign]
    a = p.ask("what about the warm cache?")
    assert a.mode == "fallback"
    assert a.degraded_reason == f"{error}; answering from the notes' words"
    assert "Warm cache" in names(a)[:3]
    assert emb.calls == 0


def test_a_graph_error_after_the_embedding_still_answers_in_fallback(tmp_path: Path) -> None:
    p, graph, _emb = make(tmp_path, HITS)

    def refuse(vector: np.ndarray, k: int) -> list[FakeHit]:
        raise GraphQueryError("the query vector has 4 dimensions but the index has 384")

    graph.vector_search = refuse  # type: ignore[method-assign]
    a = p.ask("what about the warm cache?")
    assert a.mode == "fallback" and "has 384" in (a.degraded_reason or "")
    assert a.relevance.label == "unscored"


def test_fallback_orders_by_how_many_question_words_match_then_corroboration(
    tmp_path: Path,
) -> None:
    p, _, _ = make(tmp_path, HITS, down=True)
    a = p.ask("warm cache redis")
    # "0007 Use Redis as the warm cache" matches all three words, though less corroborated.
    assert names(a)[0] == "0007 Use Redis as the warm cache"
    assert names(a)[1:3] == ["Warm cache", "2026-02-03 Warm cache spike"]


def test_no_semantic_flag_answers_by_words(tmp_path: Path) -> None:
    p, _graph, emb = make(tmp_path, HITS)
    a = p.ask("warmstart", QueryOptions(semantic=False))
    assert a.mode == "fallback"
    assert names(a) == ["2026-02-12 Warmstart scripts"]
    assert emb.calls == 0


def test_uncalibrated_unknown_model_warns_and_never_silences(tmp_path: Path) -> None:
    p, _, emb = make(tmp_path, [FakeHit("wiki/redis.md", "Redis", "wiki", 0.05)], cal=None)
    emb.model_id = "someone/unknown-model"
    a = p.ask("redis, anything")
    assert a.relevance.label == "unscored"
    assert a.relevance.calibration == "none"
    assert "no_match is disabled" in (a.relevance.warning or "")
    assert a.subjects  # not silenced
    assert all(s.band is None for s in a.subjects)


def test_untrusted_calibration_uses_embedder_defaults(tmp_path: Path) -> None:
    small = Calibration(MODEL, 4, 2, 0.05, 0.10, 0.2, 12, 66, 12, time.time())
    p, _, _ = make(tmp_path, [FakeHit("wiki/redis.md", "Redis", "wiki", 0.30)], cal=small)
    a = p.ask("redis")
    assert a.relevance.calibration == "embedder-default"
    assert a.relevance.floor_cosine == pytest.approx(0.42)
    assert a.relevance.label == "no_match"


@pytest.mark.parametrize(
    ("preset", "check"),
    [
        ("routing", lambda a: len(a.hits) == 3 and a.subjects == ()),
        ("episodic", lambda a: [h.source_type for h in a.hits] == ["session"]),
        ("crystallize", lambda a: all(s.crystal_ready for s in a.subjects)),
        ("wiki-gap", lambda a: "2026-02-12 Warmstart scripts" in names(a)),
    ],
)
def test_presets(tmp_path: Path, preset: str, check) -> None:
    hits = [*HITS[:3], FakeHit("sessions/s1.md", "2026-02-03 Warm cache spike", "session", 0.5)]
    p, _, _ = make(tmp_path, hits)
    opts = QueryOptions.from_settings(p.settings, preset=preset)
    assert check(p.ask("redis warm cache warmstart", opts))


def test_episodic_without_session_notes_says_why(tmp_path: Path) -> None:
    opts = QueryOptions(hits=3, session_notes_only=True)
    p, _, _ = make(tmp_path, HITS[:3], notes=[n for n in NOTES if n.source_type != "session"])
    a = p.ask("redis", opts)
    assert a.hits == () and a.subjects == ()
    assert a.notice == "no session notes in this vault"
    assert a.relevance.label == "strong"  # the question is relevant; the preset found none
    p, _, _ = make(tmp_path, HITS[:3])
    assert "no session note among the 3 notes" in (p.ask("redis", opts).notice or "")


def test_crystallize_without_crystal_ready_subjects_says_why(tmp_path: Path) -> None:
    opts = QueryOptions(top_k=5, crystal_only=True)
    hits = [FakeHit("sessions/s2.md", "2026-02-12 Warmstart scripts", "session", 0.6)]
    p, _, _ = make(tmp_path, hits)
    a = p.ask("warmstart", opts)
    assert a.subjects == ()
    assert a.notice == "no crystal-ready subject among the relevant ones"


def test_ask_many_answers_each_question_as_ask_does(tmp_path: Path) -> None:
    questions = ["why redis?", "%", "warm cache", "banana bread"]
    p, _, _ = make(tmp_path, HITS)
    single = [p.ask(q) for q in questions]
    batch = p.ask_many(questions)
    strip = [(a.query, a.mode, a.relevance, a.hits, a.subjects) for a in single]
    assert [(a.query, a.mode, a.relevance, a.hits, a.subjects) for a in batch] == strip
    assert all("total_ms" in a.timings_ms for a in batch)


def test_ask_many_answers_the_rest_in_fallback_when_the_graph_dies(tmp_path: Path) -> None:
    p, graph, _ = make(tmp_path, HITS)

    def dying_search(vectors, k):
        graph.down = True
        raise GraphUnavailable("connection reset")

    answers = p.ask_many(["redis", "warm cache"], search=dying_search)
    assert [a.mode for a in answers] == ["fallback", "fallback"]
    assert all("connection reset" in (a.degraded_reason or "") for a in answers)


def test_hybrid_answers_the_questions_searched_before_the_graph_died_fused(
    tmp_path: Path,
) -> None:
    """The first question's dense hits (searched 100 deep) are fused and cut to the hits
    asked for before it is answered; the one the graph died on is answered degraded."""
    from dataclasses import replace

    from pipeline.model import Hit

    p, graph, _ = make(tmp_path, HITS)
    opts = replace(QueryOptions.from_settings(p.settings), retrieval="hybrid", hits=2)
    graph.note_vector_sets = lambda paths: {}  # type: ignore[attr-defined]

    def search_then_die(vectors, k):
        assert k >= 100  # hybrid fuses 100 deep
        yield [Hit(h.path, h.title, h.source_type, h.cosine) for h in HITS][:k]
        graph.down = True
        raise GraphUnavailable("connection reset")

    first, second = p.ask_many(["redis warm cache", "kafka"], opts, search=search_then_die)
    assert first.mode == "semantic" and len(first.hits) == 2
    assert all(h.cosine is not None for h in first.hits)
    assert any(h.bm25 is not None for h in first.hits)  # fused: the words' scores are in
    assert second.mode == "fallback" and "connection reset" in (second.degraded_reason or "")


class DialectGraph(FakeGraph):
    """Serves candidates the way one backend reports them, through the real re-scoring."""

    def __init__(self, dialect: str, with_embeddings: bool) -> None:
        super().__init__([])
        self.dialect = dialect
        self.with_embeddings = with_embeddings

    def vector_search(self, vector: np.ndarray, k: int) -> list:
        from pipeline.graph.backends import score_scale
        from pipeline.graph.records import Candidate
        from pipeline.graph.scoring import exact_rescore

        q = np.asarray(vector, dtype=np.float64)
        q = q / np.linalg.norm(q)
        basis = np.linalg.svd(q[None, :])[2]  # q and vectors orthogonal to it
        cands = []
        for i, (path, cos) in enumerate(
            [("adr/0007-use-redis.md", 0.62), ("wiki/redis.md", 0.41), ("sessions/s2.md", -0.12)]
        ):
            emb = cos * q + np.sqrt(1 - cos**2) * basis[i + 1]
            cands.append(
                Candidate(
                    path,
                    path,
                    path.split("/")[0].rstrip("s"),
                    tuple(emb) if self.with_embeddings else None,
                    score_scale(self.dialect).from_cosine(cos),
                )
            )
        return exact_rescore(q, cands, k, score_scale(self.dialect))


@pytest.mark.parametrize("with_embeddings", [True, False])
def test_labels_identical_whichever_backend_score_scale(
    tmp_path: Path, with_embeddings: bool
) -> None:
    answers = {}
    for dialect in ("memgraph", "neo4j", "arcadedb"):
        settings = load_settings(tmp_path, env={}).replace(query_retrieval="dense")
        graph = DialectGraph(dialect, with_embeddings)
        kodb = FakeKodb(NOTES, LINKS, CAL)
        p = App(settings, kodb=kodb, graph=graph, embedder=FakeEmbedder()).pipeline()  # type: ignore[arg-type]
        a = p.ask("redis warm cache")
        answers[dialect] = (
            a.relevance.label,
            round(a.relevance.top_cosine or 0, 9),
            [(h.path, round(h.cosine, 9)) for h in a.hits],
            names(a),
        )
    assert answers["memgraph"] == answers["neo4j"] == answers["arcadedb"]
    assert answers["neo4j"][0] == "strong"
    assert answers["neo4j"][1] == pytest.approx(0.62)
    assert normalize_text(answers["neo4j"][3][0]) == "0007 use redis as the warm cache"


def test_a_graph_gone_while_the_model_loads_answers_in_fallback(tmp_path: Path) -> None:
    p, _graph, emb = make(tmp_path, HITS)

    def load_then_find_the_graph_gone(texts: Sequence[str]) -> np.ndarray:
        raise GraphUnavailable("connection refused (checked before loading the model)")

    emb.embed = load_then_find_the_graph_gone  # type: ignore[method-assign]
    a = p.ask("what about the warm cache?")
    assert a.mode == "fallback" and "checked before loading" in (a.degraded_reason or "")


def test_subject_names_are_searched_by_word_only_while_the_hits_leave_room(
    tmp_path: Path,
) -> None:
    """Word-matched subjects follow every subject a hit is about, so with top_k already
    filled by those they cannot be shown and are not looked for; the answer is the same."""
    p, _, _ = make(tmp_path, HITS, down=True)
    kodb = p.app.kodb
    searched: list[list[str]] = []
    real = kodb.search_subjects_many

    def counting(terms: Sequence[str]) -> dict[str, list[str]]:
        searched.append(list(terms))
        return real(terms)

    kodb.search_subjects_many = counting  # type: ignore[method-assign]
    question = "warm cache redis"
    full = p.ask(question, QueryOptions(semantic=False))
    assert ["warm", "cache", "redis"] in searched  # room left: the words were searched
    n_hit_based = sum(1 for s in full.subjects if s.evidence != "words")
    assert n_hit_based >= 2
    searched.clear()
    cut = p.ask(question, QueryOptions(semantic=False, top_k=n_hit_based))
    assert ["warm", "cache", "redis"] not in searched
    assert cut.subjects == full.subjects[:n_hit_based]


@pytest.mark.parametrize("name", ["top_k", "hits", "facts_per_subject"])
def test_counts_past_the_bound_are_one_config_error(tmp_path: Path, name: str) -> None:
    """Issue 35, item 10: 2**63 reached SQLite as an OverflowError traceback."""
    from pipeline.errors import ConfigError
    from pipeline.query import MAX_COUNT, QueryOptions

    settings = load_settings(tmp_path, env={})
    with pytest.raises(ConfigError, match=f"at most {MAX_COUNT}"):
        QueryOptions.from_settings(settings, **{name: 2**63})
    assert getattr(QueryOptions.from_settings(settings, **{name: MAX_COUNT}), name) == MAX_COUNT


def test_hybrid_fuses_deeper_than_the_hits_it_keeps(tmp_path: Path) -> None:
    """A note the words rank first and the vectors eleventh, a hair below the first, keeps
    both votes though only three hits are asked for. Fused over the first three of each
    ranking, the vectors would not have scored it, and it would come third."""
    from dataclasses import replace

    notes = [note(f"wiki/d{i:02d}.md", f"Topic {i}") for i in range(12)]
    notes[10] = note("wiki/d10.md", "Okapi grazing")
    cosines = [0.600 - i * 0.001 for i in range(11)] + [0.30]
    hits = [FakeHit(n.path, n.title, "wiki", c) for n, c in zip(notes, cosines, strict=True)]
    p, _graph, _emb = make(tmp_path, hits, notes=notes, facts=[])
    opts = replace(QueryOptions.from_settings(p.settings), retrieval="hybrid", hits=3)
    a = p.ask("where is okapi grazing?", opts)
    assert a.mode == "semantic"
    assert [h.path for h in a.hits] == ["wiki/d10.md", "wiki/d00.md", "wiki/d01.md"]
    assert a.hits[0].cosine == pytest.approx(0.590)  # its own cosine, shown as found


def _hybrid(tmp_path: Path, hits: list[FakeHit], notes: list[Note], languages=None):
    settings = load_settings(tmp_path, env={}).replace(query_retrieval="hybrid")
    kodb = FakeKodb(notes, [], CAL)
    kodb.languages = languages or {}  # type: ignore[attr-defined]
    app = App(settings, kodb=kodb, graph=FakeGraph(hits, False), embedder=FakeEmbedder())  # type: ignore[arg-type]
    return app.pipeline()


#: A Hungarian note whose English alias holds a question's words, and an English one.
HAVI_NOTES = [
    note("wiki/cache.md", "Cache rules", "How we cache previews."),
    note("adr/0025-havi.md", "0025 Havi függőségfrissítés", "monthly dependency update day"),
]
HAVI_HITS = [
    FakeHit("wiki/cache.md", "Cache rules", "wiki", 0.62),
    FakeHit("adr/0025-havi.md", "0025 Havi függőségfrissítés", "adr", 0.05),
]


def test_hybrid_answers_with_a_note_the_model_cannot_read_when_its_words_match(
    tmp_path: Path,
) -> None:
    """A Hungarian note asked about in English: MiniLM's cosine of it says little (here
    under the floor), its English alias matches. Read by its cosine, it would be last and
    make no subject; judged by its words, it leads and answers."""
    notes, hits = HAVI_NOTES, HAVI_HITS
    question = "when is the monthly dependency update day?"
    read = _hybrid(tmp_path, hits, notes).ask(question)
    assert [h.path for h in read.hits] == ["wiki/cache.md", "adr/0025-havi.md"]
    assert "0025 Havi függőségfrissítés" not in names(read)
    unread = _hybrid(tmp_path, hits, notes, {"adr/0025-havi.md": "hungarian"}).ask(question)
    assert [(h.path, h.unread) for h in unread.hits] == [
        ("adr/0025-havi.md", True),
        ("wiki/cache.md", False),
    ]
    assert unread.hits[0].cosine == pytest.approx(0.05)  # shown as measured
    assert names(unread)[0] == "0025 Havi függőségfrissítés"
    assert unread.relevance.top_cosine == pytest.approx(0.62)  # the label stays cosine


def test_asking_for_the_latest_keeps_hybrids_order_where_there_is_nothing_to_date(
    tmp_path: Path,
) -> None:
    """The unread Hungarian note that its words put first stays first when the question
    asks for the latest and no note is dated: nothing is reordered, and nothing said."""
    notes, hits = HAVI_NOTES, HAVI_HITS
    p = _hybrid(tmp_path, hits, notes, {"adr/0025-havi.md": "hungarian"})
    plain = p.ask("when is the monthly dependency update day?")
    latest = p.ask("when was the monthly dependency update day most recently?")
    assert latest.recency is None
    assert [h.path for h in latest.hits] == [h.path for h in plain.hits]
    assert plain.hits[0].path == "adr/0025-havi.md"
    assert names(latest) == names(plain)


def test_a_question_about_its_period_alone_is_answered_by_the_notes_of_the_period(
    tmp_path: Path,
) -> None:
    """ "what did we decide last month?" has no topic for the floor: May's notes answer it,
    however low their cosines; a question with a topic keeps the floor."""
    from dataclasses import replace

    notes = [
        replace(note("adr/0029-renovate.md", "0029 Renovate"), date="2026-05-11"),
        replace(note("sessions/s-may.md", "2026-05-06 Retirement"), date="2026-05-06"),
        replace(note("sessions/s-apr.md", "2026-04-20 Review"), date="2026-04-20"),
        note("wiki/team.md", "Platform team"),
    ]
    hits = [
        FakeHit("wiki/team.md", "Platform team", "wiki", 0.45),
        FakeHit("sessions/s-apr.md", "2026-04-20 Review", "session", 0.40),
        FakeHit("sessions/s-may.md", "2026-05-06 Retirement", "session", 0.35),
        FakeHit("adr/0029-renovate.md", "0029 Renovate", "adr", 0.05),
    ]
    p, _graph, _emb = make(tmp_path, hits, notes=notes, facts=[])
    opts = QueryOptions.from_settings(p.settings, today="2026-06-15")
    a = p.ask("what did we decide last month?", opts)
    assert a.time_window is not None and a.time_window.applied
    assert names(a) == ["2026-05-06 Retirement", "0029 Renovate"]
    topic = p.ask("what did we decide about renovate last month?", opts)
    assert "0029 Renovate" not in names(topic)


def _sessions(tmp_path: Path, extra: int = 0):
    """Three warm-cache notes of different days (σ 0.10: half a σ is 0.05) and, past the
    hits a question keeps, ``extra`` older filler notes; the newest note of all is a
    retro that is a whole step less relevant."""
    from dataclasses import replace

    dated = [
        ("sessions/design.md", "2026-02-03 Warm cache design", 0.60, "2026-02-03"),
        ("sessions/rollout.md", "2026-03-04 Warm cache rollout", 0.58, "2026-03-04"),
        ("wiki/warm-cache.md", "Warm cache", 0.59, None),
    ]
    dated += [(f"sessions/f{i:03d}.md", f"Filler {i}", 0.45, "2025-01-01") for i in range(extra)]
    dated.append(("sessions/retro.md", "2026-04-15 Q1 retro", 0.44, "2026-04-15"))
    notes = [replace(note(p_, t), date=d) for p_, t, _c, d in dated]
    hits = [FakeHit(p_, t, note(p_, t).source_type, c) for p_, t, c, _d in dated]
    return make(tmp_path, hits, notes=notes, facts=[])


def test_a_question_asking_for_the_latest_gets_the_newest_of_the_equally_relevant_notes(
    tmp_path: Path,
) -> None:
    p, _graph, _emb = _sessions(tmp_path)
    a = p.ask("what was the latest work on the warm cache?")
    assert a.recency == Recency("latest", 0.5)
    assert [h.path for h in a.hits] == [
        "sessions/rollout.md",  # the newest within half a σ of the best
        "sessions/design.md",
        "wiki/warm-cache.md",  # undated: after the dated notes of its step
        "sessions/retro.md",  # the newest of all, but a whole step less relevant
    ]
    assert [h.date for h in a.hits][:2] == ["2026-03-04", "2026-02-03"]
    assert names(a)[:2] == ["2026-03-04 Warm cache rollout", "2026-02-03 Warm cache design"]
    plain = p.ask("what was the work on the warm cache?")
    assert plain.recency is None
    assert plain.hits[0].path == "sessions/design.md"  # by relevance, as before
    off = QueryOptions.from_settings(p.settings.replace(query_latest="relevance"))
    kept = p.ask("what was the latest work on the warm cache?", off)
    assert kept.recency is None
    assert kept.hits[0].path == "sessions/design.md"  # the setting keeps relevance order


def test_a_question_asking_only_for_the_latest_gets_the_newest_note_it_finds_past_the_hits(
    tmp_path: Path,
) -> None:
    """ "what happened at the last meeting?" names no topic: the newest note found answers,
    though fifty older notes are closer and only five hits are kept; looked for in the
    first hundred notes, as a period question is."""
    p, _graph, _emb = _sessions(tmp_path, extra=50)
    a = p.ask("what happened at the last meeting?")
    assert a.recency == Recency("the last meeting", None)
    assert a.hits[0].path == "sessions/retro.md"
    assert names(a)[0] == "2026-04-15 Q1 retro"
    assert len(a.hits) == QueryOptions.from_settings(p.settings).hits


def test_a_note_dated_after_today_is_not_the_last_meeting_whatever_form_today_takes(
    tmp_path: Path,
) -> None:
    """Next quarter's agenda is the newest note, but not the last meeting, with today as
    the setting may write it (ISO 8601 basic form too)."""
    from dataclasses import replace

    notes = [
        replace(note("sessions/agenda.md", "2026-09-01 Planning agenda"), date="2026-09-01"),
        replace(note("sessions/may.md", "2026-05-06 Retirement"), date="2026-05-06"),
        replace(note("sessions/old.md", "2026-01-20 Kickoff"), date="2026-01-20"),
    ]
    hits = [
        FakeHit(n.path, n.title, "session", c) for n, c in zip(notes, (0.3, 0.4, 0.5), strict=True)
    ]
    p, _graph, _emb = make(tmp_path, hits, notes=notes, facts=[])
    for today in ("2026-06-15", "20260615"):
        opts = QueryOptions.from_settings(p.settings, today=today)
        a = p.ask("what happened at the last meeting?", opts)
        assert [h.path for h in a.hits] == [
            "sessions/may.md",
            "sessions/old.md",
            "sessions/agenda.md",
        ]
        assert "2026-09-01 Planning agenda" not in names(a)


def _minutes(tmp_path: Path):
    """A vault of meeting minutes whose newest two, and March's, are beyond the search's
    reach (the notes nearest "what happened" are older), with their stored vectors."""
    from dataclasses import replace

    days = ["2026-05-06", "2026-04-01", "2026-03-25", "2026-03-04", "2025-07-23", "2016-02-04"]
    notes = [replace(note(f"sessions/{d}.md", f"{d} TSC meeting"), date=d) for d in days]
    near = [FakeHit(n.path, n.title, "session", 0.50) for n in notes[4:]]
    p, graph, _emb = make(tmp_path, near, notes=notes, facts=[])
    graph.unreached = [FakeHit(n.path, n.title, "session", 0.30) for n in notes[:4]]
    return p, graph


def test_a_question_about_the_latest_alone_reads_the_newest_notes_by_date(
    tmp_path: Path,
) -> None:
    """The last meeting is the newest dated note, found by its date though the search did
    not reach it, scored exactly; the notes follow it newest first, subjects too."""
    p, graph = _minutes(tmp_path)
    opts = QueryOptions.from_settings(p.settings, today="2026-06-15")
    a = p.ask("what happened at the last meeting?", opts)
    assert [h.date for h in a.hits][:5] == [
        "2026-05-06", "2026-04-01", "2026-03-25", "2026-03-04", "2025-07-23",
    ]  # fmt: skip
    assert a.hits[0].cosine == pytest.approx(0.30)  # its stored vector's cosine
    assert names(a)[0] == "2026-05-06 TSC meeting"
    assert a.recency is not None and a.recency.within_sigma is None
    # A question with a topic reads nothing by date: its topic's notes answer it.
    graph.scored.clear()
    topic = p.ask("what was the latest on the kafka consumer lag?", opts)
    assert graph.scored == [] and "2026-05-06" not in {h.date for h in topic.hits}


def test_a_word_nearly_every_note_holds_names_no_topic_beside_the_latest(
    tmp_path: Path,
) -> None:
    """Every minute is a "TSC meeting": "the most recent TSC meeting" is the last meeting.
    A word fewer notes hold ("kafka", in none) is a topic, and only close notes trade places."""
    p, _graph = _minutes(tmp_path)
    opts = QueryOptions.from_settings(p.settings, today="2026-06-15")
    assert not p.names_topic("what happened at the most recent TSC meeting?", opts)
    a = p.ask("what happened at the most recent TSC meeting?", opts)
    assert a.hits[0].date == "2026-05-06"
    assert a.recency is not None and a.recency.within_sigma is None
    assert p.names_topic("what was the latest on the kafka consumer lag?", opts)
    march = p.ask("what did the TSC decide in March 2026?", opts)
    assert sorted(h.date for h in march.hits) == ["2026-03-04", "2026-03-25"]


def test_a_question_about_its_period_alone_reads_the_periods_notes_by_date(
    tmp_path: Path,
) -> None:
    p, _graph = _minutes(tmp_path)
    opts = QueryOptions.from_settings(p.settings, today="2026-06-15")
    a = p.ask("what happened in March 2026?", opts)
    assert a.time_window is not None and a.time_window.applied
    assert sorted(h.date for h in a.hits) == ["2026-03-04", "2026-03-25"]


def test_degraded_the_latest_alone_is_the_newest_notes_first_subjects_too(
    tmp_path: Path,
) -> None:
    """Without the graph the words "what happened" say nothing: the newest dated notes
    answer, with no score, and the answer says they are newest first."""
    p, _graph = _minutes(tmp_path)
    opts = QueryOptions.from_settings(p.settings, today="2026-06-15", semantic=False)
    a = p.ask("what happened at the last meeting?", opts)
    assert a.mode == "fallback"
    assert [h.date for h in a.hits][:2] == ["2026-05-06", "2026-04-01"]
    assert a.recency is not None
    assert names(a)[:2] == ["2026-05-06 TSC meeting", "2026-04-01 TSC meeting"]
    # No note holds "decide": the notes found by date alone, unscored.
    decided = p.ask("what did we decide most recently?", opts)
    assert [h.date for h in decided.hits][:2] == ["2026-05-06", "2026-04-01"]
    assert decided.hits[0].cosine is None and decided.hits[0].bm25 is None
    march = p.ask("what happened in March 2026?", opts)
    assert sorted(h.date for h in march.hits) == ["2026-03-04", "2026-03-25"]
    assert march.recency is None


Dated = list[tuple[str, str | None, float]]


def _dated_vault(tmp_path: Path, near: Dated, far: Dated):
    """Notes (path, date, cosine): ``near`` in the search's reach in that order, ``far``
    only readable by date (their stored vectors at that cosine)."""
    from dataclasses import replace

    stype = lambda p_: note(p_, p_).source_type  # noqa: E731
    notes = [replace(note(p_, p_), date=d) for p_, d, _c in [*near, *far]]
    p, graph, _emb = make(
        tmp_path, [FakeHit(p_, p_, stype(p_), c) for p_, _d, c in near], notes=notes, facts=[]
    )
    graph.unreached = [FakeHit(p_, p_, stype(p_), c) for p_, _d, c in far]
    return p, graph


def test_a_note_read_by_date_never_passes_a_hit_fused_above_it(tmp_path: Path) -> None:
    """Hybrid's order is not by cosine: a note read by date goes after the last hit at
    least as close, not before the first one less close."""
    near = [("wiki/b.md", "2026-03-02", 0.50), ("wiki/a.md", "2026-03-03", 0.10)]
    near.append(("wiki/c.md", "2026-03-04", 0.45))
    p, _graph = _dated_vault(tmp_path, near, [("wiki/x.md", "2026-03-05", 0.30)])
    opts = QueryOptions.from_settings(p.settings, today="2026-06-15")
    a = p.ask("what happened in March 2026?", opts)
    assert [h.path for h in a.hits] == ["wiki/b.md", "wiki/a.md", "wiki/c.md", "wiki/x.md"]


@pytest.mark.parametrize("semantic", [True, False])
def test_the_last_meeting_of_a_month_is_no_note_dated_after_today(
    tmp_path: Path, semantic: bool
) -> None:
    """ "the last meeting in June" on 15 June: the agendas of 20 and 25 June are plans."""
    far = [("sessions/a25.md", "2026-06-25", 0.3), ("sessions/a20.md", "2026-06-20", 0.3)]
    far.append(("sessions/m03.md", "2026-06-03", 0.3))
    p, _graph = _dated_vault(tmp_path, [("wiki/old.md", "2025-01-01", 0.5)], far)
    opts = QueryOptions.from_settings(p.settings, today="2026-06-15", hits=2, semantic=semantic)
    a = p.ask("what happened at the last meeting in June 2026?", opts)
    assert a.hits[0].path == "sessions/m03.md"


def test_episodic_recall_reads_session_notes_by_date_not_newer_wiki_notes(
    tmp_path: Path,
) -> None:
    far = [(f"wiki/w{i}.md", f"2026-06-0{i}", 0.3) for i in range(1, 10)]
    far.append(("sessions/s.md", "2026-05-06", 0.3))
    p, _graph = _dated_vault(tmp_path, [("sessions/old.md", "2025-01-01", 0.5)], far)
    opts = QueryOptions.from_settings(p.settings, today="2026-06-15", preset="episodic")
    a = p.ask("what happened at the last meeting?", opts)
    assert [h.path for h in a.hits][:2] == ["sessions/s.md", "sessions/old.md"]


def test_degraded_says_nothing_of_the_latest_when_no_note_it_keeps_is_dated(
    tmp_path: Path,
) -> None:
    """The meeting notes found by their words are undated (or, for episodic recall, the
    dated one is no session note): nothing is put newest first, so nothing says so."""
    from dataclasses import replace

    near = [("wiki/meeting-notes.md", None, 0.5), ("wiki/meeting-rules.md", "2026-05-01", 0.5)]
    p, _graph = _dated_vault(tmp_path, near[:1], [])
    opts = QueryOptions.from_settings(p.settings, semantic=False, today="2026-06-15")
    a = p.ask("what happened at the last meeting?", opts)
    assert a.mode == "fallback" and a.hits and a.recency is None
    p, _graph = _dated_vault(tmp_path, near, [])
    episodic = replace(opts, session_notes_only=True)
    a = p.ask("what happened at the last meeting?", episodic)
    assert a.mode == "fallback" and a.recency is None


def test_whether_a_question_names_a_topic_is_read_once_an_answer(tmp_path: Path) -> None:
    p, _graph = _minutes(tmp_path)
    asked: list[list[str]] = []
    shares = p.app.kodb.word_shares

    def spy(terms: Sequence[str]) -> dict[str, float]:
        asked.append(list(terms))
        return shares(terms)

    p.app.kodb.word_shares = spy  # type: ignore[method-assign]
    for semantic in (True, False):
        asked.clear()
        opts = QueryOptions.from_settings(p.settings, today="2026-06-15", semantic=semantic)
        p.ask("what happened at the most recent TSC meeting?", opts)
        # Once for the topic; the excerpts read the shares of the question's own words.
        assert asked.count(["tsc"]) == 1 and len(asked) <= 2, asked


def test_a_graph_failing_to_score_the_notes_read_by_date_keeps_the_answers_semantic(
    tmp_path: Path,
) -> None:
    p, graph = _minutes(tmp_path)

    def gone(paths: Sequence[str]) -> dict[str, list[list[float]]]:
        raise GraphUnavailable("connection reset")

    graph.note_vector_sets = gone  # type: ignore[method-assign]
    opts = QueryOptions.from_settings(p.settings, today="2026-06-15")
    answers = p.ask_many(["what happened at the last meeting?", "why redis?"], opts)
    assert [a.mode for a in answers] == ["semantic", "semantic"]
    assert answers[0].hits[0].date == "2025-07-23"  # the newest the search reached


def test_asking_for_the_latest_among_undated_notes_changes_nothing_and_says_nothing(
    tmp_path: Path,
) -> None:
    p, _graph, _emb = make(tmp_path, HITS)
    before = p.ask("why did we choose redis for the warm cache?")
    a = p.ask("why did we choose redis for the warm cache most recently?")
    assert a.recency is None
    assert [h.path for h in a.hits] == [h.path for h in before.hits]


def test_a_cold_answer_counts_the_notes_it_cannot_see_yet(tmp_path: Path) -> None:
    """The fakes' registry holds notes the (empty) vault folder does not: deleted since the
    sync; a file on disk the registry lacks: new. Only asked for, and each answer says it."""
    pipeline, _, _ = make(tmp_path, HITS)
    (tmp_path / "wiki").mkdir()
    (tmp_path / "wiki" / "fresh.md").write_text("# Fresh\n\nNew text.\n")
    answer = pipeline.ask("why redis?", check_edits=True)
    assert answer.unsynced == UnsyncedEdits(changed=0, added=1, removed=len(NOTES))
    assert "edits_ms" in answer.timings_ms
    plain = pipeline.ask("why redis?")
    assert plain.unsynced is None and "edits_ms" not in plain.timings_ms


def test_a_long_lived_process_reuses_a_recent_comparison_with_the_vault(tmp_path: Path) -> None:
    """The service without a watcher compares as a cold answer does, at most once within
    its reuse window: a scan of a large vault per question would cost more than it."""
    pipeline, _, _ = make(tmp_path, HITS)
    (tmp_path / "wiki").mkdir()
    first = pipeline.ask_many(["why redis?"], check_edits=True, edits_reuse_s=60)[0]
    (tmp_path / "wiki" / "fresh.md").write_text("# Fresh\n\nNew text.\n")
    reused = pipeline.ask_many(["why redis?"], check_edits=True, edits_reuse_s=60)[0]
    assert reused.unsynced == first.unsynced == UnsyncedEdits(removed=len(NOTES))
    again = pipeline.ask_many(["why redis?"], check_edits=True)[0]  # a cold answer's: no reuse
    assert again.unsynced == UnsyncedEdits(added=1, removed=len(NOTES))


def test_a_failed_comparison_with_the_vault_never_costs_the_answer(tmp_path: Path) -> None:
    pipeline, _, _ = make(tmp_path, HITS)

    def broken() -> dict[str, NoteStamp]:
        raise KodbError("the registry could not be read")

    pipeline.app.kodb.note_stamps = broken  # type: ignore[method-assign]
    answer = pipeline.ask("why redis?", check_edits=True)
    assert answer.unsynced is None and answer.relevance.label == "strong"


def test_an_empty_note_is_no_hit(tmp_path: Path) -> None:
    # Obsidian makes an empty file when an unresolved link is clicked; embedded as its title
    # alone, "how do we use terraform?" found it "strong" and the answer said nothing.
    empty = Note("wiki/Terraform.md", "Terraform", "wiki", "h", 0.0, 0, "Terraform", None)
    hits = [FakeHit("wiki/Terraform.md", "Terraform", "wiki", 0.85), *HITS]
    p, _, _ = make(tmp_path, hits, notes=[*NOTES, empty])
    a = p.ask("how do we use terraform?")
    assert "wiki/Terraform.md" not in [h.path for h in a.hits]
    assert a.relevance.top_cosine == pytest.approx(0.62)  # the best note that holds text
    down, _, _ = make(tmp_path, hits, notes=[*NOTES, empty], down=True)
    assert "wiki/Terraform.md" not in [h.path for h in down.ask("terraform").hits]


def test_a_decision_record_named_by_its_number_leads_the_notes(tmp_path: Path) -> None:
    """ "is ADR 2 still current?": neither its words nor its meaning find the second record
    before others; the question names it, so it leads, scored by its stored vector."""
    p, graph, _ = make(tmp_path, HITS)
    graph.unreached = [FakeHit("adr/0002-use-postgresql.md", "0002 Use PostgreSQL", "adr", 0.3)]
    a = p.ask("is ADR 2 still current?")
    assert [h.path for h in a.hits][:2] == ["adr/0002-use-postgresql.md", "adr/0007-use-redis.md"]
    assert a.hits[0].cosine == pytest.approx(0.3)
    both = p.ask("ADR-0007 or adr #2?")
    assert [h.path for h in both.hits][:2] == [
        "adr/0007-use-redis.md",
        "adr/0002-use-postgresql.md",
    ]
    for plain in ("the decision 2026-01-02 on the warm cache", "the decision 2 weeks ago"):
        assert "adr/0002-use-postgresql.md" not in [h.path for h in p.ask(plain).hits], plain


def test_an_excerpt_is_not_chosen_by_a_word_nearly_every_note_holds(tmp_path: Path) -> None:
    """In the TSC's minutes every note holds "TSC" (each attendee is "… (TSC)"), and a
    meeting's excerpt for "when did the TSC discuss the macOS tier?" was its roll call."""
    from pipeline.model import Hit
    from pipeline.query import Timer

    minutes = [note(f"wiki/m{i}.md", f"TSC meeting {i}", "The meeting.") for i in range(5)]
    body = "# TSC meeting {i}\n\n## Present\n\n- Danielle Adams (TSC)\n\n## Notes\n\nWe met.\n"
    for i in range(5):
        (tmp_path / "wiki").mkdir(exist_ok=True)
        (tmp_path / "wiki" / f"m{i}.md").write_text(body.format(i=i))
    p, _, _ = make(tmp_path, [FakeHit("wiki/m0.md", "TSC meeting 0", "wiki", 0.5)], notes=minutes)
    hits = [Hit("wiki/m0.md", "TSC meeting 0", "wiki", 0.5, "The meeting.")]
    registry = {n.path: n for n in minutes}
    question = "when did the TSC discuss the macOS tier?"
    shown = p._excerpted(question, hits, registry, QueryOptions(), Timer())
    assert shown[0].excerpt == "The meeting."  # the summary, not "Present — … (TSC)"
    alone = p._excerpted("TSC", hits, registry, QueryOptions(), Timer())
    assert "Danielle Adams (TSC)" in (alone[0].excerpt or "")  # every word vault-wide: kept
