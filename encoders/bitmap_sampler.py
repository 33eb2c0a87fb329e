"""Training examples of the bitmap CNN's proxy tasks, drawn anew every step (ECML 2019 4.2-4.3).

"All of our training tasks involve negative sampling; the triples task sample an additional
positive point. For every gradient step, we sample new negative/positive samples." Given a batch
of anchor equations (an epoch walks a permutation of the training equations):

* :func:`sample_labels` (symbols, keywords; eq. 1): "with probability 0.5 we create a pair with a
  correct label, otherwise we choose an incorrect label uniformly at random" -> ``(label, z)``;
* :func:`sample_pairs` (Siamese, eq. 2): with probability 0.5 an equation of the same paper
  (``y = +1``), else one drawn uniformly from the other papers' equations (``y = -1``);
* :func:`sample_triplets` (triplet, eq. 3): a positive from the same paper and a negative drawn
  uniformly from the other papers' equations.

Negatives are rejection-sampled, as in the authors' code; anchors must come from papers with at
least two equations for the pair and triplet tasks (:func:`context_anchors`). Numpy only.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

logger = logging.getLogger(__name__)

__all__ = [
    "SamplerError",
    "context_anchors",
    "paper_members",
    "sample_labels",
    "sample_pairs",
    "sample_triplets",
]


class SamplerError(ValueError):
    """Too little data to sample the examples of a task."""


def paper_members(eq_paper: np.ndarray) -> list[np.ndarray]:
    """The equation indices of every paper (``eq_paper[i]`` = paper index of equation ``i``)."""
    order = np.argsort(eq_paper, kind="stable")
    counts = np.bincount(eq_paper, minlength=int(eq_paper.max()) + 1 if eq_paper.size else 0)
    return np.split(order, np.cumsum(counts)[:-1]) if eq_paper.size else []


def context_anchors(eq_paper: np.ndarray) -> np.ndarray:
    """Equations whose paper has another equation, and at least two papers overall.

    Raises:
        SamplerError: no such equation or a single paper.
    """
    members = paper_members(eq_paper)
    if sum(len(m) > 0 for m in members) < 2:
        raise SamplerError("the document-context task needs equations of at least two papers")
    sizes = np.array([len(m) for m in members])
    anchors = np.flatnonzero(sizes[eq_paper] >= 2)
    if anchors.size == 0:
        raise SamplerError("no paper has two equations: no similar pair to sample")
    return anchors


def _other_paper(rng: np.random.Generator, eq_paper: np.ndarray, anchors: np.ndarray) -> np.ndarray:
    out = rng.integers(0, len(eq_paper), size=len(anchors))
    for _ in range(100):
        clash = eq_paper[out] == eq_paper[anchors]
        if not clash.any():
            return out
        out[clash] = rng.integers(0, len(eq_paper), size=int(clash.sum()))
    raise SamplerError("could not draw equations of other papers (one paper dominates)")


def _same_paper(
    rng: np.random.Generator,
    members: Sequence[np.ndarray],
    eq_paper: np.ndarray,
    anchors: np.ndarray,
) -> np.ndarray:
    out = np.empty(len(anchors), dtype=np.int64)
    for n, a in enumerate(anchors):
        group = members[eq_paper[a]]
        if len(group) < 2:
            raise SamplerError(f"equation {a} has no other equation in its paper")
        k = int(rng.integers(0, len(group) - 1))
        pick = group[k]
        out[n] = group[-1] if pick == a else pick  # uniform over the others
    return out


def sample_triplets(
    rng: np.random.Generator,
    anchors: np.ndarray,
    eq_paper: np.ndarray,
    members: Sequence[np.ndarray],
) -> tuple[np.ndarray, np.ndarray]:
    """Positive (same paper, not the anchor) and negative (another paper) of every anchor."""
    return _same_paper(rng, members, eq_paper, anchors), _other_paper(rng, eq_paper, anchors)


def sample_pairs(
    rng: np.random.Generator,
    anchors: np.ndarray,
    eq_paper: np.ndarray,
    members: Sequence[np.ndarray],
) -> tuple[np.ndarray, np.ndarray]:
    """Partner of every anchor and ``y`` (+1 same paper, -1 other paper), each with p = 0.5."""
    similar = rng.random(len(anchors)) < 0.5
    positive, negative = sample_triplets(rng, anchors, eq_paper, members)
    return np.where(similar, positive, negative), np.where(similar, 1, -1).astype(np.int64)


def sample_labels(
    rng: np.random.Generator,
    anchors: np.ndarray,
    label_ids: Sequence[np.ndarray],
    num_labels: int,
) -> tuple[np.ndarray, np.ndarray]:
    """``(label, z)`` per anchor: a correct label with p = 0.5 (``z = 1``), else an incorrect one
    drawn uniformly (``z = 0``). Anchors need at least one label (and not all of them)."""
    labels = np.empty(len(anchors), dtype=np.int64)
    targets = (rng.random(len(anchors)) < 0.5).astype(np.float32)
    for n, a in enumerate(anchors):
        own = label_ids[a]
        if len(own) == 0 or len(own) >= num_labels:
            raise SamplerError(f"equation {a} has {len(own)} of {num_labels} labels")
        if targets[n]:
            labels[n] = own[int(rng.integers(0, len(own)))]
            continue
        while True:
            pick = int(rng.integers(0, num_labels))
            position = np.searchsorted(own, pick)
            if position >= len(own) or own[position] != pick:
                labels[n] = pick
                break
    return labels, targets
