"""BM25-mined hard negatives: for each equation, the equations of *other* papers that a lexical
ranker puts first (beyond the seeds).

The KDD 2020 seed draws each negative uniformly (section 4.2), and the in-batch contrastive loss
(``--loss infonce``) scores each anchor against the other pairs of its batch, also drawn
uniformly: papers that rarely share notation with the anchor. The search that the vectors serve
fuses them with BM25 (``fusion``, ``rescore``), so the mistakes that matter are the lexical
ranker's: equations of other papers written with the anchor's symbols. Dense passage retrieval
(Karpukhin et al., EMNLP 2020, section 3.2) adds one BM25 negative per question to the in-batch
ones for this reason. ``train gcn --bm25-negatives K`` does the same: each anchor gets one
negative drawn uniformly from the ``K`` equations of other papers that BM25 ranks highest for it.

The lexical representation is read from the featurised graphs themselves, so no second parse is
needed and training, indexing and querying keep one featurisation:

* a *symbol* is a node's ``(tag, attr, char)`` slot triple, for nodes with a character slot;
* a *pair* is a (parent symbol-or-tag, child symbol) edge, as the index's ``math_tokens`` carry
  ``a|next|b`` pairs beside the unigrams;

and an equation's terms are both kinds, counted. Scores are Okapi BM25 (``k1`` 1.2, ``b`` 0.75)
with the query cut to its ``max_terms`` highest-idf distinct terms (32, as the index's BM25
query): :math:`\\sum_{t \\in q} \\mathrm{idf}(t) \\frac{f(t,d)(k_1+1)}{f(t,d) + k_1(1 - b + b
|d|/\\overline{|d|})}`, :math:`\\mathrm{idf}(t) = \\ln(1 + (N - n_t + 0.5)/(n_t + 0.5))`.
An equation whose graph is identical to the anchor's is never its negative (no network can tell
the two apart), nor is any equation of the anchor's own paper.

Example::

    packed = PackedCorpus.from_corpus(corpus)
    hard = mine_lexical_negatives(packed, corpus.eq_paper, k=10)   # (G, 10), -1 = none
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import numpy as np
from scipy import sparse

if TYPE_CHECKING:
    from mathsearch.encoders.packed_corpus import PackedCorpus

logger = logging.getLogger(__name__)

__all__ = [
    "LexicalNegativesError",
    "bm25_idf",
    "bm25_weights",
    "counted_terms",
    "mine_lexical_negatives",
    "query_terms",
    "term_counts",
    "term_keys",
]


class LexicalNegativesError(ValueError):
    """Impossible mining settings."""


def term_keys(packed: PackedCorpus) -> tuple[np.ndarray, np.ndarray]:
    """Every term occurrence of the graphs as ``(graph, key)`` int64 arrays: symbols and
    parent-child pairs (module docstring), one stable int64 key per distinct term.

    Args:
        packed: the graphs; reads ``tag``, ``attr``, ``char`` ((N,) slots of every node, graphs
            back to back, -1: none), ``parent`` ((N,) parent index *within its graph*, -1 for a
            root) and ``offsets`` ((G + 1,) node offsets).
    """
    tag, attr, char = packed.tag, packed.attr, packed.char
    parent, offsets = packed.parent, packed.offsets
    n_graphs = int(offsets.shape[0]) - 1
    sizes = np.diff(offsets)
    node_graph = np.repeat(np.arange(n_graphs, dtype=np.int64), sizes)
    # One int64 key per node: the (tag, attr, char) triple; nodes without a character are
    # structure (mrow, mfrac, ...) and only name the parent side of a pair.
    key = (
        (tag.astype(np.int64) + 1) * (1 << 40)
        + (attr.astype(np.int64) + 1) * (1 << 20)
        + (char.astype(np.int64) + 1)
    )
    has_char = char >= 0
    start = np.repeat(offsets[:-1].astype(np.int64), sizes)
    child = np.flatnonzero((parent >= 0) & has_char)
    parent_global = start[child] + parent[child].astype(np.int64)
    # A pair key: mix both keys into one int64 (collisions merge two rare pairs at worst).
    pair = (key[parent_global] * np.int64(1_000_003) + key[child]) | np.int64(1 << 62)
    terms = np.concatenate([key[has_char], pair])
    rows = np.concatenate([node_graph[has_char], node_graph[child]])
    return rows, terms


def counted_terms(
    packed: PackedCorpus, vocabulary: np.ndarray | None = None
) -> tuple[sparse.csr_matrix, np.ndarray]:
    """``(G, V)`` CSR of term counts of every graph, and its columns' term keys.

    Args:
        packed: the graphs.
        vocabulary: sorted distinct term keys to count over (e.g. a training corpus's: terms
            outside it are dropped); None: the graphs' own distinct keys, in sorted order.
    """
    n_graphs = int(packed.offsets.shape[0]) - 1
    rows, terms = term_keys(packed)
    if vocabulary is None:
        vocabulary, cols = np.unique(terms, return_inverse=True)
        cols = cols.ravel()
    else:
        cols = np.searchsorted(vocabulary, terms)
        known = cols < vocabulary.size
        known[known] = vocabulary[cols[known]] == terms[known]
        rows, cols = rows[known], cols[known]
    data = np.ones(rows.shape[0], dtype=np.float32)
    counts = sparse.csr_matrix(  # repeated (graph, term) entries are summed into counts
        (data, (rows, cols)), shape=(n_graphs, vocabulary.size)
    )
    return counts, vocabulary


def term_counts(packed: PackedCorpus) -> sparse.csr_matrix:
    """``(G, V)`` CSR of term counts: symbols and parent-child pairs of every graph (columns:
    the distinct keys of :func:`term_keys`, in sorted order)."""
    return counted_terms(packed)[0]


def bm25_idf(counts: sparse.csr_matrix) -> np.ndarray:
    """``(V,)`` idf of each term column of ``counts`` (module formula)."""
    n_docs = counts.shape[0]
    df = np.bincount(counts.indices, minlength=counts.shape[1]).astype(np.float64)
    return np.log1p((n_docs - df + 0.5) / (df + 0.5))


def bm25_weights(
    counts: sparse.csr_matrix,
    k1: float = 1.2,
    b: float = 0.75,
    *,
    idf: np.ndarray | None = None,
    mean_length: float | None = None,
) -> tuple[sparse.csr_matrix, np.ndarray]:
    """Okapi BM25 document weights ``W[d, t]`` and the ``idf`` of each term (module formula).

    ``idf`` and ``mean_length`` default to the statistics of ``counts`` itself; pass a
    corpus's to weight a few of its documents (or other graphs) as that corpus would.
    """
    idf = bm25_idf(counts) if idf is None else idf
    length = np.asarray(counts.sum(axis=1)).ravel()
    if mean_length is None:
        mean_length = float(length.mean()) if length.size else 0.0
    norm = k1 * (1.0 - b + b * length / max(float(mean_length), 1e-9))
    tf = counts.data.astype(np.float64)
    row = np.repeat(np.arange(counts.shape[0]), np.diff(counts.indptr))
    data = idf[counts.indices] * tf * (k1 + 1.0) / (tf + norm[row])
    weights = sparse.csr_matrix(
        (data.astype(np.float32), counts.indices, counts.indptr), shape=counts.shape
    )
    return weights, idf


def query_terms(counts: sparse.csr_matrix, idf: np.ndarray, max_terms: int) -> sparse.csr_matrix:
    """Binary query rows: each equation's ``max_terms`` highest-idf distinct terms (of equal
    idf, the lower term ids)."""
    indptr, indices = counts.indptr, counts.indices
    row = np.repeat(np.arange(counts.shape[0]), np.diff(indptr))
    order = np.lexsort((indices, -idf[indices], row))  # by row, then idf down, then term id
    rank = np.arange(order.size) - indptr[row[order]]  # each entry's place within its row
    keep = order[rank < max_terms]
    return sparse.csr_matrix(
        (np.ones(keep.size, np.float32), (row[keep], indices[keep])),
        shape=counts.shape,
        dtype=np.float32,
    )


def _graph_hashes(counts: sparse.csr_matrix) -> np.ndarray:
    """One int64 per graph, equal for graphs with the same term counts."""
    out = np.empty(counts.shape[0], dtype=np.int64)
    for g in range(counts.shape[0]):
        lo, hi = counts.indptr[g], counts.indptr[g + 1]
        out[g] = hash((counts.indices[lo:hi].tobytes(), counts.data[lo:hi].tobytes()))
    return out


def mine_lexical_negatives(
    packed: PackedCorpus,
    eq_paper: np.ndarray,
    k: int = 10,
    *,
    max_terms: int = 32,
    chunk: int = 256,
) -> np.ndarray:
    """``(G, k)`` int64: each graph's ``k`` best BM25 matches among other papers, best first.

    Rows are padded with -1 where fewer than ``k`` graphs of other papers share a term with the
    query (or are not identical to it).

    Args:
        packed: the graphs (:class:`~mathsearch.encoders.packed_corpus.PackedCorpus`).
        eq_paper: (G,) paper of each graph.
        k: negatives kept per graph (>= 1).
        max_terms: query terms kept (the highest-idf ones).
        chunk: queries scored per sparse product (memory: ``chunk x G`` floats).

    Raises:
        LexicalNegativesError: ``k`` or ``max_terms`` below 1, or ``eq_paper`` of another length.
    """
    if k < 1 or max_terms < 1 or chunk < 1:
        raise LexicalNegativesError(f"k, max_terms and chunk must be >= 1: {k}, {max_terms}")
    n_graphs = int(packed.offsets.shape[0]) - 1
    if eq_paper.shape[0] != n_graphs:
        raise LexicalNegativesError(f"{eq_paper.shape[0]} papers for {n_graphs} graphs")
    started = time.perf_counter()
    counts = term_counts(packed)
    weights, idf = bm25_weights(counts)
    queries = query_terms(counts, idf, max_terms)
    hashes = _graph_hashes(counts)
    weights_t = weights.T.tocsr()
    paper = eq_paper.astype(np.int64)
    out = np.full((n_graphs, k), -1, dtype=np.int64)
    take = min(k, n_graphs)
    for lo in range(0, n_graphs, chunk):
        hi = min(lo + chunk, n_graphs)
        scores = (queries[lo:hi] @ weights_t).toarray()
        own = paper[lo:hi, None] == paper[None, :]
        same = hashes[lo:hi, None] == hashes[None, :]
        scores[own | same | (scores <= 0)] = -np.inf
        top = np.argpartition(-scores, take - 1, axis=1)[:, :take]
        top_scores = np.take_along_axis(scores, top, axis=1)
        order = np.argsort(-top_scores, axis=1, kind="stable")
        top = np.take_along_axis(top, order, axis=1)
        top_scores = np.take_along_axis(top_scores, order, axis=1)
        top[~np.isfinite(top_scores)] = -1
        out[lo:hi, :take] = top
    found = (out[:, 0] >= 0).mean() if n_graphs else 0.0
    logger.info(
        "mined %d BM25 negatives for %d equations (%.1f%% have one) in %.1f s",
        k,
        n_graphs,
        100.0 * found,
        time.perf_counter() - started,
    )
    return out
