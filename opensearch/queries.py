"""Query builders for every search mode: pure functions from parameters to request bodies.

User input only ever lands in values (query strings of ``match``, vectors, ``params`` of
scripts, ``terms`` lists) - never in script source or query syntax - so a crafted LaTeX query
cannot change the structure of a request.

Modes (DESIGN.md):

* ``bm25``: ``match`` on ``math_tokens`` (plus ``context`` when words are given);
* ``knn``: lucene HNSW ``knn`` on the vector field, filters inside the kNN search;
* ``rescore``: the plain BM25 body (:func:`bm25_body`) fetches ``window`` hits with their
  vectors; :mod:`mathsearch.opensearch.window_rescore` re-ranks them client-side (both scores
  normalised
  inside the window) - the figure-embeddings seed's tf-idf + embedding interpolation;
* ``knn-rescore``: HNSW retrieves ``window`` hits, BM25 re-ranks them by
  ``alpha * knn + (1 - alpha) * bm25``;
* ``fusion``: the neural-search ``hybrid`` query of [bm25, knn] under a temporary search pipeline
  with the ``normalization-processor``;
* ``rrf``: the same hybrid query under the ``score-ranker-processor`` (reciprocal rank fusion).

Several vector fields (one per encoder, :class:`VectorQuery` with a weight each; weights are
the share of each subquery, ``[bm25, field 1, ..., field n]``, summing to 1):

* ``fusion`` / ``rrf``: one hybrid query of [bm25, knn field 1, ..., knn field n] (at most 5
  subqueries, the plugin's limit), one normalisation / rank list per subquery;
* ``knn``: a ``bool`` ``should`` of one kNN query per field, each boosted by its weight share,
  so a hit scores ``sum_i w_i * knn_i`` (0 for a field whose top k missed it): the weighted mean
  of the per-field kNN scores, each list cut at k;
* ``rescore``: ``w_0 * N(bm25) + sum_i w_i * N((1 + cos_i) / 2)`` (window_rescore);
* ``knn-rescore``: the multi-field kNN retrieves, ``sum_i w_i * knn_i + w_0 * bm25`` re-ranks.

With one field every body is exactly the single-field one.

Field names come from a :class:`~mathsearch.opensearch.search_fields.SearchFields` (default: the
equation
index's), so another index (figures: ``caption`` + ``mentions``, ``vec_figure_v1``) uses the
same modes.

Example::

    body = knn_body("vec_gcn_v1", vector, size=10, filters=Filters(doc_ids=("hep-th0301001",)))
    body = knn_body_multi([VectorQuery("vec_gcn_v1", v1, 0.5), VectorQuery("vec_bitmap_v1", v2,
                          0.5)], size=10)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from mathsearch.core.errors import QueryError
from mathsearch.opensearch.fusion import Combination, Normalization
from mathsearch.opensearch.search_fields import (
    EQUATION_FIELDS,
    EQUIVALENT_BOOST,
    FILTER_FIELDS,
    RANGE_FIELDS,
    SearchFields,
)

__all__ = [
    "FILTER_FIELDS",
    "MAX_HYBRID_SUBQUERIES",
    "NO_FILTERS",
    "RANGE_FIELDS",
    "Filters",
    "Mode",
    "VectorQuery",
]

#: The neural-search ``hybrid`` query takes at most this many subqueries (BM25 + 4 fields).
MAX_HYBRID_SUBQUERIES = 5


class Mode(StrEnum):
    """The search modes of ``mathsearch search --mode``."""

    KNN = "knn"
    BM25 = "bm25"
    RESCORE = "rescore"
    KNN_RESCORE = "knn-rescore"
    FUSION = "fusion"
    RRF = "rrf"


@dataclass(frozen=True)
class Filters:
    """Restrictions applied in every mode (inside the kNN search too, not after it).

    ``terms`` maps a keyword field to the values it may take; ``ranges`` maps a numeric or date
    field to ``(gte, lte)`` bounds (``None`` for open).
    """

    doc_ids: tuple[str, ...] = ()
    terms: dict[str, tuple[str, ...]] = field(default_factory=dict)
    ranges: dict[str, tuple[Any, Any]] = field(default_factory=dict)

    def clauses(self, fields: SearchFields = EQUATION_FIELDS) -> list[dict[str, Any]]:
        """The filter clauses (empty when nothing is restricted) on ``fields``' index."""
        allowed, ranged = fields.filter_fields, fields.range_fields
        out: list[dict[str, Any]] = []
        if self.doc_ids:
            out.append({"terms": {"doc_id": list(self.doc_ids)}})
        for name, values in sorted(self.terms.items()):
            if name not in allowed:
                raise QueryError(f"cannot filter on {name!r}; fields: {', '.join(allowed)}")
            out.append({"terms": {name: list(values)}})
        for name, (low, high) in sorted(self.ranges.items()):
            if name not in ranged:
                raise QueryError(f"no range on {name!r}; fields: {', '.join(ranged)}")
            bounds = {
                key: value for key, value in (("gte", low), ("lte", high)) if value is not None
            }
            if not bounds:
                raise QueryError(f"range on {name} needs a lower or an upper bound")
            out.append({"range": {name: bounds}})
        return out

    def __bool__(self) -> bool:
        return bool(self.doc_ids or self.terms or self.ranges)


NO_FILTERS = Filters()


@dataclass(frozen=True)
class VectorQuery:
    """The query's vector for one field and that subquery's weight (its share of the score)."""

    field: str
    vector: Sequence[float]
    weight: float = 1.0


def _match(field: str, text: str) -> dict[str, Any]:
    """A ``match`` clause; ``field^boost`` (OpenSearch's field syntax) sets its boost."""
    name, _, boost = field.partition("^")
    clause: dict[str, Any] = {"query": text}
    if boost:
        clause["boost"] = float(boost)
    return {"match": {name: clause}}


def bm25_query(
    tokens: Sequence[str],
    words: str = "",
    filters: Filters = NO_FILTERS,
    fields: SearchFields = EQUATION_FIELDS,
) -> dict:
    """BM25 over the text fields (``should``: the tokens against each text field, the words
    against the context field, or the text fields when there is none), filtered."""
    should: list[dict[str, Any]] = []
    if tokens:
        should += [_match(name, " ".join(tokens)) for name in fields.text]
        forms = sorted({t for t in tokens if t.startswith("form:")})
        if forms and fields.canonical:  # an equivalent formula: above every near miss
            should.append(
                {
                    "constant_score": {
                        "filter": {"terms": {fields.canonical: forms}},
                        "boost": EQUIVALENT_BOOST,
                    }
                }
            )
    if words.strip():
        targets = (fields.context,) if fields.context else fields.text
        should += [_match(name, words) for name in targets]
    if not should:
        raise QueryError("the query has neither math tokens nor words")
    query: dict[str, Any] = {"bool": {"should": should, "minimum_should_match": 1}}
    clauses = filters.clauses(fields)
    if clauses:
        query["bool"]["filter"] = clauses
    return query


def knn_query(
    field_name: str,
    vector: Sequence[float],
    k: int,
    filters: Filters = NO_FILTERS,
    fields: SearchFields = EQUATION_FIELDS,
    *,
    boost: float | None = None,
) -> dict:
    """An HNSW kNN query for ``k`` neighbours, the filters applied during the graph search."""
    if k < 1:
        raise QueryError(f"k must be at least 1, not {k}")
    inner: dict[str, Any] = {"vector": [float(x) for x in vector], "k": int(k)}
    clauses = filters.clauses(fields)
    if clauses:
        inner["filter"] = {"bool": {"filter": clauses}}
    if boost is not None:
        inner["boost"] = float(boost)
    return {"knn": {field_name: inner}}


def multi_knn_query(
    vectors: Sequence[VectorQuery],
    k: int,
    filters: Filters = NO_FILTERS,
    fields: SearchFields = EQUATION_FIELDS,
) -> dict:
    """One kNN query per field; several are a ``bool`` ``should`` of kNN queries boosted by
    their weight shares (score ``sum_i w_i * knn_i``, 0 where field ``i``'s top k missed)."""
    if not vectors:
        raise QueryError("no vector field to search")
    if len(vectors) == 1:
        only = vectors[0]
        return knn_query(only.field, only.vector, k, filters, fields)
    shares = _shares([v.weight for v in vectors])
    should = [
        knn_query(v.field, v.vector, k, filters, fields, boost=share)
        for v, share in zip(vectors, shares, strict=True)
    ]
    return {"bool": {"should": should}}


def _shares(weights: Sequence[float]) -> list[float]:
    total = float(sum(weights))
    if total <= 0 or any(w < 0 for w in weights):
        raise QueryError(f"vector weights must be >= 0 with a positive sum, not {list(weights)}")
    return [float(w) / total for w in weights]


def _check_alpha(alpha: float) -> None:
    if not 0.0 <= alpha <= 1.0:
        raise QueryError(f"alpha must lie in [0, 1], not {alpha}")


def _base(size: int, source: Sequence[str]) -> dict[str, Any]:
    if size < 1:
        raise QueryError(f"k must be at least 1, not {size}")
    return {"size": int(size), "_source": list(source) if source else False}


def bm25_body(
    tokens: Sequence[str],
    words: str,
    *,
    size: int,
    filters: Filters,
    source: Sequence[str],
    fields: SearchFields = EQUATION_FIELDS,
) -> dict:
    return {**_base(size, source), "query": bm25_query(tokens, words, filters, fields)}


def knn_body(
    field_name: str,
    vector: Sequence[float],
    *,
    size: int,
    filters: Filters = NO_FILTERS,
    source: Sequence[str] = (),
    k: int | None = None,
    fields: SearchFields = EQUATION_FIELDS,
) -> dict:
    return {
        **_base(size, source),
        "query": knn_query(field_name, vector, k or size, filters, fields),
    }


def knn_body_multi(
    vectors: Sequence[VectorQuery],
    *,
    size: int,
    filters: Filters = NO_FILTERS,
    source: Sequence[str] = (),
    k: int | None = None,
    fields: SearchFields = EQUATION_FIELDS,
) -> dict:
    """kNN over one or several fields (:func:`multi_knn_query`)."""
    return {**_base(size, source), "query": multi_knn_query(vectors, k or size, filters, fields)}


def knn_rescore_body(
    tokens: Sequence[str],
    words: str,
    vectors: Sequence[VectorQuery],
    *,
    size: int,
    window: int,
    alpha: float,
    filters: Filters,
    source: Sequence[str],
    bm25_weight: float | None = None,
    fields: SearchFields = EQUATION_FIELDS,
) -> dict:
    """HNSW retrieves ``window`` hits, re-ranked by ``alpha * knn + (1 - alpha) * bm25``.

    Several fields: the multi-field kNN (weight shares) scaled by the vector weights' sum,
    plus ``bm25_weight * bm25`` (default ``1 - alpha``).
    """
    _check_alpha(alpha)
    first = multi_knn_query(vectors, window, filters, fields)
    second = bm25_query(tokens, words, fields=fields)
    if len(vectors) == 1:
        weights = (alpha, 1 - alpha)
    else:
        total = float(sum(v.weight for v in vectors))
        weights = (total, 1 - alpha if bm25_weight is None else bm25_weight)
    return _rescored(first, second, size=size, window=window, weights=weights, source=source)


def _rescored(
    first: dict,
    second: dict,
    *,
    size: int,
    window: int,
    weights: tuple[float, float],
    source: Sequence[str],
) -> dict:
    """``first`` retrieves ``window`` hits; each scores ``w1 * first + w2 * second``."""
    if window < size:
        raise QueryError(f"the rescore window ({window}) must hold at least k ({size}) hits")
    return {
        **_base(size, source),
        "query": first,
        "rescore": {
            "window_size": int(window),
            "query": {
                "rescore_query": second,
                "query_weight": weights[0],
                "rescore_query_weight": weights[1],
                "score_mode": "total",
            },
        },
    }


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
        QueryError: more fields than the hybrid query takes subqueries.
    """
    if not vectors:
        raise QueryError("no vector field to fuse with BM25")
    if len(vectors) + 1 > MAX_HYBRID_SUBQUERIES:
        raise QueryError(
            f"{len(vectors)} vector fields: the hybrid query takes at most "
            f"{MAX_HYBRID_SUBQUERIES - 1} beside BM25"
        )
    subqueries = [bm25_query(tokens, words, filters, fields)]
    subqueries += [knn_query(v.field, v.vector, depth, filters, fields) for v in vectors]
    body: dict[str, Any] = {
        **_base(size, source),
        "query": {"hybrid": {"queries": subqueries}},
    }
    if pipeline is not None:
        body["search_pipeline"] = pipeline
    return body


def fusion_pipeline(
    normalization: Normalization = Normalization.MIN_MAX,
    combination: Combination = Combination.ARITHMETIC_MEAN,
    weights: Sequence[float] | None = None,
) -> dict:
    """A search pipeline with the ``normalization-processor`` (weights: [bm25, knn, ...], one
    per subquery)."""
    combo: dict[str, Any] = {"technique": Combination(combination).value}
    if weights is not None:
        combo["parameters"] = {"weights": [float(w) for w in weights]}
    return {
        "phase_results_processors": [
            {
                "normalization-processor": {
                    "normalization": {"technique": Normalization(normalization).value},
                    "combination": combo,
                }
            }
        ]
    }


def rrf_pipeline(rank_constant: int = 60) -> dict:
    """A search pipeline with the ``score-ranker-processor`` (reciprocal rank fusion)."""
    return {
        "phase_results_processors": [
            {
                "score-ranker-processor": {
                    "combination": {
                        "technique": "rrf",
                        "parameters": {"rank_constant": int(rank_constant)},
                    }
                }
            }
        ]
    }
