"""``rescore``: BM25 retrieves a window, which is rescored with vector similarity.

The figure-embeddings seed's tf-idf + embedding interpolation, client-side over one request:
the plain BM25 body fetches ``window`` hits with their stored vectors, BM25 and each field's
``(1 + cos) / 2`` are normalised inside the window (``normalization``, default min_max), and
``w_0 * N(bm25) + sum_i w_i * N((1 + cos_i) / 2)`` ranks them
(:mod:`mathsearch.opensearch.window_rescore`; one field: ``(1 - alpha) * N(bm25) + alpha *
N(cos)``), so alpha means the same for every query.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from mathsearch.opensearch.modes.base import ModeContext, SearchMode
from mathsearch.opensearch.queries import Mode, bm25_body
from mathsearch.opensearch.results import FieldScore, Hit, ScoreBreakdown
from mathsearch.opensearch.window_rescore import WindowScore, cosine01, rank_window, rescore_window

if TYPE_CHECKING:
    from mathsearch.opensearch.search_request import SearchRequest
    from mathsearch.opensearch.vector_plan import VectorPlan


def window_breakdown(
    bm25: float,
    scored: WindowScore,
    raw: Sequence[float | None],
    *,
    fields: Sequence[str],
    weights: Sequence[float],
    normalization: str,
) -> ScoreBreakdown:
    """The raw and window-normalised BM25 and ``(1 + cos) / 2`` of every field, and the
    formula."""
    parts = [
        FieldScore(name, value, normed, weight)
        for name, value, normed, weight in zip(
            fields, raw, scored.vectors_normalized, weights[1:], strict=True
        )
    ]
    terms = " + ".join(f"{p.weight:.3g} * N((1 + cos) / 2)({p.field})" for p in parts)
    return ScoreBreakdown(
        bm25=bm25,
        bm25_normalized=scored.bm25_normalized,
        knn=raw[0] if raw else None,
        knn_normalized=scored.vectors_normalized[0] if raw else None,
        score=scored.score,
        formula=f"{weights[0]:.3g} * N(bm25) + {terms}, N = {normalization} over the window",
        fields=parts,
    )


class RescoreMode(SearchMode):
    mode = Mode.RESCORE
    summary = "BM25 retrieves a window, which is rescored with vector similarity."
    parameters = ("alpha", "window", "normalization")

    def run(
        self, ctx: ModeContext, request: SearchRequest, tokens: list[str], plan: VectorPlan
    ) -> list[Hit]:
        fields = plan.fields
        source = tuple(dict.fromkeys((*ctx.source_fields(request), *fields)))
        body = bm25_body(
            tokens, request.text, size=request.window, filters=request.filters, source=source,
            fields=ctx.fields,
        )  # fmt: skip
        raw = ctx.run_body(body)["hits"]["hits"]
        stored = [hit.get("_source") or {} for hit in raw]
        columns = [[cosine01(q.vector, doc.get(q.field)) for doc in stored] for q in plan.queries]
        weights = plan.weights
        scores = rescore_window(
            [float(hit["_score"] or 0.0) for hit in raw], columns, weights, request.normalization
        )
        order = rank_window(scores)[: request.k]
        ranked = [{**raw[i], "_score": scores[i].score} for i in order]
        hits = ctx.hits_of({"hits": {"hits": ranked}}, tokens)
        if request.explain:
            for hit, i in zip(hits, order, strict=True):
                hit.explanation = window_breakdown(
                    float(raw[i]["_score"] or 0.0),
                    scores[i],
                    [column[i] for column in columns],
                    fields=fields,
                    weights=weights,
                    normalization=request.normalization.value,
                )
        return hits


MODE = RescoreMode()
