"""The ``Searcher``: a LaTeX query (plus words) in, ranked equations out, in every mode.

The query goes through the same featurisation as indexing (math tokens from
:class:`indexer.parse.Featuriser`, the vector from the ONNX model whose card names the vector
field), then one of the bodies of :mod:`opensearch.queries`.

``fusion`` and ``rrf`` run on the cluster (``fusion_side="server"``: the neural-search ``hybrid``
query under a temporary search pipeline) or client-side (``"client"``: the BM25 and kNN
subqueries in one ``_msearch``, then :mod:`opensearch.fusion`'s copy of the plugin's
normalisation and combination, then the k sources by ``mget``). Both rank identically (a golden
test compares them); ``"auto"`` (the default) is client-side, which measured 2x faster at 100k
equations and 9x at 1M, and is the only way to ``z_score`` on neural-search 2.19. Alpha is the
vector's share in every mode: fusion weights are ``[1 - alpha, alpha]`` for ``[bm25, knn]``.

``max_df`` leaves the query tokens found in more than that fraction of the equations out of BM25
(:mod:`opensearch.token_stats`), in every mode that uses BM25.

``explain`` adds a :class:`~opensearch.results.ScoreBreakdown` to every hit (each subquery's raw
and normalised score and the formula), ``group`` groups the hits by document.

Example::

    searcher = Searcher(connect(), "mathsearch-equations")
    response = searcher.search(SearchRequest(r"\\int_0^1 x^2 dx", mode=Mode.FUSION, k=5))
    best = [(hit.rank, hit.score, hit.latex) for hit in response.hits]
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from opensearchpy import OpenSearch
from opensearchpy.exceptions import ConnectionError as OSConnectionError
from opensearchpy.exceptions import NotFoundError, TransportError

from opensearch import queries
from opensearch.client import transport_reason
from opensearch.errors import ClusterUnavailableError, MappingError, QueryError
from opensearch.explain import (
    fusion_breakdown,
    fusion_weights,
    rescore_breakdown,
    single_breakdown,
)
from opensearch.fusion import FusedHit, fuse, rrf
from opensearch.queries import Filters, Mode
from opensearch.query_encoder import ModelQueryEncoder, QueryEncoder, QueryFeatures
from opensearch.results import (
    Hit,
    ScoreBreakdown,
    SearchResponse,
    group_hits,
    highlight,
    matched_tokens,
)
from opensearch.schema import index_meta
from opensearch.search_request import SearchRequest
from opensearch.token_stats import TokenStats

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

SOURCE_FIELDS = ("eq_id", "doc_id", "latex", "position", "section", "math_tokens")


@dataclass
class _Retrieved:
    """One subquery's ``(id, score)`` list, best first."""

    ranked: list[tuple[str, float]]


class Searcher:
    """Runs :class:`SearchRequest` s against the equation index behind ``index`` (an alias)."""

    def __init__(
        self, client: OpenSearch, index: str, *, encoder: QueryEncoder | None = None
    ) -> None:
        self.client = client
        self.index = index
        self.encoder = encoder or ModelQueryEncoder()
        self._default_field: str | None = None
        self.token_stats = TokenStats(client, index)

    # -- public -------------------------------------------------------------------------------

    def search(self, request: SearchRequest) -> SearchResponse:
        """Run one search; see the module docstring.

        Raises:
            QueryError: bad parameters, an unreadable query, or a request the cluster refused.
            MappingError: no such index, or the vector field does not exist.
            ClusterUnavailableError: the cluster does not answer.
        """
        request.validate()
        started = time.perf_counter()
        features = self.encoder.features(request.latex) if request.latex.strip() else None
        tokens = features.tokens if features else []
        if request.max_df is not None and request.mode is not Mode.KNN and tokens:
            tokens = self.call(lambda: self.token_stats.prune(tokens, request.max_df))
        field_name = request.vector_field or self.default_field()
        vector = self._vector(request, features, field_name)
        # grouping ranks documents by their best equation: fetch a deeper list to fill k groups
        size = max(request.k, min(request.depth, request.window)) if request.group else request.k
        sized = replace(request, k=size)
        fused_side: str | None = None
        if request.mode in (Mode.FUSION, Mode.RRF):
            fused_side = self._fusion_side(request)
            if fused_side == "server":
                hits = self._server_fusion(sized, tokens, field_name, vector)
                if request.explain:
                    self._attach_fusion_breakdown(sized, hits, tokens, field_name, vector)
            else:
                hits = self._client_fusion(sized, tokens, field_name, vector)
        else:
            hits = self._single(sized, tokens, field_name, vector)
            if request.explain:
                self._explain_single(sized, hits, tokens, field_name, vector)
        groups = group_hits(hits, request.k) if request.group else None
        return SearchResponse(
            mode=request.mode.value,
            k=request.k,
            vector_field=field_name if request.mode is not Mode.BM25 else None,
            took_ms=(time.perf_counter() - started) * 1000,
            hits=hits if request.group else hits[: request.k],
            groups=groups,
            fused=fused_side,
            parameters=request.parameters(),
            query_tokens=tokens,
        )

    def default_field(self) -> str:
        """The index's default vector field (from its ``_meta``; cached)."""
        if self._default_field is None:
            meta = self.call(lambda: index_meta(self.client, self.index))
            field_name = meta.get("default_vector_field")
            if not field_name:
                raise MappingError(f"{self.index} has no default vector field")
            self._default_field = str(field_name)
        return self._default_field

    # -- modes --------------------------------------------------------------------------------

    def _vector(
        self, request: SearchRequest, features: QueryFeatures | None, field_name: str
    ) -> list[float]:
        if request.mode is Mode.BM25:
            return []
        if features is None or features.vector is None:
            raise QueryError(f"mode {request.mode.value} needs a LaTeX query to embed")
        if features.vector_field and features.vector_field != field_name:
            raise QueryError(
                f"the query model fills {features.vector_field}, but the search uses "
                f"{field_name}: set MATHSEARCH_MODEL to that field's model or pass "
                f"--field {features.vector_field}"
            )
        return features.vector

    def _fusion_side(self, request: SearchRequest) -> str:
        # auto: client-side - the same ranking (golden-tested), measured 2x faster at 100k
        # equations (two top-`depth` searches in one _msearch instead of the hybrid query,
        # which scores every BM25 match), and the only way to z_score on neural-search 2.19
        return "client" if request.fusion_side == "auto" else request.fusion_side

    def _single(
        self, request: SearchRequest, tokens: list[str], field_name: str, vector: list[float]
    ) -> list[Hit]:
        common = {"size": request.k, "filters": request.filters, "source": _fields(request)}
        if request.mode is Mode.BM25:
            body = queries.bm25_body(tokens, request.text, **common)
        elif request.mode is Mode.KNN:
            body = queries.knn_body(field_name, vector, **common)
        elif request.mode is Mode.RESCORE:
            body = queries.rescore_body(
                tokens, request.text, field_name, vector, window=request.window,
                alpha=request.alpha, **common,
            )  # fmt: skip
        else:
            body = queries.knn_rescore_body(
                tokens, request.text, field_name, vector, window=request.window,
                alpha=request.alpha, **common,
            )  # fmt: skip
        return self._hits(self._search(body), tokens)

    def _server_fusion(
        self, request: SearchRequest, tokens: list[str], field_name: str, vector: list[float]
    ) -> list[Hit]:
        if request.mode is Mode.RRF:
            pipeline = queries.rrf_pipeline(request.rank_constant)
        else:
            pipeline = queries.fusion_pipeline(
                request.normalization, request.combination, fusion_weights(request.alpha)
            )
        body = queries.hybrid_body(
            tokens, request.text, field_name, vector, size=request.k, depth=request.depth,
            filters=request.filters, source=_fields(request), pipeline=pipeline,
        )  # fmt: skip
        body["query"]["hybrid"]["pagination_depth"] = request.depth
        return self._hits(self._search(body), tokens)

    def _subqueries(
        self, request: SearchRequest, tokens: list[str], field_name: str, vector: list[float]
    ) -> list[_Retrieved]:
        # ids and scores only: the sources of the k fused hits are fetched afterwards
        common = {"size": request.depth, "filters": request.filters, "source": ()}
        bodies = [
            queries.bm25_body(tokens, request.text, **common),
            queries.knn_body(field_name, vector, k=request.depth, **common),
        ]
        # one round trip: the cluster runs both searches concurrently
        return [_retrieved(response) for response in self._msearch(bodies)]

    def _fused(
        self, request: SearchRequest, lists: Sequence[_Retrieved], limit: int | None = None
    ) -> list[FusedHit]:
        ranked = [item.ranked for item in lists]
        if request.mode is Mode.RRF:
            return rrf(ranked, rank_constant=request.rank_constant, limit=limit)
        return fuse(
            ranked,
            normalization=request.normalization,
            combination=request.combination,
            weights=fusion_weights(request.alpha),
            limit=limit,
        )

    def _client_fusion(
        self, request: SearchRequest, tokens: list[str], field_name: str, vector: list[float]
    ) -> list[Hit]:
        lists = self._subqueries(request, tokens, field_name, vector)
        fused = self._fused(request, lists, limit=request.k)
        sources = self._sources_of([f.doc_id for f in fused], _fields(request))
        raw_hits = [
            {"_id": f.doc_id, "_score": f.score, "_source": sources.get(f.doc_id, {})}
            for f in fused
        ]
        hits = self._hits({"hits": {"hits": raw_hits}}, tokens)
        if request.explain:
            for hit, item in zip(hits, fused, strict=True):
                hit.explanation = fusion_breakdown(request, item)
        return hits

    def _attach_fusion_breakdown(
        self,
        request: SearchRequest,
        hits: list[Hit],
        tokens: list[str],
        field_name: str,
        vector: list[float],
    ) -> None:
        fused = {
            f.doc_id: f
            for f in self._fused(request, self._subqueries(request, tokens, field_name, vector))
        }
        for hit in hits:
            item = fused.get(hit.eq_id)
            hit.explanation = (
                fusion_breakdown(request, item)
                if item is not None
                else ScoreBreakdown(score=hit.score, formula="not in either subquery's top depth")
            )

    def _explain_single(
        self,
        request: SearchRequest,
        hits: list[Hit],
        tokens: list[str],
        field_name: str,
        vector: list[float],
    ) -> None:
        ids = [hit.eq_id for hit in hits]
        if request.mode in (Mode.BM25, Mode.KNN):
            for hit in hits:
                hit.explanation = single_breakdown(request.mode, hit.score)
            return
        bm25 = self._bm25_of(ids, tokens, request.text)
        stored = self._vectors_of(ids, field_name)
        for hit in hits:
            hit.explanation = rescore_breakdown(
                request, hit.score, bm25.get(hit.eq_id), vector, stored.get(hit.eq_id)
            )

    # -- cluster calls ------------------------------------------------------------------------

    def _bm25_of(self, ids: list[str], tokens: list[str], words: str) -> dict[str, float]:
        if not ids:
            return {}
        query = queries.bm25_query(tokens, words, Filters(terms={"eq_id": tuple(ids)}))
        found = self._search({"size": len(ids), "_source": False, "query": query})
        return {hit["_id"]: float(hit["_score"]) for hit in found["hits"]["hits"]}

    def _sources_of(
        self, ids: list[str], source: Sequence[str] = SOURCE_FIELDS
    ) -> dict[str, dict[str, Any]]:
        if not ids:
            return {}
        found = self.call(
            lambda: self.client.mget(index=self.index, body={"ids": ids}, _source=list(source))
        )
        return {doc["_id"]: doc.get("_source", {}) for doc in found["docs"] if doc.get("found")}

    def _vectors_of(self, ids: list[str], field_name: str) -> dict[str, list[float]]:
        if not ids:
            return {}
        found = self._search(
            {"size": len(ids), "_source": [field_name], "query": {"ids": {"values": ids}}}
        )
        return {
            hit["_id"]: hit["_source"][field_name]
            for hit in found["hits"]["hits"]
            if field_name in hit.get("_source", {})
        }

    def _search(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.call(lambda: self.client.search(index=self.index, body=body))

    def call(self, request: Callable[[], _T]) -> _T:
        """Run one cluster request against this index; its failures as this package's typed
        errors (no index: :class:`MappingError`; no answer: :class:`ClusterUnavailableError`;
        refused: :class:`QueryError`)."""
        try:
            return request()
        except NotFoundError as exc:
            raise MappingError(f"no index {self.index}: {transport_reason(exc)}") from exc
        except OSConnectionError as exc:
            raise ClusterUnavailableError(f"OpenSearch does not answer: {exc}") from exc
        except TransportError as exc:
            raise QueryError(f"OpenSearch refused the search: {transport_reason(exc)}") from exc

    def _msearch(self, bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
        lines: list[dict[str, Any]] = []
        for body in bodies:
            lines.extend(({}, body))
        found = self.call(lambda: self.client.msearch(index=self.index, body=lines))
        responses = found["responses"]
        for response in responses:
            error = response.get("error")
            if error:
                root = (error.get("root_cause") or [error])[0] if isinstance(error, dict) else {}
                reason = root.get("reason") if isinstance(root, dict) else None
                if response.get("status") == 404:
                    raise MappingError(f"no index {self.index}: {reason or error}")
                raise QueryError(f"OpenSearch refused the search: {reason or error}")
        return responses

    @staticmethod
    def _hits(response: dict[str, Any], tokens: list[str]) -> list[Hit]:
        hits = []
        for rank, raw in enumerate(response["hits"]["hits"], start=1):
            source = raw.get("_source") or {}
            doc_tokens = str(source.get("math_tokens", "")).split()
            hits.append(
                Hit(
                    rank=rank,
                    eq_id=str(source.get("eq_id", raw["_id"])),
                    doc_id=str(source.get("doc_id", "")),
                    score=float(raw["_score"] or 0.0),
                    latex=str(source.get("latex", "")),
                    mathml=str(source.get("mathml", "")),
                    position=source.get("position"),
                    section=str(source.get("section", "")),
                    matched_tokens=matched_tokens(tokens, doc_tokens),
                    highlight=highlight(tokens, doc_tokens),
                )
            )
        return hits


def _fields(request: SearchRequest) -> tuple[str, ...]:
    """The stored fields a hit needs: :data:`SOURCE_FIELDS`, plus ``mathml`` when asked."""
    return (*SOURCE_FIELDS, "mathml") if request.mathml else SOURCE_FIELDS


def _retrieved(response: dict[str, Any]) -> _Retrieved:
    hits = response["hits"]["hits"]
    return _Retrieved(
        ranked=[(hit["_id"], float(hit["_score"])) for hit in hits],
    )
