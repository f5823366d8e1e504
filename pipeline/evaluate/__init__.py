"""`vault-ko eval`: retrieval, answer quality and relevance labels.

``beir`` reads BEIR collections, ``judged`` judged question sets for a vault, ``metrics``
holds the pure measures, ``harness`` runs a collection or a judged vault through throwaway
stores and graph, ``report`` renders the result.
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
from pipeline.evaluate.harness import (
    EvalReport,
    QueryOutcome,
    build_vault,
    run_eval,
    run_vault_eval,
)
from pipeline.evaluate.judged import JudgedQuestion, read_judged
from pipeline.evaluate.metrics import mean_scores, mrr_at_k, ndcg_at_k, recall_at_k, roc_auc
from pipeline.evaluate.report import to_markdown

__all__ = [
    "Collection",
    "Doc",
    "EvalReport",
    "JudgedQuestion",
    "Query",
    "QueryOutcome",
    "build_vault",
    "mean_scores",
    "mrr_at_k",
    "ndcg_at_k",
    "read_collection",
    "read_judged",
    "read_offtopic",
    "read_qrels",
    "recall_at_k",
    "roc_auc",
    "run_eval",
    "run_vault_eval",
    "to_markdown",
]
