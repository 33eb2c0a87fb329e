r"""Metrics of the ECML 2019 seed (sec. 5.2) over unit-length embeddings, numpy only.

On labelled evaluation data (the seed: ~100 hand-labelled equations in 13 categories):

* **Eval Triples** / **Eval Siamese**: the margin losses :math:`\ell_{tri}` (eq. 3, anchor swap)
  and :math:`\ell_{siam}` (eq. 2) averaged over *all* triples / pairs of the labelled set (similar
  = same category), :math:`\Delta = 1`;
* **Eval Ranking** ("hard ranking"): the fraction of triples ranked wrong, i.e. 0 when the anchor
  is more similar to the positive than to the negative, 1 otherwise (ties count one half) -
  ``1 - loo_ranking_score`` of :mod:`mathsearch.encoders.evaluation`;
* **Eval Accuracy**: leave-one-out 1-nearest-neighbour accuracy
  (:func:`mathsearch.encoders.evaluation.one_nn_accuracy`, dot product).

On hold-out data, with the document-context weak label (same paper = similar) "for all models":
**Hold-Out Ranking**, **Hold-Out Triples** and **Hold-Out Siamese** over sampled triplets
(anchor, same-paper positive, other-paper negative; the Siamese loss over the pairs (anchor,
positive, +1) and (anchor, negative, -1)).

The seed's hand-labelled set is not available. :func:`labelled_metrics` takes any categories;
``mathsearch eval bitmap`` uses the paper as the category of a sample of hold-out equations (a
weak label, documented in docs/encoder-bitmap.md). Losses are reported as plain hinges (the
seed's table names :math:`\ell_{siam}`, :math:`\ell_{tri}`), the squared ones as ``*_sq``.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from mathsearch.encoders.evaluation import (
    EvaluationError,
    loo_ranking_score,
    one_nn_accuracy,
    ranking_score,
)

logger = logging.getLogger(__name__)

__all__ = [
    "holdout_metrics",
    "holdout_triplets",
    "labelled_metrics",
    "siamese_hinge",
    "triplet_hinge",
]


def triplet_hinge(
    sim_ap: ArrayLike, sim_an: ArrayLike, sim_pn: ArrayLike, margin: float = 1.0
) -> np.ndarray:
    r"""Per-triple :math:`\ell_{tri}` of eq. 3 (anchor swap): :math:`\max(0, \Delta - s_{ap} +
    \max(s_{an}, s_{pn}))`.

    >>> triplet_hinge([1.0], [0.0], [0.5]).tolist()
    [0.5]
    """
    ap, an, pn = (np.asarray(v, dtype=np.float64) for v in (sim_ap, sim_an, sim_pn))
    return np.maximum(0.0, margin - ap + np.maximum(an, pn))


def siamese_hinge(similarity: ArrayLike, labels: ArrayLike, margin: float = 1.0) -> np.ndarray:
    r"""Per-pair :math:`\ell_{siam}` of eq. 2: :math:`\max(0, \Delta - y s)`.

    >>> siamese_hinge([0.5, 0.5], [1, -1]).tolist()
    [0.5, 1.5]
    """
    s, y = np.asarray(similarity, dtype=np.float64), np.asarray(labels, dtype=np.float64)
    return np.maximum(0.0, margin - y * s)


def _codes(labels: Sequence[Hashable]) -> np.ndarray:
    index: dict[Hashable, int] = {}
    return np.fromiter((index.setdefault(x, len(index)) for x in labels), dtype=np.int64)


def labelled_metrics(
    embeddings: ArrayLike, labels: Sequence[Hashable], margin: float = 1.0
) -> dict[str, float | int]:
    """Eval Accuracy, Eval Ranking, Eval Triples, Eval Siamese over all triples / pairs.

    Args:
        embeddings: ``(n, d)`` unit-length embeddings.
        labels: ``n`` categories (at least one with two members, at least two categories).

    Raises:
        EvaluationError: too few labelled embeddings.
    """
    x = np.asarray(embeddings, dtype=np.float64)
    codes = _codes(labels)
    if x.ndim != 2 or x.shape[0] != codes.size or codes.size < 3:
        raise EvaluationError(f"expected (n >= 3, d) embeddings for {codes.size} labels")
    sim = x @ x.T
    tri_sum = tri_sq = 0.0
    n_triples = 0
    for a in range(x.shape[0]):
        same = codes == codes[a]
        same[a] = False
        pos, neg = np.flatnonzero(same), np.flatnonzero(codes != codes[a])
        if pos.size == 0 or neg.size == 0:
            continue
        hinge = triplet_hinge(
            sim[a, pos][:, None], sim[a, neg][None, :], sim[np.ix_(pos, neg)], margin
        )
        tri_sum += float(hinge.sum())
        tri_sq += float((hinge * hinge).sum())
        n_triples += hinge.size
    if n_triples == 0:
        raise EvaluationError("no triple with a same-category and a different-category member")
    upper = np.triu_indices(x.shape[0], k=1)
    y = np.where(codes[upper[0]] == codes[upper[1]], 1.0, -1.0)
    siam = siamese_hinge(sim[upper], y, margin)
    return {
        "eval_accuracy": one_nn_accuracy(x, list(codes), metric="inner"),
        "eval_ranking": 1.0 - loo_ranking_score(x, list(codes), metric="inner"),
        "eval_triples": tri_sum / n_triples,
        "eval_triples_sq": tri_sq / n_triples,
        "eval_siamese": float(siam.mean()),
        "eval_siamese_sq": float((siam * siam).mean()),
        "eval_equations": int(codes.size),
        "eval_categories": int(codes.max() + 1),
        "eval_triples_count": int(n_triples),
    }


def holdout_triplets(
    eq_paper: ArrayLike, count: int, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``count`` fixed (anchor, same-paper positive, other-paper negative) index triplets.

    Raises:
        EvaluationError: no paper with two equations, or a single paper.
    """
    from mathsearch.encoders.bitmap_sampler import (
        SamplerError,
        context_anchors,
        paper_members,
        sample_triplets,
    )

    papers = np.asarray(eq_paper, dtype=np.int64)
    try:
        candidates = context_anchors(papers)
        rng = np.random.default_rng(seed)
        anchors = rng.choice(candidates, size=count, replace=True)
        positive, negative = sample_triplets(rng, anchors, papers, paper_members(papers))
    except SamplerError as exc:
        raise EvaluationError(str(exc)) from exc
    return anchors, positive, negative


def holdout_metrics(
    embeddings: ArrayLike,
    triplets: tuple[np.ndarray, np.ndarray, np.ndarray],
    margin: float = 1.0,
) -> dict[str, Any]:
    """Hold-Out Ranking (fraction ranked wrong), Hold-Out Triples and Hold-Out Siamese."""
    x = np.asarray(embeddings, dtype=np.float64)
    a, p, n = (x[i] for i in triplets)
    ap, an, pn = (a * p).sum(1), (a * n).sum(1), (p * n).sum(1)
    tri = triplet_hinge(ap, an, pn, margin)
    siam = siamese_hinge(np.concatenate([ap, an]), np.repeat([1.0, -1.0], len(ap)), margin)
    return {
        "holdout_ranking": 1.0 - ranking_score(ap, an),
        "holdout_triples": float(tri.mean()),
        "holdout_triples_sq": float((tri * tri).mean()),
        "holdout_siamese": float(siam.mean()),
        "holdout_siamese_sq": float((siam * siam).mean()),
        "holdout_triplets": len(ap),
    }
