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
* ``z_score``: ``(s - mean) / std`` (population std), values <= 0 become 0.001; a score equal to
  the mean maps to the list's max and a zero std to its min. The server needs neural-search 3.0
  or later; 2.19 refuses it, so :class:`~opensearch.searcher.Searcher` fuses ``z_score``
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

from opensearch.errors import QueryError

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
    values = np.asarray(scores, dtype=np.float32)
    if values.size == 0:
        return []
    technique = Normalization(technique)
    if technique is Normalization.MIN_MAX:
        low, high = values.min(), values.max()
        out = []
        for value in values:
            if high == low:
                out.append(float(_ONE))
                continue
            normalized = np.float32((value - low) / np.float32(high - low))
            out.append(float(_MIN_SCORE if normalized == 0.0 else normalized))
        return out
    if technique is Normalization.L2:
        total = np.float32(0.0)
        for value in values:
            total = np.float32(total + np.float32(value * value))
        norm = np.float32(math.sqrt(float(total)))
        return [0.0 if norm == 0 else float(np.float32(value / norm)) for value in values]
    mean = np.float32(values.astype(np.float64).mean())
    std = np.float32(values.astype(np.float64).std())
    out = []
    for value in values:
        if value == mean:
            out.append(float(values.max()))
        elif std == 0:
            out.append(float(values.min()))
        else:
            z = np.float32((value - mean) / std)
            out.append(float(_MIN_SCORE if z <= 0 else z))
    return out


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
    technique = Combination(technique)
    weights = _weights(weights, len(scores))
    sum_weights = np.float32(0.0)
    total = np.float32(0.0)
    for score, weight in zip(scores, weights, strict=True):
        s, w = np.float32(0.0 if score is None else score), np.float32(weight)
        if technique is Combination.ARITHMETIC_MEAN:
            if s < 0:
                continue
            total = np.float32(total + np.float32(s * w))
        elif s <= 0:
            continue
        elif technique is Combination.GEOMETRIC_MEAN:
            total = np.float32(total + np.float32(w * np.float32(math.log(float(s)))))
        else:
            total = np.float32(total + np.float32(w / s))
        sum_weights = np.float32(sum_weights + w)
    if technique is Combination.ARITHMETIC_MEAN:
        return 0.0 if sum_weights == 0 else float(np.float32(total / sum_weights))
    if technique is Combination.GEOMETRIC_MEAN:
        return 0.0 if sum_weights == 0 else float(np.float32(math.exp(float(total / sum_weights))))
    return float(np.float32(sum_weights / total)) if total > 0 else 0.0


def rrf_score(rank: int, rank_constant: int = 60) -> float:
    """The RRF score of 0-based ``rank``: ``1 / (rank_constant + rank + 1)``, 10 decimals."""
    return float(np.float32(round(1.0 / (rank_constant + rank + 1), 10)))


def fuse(
    results: Sequence[RankedList],
    *,
    normalization: Normalization = Normalization.MIN_MAX,
    combination: Combination = Combination.ARITHMETIC_MEAN,
    weights: Sequence[float] | None = None,
) -> list[FusedHit]:
    """Normalise each subquery's list, combine per document, rank (the ``fusion`` mode).

    Raises:
        QueryError: weights that do not match the subqueries or do not sum to 1.
    """
    weights = _weights(weights, len(results))
    normalized = [
        dict(
            zip(
                [i for i, _ in ranked],
                normalize_scores([s for _, s in ranked], normalization),
                strict=True,
            )
        )
        for ranked in results
    ]
    return _rank(
        results,
        normalized,
        lambda values: combine_scores(values, combination, weights),
    )


def rrf(results: Sequence[RankedList], *, rank_constant: int = 60) -> list[FusedHit]:
    """Reciprocal rank fusion of the subquery lists (the ``rrf`` mode)."""
    if not 1 <= rank_constant <= 10_000:
        raise QueryError(f"rank_constant must be between 1 and 10000, not {rank_constant}")
    rank_scores = [
        {doc_id: rrf_score(rank, rank_constant) for rank, (doc_id, _) in enumerate(ranked)}
        for ranked in results
    ]

    def total(values: Sequence[float | None]) -> float:
        acc = np.float32(0.0)
        for value in values:
            if value is not None:
                acc = np.float32(acc + np.float32(value))
        return float(acc)

    return _rank(results, rank_scores, total)


def _rank(
    results: Sequence[RankedList],
    per_query: Sequence[dict[str, float]],
    combine: object,
) -> list[FusedHit]:
    order: list[str] = []
    seen: set[str] = set()
    raw_scores = [dict(ranked) for ranked in results]
    for ranked in results:
        for doc_id, _ in ranked:
            if doc_id not in seen:
                seen.add(doc_id)
                order.append(doc_id)
    hits = []
    for doc_id in order:
        normalized = tuple(scores.get(doc_id) for scores in per_query)
        hits.append(
            FusedHit(
                doc_id=doc_id,
                score=combine(normalized),  # type: ignore[operator]
                raw=tuple(scores.get(doc_id) for scores in raw_scores),
                normalized=normalized,
            )
        )
    hits.sort(key=lambda hit: -hit.score)
    keep = max((len(ranked) for ranked in results), default=0)
    return hits[:keep]


def _weights(weights: Sequence[float] | None, count: int) -> list[float]:
    if weights is None:
        return [1.0 / count] * count if count else []
    values = [float(w) for w in weights]
    if len(values) != count:
        raise QueryError(f"{len(values)} weights for {count} subqueries")
    if any(w < 0 or w > 1 for w in values) or abs(sum(values) - 1.0) > 1e-6:
        raise QueryError(f"weights must lie in [0, 1] and sum to 1, not {values}")
    return values
