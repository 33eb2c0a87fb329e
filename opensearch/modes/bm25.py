"""``bm25``: BM25 over the equation's math tokens (and the words, if any); no vectors.

Body: :func:`mathsearch.opensearch.queries.bm25_body` (``match`` on the text fields, the
canonical-form boost, the filters). Score: BM25's own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mathsearch.opensearch.modes.base import ModeContext, SearchMode
from mathsearch.opensearch.queries import Mode, bm25_body
from mathsearch.opensearch.results import Hit, ScoreBreakdown

if TYPE_CHECKING:
    from mathsearch.opensearch.search_request import SearchRequest
    from mathsearch.opensearch.vector_plan import VectorPlan


def bm25_breakdown(score: float) -> ScoreBreakdown:
    """The score is BM25's."""
    return ScoreBreakdown(bm25=score, score=score, formula="bm25")


class Bm25Mode(SearchMode):
    mode = Mode.BM25
    summary = "BM25 over the equation's math tokens (and the words, if any)."
    uses_vectors = False

    def run(
        self, ctx: ModeContext, request: SearchRequest, tokens: list[str], plan: VectorPlan
    ) -> list[Hit]:
        source = ctx.source_fields(request)
        body = bm25_body(
            tokens, request.text, size=request.k, filters=request.filters, source=source,
            fields=ctx.fields, ids_from=ctx.fields.id_field,  # without source: ids from doc values
        )  # fmt: skip
        hits = ctx.hits_of(ctx.run_body(body), tokens, annotate=request.annotate)
        if request.explain:
            for hit in hits:
                hit.explanation = bm25_breakdown(hit.score)
        return hits


MODE = Bm25Mode()
