"""How degraded mode and hybrid retrieval should rank notes: variants side by side.

Self-contained: for each collection it makes a temporary vault (a BEIR collection's
documents as wiki notes, as `vault-ko eval` writes them; a judged vault is read as it is),
its own SQLite KO-DB, a scratch PostgreSQL database (when the server answers: set
VAULT_KO_TEST_PG_URL, default postgres@127.0.0.1) and its own local ArcadeDB on free ports;
syncs once; searches every judged question once densely (100 notes); then ranks the notes
under every variant and reports nDCG@10 of the notes:

* full text (degraded mode): KO-DB's search with a title word worth 1, 2, 3 or 5 body
  words (the candidates of SQLite FTS5's ``bm25()`` ordered by vault-ko's BM25); on
  PostgreSQL with the chosen title weight, the candidates of ``ts_rank_cd`` under length
  normalisations 0 (none), 1 (log length) and 32 (r/(r+1)); the bm25s library over the same
  words as the yardstick;
* hybrid: the dense and the full-text ranking fused by their relative scores
  (``fusion.relative_scores``, what hybrid retrieval does) and by z-scores, the vectors
  weighted 0.6–0.9; by reciprocal rank with k = 10, 30, 60 or 100, the full text weighted
  1, ½ or 0.3; against dense alone and BM25 alone.

Collections: tests/data/eval/gardening and astronomy (BEIR layout), examples/vault and
tests/data/vaults/library with their judged questions (a note's grade is its own subject's);
``--collection DIR`` adds BEIR collections (e.g. ../shared/data/ir/cranfield by hand; not in
CI), ``--judged VAULT=FILE`` a vault with its judged questions (the TSC minutes).
``--quick`` runs the two small BEIR collections only. The last line is ``RESULT …`` with
the chosen variants' figures; ``hybrid_minus_best_worst`` is the default rule's margin: the
hybrid's nDCG@10 less the better of dense and BM25, on its worst collection (the rule
holds at −0.01 or above).

Run: ``.venv/bin/python bench/retrieval_rules.py`` (about two minutes).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline import bridge  # noqa: E402
from pipeline.app import App  # noqa: E402
from pipeline.config import load_settings  # noqa: E402
from pipeline.errors import KodbError  # noqa: E402
from pipeline.evaluate.beir import read_collection  # noqa: E402
from pipeline.evaluate.harness import build_vault, grades_by_subject  # noqa: E402
from pipeline.evaluate.judged import read_judged  # noqa: E402
from pipeline.evaluate.metrics import first_occurrences, ndcg_at_k  # noqa: E402
from pipeline.fusion import DENSE_WEIGHT, relative_scores, rrf  # noqa: E402
from pipeline.graph.local import LocalGraph  # noqa: E402
from pipeline.ingest import ingest_vault  # noqa: E402
from pipeline.kodb import KoDB, scratch_database  # noqa: E402
from pipeline.kodb.notes import PG_RANK_NORMALIZATION, TITLE_WEIGHT  # noqa: E402
from pipeline.model import normalize_text  # noqa: E402
from pipeline.query import Pipeline  # noqa: E402
from pipeline.sync import sync_vault  # noqa: E402

PG_ADMIN = os.environ.get(
    "VAULT_KO_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
DEPTH = 100
TITLE_WEIGHTS = (1.0, 2.0, 3.0, 5.0)
PG_NORMALIZATIONS = (0, 1, 32)
FUSIONS = ((10, 1.0), (30, 1.0), (60, 1.0), (100, 1.0), (60, 0.5), (60, 0.3))
DENSE_WEIGHTS = (0.6, 0.7, 0.75, 0.8, 0.85, 0.9)
FUSE_DEPTHS = (20, 30, 50)


@dataclass
class Question:
    text: str
    judged: dict[str, int]  # id -> grade
    dense: list[str]  # note paths, best first
    cosines: list[float]  # their cosines, in the same order


@dataclass
class Collection:
    name: str
    vault: Path
    to_id: dict[str, str]  # note path -> judged id (doc id, or own subject)
    questions: list[Question]


def _ids(col: Collection, paths: list[str]) -> tuple[str, ...]:
    return first_occurrences(col.to_id[p] for p in paths if p in col.to_id)


def _ndcg(col: Collection, rankings: list[list[str]]) -> float:
    scores = [
        ndcg_at_k(_ids(col, r), q.judged, 10) for q, r in zip(col.questions, rankings, strict=True)
    ]
    return sum(scores) / len(scores)


def _prepare(
    source: Path, judged: Path | None, work: Path
) -> Iterator[tuple[Collection, Pipeline]]:
    """Build and sync one collection; yields it with its warm Pipeline (graph running)."""
    from pipeline.embed import get_embedder

    state = work / "state"
    if judged is None:
        beir = read_collection(source)
        vault = work / "vault"
        path_to_doc = build_vault(beir, vault)
        name = beir.name
    else:
        vault, name, path_to_doc = source, source.name, {}
    base = load_settings(vault).replace(state_dir=state, kodb_url=None, graph_url=None)
    embedder = get_embedder(base)
    local = LocalGraph(state)
    local.up(dims=embedder.dims, settings=base)
    try:
        settings = local.settings_for(base)
        with App(settings, embedder=embedder).pipeline() as p:
            sync_vault(settings, p.kodb, p.graph, embedder, force_calibration=True)
            if judged is None:
                to_id = path_to_doc
                items = [(q.text, dict(beir.qrels[q.id])) for q in beir.judged_queries()]
            else:
                to_id = {
                    path: normalize_text(n.subject or n.title) for path, n in p.kodb.notes().items()
                }
                by_path = {normalize_text(path): subject for path, subject in to_id.items()}
                items = [
                    (j.question, grades_by_subject(j.relevant, by_path))
                    for j in read_judged(judged)
                ]
            vectors = embedder.embed([t for t, _ in items])
            questions = []
            for (t, g), v in zip(items, vectors, strict=True):
                hits = p.index_search(v, DEPTH)
                questions.append(
                    Question(t, g, [h.path for h in hits], [h.cosine or 0.0 for h in hits])
                )
            yield Collection(name, vault, to_id, questions), p
    finally:
        local.down()


def _bm25s(col: Collection, kodb: KoDB) -> list[list[str]]:
    import bm25s

    from pipeline.kodb import text as kodb_text

    indexed = kodb.note_texts()
    languages = kodb.index_languages()  # questions stemmed as the notes were
    paths = sorted(indexed)
    retriever = bm25s.BM25()
    retriever.index(
        [f"{a} {b}".split() for a, b in (indexed[p] for p in paths)], show_progress=False
    )
    out = []
    for q in col.questions:
        words = [
            w
            for w in kodb_text.query_words(bridge.query_terms(q.text), languages)
            if w in retriever.vocab_dict
        ]
        if not words:
            out.append([])
            continue
        docs, scores = retriever.retrieve([words], k=min(DEPTH, len(paths)), show_progress=False)
        out.append([paths[d] for d, s in zip(docs[0], scores[0], strict=True) if s > 0])
    return out


def _scored_words(kodb: KoDB, col: Collection, **kw: float) -> list[list[tuple[str, float]]]:
    return [kodb.search_notes(bridge.query_terms(q.text), DEPTH, **kw) for q in col.questions]


def _words(kodb: KoDB, col: Collection, **kw: float) -> list[list[str]]:
    return [[p for p, _ in ranked] for ranked in _scored_words(kodb, col, **kw)]


def _zscored(scores: dict[str, float]) -> dict[str, float]:
    values = list(scores.values())
    mean = sum(values) / len(values)
    sd = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5 or 1.0
    return {k: (v - mean) / sd for k, v in scores.items()}


def _z_fusion(dense: dict[str, float], words: dict[str, float], alpha: float) -> list[str]:
    """Like ``relative_scores`` but on z-scores (an id a ranking lacks: its lowest z)."""
    zd = _zscored(dense) if dense else {}
    zw = _zscored(words) if words else {}
    low_d, low_w = min(zd.values(), default=0.0), min(zw.values(), default=0.0)
    fused = {
        k: alpha * zd.get(k, low_d) + (1 - alpha) * zw.get(k, low_w) for k in set(zd) | set(zw)
    }
    return sorted(fused, key=lambda k: (-fused[k], k))


def measure(col: Collection, p: Pipeline, pg: KoDB | None) -> dict[str, float]:
    row: dict[str, float] = {"dense": _ndcg(col, [q.dense for q in col.questions])}
    for w in TITLE_WEIGHTS:
        row[f"sqlite title×{w:g}"] = _ndcg(col, _words(p.kodb, col, title_weight=w))
    if pg is not None:
        for n in PG_NORMALIZATIONS:
            ranked = _words(pg, col, pg_normalization=n)
            row[f"postgres norm {n}"] = _ndcg(col, ranked)
    row["bm25s"] = _ndcg(col, _bm25s(col, p.kodb))
    words = _words(p.kodb, col)
    for k, weight in FUSIONS:
        fused = [
            rrf([q.dense, w], k=k, weights=[1.0, weight])[:DEPTH]
            for q, w in zip(col.questions, words, strict=True)
        ]
        row[f"rrf k={k} words×{weight:g}"] = _ndcg(col, fused)
    scored = _scored_words(p.kodb, col)
    for alpha in DENSE_WEIGHTS:
        fused = [
            relative_scores([list(zip(q.dense, q.cosines, strict=True)), w], [alpha, 1 - alpha])
            for q, w in zip(col.questions, scored, strict=True)
        ]
        row[f"scores dense×{alpha:g}"] = _ndcg(col, fused)
        fused = [
            _z_fusion(dict(zip(q.dense, q.cosines, strict=True)), dict(w), alpha)
            for q, w in zip(col.questions, scored, strict=True)
        ]
        row[f"z-scores dense×{alpha:g}"] = _ndcg(col, fused)
    for depth in FUSE_DEPTHS:  # fewer notes of each ranking fused: a cheaper graph search
        fused = [
            relative_scores(
                [list(zip(q.dense, q.cosines, strict=True))[:depth], w[:depth]],
                [DENSE_WEIGHT, 1 - DENSE_WEIGHT],
            )
            for q, w in zip(col.questions, scored, strict=True)
        ]
        row[f"scores dense×{DENSE_WEIGHT:g}, {depth} deep"] = _ndcg(col, fused)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--collection", action="append", default=[], type=Path)
    parser.add_argument("--quick", action="store_true", help="the two small BEIR collections")
    parser.add_argument(
        "--judged",
        action="append",
        default=[],
        metavar="VAULT=JUDGED",
        help="adds a vault with its judged questions (JSONL)",
    )
    args = parser.parse_args(argv)
    sources: list[tuple[Path, Path | None]] = [
        (ROOT / "tests/data/eval/gardening", None),
        (ROOT / "tests/data/eval/astronomy", None),
    ]
    if not args.quick:
        sources += [
            (ROOT / "examples/vault", ROOT / "tests/data/judged/examples-vault.jsonl"),
            (ROOT / "tests/data/vaults/library", ROOT / "tests/data/judged/library.jsonl"),
        ]
    sources += [(c, None) for c in args.collection]
    for pair in args.judged:
        vault, _, judged = pair.partition("=")
        sources.append((Path(vault), Path(judged)))
    table: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="vault-ko-bench-retrieval-") as tmp:
        for i, (source, judged) in enumerate(sources):
            work = Path(tmp) / str(i)
            with ExitStack() as stack:
                for col, p in _prepare(source, judged, work):
                    pg = None
                    try:
                        url = stack.enter_context(scratch_database(PG_ADMIN, "vaultko_bench"))
                        pg = stack.enter_context(KoDB.open(url))
                        ingest_vault(p.settings.replace(kodb_url=url), pg)
                    except KodbError as exc:
                        print(f"PostgreSQL left out: {exc}", file=sys.stderr)
                    table[col.name] = measure(col, p, pg)
                    print(f"measured {col.name}: {len(col.questions)} questions", file=sys.stderr)
            shutil.rmtree(work, ignore_errors=True)
    names = list(table)
    variants = list(next(iter(table.values())))
    print("| ranking (nDCG@10 of the notes) | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for v in variants:
        print(
            f"| {v} | " + " | ".join(f"{table[n].get(v, float('nan')):.3f}" for n in names) + " |"
        )
    chosen_words = f"sqlite title×{TITLE_WEIGHT:g}"
    chosen_fusion = f"scores dense×{DENSE_WEIGHT:g}"
    worst = min(table[n][chosen_fusion] - table[n]["dense"] for n in names)
    better = sum(table[n][chosen_fusion] > table[n]["dense"] for n in names)
    # The default rule: within 0.01 of the better of dense and BM25 on every collection.
    short = min(table[n][chosen_fusion] - max(table[n]["dense"], table[n]["bm25s"]) for n in names)
    # The same against vault-ko's own BM25 (degraded mode's ranking) where it is the better.
    own = min(
        table[n][chosen_fusion] - max(table[n]["dense"], table[n][chosen_words]) for n in names
    )
    ratio = min(table[n][chosen_words] / table[n]["bm25s"] for n in names if table[n]["bm25s"])
    pg_key = f"postgres norm {PG_RANK_NORMALIZATION}"
    pg_gap = max(
        (abs(table[n][pg_key] - table[n][chosen_words]) for n in names if pg_key in table[n]),
        default=float("nan"),
    )
    print(
        f"\nRESULT collections={len(names)} fallback_over_bm25s_min={ratio:.3f} "
        f"hybrid_better_on={better}/{len(names)} hybrid_minus_dense_worst={worst:+.3f} "
        f"hybrid_minus_best_worst={short:+.3f} hybrid_minus_best_own_bm25_worst={own:+.3f} "
        f"postgres_minus_sqlite_max={pg_gap:.3f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
