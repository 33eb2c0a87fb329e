"""The subquery weights every ``--explain`` breakdown and every weighted mode share.

Each mode's breakdown lives in its module of :mod:`mathsearch.opensearch.modes`; with several
vector fields every breakdown lists each field's raw and normalised score
(:class:`~mathsearch.opensearch.results.FieldScore`); ``knn`` / ``knn_normalized`` stay the first
field's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from mathsearch.core.errors import QueryError
from mathsearch.opensearch.window_rescore import cosine01

if TYPE_CHECKING:
    from mathsearch.opensearch.search_request import SearchRequest


def fusion_weights(alpha: float) -> list[float]:
    """The ``[bm25, knn]`` weights of ``alpha`` (the vector's share)."""
    return [round(1.0 - alpha, 6), round(alpha, 6)]


def subquery_weights(request: SearchRequest, fields: int) -> list[float]:
    """``[bm25, field 1, ..., field n]`` weights of a request over ``fields`` vector fields:
    the request's ``weights``, else ``1 - alpha`` for BM25 and ``alpha / n`` for each field
    (one field: :func:`fusion_weights`, as before).

    >>> from mathsearch.opensearch.search_request import SearchRequest
    >>> subquery_weights(SearchRequest("x", alpha=0.4), 2)
    [0.6, 0.2, 0.2]

    Raises:
        QueryError: weights that are not one per subquery.
    """
    if request.weights is not None:
        if len(request.weights) != fields + 1:
            raise QueryError(
                f"{len(request.weights)} weights for {fields + 1} subqueries "
                "(BM25, then one per vector field)"
            )
        return [float(w) for w in request.weights]
    return split_alpha(request.alpha, fields)


def split_alpha(alpha: float, fields: int) -> list[float]:
    """``[1 - alpha, alpha / n, ...]``: BM25's share, then each of ``fields`` vector fields'
    (one field: :func:`fusion_weights`).

    >>> split_alpha(0.4, 2)
    [0.6, 0.2, 0.2]
    """
    if fields == 1:
        return fusion_weights(alpha)
    return [1.0 - alpha] + [alpha / fields] * fields


def cos01(query: Sequence[float], doc: Sequence[float]) -> float:
    """``(1 + cos) / 2`` of two vectors (:func:`mathsearch.opensearch.window_rescore.cosine01`)."""
    return float(cosine01(query, doc))  # type: ignore[arg-type]
