"""mathsearch.encoders.lexical_negatives: BM25-mined hard negatives on real hep-th equations."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import pytest
from scipy import sparse

from mathsearch.encoders.corpus import EquationCorpus
from mathsearch.encoders.lexical_negatives import (
    LexicalNegativesError,
    bm25_weights,
    mine_lexical_negatives,
    term_counts,
)
from mathsearch.encoders.packed_corpus import PackedCorpus
from mathsearch.indexer.hepth import bundled_sample_lines, iter_hepth


@lru_cache(maxsize=1)
def _sample() -> tuple[EquationCorpus, PackedCorpus]:
    """The bundled hep-th sample: 206 equations of 8 papers."""
    corpus = EquationCorpus.from_records(iter_hepth(bundled_sample_lines()))
    return corpus, PackedCorpus.from_corpus(corpus)


def test_bm25_weights_follow_the_formula() -> None:
    counts = sparse.csr_matrix(np.array([[2.0, 0.0, 1.0], [0.0, 1.0, 1.0], [1.0, 0.0, 0.0]]))
    weights, idf = bm25_weights(counts, k1=1.2, b=0.75)
    df = np.array([2, 1, 2])
    assert idf == pytest.approx(np.log1p((3 - df + 0.5) / (df + 0.5)))
    mean_length = (3 + 2 + 1) / 3
    norm = 1.2 * (1 - 0.75 + 0.75 * 3 / mean_length)
    assert weights[0, 0] == pytest.approx(idf[0] * 2 * 2.2 / (2 + norm), rel=1e-6)
    assert weights[0, 1] == 0.0


def test_terms_are_symbols_and_parent_child_pairs() -> None:
    corpus, packed = _sample()
    counts = term_counts(packed)
    assert counts.shape[0] == len(corpus.eq_ids)
    symbols = np.add.reduceat((packed.char >= 0).astype(np.int64), packed.offsets[:-1])
    totals = np.asarray(counts.sum(axis=1)).ravel()
    # every symbol counts once, and most symbols also have a parent: pairs come on top
    assert (totals >= symbols).all()
    assert totals.sum() > 1.5 * symbols.sum()


def test_mined_negatives_are_other_papers_best_lexical_matches() -> None:
    corpus, packed = _sample()
    hard = mine_lexical_negatives(packed, corpus.eq_paper, 5)
    assert hard.shape == (len(corpus.eq_ids), 5)
    assert (hard[:, 0] >= 0).mean() > 0.95
    counts = term_counts(packed)
    weights, idf = bm25_weights(counts)
    binary = (counts > 0).astype(np.float64)
    rng = np.random.default_rng(0)
    mined_overlap, random_overlap = [], []
    for i in range(hard.shape[0]):
        row = hard[i][hard[i] >= 0]
        assert (corpus.eq_paper[row] != corpus.eq_paper[i]).all()  # never the anchor's paper
        assert not (hard[i][len(row) :] >= 0).any()  # padding only at the end
        for j in row:  # never a graph identical to the anchor's
            assert (counts[i] != counts[int(j)]).nnz > 0
        # best first: BM25 of the anchor's query terms (its 32 highest-idf ones) falls
        terms = counts[i].indices
        terms = terms[np.argsort(-idf[terms], kind="stable")[:32]]
        scores = np.asarray(weights[row][:, terms].sum(axis=1)).ravel()
        assert (np.diff(scores) <= 1e-4).all()
        others = np.flatnonzero(corpus.eq_paper != corpus.eq_paper[i])
        pick = rng.choice(others, size=len(row))
        shared = binary[i] @ binary[row].T
        mined_overlap.append(float(np.asarray(shared.todense()).mean()))
        shared = binary[i] @ binary[pick].T
        random_overlap.append(float(np.asarray(shared.todense()).mean()))
    # the mined negatives share far more terms with their anchor than uniform ones do
    assert np.mean(mined_overlap) > 1.5 * np.mean(random_overlap)


def test_refuses_impossible_settings() -> None:
    corpus, packed = _sample()
    with pytest.raises(LexicalNegativesError, match="must be >= 1"):
        mine_lexical_negatives(packed, corpus.eq_paper, 0)
    with pytest.raises(LexicalNegativesError, match="papers for"):
        mine_lexical_negatives(packed, corpus.eq_paper[:-1], 3)
    assert math.isfinite(float(term_counts(packed).sum()))
