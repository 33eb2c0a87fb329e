"""Evaluation metrics against hand-computed values (KDD 2020 sections 5 and 6)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from mathsearch.encoders.evaluation import (
    EvaluationError,
    bow_cosine,
    bow_top_k,
    dependency_chromatic_number,
    incomplete_confidence_bound,
    loo_ranking_score,
    mean_precision_at_k,
    mean_umap,
    one_nn_accuracy,
    precision_at_k,
    ranking_confidence_bound,
    ranking_score,
    similarity_matrix,
    umap,
)

# --- ranking score ----------------------------------------------------------------------------


def test_ranking_score_by_hand_with_ties() -> None:
    # wins: .9 > .1, .6 > .5; loss: .2 < .4; tie: .5 == .5 -> (2 + .5) / 4
    assert ranking_score([0.9, 0.2, 0.5, 0.6], [0.1, 0.4, 0.5, 0.5]) == pytest.approx(0.625)


def test_ranking_score_all_positives_above_is_one() -> None:
    assert ranking_score(np.linspace(0.5, 1, 10), np.linspace(-1, 0.4, 10)) == 1.0
    assert ranking_score([0.0], [1.0]) == 0.0


def test_ranking_score_rejects_bad_input() -> None:
    with pytest.raises(EvaluationError):
        ranking_score([], [])
    with pytest.raises(ValueError):  # EvaluationError is a ValueError
        ranking_score([0.1, 0.2], [0.1])


# --- confidence bounds ------------------------------------------------------------------------


def test_theorem_5_1_by_hand() -> None:
    # N = 1987 test papers (section 6.1), delta = .05: 3 * sqrt(ln 20 / 3974)
    assert ranking_confidence_bound(1987, 0.05) == pytest.approx(3 * math.sqrt(math.log(20) / 3974))
    # N = 9, delta = e^-2: 3 * sqrt(2 / 18) = 1
    assert ranking_confidence_bound(9, math.exp(-2)) == pytest.approx(1.0)


def test_theorem_5_1_monotone() -> None:
    widths = [ranking_confidence_bound(n) for n in (1, 10, 100, 1000, 10_000)]
    assert all(a > b for a, b in itertools.pairwise(widths))
    # O(1/sqrt(N)): 100x the papers, a tenth of the width
    assert widths[2] / widths[4] == pytest.approx(10.0)
    # a smaller failure probability costs a wider interval
    assert ranking_confidence_bound(100, 0.01) > ranking_confidence_bound(100, 0.05)


def test_eq_9_by_hand_and_monotone() -> None:
    # |D| = 8, chi = 4, delta = e^-1: sqrt(1 * 4 / 16) = .5
    assert incomplete_confidence_bound(8, 4, math.exp(-1)) == pytest.approx(0.5)
    assert incomplete_confidence_bound(1000, 4) < incomplete_confidence_bound(100, 4)
    assert incomplete_confidence_bound(100, 8) > incomplete_confidence_bound(100, 4)


@pytest.mark.parametrize("delta", [0.0, 1.0, -0.1, 1.5])
def test_bounds_reject_bad_delta(delta: float) -> None:
    with pytest.raises(EvaluationError):
        ranking_confidence_bound(10, delta)
    with pytest.raises(EvaluationError):
        incomplete_confidence_bound(10, 2, delta)


def test_bounds_reject_bad_counts() -> None:
    with pytest.raises(EvaluationError):
        ranking_confidence_bound(0)
    with pytest.raises(EvaluationError):
        incomplete_confidence_bound(0, 1)


def test_dependency_chromatic_number_greedy() -> None:
    # t0 {a,b,c} -> 0; t1 {d,e,f} -> 0; t2 {a,d,g} meets both -> 1; t3 {h,i,j} -> 0;
    # t4 {a,h,k} meets t0 (0), t2 (1), t3 (0) -> 2
    triplets = [("a", "b", "c"), ("d", "e", "f"), ("a", "d", "g"), ("h", "i", "j"), ("a", "h", "k")]
    assert dependency_chromatic_number(triplets) == 3
    # all triplets from one paper form a clique
    assert dependency_chromatic_number([("p", "p", "p")] * 5) == 5
    # pairwise disjoint papers: one colour
    assert dependency_chromatic_number([(i, i + 100, i + 200) for i in range(10)]) == 1
    with pytest.raises(EvaluationError):
        dependency_chromatic_number([])


# --- 1-NN accuracy and labelled ranking score ---------------------------------------------------

# two "a" points near (1, 0), two "b" points near (0, 1), and a third "a" point near the b's
_X = np.array([[1.0, 0.0], [0.9, 0.1], [0.1, 0.9], [0.0, 1.0], [0.2, 0.8]])
_Y = ["a", "a", "b", "b", "a"]


def test_one_nn_accuracy_by_hand() -> None:
    # cosines: c(2,3) = .9/|(.1,.9)| = .994, c(2,4) = .74/(.906*.825) = .991, c(3,4) = .970
    # NN: 0->1 (a ok), 1->0 (a ok), 2->3 (b ok), 3->2 (b ok), 4->2 (b, wrong) -> 4/5
    assert one_nn_accuracy(_X, _Y) == pytest.approx(0.8)
    # inner products: 2 -> 3 (.9 > .74) ok, 4 -> 3 (.8 > .74) wrong, the a's as before -> 4/5
    assert one_nn_accuracy(_X, _Y, metric="inner") == pytest.approx(0.8)
    # well separated categories -> 1
    assert one_nn_accuracy(_X[:4], _Y[:4], metric="euclidean") == 1.0


def test_one_nn_accuracy_rejects_bad_input() -> None:
    with pytest.raises(EvaluationError):
        one_nn_accuracy(_X[:1], _Y[:1])
    with pytest.raises(EvaluationError):
        one_nn_accuracy(_X, _Y[:3])
    with pytest.raises(EvaluationError):
        one_nn_accuracy(_X, _Y, metric="manhattan")  # type: ignore[arg-type]


def test_loo_ranking_score_by_hand() -> None:
    # inner products on x = (3, 2, 0) labels (a, a, b), 1-d embeddings:
    # anchor 0: pos 3*2=6 vs neg 3*0=0 -> win
    # anchor 1: pos 2*3=6 vs neg 0 -> win
    # anchor 2: no same-category partner -> no triplet
    # plus a second b at -1: anchors 0,1 get another win each (6 > -3, 6 > -2);
    # anchor 2 (0): pos <0,-1>=0 vs negs 0, 0 -> two ties; anchor 3 (-1): pos 0 vs negs -3, -2 -> 2
    # total = 4 + 1 + 2 = 7 of 8 triplets
    x = np.array([[3.0], [2.0], [0.0], [-1.0]])
    assert loo_ranking_score(x, ["a", "a", "b", "b"]) == pytest.approx(7 / 8)


def test_loo_ranking_score_edge_cases() -> None:
    assert loo_ranking_score(_X[:4], _Y[:4], metric="cosine") == 1.0
    with pytest.raises(EvaluationError):
        loo_ranking_score(_X[:3], ["a", "b", "c"])  # no positive pair at all


def test_similarity_matrix_metrics() -> None:
    x = np.array([[3.0, 4.0], [0.0, 0.0]])
    assert similarity_matrix(x, "inner").tolist() == [[25.0, 0.0], [0.0, 0.0]]
    assert similarity_matrix(x, "cosine").tolist() == [[1.0, 0.0], [0.0, 0.0]]
    assert similarity_matrix(x, "euclidean").tolist() == [[0.0, -5.0], [-5.0, 0.0]]


# --- P@k and uMAP ------------------------------------------------------------------------------

# ranking  a  b  c  d  e, relevant {a, c, e}
# P@1 = 1, P@2 = 1/2, P@3 = 2/3, P@4 = 2/4, P@5 = 3/5
_RANKED = ["a", "b", "c", "d", "e"]
_REL = {"a", "c", "e", "z"}  # z is relevant but never retrieved


def test_precision_at_k_by_hand() -> None:
    assert precision_at_k(_RANKED, _REL, 1) == 1.0
    assert precision_at_k(_RANKED, _REL, 2) == 0.5
    assert precision_at_k(_RANKED, _REL, 3) == pytest.approx(2 / 3)
    assert precision_at_k(_RANKED, _REL, 5) == pytest.approx(3 / 5)
    # fewer results than k: missing results count as not relevant
    assert precision_at_k(_RANKED, _REL, 10) == pytest.approx(3 / 10)
    with pytest.raises(EvaluationError):
        precision_at_k(_RANKED, _REL, 0)


def test_umap_by_hand_is_unnormalised() -> None:
    # uMAP = P(1) + P(3) + P(5) = 1 + 2/3 + 3/5 = 34/15; plain AP would divide by |rel| = 4
    assert umap(_RANKED, _REL) == pytest.approx(34 / 15)
    # cut-off: only the first 3 results count -> 1 + 2/3
    assert umap(_RANKED, _REL, max_rank=3) == pytest.approx(5 / 3)
    assert umap(_RANKED, set()) == 0.0
    # perfect list of n relevant results: sum of P(k) = n
    assert umap(list("abcdef"), set("abcdef")) == pytest.approx(6.0)


def test_relevance_as_predicate() -> None:
    def is_vowel(doc: object) -> bool:
        return doc in {"a", "e"}

    # relevant at 1 and 5: P(1) + P(5) = 1 + 2/5
    assert umap(_RANKED, is_vowel) == pytest.approx(1.4)
    assert precision_at_k(_RANKED, is_vowel, 5) == pytest.approx(0.4)


def test_means_over_queries() -> None:
    rankings = [_RANKED, ["x", "a"]]
    relevants = [_REL, {"a"}]
    # P@2: (1/2 + 1/2) / 2; uMAP: (34/15 + P(2)=1/2) / 2
    assert mean_precision_at_k(rankings, relevants, 2) == pytest.approx(0.5)
    assert mean_umap(rankings, relevants) == pytest.approx((34 / 15 + 0.5) / 2)
    with pytest.raises(EvaluationError):
        mean_umap(rankings, relevants[:1])
    with pytest.raises(EvaluationError):
        mean_precision_at_k([], [], 10)


# --- BoW baseline ---------------------------------------------------------------------------------


def test_bow_cosine_by_hand() -> None:
    corpus = np.zeros((3, 256))
    corpus[0, [0, 1]] = 1.0  # (1, 1, 0, ...)
    corpus[1, 0] = 2.0  # (2, 0, 0, ...)
    corpus[2, 2] = 5.0  # orthogonal to both
    sims = bow_cosine(corpus)
    assert sims.shape == (3, 3)
    assert sims[0, 1] == pytest.approx(1 / math.sqrt(2))
    assert sims[0, 2] == 0.0
    assert np.allclose(np.diag(sims), 1.0)
    query = np.zeros(256)
    query[0] = 1.0
    assert bow_top_k(query, corpus, 3).tolist() == [1, 0, 2]
    assert bow_top_k(query, corpus, 1).tolist() == [1]
    with pytest.raises(EvaluationError):
        bow_top_k(query, corpus, 0)
