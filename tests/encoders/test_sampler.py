"""mathsearch.encoders.sampler: triplets of the KDD 2020 seed, section 4.2 (statistics and
determinism)."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest

from mathsearch.encoders.corpus import EquationCorpus
from mathsearch.encoders.sampler import KINDS, SamplerError, TripletSampler, holdout_triplets
from mathsearch.indexer.hepth import bundled_sample_lines, iter_hepth
from mathsearch.indexer.mathml_graph import EquationGraph
from mathsearch.indexer.parse import Featuriser, ParsedEquation

N = 40_000


@lru_cache(maxsize=1)
def _graph() -> EquationGraph:
    parsed = Featuriser().parse_latex("x^2")
    assert isinstance(parsed, ParsedEquation)
    return parsed.graph


def _corpus(
    layout: dict[str, dict[str, int]], citations: dict[str, list[str]] | None = None
) -> EquationCorpus:
    """``{paper: {section: count}}`` -> a corpus (all graphs alike: sampling ignores them)."""
    eq_ids: list[str] = []
    papers: list[str] = []
    sections: list[str] = []
    for paper, parts in layout.items():
        for section, count in parts.items():
            for _ in range(count):
                eq_ids.append(f"{paper}#{len(eq_ids)}")
                papers.append(paper)
                sections.append(section)
    graphs = [_graph()] * len(eq_ids)
    return EquationCorpus(graphs, eq_ids, papers, sections, citations=citations)


# p0..p3 have sections (one a singleton), p4 has an unknown section, p5 has one equation.
LAYOUT = {
    "p0": {"intro": 3, "method": 5},
    "p1": {"a": 2, "b": 1},
    "p2": {"s": 10},
    "p3": {"x": 4, "y": 4},
    "p4": {"": 6},
    "p5": {"only": 1},
}
CITATIONS = {"p0": ["p1", "p5"], "p2": ["p3"], "p4": ["p0"], "p3": ["nowhere"]}


@lru_cache(maxsize=1)
def _hepth() -> EquationCorpus:
    return EquationCorpus.from_records(iter_hepth(bundled_sample_lines()))


def test_positives_share_section_paper_or_citation() -> None:
    corpus = _corpus(LAYOUT, CITATIONS)
    neighbours = corpus.citation_neighbours()
    triplets = TripletSampler(corpus, seed=1).sample_arrays(N)
    assert len(triplets) == N
    assert (triplets.anchors != triplets.positives).all()
    anchor_paper = corpus.eq_paper[triplets.anchors]
    positive_paper = corpus.eq_paper[triplets.positives]
    for code, kind in enumerate(KINDS):
        chosen = triplets.kinds == code
        assert chosen.any(), kind
        a, p = triplets.anchors[chosen], triplets.positives[chosen]
        if kind == "section":
            assert (corpus.eq_section[a] == corpus.eq_section[p]).all()
            assert all(corpus.section_keys[s][1] for s in corpus.eq_section[a])
        elif kind == "paper":
            assert (anchor_paper[chosen] == positive_paper[chosen]).all()
        else:
            for x, y in zip(anchor_paper[chosen], positive_paper[chosen], strict=True):
                assert y in neighbours[x]


def test_anchors_uniform_over_papers_with_two_equations_then_over_equations() -> None:
    corpus = _corpus(LAYOUT, CITATIONS)
    triplets = TripletSampler(corpus, {"paper": 1.0}, seed=2).sample_arrays(N)
    papers = corpus.eq_paper[triplets.anchors]
    assert 5 not in papers  # p5 has a single equation: never an anchor
    freq = np.bincount(papers, minlength=6)[:5] / N
    assert np.allclose(freq, 0.2, atol=0.015)
    # within p2 (10 equations) each equation is an anchor equally often
    in_p2 = triplets.anchors[papers == 2]
    counts = np.bincount(in_p2 - corpus.paper_equations(2)[0], minlength=10) / in_p2.size
    assert np.allclose(counts, 0.1, atol=0.02)


def test_same_paper_positive_is_uniform_over_the_other_equations() -> None:
    corpus = _corpus({"a": {"": 4}, "b": {"": 2}})
    triplets = TripletSampler(corpus, {"paper": 1.0}, seed=3).sample_arrays(N)
    first = triplets.anchors == 0
    counts = np.bincount(triplets.positives[first], minlength=4) / first.sum()
    assert counts[0] == 0
    assert np.allclose(counts[1:], 1 / 3, atol=0.03)


def test_negatives_are_uniform_over_all_papers() -> None:
    corpus = _corpus(LAYOUT, CITATIONS)
    triplets = TripletSampler(corpus, seed=4).sample_arrays(N)
    freq = np.bincount(corpus.eq_paper[triplets.negatives], minlength=6) / N
    assert np.allclose(freq, 1 / 6, atol=0.015)  # the one-equation paper p5 included
    # the seed does not exclude the anchor's own paper
    assert (corpus.eq_paper[triplets.negatives] == corpus.eq_paper[triplets.anchors]).any()
    in_p2 = triplets.negatives[corpus.eq_paper[triplets.negatives] == 2]
    counts = np.bincount(in_p2 - corpus.paper_equations(2)[0], minlength=10) / in_p2.size
    assert np.allclose(counts, 0.1, atol=0.02)


def test_mixture_sets_the_methods_when_all_are_possible() -> None:
    layout = {f"p{i}": {"s1": 3, "s2": 3} for i in range(6)}
    citations = {f"p{i}": [f"p{(i + 1) % 6}"] for i in range(6)}
    corpus = _corpus(layout, citations)
    mixture = {"section": 1.0, "paper": 1.0, "citation": 2.0}
    counts = TripletSampler(corpus, mixture, seed=5).sample_arrays(N).kind_counts()
    assert counts["section"] / N == pytest.approx(0.25, abs=0.015)
    assert counts["paper"] / N == pytest.approx(0.25, abs=0.015)
    assert counts["citation"] / N == pytest.approx(0.5, abs=0.015)


def test_failed_methods_jump_back_to_a_new_anchor() -> None:
    corpus = _corpus(LAYOUT, {"p0": ["p1"], "p2": ["p3"]})  # p4 has no citation edge
    triplets = TripletSampler(corpus, {"citation": 1.0}, seed=6).sample_arrays(N)
    assert triplets.kind_counts() == {"section": 0, "paper": 0, "citation": N}
    papers = corpus.eq_paper[triplets.anchors]
    freq = np.bincount(papers, minlength=6) / N
    assert freq[4] == 0
    assert freq[5] == 0
    assert np.allclose(freq[:4], 0.25, atol=0.015)  # jumping back redraws the paper uniformly
    # section method: the singleton section "b" of p1 never gives a same-section anchor
    triplets = TripletSampler(corpus, {"section": 1.0}, seed=6).sample_arrays(5000)
    b_members = [i for i, s in enumerate(corpus.sections) if s == "b"]
    assert not np.isin(triplets.anchors[triplets.kinds == 0], b_members).any()


def test_unknown_sections_fall_back_to_the_same_paper() -> None:
    corpus = _hepth()
    triplets = TripletSampler(corpus, {"section": 1.0}, seed=7).sample_arrays(2000)
    assert triplets.kind_counts() == {"section": 0, "paper": 2000, "citation": 0}
    same = corpus.eq_paper[triplets.anchors] == corpus.eq_paper[triplets.positives]
    assert same.all()
    # no citations in the hep-th data: the default mixture gives same-paper positives only
    counts = TripletSampler(corpus, seed=7).sample_arrays(2000).kind_counts()
    assert counts == {"section": 0, "paper": 2000, "citation": 0}


def test_same_seed_same_triplets_other_seed_other_triplets() -> None:
    corpus = _corpus(LAYOUT, CITATIONS)
    first = TripletSampler(corpus, seed=11).sample(500)
    assert first == TripletSampler(corpus, seed=11).sample(500)
    assert first != TripletSampler(corpus, seed=12).sample(500)
    assert all(isinstance(i, int) for triplet in first for i in triplet)
    sampler = TripletSampler(corpus, seed=[3, 4])
    state = sampler.get_state()
    one = sampler.sample(50)
    sampler.set_state(state)
    assert sampler.sample(50) == one
    sampler.reseed([3, 4])
    assert sampler.sample(50) == one


def test_train_split_triplets_stay_inside_the_training_papers() -> None:
    train, test = _hepth().split_by_paper(0.25, seed=0)
    assert set(train.paper_ids).isdisjoint(test.paper_ids)
    triplets = TripletSampler(train, seed=0).sample_arrays(3000)
    used = np.concatenate([triplets.anchors, triplets.positives, triplets.negatives])
    assert used.min() >= 0
    assert used.max() < len(train)
    assert {train.papers[i] for i in used.tolist()} <= set(train.paper_ids)


def test_holdout_negatives_are_outside_the_anchors_related_papers() -> None:
    corpus = _corpus(LAYOUT, CITATIONS)
    neighbours = corpus.citation_neighbours()
    triplets = holdout_triplets(corpus, 5000, seed=8)
    assert len(triplets) == 5000
    for a, p, n in triplets:
        pa, pn = corpus.eq_paper[a], corpus.eq_paper[n]
        assert pn != pa
        assert pn not in neighbours[pa]
        assert p != a
    assert holdout_triplets(corpus, 100, seed=8) == holdout_triplets(corpus, 100, seed=8)


def test_impossible_settings_raise_sampler_error() -> None:
    corpus = _corpus(LAYOUT)
    with pytest.raises(SamplerError, match="unknown"):
        TripletSampler(corpus, {"chapter": 1.0})
    with pytest.raises(SamplerError):
        TripletSampler(corpus, {"paper": -1.0, "section": 2.0})
    with pytest.raises(SamplerError, match="no positive method"):
        TripletSampler(corpus, {"citation": 1.0})  # no citations at all
    with pytest.raises(SamplerError, match="two or more"):
        TripletSampler(_corpus({"a": {"": 1}, "b": {"": 1}}))
    with pytest.raises(SamplerError):
        TripletSampler(corpus, negatives="nearest")
    with pytest.raises(SamplerError):
        holdout_triplets(_corpus({"a": {"": 3}}), 10)
    with pytest.raises(SamplerError):
        TripletSampler(corpus).sample(-1)
    assert TripletSampler(corpus).sample(0) == []


def test_restricted_anchors_come_only_from_the_given_papers() -> None:
    corpus = _corpus(LAYOUT, CITATIONS)
    sampler = TripletSampler(corpus, seed=0)
    index = {p: i for i, p in enumerate(corpus.paper_ids)}
    # p5 has one equation: it cannot be an anchor, so one paper is left
    assert sampler.restrict_anchors(np.array([index["p2"], index["p5"]])) == 1
    triplets = sampler.sample_arrays(300)
    assert set(corpus.eq_paper[triplets.anchors].tolist()) == {index["p2"]}
    assert set(corpus.eq_paper[triplets.negatives].tolist()) != {index["p2"]}  # not restricted
    assert sampler.restrict_anchors(np.array([index["p5"]])) == 0  # nothing left: unrestricted
    anchors = sampler.sample_arrays(300).anchors
    assert len(set(corpus.eq_paper[anchors].tolist())) == 5
    assert sampler.restrict_anchors(None) == 5


def test_pairs_per_paper_draw_consecutive_anchors_of_one_paper() -> None:
    corpus = _corpus(LAYOUT, CITATIONS)
    sampler = TripletSampler(corpus, {"paper": 1.0}, seed=3)
    triplets = sampler.sample_arrays(400, per_paper=4)
    papers = corpus.eq_paper[triplets.anchors]
    assert len(triplets) == 400
    assert (corpus.eq_paper[triplets.positives] == papers).all()
    assert (papers.reshape(100, 4) == papers[::4, None]).all()  # 100 papers, 4 pairs each
    assert len(set(papers.tolist())) == 5  # every anchor paper still drawn
    # each pair keeps its own draw: the anchors of a paper's group are not all the same
    assert (triplets.anchors.reshape(100, 4) != triplets.anchors[::4, None]).any()
    one = sampler.sample_arrays(400)  # back to one paper per pair
    assert (
        corpus.eq_paper[one.anchors].reshape(100, 4) != corpus.eq_paper[one.anchors][::4, None]
    ).any()
    # with every method, an anchor whose drawn method finds nothing takes a same-paper positive
    mixed = TripletSampler(corpus, seed=4).sample_arrays(400, per_paper=4)
    groups = corpus.eq_paper[mixed.anchors].reshape(100, 4)
    assert (groups == groups[:, :1]).all()
    assert set(mixed.kinds.tolist()) == {0, 1, 2}
    with pytest.raises(SamplerError, match="per paper"):
        sampler.sample_arrays(10, per_paper=0)
