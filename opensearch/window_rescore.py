"""``rescore``: BM25 retrieves a window, both scores are normalised inside it, then combined.

The figure-embeddings seed re-ranks a tf-idf first stage by interpolating the tf-idf score with
the embedding score. Interpolating *raw* scores gives ``alpha`` no stable meaning: BM25 over
long formula queries is in the tens or hundreds, a cosine between 0 and 1, so ``alpha = 0.5``
was BM25 alone in practice. Here every score is normalised over the window's hits first, with
the same techniques as the fusion mode (:func:`mathsearch.opensearch.fusion.normalize_scores`,
default
``min_max``)::

    score(d) = w_0 * N(bm25)(d) + sum_i w_i * N(c_i)(d)
    c_i(d)   = (1 + cos(q_i, v_i(d))) / 2          (exact, per vector field i)
    N        = min_max: (x - min_W) / (max_W - min_W) over the window W (1.0 when all equal;
               0 becomes 0.001, as the neural-search plugin does)

with ``w = [1 - alpha, alpha]`` for one field (``[bm25, field 1, ...]`` weights for several).
A hit without field ``i``'s vector (that encoder refused it) gets 0 for that term and is left
out of that field's normalisation. Ties keep BM25's order. The function is pure: the
``rescore`` mode (:mod:`mathsearch.opensearch.modes.rescore`) fetches the window's ids and BM25
scores and the exact cosines of their vectors, and calls it.

Example::

    >>> scores = rescore_window([10.0, 5.0, 0.0], [[0.5, 1.0, 0.75]], [0.5, 0.5])
    >>> [round(s.score, 3) for s in scores]
    [0.501, 0.75, 0.251]
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mathsearch.core.errors import QueryError
from mathsearch.opensearch.fusion import Normalization, normalize_scores

logger = logging.getLogger(__name__)

__all__ = ["WindowScore", "cosine01", "rank_window", "rescore_window"]


@dataclass(frozen=True)
class WindowScore:
    """One window hit's combined score and its normalised parts (``None``: no vector)."""

    score: float
    bm25_normalized: float
    vectors_normalized: tuple[float | None, ...]


def cosine01(query: Sequence[float], doc: Sequence[float] | None) -> float | None:
    """``(1 + cos) / 2`` (the k-NN plugin's ``cosinesimil`` score); None without a vector."""
    if doc is None:
        return None
    q = np.asarray(query, dtype=np.float64)
    d = np.asarray(doc, dtype=np.float64)
    if q.shape != d.shape:
        raise QueryError(f"a stored vector has {d.size} dimensions, the query {q.size}")
    norm = math.sqrt(float(q @ q)) * math.sqrt(float(d @ d))
    return (1.0 + (float(q @ d) / norm if norm else 0.0)) / 2.0


def _normalized_column(
    values: Sequence[float | None], technique: Normalization
) -> list[float | None]:
    present = [i for i, v in enumerate(values) if v is not None]
    out: list[float | None] = [None] * len(values)
    if present:
        normed = normalize_scores([float(values[i]) for i in present], technique)  # type: ignore[arg-type]
        for i, value in zip(present, normed, strict=True):
            out[i] = value
    return out


def rescore_window(
    bm25: Sequence[float],
    vectors: Sequence[Sequence[float | None]],
    weights: Sequence[float],
    normalization: Normalization = Normalization.MIN_MAX,
) -> list[WindowScore]:
    """Combined scores of the window's hits, in the window's order (see the module docstring).

    Args:
        bm25: the BM25 score of each window hit.
        vectors: per vector field, each hit's ``(1 + cos) / 2`` (None: no vector).
        weights: ``[w_0 (bm25), w_1, ..., w_n]``, one per field after BM25's.
        normalization: how each column is normalised over the window.

    Raises:
        QueryError: when the columns or weights do not line up.
    """
    if len(weights) != len(vectors) + 1:
        raise QueryError(f"{len(weights)} weights for BM25 + {len(vectors)} vector fields")
    if any(len(column) != len(bm25) for column in vectors):
        raise QueryError("every vector column needs one value per window hit")
    technique = Normalization(normalization)
    bm25_n = normalize_scores([float(x) for x in bm25], technique) if bm25 else []
    columns = [_normalized_column(column, technique) for column in vectors]
    out = []
    for i, base in enumerate(bm25_n):
        parts = tuple(column[i] for column in columns)
        score = weights[0] * base + sum(
            w * p for w, p in zip(weights[1:], parts, strict=True) if p is not None
        )
        out.append(WindowScore(float(score), float(base), parts))
    return out


def rank_window(scores: Sequence[WindowScore]) -> list[int]:
    """Window positions by combined score, best first; ties keep the window (BM25) order."""
    return sorted(range(len(scores)), key=lambda i: (-scores[i].score, i))
