"""`vault-ko eval`: retrieval quality and relevance labels on a BEIR-format collection.

``beir`` reads collections, ``metrics`` holds the pure measures, ``harness`` runs a
collection through a throwaway vault and graph, ``report`` renders the result.
"""

from __future__ import annotations

from pipeline.evaluate.beir import (
    Collection,
    Doc,
    Query,
    read_collection,
    read_offtopic,
    read_qrels,
)
from pipeline.evaluate.harness import EvalReport, QueryOutcome, build_vault, run_eval
from pipeline.evaluate.metrics import mean_scores, mrr_at_k, ndcg_at_k, recall_at_k, roc_auc
from pipeline.evaluate.report import to_markdown

__all__ = [
    "Collection",
    "Doc",
    "EvalReport",
    "Query",
    "QueryOutcome",
    "build_vault",
    "mean_scores",
    "mrr_at_k",
    "ndcg_at_k",
    "read_collection",
    "read_offtopic",
    "read_qrels",
    "recall_at_k",
    "roc_auc",
    "run_eval",
    "to_markdown",
]
