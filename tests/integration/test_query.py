"""End to end on the sample vault: real ArcadeDB over Bolt, real model, SQLite and PostgreSQL.

The graph is the session's local server (emptied once for this module); the vault is synced
once per KO-DB backend; then questions on-topic, off-topic, hostile and degraded.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.app import App
from pipeline.embed import get_embedder
from pipeline.graph import GraphClient
from pipeline.query import Pipeline, QueryOptions
from pipeline.rank import score_of
from pipeline.sync import sync_vault

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
ADR_TITLE_QUESTION = "use redis as the warm cache"  # adr/0007-use-redis-as-the-warm-cache.md
# Off-topic questions that are not probe strings of any probe set.
OFF_TOPIC = [
    "recipe for banana bread with walnuts",
    "who won the football world cup in 1998",
    "best beaches in portugal for surfing",
    "how to knit a wool scarf",
    "symptoms of the common cold",
]


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def synced(
    request: pytest.FixtureRequest, local_graph, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Pipeline]:
    vault = tmp_path_factory.mktemp("query") / "vault"
    shutil.copytree(REPO / "examples" / "vault", vault, ignore=shutil.ignore_patterns(".vault-ko"))
    if request.param == "sqlite":
        kodb_url = f"sqlite:///{vault / '.vault-ko' / 'ko.db'}"
    else:
        kodb_url = request.getfixturevalue("reset_pg")()
    settings = local_graph.settings(vault, kodb_url=kodb_url, embed_long_notes="passages")
    with GraphClient(settings) as client:
        client.delete_notes(list(client.note_states()))
    pipeline = App(settings, embedder=get_embedder(settings)).pipeline()
    sync_vault(pipeline.settings, pipeline.kodb, pipeline.graph, pipeline.embedder)
    try:
        yield pipeline
    finally:
        pipeline.close()


def test_adr_title_question_is_semantic_with_subjects(synced: Pipeline) -> None:
    a = synced.ask(ADR_TITLE_QUESTION)
    assert a.mode == "semantic"
    assert a.relevance.label in ("weak", "moderate", "strong")
    assert a.relevance.calibration == "vault"
    assert a.hits[0].path == "adr/0007-use-redis-as-the-warm-cache.md"
    assert a.subjects
    for s in a.subjects:
        assert s.score == score_of(s.source_count, s.per_type, s.total_facts)
        assert len(s.facts) <= 3
    names = {s.subject.casefold() for s in a.subjects}
    assert {"redis", "warm cache"} <= names
    assert not any(n == "warmstart" for n in names) or "warm cache" in names


def test_the_redis_question_is_answered_by_the_redis_decision(synced: Pipeline) -> None:
    a = synced.ask("why did we choose redis for the warm cache?")
    top = [s.subject for s in a.subjects[:5]]
    # Hybrid (the default) places subjects by the fused order, corroboration moving one a
    # place at most: the decision first, the Redis hub among the first five.
    assert top[0] == "0007 Use Redis as the warm cache"
    assert {"Redis", "Warm cache"} & set(top)
    assert "adr/0007-use-redis-as-the-warm-cache.md" in [h.path for h in a.hits[:3]]
    dense = synced.ask(
        "why did we choose redis for the warm cache?",
        replace(QueryOptions.from_settings(synced.settings), retrieval="dense"),
    )
    # Dense ranks by corroboration among the comparably close: a hub comes up to the top 3.
    assert {"Redis", "Warm cache"} & {s.subject for s in dense.subjects[:3]}
    redis = next(s for s in a.subjects if s.subject == "Redis")
    facts = [(f.predicate, f.object) for f in redis.facts]
    assert ("decided_in", "0007 Use Redis as the warm cache") in facts
    assert ("decided_in", "0002 Use PostgreSQL as the system of record") not in facts[:1]


UNRELATED = [
    "how long does a failed card payment take to suspend a workspace?",
    "the VPN certificate expired, what now?",
    "why are app connections going through a transaction pooler?",
    "how are kafka topics partitioned?",
    "who decides on feature flag vendors?",
    "what should the on-call engineer do at handover?",
    "how does a saved document get into search?",
    "what is the per-token request limit at the gateway?",
    "what are our biggest cloud costs?",
    "how do we add a column to a big postgres table safely?",
]


def test_different_questions_get_different_answers(synced: Pipeline) -> None:
    tops = [tuple(s.subject for s in synced.ask(q).subjects[:3]) for q in UNRELATED]
    # A question that one note answers may have fewer than three subjects above the floor.
    assert all(tops) and sum(len(t) == 3 for t in tops) >= 8
    assert len(set(tops)) == len(tops)  # no two answers lead with the same three subjects
    assert len({t[0] for t in tops}) == len(tops)  # nor with the same first one
    counts: dict[str, int] = {}
    for t in tops:
        for name in t:
            counts[name] = counts.get(name, 0) + 1
    assert max(counts.values()) <= 2, counts  # no hub in the top 3 of every answer


def test_off_topic_questions_are_silenced(synced: Pipeline) -> None:
    labels = [synced.ask(q).relevance.label for q in OFF_TOPIC]
    assert labels.count("no_match") >= 4, labels
    assert not {"moderate", "strong"} & set(labels), labels
    for q in OFF_TOPIC:
        a = synced.ask(q)
        if a.relevance.label == "no_match":
            assert a.subjects == ()


def test_sync_is_idempotent_and_calibration_current(synced: Pipeline) -> None:
    report = sync_vault(synced.settings, synced.kodb, synced.graph, synced.embedder)
    assert report.embed.embedded == 0
    assert report.calibrated is False
    assert report.calibration is not None and report.calibration.n_notes == 91


def test_sync_re_embedding_the_vault_under_new_text_rules_recalibrates(synced: Pipeline) -> None:
    with synced.graph._session() as session:  # nodes as an older release wrote them
        session.run("MATCH (n:Note) SET n.text_version = null")
    report = sync_vault(synced.settings, synced.kodb, synced.graph, synced.embedder)
    assert report.embed.embedded == 91
    assert report.calibrated is True
    assert report.calibration_reasons == ("91 of 91 notes re-embedded by this run",)
    again = sync_vault(synced.settings, synced.kodb, synced.graph, synced.embedder)
    assert (again.embed.embedded, again.calibrated) == (0, False)


def test_sync_with_nothing_to_do_does_not_load_the_model(synced: Pipeline) -> None:
    from pipeline.embed import LazyEmbedder

    fresh = App(synced.settings, kodb=synced.kodb, graph=synced.graph).pipeline()
    assert isinstance(fresh.embedder, LazyEmbedder)
    report = sync_vault(fresh.settings, fresh.kodb, fresh.graph, fresh.embedder)
    assert (report.embed.embedded, report.calibrated) == (0, False)
    assert not fresh.embedder.is_loaded
    answer = fresh.ask(ADR_TITLE_QUESTION)  # the first question loads it
    assert fresh.embedder.is_loaded
    assert answer.hits[0].path == "adr/0007-use-redis-as-the-warm-cache.md"


@pytest.mark.parametrize(
    "question",
    [
        "100% of the warm_cache hits",
        "what's \"redis\" -- the 'warm' cache?",
        "') MATCH (n) DETACH DELETE n //",
        "}) RETURN 1 UNION CALL db.labels() YIELD label RETURN label //",
        "gyorsítótár-invalidálás és ügyeleti kézikönyv",
        "\\%_\\_%",
    ],
)
def test_hostile_and_accented_questions_are_data(synced: Pipeline, question: str) -> None:
    before = len(synced.graph.note_states())
    for semantic in (True, False):
        a = synced.ask(question, QueryOptions(semantic=semantic))
        assert a.query == question.strip()
        assert a.mode == ("semantic" if semantic else "fallback")
    assert len(synced.graph.note_states()) == before == 91


def test_hungarian_words_find_the_hungarian_subject_in_fallback(synced: Pipeline) -> None:
    a = synced.ask("Gyorsítótár-invalidálás", QueryOptions(semantic=False))
    assert any(s.subject.casefold() == "gyorsítótár-invalidálás" for s in a.subjects)


def test_graph_down_answers_in_fallback_without_the_model(synced: Pipeline) -> None:
    dead = synced.settings.replace(
        graph_url="bolt://127.0.0.1:1", state_dir=synced.settings.state_dir / "dead"
    )
    p = App(dead, kodb=synced.kodb).pipeline()
    a = p.ask("what do we know about the warm cache?")
    assert a.mode == "fallback"
    assert "the graph is not reachable at 127.0.0.1:1" in (a.degraded_reason or "")
    assert a.relevance.label == "unscored"
    # The words' hits show the paragraph of their note that meets the question too.
    summaries = {p: n.summary for p, n in synced.kodb.notes_at(h.path for h in a.hits).items()}
    biased = [h for h in a.hits if h.excerpt != summaries[h.path]]
    assert biased and all("warm" in (h.excerpt or "").casefold() for h in biased)
    names = [s.subject for s in a.subjects]
    assert "Warm cache" in names
    assert not any(n.casefold().startswith("warmstart") for n in names)
    assert not p.app.model_loaded  # the fallback never loaded the model
    again = p.ask("warm cache")  # the breaker is open now: fails fast, same answer shape
    assert again.mode == "fallback" and "it will be retried in" in (again.degraded_reason or "")
    p.app.graph.close()  # not p.close(): KO-DB is the shared fixture's


def test_query_cli_answers_in_fallback_when_the_cypher_files_are_missing(
    synced: Pipeline, graph_env, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    # What a broken install looked like (issue 13): every graph call failed to load its
    # Cypher, and `query` exited 2 instead of answering from KO-DB.
    from pipeline.cli import cli
    from pipeline.graph import cypher

    monkeypatch.setattr(cypher, "CYPHER_PACKAGE", "pipeline.no_cypher_here")
    cypher.load_query.cache_clear()
    try:
        result = CliRunner().invoke(
            cli,
            ["--vault", str(synced.settings.vault), "query", "warm cache", "--json"],
            env=cli_env(synced, graph_env),
        )
    finally:
        cypher.load_query.cache_clear()
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["mode"] == "fallback"
    assert data["degraded_reason"].startswith("the Cypher files are not installed")
    assert "Warm cache" in [s["subject"] for s in data["subjects"]]


def cli_env(synced: Pipeline, graph_env) -> dict[str, str]:  # type: ignore[no-untyped-def]
    s = synced.settings
    return graph_env(s, VAULT_KO_KODB_URL=s.effective_kodb_url, VAULT_KO_STATE_DIR=str(s.state_dir))


def test_vault_ko_query_cli_top_k(synced: Pipeline, graph_env) -> None:  # type: ignore[no-untyped-def]
    from pipeline.cli.query import query_standalone

    env = cli_env(synced, graph_env)
    result = CliRunner().invoke(
        query_standalone,
        [
            "--vault",
            str(synced.settings.vault),
            "--top-k",
            "5",
            "--semantic",
            ADR_TITLE_QUESTION,
            "--json",
        ],
        env=env,
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["mode"] == "semantic"
    assert 1 <= len(data["subjects"]) <= 5
    for key in ("query", "mode", "degraded_reason", "relevance", "hits", "subjects", "timings_ms"):
        assert key in data
    for key in (
        "label",
        "top_cosine",
        "z",
        "noise_floor",
        "sigma",
        "floor_cosine",
        "calibration",
        "tight_vault",
        "hint",
        "warning",
    ):
        assert key in data["relevance"]


REDIS_QUESTION = "why did we choose redis for the warm cache?"


def test_the_text_answer_shows_five_subjects_and_counts_the_rest(  # type: ignore[no-untyped-def]
    synced: Pipeline, graph_env
) -> None:
    from pipeline.cli.query import query_standalone

    env = cli_env(synced, graph_env)
    base = ["--vault", str(synced.settings.vault), "--no-service"]

    def run(*args: str) -> str:
        result = CliRunner().invoke(query_standalone, [*base, *args], env=env)
        assert result.exit_code == 0, result.output
        return result.stdout

    plain = run(REDIS_QUESTION)
    total = len(json.loads(run(REDIS_QUESTION, "--json"))["subjects"])
    assert total == 20  # JSON keeps the seed's top-k
    assert f"(5 of {total}; {total - 5} more: --top-k {total})" in plain
    assert len(plain.splitlines()) <= 46
    assert max(len(line) for line in plain.splitlines()) <= 120  # piped: 120 columns
    assert "decision: We will build a Warm cache on our existing Redis cluster." in plain
    assert "more: --top-k" not in run(REDIS_QUESTION, "--top-k", "20")
    assert "more: --top-k" not in run(REDIS_QUESTION, "--preset", "session")
    assert "\x1b[" not in plain  # no escape codes when the output is not a terminal


def _answering_facts() -> dict[str, dict[str, set[tuple[str, str, str]]]]:
    path = REPO / "tests" / "data" / "judged" / "examples-vault.facts.jsonl"
    labels: dict[str, dict[str, set[tuple[str, str, str]]]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        for f in row["answering"]:
            wanted = labels.setdefault(row["question"], {})
            wanted.setdefault(f["subject"].casefold(), set()).add(
                (f["predicate"], f["object"], f["source_file"])
            )
    return labels


def test_the_facts_shown_answer_the_judged_questions(synced: Pipeline) -> None:
    """Of the answering subjects among an answer's first five, how many show a fact that
    answers the question (hand-judged, tests/data/judged/examples-vault.facts.jsonl):
    0.23 when facts were chosen by confidence alone, 0.87 with informative predicates
    first (docs/ranking.md)."""
    shown = answered = 0
    for question, wanted in _answering_facts().items():
        for s in synced.ask(question).subjects[:5]:
            facts = wanted.get(s.subject.casefold())
            if facts is not None:
                shown += 1
                answered += any((f.predicate, f.object, f.source_file) in facts for f in s.facts)
    assert shown >= 35
    assert answered / shown >= 0.8


def _shows(excerpt: str | None, sentence: str) -> bool:
    """Half of the sentence's first 25 content words are in the excerpt
    (scripts/excerpt_choice.py's rule)."""
    import re

    from pipeline.bridge import STOP_WORDS
    from pipeline.kodb.text import fold

    def content(text: str) -> list[str]:
        return [w for w in re.findall(r"[^\W_]{3,}", fold(text)) if w not in STOP_WORDS]

    wanted = content(sentence)[:25]
    held = set(content(excerpt or ""))
    return bool(wanted) and sum(w in held for w in wanted) >= len(wanted) / 2


def test_the_excerpts_shown_answer_the_judged_questions(synced: Pipeline) -> None:
    """Of the first five hits that hold a hand-judged answering sentence, how many show it
    in their excerpt: 0.46 with each note's first paragraph, 0.68 with the paragraph that
    meets the question (scripts/excerpt_choice.py; docs/ranking.md)."""
    first = replace(QueryOptions.from_settings(synced.settings), excerpts=False)
    counts = {"biased": 0, "first": 0, "hits": 0}
    for question, wanted in _answering_facts().items():
        sentences: dict[str, list[str]] = {}
        for facts in wanted.values():
            for _, obj, path in facts:
                sentences.setdefault(path, []).append(obj)
        biased, plain = synced.ask(question), synced.ask(question, first)
        pairs = [
            (b, f) for b, f in zip(biased.hits, plain.hits, strict=True) if b.path in sentences
        ]
        for b, f in pairs[:5]:
            counts["hits"] += 1
            counts["biased"] += any(_shows(b.excerpt, x) for x in sentences[b.path])
            counts["first"] += any(_shows(f.excerpt, x) for x in sentences[f.path])
    assert counts["hits"] >= 50
    assert counts["biased"] / counts["hits"] >= 0.6
    assert counts["biased"] - counts["first"] >= 0.1 * counts["hits"]
    redis = synced.ask("why did we choose redis for the warm cache?").hits[0]
    assert (redis.excerpt or "").startswith("Decision — We will build a Warm cache on our")


FLAGS_OLD = "0006 Use LaunchDarkly for feature flags"
FLAGS_NEW = "0014 Move feature flags in-house on PostgreSQL"


@pytest.mark.parametrize("semantic", [True, False], ids=["semantic", "fallback"])
def test_the_current_decision_comes_before_the_one_it_replaced(
    synced: Pipeline, semantic: bool
) -> None:
    opts = QueryOptions.from_settings(synced.settings, semantic=semantic)
    a = synced.ask("how are feature flags managed now", opts)
    names = [s.subject for s in a.subjects]
    assert FLAGS_NEW in names and FLAGS_OLD in names
    assert names.index(FLAGS_NEW) < names.index(FLAGS_OLD)
    old = a.subjects[names.index(FLAGS_OLD)]
    new = a.subjects[names.index(FLAGS_NEW)]
    assert (old.status, old.superseded_by) == ("superseded", FLAGS_NEW)
    assert (new.status, new.superseded_by) == ("current", None)
    hit = next(h for h in a.hits if h.path == "adr/0006-use-launchdarkly-for-feature-flags.md")
    assert hit.status == "superseded"
    assert hit.superseded_by == "adr/0014-move-feature-flags-in-house-on-postgresql.md"
    assert score_of(old.source_count, old.per_type, old.total_facts) == old.score


def test_a_successor_the_search_missed_joins_right_before_the_old_decision(
    synced: Pipeline,
) -> None:
    opts = QueryOptions.from_settings(synced.settings, top_k=3, hits=1)
    a = synced.ask("SOPS encrypted secrets files committed in the repository", opts)
    names = [s.subject for s in a.subjects]
    old = "0022 Keep secrets in SOPS-encrypted files in the repository"
    new = "0027 Move secrets to AWS Secrets Manager"
    assert old in names, names
    assert names[names.index(old) - 1] == new
    joined = a.subjects[names.index(new)]
    assert joined.evidence == "successor" and len(a.subjects) <= 3


def test_the_hook_and_markdown_say_what_replaced_a_decision(synced: Pipeline) -> None:
    from pipeline.render import to_context_pack, to_markdown

    a = synced.ask("how are feature flags managed now")
    said = f"superseded by {FLAGS_NEW}"
    assert said in to_markdown(a)
    assert said in (to_context_pack(a, max_chars=20_000) or "")


def test_a_period_keeps_the_notes_dated_within_it(  # type: ignore[no-untyped-def]
    synced: Pipeline, graph_env
) -> None:
    from pipeline.cli.query import query_standalone

    args = ["--vault", str(synced.settings.vault), "--no-service", "--json"]
    result = CliRunner().invoke(
        query_standalone,
        [*args, "what did we decide in April 2026", "--today", "2026-06-15"],
        env=cli_env(synced, graph_env),
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    window = data["time_window"]
    assert (window["from"], window["to"], window["applied"]) == ("2026-04-01", "2026-04-30", True)
    assert data["hits"] and window["outside"] > 0
    for hit in data["hits"]:
        assert hit["date"] is None or "2026-04-01" <= hit["date"] <= "2026-04-30", hit
    assert window["undated"] == sum(1 for h in data["hits"] if h["date"] is None)
    assert "adr/0028-one-approval-plus-code-owners-for-pull-requests.md" in [
        h["path"] for h in data["hits"]
    ]


DEPS_OLD = "0025 Függőségek havi kézi frissítése"
DEPS_NEW = "0029 Automatikus függőségfrissítés Renovate-tel"


def test_hybrid_finds_a_hungarian_decision_asked_about_in_english_by_its_words(
    synced: Pipeline,
) -> None:
    """MiniLM reads English: the Hungarian ADR's cosine is under the floor, but its English
    alias holds the question's words. Hybrid answers with it, its successor first; dense
    cannot find it."""
    question = "what replaced the monthly dependency update day?"
    opts = QueryOptions.from_settings(synced.settings, retrieval="hybrid")
    a = synced.ask(question, opts)
    first = a.hits[0]
    assert first.path == "adr/0025-fuggosegek-havi-kezi-frissitese.md" and first.unread
    assert first.cosine is not None and a.relevance.floor_cosine is not None
    assert first.cosine < a.relevance.floor_cosine
    names = [s.subject for s in a.subjects]
    assert names[:2] == [DEPS_NEW, DEPS_OLD], names
    dense = synced.ask(question, QueryOptions.from_settings(synced.settings, retrieval="dense"))
    assert DEPS_OLD not in [s.subject for s in dense.subjects]


def test_a_question_about_last_month_alone_lists_that_months_decision(synced: Pipeline) -> None:
    opts = QueryOptions.from_settings(synced.settings, today="2026-06-15")
    a = synced.ask("what did we decide last month?", opts)
    assert a.time_window is not None and a.time_window.applied
    names = [s.subject for s in a.subjects]
    assert DEPS_NEW in names, names
    if DEPS_OLD in names:  # May's notes mention the decision it replaced
        assert names.index(DEPS_NEW) < names.index(DEPS_OLD)
    undated = {h.title for h in a.hits if h.date is None}
    assert undated and not undated & set(names)  # the period's notes answer, not the hubs


def test_a_year_named_as_a_topic_is_said_but_not_applied(synced: Pipeline) -> None:
    opts = QueryOptions.from_settings(synced.settings, today="2026-06-15")
    a = synced.ask("which redis settings were common in 1999?", opts)
    assert a.time_window is not None and a.time_window.applied is False
    assert a.hits and a.subjects  # nothing dropped for a period no note is dated in


LATEST = Path(__file__).resolve().parents[1] / "data/judged/examples-vault-latest.jsonl"


def test_questions_asking_for_the_latest_lead_with_the_newest_note_that_answers(
    synced: Pipeline,
) -> None:
    """The judged "latest" questions (scripts/latest_first.py): 8 of 11 lead with the
    newest answering note, 3 in relevance order; each such answer says it was reordered."""
    rows = [json.loads(line) for line in LATEST.read_text(encoding="utf-8").splitlines() if line]

    def leading(order: str) -> int:
        settings = synced.settings.replace(query_latest=order)
        opts = QueryOptions.from_settings(settings, today="2026-06-15")
        answers = [synced.ask(row["question"], opts) for row in rows]
        assert all(a.mode == "semantic" for a in answers)
        assert all((a.recency is not None) is (order == "newest") for a in answers)
        return sum(a.hits[0].path == row["newest"] for a, row in zip(answers, rows, strict=True))

    newest, relevance = leading("newest"), leading("relevance")
    assert newest >= 7 and newest >= relevance + 4, (newest, relevance)


def test_the_last_meeting_is_the_newest_note_and_the_answer_says_so(  # type: ignore[no-untyped-def]
    synced: Pipeline, graph_env
) -> None:
    from pipeline.cli.query import query_standalone

    args = ["--vault", str(synced.settings.vault), "--no-service", "--json"]
    result = CliRunner().invoke(
        query_standalone,
        [*args, "what happened at the last meeting?"],
        env=cli_env(synced, graph_env),
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["schema_version"] == 9
    assert data["recency"] == {"text": "the last meeting", "within_sigma": None}
    dates = [h["date"] for h in data["hits"] if h["date"] is not None]
    assert dates and dates == sorted(dates, reverse=True)
    assert data["hits"][0]["path"] == "sessions/2026-06-11-secrets-access-audit.md"


def test_a_name_the_model_cannot_place_is_no_match_pointing_at_the_note_holding_it(
    synced: Pipeline,
) -> None:
    """ADR 0001 credits Michael Nygard's template; the model places the name nowhere."""
    a = synced.ask("who is Michael Nygard?")
    assert a.relevance.label == "no_match" and a.subjects == ()
    assert [h.path for h in a.word_matches] == ["adr/0001-record-architecture-decisions.md"]
    assert synced.ask("who is Michael Jordan?").word_matches == ()  # "jordan": in no note


def test_a_name_many_notes_hold_is_no_match_counting_them_and_naming_three(
    synced: Pipeline,
) -> None:
    """A team's lead, named in the text of several notes: no_match by meaning, but the
    answer must not read as "the vault knows nothing of her"."""
    a = synced.ask("Okafor")
    assert a.relevance.label == "no_match" and a.subjects == ()
    assert a.word_match_count is not None and a.word_match_count > 3
    assert len(a.word_matches) == 3
    assert a.word_matches[0].path == "wiki/platform-team.md"  # "lead:: Maya Okafor"


@pytest.mark.parametrize("semantic", [True, False], ids=["semantic", "degraded"])
def test_a_question_about_the_latest_alone_is_answered_by_the_newest_dated_notes(
    synced: Pipeline, semantic: bool
) -> None:
    """Whatever the words "what did we decide" are nearest to, the answer's notes are the
    vault's newest dated ones up to today, in order: each scored by its stored vectors
    when the graph answers, found by its date alone when it does not."""
    today = "2026-06-15"
    registry = synced.kodb.notes().values()
    dated = [n for n in registry if n.date is not None and n.date <= today]
    newest = sorted(dated, key=lambda n: (n.date or "", n.path), reverse=True)
    opts = QueryOptions.from_settings(synced.settings, today=today, semantic=semantic)
    a = synced.ask("what did we decide most recently?", opts)
    assert a.mode == ("semantic" if semantic else "fallback")
    assert a.recency is not None
    assert [h.date for h in a.hits[:5]] == [n.date for n in newest[:5]]
    if semantic:
        assert all(h.cosine is not None for h in a.hits)
    march = synced.ask("what happened in March 2026?", opts)
    expected = {n.path for n in dated if n.date and n.date.startswith("2026-03")}
    assert expected and {h.path for h in march.hits if h.date} == expected


def test_sync_and_calibrate_cli_json(synced: Pipeline, graph_env) -> None:  # type: ignore[no-untyped-def]
    from pipeline.cli import cli

    env = cli_env(synced, graph_env)
    vault = str(synced.settings.vault)
    result = CliRunner().invoke(cli, ["--vault", vault, "sync", "--json"], env=env)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["ingest"]["notes"] == 91
    assert data["embed"]["embedded"] == 0
    assert data["calibrated"] is False
    result = CliRunner().invoke(cli, ["--vault", vault, "calibrate", "--json"], env=env)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["used"] == "vault"
    assert data["stored"]["trusted"] is True
    assert data["stored"]["n_notes"] == 91
    assert data["stored"]["probe_set_version"] == 2
    assert 0 < data["floor_cosine"] < 0.42


def test_answers_are_the_same_from_stored_summaries_and_from_every_fact(
    synced: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """subject_stats is a cache: with it, and with every summary computed from the facts
    (as on a KO-DB just upgraded), each mode and preset gives the same answer, facts too."""
    from pipeline.kodb import schema as kodb_schema
    from pipeline.kodb import summaries as kodb_summaries

    questions = [*UNRELATED, "why did we choose redis for the warm cache?", OFF_TOPIC[0]]
    modes: list[dict[str, object]] = [
        {},
        {"semantic": False},
        {"retrieval": "hybrid"},
        {"preset": "wiki-gap"},
        {"preset": "episodic"},
        {"preset": "crystallize", "semantic": False},
        {"top_k": 3, "facts_per_subject": 5},
    ]

    def answers() -> list[object]:
        out = []
        for extra in modes:
            opts = QueryOptions.from_settings(synced.settings, **extra)
            for q in questions:
                a = synced.ask(q, opts)
                out.append((q, extra, a.mode, a.hits, a.subjects, a.notice))
        return out

    stored = answers()
    assert synced.app.kodb.refresh_subject_stats() == 0  # every subject has its row
    monkeypatch.setattr(kodb_summaries, "read", lambda *args: {})
    computed = answers()
    assert computed == stored
    monkeypatch.undo()
    with synced.app.kodb._tx(write=True) as conn:
        conn.execute(kodb_schema.subject_stats.delete())
    assert answers() == stored
    assert synced.app.kodb.refresh_subject_stats() > 0
