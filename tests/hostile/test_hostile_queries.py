"""Hostile questions and search terms: LIKE, FTS and Cypher syntax, quotes, backslashes, NUL,
lone surrogates and a 100 KB paste. Each is answered (degraded mode: where user text meets
SQL and full-text syntax) exactly as the same words without the syntax would be, and the
stores are unchanged afterwards — on SQLite and on PostgreSQL."""

from __future__ import annotations

import os
import random
import shutil
import string
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pipeline import bridge
from pipeline.app import App
from pipeline.config import load_settings
from pipeline.embed import Embedder
from pipeline.ingest import ingest_vault
from pipeline.kodb import KoDB
from pipeline.kodb.match import reference_search
from pipeline.model import Fact

EXAMPLE_VAULT = Path(__file__).resolve().parents[2] / "examples" / "vault"
#: Subjects whose names hold the characters LIKE and FTS treat specially.
SPECIAL_SUBJECTS = ["100% uptime", "snake_case names", "C:\\temp\\cache", 'the "quoted" cache']


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def app(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    """The sample vault ingested into KO-DB (SQLite and PostgreSQL), once per module; no
    graph started, so every question is answered in degraded mode without the model."""
    vault = tmp_path_factory.mktemp("hostile-queries") / "vault"
    shutil.copytree(EXAMPLE_VAULT, vault, ignore=shutil.ignore_patterns(".vault-ko"))
    if request.param == "sqlite":
        url = f"sqlite:///{vault.parent / 'ko.db'}"
    else:
        url = request.getfixturevalue("reset_pg")()
    settings = load_settings(vault, overrides={"kodb_url": url}, env={}, cwd=vault)
    with App(settings) as app:
        ingest_vault(settings, app.kodb)
        app.kodb.import_facts(
            [Fact(s, "kind", "special", 0.9, "wiki", "special.md") for s in SPECIAL_SUBJECTS]
        )
        yield app


def subjects_of(app: App, question: str) -> tuple[str, list[str]]:
    answer = app.pipeline().ask(question)
    assert answer.mode == "fallback"
    return answer.relevance.label, [s.subject for s in answer.subjects]


#: (hostile question, the plain question it must answer like)
SAME_AS = [
    ("redis%", "redis"),
    ("redis_", "redis"),
    ("%redis%", "redis"),
    ("redis' OR '1'='1", "redis"),
    ('redis" OR "x', "redis"),
    ("redis\\", "redis"),
    ("redis\x00cache", "redis cache"),
    ("redis*", "redis"),
    ("NEAR(redis cache)", "near redis cache"),
    ("redis AND NOT cache", "redis and not cache"),
    ("^redis", "redis"),
    ("MATCH (n) DETACH DELETE n RETURN redis", "match detach delete return redis"),
    ("'}) CALL db.labels() //redis", "call labels redis"),
    ("redis \udcff\ud800", "redis"),
]


@pytest.mark.parametrize(("hostile", "plain"), SAME_AS)
def test_a_question_with_query_syntax_is_answered_like_its_plain_words(
    app: App,
    hostile: str,
    plain: str,
    dump_kodb: Callable[[str], dict[str, list[tuple[Any, ...]]]],
) -> None:
    before = dump_kodb(app.settings.effective_kodb_url)
    assert subjects_of(app, hostile) == subjects_of(app, plain)
    assert subjects_of(app, plain)[1]  # the comparison is not between two empty answers
    assert dump_kodb(app.settings.effective_kodb_url) == before


@pytest.mark.parametrize("question", ["%", "_", "%%__", "\\", "'", '"', "\x00", "*", "()", "--"])
def test_a_question_of_syntax_alone_is_no_match(app: App, question: str) -> None:
    assert subjects_of(app, question) == ("no_match", [])


@pytest.mark.parametrize(
    ("term", "expected"),
    [
        ("%", []),  # "0%": no word boundary before it
        ("100%", ["100% uptime"]),
        ("_", []),  # "_" is a word character: inside "snake_case", never at a boundary
        ("e_c", []),
        ("snake_case", ["snake_case names"]),
        ("\\", []),
        ("temp\\cache", ["c:\\temp\\cache"]),
        ('"quoted"', ['the "quoted" cache']),
        ("'", []),
    ],
)
def test_like_wildcards_in_a_search_term_match_only_themselves(
    app: App, term: str, expected: list[str]
) -> None:
    found = app.kodb.search_subjects(term)
    assert found == expected
    assert found == reference_search(term, app.kodb.subject_norms())


def test_a_100_kb_question_searches_its_first_64_terms(app: App) -> None:
    rng = random.Random(15)
    words = ["redis", "cache"] + [
        "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(4, 9)))
        for _ in range(14_000)
    ]
    question = " ".join(words)
    assert len(question) > 100_000
    terms = bridge.query_terms(question)
    assert terms == bridge.query_terms(" ".join(words[: len(terms)]))
    assert len(terms) == bridge.MAX_QUERY_TERMS
    head = " ".join(terms)
    assert subjects_of(app, question) == subjects_of(app, head)


class StrictEncoder:
    """Refuses what the Rust tokenizer refuses: text that cannot be encoded as UTF-8."""

    max_seq_length = 256

    def encode(self, sentences: list[str], **_kwargs: Any) -> np.ndarray:
        for text in sentences:
            text.encode("utf-8")
        return np.ones((len(sentences), 4), dtype=np.float32)


def test_a_text_with_lone_surrogates_is_embedded_not_refused_by_the_tokenizer() -> None:
    embedder = Embedder.from_encoder(StrictEncoder(), model_id="strict", dims=4)
    vector = embedder.embed_one("redis \udcff cache \ud800")
    assert vector.shape == (4,)


def test_the_answer_to_a_question_with_lone_surrogates_is_valid_utf8(app: App) -> None:
    answer = app.pipeline().ask("redis \udcff")
    answer.query.encode("utf-8")
    assert answer.query == "redis \ufffd"


def test_the_query_cli_takes_an_argument_that_is_not_utf8(vault_copy: Path) -> None:
    settings = load_settings(vault_copy, env={}, cwd=vault_copy)
    with KoDB.open(settings.effective_kodb_url) as kodb:
        ingest_vault(settings, kodb)
    exe = str(Path(sys.executable).with_name("vault-ko"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_KO_")}
    for fmt in ("json", "text"):
        argv = [exe.encode(), b"--vault", os.fsencode(vault_copy), b"query", b"redis \xff\xfe"]
        done = subprocess.run(
            [*argv, b"--no-service", b"--format", fmt.encode()],
            capture_output=True,
            env=env,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
        assert b"Traceback" not in done.stderr
        done.stdout.decode("utf-8")  # valid UTF-8 whatever the argument was
