r"""A BM25 prior inside the in-batch softmax: train the vectors on what BM25 misses (beyond the
seeds).

The search serves the vectors fused with BM25 (``fusion``, ``rescore``), so what they should add
is what the lexical ranker gets wrong. Trained alone, the in-batch InfoNCE loss (``--loss
infonce``) spends much of its gradient on pairs that share rare symbols, which BM25 already ranks
first. CLEAR (Gao et al., "Complement lexical retrieval model with semantic residual
embeddings", ECIR 2021, section 3) trains the dense model *on the residual* of the lexical one: a
pair's margin shrinks by what BM25 already separates. In a softmax the same idea is a fixed
additive logit: each anchor's row of scores becomes the fused score the search will rank by,

.. math::

    S_{ij} = s \,\big(\langle a_i, p_j \rangle + w\, \beta_{ij}\big),\qquad
    \beta_{ij} = \frac{\mathrm{bm25}(a_i, p_j) - \min_k \mathrm{bm25}(a_i, p_k)}
                      {\max_k \mathrm{bm25}(a_i, p_k) - \min_k \mathrm{bm25}(a_i, p_k)}

(row min-max over the batch's candidates, like the ``min_max`` fusion's normalisation; 0 for a
constant row), so a pair that BM25 already puts first has little loss left, and the gradient goes
to the pairs it ranks wrong. ``w`` (``train gcn --bm25-prior W``) is in cosine units. Nothing
changes at indexing or query time: the prior is a training signal only.

The BM25 terms are the graph's symbols and parent-child pairs
(:func:`~mathsearch.encoders.lexical_negatives.counted_terms`), with the training corpus's document
frequencies and mean length; a batch's anchors (crops included) are queries of their
``max_terms`` highest-idf distinct terms, its candidates documents.

Example::

    prior = LexicalPrior(PackedCorpus.from_corpus(corpus))
    step = packed_with_crops(packed, order, crops)          # anchors, then candidates
    beta = row_min_max(prior.scores(step, queries=B))       # (B, len(order) - B)
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import numpy as np
from scipy import sparse

from mathsearch.encoders.lexical_negatives import (
    bm25_idf,
    bm25_weights,
    counted_terms,
    query_terms,
)

if TYPE_CHECKING:
    from mathsearch.encoders.packed_corpus import PackedCorpus

logger = logging.getLogger(__name__)

__all__ = ["LexicalPrior", "LexicalPriorError", "row_min_max"]


class LexicalPriorError(ValueError):
    """Impossible prior settings or inputs."""


def row_min_max(scores: np.ndarray) -> np.ndarray:
    """Each row of ``scores`` mapped onto [0, 1] by its own minimum and maximum (0 for a
    constant row). ``(n, m) -> (n, m)`` float32."""
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 2:
        raise LexicalPriorError(f"scores must be (n, m), not {scores.shape}")
    if scores.shape[1] == 0:
        return scores.astype(np.float32)
    low = scores.min(axis=1, keepdims=True)
    span = scores.max(axis=1, keepdims=True) - low
    out = np.divide(scores - low, span, out=np.zeros_like(scores), where=span > 0)
    return out.astype(np.float32)


class LexicalPrior:
    """Okapi BM25 statistics of a training corpus, to score a step's anchors against its
    candidates (module docstring).

    Args:
        packed: the training corpus's graphs (the document frequencies and mean length).
        k1: BM25 term-frequency saturation (1.2).
        b: BM25 length normalisation (0.75).
        max_terms: query terms kept, the highest-idf distinct ones (32, as the index's query).
    """

    def __init__(
        self, packed: PackedCorpus, k1: float = 1.2, b: float = 0.75, max_terms: int = 32
    ) -> None:
        if max_terms < 1 or k1 < 0 or not 0 <= b <= 1:
            raise LexicalPriorError(
                f"need max_terms >= 1, k1 >= 0, 0 <= b <= 1: {max_terms}, {k1}, {b}"
            )
        self.k1, self.b, self.max_terms = float(k1), float(b), int(max_terms)
        counts, keys = counted_terms(packed)
        #: the corpus's distinct term keys, sorted (the columns of :meth:`counts`)
        self.keys = keys
        self.idf = bm25_idf(counts)
        self.mean_length = float(counts.sum()) / max(counts.shape[0], 1)

    def counts(self, packed: PackedCorpus) -> sparse.csr_matrix:
        """``(G, V)`` term counts of ``packed``'s graphs over the corpus's terms (terms the
        corpus never saw are dropped: their idf is unknown)."""
        return counted_terms(packed, self.keys)[0]

    def scores(self, packed: PackedCorpus, queries: int) -> np.ndarray:
        """``(queries, G - queries)`` float32: BM25 of the first ``queries`` graphs of
        ``packed`` (as queries) against each of the others (as documents), weighted with the
        corpus's idf and mean length."""
        n_graphs = len(packed)
        if not 0 <= queries <= n_graphs:
            raise LexicalPriorError(f"{queries} queries among {n_graphs} graphs")
        counts = self.counts(packed)
        query = query_terms(counts[:queries], self.idf, self.max_terms)
        docs, _ = bm25_weights(
            counts[queries:], self.k1, self.b, idf=self.idf, mean_length=self.mean_length
        )
        return np.asarray((query @ docs.T).toarray(), dtype=np.float32)
