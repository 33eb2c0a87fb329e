"""The ``Searcher``: a LaTeX query (plus words) in, ranked equations out, in every mode.

The query goes through the same featurisation as indexing (math tokens from
:class:`mathsearch.indexer.parse.Featuriser`, the vector from the ONNX model whose card names the
vector
field), then one of the bodies of :mod:`mathsearch.opensearch.queries`.

``fusion`` and ``rrf`` run on the cluster (``fusion_side="server"``: the neural-search ``hybrid``
query under a temporary search pipeline) or client-side (``"client"``: the BM25 and kNN
subqueries in one ``_msearch``, then :mod:`mathsearch.opensearch.fusion`'s copy of the plugin's
normalisation and combination, then the k sources by ``mget``). Both rank identically (a golden
test compares them); ``"auto"`` (the default) is client-side, which measured 2x faster at 100k
equations and 9x at 1M, and is the only way to ``z_score`` on neural-search 2.19. Alpha is the
vector's share in every mode: fusion weights are ``[1 - alpha, alpha]`` for ``[bm25, knn]``.

``rescore`` runs client-side over one request: BM25 fetches ``window`` hits with their stored
vectors, and BM25 and each field's ``(1 + cos) / 2`` are normalised inside the window
(``normalization``, default min_max) before ``(1 - alpha) * bm25 + alpha * cos`` combines them
(:mod:`mathsearch.opensearch.window_rescore`), so alpha means the same for every query.

``max_df`` leaves the query tokens found in more than that fraction of the equations out of BM25
(:mod:`mathsearch.opensearch.token_stats`), in every mode that uses BM25.

``explain`` adds a :class:`~mathsearch.opensearch.results.ScoreBreakdown` to every hit (each
subquery's raw
and normalised score and the formula), ``group`` groups the hits by document.

Several encoders: a request naming ``encoders`` (or ``vector_fields``) is featurised once and
embedded by each (:class:`~mathsearch.opensearch.query_encoder.ModelQueryEncoder`); every mode then
uses
every field (:mod:`mathsearch.opensearch.queries`: one hybrid query of BM25 + one kNN per field for
fusion
and rrf, client-side the same lists in one ``_msearch``). A field the index lacks, or one the
query got no vector for, is a :class:`QueryError` saying which. ``fields``
(:class:`~mathsearch.opensearch.search_fields.SearchFields`) names the index's fields, so another
index
(figures) uses the same modes.

Example::

    searcher = Searcher(connect(), "mathsearch-equations")
    response = searcher.search(SearchRequest(r"\\int_0^1 x^2 dx", mode=Mode.FUSION, k=5))
    best = [(hit.rank, hit.score, hit.latex) for hit in response.hits]
    both = searcher.search(SearchRequest("x^2", mode=Mode.RRF, encoders=("gcn", "bitmap")))
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from opensearchpy import OpenSearch

from mathsearch.core.errors import MappingError, QueryError
from mathsearch.opensearch import queries
from mathsearch.opensearch.explain import (
    fusion_breakdown,
    multi_knn_breakdown,
    multi_rescore_breakdown,
    rescore_breakdown,
    single_breakdown,
    window_breakdown,
)
from mathsearch.opensearch.fusion import FusedHit, fuse, rrf
from mathsearch.opensearch.queries import Mode
from mathsearch.opensearch.query_encoder import ModelQueryEncoder, QueryEncoder, QueryFeatures
from mathsearch.opensearch.results import (
    Hit,
    ScoreBreakdown,
    SearchResponse,
    group_hits,
    highlight,
    matched_tokens,
)
from mathsearch.opensearch.schema import index_meta
from mathsearch.opensearch.search_calls import SearchCalls
from mathsearch.opensearch.search_fields import EQUATION_FIELDS, EQUATION_SOURCE, SearchFields
from mathsearch.opensearch.search_request import SearchRequest
from mathsearch.opensearch.token_stats import TokenStats
from mathsearch.opensearch.vector_plan import VectorPlan, plan_vectors, requested_fields
from mathsearch.opensearch.window_rescore import cosine01, rank_window, rescore_window

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

SOURCE_FIELDS = EQUATION_SOURCE

__all__ = ["SOURCE_FIELDS", "ModelQueryEncoder", "SearchRequest", "Searcher"]


@dataclass
class _Retrieved:
    """One subquery's ``(id, score)`` list, best first."""

    ranked: list[tuple[str, float]]


class Searcher(SearchCalls):
    """Runs :class:`SearchRequest` s against the index behind ``index`` (an alias), whose
    fields ``fields`` names (default: the equation index's)."""

    def __init__(
        self,
        client: OpenSearch,
        index: str,
        *,
        encoder: QueryEncoder | None = None,
        fields: SearchFields = EQUATION_FIELDS,
    ) -> None:
        self.client = client
        self.index = index
        self.encoder = encoder or ModelQueryEncoder()
        self.fields = fields
        self._default_field: str | None = None
        self._index_fields: set[str] | None = None
        self.token_stats = TokenStats(client, index)

    # -- public -------------------------------------------------------------------------------

    def search(self, request: SearchRequest) -> SearchResponse:
        """Run one search; see the module docstring.

        Raises:
            QueryError: bad parameters, an unreadable query, a vector field the index lacks or
                the query has no vector for, or a request the cluster refused.
            MappingError: no such index.
            ClusterUnavailableError: the cluster does not answer.
        """
        request.validate()
        started = time.perf_counter()
        features = self._features(request) if request.latex.strip() else None
        tokens = features.tokens if features else []
        if request.max_df is not None and request.mode is not Mode.KNN and tokens:
            tokens = self.call(lambda: self.token_stats.prune(tokens, request.max_df))
        fallback = self._refused_everywhere(request, features)
        if fallback:  # a hybrid mode whose every vector the encoders refused: BM25 alone
            request = replace(request, mode=Mode.BM25)
        plan = self.plan(request, features)
        # grouping ranks documents by their best equation: fetch a deeper list to fill k groups
        size = max(request.k, min(request.depth, request.window)) if request.group else request.k
        sized = replace(request, k=size)
        fused_side: str | None = None
        if request.mode in (Mode.FUSION, Mode.RRF):
            fused_side = self._fusion_side(request)
            if fused_side == "server":
                hits = self._server_fusion(sized, tokens, plan)
                if request.explain:
                    self._attach_fusion_breakdown(sized, hits, tokens, plan)
            else:
                hits = self._client_fusion(sized, tokens, plan)
        else:
            hits = self._single(sized, tokens, plan)
            if request.explain:
                self._explain_single(sized, hits, tokens, plan)
        groups = group_hits(hits, request.k) if request.group else None
        fields = plan.fields if request.mode is not Mode.BM25 else []
        return SearchResponse(
            mode=request.mode.value,
            k=request.k,
            vector_field=fields[0] if fields else None,
            took_ms=(time.perf_counter() - started) * 1000,
            hits=hits if request.group else hits[: request.k],
            groups=groups,
            fused=fused_side,
            parameters={**request.parameters(), **({"fallback": fallback} if fallback else {})},
            query_tokens=tokens,
            vector_fields=fields,
        )

    def _refused_everywhere(
        self, request: SearchRequest, features: QueryFeatures | None
    ) -> str | None:
        """Why a hybrid request falls back to BM25: every vector field it searches has no query
        vector because its encoder refused the query (e.g. SymPy cannot read it for
        ``seq2seq``); None when it does not. ``knn`` has no BM25 side and keeps the error."""
        if request.mode in (Mode.KNN, Mode.BM25) or features is None:
            return None
        refusals = features.refusals or {}
        if not refusals:
            return None
        fields = self._vector_fields(request)
        vectors = features.by_field()
        if any(name in vectors or name not in refusals for name in fields):
            return None
        reasons = "; ".join(f"{name}: {refusals[name]}" for name in fields)
        return f"bm25 (the encoders refused the query: {reasons})"

    def plan(self, request: SearchRequest, features: QueryFeatures | None) -> VectorPlan:
        """The request's vector fields, query vectors and weights (empty for ``bm25``).

        Raises:
            QueryError: see :func:`mathsearch.opensearch.vector_plan.plan_vectors`.
        """
        if request.mode is Mode.BM25:
            return VectorPlan(queries=(), bm25_weight=1.0)
        fields = self._vector_fields(request)
        known = self.index_vector_fields()
        if not set(fields) <= known:  # a field added since: look again before refusing
            self._index_fields = None
            known = self.index_vector_fields()
        return plan_vectors(request, features, fields, known, self.index)

    def _vector_fields(self, request: SearchRequest) -> list[str]:
        """The fields the request searches: named, else the searcher's, else the index's
        default."""
        return requested_fields(request) or list(self.fields.vectors) or [self.default_field()]

    def default_field(self) -> str:
        """The index's default vector field (from its ``_meta``; cached)."""
        if self._default_field is None:
            meta = self.call(lambda: index_meta(self.client, self.index))
            field_name = meta.get("default_vector_field")
            if not field_name:
                raise MappingError(f"{self.index} has no default vector field")
            self._default_field = str(field_name)
        return self._default_field

    def index_vector_fields(self) -> set[str]:
        """The ``knn_vector`` fields of the index's mapping (cached)."""
        if self._index_fields is None:
            found = self.call(lambda: self.client.indices.get_mapping(index=self.index))
            names: set[str] = set()
            for mapping in found.values():
                properties = mapping.get("mappings", {}).get("properties", {})
                names |= {k for k, v in properties.items() if v.get("type") == "knn_vector"}
            self._index_fields = names
        return self._index_fields

    # -- modes --------------------------------------------------------------------------------

    def _features(self, request: SearchRequest) -> QueryFeatures:
        """One featurisation of the query, embedded by the request's encoders when it names
        them (and the query encoder takes names), else by the query encoder's own."""
        if request.encoders and _takes_encoders(self.encoder):
            return self.encoder.features(request.latex, encoders=list(request.encoders))  # type: ignore[call-arg]
        return self.encoder.features(request.latex)

    def _fusion_side(self, request: SearchRequest) -> str:
        # auto: client-side - the same ranking (golden-tested), measured 2x faster at 100k
        # equations (two top-`depth` searches in one _msearch instead of the hybrid query,
        # which scores every BM25 match), and the only way to z_score on neural-search 2.19
        return "client" if request.fusion_side == "auto" else request.fusion_side

    def _common(self, request: SearchRequest) -> dict[str, Any]:
        return {
            "size": request.k,
            "filters": request.filters,
            "source": self._source(request),
            "fields": self.fields,
        }

    def _single(self, request: SearchRequest, tokens: list[str], plan: VectorPlan) -> list[Hit]:
        common = self._common(request)
        vectors = plan.queries
        if request.mode is Mode.BM25:
            body = queries.bm25_body(tokens, request.text, **common)
        elif request.mode is Mode.KNN:
            body = queries.knn_body_multi(vectors, **common)
        elif request.mode is Mode.RESCORE:
            return self._window_rescore(request, tokens, plan)
        else:
            body = queries.knn_rescore_body(
                tokens, request.text, vectors, window=request.window, alpha=request.alpha,
                bm25_weight=plan.bm25_weight, **common,
            )  # fmt: skip
        return self._hits(self._search(body), tokens)

    def _window_rescore(
        self, request: SearchRequest, tokens: list[str], plan: VectorPlan
    ) -> list[Hit]:
        """BM25 fetches the window with its stored vectors; both scores are normalised inside
        it and combined (:mod:`mathsearch.opensearch.window_rescore`), in one request."""
        fields = plan.fields
        source = tuple(dict.fromkeys((*self._source(request), *fields)))
        body = queries.bm25_body(
            tokens, request.text, size=request.window, filters=request.filters, source=source,
            fields=self.fields,
        )  # fmt: skip
        raw = self._search(body)["hits"]["hits"]
        stored = [hit.get("_source") or {} for hit in raw]
        columns = [[cosine01(q.vector, doc.get(q.field)) for doc in stored] for q in plan.queries]
        weights = plan.weights
        scores = rescore_window(
            [float(hit["_score"] or 0.0) for hit in raw], columns, weights, request.normalization
        )
        order = rank_window(scores)[: request.k]
        ranked = [{**raw[i], "_score": scores[i].score} for i in order]
        hits = self._hits({"hits": {"hits": ranked}}, tokens)
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

    def _server_fusion(
        self, request: SearchRequest, tokens: list[str], plan: VectorPlan
    ) -> list[Hit]:
        if request.mode is Mode.RRF:
            pipeline = queries.rrf_pipeline(request.rank_constant)
        else:
            pipeline = queries.fusion_pipeline(
                request.normalization, request.combination, plan.weights
            )
        body = queries.hybrid_body(
            tokens, request.text, plan.queries, size=request.k, depth=request.depth,
            filters=request.filters, source=self._source(request), pipeline=pipeline,
            fields=self.fields,
        )  # fmt: skip
        body["query"]["hybrid"]["pagination_depth"] = request.depth
        return self._hits(self._search(body), tokens)

    def _subqueries(
        self, request: SearchRequest, tokens: list[str], plan: VectorPlan, *, bm25: bool = True
    ) -> list[_Retrieved]:
        """BM25 (unless ``bm25`` is false) and one kNN list per field, top ``depth`` each."""
        # ids and scores only: the sources of the k fused hits are fetched afterwards
        common = {"size": request.depth, "filters": request.filters, "source": ()}
        common["fields"] = self.fields
        bodies = [queries.bm25_body(tokens, request.text, **common)] if bm25 else []
        bodies += [
            queries.knn_body(v.field, v.vector, k=request.depth, **common) for v in plan.queries
        ]
        # one round trip: the cluster runs the searches concurrently
        return [_retrieved(response) for response in self._msearch(bodies)]

    def _fused(
        self,
        request: SearchRequest,
        lists: Sequence[_Retrieved],
        plan: VectorPlan,
        limit: int | None = None,
    ) -> list[FusedHit]:
        ranked = [item.ranked for item in lists]
        if request.mode is Mode.RRF:
            return rrf(ranked, rank_constant=request.rank_constant, limit=limit)
        return fuse(
            ranked,
            normalization=request.normalization,
            combination=request.combination,
            weights=plan.weights,
            limit=limit,
        )

    def _client_fusion(
        self, request: SearchRequest, tokens: list[str], plan: VectorPlan
    ) -> list[Hit]:
        if len(plan.queries) + 1 > queries.MAX_HYBRID_SUBQUERIES:
            raise QueryError(
                f"{len(plan.queries)} vector fields: fusion takes at most "
                f"{queries.MAX_HYBRID_SUBQUERIES - 1} beside BM25 (as the hybrid query)"
            )
        lists = self._subqueries(request, tokens, plan)
        fused = self._fused(request, lists, plan, limit=request.k)
        sources = self._sources_of([f.doc_id for f in fused], self._source(request))
        raw_hits = [
            {"_id": f.doc_id, "_score": f.score, "_source": sources.get(f.doc_id, {})}
            for f in fused
        ]
        hits = self._hits({"hits": {"hits": raw_hits}}, tokens)
        if request.explain:
            for hit, item in zip(hits, fused, strict=True):
                hit.explanation = fusion_breakdown(request, item, plan.fields)
        return hits

    def _attach_fusion_breakdown(
        self, request: SearchRequest, hits: list[Hit], tokens: list[str], plan: VectorPlan
    ) -> None:
        lists = self._subqueries(request, tokens, plan)
        fused = {f.doc_id: f for f in self._fused(request, lists, plan)}
        for hit in hits:
            item = fused.get(hit.eq_id)
            hit.explanation = (
                fusion_breakdown(request, item, plan.fields)
                if item is not None
                else ScoreBreakdown(score=hit.score, formula="not in any subquery's top depth")
            )

    def _explain_single(
        self, request: SearchRequest, hits: list[Hit], tokens: list[str], plan: VectorPlan
    ) -> None:
        ids = [hit.eq_id for hit in hits]
        several = len(plan.queries) > 1
        if request.mode is Mode.BM25 or (request.mode is Mode.KNN and not several):
            for hit in hits:
                hit.explanation = single_breakdown(request.mode, hit.score)
            return
        if request.mode is Mode.KNN:
            lists = self._per_field(request, plan, request.k)
            for hit in hits:
                raw = [found.get(hit.eq_id) for found in lists]
                hit.explanation = multi_knn_breakdown(hit.score, raw, plan.fields, plan.shares)
            return
        if request.mode is Mode.RESCORE:  # explained by _window_rescore
            return
        bm25 = self._bm25_of(ids, tokens, request.text)
        if not several:  # knn-rescore: the server's k-NN scores of the window
            column = self._per_field(request, plan, request.window)[0]
            for hit in hits:
                hit.explanation = rescore_breakdown(
                    request, hit.score, bm25.get(hit.eq_id), column.get(hit.eq_id)
                )
            return
        columns = self._per_field(request, plan, request.window)
        for hit in hits:
            hit.explanation = multi_rescore_breakdown(
                request,
                hit.score,
                bm25=bm25.get(hit.eq_id),
                raw=[column.get(hit.eq_id) for column in columns],
                fields=plan.fields,
                weights=plan.weights,
            )

    def _per_field(self, request: SearchRequest, plan: VectorPlan, k: int) -> list[dict]:
        """Each field's top ``k`` kNN scores by id (the lists a multi-field kNN sums)."""
        deep = replace(request, depth=k)
        lists = self._subqueries(deep, [], plan, bm25=False)
        return [dict(item.ranked) for item in lists]

    def _source(self, request: SearchRequest) -> tuple[str, ...]:
        """The stored fields a hit needs, plus ``mathml`` when asked (equations)."""
        return (*self.fields.source, "mathml") if request.mathml else self.fields.source

    # -- cluster calls ------------------------------------------------------------------------

    def _bm25_of(self, ids: list[str], tokens: list[str], words: str) -> dict[str, float]:
        if not ids:
            return {}
        query = queries.bm25_query(tokens, words, fields=self.fields)
        query["bool"]["filter"] = [{"ids": {"values": list(ids)}}]
        found = self._search({"size": len(ids), "_source": False, "query": query})
        return {hit["_id"]: float(hit["_score"]) for hit in found["hits"]["hits"]}

    def _hits(self, response: dict[str, Any], tokens: list[str]) -> list[Hit]:
        hits = []
        names = self.fields
        for rank, raw in enumerate(response["hits"]["hits"], start=1):
            source = raw.get("_source") or {}
            doc_tokens = str(source.get(names.tokens, "")).split()
            hits.append(
                Hit(
                    rank=rank,
                    eq_id=str(source.get(names.id_field, raw["_id"])),
                    doc_id=str(source.get("doc_id", "")),
                    score=float(raw["_score"] or 0.0),
                    latex=str(source.get(names.display, "")),
                    mathml=str(source.get("mathml", "")),
                    position=source.get("position"),
                    section=str(source.get("section", "")),
                    matched_tokens=matched_tokens(tokens, doc_tokens),
                    highlight=highlight(tokens, doc_tokens),
                )
            )
        return hits


def _takes_encoders(encoder: Any) -> bool:
    """Whether ``encoder.features`` takes ``encoders=`` (names per query)."""
    try:
        return "encoders" in inspect.signature(encoder.features).parameters
    except (TypeError, ValueError):
        return False


def _retrieved(response: dict[str, Any]) -> _Retrieved:
    hits = response["hits"]["hits"]
    return _Retrieved(
        ranked=[(hit["_id"], float(hit["_score"])) for hit in hits],
    )
