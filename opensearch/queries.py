"""Query builders for every search mode: pure functions from parameters to request bodies.

User input only ever lands in values (query strings of ``match``, vectors, ``params`` of
scripts, ``terms`` lists) - never in script source or query syntax - so a crafted LaTeX query
cannot change the structure of a request.

Modes (DESIGN.md):

* ``bm25``: ``match`` on ``math_tokens`` (plus ``context`` when words are given);
* ``knn``: lucene HNSW ``knn`` on the vector field, filters inside the kNN search;
* ``rescore``: BM25 retrieves ``window`` hits, an exact cosine rescore re-ranks them by
  ``(1 - alpha) * bm25 + alpha * cos01``, where ``cos01 = (1 + cos) / 2`` is the k-NN plugin's
  ``cosinesimil`` script score - the figure-embeddings seed's tf-idf + embedding interpolation;
* ``knn-rescore``: HNSW retrieves ``window`` hits, BM25 re-ranks them by
  ``alpha * knn + (1 - alpha) * bm25``;
* ``fusion``: the neural-search ``hybrid`` query of [bm25, knn] under a temporary search pipeline
  with the ``normalization-processor``;
* ``rrf``: the same hybrid query under the ``score-ranker-processor`` (reciprocal rank fusion).

Example::

    body = knn_body("vec_gcn_v1", vector, size=10, filters=Filters(doc_ids=("hep-th0301001",)))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from opensearch.errors import QueryError
from opensearch.fusion import Combination, Normalization

#: Fields a filter may name (keyword / numeric / date fields of the equation index).
FILTER_FIELDS = ("doc_id", "eq_id", "section", "symbols", "keywords", "model_versions", "source")
RANGE_FIELDS = ("position", "indexed_at")


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

    def clauses(self) -> list[dict[str, Any]]:
        """The filter clauses (empty when nothing is restricted)."""
        out: list[dict[str, Any]] = []
        if self.doc_ids:
            out.append({"terms": {"doc_id": list(self.doc_ids)}})
        for name, values in sorted(self.terms.items()):
            if name not in FILTER_FIELDS:
                raise QueryError(f"cannot filter on {name!r}; fields: {', '.join(FILTER_FIELDS)}")
            out.append({"terms": {name: list(values)}})
        for name, (low, high) in sorted(self.ranges.items()):
            if name not in RANGE_FIELDS:
                raise QueryError(f"no range on {name!r}; fields: {', '.join(RANGE_FIELDS)}")
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


def bm25_query(tokens: Sequence[str], words: str = "", filters: Filters = NO_FILTERS) -> dict:
    """BM25 over the math tokens (``should`` + the context words when given), filtered."""
    should: list[dict[str, Any]] = []
    if tokens:
        should.append({"match": {"math_tokens": {"query": " ".join(tokens)}}})
    if words.strip():
        should.append({"match": {"context": {"query": words}}})
    if not should:
        raise QueryError("the query has neither math tokens nor words")
    query: dict[str, Any] = {"bool": {"should": should, "minimum_should_match": 1}}
    clauses = filters.clauses()
    if clauses:
        query["bool"]["filter"] = clauses
    return query


def knn_query(
    field_name: str, vector: Sequence[float], k: int, filters: Filters = NO_FILTERS
) -> dict:
    """An HNSW kNN query for ``k`` neighbours, the filters applied during the graph search."""
    if k < 1:
        raise QueryError(f"k must be at least 1, not {k}")
    inner: dict[str, Any] = {"vector": [float(x) for x in vector], "k": int(k)}
    clauses = filters.clauses()
    if clauses:
        inner["filter"] = {"bool": {"filter": clauses}}
    return {"knn": {field_name: inner}}


def cosine_script(field_name: str, vector: Sequence[float]) -> dict:
    """Exact ``(1 + cos) / 2`` against ``field_name`` (the k-NN plugin's scoring script)."""
    return {
        "source": "knn_score",
        "lang": "knn",
        "params": {
            "field": field_name,
            "query_value": [float(x) for x in vector],
            "space_type": "cosinesimil",
        },
    }


def _check_alpha(alpha: float) -> None:
    if not 0.0 <= alpha <= 1.0:
        raise QueryError(f"alpha must lie in [0, 1], not {alpha}")


def _base(size: int, source: Sequence[str]) -> dict[str, Any]:
    if size < 1:
        raise QueryError(f"k must be at least 1, not {size}")
    return {"size": int(size), "_source": list(source) if source else False}


def bm25_body(
    tokens: Sequence[str], words: str, *, size: int, filters: Filters, source: Sequence[str]
) -> dict:
    return {**_base(size, source), "query": bm25_query(tokens, words, filters)}


def knn_body(
    field_name: str,
    vector: Sequence[float],
    *,
    size: int,
    filters: Filters = NO_FILTERS,
    source: Sequence[str] = (),
    k: int | None = None,
) -> dict:
    return {
        **_base(size, source),
        "query": knn_query(field_name, vector, k or size, filters),
    }


def rescore_body(
    tokens: Sequence[str],
    words: str,
    field_name: str,
    vector: Sequence[float],
    *,
    size: int,
    window: int,
    alpha: float,
    filters: Filters,
    source: Sequence[str],
) -> dict:
    """BM25 window re-ranked by ``(1 - alpha) * bm25 + alpha * (1 + cos) / 2`` (exact cosine)."""
    _check_alpha(alpha)
    cosine = {
        "script_score": {
            "query": {"match_all": {}},
            "script": cosine_script(field_name, vector),
        }
    }
    first = bm25_query(tokens, words, filters)
    return _rescored(
        first, cosine, size=size, window=window, weights=(1 - alpha, alpha), source=source
    )


def knn_rescore_body(
    tokens: Sequence[str],
    words: str,
    field_name: str,
    vector: Sequence[float],
    *,
    size: int,
    window: int,
    alpha: float,
    filters: Filters,
    source: Sequence[str],
) -> dict:
    """HNSW retrieves ``window`` hits, re-ranked by ``alpha * knn + (1 - alpha) * bm25``."""
    _check_alpha(alpha)
    first = knn_query(field_name, vector, window, filters)
    second = bm25_query(tokens, words)
    return _rescored(
        first, second, size=size, window=window, weights=(alpha, 1 - alpha), source=source
    )


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
    field_name: str,
    vector: Sequence[float],
    *,
    size: int,
    depth: int,
    filters: Filters,
    source: Sequence[str],
    pipeline: dict[str, Any] | None = None,
) -> dict:
    """The neural-search ``hybrid`` query [bm25, knn]; each subquery keeps its top ``depth``."""
    body: dict[str, Any] = {
        **_base(size, source),
        "query": {
            "hybrid": {
                "queries": [
                    bm25_query(tokens, words, filters),
                    knn_query(field_name, vector, depth, filters),
                ]
            }
        },
    }
    if pipeline is not None:
        body["search_pipeline"] = pipeline
    return body


def fusion_pipeline(
    normalization: Normalization = Normalization.MIN_MAX,
    combination: Combination = Combination.ARITHMETIC_MEAN,
    weights: Sequence[float] | None = None,
) -> dict:
    """A search pipeline with the ``normalization-processor`` (weights: [bm25, knn])."""
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
