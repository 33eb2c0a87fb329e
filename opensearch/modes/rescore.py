"""``rescore``: BM25 retrieves a window, which is rescored with vector similarity.

The figure-embeddings seed's tf-idf + embedding interpolation, client-side: BM25 and each field's
``(1 + cos) / 2`` are normalised inside the window (``normalization``, default min_max), and
``w_0 * N(bm25) + sum_i w_i * N((1 + cos_i) / 2)`` ranks them
(:mod:`mathsearch.opensearch.window_rescore`; one field: ``(1 - alpha) * N(bm25) + alpha *
N(cos)``), so alpha means the same for every query. Three requests, none of which ships a vector:

1. the BM25 body: the ``window`` ids and scores (ids from doc values, no stored field);
2. the exact cosines of those ids, one ``knn_score`` script search per vector field
   (:func:`~mathsearch.opensearch.queries.exact_cosine_body`; one ``_msearch``);
3. the stored fields of the ``k`` hits kept (one ``ids`` search).

(Before, one BM25 search fetched the window's ``_source`` with the vectors - 100 documents and
100 JSON vectors, which the k-NN derived source rebuilds from the vector files: 15.5 ms and
14.4 ms of the node's CPU per query on the 100k bench index, against 7.6 ms and 6-8 ms now.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from mathsearch.opensearch.modes.base import ModeContext, SearchMode
from mathsearch.opensearch.queries import (
    Mode,
    VectorQuery,
    bm25_body,
    exact_cosine_body,
    hit_id,
)
from mathsearch.opensearch.results import FieldScore, Hit, ScoreBreakdown
from mathsearch.opensearch.window_rescore import WindowScore, rank_window, rescore_window

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
        ids_from = ctx.fields.id_field
        body = bm25_body(
            tokens, request.text, size=request.window, filters=request.filters, source=(),
            fields=ctx.fields, ids_from=ids_from,
        )  # fmt: skip
        window = [
            (hit_id(hit, ids_from), float(hit["_score"] or 0.0))
            for hit in ctx.run_body(body)["hits"]["hits"]
        ]
        ids = [doc for doc, _ in window]
        columns = window_cosines(ctx, ids, plan.queries, ids_from)
        weights = plan.weights
        scores = rescore_window(
            [bm25 for _, bm25 in window], columns, weights, request.normalization
        )
        order = rank_window(scores)[: request.k]
        sources = ctx.sources_of([ids[i] for i in order], ctx.source_fields(request))
        ranked = [
            {"_id": ids[i], "_score": scores[i].score, "_source": sources.get(ids[i], {})}
            for i in order
        ]
        hits = ctx.hits_of({"hits": {"hits": ranked}}, tokens, annotate=request.annotate)
        if request.explain:
            for hit, i in zip(hits, order, strict=True):
                hit.explanation = window_breakdown(
                    window[i][1],
                    scores[i],
                    [column[i] for column in columns],
                    fields=fields,
                    weights=weights,
                    normalization=request.normalization.value,
                )
        return hits


def window_cosines(
    ctx: ModeContext, ids: Sequence[str], queries: Sequence[VectorQuery], ids_from: str
) -> list[list[float | None]]:
    """Per query vector, the ``(1 + cos) / 2`` of each of ``ids`` (None: it has no vector in
    that field), exact, from the k-NN plugin: one ``_msearch`` of ``knn_score`` searches."""
    if not ids or not queries:
        return [[None] * len(ids) for _ in queries]
    bodies = [exact_cosine_body(q.field, q.vector, ids, ids_from=ids_from) for q in queries]
    columns = []
    for response in ctx.run_bodies(bodies):
        found = {hit_id(hit, ids_from): float(hit["_score"]) for hit in response["hits"]["hits"]}
        columns.append([found.get(doc) for doc in ids])
    return columns


MODE = RescoreMode()
