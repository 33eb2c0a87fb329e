"""The ``Searcher``: a LaTeX query (plus words) in, ranked equations out, in every mode.

The query goes through the same featurisation as indexing (math tokens from
:class:`indexer.parse.Featuriser`, the vector from the ONNX model whose card names the vector
field), then one of the bodies of :mod:`opensearch.queries`.

``fusion`` and ``rrf`` run on the cluster (neural-search ``hybrid`` query + a temporary search
pipeline) or client-side (:mod:`opensearch.fusion`: the two subqueries, then the same
normalisation and combination); ``fusion_side="auto"`` uses the cluster and falls back to the
client for ``z_score``, which neural-search 2.19 does not offer. Alpha is the vector's share in
every mode: fusion weights are ``[1 - alpha, alpha]`` for ``[bm25, knn]``.

``explain`` adds a :class:`~opensearch.results.ScoreBreakdown` to every hit (each subquery's raw
and normalised score and the formula), ``group`` groups the hits by document.

Example::

    searcher = Searcher(connect(), "mathsearch-equations")
    response = searcher.search(SearchRequest(r"\\int_0^1 x^2 dx", mode=Mode.FUSION, k=5))
    for hit in response.hits:
        print(hit.rank, hit.score, hit.latex)
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple, Protocol

from opensearchpy import OpenSearch
from opensearchpy.exceptions import ConnectionError as OSConnectionError
from opensearchpy.exceptions import NotFoundError, TransportError

from opensearch import queries
from opensearch.errors import ClusterUnavailableError, MappingError, QueryError
from opensearch.fusion import Combination, FusedHit, Normalization, fuse, rrf
from opensearch.queries import NO_FILTERS, Filters, Mode
from opensearch.results import (
    Hit,
    ScoreBreakdown,
    SearchResponse,
    group_hits,
    highlight,
    matched_tokens,
)
from opensearch.schema import index_meta

logger = logging.getLogger(__name__)

SOURCE_FIELDS = ("eq_id", "doc_id", "latex", "position", "section", "math_tokens")
FUSION_SIDES = ("auto", "server", "client")


class QueryFeatures(NamedTuple):
    """A query featurised: its math tokens, its vector and the field that vector belongs to."""

    tokens: list[str]
    vector: list[float] | None
    vector_field: str | None


class QueryEncoder(Protocol):
    """Turns query LaTeX into :class:`QueryFeatures` (raises :class:`QueryError` if it can't)."""

    def features(self, latex: str) -> QueryFeatures: ...


class ModelQueryEncoder:
    """Featuriser + ONNX encoder, created on first use.

    ``model`` is an ONNX path (default ``MATHSEARCH_MODEL``) or a ready
    :class:`export.runtime.Encoder`.
    """

    def __init__(self, model: Any = None) -> None:
        self._model = model
        self._featuriser: Any = None
        self._encoder: Any = None

    def features(self, latex: str) -> QueryFeatures:
        from export.runtime import Encoder
        from indexer.parse import Featuriser
        from indexer.records import Failure

        if self._featuriser is None:
            self._featuriser = Featuriser()
            if isinstance(self._model, Encoder):
                self._encoder = self._model
            else:
                self._encoder = Encoder(self._model) if self._model else Encoder()
        parsed = self._featuriser.parse_latex(latex)
        if isinstance(parsed, Failure):
            raise QueryError(f"cannot read the query ({parsed.reason}): {parsed.detail}")
        vector = self._encoder.encode([parsed.graph])[0]
        return QueryFeatures(
            tokens=list(parsed.math_tokens),
            vector=[float(x) for x in vector],
            vector_field=self._encoder.card.vector_field,
        )


@dataclass(frozen=True)
class SearchRequest:
    """Everything one search needs; the defaults are the seed's (window 100, rank constant 60)."""

    latex: str
    text: str = ""
    mode: Mode = Mode.FUSION
    k: int = 10
    alpha: float = 0.5
    window: int = 100
    depth: int = 100
    normalization: Normalization = Normalization.MIN_MAX
    combination: Combination = Combination.ARITHMETIC_MEAN
    rank_constant: int = 60
    filters: Filters = NO_FILTERS
    group: bool = False
    explain: bool = False
    vector_field: str | None = None
    fusion_side: str = "auto"

    def validate(self) -> None:
        """Raise :class:`QueryError` for parameters no mode accepts."""
        if not self.latex.strip() and not self.text.strip():
            raise QueryError("empty query: give LaTeX (and optionally words)")
        if not 1 <= self.k <= 10_000:
            raise QueryError(f"k must lie in [1, 10000], not {self.k}")
        if not 0.0 <= self.alpha <= 1.0:
            raise QueryError(f"alpha must lie in [0, 1], not {self.alpha}")
        if self.fusion_side not in FUSION_SIDES:
            raise QueryError(f"fusion side must be one of {FUSION_SIDES}, not {self.fusion_side}")
        if self.depth < self.k or self.window < self.k:
            raise QueryError(f"depth ({self.depth}) and window ({self.window}) must be >= k")

    def parameters(self) -> dict[str, Any]:
        """The parameters that shaped the ranking (for reports and ``--json``)."""
        out: dict[str, Any] = {"k": self.k}
        if self.mode in (Mode.RESCORE, Mode.KNN_RESCORE, Mode.FUSION):
            out["alpha"] = self.alpha
        if self.mode in (Mode.RESCORE, Mode.KNN_RESCORE):
            out["window"] = self.window
        if self.mode in (Mode.FUSION, Mode.RRF):
            out["depth"] = self.depth
        if self.mode is Mode.FUSION:
            out["normalization"] = self.normalization.value
            out["combination"] = self.combination.value
        if self.mode is Mode.RRF:
            out["rank_constant"] = self.rank_constant
        return out


@dataclass
class _Retrieved:
    ranked: list[tuple[str, float]]
    sources: dict[str, dict[str, Any]] = field(default_factory=dict)


class Searcher:
    """Runs :class:`SearchRequest` s against the equation index behind ``index`` (an alias)."""

    def __init__(
        self, client: OpenSearch, index: str, *, encoder: QueryEncoder | None = None
    ) -> None:
        self.client = client
        self.index = index
        self.encoder = encoder or ModelQueryEncoder()
        self._default_field: str | None = None

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
            meta = index_meta(self.client, self.index)
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
        if request.fusion_side != "auto":
            return request.fusion_side
        if request.mode is Mode.FUSION and request.normalization is Normalization.Z_SCORE:
            return "client"
        return "server"

    def _single(
        self, request: SearchRequest, tokens: list[str], field_name: str, vector: list[float]
    ) -> list[Hit]:
        common = {"size": request.k, "filters": request.filters, "source": SOURCE_FIELDS}
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
                request.normalization, request.combination, _weights(request.alpha)
            )
        body = queries.hybrid_body(
            tokens, request.text, field_name, vector, size=request.k, depth=request.depth,
            filters=request.filters, source=SOURCE_FIELDS, pipeline=pipeline,
        )  # fmt: skip
        body["query"]["hybrid"]["pagination_depth"] = request.depth
        return self._hits(self._search(body), tokens)

    def _subqueries(
        self, request: SearchRequest, tokens: list[str], field_name: str, vector: list[float]
    ) -> list[_Retrieved]:
        common = {"size": request.depth, "filters": request.filters, "source": SOURCE_FIELDS}
        bm25 = self._search(queries.bm25_body(tokens, request.text, **common))
        knn = self._search(queries.knn_body(field_name, vector, k=request.depth, **common))
        return [_retrieved(bm25), _retrieved(knn)]

    def _fused(self, request: SearchRequest, lists: Sequence[_Retrieved]) -> list[FusedHit]:
        ranked = [item.ranked for item in lists]
        if request.mode is Mode.RRF:
            return rrf(ranked, rank_constant=request.rank_constant)
        return fuse(
            ranked,
            normalization=request.normalization,
            combination=request.combination,
            weights=_weights(request.alpha),
        )

    def _client_fusion(
        self, request: SearchRequest, tokens: list[str], field_name: str, vector: list[float]
    ) -> list[Hit]:
        lists = self._subqueries(request, tokens, field_name, vector)
        fused = self._fused(request, lists)[: request.k]
        sources = {**lists[1].sources, **lists[0].sources}
        raw_hits = [
            {"_id": f.doc_id, "_score": f.score, "_source": sources[f.doc_id]} for f in fused
        ]
        hits = self._hits({"hits": {"hits": raw_hits}}, tokens)
        if request.explain:
            for hit, item in zip(hits, fused, strict=True):
                hit.explanation = _fusion_breakdown(request, item)
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
                _fusion_breakdown(request, item)
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
        if request.mode is Mode.BM25:
            for hit in hits:
                hit.explanation = ScoreBreakdown(bm25=hit.score, score=hit.score, formula="bm25")
            return
        if request.mode is Mode.KNN:
            for hit in hits:
                hit.explanation = ScoreBreakdown(knn=hit.score, score=hit.score, formula=_KNN)
            return
        bm25 = self._bm25_of(ids, tokens, request.text)
        stored = self._vectors_of(ids, field_name)
        a = request.alpha
        for hit in hits:
            doc_vector = stored.get(hit.eq_id)
            if request.mode is Mode.RESCORE:
                cos01 = _cos01(vector, doc_vector) if doc_vector else None
                hit.explanation = ScoreBreakdown(
                    bm25=bm25.get(hit.eq_id), knn=cos01, score=hit.score,
                    formula=f"{1 - a:.2f} * bm25 + {a:.2f} * (1 + cos) / 2",
                )  # fmt: skip
            else:
                knn = _knn_score(vector, doc_vector) if doc_vector else None
                hit.explanation = ScoreBreakdown(
                    bm25=bm25.get(hit.eq_id), knn=knn, score=hit.score,
                    formula=f"{a:.2f} * knn + {1 - a:.2f} * bm25",
                )  # fmt: skip

    # -- cluster calls ------------------------------------------------------------------------

    def _bm25_of(self, ids: list[str], tokens: list[str], words: str) -> dict[str, float]:
        if not ids:
            return {}
        query = queries.bm25_query(tokens, words, Filters(terms={"eq_id": tuple(ids)}))
        found = self._search({"size": len(ids), "_source": False, "query": query})
        return {hit["_id"]: float(hit["_score"]) for hit in found["hits"]["hits"]}

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
        try:
            return self.client.search(index=self.index, body=body)
        except NotFoundError as exc:
            raise MappingError(f"no index {self.index}: {_reason(exc)}") from exc
        except OSConnectionError as exc:
            raise ClusterUnavailableError(f"OpenSearch does not answer: {exc}") from exc
        except TransportError as exc:
            raise QueryError(f"OpenSearch refused the search: {_reason(exc)}") from exc

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
                    position=source.get("position"),
                    section=str(source.get("section", "")),
                    matched_tokens=matched_tokens(tokens, doc_tokens),
                    highlight=highlight(tokens, doc_tokens),
                )
            )
        return hits


_KNN = "knn (inner product: 1 + ip, or 1 / (1 - ip) below 0)"


def _weights(alpha: float) -> list[float]:
    return [round(1.0 - alpha, 6), round(alpha, 6)]


def _retrieved(response: dict[str, Any]) -> _Retrieved:
    hits = response["hits"]["hits"]
    return _Retrieved(
        ranked=[(hit["_id"], float(hit["_score"])) for hit in hits],
        sources={hit["_id"]: hit.get("_source") or {} for hit in hits},
    )


def _fusion_breakdown(request: SearchRequest, item: FusedHit) -> ScoreBreakdown:
    if request.mode is Mode.RRF:
        formula = f"sum over subqueries of 1 / ({request.rank_constant} + rank)"
    else:
        w = _weights(request.alpha)
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


def _cos01(query: Sequence[float], doc: Sequence[float]) -> float:
    dot = sum(a * b for a, b in zip(query, doc, strict=True))
    norm = math.sqrt(sum(a * a for a in query)) * math.sqrt(sum(b * b for b in doc))
    return (1.0 + (dot / norm if norm else 0.0)) / 2.0


def _knn_score(query: Sequence[float], doc: Sequence[float]) -> float:
    ip = sum(a * b for a, b in zip(query, doc, strict=True))
    return 1.0 + ip if ip >= 0 else 1.0 / (1.0 - ip)


def _reason(exc: TransportError) -> str:
    info = getattr(exc, "info", None)
    if isinstance(info, dict):
        error = info.get("error")
        if isinstance(error, dict):
            root = (error.get("root_cause") or [error])[0]
            return str(root.get("reason") or error.get("reason") or exc)[:500]
    return str(getattr(exc, "error", exc))[:500]
