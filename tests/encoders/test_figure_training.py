"""Weak supervision, training and evaluation of the figure encoder on real TeX Live figures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from mathsearch.encoders.figure_data import CITING, SAME, FigureCorpus, ssim
from mathsearch.encoders.figure_encoder import FigureEncoder, FigureEncoderConfig
from mathsearch.encoders.figure_eval import evaluate_vectors, tfidf_vectors
from mathsearch.encoders.figure_training import (
    FigureTrainConfig,
    corpus_vectors,
    load_figure_checkpoint,
    save_figure_checkpoint,
    train_figure_encoder,
)
from mathsearch.indexer.figure_features import FigureVocabulary, figure_text

FIGURES = Path(__file__).resolve().parents[1] / "resources" / "indexer" / "figures"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> FigureCorpus:
    records = FigureCorpus.extract([FIGURES], min_words=1)
    vocab = FigureVocabulary.build([figure_text(r.to_item()) for r in records], image_size=24)
    return FigureCorpus.build(records, vocab, tmp_path_factory.mktemp("cache"))


def test_weak_supervision_labels(corpus: FigureCorpus) -> None:
    assert frozenset(("psfrag", "graphics")) in corpus.cites
    index = {a: corpus.articles.index(a) for a in ("psfrag", "graphics", "mnras")}
    second = corpus.articles.index("psfrag", index["psfrag"] + 1)
    got = corpus.relation(
        np.array([index["psfrag"], index["psfrag"], index["psfrag"]]),
        np.array([second, index["graphics"], index["mnras"]]),
    )
    assert got.tolist() == pytest.approx([SAME, CITING, 0.0])
    pairs = corpus.pairs(np.arange(len(corpus)), seed=0)
    labels = corpus.relation(pairs[:, 0], pairs[:, 1])
    assert (labels > 0).sum() == (labels == 0).sum()


def test_ssim() -> None:
    rng = np.random.default_rng(0)
    image = rng.random((1, 32, 32))
    assert ssim(image, image) == pytest.approx(1.0)
    assert ssim(image, rng.random((1, 32, 32))) < 0.3


def test_training_lowers_the_loss_and_beats_untrained(corpus: FigureCorpus, tmp_path: Path) -> None:
    torch.manual_seed(0)
    rows = np.arange(len(corpus))
    config = FigureTrainConfig(epochs=8, batch_size=16, lr=0.01, progress=False)
    config_model = FigureEncoderConfig(corpus.vocabulary.size, image_size=24)
    untrained = corpus_vectors(FigureEncoder(config_model), corpus.features)
    model, history = train_figure_encoder(corpus, rows, config)
    text = history["losses"]["text"]
    assert text[-1] < text[0]
    fusion = history["losses"]["fusion"]
    assert fusion[-1] < fusion[0]

    def separation(vectors: np.ndarray) -> float:
        pairs = corpus.pairs(rows, seed=1)
        labels = corpus.relation(pairs[:, 0], pairs[:, 1])
        dots = (vectors[pairs[:, 0]] * vectors[pairs[:, 1]]).sum(1)
        return float(np.mean((dots - labels) ** 2))

    trained = corpus_vectors(model, corpus.features)
    assert separation(trained) < separation(untrained)
    path = save_figure_checkpoint(tmp_path / "c.pt", model, corpus.vocabulary, split={"seed": 0})
    again, vocab, meta = load_figure_checkpoint(path)
    assert meta["family"] == "figure" and vocab.content_hash == corpus.vocabulary.content_hash
    assert np.allclose(corpus_vectors(again, corpus.features), trained, atol=1e-6)


def test_info_nce_training_lowers_the_loss_and_separates_related_figures(
    corpus: FigureCorpus,
) -> None:
    """``loss="info-nce"``: the text and fusion losses fall, and related figures end closer than
    unrelated ones, more so than before training."""
    torch.manual_seed(0)
    rows = np.arange(len(corpus))
    config = FigureTrainConfig(epochs=8, batch_size=16, lr=0.01, loss="info-nce", progress=False)
    untrained = corpus_vectors(
        FigureEncoder(FigureEncoderConfig(corpus.vocabulary.size, image_size=24)), corpus.features
    )
    model, history = train_figure_encoder(corpus, rows, config)
    for stage in ("text", "fusion"):
        losses = history["losses"][stage]
        assert losses[-1] < losses[0], (stage, losses)
    pairs = corpus.pairs(rows, seed=1)
    related = corpus.relation(pairs[:, 0], pairs[:, 1]) > 0

    def gap(vectors: np.ndarray) -> float:
        unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        cos = (unit[pairs[:, 0]] * unit[pairs[:, 1]]).sum(1)
        return float(cos[related].mean() - cos[~related].mean())

    assert gap(corpus_vectors(model, corpus.features)) > gap(untrained) + 0.1


def test_evaluation_reports_the_seed_metrics(corpus: FigureCorpus) -> None:
    tfidf = tfidf_vectors(corpus)
    assert tfidf.shape[0] == len(corpus)
    assert np.allclose(np.linalg.norm(tfidf, axis=1)[np.linalg.norm(tfidf, axis=1) > 0], 1)
    rows = np.arange(len(corpus))
    report = evaluate_vectors({"tfidf-copy": tfidf}, corpus, rows, rows)
    same = report["similarity"]["tfidf"]
    assert 0 <= same["accuracy"] <= 1 and same["threshold"] in [
        round(0.1 * k, 1) for k in range(1, 10)
    ]
    assert report["recommendation"]["tfidf"]["p@5"] > 0
    assert set(report["recommendation"]) == {"tfidf", "tfidf+tfidf-copy"}
