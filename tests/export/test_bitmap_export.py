"""Export of the bitmap CNN: ONNX parity with PyTorch on real rendered equations, the model card,
the runtime (render -> crop -> ONNX, refusals as data) and the shipped default model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from mathsearch.cli.main import main
from mathsearch.encoders.bitmap_data import BitmapCorpus
from mathsearch.encoders.bitmap_training import (
    BitmapTrainConfig,
    embed_crops,
    load_bitmap_model,
    train_bitmap,
)
from mathsearch.export.bitmap_onnx import check_bitmap_parity, export_bitmap_checkpoint
from mathsearch.export.errors import ExportError, ModelMismatchError
from mathsearch.indexer.bitmap import BitmapSettings
from mathsearch.runtime.bitmap_runtime import BitmapEmbedder, settings_hash
from mathsearch.runtime.embedders import EmbedRefusal, load_embedder
from mathsearch.runtime.model_card import load_card

SLICE = Path(__file__).resolve().parents[1] / "resources" / "export" / "hepth2003-every12th.txt"


@pytest.fixture(scope="module")
def corpus() -> BitmapCorpus:
    return BitmapCorpus.from_sources([str(SLICE)], "hepth", 40)


@pytest.fixture(scope="module")
def exported(corpus: BitmapCorpus, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bitmap")
    config = BitmapTrainConfig(epochs=1, steps_per_epoch=1, batch_size=4, progress=False)
    train_bitmap(config, corpus, corpus, out)
    model_path = out / "bitmap-test.onnx"
    export_bitmap_checkpoint(out / "checkpoint.pt", model_path, corpus.crops, version=1)
    return model_path


def test_card_and_parity(exported: Path, corpus: BitmapCorpus) -> None:
    card = load_card(exported)
    assert card.family == "bitmap" and card.vector_field == "vec_bitmap_v1"
    assert card.similarity == "dot" and card.embedding_dim == 64
    assert card.vocab_hash == settings_hash(BitmapSettings())
    assert card.inputs[0]["shape"] == ["B", 1, 32, 333]
    assert card.parity["passed"] and card.parity["equations"] == len(corpus)
    assert card.parity["max_abs_diff"] <= 1e-4
    assert "holdout_ranking" in card.metrics and "holdout_ranking_untrained" in card.metrics


def test_parity_fails_for_another_network(exported: Path, corpus: BitmapCorpus) -> None:
    model, _ = load_bitmap_model(exported.parent / "checkpoint.pt")
    with torch.no_grad():
        model.fc.bias.add_(1.0)
    report = check_bitmap_parity(model, exported, corpus.crops, raise_on_failure=False)
    assert not report.passed


def test_runtime_matches_torch_and_refuses_bad_items(exported: Path, corpus: BitmapCorpus) -> None:
    embedder = BitmapEmbedder(exported, device="cpu", threads=1)
    assert embedder.family == "bitmap" and embedder.dim == 64
    items = [{"latex": corpus.latex[0]}, {"latex": r"\undefinedmacro{x}"}, {"graph": {}}]
    items.append({"latex": corpus.latex[1]})
    out = embedder.embed(items)
    assert isinstance(out[1], EmbedRefusal) and out[1].reason == "unknown-macro"
    assert isinstance(out[2], EmbedRefusal) and out[2].reason == "no-latex"
    model, _ = load_bitmap_model(exported.parent / "checkpoint.pt")
    expected = embed_crops(model, corpus.crops[:2])
    for got, want in zip((out[0], out[3]), expected, strict=True):
        assert isinstance(got, np.ndarray) and got.dtype == np.float32
        assert np.linalg.norm(got) == pytest.approx(1.0, abs=1e-5)
        assert np.abs(got - want).max() < 1e-4


def test_runtime_refuses_other_render_settings(exported: Path) -> None:
    with pytest.raises(ModelMismatchError):
        BitmapEmbedder(exported, settings=BitmapSettings(fontsize=12.0))


def test_export_refuses_a_non_bitmap_file(tmp_path: Path, corpus: BitmapCorpus) -> None:
    bad = tmp_path / "x.pt"
    torch.save({"family": "bitmap", "format": "other"}, bad)
    with pytest.raises(ExportError):
        export_bitmap_checkpoint(bad, tmp_path / "x.onnx", corpus.crops)


def test_cli_export_routes_bitmap_checkpoints(exported: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "m.onnx"
    code = main(
        ["export", str(exported.parent / "checkpoint.pt"), "-o", str(out), "--parity-data",
         str(SLICE), "--format", "hepth", "--parity-equations", "12", "--cache-dir",
         str(tmp_path / "cache"), "--json"]
    )  # fmt: skip
    assert code == 0
    card = json.loads(capsys.readouterr().out)
    assert card["family"] == "bitmap" and card["parity"]["passed"]


def test_shipped_default_model_loads() -> None:
    embedder = load_embedder("bitmap", device="cpu")
    assert isinstance(embedder, BitmapEmbedder) and embedder.vector_field == "vec_bitmap_v2"
    evaluation = embedder.card.metrics["eval"]  # `mathsearch eval bitmap`, held-out papers
    trained, untrained = evaluation["trained"], evaluation["untrained"]
    assert trained["holdout_ranking"] < untrained["holdout_ranking"]
    assert trained["eval_accuracy"] > untrained["eval_accuracy"]
    (vector,) = embedder.embed([{"latex": r"\int_0^\infty e^{-x^2} dx = \frac{\sqrt{\pi}}{2}"}])
    assert isinstance(vector, np.ndarray) and vector.shape == (64,)


def test_large_net_exports_with_its_batch_norm(corpus: BitmapCorpus, tmp_path: Path) -> None:
    from mathsearch.encoders.bitmap_cnn import BitmapCNN, BitmapCNNConfig
    from mathsearch.export.bitmap_onnx import export_bitmap

    torch.manual_seed(0)
    model = BitmapCNN(BitmapCNNConfig(net="large"))
    assert model.batch_norm is not None
    with torch.no_grad():  # non-trivial running statistics, as after training
        model.batch_norm.running_mean.uniform_(-0.5, 0.5)
        model.batch_norm.running_var.uniform_(0.5, 2.0)
    model.freeze_batch_norm()
    path = export_bitmap(model, tmp_path / "large.onnx")
    report = check_bitmap_parity(model, path, corpus.crops[:16], batch_size=5)
    assert report.passed and report.batches == 4


def test_out_norm_net_exports_with_its_running_statistics(
    corpus: BitmapCorpus, tmp_path: Path
) -> None:
    from mathsearch.encoders.bitmap_cnn import BitmapCNN, BitmapCNNConfig
    from mathsearch.export.bitmap_onnx import export_bitmap

    torch.manual_seed(0)
    model = BitmapCNN(BitmapCNNConfig(net="small", out_norm=True)).train()
    with torch.no_grad():  # running statistics from real crops, as after training
        for start in range(0, 48, 16):
            model(torch.from_numpy(corpus.crops[start : start + 16]).float().unsqueeze(1))
    assert model.out_norm is not None and float(model.out_norm.running_var.mean()) != 1.0
    path = export_bitmap(model.eval(), tmp_path / "centred.onnx")
    report = check_bitmap_parity(model, path, corpus.crops[:16], batch_size=5)
    assert report.passed and report.batches == 4


def test_bench_embed_times_rendering_and_the_network(exported: Path, capsys) -> None:
    from mathsearch.export.bench_embed_bitmap import bench_bitmap_embed

    latex = [r"x^2 + y^2 = z^2", r"\frac{a}{b} + \sqrt{c}", r"\mycustommacro{x}", r"e^{i\pi}"]
    report = bench_bitmap_embed(exported, latex, [1, 2], repeat=1, threads=1)
    assert (report["equations"], report["rendered"]) == (4, 3)
    assert report["refused"] == {"unknown-macro": 1}
    assert set(report["network_eq_per_s"]) == {"1", "2"} and report["render_eq_per_s"] > 0
    assert 0.0 < report["render_share"] < 1.0
    assert report["end_to_end_eq_per_s"] < min(report["network_eq_per_s"].values())
    code = main(["bench", "embed", str(SLICE), "--format", "hepth", "--onnx", str(exported),
                 "--equations", "6", "--batch-sizes", "4", "--repeat", "1", "--json"])  # fmt: skip
    assert code == 0
    assert json.loads(capsys.readouterr().out)["equations"] == 6
