"""Exact (brute-force) cosine kNN over a relevance set, without a cluster.

``mathsearch eval retrieval --task ...`` measures every ranking mode on a live index; choosing
between trained encoders only needs their vectors' nearest neighbours. This module ranks the
whole collection of a :class:`~mathsearch.evaluation.relevance_sets.RelevanceSet` by cosine
similarity to each topic's own vector (its ``exclude`` ids never ranked) and scores the runs with
:func:`~mathsearch.evaluation.ir_metrics.evaluate`, on every topic and on the test half that the
index form reports (:func:`~mathsearch.evaluation.retrieval_eval.split_topics`, same seed), so
the figures line up with the index form's ``knn`` row up to HNSW's approximation.

Example::

    data = build_relevance("same-document", papers=100, topics=200, only_papers=validation)
    run = exact_knn_run([e.eq_id for e in data.collection], vectors, data.topics)
    evaluate(data.qrels, run, ["nDCG@10"]).means["nDCG@10"]
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mathsearch.core.errors import EvaluationError
from mathsearch.evaluation.ir_metrics import evaluate
from mathsearch.evaluation.relevance_sets import RelevanceSet
from mathsearch.evaluation.trec_files import Run, Topic

logger = logging.getLogger(__name__)

__all__ = ["exact_knn_report", "exact_knn_run"]

DEFAULT_MEASURES = ("nDCG@10", "P@10", "P@100", "MAP")


def exact_knn_run(
    ids: Sequence[str], vectors: np.ndarray, topics: Sequence[Topic], *, depth: int = 100
) -> Run:
    """Rank ``ids`` by cosine similarity to each topic's own row of ``vectors``.

    A topic's query vector is the row of its ``qid`` (the query is a collection equation, as in
    the same-document and equivalence tasks); its ``exclude`` ids are never ranked. Topics whose
    ``qid`` is not in ``ids`` (refused by the featurisation) get no ranking.

    Args:
        ids: collection ids, one per row of ``vectors``.
        vectors: ``(n, d)`` embeddings; rows are L2-normalised here (zero rows stay zero).
        topics: the topics to rank for.
        depth: results kept per topic (100).

    Raises:
        EvaluationError: ``vectors`` is not ``(len(ids), d)`` or ``depth`` < 1.
    """
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim != 2 or matrix.shape[0] != len(ids):
        raise EvaluationError(f"vectors {matrix.shape} do not match {len(ids)} ids")
    if depth < 1:
        raise EvaluationError(f"depth must be >= 1, not {depth}")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit = matrix / np.maximum(norms, 1e-12)
    row = {eq_id: i for i, eq_id in enumerate(ids)}
    run: Run = {}
    for topic in topics:
        if topic.qid not in row:
            continue
        scores = unit @ unit[row[topic.qid]]
        for eq_id in topic.exclude:
            if eq_id in row:
                scores[row[eq_id]] = -np.inf
        keep = min(depth, len(ids) - sum(1 for e in set(topic.exclude) if e in row))
        if keep < 1:
            continue
        top = np.argpartition(-scores, keep - 1)[:keep]
        top = top[np.lexsort((top, -scores[top]))]  # by score, then by row: deterministic
        run[topic.qid] = [(ids[j], float(scores[j])) for j in top]
    return run


def exact_knn_report(
    data: RelevanceSet,
    ids: Sequence[str],
    systems: Mapping[str, np.ndarray],
    *,
    test_topics: Sequence[Topic] | None = None,
    depth: int = 100,
    measures: Sequence[str] = DEFAULT_MEASURES,
) -> dict[str, Any]:
    """Each system's exact kNN scores on all topics and (when given) on ``test_topics``.

    Returns ``{"systems": {name: {"all": Evaluation.to_dict(), "test": ...}}, "topics": n,
    "test_topics": m, "equations": len(ids)}``.

    Raises:
        EvaluationError: as :func:`exact_knn_run` and
            :func:`~mathsearch.evaluation.ir_metrics.evaluate`.
    """
    report: dict[str, Any] = {
        "equations": len(ids),
        "topics": len(data.topics),
        "test_topics": None if test_topics is None else len(test_topics),
        "depth": depth,
        "systems": {},
    }
    for name, vectors in systems.items():
        run = exact_knn_run(ids, vectors, data.topics, depth=depth)
        scores = {"all": evaluate(data.qrels, run, measures).to_dict()}
        if test_topics is not None:
            wanted = {t.qid for t in test_topics}
            qrels = {qid: judged for qid, judged in data.qrels.items() if qid in wanted}
            test_run = {qid: ranking for qid, ranking in run.items() if qid in wanted}
            scores["test"] = evaluate(qrels, test_run, measures).to_dict()
        report["systems"][name] = scores
        logger.info("exact kNN %s: nDCG@10 %s", name, scores["all"]["means"].get("nDCG@10"))
    return report
