"""mathsearch.encoders.lexical_prior: the BM25 prior of the in-batch softmax, on real hep-th
equations."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest

from mathsearch.encoders.corpus import EquationCorpus
from mathsearch.encoders.lexical_negatives import bm25_weights, term_counts
from mathsearch.encoders.lexical_prior import LexicalPrior, LexicalPriorError, row_min_max
from mathsearch.encoders.packed_corpus import PackedCorpus
from mathsearch.encoders.subformula_crop import packed_with_crops
from mathsearch.indexer.hepth import bundled_sample_lines, iter_hepth


@lru_cache(maxsize=1)
def _sample() -> tuple[EquationCorpus, PackedCorpus]:
    """The bundled hep-th sample: 206 equations of 8 papers."""
    corpus = EquationCorpus.from_records(iter_hepth(bundled_sample_lines()))
    return corpus, PackedCorpus.from_corpus(corpus)


def test_row_min_max_maps_each_row_onto_the_unit_interval() -> None:
    scores = np.array([[2.0, 4.0, 3.0], [5.0, 5.0, 5.0], [0.0, -1.0, 1.0]])
    out = row_min_max(scores)
    expected = np.array([[0.0, 1.0, 0.5], [0.0, 0.0, 0.0], [0.5, 0.0, 1.0]], dtype=np.float32)
    np.testing.assert_allclose(out, expected)
    assert out.dtype == np.float32
    assert row_min_max(np.zeros((2, 0))).shape == (2, 0)
    with pytest.raises(LexicalPriorError, match="must be"):
        row_min_max(np.zeros(3))


def test_scores_are_okapi_bm25_of_the_corpus_statistics() -> None:
    """Queries against documents inside one step equal BM25 over the whole corpus's weights:
    the step's graphs are scored with the corpus's idf and mean length, not the batch's."""
    _, packed = _sample()
    prior = LexicalPrior(packed)
    counts = term_counts(packed)  # the same sorted term columns
    weights, idf = bm25_weights(counts)
    np.testing.assert_allclose(prior.idf, idf)
    rng = np.random.default_rng(0)
    order = rng.choice(len(packed), size=24, replace=False)
    queries = 8
    scores = prior.scores(packed_with_crops(packed, order, {}), queries)
    assert scores.shape == (queries, 24 - queries)
    for i in range(queries):
        terms = counts[order[i]].indices
        terms = terms[np.argsort(-idf[terms], kind="stable")[:32]]  # its 32 highest-idf terms
        expected = np.asarray(weights[order[queries:]][:, terms].sum(axis=1)).ravel()
        np.testing.assert_allclose(scores[i], expected, rtol=1e-5, atol=1e-5)


def test_an_equation_scores_itself_above_other_papers_equations() -> None:
    corpus, packed = _sample()
    prior = LexicalPrior(packed)
    rng = np.random.default_rng(1)
    anchors = rng.choice(len(packed), size=32, replace=False)
    order = np.concatenate([anchors, anchors])  # each anchor's own graph among the candidates
    scores = prior.scores(packed_with_crops(packed, order, {}), 32)
    beta = row_min_max(scores)
    own = np.diag(beta)
    other_paper = corpus.eq_paper[anchors][:, None] != corpus.eq_paper[anchors][None, :]
    assert (own == 1.0).mean() > 0.9  # an equation is (nearly always) its own best match
    assert own.mean() > beta[other_paper].mean() + 0.5


def test_terms_the_corpus_never_saw_are_dropped() -> None:
    _, packed = _sample()
    head = packed_with_crops(packed, np.arange(40), {})
    prior = LexicalPrior(head)  # statistics of the first 40 equations only
    counts = prior.counts(packed)
    assert counts.shape == (len(packed), prior.keys.size)
    full = term_counts(packed)
    assert counts.sum() < full.sum()  # the other equations' unseen terms are gone
    np.testing.assert_array_equal(
        counts[:40].toarray(), term_counts(head).toarray()
    )  # the first 40 keep every term


def test_refuses_impossible_settings() -> None:
    _, packed = _sample()
    with pytest.raises(LexicalPriorError, match="max_terms"):
        LexicalPrior(packed, max_terms=0)
    with pytest.raises(LexicalPriorError, match="queries among"):
        LexicalPrior(packed).scores(packed_with_crops(packed, np.arange(4), {}), 5)
