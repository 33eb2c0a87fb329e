"""The ``Searcher``: a LaTeX query (plus words) in, ranked equations out, in every mode.

The query goes through the same featurisation as indexing (math tokens from
:class:`mathsearch.indexer.parse.Featuriser`, the vector from the ONNX model whose card names the
vector field), then its mode.

Each mode is one module of :mod:`mathsearch.opensearch.modes` (its body, how it runs, how it
explains a score), registered by its :class:`Mode`; the searcher does what they share and is
the :class:`~mathsearch.opensearch.modes.base.ModeContext` they call the cluster through.
``fusion`` and ``rrf`` fuse on the cluster or client-side (``fusion_side``, default client:
:mod:`mathsearch.opensearch.modes.hybrid`); ``rescore`` re-ranks BM25's window client-side
(:mod:`mathsearch.opensearch.modes.rescore`). Alpha is the vector's share in every mode.

``max_df`` leaves the query tokens found in more than that fraction of the equations out of BM25,
``max_terms`` keeps the most informative N distinct ones (:mod:`mathsearch.opensearch.token_stats`),
in every mode that uses BM25.

``explain`` adds a :class:`~mathsearch.opensearch.results.ScoreBreakdown` to every hit (each
subquery's raw and normalised score and the formula), ``group`` groups the hits by document.

A second stage: a hybrid request naming ``rerank`` encoders gets its first stage's top
``rerank_window`` hits re-ranked with those encoders' vectors, read from the index's fields in
one round trip (:meth:`Searcher.window_scores`; the query embedded with the first stage's
vectors), or embedded here when the index lacks a field, with a warning in the response
(:mod:`mathsearch.opensearch.window_rerank`).

Several encoders: a request naming ``encoders`` (or ``vector_fields``) is featurised once and
embedded by each (:class:`~mathsearch.opensearch.query_encoder.ModelQueryEncoder`); every mode
then uses every field (one hybrid query of BM25 + one kNN per field for fusion and rrf,
client-side the same lists in one ``_msearch``). A field the index lacks, or one the query got
no vector for, is a :class:`QueryError` saying which. ``fields``
(:class:`~mathsearch.opensearch.search_fields.SearchFields`) names the index's fields, so another
index (figures) uses the same modes.

Example::

    searcher = Searcher(connect(), "mathsearch-equations")
    response = searcher.search(SearchRequest(r"\\int_0^1 x^2 dx", mode=Mode.FUSION, k=5))
    best = [(hit.rank, hit.score, hit.latex) for hit in response.hits]
    both = searcher.search(SearchRequest("x^2", mode=Mode.RRF, encoders=("gcn", "bitmap")))
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from opensearchpy import OpenSearch

from mathsearch.core.errors import MappingError, QueryError, UnknownEquationError
from mathsearch.indexer.query_variables import has_variables
from mathsearch.opensearch import queries
from mathsearch.opensearch.cluster_capabilities import ClusterCapabilities
from mathsearch.opensearch.mathml_display import MathMLRenderer
from mathsearch.opensearch.modes import MODES
from mathsearch.opensearch.modes.base import SearchMode
from mathsearch.opensearch.queries import Mode
from mathsearch.opensearch.query_encoder import (
    ModelQueryEncoder,
    QueryEncoder,
    QueryFeatures,
    takes_keyword,
)
from mathsearch.opensearch.read_cache import ReadCache
from mathsearch.opensearch.results import (
    Hit,
    SearchResponse,
    group_hits,
    highlight,
    matched_tokens,
)
from mathsearch.opensearch.schema import index_meta
from mathsearch.opensearch.search_calls import SearchCalls
from mathsearch.opensearch.search_fields import EQUATION_FIELDS, EQUATION_SOURCE, SearchFields
from mathsearch.opensearch.search_request import SearchRequest
from mathsearch.opensearch.stored_vectors import VectorStorage
from mathsearch.opensearch.token_stats import TokenStats
from mathsearch.opensearch.vector_fields import field_storages
from mathsearch.opensearch.vector_plan import VectorPlan, plan_vectors, requested_fields
from mathsearch.opensearch.wildcard_search import TreeCache, pattern_featuriser, wildcard_search
from mathsearch.opensearch.window_rerank import (
    RerankVectors,
    rerank_fused,
    rerank_hits,
    stored_encoders,
)

logger = logging.getLogger(__name__)

SOURCE_FIELDS = EQUATION_SOURCE

#: Threads that choose BM25's query tokens while a query embeds (one per concurrent search).
BACKGROUND_THREADS = 4


@dataclass(frozen=True)
class WindowScores:
    """A second stage's window, read in one round trip (:meth:`Searcher.window_scores`): BM25
    by id, each exact-only field's encoded vector by id, each kNN field's ``(1 + cos) / 2``
    by id, and the stored fields by id."""

    bm25: dict[str, float]
    stored: dict[str, dict[str, str]]
    cosines: dict[str, dict[str, float]]
    sources: dict[str, dict[str, Any]]


__all__ = ["SOURCE_FIELDS", "ModelQueryEncoder", "SearchRequest", "Searcher", "WindowScores"]


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
        self.renderer = MathMLRenderer()
        #: memoised reads for a run over an index nothing writes to (tuning); see read_cache
        self.read_cache: ReadCache | None = None
        self._rerank_vectors: RerankVectors | None = None
        self._storages: dict[str, VectorStorage] | None = None
        #: converted trees of wildcard searches' candidates (:mod:`.wildcard_search`)
        self.tree_cache = TreeCache()
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None

    # -- public -------------------------------------------------------------------------------

    def pattern_featuriser(self) -> Any:
        """The featurisation of wildcard patterns and their candidates: one per process,
        shared with ``math_query`` (:func:`~.wildcard_search.pattern_featuriser`)."""
        return pattern_featuriser()

    @property
    def rerank_vectors(self) -> RerankVectors:
        """The second stage's encoders and their vectors of candidates (``rerank``), made on
        first use: a searcher that never re-ranks reads no setting and loads no model for it."""
        if self._rerank_vectors is None:
            self._rerank_vectors = RerankVectors()
        return self._rerank_vectors

    def search(
        self, request: SearchRequest, *, tokens: Sequence[str] | None = None
    ) -> SearchResponse:
        """Run one search; see the module docstring. A query with variables (``?x``,
        ``\\qvar{x}``) is a wildcard search (:mod:`mathsearch.opensearch.wildcard_search`);
        ``tokens`` replaces the query's own math tokens on the BM25 side (its first stage).

        Raises:
            QueryError: bad parameters, an unreadable query, a vector field the index lacks or
                the query has no vector for, or a request the cluster refused.
            MappingError: no such index.
            ClusterUnavailableError: the cluster does not answer.
        """
        request.validate()
        if tokens is None and has_variables(request.latex):
            return wildcard_search(self, request)
        started = time.perf_counter()
        for name in request.rerank if request.reranks else ():
            self.rerank_vectors.field_of(name)  # an unknown encoder: its own clear error first
        cut = MODES[request.mode].uses_bm25 and bool(request.max_df or request.max_terms)
        choosing: list[Future[list[str]]] = []

        def choose(found: list[str]) -> None:  # BM25's tokens chosen while the query embeds
            choosing.append(self._background().submit(self._chosen_tokens, request, found))

        early = choose if cut and tokens is None else None
        features = self._features(request, early) if request.latex.strip() else None
        featurised = time.perf_counter()
        if choosing:
            tokens = choosing[0].result()
        else:
            tokens = list(tokens) if tokens is not None else (features.tokens if features else [])
            if cut and tokens:
                tokens = self._chosen_tokens(request, tokens)
        fallback = self._refused_everywhere(request, features)
        if fallback:  # a hybrid mode whose every vector the encoders refused: BM25 alone
            request = replace(request, mode=Mode.BM25)
        spec = MODES[request.mode]
        plan = self.plan(request, features)
        # grouping ranks documents by their best equation: fetch a deeper list to fill k groups
        # a page further down (offset) is the same ranking cut further down
        last = request.offset + request.k
        size = max(last, min(request.depth, request.window)) if request.group else last
        if request.reranks:  # the second stage needs the first stage's whole window
            size = max(size, request.rerank_window)
        first = time.perf_counter()
        warnings: list[str] = []

        def query_vectors() -> dict[str, Any]:
            return features.resolved().by_field() if features is not None else {}

        if self._fused_second_stage(request, spec):
            # client-side fusion over exact-only fields: the fusion's own _msearch brings the
            # candidates' vectors and BM25, so the second stage needs no round trip of its own
            keep = None if request.group else last
            reranked = rerank_fused(
                self, spec, replace(request, k=size), tokens,
                plan=plan, vectors=self.rerank_vectors, query_vectors=query_vectors, keep=keep,
            )  # fmt: skip
            second = reranked.first_stage_done or time.perf_counter()
            hits, warnings = reranked.hits, reranked.warnings
        else:
            # with a second stage the first stage ranks ids alone: the second stage's one
            # search brings the window's stored fields with its scores
            first_request = replace(
                request, k=size, fetch_sources=request.fetch_sources and not request.reranks
            )
            hits = spec.run(self, first_request, tokens, plan)
            second = time.perf_counter()
            if request.reranks:
                reranked = rerank_hits(
                    self, request, tokens, hits, self.rerank_vectors,
                    query_vectors=query_vectors(),
                )  # fmt: skip
                hits, warnings = reranked.hits, reranked.warnings
        groups = group_hits(hits, last)[request.offset :] if request.group else None
        if not request.group:
            hits = hits[request.offset : last]
        if request.mathml:  # the index keeps MathML of MathML input only: render the rest
            self.renderer.fill(hits)
        fields = plan.fields if spec.uses_vectors else []
        done = time.perf_counter()
        stages = {
            "query": (featurised - started) * 1000,  # featurisation and every encoder's vector
            "first_stage": (second - first) * 1000,
            **({"second_stage": (done - second) * 1000} if request.reranks else {}),
        }
        return SearchResponse(
            mode=request.mode.value,
            k=request.k,
            vector_field=fields[0] if fields else None,
            took_ms=(done - started) * 1000,
            hits=hits,
            groups=groups,
            fused=spec.fused_side(request),
            parameters={**request.parameters(), **({"fallback": fallback} if fallback else {})},
            query_tokens=tokens,
            vector_fields=fields,
            warnings=warnings,
            stages_ms=stages,
        )

    def similar(self, eq_id: str, request: SearchRequest) -> SearchResponse:
        """Search with the stored LaTeX of the indexed equation ``eq_id`` as the query ("more
        like this"): the same featurisation and mode as any search, the equation itself left
        out by a filter (so ``k`` others remain). ``request`` carries no LaTeX; its words,
        mode, parameters and filters apply.

        Raises:
            UnknownEquationError: the index holds no equation ``eq_id``.
            QueryError: the request has LaTeX of its own, the equation has none to search with
                (it came in as MathML), or any error of :meth:`search`.
        """
        if request.latex.strip():
            raise QueryError("give latex or like, not both")
        display = self.fields.display
        stored = self.sources_of([eq_id], (display,)).get(eq_id)
        if stored is None:
            raise UnknownEquationError(f"no equation {eq_id!r} in {self.index}")
        latex = str(stored.get(display) or "")
        if not latex.strip():
            raise QueryError(f"equation {eq_id!r} has no LaTeX to search with (MathML input)")
        filters = replace(request.filters, exclude_ids=(*request.filters.exclude_ids, eq_id))
        response = self.search(replace(request, latex=latex, filters=filters))
        response.parameters["like"] = eq_id
        return response

    def _refused_everywhere(
        self, request: SearchRequest, features: QueryFeatures | None
    ) -> str | None:
        """Why a hybrid request falls back to BM25: every vector field it searches has no query
        vector because its encoder refused the query (e.g. SymPy cannot read it for
        ``seq2seq``); None when it does not. ``knn`` has no BM25 side and keeps the error."""
        spec = MODES[request.mode]
        if not spec.hybrid or features is None:
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
        if not MODES[request.mode].uses_vectors:
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

    # -- what a mode sees (modes.base.ModeContext) ---------------------------------------------

    def _features(
        self, request: SearchRequest, on_tokens: Callable[[list[str]], None] | None = None
    ) -> QueryFeatures:
        """One featurisation of the query, embedded by the request's encoders when it names
        them (and the query encoder takes names), else by the query encoder's own; not embedded
        at all for a mode without vectors (when the query encoder takes ``embed``).
        ``on_tokens`` gets the tokens before the embedding when the query encoder takes it."""
        if not MODES[request.mode].uses_vectors and takes_keyword(self.encoder, "embed"):
            return self.encoder.features(request.latex, embed=False)  # type: ignore[call-arg]
        extra: dict[str, Any] = {}
        if on_tokens is not None and takes_keyword(self.encoder, "on_tokens"):
            extra["on_tokens"] = on_tokens
        if request.reranks and takes_keyword(self.encoder, "extra"):
            extra["extra"] = list(request.rerank)  # the second stage's, in the same pass
            if takes_keyword(self.encoder, "defer_extra"):
                extra["defer_extra"] = True  # ... embedded while the first stage runs
        if request.encoders and takes_keyword(self.encoder, "encoders"):
            return self.encoder.features(request.latex, encoders=list(request.encoders), **extra)  # type: ignore[call-arg]
        return self.encoder.features(request.latex, **extra)

    def _chosen_tokens(self, request: SearchRequest, tokens: list[str]) -> list[str]:
        """The query tokens BM25 gets: ``max_df`` / ``max_terms`` applied with the index's
        frequencies (:class:`~mathsearch.opensearch.token_stats.TokenStats`)."""
        if not tokens:
            return tokens
        return self.call(
            lambda: self.token_stats.select(
                tokens, max_df=request.max_df, max_terms=request.max_terms
            )
        )

    def _background(self) -> ThreadPoolExecutor:
        """The threads that choose BM25's tokens (a ``_termvectors`` round trip) while the
        request's thread embeds the query."""
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    max_workers=BACKGROUND_THREADS, thread_name_prefix="bm25-tokens"
                )
            return self._executor

    def _fused_second_stage(self, request: SearchRequest, spec: SearchMode) -> bool:
        """Whether the second stage can ride on the first stage's lists: a client-side
        fusion, and every rerank encoder stored in an exact-only field of this index."""
        if not (request.reranks and spec.fused and spec.fused_side(request) == "client"):
            return False
        return stored_encoders(self, request, self.rerank_vectors) is not None

    def source_fields(self, request: SearchRequest) -> tuple[str, ...]:
        """The stored fields a hit needs, plus ``mathml`` when asked (equations); only the id
        and the paper for a ranking alone (``request.annotate`` False)."""
        if not request.fetch_sources:
            return ()
        if not request.annotate:
            return tuple(f for f in self.fields.source if f in (self.fields.id_field, "doc_id"))
        return (*self.fields.source, "mathml") if request.mathml else self.fields.source

    def capabilities(self) -> ClusterCapabilities:
        """What the cluster's OpenSearch version can do (one ``GET /`` per client, cached)."""
        return ClusterCapabilities.of(self.client, self.call)

    def run_body(self, body: dict[str, Any]) -> dict[str, Any]:
        """One ``_search`` of the index (typed errors; from ``read_cache`` when set)."""
        if self.read_cache is not None:
            return self.read_cache.search(body, self._search)
        return self._search(body)

    def run_bodies(self, bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Several searches in one ``_msearch`` (typed errors, one per failed search; the
        bodies ``read_cache`` has seen are answered from it)."""
        if self.read_cache is not None:
            return self.read_cache.msearch(bodies, self._msearch)
        return self._msearch(bodies)

    def sources_of(self, ids: list[str], source: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The stored ``source`` fields of ``ids`` (one ``ids`` search; only the ids
        ``read_cache`` lacks when it is set)."""
        if not ids or not source:
            return {}
        if self.read_cache is not None:
            return self.read_cache.sources(ids, source, lambda todo: self._sources_of(todo, source))
        return self._sources_of(ids, source)

    def doc_values_of(self, ids: list[str], names: Sequence[str]) -> dict[str, dict[str, list]]:
        """The doc values of the keyword fields ``names`` of each of ``ids`` (one ``ids``
        search that reads no stored field: cheaper than :meth:`sources_of` for a window).
        An id the index lacks is left out, and so is a field a document has no value of."""
        if not ids:
            return {}
        ids_from = self.fields.id_field
        body = queries.base_body(len(ids), (), ids_from=ids_from)
        body["query"] = {"ids": {"values": list(ids)}}
        body["docvalue_fields"] = [ids_from, *(name for name in names if name != ids_from)]
        out: dict[str, dict[str, list]] = {}
        for hit in self.run_body(body)["hits"]["hits"]:
            found = hit.get("fields") or {}
            out[queries.hit_id(hit, ids_from)] = {
                name: found[name] for name in names if name in found
            }
        return out

    def vector_storages(self, *, refresh: bool = False) -> dict[str, VectorStorage]:
        """How the index keeps each vector field (``hnsw`` for a kNN field, ``float16`` /
        ``int8`` for an exact-only one; cached, read again with ``refresh``)."""
        if self._storages is None or refresh:
            self._storages = self.call(lambda: field_storages(self.client, self.index))
        return self._storages

    def window_scores(
        self,
        ids: list[str],
        tokens: list[str],
        words: str,
        *,
        stored: Sequence[str] = (),
        knn: Sequence[tuple[str, Any]] = (),
        source: Sequence[str] = (),
    ) -> WindowScores:
        """For a second stage, in one ``_msearch``: the exact BM25 score of each of ``ids``
        (0 for one that matches no token), the ``stored`` exact-only fields' encoded vectors
        (``docvalue_fields``), the ``source`` fields of each and, for each ``(field, query
        vector)`` of ``knn``, the exact ``(1 + cos) / 2`` of the kNN field (the k-NN plugin's
        script)."""
        if not ids:
            return WindowScores({}, {name: {} for name in stored}, {f: {} for f, _ in knn}, {})
        query = {
            "bool": {
                "should": [queries.bm25_query(tokens, words, fields=self.fields)],
                "filter": [{"ids": {"values": list(ids)}}],
                "minimum_should_match": 0,
            }
        }
        body: dict[str, Any] = {
            "size": len(ids), "_source": list(source) or False, "track_total_hits": False,
            "query": query,
        }  # fmt: skip
        if stored:
            body["docvalue_fields"] = list(stored)
        ids_from = self.fields.id_field
        bodies = [body] + [
            queries.exact_cosine_body(name, vector, ids, ids_from=ids_from) for name, vector in knn
        ]
        first, *rest = self.run_bodies(bodies)
        bm25: dict[str, float] = {}
        values: dict[str, dict[str, str]] = {name: {} for name in stored}
        sources: dict[str, dict[str, Any]] = {}
        for hit in first["hits"]["hits"]:
            bm25[hit["_id"]] = float(hit["_score"] or 0.0)
            if source:
                sources[hit["_id"]] = hit.get("_source") or {}
            for name, found in (hit.get("fields") or {}).items():
                if name in values and found:
                    values[name][hit["_id"]] = str(found[0])
        cosines = {
            name: {
                queries.hit_id(hit, ids_from): float(hit["_score"])
                for hit in response["hits"]["hits"]
            }
            for (name, _), response in zip(knn, rest, strict=True)
        }
        return WindowScores(bm25, values, cosines, sources)

    def bm25_scores(self, ids: list[str], tokens: list[str], words: str) -> dict[str, float]:
        """The exact BM25 score of each of ``ids`` (one filtered search)."""
        if not ids:
            return {}
        query = queries.bm25_query(tokens, words, fields=self.fields)
        query["bool"]["filter"] = [{"ids": {"values": list(ids)}}]
        body = {"size": len(ids), "_source": False, "track_total_hits": False, "query": query}
        found = self.run_body(body)
        return {hit["_id"]: float(hit["_score"]) for hit in found["hits"]["hits"]}

    def hits_of(
        self, response: dict[str, Any], tokens: list[str], *, annotate: bool = True
    ) -> list[Hit]:
        """A search response's hits, ranked, with matched tokens and highlight (neither when
        ``annotate`` is False: a ranking alone, see :class:`SearchRequest`; nor for a hit
        without stored fields: an id-only ranking a second stage annotates)."""
        hits = []
        names = self.fields
        for rank, raw in enumerate(response["hits"]["hits"], start=1):
            source = raw.get("_source") or {}
            hit = Hit(
                rank=rank,
                eq_id=str(source.get(names.id_field) or queries.hit_id(raw, names.id_field)),
                doc_id=str(source.get("doc_id", "")),
                score=float(raw["_score"] or 0.0),
            )
            if annotate and source:
                doc_tokens = str(source.get(names.tokens, "")).split()
                hit.latex = str(source.get(names.display, ""))
                hit.mathml = str(source.get("mathml", ""))
                hit.position = source.get("position")
                hit.section = str(source.get("section", ""))
                hit.matched_tokens = matched_tokens(tokens, doc_tokens)
                hit.highlight = highlight(tokens, doc_tokens)
            hits.append(hit)
        return hits
