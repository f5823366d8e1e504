"""A long-note collection made from a BEIR-layout one, and what embedding passages would buy.

    python scripts/long_notes.py SOURCE OUT [--per-note 8] [--seed 39] [--measure]
    python scripts/long_notes.py VAULT --judged JUDGED.jsonl

SOURCE is a collection `vault-ko eval` reads (``docs.jsonl``, ``queries.jsonl``,
``qrels.tsv``). OUT gets the same layout in which each document is one note made of
``--per-note`` source documents, drawn at random (seeded), each as a section of its own
(``## title`` and its text). A note's grade for a question is the best grade of its
sections, so most answers sit in a section past the head that a note's single embedding
holds (the model reads at most 256 tokens). ``vault-ko eval OUT`` then measures the real
pipeline on it.

``--measure`` compares, in this process with the bundled model and an exact search, two
ways of scoring a note for a question: its one embedding (title and text, as vault-ko
embeds a note) and its best passage (``pipeline/vault/passages.py``: sections packed into
passages that fit the model, the note scored by the best). It prints nDCG@10 and recall@10
of each, vectors per note and embedding time, and ends with ``RESULT`` lines. It measures
retrieval alone, not answers. ``--judged`` makes the same comparison on a real vault whose
judged questions name notes by path (``tests/data/judged/tsc-meetings.jsonl``).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

from pipeline.evaluate.beir import read_docs, read_qrels, read_queries
from pipeline.evaluate.metrics import ndcg_at_k, recall_at_k
from pipeline.vault.parse import embed_plain
from pipeline.vault.passages import passages as cut


def build(source: Path, out: Path, per_note: int, seed: int) -> dict[str, list[str]]:
    """Write the long-note collection; note id -> its source documents, in order."""
    docs = read_docs(source / "docs.jsonl")
    ids = [d for d in sorted(docs, key=_numeric) if docs[d].text.strip()]
    random.Random(seed).shuffle(ids)
    notes = {
        f"n{i // per_note + 1:04d}": ids[i : i + per_note] for i in range(0, len(ids), per_note)
    }
    out.mkdir(parents=True, exist_ok=True)
    with (out / "docs.jsonl").open("w", encoding="utf-8") as f:
        for note, parts in notes.items():
            body = "\n\n".join(f"## {docs[d].title}\n\n{docs[d].text}" for d in parts)
            title = f"Report {note[1:]}"
            f.write(json.dumps({"id": note, "title": title, "text": body}) + "\n")
    of_doc = {d: note for note, parts in notes.items() for d in parts}
    qrels = read_qrels(source / "qrels.tsv")
    with (out / "qrels.tsv").open("w", encoding="utf-8") as f:
        for query, judged in sorted(qrels.items(), key=lambda kv: _numeric(kv[0])):
            best: dict[str, int] = {}
            for doc, grade in judged.items():
                if doc in of_doc:
                    note = of_doc[doc]
                    best[note] = max(best.get(note, 0), grade)
            for note, grade in sorted(best.items()):
                f.write(f"{query}\t{note}\t{grade}\n")
    (out / "queries.jsonl").write_text(
        (source / "queries.jsonl").read_text(encoding="utf-8"), encoding="utf-8"
    )
    return notes


def measure(out: Path) -> None:
    docs = read_docs(out / "docs.jsonl")
    queries = read_queries(out / "queries.jsonl")
    qrels = read_qrels(out / "qrels.tsv")
    judged = {q: j for q, j in qrels.items() if q in queries and any(g > 0 for g in j.values())}
    _compare(
        {d: (docs[d].title, docs[d].text) for d in docs},
        {q: queries[q].text for q in judged},
        judged,
    )


def _compare(
    docs: dict[str, tuple[str, str]], queries: dict[str, str], judged: dict[str, dict[str, int]]
) -> None:
    """nDCG@10 and recall@10 of one embedding a note against its best passage."""
    import numpy as np

    from pipeline.embed import Embedder

    embedder = Embedder()
    if embedder.token_lengths(["probe"]) is None:
        raise SystemExit("this model's tokenizer cannot count tokens: no passages to measure")
    ids = sorted(docs)
    t0 = time.perf_counter()
    heads = embedder.embed([f"{docs[n][0]}\n\n{embed_plain(docs[n][1])}" for n in ids])
    head_s = time.perf_counter() - t0
    passages: list[str] = []
    owner: list[int] = []
    limit = embedder.max_seq_length
    for i, n in enumerate(ids):
        for text in cut(docs[n][0], docs[n][1], embedder.token_lengths, limit):
            passages.append(text)
            owner.append(i)
    t0 = time.perf_counter()
    parts = embedder.embed(passages)
    passage_s = time.perf_counter() - t0
    owners = np.asarray(owner)
    qids = sorted(judged, key=_numeric)
    qv = embedder.embed([queries[q] for q in qids])
    scores: dict[str, list[tuple[float, float]]] = {"head": [], "passages": []}
    for row, q in zip(qv, qids, strict=True):
        by_head = heads @ row
        by_part = np.full(len(ids), -np.inf)
        np.maximum.at(by_part, owners, parts @ row)
        for name, s in (("head", by_head), ("passages", by_part)):
            ranked = [ids[i] for i in np.argsort(-s, kind="stable")[:10]]
            grades = judged[q]
            scores[name].append((ndcg_at_k(ranked, grades, 10), recall_at_k(ranked, grades, 10)))
    for name, rows in scores.items():
        ndcg = statistics.fmean(r[0] for r in rows)
        rec = statistics.fmean(r[1] for r in rows)
        print(f"{name:9s} nDCG@10 {ndcg:.3f}  recall@10 {rec:.3f}  ({len(rows)} questions)")
    per_note = len(passages) / len(ids)
    print(
        f"RESULT long_notes={len(ids)} questions={len(qids)} "
        f"head_ndcg10={statistics.fmean(r[0] for r in scores['head']):.3f} "
        f"passages_ndcg10={statistics.fmean(r[0] for r in scores['passages']):.3f} "
        f"vectors_per_note={per_note:.2f} head_embed_s={head_s:.1f} "
        f"passages_embed_s={passage_s:.1f}"
    )


def measure_vault(vault: Path, judged_file: Path) -> None:
    """The same comparison on a vault and its judged questions whose keys are note paths
    (``meetings/x.md``): each note as the embed sync reads it (title and body)."""
    from pipeline.config import load_settings
    from pipeline.evaluate.judged import read_judged
    from pipeline.vault.parse import read_note
    from pipeline.vault.scan import scan_vault

    settings = load_settings(vault, env={})
    docs = {}
    for entry in scan_vault(settings):
        note = read_note(vault, entry.path, entry.source_type, settings.vault_max_note_bytes)
        docs[entry.path.casefold()] = (note.title, note.body)
    judged = {
        str(i): dict(j.relevant) for i, j in enumerate(read_judged(judged_file)) if j.relevant
    }
    queries = {str(i): j.question for i, j in enumerate(read_judged(judged_file))}
    _compare(docs, queries, judged)


def _numeric(key: str) -> tuple[int, str]:
    return (int(key), "") if key.isdigit() else (sys.maxsize, key)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("out", type=Path, nargs="?", default=Path("long-notes"))
    parser.add_argument("--per-note", type=int, default=8)
    parser.add_argument("--seed", type=int, default=39)
    parser.add_argument("--measure", action="store_true")
    parser.add_argument(
        "--judged", type=Path, help="SOURCE is a vault and this its judged set (keys: paths)"
    )
    args = parser.parse_args()
    if args.judged:
        measure_vault(args.source, args.judged)
        return 0
    notes = build(args.source, args.out, args.per_note, args.seed)
    print(f"{len(notes)} notes of up to {args.per_note} sections in {args.out}")
    if args.measure:
        measure(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
