"""``knn``: nearest neighbours of the query's equation embedding (vectors only).

Body: lucene HNSW ``knn`` on the vector field, the filters inside the graph search. Several
fields: a ``bool`` ``should`` of one kNN query per field, each boosted by its weight share, so
a hit scores ``sum_i w_i * knn_i`` (0 for a field whose top k missed it).
Score: the k-NN plugin's (``1 + ip`` for innerproduct, ``(1 + cos) / 2`` for cosinesimil). The
graph is asked for at least :data:`MIN_CANDIDATES` neighbours (recall), ``k`` are shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from mathsearch.opensearch.modes.base import ModeContext, SearchMode, per_field
from mathsearch.opensearch.queries import (
    NO_FILTERS,
    Filters,
    Mode,
    VectorQuery,
    base_body,
    multi_knn_query,
)
from mathsearch.opensearch.results import FieldScore, Hit, ScoreBreakdown
from mathsearch.opensearch.search_fields import EQUATION_FIELDS, SearchFields

if TYPE_CHECKING:
    from mathsearch.opensearch.search_request import SearchRequest
    from mathsearch.opensearch.vector_plan import VectorPlan

#: The fewest neighbours the HNSW graph is asked for (Lucene's ``k``, the search-time beam), even
#: when fewer hits are shown: at 100k equations (``mathsearch bench recall``, 200 topic
#: queries, m 16, ef_construction 128) recall@10 against exact search was 0.900 asking for 10,
#: 0.955 for 20, 0.972 for 30 and 0.990 for 100, at the same p50 (3.2-3.6 ms).
MIN_CANDIDATES = 30

#: How the k-NN plugin computes the ``knn`` score of a field.
KNN_FORMULA = (
    "knn (the k-NN plugin's score: 1 + ip for innerproduct, (1 + cos) / 2 for cosinesimil)"
)


def knn_body_multi(
    vectors: Sequence[VectorQuery],
    *,
    size: int,
    filters: Filters = NO_FILTERS,
    source: Sequence[str] = (),
    k: int | None = None,
    fields: SearchFields = EQUATION_FIELDS,
) -> dict:
    """kNN over one or several fields (:func:`~mathsearch.opensearch.queries.multi_knn_query`).

    >>> knn_body_multi([VectorQuery("vec", [1.0, 0.0])], size=2)["query"]
    {'knn': {'vec': {'vector': [1.0, 0.0], 'k': 2}}}
    """
    query = multi_knn_query(vectors, k or size, filters, fields)
    return {**base_body(size, source), "query": query}


def knn_breakdown(score: float) -> ScoreBreakdown:
    """One field: the score is the k-NN plugin's."""
    return ScoreBreakdown(knn=score, score=score, formula=KNN_FORMULA)


def multi_knn_breakdown(
    score: float, raw: Sequence[float | None], fields: Sequence[str], shares: Sequence[float]
) -> ScoreBreakdown:
    """Several fields: ``sum_i share_i * knn_i`` (``raw[i]``: the hit's score in field ``i``'s
    top k, ``None`` when that list missed it and it adds 0)."""
    parts = [
        FieldScore(name, value, None if value is None else share * value, share)
        for name, value, share in zip(fields, raw, shares, strict=True)
    ]
    terms = " + ".join(f"{part.weight:.3g} * knn({part.field})" for part in parts)
    return ScoreBreakdown(
        knn=raw[0],
        knn_normalized=parts[0].normalized,
        score=score,
        formula=f"{terms} (0 where a field's top k missed the hit)",
        fields=parts,
    )


class KnnMode(SearchMode):
    mode = Mode.KNN
    summary = "Nearest neighbours of the query's equation embedding (vectors only)."
    uses_bm25 = False

    def run(
        self, ctx: ModeContext, request: SearchRequest, tokens: list[str], plan: VectorPlan
    ) -> list[Hit]:
        candidates = max(request.k, MIN_CANDIDATES)
        body = knn_body_multi(
            plan.queries, size=request.k, k=candidates, filters=request.filters,
            source=ctx.source_fields(request), fields=ctx.fields,
        )  # fmt: skip
        hits = ctx.hits_of(ctx.run_body(body), tokens, annotate=request.annotate)
        if not request.explain:
            return hits
        if len(plan.queries) == 1:
            for hit in hits:
                hit.explanation = knn_breakdown(hit.score)
            return hits
        lists = per_field(ctx, request, plan, candidates)
        for hit in hits:
            raw = [found.get(hit.eq_id) for found in lists]
            hit.explanation = multi_knn_breakdown(hit.score, raw, plan.fields, plan.shares)
        return hits


MODE = KnnMode()
