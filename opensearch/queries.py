"""The clauses every search mode composes: pure functions from parameters to request parts.

User input only ever lands in values (query strings of ``match``, vectors, ``params`` of
scripts, ``terms`` lists) - never in script source or query syntax - so a crafted LaTeX query
cannot change the structure of a request.

Here: the :class:`Mode` enum, :class:`Filters` (applied in every mode, inside the kNN search
too), :class:`VectorQuery`, the BM25 query (``match`` on ``math_tokens``, plus ``context`` when
words are given, plus the canonical-form boost), the HNSW kNN query (one field, or several as a
``bool`` ``should`` boosted by their weight shares) and the plain bodies of both. Each mode's own
body (the rescore section, the hybrid query and its pipeline) and its score explanation live in
its module of :mod:`mathsearch.opensearch.modes`.

With one vector field every body is exactly the single-field one. Field names come from a
:class:`~mathsearch.opensearch.search_fields.SearchFields` (default: the equation index's), so
another index (figures: ``caption`` + ``mentions``, ``vec_figure_v2``) uses the same modes.

Example::

    body = knn_body("vec_gcn_v1", vector, size=10, filters=Filters(doc_ids=("hep-th0301001",)))
    query = multi_knn_query([VectorQuery("vec_gcn_v1", v1, 0.5),
                             VectorQuery("vec_bitmap_v1", v2, 0.5)], k=10)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date
from enum import StrEnum
from typing import Any

from mathsearch.core.errors import QueryError
from mathsearch.opensearch.search_fields import (
    EQUATION_FIELDS,
    EQUIVALENT_BOOST,
    FILTER_FIELDS,
    RANGE_FIELDS,
    RANGE_TYPES,
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
#: An ``integer`` field's bounds (OpenSearch refuses a range bound outside them).
_INT_RANGE = (-(2**31), 2**31 - 1)
_INTEGER = re.compile(r"[+-]?\d+")
#: ``strict_date_optional_time`` (a date, optionally with a time and zone), what ``date``
#: fields parse by default besides epoch milliseconds.
_ISO_DATE = re.compile(
    r"(?P<y>\d{4})(?:-(?P<m>\d{2})(?:-(?P<d>\d{2})"
    r"(?:T\d{2}(?::\d{2}(?::\d{2}(?:[.,]\d{1,9})?)?)?(?:Z|[+-]\d{2}(?::?\d{2})?)?)?)?)?"
)
#: Date math after ``now`` or after an anchor's ``||`` (``now-7d/d``, ``2003-01-01||+1M``).
_DATE_MATH = re.compile(r"(?:[+-]\d+[yMwdhHms])*(?:/[yMwdhHms])?")


def _date_error(value: str) -> bool:
    """Whether ``value`` is not a date a ``date`` field's range accepts."""
    if _INTEGER.fullmatch(value):
        return False  # epoch milliseconds (or a year)
    anchor, bar, math = value.partition("||")
    if anchor == "now" or (not bar and anchor.startswith("now")):
        math = value[3:] if not bar else math
        return _DATE_MATH.fullmatch(math) is None
    found = _ISO_DATE.fullmatch(anchor)
    if found is None or (bar and _DATE_MATH.fullmatch(math) is None):
        return True
    try:
        date(int(found["y"]), int(found["m"] or 1), int(found["d"] or 1))
    except ValueError:  # month 13, February 30
        return True
    return False


def check_range_bound(name: str, value: Any) -> None:
    """Refuse a range bound the field's type cannot take before the cluster sees it
    (``None`` is an open bound; a field of no known type is left to :meth:`Filters.clauses`).

    >>> check_range_bound("position", "a")
    Traceback (most recent call last):
    ...
    mathsearch.core.errors.QueryError: range on position: 'a' is not an integer

    Raises:
        QueryError: a bound of the wrong type or out of the field's range.
    """
    kind = RANGE_TYPES.get(name)
    if value is None or kind is None:
        return
    if kind == "integer":
        number = value if isinstance(value, int) and not isinstance(value, bool) else None
        if isinstance(value, str) and _INTEGER.fullmatch(value.strip()):
            number = int(value)
        if number is None:
            raise QueryError(f"range on {name}: {value!r} is not an integer")
        if not _INT_RANGE[0] <= number <= _INT_RANGE[1]:
            raise QueryError(f"range on {name}: {value!r} is out of the integer range")
        return
    if isinstance(value, int) and not isinstance(value, bool):
        return  # epoch milliseconds
    if not isinstance(value, str) or _date_error(value.strip()):
        raise QueryError(
            f"range on {name}: {value!r} is not a date (YYYY-MM-DD[THH:MM:SS[Z]], epoch "
            "milliseconds or date math such as now-7d)"
        )


class Mode(StrEnum):
    """The search modes of ``mathsearch search --mode``; each is one module of
    :mod:`mathsearch.opensearch.modes`, registered in its ``MODES`` by this enum."""

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
    field to ``(gte, lte)`` bounds (``None`` for open); ``exclude_ids`` are documents that may
    not be returned (a "more like this" search leaves out its own equation).
    """

    doc_ids: tuple[str, ...] = ()
    terms: dict[str, tuple[str, ...]] = field(default_factory=dict)
    ranges: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    exclude_ids: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """Raises :class:`QueryError` for a range bound its field's type cannot take."""
        for name, bounds in self.ranges.items():
            for value in bounds:
                check_range_bound(name, value)

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
        if self.exclude_ids:
            out.append({"bool": {"must_not": [{"ids": {"values": list(self.exclude_ids)}}]}})
        return out

    def __bool__(self) -> bool:
        return bool(self.doc_ids or self.terms or self.ranges or self.exclude_ids)


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


def check_alpha(alpha: float) -> None:
    if not 0.0 <= alpha <= 1.0:
        raise QueryError(f"alpha must lie in [0, 1], not {alpha}")


def base_body(size: int, source: Sequence[str], ids_from: str | None = None) -> dict[str, Any]:
    """``size`` hits with the ``source`` fields, and no total hit count: nothing shows it, and
    ``track_total_hits: false`` lets Lucene skip the blocks that cannot reach the top ``size``
    (the BM25 subquery of a long formula query measured about twice as fast at 100k
    equations).

    ``ids_from`` (a keyword field holding each document's ``_id``, as ``eq_id`` and ``fig_id``
    do), with no ``source``: the hits carry no stored field at all, not even ``_id``, and their
    ids come from that field's doc values instead (:func:`hit_id`). A hit's ``_id`` is a stored
    field, read from the same compressed blocks as ``_source``; the id-only top-100 lists of
    client-side fusion read 200 of them per query.

    >>> base_body(100, (), ids_from="eq_id")["docvalue_fields"]
    ['eq_id']
    """
    if size < 1:
        raise QueryError(f"k must be at least 1, not {size}")
    body: dict[str, Any] = {
        "size": int(size),
        "_source": list(source) if source else False,
        "track_total_hits": False,
    }
    if ids_from and not source:
        body["stored_fields"] = "_none_"
        body["docvalue_fields"] = [ids_from]
    return body


def hit_id(hit: dict[str, Any], ids_from: str | None = None) -> str:
    """A hit's id: its ``_id``, or (a body built with ``ids_from``) that doc-values field's.

    >>> hit_id({"_score": 1.0, "fields": {"eq_id": ["0301004#2"]}}, "eq_id")
    '0301004#2'
    """
    if "_id" in hit:
        return str(hit["_id"])
    values = (hit.get("fields") or {}).get(ids_from or "") or []
    if not values:
        raise QueryError(f"a hit without _id and without {ids_from!r}: {sorted(hit)}")
    return str(values[0])


def bm25_body(
    tokens: Sequence[str],
    words: str,
    *,
    size: int,
    filters: Filters,
    source: Sequence[str],
    fields: SearchFields = EQUATION_FIELDS,
    ids_from: str | None = None,
) -> dict:
    return {
        **base_body(size, source, ids_from),
        "query": bm25_query(tokens, words, filters, fields),
    }


def exact_cosine_body(
    field_name: str, vector: Sequence[float], ids: Sequence[str], *, ids_from: str
) -> dict:
    """The exact cosine of ``vector`` with each of ``ids``' vectors in ``field_name``: the
    k-NN plugin's ``knn_score`` script with ``cosinesimil``, which scores ``(1 + cos) / 2`` as
    the k-NN query does (read from the vector files; checked live on 2.19 and 3.x by the
    searcher tests), over an ``ids`` query, the hits id-only (their ids from ``ids_from``'s doc
    values); documents without that vector are not hits.

    >>> body = exact_cosine_body("vec", [1.0, 0.0], ["a#0", "b#1"], ids_from="eq_id")
    >>> body["size"], body["query"]["script_score"]["script"]["params"]["space_type"]
    (2, 'cosinesimil')
    """
    return {
        **base_body(max(len(ids), 1), (), ids_from),
        "query": {
            "script_score": {
                "query": {
                    "bool": {
                        "filter": [
                            {"ids": {"values": list(ids)}},
                            {"exists": {"field": field_name}},
                        ]
                    }
                },
                "script": knn_score_script(field_name, vector, "cosinesimil"),
            }
        },
    }


def knn_score_script(field_name: str, vector: Sequence[float], space_type: str) -> dict:
    """The k-NN plugin's exact ``knn_score`` script of ``vector`` against ``field_name`` in
    ``space_type`` (for a ``script_score`` query).

    >>> knn_score_script("vec", [1, 0], "cosinesimil")["params"]["query_value"]
    [1.0, 0.0]
    """
    return {
        "lang": "knn",
        "source": "knn_score",
        "params": {
            "field": field_name,
            "query_value": [float(x) for x in vector],
            "space_type": space_type,
        },
    }


def knn_body(
    field_name: str,
    vector: Sequence[float],
    *,
    size: int,
    filters: Filters = NO_FILTERS,
    source: Sequence[str] = (),
    k: int | None = None,
    fields: SearchFields = EQUATION_FIELDS,
    ids_from: str | None = None,
) -> dict:
    return {
        **base_body(size, source, ids_from),
        "query": knn_query(field_name, vector, k or size, filters, fields),
    }
