"""Groups of papers that write with the same symbols, for hard in-batch negatives (beyond seeds).

The seed's sampler draws every anchor paper uniformly (KDD 2020 section 4.2), so the other pairs
of an in-batch contrastive step (``--loss infonce``) come from papers that rarely share notation
with the anchor: telling them apart is easy. Same-paper search is the opposite: the distractors
are papers of the same field, written with the same letters. ``train gcn --hard-batches G``
draws the anchors of each step from ``G`` groups of papers with similar notation, so the in-batch
negatives are papers the model has to look closely at.

A paper's notation is the histogram of the character slots of its equations' nodes (the
featurisation's ``x_char`` ids: Latin and Greek letters, digits, operators), weighted as TF-IDF
over papers and L2-normalised; :func:`notation_groups` clusters these vectors with spherical
k-means (cosine), seeded.

Example::

    packed = PackedCorpus.from_corpus(corpus)
    groups = notation_groups(packed.char, packed.offsets, corpus.eq_paper, corpus.num_papers, 512)
    groups.shape  # (num_papers,), values in [0, 512)
"""

from __future__ import annotations

import logging

import numpy as np

logger = logging.getLogger(__name__)

__all__ = ["NotationGroupError", "notation_groups", "notation_vectors"]


class NotationGroupError(ValueError):
    """Impossible grouping settings."""


def notation_vectors(
    char: np.ndarray, offsets: np.ndarray, eq_paper: np.ndarray, num_papers: int
) -> np.ndarray:
    """``(P, C)`` float32: each paper's TF-IDF character-slot histogram, L2-normalised.

    Args:
        char: (N,) character slot of every node of the corpus (-1: none), graphs back to back.
        offsets: (G + 1,) node offsets of the graphs.
        eq_paper: (G,) paper of each graph.
        num_papers: P.
    """
    slots = int(char.max()) + 1 if char.size else 1
    node_paper = np.repeat(eq_paper.astype(np.int64), np.diff(offsets))
    keep = char >= 0
    flat = node_paper[keep] * slots + char[keep].astype(np.int64)
    counts = np.bincount(flat, minlength=num_papers * slots).reshape(num_papers, slots)
    counts = counts.astype(np.float64)
    tf = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1.0)
    df = (counts > 0).sum(axis=0)
    idf = np.log((1.0 + num_papers) / (1.0 + df)) + 1.0
    vectors = tf * idf
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.maximum(norms, 1e-12)).astype(np.float32)


def notation_groups(  # noqa: PLR0917 - the packed columns, then the settings
    char: np.ndarray,
    offsets: np.ndarray,
    eq_paper: np.ndarray,
    num_papers: int,
    n_groups: int,
    seed: int = 0,
    iterations: int = 20,
) -> np.ndarray:
    """``(P,)`` int64 group of every paper: spherical k-means over :func:`notation_vectors`.

    Args:
        char, offsets, eq_paper, num_papers: as :func:`notation_vectors`.
        n_groups: k (at most the number of papers).
        seed: of the initial centres (k papers drawn without replacement).
        iterations: Lloyd iterations (assign each paper to its most similar centre, then each
            centre to the normalised mean of its papers; an emptied group keeps its centre).

    Raises:
        NotationGroupError: ``n_groups`` < 1 or more groups than papers.
    """
    if n_groups < 1 or n_groups > num_papers:
        raise NotationGroupError(f"n_groups must be in [1, {num_papers}], not {n_groups}")
    vectors = notation_vectors(char, offsets, eq_paper, num_papers)
    rng = np.random.default_rng(seed)
    centres = vectors[rng.choice(num_papers, size=n_groups, replace=False)].copy()
    assign = np.zeros(num_papers, dtype=np.int64)
    for _ in range(iterations):
        assign = np.argmax(vectors @ centres.T, axis=1)
        sums = np.zeros_like(centres)
        np.add.at(sums, assign, vectors)
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        filled = norms[:, 0] > 0
        centres[filled] = sums[filled] / norms[filled]
    sizes = np.bincount(assign, minlength=n_groups)
    logger.info(
        "notation groups: %d papers in %d groups (median %d papers, largest %d)",
        num_papers, int((sizes > 0).sum()), int(np.median(sizes[sizes > 0])), int(sizes.max()),
    )  # fmt: skip
    return assign
