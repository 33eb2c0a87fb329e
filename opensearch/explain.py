"""Score breakdowns for ``--explain``: pure functions over fused hits and stored vectors."""

from __future__ import annotations

import math
from collections.abc import Sequence

from opensearch.fusion import FusedHit
from opensearch.queries import Mode
from opensearch.results import ScoreBreakdown
from opensearch.search_request import SearchRequest

#: How the ``knn`` score of an inner-product field is computed by the k-NN plugin.
KNN_FORMULA = "knn (inner product: 1 + ip, or 1 / (1 - ip) below 0)"


def fusion_weights(alpha: float) -> list[float]:
    """The ``[bm25, knn]`` weights of ``alpha`` (the vector's share)."""
    return [round(1.0 - alpha, 6), round(alpha, 6)]


def fusion_breakdown(request: SearchRequest, item: FusedHit) -> ScoreBreakdown:
    if request.mode is Mode.RRF:
        formula = f"sum over subqueries of 1 / ({request.rank_constant} + rank)"
    else:
        w = fusion_weights(request.alpha)
        formula = (
            f"{request.combination.value}({request.normalization.value}(bm25), "
            f"{request.normalization.value}(knn); weights {w[0]:g}, {w[1]:g})"
        )
    return ScoreBreakdown(
        bm25=item.raw[0],
        knn=item.raw[1],
        bm25_normalized=item.normalized[0],
        knn_normalized=item.normalized[1],
        score=item.score,
        formula=formula,
    )


def cos01(query: Sequence[float], doc: Sequence[float]) -> float:
    dot = sum(a * b for a, b in zip(query, doc, strict=True))
    norm = math.sqrt(sum(a * a for a in query)) * math.sqrt(sum(b * b for b in doc))
    return (1.0 + (dot / norm if norm else 0.0)) / 2.0


def knn_score(query: Sequence[float], doc: Sequence[float]) -> float:
    ip = sum(a * b for a, b in zip(query, doc, strict=True))
    return 1.0 + ip if ip >= 0 else 1.0 / (1.0 - ip)


def single_breakdown(mode: Mode, score: float) -> ScoreBreakdown:
    """``bm25`` and ``knn`` modes: the score is the one subquery's."""
    if mode is Mode.BM25:
        return ScoreBreakdown(bm25=score, score=score, formula="bm25")
    return ScoreBreakdown(knn=score, score=score, formula=KNN_FORMULA)


def rescore_breakdown(
    request: SearchRequest,
    score: float,
    bm25: float | None,
    query_vector: Sequence[float],
    doc_vector: Sequence[float] | None,
) -> ScoreBreakdown:
    """``rescore`` / ``knn-rescore``: the hit's exact BM25 and its vector score, and the formula.

    ``knn`` holds ``(1 + cos) / 2`` for ``rescore`` and the k-NN score for ``knn-rescore``.
    """
    a = request.alpha
    if request.mode is Mode.RESCORE:
        vector_score = cos01(query_vector, doc_vector) if doc_vector else None
        formula = f"{1 - a:.2f} * bm25 + {a:.2f} * (1 + cos) / 2"
    else:
        vector_score = knn_score(query_vector, doc_vector) if doc_vector else None
        formula = f"{a:.2f} * knn + {1 - a:.2f} * bm25"
    return ScoreBreakdown(bm25=bm25, knn=vector_score, score=score, formula=formula)
