r"""Evaluation metrics of the KDD 2020 seed (sections 5 and 6), pure numpy, no torch.

Ranking score (section 5.2, eq. 3): the fraction of triplets ``(x1, x2, x3)`` with
``x2 in P(x1)``, ``x3 not in P(x1)`` where :math:`\langle \bar\phi(x_1), \bar\phi(x_2) \rangle >
\langle \bar\phi(x_1), \bar\phi(x_3) \rangle` (ties count one half here; eq. 3 is strict).
:func:`ranking_score` takes paired similarities of sampled triplets; :func:`loo_ranking_score`
takes every triplet of a labelled set (positives: same category, section 6.1).

Confidence bounds (section 5.2): with probability at least :math:`1 - \delta`, for the complete
U-statistic over the equations of ``N`` independent test *papers* (Theorem 5.1)
:math:`s \le \hat s + 3\sqrt{\ln(1/\delta) / (2N)}`, and for an incomplete U-statistic over
``|D|`` sampled triplets whose dependency graph has (greedy) chromatic number :math:`\hat\chi`
(eq. 9) :math:`s \le \hat s_\subset + \sqrt{\ln(1/\delta)\,\hat\chi / (2|D|)}`. The functions
return the width ``t``; Janson's inequality is symmetric, so :math:`\hat s - t` is the matching
lower bound.

1-NN accuracy (section 6.1): leave-one-out 1-nearest-neighbour accuracy on labelled equations.

Retrieval (section 6.3): Precision@k (fraction of relevant results among the first ``k``) and
unnormalised MAP, :math:`uMAP = \sum_{k=1}^{1000} P(k)\,\Delta_k` with :math:`\Delta_k = 1` when
the ``k``-th result is relevant: average precision *without* the division by the number of
relevant documents (unknown in the seed's keyword-judged setting), cut at 1000 results. Both are
averaged over queries by the ``mean_*`` functions. Relevance is a collection of relevant ids or
a predicate on a result id (the seed judges results by keywords in their section).

BoW baseline (section 6.3): the sum of the one-hot node features (256-d, see
:func:`mathsearch.indexer.bow_vector`), retrieved by cosine similarity (:func:`bow_cosine`,
:func:`bow_top_k`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Collection, Hashable, Iterable, Sequence
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

logger = logging.getLogger(__name__)

__all__ = [
    "EvaluationError",
    "bow_cosine",
    "bow_top_k",
    "dependency_chromatic_number",
    "incomplete_confidence_bound",
    "loo_ranking_score",
    "mean_precision_at_k",
    "mean_umap",
    "one_nn_accuracy",
    "precision_at_k",
    "ranking_confidence_bound",
    "ranking_score",
    "similarity_matrix",
    "umap",
]

Metric = Literal["cosine", "inner", "euclidean"]
Relevance = Collection[Hashable] | Callable[[Hashable], bool]

#: The seed's uMAP cut-off (section 6.3).
UMAP_MAX_RANK = 1000
_EPS = 1e-12


class EvaluationError(ValueError):
    """Invalid input to a metric (shapes, empty sets, out-of-range parameters)."""


# --- ranking score and its confidence bounds (section 5) ---------------------------------------


def ranking_score(pos_sim: ArrayLike, neg_sim: ArrayLike) -> float:
    """Fraction of triplets whose positive pair scores above the negative pair (eq. 3).

    Args:
        pos_sim: ``(T,)`` similarity of anchor and positive of each triplet.
        neg_sim: ``(T,)`` similarity of anchor and negative of the same triplets.

    Returns:
        ``mean(1[pos > neg] + 0.5 * 1[pos == neg])`` in ``[0, 1]``.

    Example:
        >>> ranking_score([0.9, 0.2, 0.5], [0.1, 0.4, 0.5])
        0.5
    """
    pos = np.asarray(pos_sim, dtype=np.float64)
    neg = np.asarray(neg_sim, dtype=np.float64)
    if pos.ndim != 1 or pos.shape != neg.shape:
        raise EvaluationError(f"expected two (T,) arrays, got {pos.shape} and {neg.shape}")
    if pos.size == 0:
        raise EvaluationError("no triplets")
    return float(np.mean((pos > neg) + 0.5 * (pos == neg)))


def _check_delta(delta: float) -> None:
    if not 0.0 < delta < 1.0:
        raise EvaluationError(f"delta must lie in (0, 1), got {delta}")


def ranking_confidence_bound(n_papers: int, delta: float = 0.05) -> float:
    r"""Width ``t`` of Theorem 5.1: :math:`s \le \hat s + 3\sqrt{\ln(1/\delta)/(2N)}`.

    Holds for any U-statistic with kernel in ``[0, 1]`` (ranking score, histogram loss)
    computed on all triplets of the equations of ``N`` independent papers (assumptions A1-A3).

    Args:
        n_papers: ``N``, the number of papers in the test set (not the number of equations).
        delta: the failure probability, default 0.05.

    Example:
        >>> round(ranking_confidence_bound(1987, 0.05), 4)
        0.0824
    """
    if n_papers < 1:
        raise EvaluationError(f"n_papers must be >= 1, got {n_papers}")
    _check_delta(delta)
    return 3.0 * math.sqrt(math.log(1.0 / delta) / (2.0 * n_papers))


def incomplete_confidence_bound(
    n_triplets: int, chromatic_number: int, delta: float = 0.05
) -> float:
    r"""Width of eq. 9: :math:`s \le \hat s_\subset + \sqrt{\ln(1/\delta)\,\hat\chi/(2|D|)}`.

    Args:
        n_triplets: ``|D|``, the number of sampled triplets.
        chromatic_number: :math:`\hat\chi`, e.g. from :func:`dependency_chromatic_number`.
        delta: the failure probability, default 0.05.

    Example:
        >>> round(incomplete_confidence_bound(100_000, 50, 0.05), 4)
        0.0274
    """
    if n_triplets < 1 or chromatic_number < 1:
        raise EvaluationError(
            f"n_triplets and chromatic_number must be >= 1, got {n_triplets}, {chromatic_number}"
        )
    _check_delta(delta)
    return math.sqrt(math.log(1.0 / delta) * chromatic_number / (2.0 * n_triplets))


def dependency_chromatic_number(triplet_papers: Iterable[Iterable[Hashable]]) -> int:
    """Greedy colouring of the triplets' dependency graph; the number of colours (eq. 9's chi).

    Two triplets are adjacent when an equation of one comes from the same paper as an equation
    of the other (proof of Theorem 5.1). Each triplet takes the smallest colour not used by an
    earlier triplet sharing a paper. A proper colouring bounds the fractional chromatic number
    Janson's inequality needs from above, so the bound stays valid.

    Args:
        triplet_papers: per triplet, the paper ids of its (three) equations.

    Example:
        >>> dependency_chromatic_number([("a", "b", "c"), ("d", "e", "f"), ("a", "d", "g")])
        2
    """
    used: dict[Hashable, set[int]] = {}
    n_colours = 0
    for triplet in triplet_papers:
        papers = set(triplet)
        if not papers:
            raise EvaluationError("a triplet without papers")
        taken = set().union(*(used.get(p, ()) for p in papers))
        colour = 0
        while colour in taken:
            colour += 1
        for p in papers:
            used.setdefault(p, set()).add(colour)
        n_colours = max(n_colours, colour + 1)
    if n_colours == 0:
        raise EvaluationError("no triplets")
    return n_colours


# --- labelled evaluation data: 1-NN accuracy and ranking score (section 6.1) ------------------


def similarity_matrix(
    embeddings: ArrayLike, metric: Metric = "cosine", queries: ArrayLike | None = None
) -> np.ndarray:
    """``(q, n)`` similarities of ``queries`` (default: the embeddings) to ``embeddings``.

    ``"cosine"``, ``"inner"`` (the seed's inner product) or ``"euclidean"`` (the negated
    distance, so larger is always more similar). Zero vectors have cosine 0 to everything.
    """
    x = np.asarray(embeddings, dtype=np.float64)
    q = x if queries is None else np.asarray(queries, dtype=np.float64)
    if x.ndim != 2 or q.ndim != 2 or q.shape[1] != x.shape[1]:
        raise EvaluationError(f"expected (n, d) and (q, d) arrays, got {x.shape} and {q.shape}")
    if metric == "inner":
        return q @ x.T
    if metric == "cosine":
        xn = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), _EPS)
        qn = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), _EPS)
        return qn @ xn.T
    if metric == "euclidean":
        sq = (q * q).sum(1)[:, None] + (x * x).sum(1)[None, :] - 2.0 * (q @ x.T)
        return -np.sqrt(np.maximum(sq, 0.0))
    raise EvaluationError(f"unknown metric {metric!r}; expected cosine, inner or euclidean")


def _labelled(embeddings: ArrayLike, labels: Sequence[Hashable]) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(embeddings, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] != len(labels):
        raise EvaluationError(f"expected (n, d) embeddings for {len(labels)} labels, got {x.shape}")
    if x.shape[0] < 2:
        raise EvaluationError("need at least two labelled embeddings")
    index: dict[Hashable, int] = {}
    codes = np.fromiter((index.setdefault(lab, len(index)) for lab in labels), dtype=np.int64)
    return x, codes


def one_nn_accuracy(
    embeddings: ArrayLike, labels: Sequence[Hashable], metric: Metric = "cosine"
) -> float:
    """Leave-one-out 1-nearest-neighbour accuracy (section 6.1, "Accuracy").

    Each embedding is classified by the label of its most similar *other* embedding (ties: the
    lowest index); returns the fraction classified correctly.

    Args:
        embeddings: ``(n, d)`` embeddings, ``n >= 2``.
        labels: ``n`` category labels.
        metric: ``"cosine"`` (default), ``"inner"`` or ``"euclidean"``.

    Example:
        >>> one_nn_accuracy([[1, 0], [0.9, 0.1], [0, 1], [0.1, 0.9]], ["a", "a", "b", "a"])
        0.5
    """
    x, codes = _labelled(embeddings, labels)
    sim = similarity_matrix(x, metric)
    np.fill_diagonal(sim, -np.inf)
    nearest = np.argmax(sim, axis=1)
    return float(np.mean(codes[nearest] == codes))


def loo_ranking_score(
    embeddings: ArrayLike, labels: Sequence[Hashable], metric: Metric = "inner"
) -> float:
    """Ranking score over all triplets of a labelled set (section 6.1, "Ranking", eq. 3).

    Every ordered triplet ``(i, j, k)`` with ``j != i`` of ``i``'s category and ``k`` of another
    category counts once: 1 if ``sim(i, j) > sim(i, k)``, 1/2 on a tie, else 0; returns the
    mean over those triplets (anchors with larger categories weigh more, as in the U-statistic).

    Args:
        embeddings: ``(n, d)`` embeddings.
        labels: ``n`` category labels (at least one category with two members and two
            categories).
        metric: ``"inner"`` (default, eq. 3), ``"cosine"`` or ``"euclidean"``.

    Example:
        >>> loo_ranking_score([[1, 0], [1, 0], [0, 1]], ["a", "a", "b"])
        1.0
    """
    x, codes = _labelled(embeddings, labels)
    sim = similarity_matrix(x, metric)
    wins = 0.0
    n_triplets = 0
    for i in range(x.shape[0]):
        same = codes == codes[i]
        same[i] = False
        pos, neg = sim[i, same], np.sort(sim[i, codes != codes[i]])
        if pos.size == 0 or neg.size == 0:
            continue
        below = np.searchsorted(neg, pos, side="left")
        ties = np.searchsorted(neg, pos, side="right") - below
        wins += float(below.sum()) + 0.5 * float(ties.sum())
        n_triplets += pos.size * neg.size
    if n_triplets == 0:
        raise EvaluationError("no triplet with a same-category and a different-category partner")
    return wins / n_triplets


# --- retrieval: P@k and uMAP (section 6.3) ----------------------------------------------------


def _relevance_flags(ranked_ids: Sequence[Hashable], relevant: Relevance, limit: int) -> np.ndarray:
    head = list(ranked_ids)[:limit]
    is_relevant = relevant if callable(relevant) else relevant.__contains__
    return np.fromiter((bool(is_relevant(doc)) for doc in head), dtype=bool, count=len(head))


def _paired(rankings: Sequence[Sequence[Hashable]], relevants: Sequence[Relevance]) -> None:
    if len(rankings) != len(relevants):
        raise EvaluationError(f"{len(rankings)} rankings but {len(relevants)} relevance sets")
    if not rankings:
        raise EvaluationError("no queries")


def precision_at_k(ranked_ids: Sequence[Hashable], relevant: Relevance, k: int) -> float:
    """Precision@k: relevant results among the first ``k``, divided by ``k`` (section 6.3).

    A list shorter than ``k`` counts the missing results as not relevant.

    Args:
        ranked_ids: result ids, best first.
        relevant: the relevant ids, or a predicate ``id -> bool``.
        k: the cut-off, ``>= 1``.

    Example:
        >>> precision_at_k(["a", "b", "c", "d"], {"a", "c"}, 3)
        0.6666666666666666
    """
    if k < 1:
        raise EvaluationError(f"k must be >= 1, got {k}")
    return float(_relevance_flags(ranked_ids, relevant, k).sum()) / k


def mean_precision_at_k(
    rankings: Sequence[Sequence[Hashable]], relevants: Sequence[Relevance], k: int
) -> float:
    """Mean of :func:`precision_at_k` over queries (``rankings[q]`` judged by ``relevants[q]``)."""
    _paired(rankings, relevants)
    return float(
        np.mean([precision_at_k(r, rel, k) for r, rel in zip(rankings, relevants, strict=True)])
    )


def umap(
    ranked_ids: Sequence[Hashable], relevant: Relevance, max_rank: int = UMAP_MAX_RANK
) -> float:
    r"""Unnormalised average precision of one query: :math:`\sum_{k=1}^{K} P(k)\,\Delta_k`.

    ``K = max_rank`` (1000 in the seed); :math:`\Delta_k` is 1 when the ``k``-th result is
    relevant. No division by the number of relevant documents (section 6.3), so the value
    grows with the number of relevant results found (up to ``K``).

    Example (``a`` and ``c`` relevant: ``P(1) + P(3) = 1 + 2/3``):
        >>> round(umap(["a", "b", "c", "d"], {"a", "c"}), 4)
        1.6667
    """
    if max_rank < 1:
        raise EvaluationError(f"max_rank must be >= 1, got {max_rank}")
    flags = _relevance_flags(ranked_ids, relevant, max_rank)
    if not flags.any():
        return 0.0
    precision = np.cumsum(flags) / np.arange(1, flags.size + 1)
    return float(precision[flags].sum())


def mean_umap(
    rankings: Sequence[Sequence[Hashable]],
    relevants: Sequence[Relevance],
    max_rank: int = UMAP_MAX_RANK,
) -> float:
    """Mean of :func:`umap` over queries (the seed's reported uMAP)."""
    _paired(rankings, relevants)
    return float(
        np.mean([umap(r, rel, max_rank) for r, rel in zip(rankings, relevants, strict=True)])
    )


# --- BoW baseline (section 6.3) ---------------------------------------------------------------


def bow_cosine(bow_vectors: ArrayLike, queries: ArrayLike | None = None) -> np.ndarray:
    """Cosine similarities ``(q, n)`` between BoW vectors (``(n, 256)``, see ``bow_vector``).

    Args:
        bow_vectors: ``(n, 256)`` corpus BoW vectors (sums of one-hot node features).
        queries: ``(q, 256)`` query BoW vectors; default the corpus itself (``(n, n)``).

    Example:
        >>> bow_cosine([[1, 0], [1, 1]]).round(4).tolist()
        [[1.0, 0.7071], [0.7071, 1.0]]
    """
    return similarity_matrix(bow_vectors, "cosine", queries)


def bow_top_k(query: ArrayLike, bow_vectors: ArrayLike, k: int) -> np.ndarray:
    """Indices of the ``k`` corpus BoW vectors most cosine-similar to one query, best first.

    Ties keep the corpus order. ``k`` larger than the corpus returns the whole corpus ranked.

    Example:
        >>> bow_top_k([1, 0], [[0, 1], [1, 1], [2, 0]], 2).tolist()
        [2, 1]
    """
    if k < 1:
        raise EvaluationError(f"k must be >= 1, got {k}")
    q = np.asarray(query, dtype=np.float64)
    if q.ndim != 1:
        raise EvaluationError(f"query must be one (d,) vector, got shape {q.shape}")
    sims = bow_cosine(bow_vectors, q[None, :])[0]
    return np.argsort(-sims, kind="stable")[:k]
