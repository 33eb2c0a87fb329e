"""Export of a figure checkpoint: `mathsearch export` routing, ONNX parity, card, runtime."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from mathsearch.cli.main import main
from mathsearch.encoders.figure_data import FigureCorpus
from mathsearch.encoders.figure_training import (
    FigureTrainConfig,
    corpus_vectors,
    save_figure_checkpoint,
    train_figure_encoder,
)
from mathsearch.export.errors import ModelMismatchError
from mathsearch.indexer.figure_features import FigureVocabulary, figure_text
from mathsearch.runtime.embedders import EmbedRefusal, load_embedder
from mathsearch.runtime.model_card import load_card

FIGURES = Path(__file__).resolve().parents[1] / "resources" / "indexer" / "figures"


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, FigureCorpus, np.ndarray]:
    torch.manual_seed(0)
    out = tmp_path_factory.mktemp("figure-export")
    records = FigureCorpus.extract([FIGURES], min_words=1)
    vocab = FigureVocabulary.build([figure_text(r.to_item()) for r in records], image_size=24)
    corpus = FigureCorpus.build(records, vocab, out / "cache")
    config = FigureTrainConfig(epochs=1, batch_size=16, progress=False)
    model, _ = train_figure_encoder(corpus, np.arange(len(corpus)), config)
    checkpoint = save_figure_checkpoint(out / "checkpoint.pt", model, vocab, split={"seed": 0})
    onnx = out / "figure-test.onnx"
    code = main(["export", str(checkpoint), "-o", str(onnx), "--parity-data", str(FIGURES)])
    assert code == 0
    return onnx, corpus, corpus_vectors(model, corpus.features)


def test_card_and_parity(exported: tuple[Path, FigureCorpus, np.ndarray]) -> None:
    onnx, corpus, _ = exported
    card = load_card(onnx)
    assert card.family == "figure" and card.vector_field == "vec_figure_v1"
    assert card.vocab_hash == corpus.vocabulary.content_hash and card.space_type == "innerproduct"
    assert card.parity["passed"] and card.parity["max_abs_diff"] <= 1e-4
    assert card.parity["equations"] == len(FigureCorpus.extract([FIGURES], min_words=1))
    assert onnx.with_name("figure-test.vocab.json").is_file()


def test_runtime_matches_pytorch_and_refuses_per_item(
    exported: tuple[Path, FigureCorpus, np.ndarray],
) -> None:
    onnx, corpus, torch_vectors = exported
    embedder = load_embedder(onnx, device="cpu")
    assert embedder.family == "figure" and embedder.dim == 50
    items = [r.to_item() for r in corpus.records[:3]]
    bad = [{"caption": "", "mentions": [], "image": None}, "not a figure"]
    out = embedder.embed(items + bad)  # type: ignore[list-item]
    for n in range(3):
        assert isinstance(out[n], np.ndarray)
        assert np.allclose(out[n], torch_vectors[n], atol=1e-4)
    assert isinstance(out[3], EmbedRefusal) and out[3].reason == "empty-figure"
    assert isinstance(out[4], EmbedRefusal) and out[4].reason == "invalid-figure"


def test_runtime_refuses_another_vocabulary(
    exported: tuple[Path, FigureCorpus, np.ndarray], tmp_path: Path
) -> None:
    onnx, _, _ = exported
    for suffix in (".onnx", ".card.json", ".vocab.json"):
        shutil.copy(onnx.with_name("figure-test" + suffix), tmp_path / ("m" + suffix))
    vocab = json.loads((tmp_path / "m.vocab.json").read_text())
    vocab["words"] = vocab["words"][::-1]
    (tmp_path / "m.vocab.json").write_text(json.dumps(vocab))
    with pytest.raises(ModelMismatchError):
        load_embedder(tmp_path / "m.onnx", device="cpu")


def test_export_refuses_a_bad_checkpoint(tmp_path: Path) -> None:
    bad = tmp_path / "bad.pt"
    torch.save({"family": "figure", "format": "other"}, bad)
    assert main(["export", str(bad), "-o", str(tmp_path / "x.onnx")]) == 1


def test_an_info_nce_checkpoint_gets_a_cosine_card(
    exported: tuple[Path, FigureCorpus, np.ndarray], tmp_path: Path
) -> None:
    """InfoNCE trains the cosine: its card says so, and the index's kNN space follows."""
    onnx, corpus, _ = exported
    model = load_embedder(onnx, device="cpu")
    assert model.card.similarity == "dot"
    torch.manual_seed(0)
    config = FigureTrainConfig(epochs=1, batch_size=16, loss="info-nce", progress=False)
    trained, _ = train_figure_encoder(corpus, np.arange(len(corpus)), config)
    checkpoint = save_figure_checkpoint(
        tmp_path / "c.pt", trained, corpus.vocabulary, train_config=config.to_dict()
    )
    out = tmp_path / "figure-nce.onnx"
    assert main(["export", str(checkpoint), "-o", str(out), "--parity-data", str(FIGURES)]) == 0
    card = load_card(out)
    assert card.similarity == "cosine" and card.space_type == "cosinesimil"
    assert "InfoNCE" in card.description
