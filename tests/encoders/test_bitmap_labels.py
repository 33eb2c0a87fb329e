"""Weak labels, per-step sampling and the seed's metrics of the bitmap CNN (numpy parts)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mathsearch.encoders.bitmap_eval import (
    holdout_metrics,
    holdout_triplets,
    labelled_metrics,
    siamese_hinge,
    triplet_hinge,
)
from mathsearch.encoders.bitmap_labels import LabelVocabulary, keyword_labels, latex_symbols
from mathsearch.encoders.bitmap_sampler import (
    SamplerError,
    context_anchors,
    paper_members,
    sample_labels,
    sample_pairs,
    sample_triplets,
)
from mathsearch.indexer.extract import extract

TEX = Path(__file__).resolve().parents[1] / "resources" / "indexer" / "hep-th0301999.tex"


def test_symbols_of_latex_skip_layout() -> None:
    symbols = latex_symbols(
        r"\Phi(x,y)=\sum_{k=-\infty}^\infty \phi_k(x)\, e^{iky/R} \label{eq:kk}"
    )
    assert {r"\Phi", r"\sum", r"\infty", r"\phi", "x", "y", "k", "R", "=", "("} <= symbols
    assert not {r"\label", r"\,", "_", "^", "{", "eq"} & symbols


def test_keywords_of_tex_records_come_from_context() -> None:
    records = [r for r in extract([str(TEX)], "tex") if hasattr(r, "context")]
    labels = keyword_labels([r.doc_id for r in records], [r.context for r in records])
    assert labels and all(labels[0] == other for other in labels)  # one paper, one keyword set
    assert "scalar field" in labels[0]
    assert keyword_labels(["p"], [""]) == [set()]  # hep-th record files: no text, no keywords


def test_label_vocabulary() -> None:
    vocab = LabelVocabulary.build([{"a", "b"}, {"a", "c"}, {"b"}], min_count=2)
    assert vocab.labels == ["a", "b"]
    assert [x.tolist() for x in vocab.encode([{"b", "c"}, set()])] == [[1], []]


def test_context_sampling_respects_papers() -> None:
    eq_paper = np.array([0, 0, 0, 1, 1, 2])
    members = paper_members(eq_paper)
    anchors = context_anchors(eq_paper)
    assert anchors.tolist() == [0, 1, 2, 3, 4]  # paper 2 has a single equation
    rng = np.random.default_rng(0)
    batch = rng.choice(anchors, 200)
    pos, neg = sample_triplets(rng, batch, eq_paper, members)
    assert np.all(eq_paper[pos] == eq_paper[batch]) and np.all(pos != batch)
    assert np.all(eq_paper[neg] != eq_paper[batch])
    other, y = sample_pairs(rng, batch, eq_paper, members)
    assert np.all((eq_paper[other] == eq_paper[batch]) == (y == 1))
    assert 0.3 < np.mean(y == 1) < 0.7
    with pytest.raises(SamplerError):
        context_anchors(np.array([0, 0, 0]))


def test_label_sampling_half_correct() -> None:
    label_ids = [np.array([0, 2]), np.array([1])]
    rng = np.random.default_rng(0)
    anchors = rng.integers(0, 2, 400)
    labels, z = sample_labels(rng, anchors, label_ids, num_labels=4)
    for a, label, target in zip(anchors, labels, z, strict=True):
        assert (label in label_ids[a]) == bool(target)
    assert 0.4 < z.mean() < 0.6


def test_metrics_on_perfect_and_reversed_embeddings() -> None:
    good = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    labels = ["a", "a", "b", "b"]
    metrics = labelled_metrics(good, labels)
    assert metrics["eval_accuracy"] == 1.0 and metrics["eval_ranking"] == 0.0
    assert metrics["eval_triples"] == 0.0  # 1 - 1 + max(0, 0)
    # pairs: (a,a) +1 sim 1 -> 0; cross -1 sim 0 -> 1; four of six pairs are cross
    assert metrics["eval_siamese"] == pytest.approx(4 / 6)
    bad = labelled_metrics(good, ["a", "b", "a", "b"])
    assert bad["eval_ranking"] == 0.75 and bad["eval_accuracy"] == 0.0  # ties count one half
    assert triplet_hinge([0.2], [0.1], [0.9]).tolist() == pytest.approx([1.7])
    assert siamese_hinge([-0.5], [-1]).tolist() == [0.5]


def test_holdout_metrics_use_the_paper_label() -> None:
    eq_paper = np.array([0, 0, 1, 1, 2, 2])
    triplets = holdout_triplets(eq_paper, 50, seed=1)
    emb = np.eye(3)[eq_paper]  # one direction per paper: perfect
    metrics = holdout_metrics(emb, triplets)
    assert metrics["holdout_ranking"] == 0.0 and metrics["holdout_triples"] == 0.0
    assert metrics["holdout_siamese"] == pytest.approx(0.5)  # negatives at 0 sim: 1 each
