"""``knn-rescore``: k-NN retrieves a window, which is rescored with BM25.

Body: HNSW retrieves ``window`` hits, the ``rescore`` section re-ranks them by ``alpha * knn +
(1 - alpha) * bm25``. Several fields: the multi-field kNN (weight shares) scaled by the vector
weights' sum, plus ``w_0 * bm25`` (default ``1 - alpha``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from mathsearch.core.errors import QueryError
from mathsearch.opensearch.modes.base import ModeContext, SearchMode, per_field
from mathsearch.opensearch.queries import (
    Filters,
    Mode,
    VectorQuery,
    base_body,
    bm25_query,
    check_alpha,
    multi_knn_query,
)
from mathsearch.opensearch.results import FieldScore, Hit, ScoreBreakdown
from mathsearch.opensearch.search_fields import EQUATION_FIELDS, SearchFields

if TYPE_CHECKING:
    from mathsearch.opensearch.search_request import SearchRequest
    from mathsearch.opensearch.vector_plan import VectorPlan


def knn_rescore_body(
    tokens: Sequence[str],
    words: str,
    vectors: Sequence[VectorQuery],
    *,
    size: int,
    window: int,
    alpha: float,
    filters: Filters,
    source: Sequence[str],
    bm25_weight: float | None = None,
    fields: SearchFields = EQUATION_FIELDS,
) -> dict:
    """HNSW retrieves ``window`` hits, re-ranked by ``alpha * knn + (1 - alpha) * bm25``.

    Several fields: the multi-field kNN (weight shares) scaled by the vector weights' sum,
    plus ``bm25_weight * bm25`` (default ``1 - alpha``).

    Raises:
        QueryError: alpha outside [0, 1], a window smaller than ``size``.
    """
    check_alpha(alpha)
    first = multi_knn_query(vectors, window, filters, fields)
    second = bm25_query(tokens, words, fields=fields)
    if len(vectors) == 1:
        weights = (alpha, 1 - alpha)
    else:
        total = float(sum(v.weight for v in vectors))
        weights = (total, 1 - alpha if bm25_weight is None else bm25_weight)
    if window < size:
        raise QueryError(f"the rescore window ({window}) must hold at least k ({size}) hits")
    return {
        **base_body(size, source),
        "query": first,
        "rescore": {
            "window_size": int(window),
            "query": {
                "rescore_query": second,
                "query_weight": weights[0],
                "rescore_query_weight": weights[1],
                "score_mode": "total",
            },
        },
    }


def rescore_breakdown(
    request: SearchRequest, score: float, bm25: float | None, knn: float | None
) -> ScoreBreakdown:
    """One field: the hit's exact BM25, its k-NN score (the plugin's, for the field's space
    type: ``1 + ip`` for innerproduct, ``(1 + cos) / 2`` for cosinesimil) and the formula."""
    a = request.alpha
    formula = f"{a:.2f} * knn + {1 - a:.2f} * bm25"
    return ScoreBreakdown(bm25=bm25, knn=knn, score=score, formula=formula)


def multi_rescore_breakdown(
    score: float,
    *,
    bm25: float | None,
    raw: Sequence[float | None],
    fields: Sequence[str],
    weights: Sequence[float],
) -> ScoreBreakdown:
    """Several fields: ``weights[0] * bm25 + sum_i weights[i] * knn_i`` (``raw[i]``: the
    field's kNN score, ``None`` where its top window missed the hit)."""
    parts = [
        FieldScore(name, value, None if value is None else weight * value, weight)
        for name, value, weight in zip(fields, raw, weights[1:], strict=True)
    ]
    terms = " + ".join(f"{part.weight:.3g} * knn({part.field})" for part in parts)
    return ScoreBreakdown(
        bm25=bm25,
        knn=raw[0],
        knn_normalized=parts[0].normalized,
        score=score,
        formula=f"{weights[0]:.3g} * bm25 + {terms}",
        fields=parts,
    )


class KnnRescoreMode(SearchMode):
    mode = Mode.KNN_RESCORE
    summary = "k-NN retrieves a window, which is rescored with BM25."
    parameters = ("alpha", "window")

    def run(
        self, ctx: ModeContext, request: SearchRequest, tokens: list[str], plan: VectorPlan
    ) -> list[Hit]:
        body = knn_rescore_body(
            tokens, request.text, plan.queries, size=request.k, window=request.window,
            alpha=request.alpha, bm25_weight=plan.bm25_weight, filters=request.filters,
            source=ctx.source_fields(request), fields=ctx.fields,
        )  # fmt: skip
        hits = ctx.hits_of(ctx.run_body(body), tokens, annotate=request.annotate)
        if request.explain:
            self._explain(ctx, request, hits, tokens, plan)
        return hits

    def _explain(
        self,
        ctx: ModeContext,
        request: SearchRequest,
        hits: list[Hit],
        tokens: list[str],
        plan: VectorPlan,
    ) -> None:
        bm25 = ctx.bm25_scores([hit.eq_id for hit in hits], tokens, request.text)
        columns = per_field(ctx, request, plan, request.window)  # the server's kNN scores
        if len(plan.queries) == 1:
            for hit in hits:
                hit.explanation = rescore_breakdown(
                    request, hit.score, bm25.get(hit.eq_id), columns[0].get(hit.eq_id)
                )
            return
        for hit in hits:
            hit.explanation = multi_rescore_breakdown(
                hit.score,
                bm25=bm25.get(hit.eq_id),
                raw=[column.get(hit.eq_id) for column in columns],
                fields=plan.fields,
                weights=plan.weights,
            )


MODE = KnnRescoreMode()
