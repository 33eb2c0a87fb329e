"""The second stage: the first stage's top window re-ranked with heavier encoders' vectors.

The index's kNN field holds a cheap encoder (the default graph CNN: its HNSW graph serves the
first stage). A request naming ``rerank`` encoders takes the top ``rerank_window`` hits of its
first stage (any hybrid mode) and ranks them again by the window-normalised interpolation of the
``rescore`` mode (the figure-embeddings seed's tf-idf + embedding scheme,
:mod:`mathsearch.opensearch.window_rescore`)::

    score(d) = (1 - a) * N(bm25)(d) + a / n * sum_e N((1 + cos(q_e, v_e(d))) / 2)  + offset
    N        = min_max over the window W; a = rerank_alpha; e = each of the n rerank encoders
    offset   = the largest first-stage score after the window (0 if none is positive), so the
               window stays above the hits past it (they keep their order and scores)

**The candidates' vectors come from the index.** The workers write each rerank encoder's field
at index time - an exact-only field (float16 or int8 bytes in binary doc values, no ANN graph:
:mod:`mathsearch.opensearch.stored_vectors`), or a kNN field the index has anyway. One
``_msearch`` then brings the window's exact BM25 scores with the stored fields' bytes
(``docvalue_fields``) and, for a kNN field, the k-NN plugin's exact cosines
(:func:`~mathsearch.opensearch.queries.exact_cosine_body`): one round trip, and no candidate is
embedded at query time. The query is featurised once and embedded once per encoder, with the
first stage's vectors (:class:`~mathsearch.opensearch.query_encoder.ModelQueryEncoder`'s
``extra``). A candidate without a value in a field (refused by that encoder, or written before
the field was added and not yet backfilled by ``mathsearch models add MODEL --rerank``) gets no
term for it, as in ``rescore``.

**An index without a field** falls back to embedding the window's candidates with that encoder
in this process (:class:`RerankVectors`: each encoder loaded once, an LRU cache of
``MATHSEARCH_RERANK_CACHE`` (encoder, equation) vectors, default 50,000), and says so: a warning
in the response (``SearchResponse.warnings``, shown by ``search`` and ``--explain``) and in the
log (once per index and fields).

The shipped default profile re-ranks the fusion's top 50 with gcn-v9 + gcn-v10 (their int8
variants, ``gcn-v9.int8.onnx`` and ``gcn-v10.int8.onnx``) at alpha 0.4, chosen on the tuning
halves of the validation papers and of the equivalence task by quality and cost together
(docs/tuning.md, "A second stage").

Example::

    request = SearchRequest(r"\\frac{1}{2} m^2 \\phi^2", mode=Mode.FUSION,
                            rerank=("gcn-v8.onnx",), rerank_window=50)
    response = searcher.search(request)    # the window re-ranked by gcn-v8 and BM25
    response.warnings                      # [] when the index holds vec_gcn_v8
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mathsearch.core.errors import QueryError
from mathsearch.opensearch.fusion import Normalization
from mathsearch.opensearch.queries import base_body
from mathsearch.opensearch.results import Hit, ScoreBreakdown
from mathsearch.opensearch.stored_vectors import VectorStorage, cosines01, decode_vectors
from mathsearch.opensearch.window_rescore import WindowScore, rank_window, rescore_window

if TYPE_CHECKING:
    from mathsearch.opensearch.search_request import SearchRequest

logger = logging.getLogger(__name__)

__all__ = [
    "CACHE_ENV",
    "RerankVectors",
    "Reranked",
    "rerank_fused",
    "rerank_hits",
    "rerank_order",
    "rerank_weights",
    "stored_encoders",
]

#: Environment variable (``OpenSearchSettings.rerank_cache``): how many (encoder, equation)
#: vectors :class:`RerankVectors` keeps by default.
CACHE_ENV = "MATHSEARCH_RERANK_CACHE"

Vector = np.ndarray


def rerank_weights(alpha: float, encoders: int) -> list[float]:
    """``[1 - alpha, alpha / n, ...]``: BM25's share, then each of the ``n`` encoders' (the
    split of :func:`mathsearch.opensearch.explain.split_alpha`, as the fusion's fields).

    >>> rerank_weights(0.6, 3)
    [0.4, 0.2, 0.2, 0.2]
    """
    if encoders < 1:
        raise QueryError("rerank needs at least one encoder")
    from mathsearch.opensearch.explain import split_alpha

    return [round(w, 12) for w in split_alpha(alpha, encoders)]


def rerank_order(
    bm25: Sequence[float],
    columns: Sequence[Sequence[float | None]],
    alpha: float,
) -> tuple[list[int], list[WindowScore]]:
    """The window's positions best first, and every position's :class:`WindowScore`.

    Args:
        bm25: each candidate's BM25 score, in first-stage order.
        columns: per rerank encoder, each candidate's ``(1 + cos) / 2`` (None: no vector).
        alpha: the encoders' share (split evenly over them).

    Ties keep the first stage's order.

    >>> order, scores = rerank_order([3.0, 2.0, 1.0], [[0.5, 0.9, 0.7]], 0.6)
    >>> order, [round(s.score, 3) for s in scores]
    ([1, 0, 2], [0.401, 0.8, 0.3])
    """
    weights = rerank_weights(alpha, len(columns))
    scores = rescore_window(bm25, columns, weights, Normalization.MIN_MAX)
    return rank_window(scores), scores


class RerankVectors:
    """The rerank encoders' vectors of LaTeX strings: each encoder loaded once, each
    (encoder, LaTeX) pair embedded once while it stays among the ``capacity`` most recent."""

    def __init__(self, capacity: int | None = None) -> None:
        if capacity is None:
            from mathsearch.opensearch.settings import OpenSearchSettings

            capacity = OpenSearchSettings.from_env().rerank_cache
        if capacity < 0:
            raise QueryError(f"{CACHE_ENV} must be >= 0, not {capacity}")
        self.capacity = capacity
        self._cache: OrderedDict[tuple[str, str], Vector | None] = OrderedDict()
        self._embedders: dict[str, Any] = {}
        self._featurisers: dict[bool, Any] = {}
        #: how many equations were embedded (cache misses), for benchmarks and tests
        self.embedded = 0
        self._fields: dict[str, str] = {}
        self._warned: set[tuple[str, tuple[str, ...]]] = set()
        # one caller at a time (serve's request threads share a searcher): the cache and the
        # featuriser are not thread-safe, and the sessions use every core anyway
        self._lock = threading.Lock()

    def embedder(self, name: str) -> Any:
        """The embedder of a family or an ``.onnx`` path (loaded on first use).

        Raises:
            QueryError: no such model or card, or one that does not fit this featurisation.
        """
        if name not in self._embedders:
            from mathsearch.runtime.embedders import as_embedder, shipped_or_path

            try:
                self._embedders[name] = as_embedder(shipped_or_path(name))
            except ValueError as exc:
                raise QueryError(f"rerank encoder {name!r}: {exc}") from exc
            logger.info("rerank encoder %s ready", self._embedders[name].vector_field)
        return self._embedders[name]

    def field_of(self, name: str) -> str:
        """The vector field of encoder ``name`` (its card's; no session loaded).

        Raises:
            QueryError: no such model or card.
        """
        if name not in self._fields:
            from mathsearch.opensearch.query_encoder import encoder_field

            try:
                self._fields[name] = encoder_field(name)
            except QueryError as exc:
                raise QueryError(f"rerank encoder {name!r}: {exc}") from exc
        return self._fields[name]

    def fallback_warning(self, index: str, fields: Sequence[str], window: int) -> str:
        """The warning of a second stage that embeds candidates at query time because
        ``index`` lacks ``fields``; logged once per index and fields (serve's log)."""
        names = ", ".join(fields)
        message = (
            f"{index} has no {names} field: the second stage embedded up to {window} "
            f"candidates at query time (slow); write the field with `mathsearch models add "
            f"MODEL --rerank` or re-index"
        )
        key = (index, tuple(fields))
        with self._lock:
            if key not in self._warned:
                self._warned.add(key)
                logger.warning("%s", message)
        return message

    def vectors(
        self, encoders: Sequence[str], equations: Sequence[tuple[str, str]]
    ) -> list[list[Vector | None]]:
        """Per encoder, each equation's vector (None: it could not be embedded).

        ``equations`` are ``(latex, mathml)`` pairs (the MathML is used when there is no LaTeX);
        a pair with neither gets None.
        """
        with self._lock:
            return self._vectors(encoders, equations)

    def _vectors(
        self, encoders: Sequence[str], equations: Sequence[tuple[str, str]]
    ) -> list[list[Vector | None]]:
        from mathsearch.runtime.families import needs_prefix

        embedders = {name: self.embedder(name) for name in encoders}
        flavours = {name: needs_prefix([e.family]) for name, e in embedders.items()}
        texts = [latex or mathml for latex, mathml in equations]
        source = dict(zip(texts, equations, strict=True))
        todo = {
            name: [t for t in dict.fromkeys(texts) if t and (name, t) not in self._cache]
            for name in encoders
        }
        parsed = self._parse(flavours, todo, source)  # once per equation, for every encoder
        fresh: dict[tuple[str, str], Vector | None] = {}
        for name, embedder in embedders.items():
            fresh.update(self._embed(name, embedder, todo[name], parsed, flavours[name]))
        out = []
        for name in encoders:
            column: list[Vector | None] = []
            for text in texts:
                key = (name, text)
                if key in fresh:
                    column.append(fresh[key])
                elif key in self._cache:
                    self._cache.move_to_end(key)
                    column.append(self._cache[key])
                else:
                    column.append(None)  # neither LaTeX nor MathML
            out.append(column)
        if self.capacity:
            self._cache.update(fresh)
            while len(self._cache) > self.capacity:
                self._cache.popitem(last=False)
        return out

    def _parse(
        self,
        flavours: dict[str, bool],
        todo: dict[str, list[str]],
        source: dict[str, tuple[str, str]],
    ) -> dict[tuple[bool, str], Any]:
        """``(with_prefix, text) -> ParsedEquation | Failure`` of every equation some encoder
        still needs: one featurisation per equation and prefix flavour (docs/architecture.md,
        rule 2)."""
        from mathsearch.indexer.parse import Featuriser
        from mathsearch.indexer.records import EquationRecord

        wanted: dict[bool, dict[str, None]] = {}
        for name, flavour in flavours.items():
            wanted.setdefault(flavour, {}).update(dict.fromkeys(todo[name]))
        out: dict[tuple[bool, str], Any] = {}
        for flavour, needed in wanted.items():
            if not needed:
                continue
            if flavour not in self._featurisers:
                self._featurisers[flavour] = Featuriser(with_prefix=flavour)
            texts = list(needed)
            records = [
                EquationRecord(
                    eq_id=f"rerank-{n}", doc_id="", position=n, latex=source[t][0] or None,
                    mathml=source[t][1] or None,
                )
                for n, t in enumerate(texts)
            ]  # fmt: skip
            results = self._featurisers[flavour].parse_batch(records)
            out.update({(flavour, t): r for t, r in zip(texts, results, strict=True)})
        return out

    def _embed(
        self,
        name: str,
        embedder: Any,
        texts: list[str],
        parsed: dict[tuple[bool, str], Any],
        flavour: bool,
    ) -> dict[tuple[str, str], Vector | None]:
        """``name``'s vectors of ``texts`` (None: unreadable, or refused by the encoder)."""
        if not texts:
            return {}
        from mathsearch.indexer.records import Failure
        from mathsearch.runtime.embedder_base import EmbedRefusal, embed_safely

        good = [(t, parsed[(flavour, t)]) for t in texts]
        good = [(t, p) for t, p in good if not isinstance(p, Failure)]
        results = embed_safely(embedder, [p.embed_item() for _, p in good]) if good else []
        fresh: dict[tuple[str, str], Vector | None] = {(name, t): None for t in texts}
        for (text, _), result in zip(good, results, strict=True):
            if not isinstance(result, EmbedRefusal):
                fresh[(name, text)] = np.asarray(result, dtype=np.float32)
        self.embedded += len(texts)
        return fresh


@dataclass(frozen=True)
class Reranked:
    """What the second stage gives back: the hits and what a reader should know (a field
    the index lacks, which was embedded at query time; an encoder that refused the query)."""

    hits: list[Hit]
    warnings: list[str] = field(default_factory=list)
    first_stage_done: float | None = None  # perf_counter when a fused path's lists came in


@dataclass(frozen=True)
class _Encoder:
    """One rerank encoder in one search: its name, field and where its vectors come from."""

    name: str
    field: str
    storage: VectorStorage | None  # None: the index lacks the field (query-time embedding)
    query: np.ndarray


def rerank_hits(
    ctx: Any,
    request: SearchRequest,
    tokens: list[str],
    hits: list[Hit],
    vectors: RerankVectors,
    *,
    query_vectors: Mapping[str, Sequence[float]] | None = None,
) -> Reranked:
    """``hits`` (the first stage, best first) with the top ``request.rerank_window`` re-ranked
    (see the module docstring); the rest follow unchanged.

    ``ctx`` is the searcher (:meth:`vector_storages`, :meth:`window_scores`,
    :meth:`sources_of`, ``fields``, ``index``); ``query_vectors`` the query's vectors by field
    from its one featurisation (a field missing there is embedded here).

    Raises:
        QueryError: a rerank encoder that cannot be loaded.
    """
    size = min(request.rerank_window, len(hits))
    if size < 1:
        return Reranked(_with_sources(ctx, request, tokens, hits, {}))
    window, rest = hits[:size], hits[size:]
    ids = [hit.eq_id for hit in window]
    warnings: list[str] = []
    encoders = _encoders(ctx, request, vectors, dict(query_vectors or {}), warnings)
    if not encoders:
        return Reranked(_with_sources(ctx, request, tokens, hits, {}), warnings)
    stored = [e for e in encoders if e.storage is not None and e.storage.exact_only]
    knn = [e for e in encoders if e.storage is VectorStorage.HNSW]
    missing = [e for e in encoders if e.storage is None]
    source = ctx.source_fields(request)
    if missing:  # the query-time path reads the candidates' LaTeX
        source = tuple(dict.fromkeys((*source, ctx.fields.display, "mathml")))
    found = ctx.window_scores(
        ids, tokens, request.text,
        stored=[e.field for e in stored],
        knn=[(e.field, e.query) for e in knn],
        source=source,
    )  # fmt: skip
    columns: list[list[float | None]] = []
    embedded = _embedded(ctx, ids, found.sources, missing, vectors) if missing else {}
    for encoder in encoders:
        if encoder.storage is None:
            column = cosines01(encoder.query, embedded[encoder.name])
        elif encoder.storage is VectorStorage.HNSW:
            column = [found.cosines[encoder.field].get(i) for i in ids]
        else:
            raw = [found.stored[encoder.field].get(i) for i in ids]
            decoded = decode_vectors(raw, encoder.storage, encoder.query.size)
            column = cosines01(encoder.query, decoded)
        columns.append(column)
    bm25 = [found.bm25.get(i, 0.0) for i in ids]
    order, scores = rerank_order(bm25, columns, request.rerank_alpha)
    offset = max([0.0, *(hit.score for hit in rest)])
    ranked = [replace(window[i], score=scores[i].score + offset) for i in order]
    out = _with_sources(ctx, request, tokens, ranked + rest, found.sources)
    if request.explain:
        names = [e.name for e in encoders]
        for hit, i in zip(out, order, strict=False):
            second = _breakdown(request, names, bm25[i], scores[i], columns=columns, i=i)
            hit.explanation = _both_stages(window[i].explanation, second, hit.score, offset)
    return Reranked(out, warnings)


def _with_sources(
    ctx: Any,
    request: SearchRequest,
    tokens: list[str],
    hits: list[Hit],
    sources: Mapping[str, Mapping[str, Any]],
) -> list[Hit]:
    """``hits`` in this order, ranked from 1, with their stored fields (the first stage ran
    without them): from ``sources`` (the window's, fetched with its scores), the rest in one
    ``ids`` search; each keeps its score and explanation."""
    fields = ctx.source_fields(request)
    lacking = [hit.eq_id for hit in hits if hit.eq_id not in sources]
    more = ctx.sources_of(lacking, fields) if lacking and fields else {}
    raw = [
        {
            "_id": hit.eq_id,
            "_score": hit.score,
            "_source": sources.get(hit.eq_id) or more.get(hit.eq_id, {}),
        }
        for hit in hits
    ]
    out = ctx.hits_of({"hits": {"hits": raw}}, tokens, annotate=request.annotate)
    for hit, before in zip(out, hits, strict=True):
        hit.explanation = before.explanation
    return out


def stored_encoders(ctx: Any, request: SearchRequest, vectors: RerankVectors) -> list[str] | None:
    """The request's rerank fields when the index keeps every one as an exact-only field (the
    fused fast path can read them with the first stage's lists), else None."""
    storages = ctx.vector_storages()
    fields = [vectors.field_of(name) for name in request.rerank]
    if any(name not in storages for name in fields):  # added since: look again
        storages = ctx.vector_storages(refresh=True)
    if all(name in storages and storages[name].exact_only for name in fields):
        return fields
    return None


def rerank_fused(
    ctx: Any,
    spec: Any,
    request: SearchRequest,
    tokens: list[str],
    *,
    plan: Any,
    vectors: RerankVectors,
    query_vectors: Callable[[], Mapping[str, Sequence[float]]],
    keep: int | None,
) -> Reranked:
    """The second stage of a client-side fusion over exact-only fields, read with the first
    stage (no round trip of its own).

    The fusion's one ``_msearch`` (BM25 and each kNN list, top ``depth``) also brings, in one
    more body, the exact BM25 of the kNN lists' equations (BM25 as a ``should`` over the kNN
    queries as a filter), and every listed equation's stored vectors (``docvalue_fields``)
    come with the BM25 list and that body: the kNN lists themselves carry ids and scores
    only (every equation they list is one of that body's hits), which keeps a third of the
    vectors out of the response. A window equation found in neither (the index refreshed
    between the searches) gets its vectors in one more request. Every candidate of the window
    then has its exact BM25 and vectors; the window is ranked as :func:`rerank_hits` ranks it
    (the same scores), and the ``keep`` best (None: all) get their stored fields in one
    ``ids`` search, as the fusion's own hits do.

    ``spec`` is the client-side :class:`~mathsearch.opensearch.modes.hybrid.HybridMode`,
    ``query_vectors`` gives the query's vectors by field once the lists are in (the second
    stage's may still be embedding meanwhile).
    """
    from mathsearch.opensearch.queries import bm25_body, bm25_query, hit_id, knn_body, knn_query

    ids_from = ctx.fields.id_field
    depth = request.depth
    stored = [vectors.field_of(name) for name in request.rerank]
    common: dict[str, Any] = {
        "filters": request.filters, "source": (), "fields": ctx.fields, "ids_from": ids_from,
    }  # fmt: skip
    bodies = [bm25_body(tokens, request.text, size=depth, **common)]
    bodies += [knn_body(v.field, v.vector, size=depth, k=depth, **common) for v in plan.queries]
    candidates = {
        "bool": {
            "should": [bm25_query(tokens, request.text, request.filters, ctx.fields)],
            "filter": [
                {"bool": {"should": [
                    knn_query(v.field, v.vector, depth, request.filters, ctx.fields)
                    for v in plan.queries
                ]}}
            ],
            "minimum_should_match": 0,
        }
    }  # fmt: skip
    bodies.append({**base_body(depth * len(plan.queries), (), ids_from), "query": candidates})
    for n, body in enumerate(bodies):  # vectors with BM25's list and the candidates' body
        with_vectors = n == 0 or n == len(bodies) - 1
        body["docvalue_fields"] = [ids_from, *stored] if with_vectors else [ids_from]
    responses = ctx.run_bodies(bodies)
    lists: list[list[tuple[str, float]]] = []
    values: dict[str, dict[str, str]] = {}
    for n, response in enumerate(responses[:-1]):
        ranked = []
        for hit in response["hits"]["hits"]:
            doc = hit_id(hit, ids_from)
            ranked.append((doc, float(hit["_score"])))
            if n == 0:
                _collect(values, doc, hit, stored)
        lists.append(ranked)
    # BM25's own list (the exact scores of its top depth), then the candidates': the equations
    # whose exact BM25 and stored vectors came back
    exact = dict(lists[0])
    for hit in responses[-1]["hits"]["hits"]:
        doc = hit_id(hit, ids_from)
        exact.setdefault(doc, float(hit["_score"] or 0.0))
        _collect(values, doc, hit, stored)
    listed = time.perf_counter()
    fused = spec.fuse(lists, request, plan, request.k)  # the first stage's top k, as its own
    size = min(request.rerank_window, len(fused))
    window, rest = fused[:size], fused[size:]
    unread = [item.doc_id for item in window if item.doc_id not in exact]
    if unread and stored:  # listed by kNN, not among the candidates' hits: read them now
        logger.info("%d window equations outside the candidates' hits: read apart", len(unread))
        for doc, found in ctx.doc_values_of(unread, stored).items():
            _collect(values, doc, {"fields": found}, stored)
    warnings: list[str] = []
    encoders = _encoders(ctx, request, vectors, dict(query_vectors()), warnings)
    ids = [item.doc_id for item in window]
    columns = []
    for encoder in encoders:
        raw = [values.get(i, {}).get(encoder.field) for i in ids]
        storage = encoder.storage or VectorStorage.FLOAT16
        columns.append(cosines01(encoder.query, decode_vectors(raw, storage, encoder.query.size)))
    bm25 = [exact.get(i, 0.0) for i in ids]
    if encoders:
        order, scores = rerank_order(bm25, columns, request.rerank_alpha)
    else:  # every encoder refused the query: the first stage's order
        order, scores = list(range(size)), []
    offset = max([0.0, *(item.score for item in rest)])
    # (first-stage hit, score, its row in the window's columns; None below the window)
    ranking: list[tuple[Any, float, int | None]] = [
        (window[i], scores[i].score + offset if scores else window[i].score, i) for i in order
    ]
    ranking += [(item, item.score, None) for item in rest]
    if keep is not None:
        ranking = ranking[:keep]
    chosen = [item.doc_id for item, _, _ in ranking]
    sources = ctx.sources_of(chosen, ctx.source_fields(request))
    raw_hits = [
        {"_id": item.doc_id, "_score": score, "_source": sources.get(item.doc_id, {})}
        for item, score, _ in ranking
    ]
    hits = ctx.hits_of({"hits": {"hits": raw_hits}}, tokens, annotate=request.annotate)
    if request.explain:
        names = [e.name for e in encoders]
        for hit, (item, _, i) in zip(hits, ranking, strict=True):
            first = spec.breakdown(request, item, plan.fields)
            if i is None or not scores:
                hit.explanation = first
                continue
            second = _breakdown(request, names, bm25[i], scores[i], columns=columns, i=i)
            hit.explanation = _both_stages(first, second, hit.score, offset)
    return Reranked(hits, warnings, listed)


def _collect(
    values: dict[str, dict[str, str]], doc: str, hit: dict[str, Any], stored: list[str]
) -> None:
    """A listed equation's stored vectors (base64) from its hit's doc values."""
    found = hit.get("fields") or {}
    for name in stored:
        if found.get(name):
            values.setdefault(doc, {})[name] = str(found[name][0])


def _encoders(
    ctx: Any,
    request: SearchRequest,
    vectors: RerankVectors,
    query_vectors: dict[str, Sequence[float] | Vector],
    warnings: list[str],
) -> list[_Encoder]:
    """The request's rerank encoders with their fields, the index's storage of each and the
    query's vector; an encoder that refuses the query is left out (with a warning)."""
    storages = ctx.vector_storages()
    fields = {name: vectors.field_of(name) for name in request.rerank}
    if any(name not in storages for name in fields.values()):  # added since: look again
        storages = ctx.vector_storages(refresh=True)
    lacking = [name for name in request.rerank if fields[name] not in query_vectors]
    if lacking:  # a query encoder that took no extra encoders: embed the query here
        embedded = vectors.vectors(lacking, [(request.latex, "")])
        for name, (vector,) in zip(lacking, embedded, strict=True):
            if vector is not None:
                query_vectors[fields[name]] = vector
    out = []
    for name in request.rerank:
        query = query_vectors.get(fields[name])
        if query is None:
            warnings.append(f"rerank encoder {_label(name)} cannot embed the query: left out")
            continue
        vector = np.asarray(query, dtype=np.float32)
        out.append(_Encoder(name, fields[name], storages.get(fields[name]), vector))
    missing = [e.field for e in out if e.storage is None]
    if missing:
        warnings.append(vectors.fallback_warning(ctx.index, missing, request.rerank_window))
    return out


def _embedded(
    ctx: Any,
    ids: list[str],
    sources: Mapping[str, Mapping[str, Any]],
    missing: list[_Encoder],
    vectors: RerankVectors,
) -> dict[str, list[Vector | None]]:
    """The window's vectors of the encoders whose fields the index lacks, embedded here from
    the stored LaTeX (MathML for MathML input)."""
    display = ctx.fields.display
    equations = []
    for eq_id in ids:
        found = sources.get(eq_id, {})
        equations.append((str(found.get(display) or ""), str(found.get("mathml") or "")))
    names = [e.name for e in missing]
    columns = vectors.vectors(names, equations)
    return dict(zip(names, columns, strict=True))


def _label(name: str) -> str:
    """An encoder's name for a message: a model file's stem, a family as it is."""
    return Path(name).stem if name.endswith(".onnx") else name


def _breakdown(
    request: SearchRequest,
    names: Sequence[str],
    bm25: float,
    scored: WindowScore,
    *,
    columns: Sequence[Sequence[float | None]],
    i: int,
) -> ScoreBreakdown:
    from mathsearch.opensearch.modes.rescore import window_breakdown

    breakdown = window_breakdown(
        bm25,
        scored,
        [column[i] for column in columns],
        fields=[_label(name) for name in names],
        weights=rerank_weights(request.rerank_alpha, len(names)),
        normalization=Normalization.MIN_MAX.value,
    )
    # the rerank cosines are this stage's fields, not a first-stage kNN score
    return replace(
        breakdown,
        knn=None,
        knn_normalized=None,
        formula=f"rerank of the {request.mode.value} top {request.rerank_window}: "
        f"{breakdown.formula}",
    )


def _both_stages(
    first: ScoreBreakdown | None, second: ScoreBreakdown, score: float, offset: float
) -> ScoreBreakdown:
    """A re-ranked hit's explanation: the first stage's and the second stage's breakdowns
    under their own keys; the top level keeps the first stage's BM25 and kNN (what the first
    stage retrieved the hit with) and the final score."""
    base = first or ScoreBreakdown()
    shift = f" + {offset:.4g} (the first stage's best score after the window)" if offset else ""
    return ScoreBreakdown(
        bm25=base.bm25,
        knn=base.knn,
        bm25_normalized=base.bm25_normalized,
        knn_normalized=base.knn_normalized,
        score=score,
        formula=f"second stage: {second.formula}{shift}",
        fields=list(base.fields),
        first_stage=first,
        second_stage=second,
    )
