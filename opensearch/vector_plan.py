"""Which vector fields one search uses, with which query vectors and weights: a :class:`VectorPlan`.

The fields come from the request (``encoders`` -> their cards' fields, else ``vector_fields``,
else ``vector_field``), else the index's defaults; each must exist in the index (a
``knn_vector`` of its mapping) and have a query vector (the query encoder may have refused the
query). Either failure is a :class:`~mathsearch.core.errors.QueryError` that says which field
and
why. The weights are :func:`~mathsearch.opensearch.explain.subquery_weights`: ``[bm25, field 1,
...]``.

Example::

    plan = plan_vectors(request, features, ["vec_gcn_v1", "vec_bitmap_v1"], index_fields, "eq")
    plan.queries[1].weight, plan.bm25_weight
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from mathsearch.core.errors import QueryError
from mathsearch.opensearch.explain import subquery_weights
from mathsearch.opensearch.queries import VectorQuery
from mathsearch.opensearch.query_encoder import QueryFeatures, encoder_field
from mathsearch.opensearch.search_request import SearchRequest


@dataclass(frozen=True)
class VectorPlan:
    """The vector subqueries of one search (the first is the primary field) and BM25's weight."""

    queries: tuple[VectorQuery, ...]
    bm25_weight: float

    @property
    def fields(self) -> list[str]:
        return [query.field for query in self.queries]

    @property
    def weights(self) -> list[float]:
        """``[bm25, field 1, ..., field n]``."""
        return [self.bm25_weight, *(query.weight for query in self.queries)]

    @property
    def shares(self) -> list[float]:
        """The fields' weights scaled to sum 1 (their shares of the vector part)."""
        total = sum(query.weight for query in self.queries) or 1.0
        return [query.weight / total for query in self.queries]


def requested_fields(request: SearchRequest) -> list[str]:
    """The fields a request names (encoders' fields first), in order, without repeats; empty
    when it names none."""
    names = [encoder_field(name) for name in request.encoders] if request.encoders else []
    names = names or list(request.vector_fields)
    if not names and request.vector_field:
        names = [request.vector_field]
    return list(dict.fromkeys(names))


def plan_vectors(
    request: SearchRequest,
    features: QueryFeatures | None,
    fields: Sequence[str],
    index_fields: Collection[str],
    index: str,
) -> VectorPlan:
    """The plan of ``fields`` for ``request`` (see the module docstring).

    Raises:
        QueryError: no LaTeX to embed, a field the index lacks, a field without a query vector,
            or weights that do not fit the fields.
    """
    if features is not None and not features.by_field() and features.refusals and fields:
        raise QueryError(_no_vector(features, fields[0]))
    if features is None or not features.by_field():
        raise QueryError(f"mode {request.mode.value} needs a LaTeX query to embed")
    vectors = features.by_field()
    for name in fields:
        if name not in index_fields:
            known = ", ".join(sorted(index_fields)) or "none"
            filled = ", ".join(vectors)
            raise QueryError(
                f"{index} has no vector field {name} (its vector fields: {known}); "
                f"the query model fills {filled}"
            )
        if name not in vectors:
            raise QueryError(_no_vector(features, name))
    weights = subquery_weights(request, len(fields))
    queries = tuple(
        VectorQuery(name, vectors[name], weight)
        for name, weight in zip(fields, weights[1:], strict=True)
    )
    return VectorPlan(queries=queries, bm25_weight=weights[0])


def _no_vector(features: QueryFeatures, name: str) -> str:
    refusal = (features.refusals or {}).get(name)
    if refusal:
        return f"the query has no {name} vector: its encoder refused it ({refusal})"
    filled = ", ".join(features.by_field())
    if features.vectors is None or len(features.by_field()) == 1:
        return (
            f"the query model fills {filled}, but the search uses {name}: set "
            f"MATHSEARCH_MODEL to that field's model, pass --field {filled}, or name the "
            "field's encoder (--encoders)"
        )
    return f"the query encoders fill {filled}, not {name}: name its encoder (--encoders)"
