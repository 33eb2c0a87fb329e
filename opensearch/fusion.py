"""Client-side score fusion that ranks exactly as neural-search's search pipelines do.

Pure functions over plain results (one ranked list of ``(id, score)`` per subquery, best
first), in the style of pyserini's fusion module, for clusters without the neural-search plugin
and for the per-subquery score breakdown of ``--explain``. They follow neural-search 2.19's
``normalization-processor`` and ``score-ranker-processor`` step by step, in float32 as the
plugin computes, and a golden test runs the same queries through the real plugin and compares.

Normalisation (per subquery, over the scores that subquery returned):

* ``min_max``: ``(s - min) / (max - min)``; a result of exactly 0 becomes 0.001, and a list whose
  scores are all equal maps to 1.0;
* ``l2``: ``s / sqrt(sum of s^2)`` (0 when every score is 0);
* ``z_score``: ``(s - mean) / std`` (the sample std, n - 1, as commons-math computes it for the
  plugin), values <= 0 become 0.001; a score equal to the mean maps to the list's max and a zero
  std to its min. The server needs neural-search 3.0 or later (golden-tested against 3.6); 2.19
  refuses it, so there :class:`~mathsearch.opensearch.searcher.Searcher` fuses ``z_score`` only
  client-side.

Combination (per document; a subquery that did not return the document gives it 0):

* ``arithmetic_mean``: ``sum(w_i s_i) / sum(w_i)`` over all subqueries (a missing score counts
  as 0 with its weight);
* ``geometric_mean``: ``exp(sum(w_i ln s_i) / sum(w_i))`` over ``s_i > 0`` only;
* ``harmonic_mean``: ``sum(w_i) / sum(w_i / s_i)`` over ``s_i > 0`` only.

RRF (``score-ranker-processor``): subquery rank ``r`` (from 0) scores ``1 / (rank_constant + r +
1)`` rounded to 10 decimals, summed over the subqueries that returned the document.

The fused list keeps as many documents as the longest subquery list (as the plugin does), best
first; equal scores keep the order of first appearance.

Example::

    >>> bm25 = [("a", 12.0), ("b", 6.0)]
    >>> knn = [("b", 0.9), ("c", 0.8)]
    >>> [(h.doc_id, round(h.score, 4)) for h in fuse([bm25, knn])]
    [('b', 0.5005), ('a', 0.5)]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from mathsearch.core.errors import QueryError

#: One subquery's results: ``(id, raw score)`` pairs, best first.
RankedList = Sequence[tuple[str, float]]

_MIN_SCORE = np.float32(0.001)
_ONE = np.float32(1.0)


class Normalization(StrEnum):
    """Score normalisation techniques of the ``normalization-processor``."""

    MIN_MAX = "min_max"
    L2 = "l2"
    Z_SCORE = "z_score"


class Combination(StrEnum):
    """Score combination techniques of the ``normalization-processor``."""

    ARITHMETIC_MEAN = "arithmetic_mean"
    GEOMETRIC_MEAN = "geometric_mean"
    HARMONIC_MEAN = "harmonic_mean"


@dataclass(frozen=True)
class FusedHit:
    """One document after fusion: its fused score and, per subquery, raw and normalised scores.

    ``raw[i]`` / ``normalized[i]`` are ``None`` when subquery ``i`` did not return the document.
    """

    doc_id: str
    score: float
    raw: tuple[float | None, ...]
    normalized: tuple[float | None, ...]


def normalize_scores(scores: Sequence[float], technique: Normalization) -> list[float]:
    """One subquery's scores normalised by ``technique`` (float32, as the plugin computes).

    Example::

        >>> normalize_scores([4.0, 2.0, 1.0], Normalization.MIN_MAX)
        [1.0, 0.3333333432674408, 0.0010000000474974513]
    """
    return [float(x) for x in _normalize(np.asarray(scores, dtype=np.float32), technique)]


def _normalize(values: np.ndarray, technique: Normalization) -> np.ndarray:
    """:func:`normalize_scores` on a float32 array (element-wise float32, as the plugin)."""
    if values.size == 0:
        return values
    technique = Normalization(technique)
    if technique is Normalization.MIN_MAX:
        low, high = values.min(), values.max()
        if high == low:
            return np.ones_like(values)
        out = (values - low) / np.float32(high - low)
        return np.where(out == 0.0, _MIN_SCORE, out).astype(np.float32)
    if technique is Normalization.L2:
        # a running float32 sum, in list order, like the plugin's loop
        total = np.cumsum(values * values, dtype=np.float32)[-1]
        norm = np.float32(math.sqrt(float(total)))
        return np.zeros_like(values) if norm == 0 else (values / norm).astype(np.float32)
    mean = np.float32(values.astype(np.float64).mean())
    # commons-math's DescriptiveStatistics, as the plugin: the sample std (n - 1), 0 for one
    std = np.float32(values.astype(np.float64).std(ddof=1)) if values.size > 1 else np.float32(0)
    z = np.zeros_like(values) if std == 0 else ((values - mean) / std).astype(np.float32)
    out = np.where(z <= 0, _MIN_SCORE, z)
    out = np.where(std == 0, values.min(), out)
    return np.where(values == mean, values.max(), out).astype(np.float32)


def combine_scores(
    scores: Sequence[float | None],
    technique: Combination,
    weights: Sequence[float] | None = None,
) -> float:
    """One document's normalised subquery scores combined (``None``: not returned).

    Example::

        >>> combine_scores([1.0, None], Combination.ARITHMETIC_MEAN)
        0.5
        >>> round(combine_scores([1.0, 0.25], Combination.HARMONIC_MEAN, [0.5, 0.5]), 4)
        0.4
    """
    weights = _weights(weights, len(scores))
    matrix = np.array([[np.nan if x is None else x for x in scores]], dtype=np.float32)
    return float(_combine(matrix, Combination(technique), weights)[0])


def _combine(matrix: np.ndarray, technique: Combination, weights: Sequence[float]) -> np.ndarray:
    """Row-wise :func:`combine_scores` of a ``(documents, subqueries)`` float32 matrix (NaN:
    not returned), column by column in float32, the plugin's order of operations."""
    rows = matrix.shape[0]
    total = np.zeros(rows, dtype=np.float32)
    sum_weights = np.zeros(rows, dtype=np.float32)
    for column, weight in enumerate(weights):
        w = np.float32(weight)
        s = np.nan_to_num(matrix[:, column], nan=0.0).astype(np.float32)
        if technique is Combination.ARITHMETIC_MEAN:
            valid = s >= 0
            term = s * w
        elif technique is Combination.GEOMETRIC_MEAN:
            valid = s > 0
            logs = np.log(np.where(valid, s, 1.0).astype(np.float64)).astype(np.float32)
            term = w * logs
        else:
            valid = s > 0
            term = w / np.where(valid, s, np.float32(1.0))
        total = np.where(valid, total + term.astype(np.float32), total).astype(np.float32)
        sum_weights = np.where(valid, sum_weights + w, sum_weights).astype(np.float32)
    safe = np.where(sum_weights == 0, np.float32(1.0), sum_weights)
    if technique is Combination.ARITHMETIC_MEAN:
        out = np.where(sum_weights == 0, 0.0, total / safe)
    elif technique is Combination.GEOMETRIC_MEAN:
        mean_log = (total / safe).astype(np.float32).astype(np.float64)
        out = np.where(sum_weights == 0, 0.0, np.exp(mean_log))
    else:
        out = np.where(total > 0, sum_weights / np.where(total > 0, total, 1.0), 0.0)
    return out.astype(np.float32)


def rrf_score(rank: int, rank_constant: int = 60) -> float:
    """The RRF score of 0-based ``rank``: ``1 / (rank_constant + rank + 1)``, 10 decimals."""
    return float(np.float32(round(1.0 / (rank_constant + rank + 1), 10)))


def fuse(
    results: Sequence[RankedList],
    *,
    normalization: Normalization = Normalization.MIN_MAX,
    combination: Combination = Combination.ARITHMETIC_MEAN,
    weights: Sequence[float] | None = None,
    limit: int | None = None,
) -> list[FusedHit]:
    """Normalise each subquery's list, combine per document, rank (the ``fusion`` mode).

    ``limit`` keeps only the best ``limit`` documents (the plugin keeps the longest list's count).

    Raises:
        QueryError: weights that do not match the subqueries or do not sum to 1.
    """
    weights = _weights(weights, len(results))
    order, raw = _matrix(results)
    normalized = np.full_like(raw, np.nan)
    for column, ranked in enumerate(results):
        rows = [order[doc_id] for doc_id, _ in ranked]
        scores = np.asarray([score for _, score in ranked], dtype=np.float32)
        normalized[rows, column] = _normalize(scores, normalization)
    combined = _combine(normalized, Combination(combination), weights)
    return _ranked(order, raw, normalized, combined, results, limit=limit)


def rrf(
    results: Sequence[RankedList], *, rank_constant: int = 60, limit: int | None = None
) -> list[FusedHit]:
    """Reciprocal rank fusion of the subquery lists (the ``rrf`` mode); ``limit`` as in fuse."""
    if not 1 <= rank_constant <= 10_000:
        raise QueryError(f"rank_constant must be between 1 and 10000, not {rank_constant}")
    order, raw = _matrix(results)
    rank_scores = np.full_like(raw, np.nan)
    combined = np.zeros(len(order), dtype=np.float32)
    for column, ranked in enumerate(results):
        for rank, (doc_id, _) in enumerate(ranked):
            rank_scores[order[doc_id], column] = rrf_score(rank, rank_constant)
        present = ~np.isnan(rank_scores[:, column])
        combined = np.where(present, combined + rank_scores[:, column], combined)
        combined = combined.astype(np.float32)
    return _ranked(order, raw, rank_scores, combined, results, limit=limit)


def _matrix(results: Sequence[RankedList]) -> tuple[dict[str, int], np.ndarray]:
    """Row of every document (first-appearance order) and the raw scores (NaN: missing)."""
    order: dict[str, int] = {}
    for ranked in results:
        for doc_id, _ in ranked:
            order.setdefault(doc_id, len(order))
    raw = np.full((len(order), len(results)), np.nan, dtype=np.float64)
    for column, ranked in enumerate(results):
        for doc_id, score in ranked:
            raw[order[doc_id], column] = score
    return order, raw


def _ranked(
    order: dict[str, int],
    raw: np.ndarray,
    normalized: np.ndarray,
    combined: np.ndarray,
    results: Sequence[RankedList],
    *,
    limit: int | None,
) -> list[FusedHit]:
    """Documents best first (stable: equal scores keep first-appearance order), cut to the
    longest subquery list (and to ``limit``)."""
    keep = max((len(ranked) for ranked in results), default=0)
    if limit is not None:
        keep = min(keep, limit)
    ids = list(order)
    best = np.argsort(-combined, kind="stable")[:keep]

    def cells(row: np.ndarray) -> tuple[float | None, ...]:
        return tuple(None if np.isnan(x) else float(x) for x in row)

    return [
        FusedHit(
            doc_id=ids[i],
            score=float(combined[i]),
            raw=cells(raw[i]),
            normalized=cells(normalized[i]),
        )
        for i in best
    ]


def _weights(weights: Sequence[float] | None, count: int) -> list[float]:
    if weights is None:
        return [1.0 / count] * count if count else []
    values = [float(w) for w in weights]
    if len(values) != count:
        raise QueryError(f"{len(values)} weights for {count} subqueries")
    if any(w < 0 or w > 1 for w in values) or abs(sum(values) - 1.0) > 1e-6:
        raise QueryError(f"weights must lie in [0, 1] and sum to 1, not {values}")
    return values
