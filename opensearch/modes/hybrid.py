"""What ``fusion`` and ``rrf`` share: BM25 and one kNN list per vector field, fused.

They run on the cluster (``fusion_side="server"``: the neural-search ``hybrid`` query of [bm25,
knn field 1, ..., knn field n] under a temporary search pipeline, :func:`hybrid_body`) or
client-side (``"client"``: the same subqueries in one ``_msearch``, then
:mod:`mathsearch.opensearch.fusion`'s copy of the plugin's normalisation / combination or rank
fusion, then the k sources by one ``ids`` search). Both rank identically (a golden test compares
them); ``"auto"`` (the default) is client-side, which measured 2x faster at 100k equations and 9x at
1M, and is the only way to ``z_score`` on neural-search 2.19 (3.x takes it server-side too). At most
:data:`~mathsearch.opensearch.queries.MAX_HYBRID_SUBQUERIES` subqueries (the plugin's limit).

A subclass gives the pipeline, the client-side fusion and the breakdown's formula.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from mathsearch.core.errors import QueryError
from mathsearch.opensearch.fusion import FusedHit
from mathsearch.opensearch.modes.base import ModeContext, SearchMode, ranked_lists
from mathsearch.opensearch.queries import (
    MAX_HYBRID_SUBQUERIES,
    Filters,
    VectorQuery,
    base_body,
    bm25_query,
    knn_query,
)
from mathsearch.opensearch.results import FieldScore, Hit, ScoreBreakdown
from mathsearch.opensearch.search_fields import EQUATION_FIELDS, SearchFields

if TYPE_CHECKING:
    from mathsearch.opensearch.cluster_capabilities import ClusterCapabilities
    from mathsearch.opensearch.search_request import SearchRequest
    from mathsearch.opensearch.vector_plan import VectorPlan


def hybrid_body(
    tokens: Sequence[str],
    words: str,
    vectors: Sequence[VectorQuery],
    *,
    size: int,
    depth: int,
    filters: Filters,
    source: Sequence[str],
    pipeline: dict[str, Any] | None = None,
    fields: SearchFields = EQUATION_FIELDS,
) -> dict:
    """The neural-search ``hybrid`` query [bm25, knn field 1, ...]; each subquery keeps its top
    ``depth`` (the weights go to the pipeline, not here).

    Raises:
        QueryError: no vector field, or more fields than the hybrid query takes subqueries.
    """
    _check_subqueries(vectors)
    subqueries = [bm25_query(tokens, words, filters, fields)]
    subqueries += [knn_query(v.field, v.vector, depth, filters, fields) for v in vectors]
    body: dict[str, Any] = {
        **base_body(size, source),
        "query": {"hybrid": {"queries": subqueries}},
    }
    if pipeline is not None:
        body["search_pipeline"] = pipeline
    return body


def _check_subqueries(vectors: Sequence[VectorQuery]) -> None:
    if not vectors:
        raise QueryError("no vector field to fuse with BM25")
    if len(vectors) + 1 > MAX_HYBRID_SUBQUERIES:
        raise QueryError(
            f"{len(vectors)} vector fields: the hybrid query takes at most "
            f"{MAX_HYBRID_SUBQUERIES - 1} beside BM25"
        )


class HybridMode(SearchMode):
    """A mode that fuses BM25 with every vector field's kNN list."""

    fused = True

    @abstractmethod
    def pipeline(
        self, request: SearchRequest, plan: VectorPlan, capabilities: ClusterCapabilities
    ) -> dict[str, Any]:
        """The search pipeline of the server-side hybrid query, in the form the cluster's
        neural-search version takes."""

    @abstractmethod
    def fuse(
        self,
        ranked: Sequence[Sequence[tuple[str, float]]],
        request: SearchRequest,
        plan: VectorPlan,
        limit: int | None,
    ) -> list[FusedHit]:
        """The client-side fusion of ``[bm25, field 1, ...]`` lists (the pipeline's copy)."""

    @abstractmethod
    def formula(self, request: SearchRequest, fields: Sequence[str]) -> tuple[str, list]:
        """The breakdown's formula and the ``[bm25, field 1, ...]`` weights (None: unweighted)."""

    def fused_side(self, request: SearchRequest) -> str:
        # auto: client-side - the same ranking (golden-tested), measured 2x faster at 100k
        # equations (two top-`depth` searches in one _msearch instead of the hybrid query,
        # which scores every BM25 match), and the only way to z_score on neural-search 2.19
        return "client" if request.fusion_side == "auto" else request.fusion_side

    def run(
        self, ctx: ModeContext, request: SearchRequest, tokens: list[str], plan: VectorPlan
    ) -> list[Hit]:
        if self.fused_side(request) == "server":
            return self._server(ctx, request, tokens, plan)
        return self._client(ctx, request, tokens, plan)

    def breakdown(
        self, request: SearchRequest, item: FusedHit, fields: Sequence[str] = ()
    ) -> ScoreBreakdown:
        """A fused hit's breakdown; ``fields`` names the vector subqueries after BM25."""
        names = list(fields) or ["knn"]
        formula, weights = self.formula(request, names)
        return ScoreBreakdown(
            bm25=item.raw[0],
            knn=item.raw[1],
            bm25_normalized=item.normalized[0],
            knn_normalized=item.normalized[1],
            score=item.score,
            formula=formula,
            fields=[
                FieldScore(name, item.raw[n], item.normalized[n], weights[n])
                for n, name in enumerate(names, start=1)
            ]
            if fields and len(fields) > 1
            else [],
        )

    def _server(
        self, ctx: ModeContext, request: SearchRequest, tokens: list[str], plan: VectorPlan
    ) -> list[Hit]:
        body = hybrid_body(
            tokens, request.text, plan.queries, size=request.k, depth=request.depth,
            filters=request.filters, source=ctx.source_fields(request),
            pipeline=self.pipeline(request, plan, ctx.capabilities()), fields=ctx.fields,
        )  # fmt: skip
        body["query"]["hybrid"]["pagination_depth"] = request.depth
        hits = ctx.hits_of(ctx.run_body(body), tokens, annotate=request.annotate)
        if request.explain:  # the client-side copy of the same fusion explains each hit
            lists = ranked_lists(ctx, request, tokens, plan, depth=request.depth)
            fused = {f.doc_id: f for f in self.fuse(lists, request, plan, None)}
            for hit in hits:
                item = fused.get(hit.eq_id)
                hit.explanation = (
                    self.breakdown(request, item, plan.fields)
                    if item is not None
                    else ScoreBreakdown(score=hit.score, formula="not in any subquery's top depth")
                )
        return hits

    def _client(
        self, ctx: ModeContext, request: SearchRequest, tokens: list[str], plan: VectorPlan
    ) -> list[Hit]:
        _check_subqueries(plan.queries)  # the same limit as the cluster's hybrid query
        lists = ranked_lists(ctx, request, tokens, plan, depth=request.depth)
        fused = self.fuse(lists, request, plan, request.k)
        sources = ctx.sources_of([f.doc_id for f in fused], ctx.source_fields(request))
        raw_hits = [
            {"_id": f.doc_id, "_score": f.score, "_source": sources.get(f.doc_id, {})}
            for f in fused
        ]
        hits = ctx.hits_of({"hits": {"hits": raw_hits}}, tokens, annotate=request.annotate)
        if request.explain:
            for hit, item in zip(hits, fused, strict=True):
                hit.explanation = self.breakdown(request, item, plan.fields)
        return hits
