"""Score breakdowns for ``--explain``: pure functions over fused hits and stored vectors.

With several vector fields every breakdown lists each field's raw and normalised score
(:class:`~mathsearch.opensearch.results.FieldScore`); ``knn`` / ``knn_normalized`` stay the first
field's.
"""

from __future__ import annotations

from collections.abc import Sequence

from mathsearch.core.errors import QueryError
from mathsearch.opensearch.fusion import FusedHit
from mathsearch.opensearch.queries import Mode
from mathsearch.opensearch.results import FieldScore, ScoreBreakdown
from mathsearch.opensearch.search_request import SearchRequest
from mathsearch.opensearch.window_rescore import WindowScore, cosine01

#: How the k-NN plugin computes the ``knn`` score of a field.
KNN_FORMULA = (
    "knn (the k-NN plugin's score: 1 + ip for innerproduct, (1 + cos) / 2 for cosinesimil)"
)


def fusion_weights(alpha: float) -> list[float]:
    """The ``[bm25, knn]`` weights of ``alpha`` (the vector's share)."""
    return [round(1.0 - alpha, 6), round(alpha, 6)]


def subquery_weights(request: SearchRequest, fields: int) -> list[float]:
    """``[bm25, field 1, ..., field n]`` weights of a request over ``fields`` vector fields:
    the request's ``weights``, else ``1 - alpha`` for BM25 and ``alpha / n`` for each field
    (one field: :func:`fusion_weights`, as before).

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
    if fields == 1:
        return fusion_weights(request.alpha)
    return [1.0 - request.alpha] + [request.alpha / fields] * fields


def fusion_breakdown(
    request: SearchRequest, item: FusedHit, fields: Sequence[str] = ()
) -> ScoreBreakdown:
    """A fused hit's breakdown; ``fields`` names the vector subqueries after BM25."""
    names = list(fields) or ["knn"]
    if request.mode is Mode.RRF:
        formula = f"sum over subqueries of 1 / ({request.rank_constant} + rank)"
        weights: list[float | None] = [None] * (len(names) + 1)
    else:
        w = subquery_weights(request, len(names))
        weights = list(w)
        parts = [f"{request.normalization.value}(bm25)"]
        parts += [f"{request.normalization.value}({name})" for name in names]
        formula = (
            f"{request.combination.value}({', '.join(parts)}; "
            f"weights {', '.join(f'{x:g}' for x in w)})"
        )
    return ScoreBreakdown(
        bm25=item.raw[0],
        knn=item.raw[1],
        bm25_normalized=item.normalized[0],
        knn_normalized=item.normalized[1],
        score=item.score,
        formula=formula,
        fields=[
            FieldScore(name, item.raw[n], item.normalized[n], weights[n])
            for n, name in enumerate(names, start=1)
        ]
        if fields and len(fields) > 1
        else [],
    )


def cos01(query: Sequence[float], doc: Sequence[float]) -> float:
    """``(1 + cos) / 2`` of two vectors (:func:`mathsearch.opensearch.window_rescore.cosine01`)."""
    return float(cosine01(query, doc))  # type: ignore[arg-type]


def single_breakdown(mode: Mode, score: float) -> ScoreBreakdown:
    """``bm25`` and ``knn`` modes: the score is the one subquery's."""
    if mode is Mode.BM25:
        return ScoreBreakdown(bm25=score, score=score, formula="bm25")
    return ScoreBreakdown(knn=score, score=score, formula=KNN_FORMULA)


def multi_knn_breakdown(
    score: float, raw: Sequence[float | None], fields: Sequence[str], shares: Sequence[float]
) -> ScoreBreakdown:
    """``knn`` over several fields: ``sum_i share_i * knn_i`` (``raw[i]``: the hit's score in
    field ``i``'s top k, ``None`` when that list missed it and it adds 0)."""
    parts = [
        FieldScore(name, value, None if value is None else share * value, share)
        for name, value, share in zip(fields, raw, shares, strict=True)
    ]
    terms = " + ".join(f"{part.weight:.3g} * knn({part.field})" for part in parts)
    return ScoreBreakdown(
        knn=raw[0],
        knn_normalized=parts[0].normalized,
        score=score,
        formula=f"{terms} (0 where a field's top k missed the hit)",
        fields=parts,
    )


def rescore_breakdown(
    request: SearchRequest, score: float, bm25: float | None, knn: float | None
) -> ScoreBreakdown:
    """``knn-rescore`` over one field: the hit's exact BM25, its k-NN score (the plugin's, for
    the field's space type: ``1 + ip`` for innerproduct, ``(1 + cos) / 2`` for cosinesimil) and
    the formula. (``rescore`` is explained by :func:`window_breakdown`.)"""
    a = request.alpha
    formula = f"{a:.2f} * knn + {1 - a:.2f} * bm25"
    return ScoreBreakdown(bm25=bm25, knn=knn, score=score, formula=formula)


def multi_rescore_breakdown(
    request: SearchRequest,
    score: float,
    *,
    bm25: float | None,
    raw: Sequence[float | None],
    fields: Sequence[str],
    weights: Sequence[float],
) -> ScoreBreakdown:
    """``rescore`` / ``knn-rescore`` over several fields: ``weights[0] * bm25 + sum_i
    weights[i] * v_i`` where ``v_i`` (``raw[i]``) is ``(1 + cos_i) / 2`` (rescore) or the field's
    kNN score (knn-rescore; ``None`` where its top window missed the hit)."""
    what = "(1 + cos) / 2" if request.mode is Mode.RESCORE else "knn"
    parts = [
        FieldScore(name, value, None if value is None else weight * value, weight)
        for name, value, weight in zip(fields, raw, weights[1:], strict=True)
    ]
    terms = " + ".join(f"{part.weight:.3g} * {what}({part.field})" for part in parts)
    return ScoreBreakdown(
        bm25=bm25,
        knn=raw[0],
        knn_normalized=parts[0].normalized,
        score=score,
        formula=f"{weights[0]:.3g} * bm25 + {terms}",
        fields=parts,
    )


def window_breakdown(
    bm25: float,
    scored: WindowScore,
    raw: Sequence[float | None],
    *,
    fields: Sequence[str],
    weights: Sequence[float],
    normalization: str,
) -> ScoreBreakdown:
    """``rescore``: the raw and window-normalised BM25 and ``(1 + cos) / 2`` of every field, and
    the formula (:mod:`mathsearch.opensearch.window_rescore`)."""
    parts = [
        FieldScore(name, value, normed, weight)
        for name, value, normed, weight in zip(
            fields, raw, scored.vectors_normalized, weights[1:], strict=True
        )
    ]
    terms = " + ".join(f"{p.weight:.3g} * N((1 + cos) / 2)({p.field})" for p in parts)
    return ScoreBreakdown(
        bm25=bm25,
        bm25_normalized=scored.bm25_normalized,
        knn=raw[0] if raw else None,
        knn_normalized=scored.vectors_normalized[0] if raw else None,
        score=scored.score,
        formula=f"{weights[0]:.3g} * N(bm25) + {terms}, N = {normalization} over the window",
        fields=parts,
    )
