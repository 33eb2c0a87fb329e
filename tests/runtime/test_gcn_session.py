"""mathsearch.runtime.gcn_session.GcnSession and `mathsearch export`: a trained checkpoint end to
end,
torch-free."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest

from mathsearch.cli.main import main
from mathsearch.core.machine import describe_cpu
from mathsearch.encoders.corpus import EquationCorpus
from mathsearch.encoders.gcn import GCNConfig
from mathsearch.encoders.training import TrainConfig, train
from mathsearch.export.errors import ExportError, ModelCardError, ModelMismatchError
from mathsearch.export.export_model import export_checkpoint
from mathsearch.indexer.hepth import bundled_sample_lines, iter_hepth
from mathsearch.indexer.vocabulary import default_vocabulary
from mathsearch.runtime.gcn_session import GcnSession
from mathsearch.runtime.model_card import load_card
from mathsearch.runtime.settings import (
    CPU_MAX_GRAPHS,
    DEFAULT_MODEL_PATH,
    RuntimeSettings,
    SettingsError,
)
from tests.export.conftest import PARITY_FILE, real_graphs

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small graph CNN trained for a few steps on the bundled real sample."""
    corpus = EquationCorpus.from_records(iter_hepth(bundled_sample_lines()))
    train_corpus, test_corpus = corpus.split_by_paper(test_fraction=0.25, seed=0)
    out = tmp_path_factory.mktemp("run")
    config = TrainConfig(
        epochs=1,
        steps_per_epoch=3,
        batch_size=8,
        lr=3e-3,
        model=GCNConfig(hidden=32),
        checkpoint_dir=str(out),
        eval_triplets=300,
        progress=False,
        device="cpu",
    )
    result = train(config, train_corpus, test_corpus)
    assert result.checkpoint is not None
    return result.checkpoint


@pytest.fixture(scope="module")
def model_path(checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("model") / "gcn-v7.onnx"
    # After 3 steps the soft normalisation's running averages are still far from the batches'
    # norms, so this model's outputs are large and float32 summation-order noise of the PyTorch
    # side alone reaches 1e-4; the 1e-4 check of a full-size model is in test_gcn_onnx.
    card, parity = export_checkpoint(
        checkpoint, out, list(real_graphs()), version=7, tolerance=1e-3
    )
    assert parity.passed and parity.equations >= 1000
    assert card.name == "gcn-v7" and card.vector_field == "vec_gcn_v7"
    return out


def test_card_describes_the_model(model_path: Path) -> None:
    card = load_card(model_path)
    assert card.family == "gcn" and card.embedding_dim == 64 and card.similarity == "dot"
    assert card.vocab_hash == default_vocabulary().content_hash
    assert card.vocab_sizes == [32, 32, 192]
    assert (card.opset, card.ir_version) == (17, 8)
    assert [i["name"] for i in card.inputs][:3] == ["tag", "attr", "char"]
    assert card.training["step"] == 3 and card.training["config"]["model"]["hidden"] == 32
    assert 0.0 <= card.metrics["holdout_ranking"] <= 1.0
    assert "holdout_ranking_untrained" in card.metrics
    assert card.parity["max_abs_diff"] <= 1e-3 and card.parity["equations"] == len(real_graphs())
    assert card.created.endswith("+00:00") and "onnx" in card.software


def test_encode_shapes_order_and_chunking(model_path: Path) -> None:
    graphs = list(real_graphs()[:60])
    encoder = GcnSession(model_path, device="cpu")
    assert encoder.dim == 64 and encoder.providers == ["CPUExecutionProvider"]
    full = encoder.encode(graphs)
    # the CPU default: calls of CPU_MAX_GRAPHS equations (the node states stay in the cache)
    assert encoder.max_graphs == CPU_MAX_GRAPHS == 32
    assert [stop - start for start, stop in encoder.chunks(graphs)] == [32, 28]
    assert full.shape == (60, 64) and full.dtype == np.float32
    assert np.linalg.norm(full, axis=1).min() > 0
    small = GcnSession(
        model_path, device="cpu", settings=RuntimeSettings(max_graphs=7, max_nodes=400)
    )
    assert len(list(small.chunks(graphs))) > 60 // 7
    assert np.abs(small.encode(graphs) - full).max() <= 1e-5
    whole = GcnSession(model_path, device="cpu", settings=RuntimeSettings(max_graphs=1024))
    assert len(list(whole.chunks(graphs))) == 1
    assert np.abs(whole.encode(graphs) - full).max() <= 1e-5
    reversed_out = encoder.encode(graphs[::-1])
    assert np.abs(reversed_out[::-1] - full).max() <= 1e-5
    assert encoder.encode([]).shape == (0, 64)


def test_refuses_another_vocabulary(model_path: Path, tmp_path: Path) -> None:
    with pytest.raises(ModelMismatchError, match="trained on vocabulary"):
        GcnSession(model_path, vocab_hash="0" * 64)
    encoder = GcnSession(model_path)
    foreign = replace(real_graphs()[0], vocab_hash="1" * 64)
    with pytest.raises(ModelMismatchError, match="vocabulary"):
        encoder.encode([real_graphs()[1], foreign])
    with pytest.raises(ModelCardError, match="does not exist"):
        GcnSession(tmp_path / "missing.onnx")


def test_runtime_imports_no_torch(model_path: Path) -> None:
    code = (
        "import sys, json\n"
        "from mathsearch.runtime import GcnSession\n"
        "from mathsearch.indexer.parse import Featuriser\n"
        "f = Featuriser()\n"
        "graphs = [f.parse_latex(t).graph for t in (r'\\frac{a}{b}', r'x^2+y^2', r'\\int f')]\n"
        f"v = GcnSession({str(model_path)!r}).encode(graphs)\n"
        "print(json.dumps({'shape': list(v.shape), 'torch': 'torch' in sys.modules}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"shape": [3, 64], "torch": False}


def test_settings_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MATHSEARCH_MODEL", "/models/x.onnx")
    monkeypatch.setenv("MATHSEARCH_EMBED_THREADS", "3")
    monkeypatch.setenv("MATHSEARCH_EMBED_DEVICE", "CPU")
    settings = RuntimeSettings.from_env()
    assert (settings.model, settings.threads, settings.device) == (Path("/models/x.onnx"), 3, "cpu")
    assert settings.query_threads == 1  # the query encoder's own default
    monkeypatch.setenv("MATHSEARCH_QUERY_THREADS", "2")
    assert RuntimeSettings.from_env().query_threads == 2
    assert RuntimeSettings.from_env().max_graphs == 0  # by device
    monkeypatch.setenv("MATHSEARCH_EMBED_MAX_GRAPHS", "-1")
    with pytest.raises(SettingsError, match="MATHSEARCH_EMBED_MAX_GRAPHS"):
        RuntimeSettings.from_env()
    monkeypatch.setenv("MATHSEARCH_EMBED_MAX_GRAPHS", "8")
    assert RuntimeSettings.from_env().max_graphs == 8
    monkeypatch.setenv("MATHSEARCH_EMBED_DEVICE", "tpu")
    with pytest.raises(SettingsError, match="device"):
        RuntimeSettings.from_env()


def test_cli_export(checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "cli.onnx"
    argv = ["export", str(checkpoint), "-o", str(out), "--parity-data", str(PARITY_FILE)]
    argv += ["--tolerance", "1e-3"]
    assert main([*argv, "--format", "hepth", "--version", "2", "--json"]) == 0
    card = json.loads(capsys.readouterr().out)
    assert card["name"] == "gcn-v2" and card["vector_field"] == "vec_gcn_v2"
    assert card["parity"]["equations"] == 1000 and card["parity"]["passed"]
    assert load_card(out).sha256 == card["sha256"]
    assert main(["export", str(tmp_path / "none.pt"), "-o", str(out)]) == 1
    assert "does not exist" in capsys.readouterr().err
    too_many = [*argv, "--format", "hepth", "--parity-equations", "5000"]
    assert main(too_many) == 1
    assert "fewer than the 5000" in capsys.readouterr().err


def test_cli_bench_embed(capsys: pytest.CaptureFixture) -> None:
    argv = ["bench", "embed", str(PARITY_FILE), "--format", "hepth", "--equations", "24"]
    assert main([*argv, "--batch-sizes", "1,8", "--repeat", "1", "--no-progress", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["equations"] == 24
    assert report["cpu"]["summary"] == describe_cpu().summary()  # the machine beside its figures
    assert [row["batch_size"] for row in report["results"]] == [1, 8]
    for row in report["results"]:
        assert row["onnxruntime"]["eq_per_s"] > 0 and row["torch-eager"]["eq_per_s"] > 0
        assert row["ratio"] > 0
    assert main([*argv, "--batch-sizes", "0"]) == 1


def test_cli_bench_embed_of_model_files(model_path: Path, capsys: pytest.CaptureFixture) -> None:
    shipped = ROOT / "export" / "models" / "gcn-v7.onnx"
    argv = ["bench", "embed", str(PARITY_FILE), "--format", "hepth", "--equations", "40"]
    argv += ["--onnx", str(shipped), "--onnx", str(model_path), "--batch-sizes", "1,16"]
    assert main([*argv, "--repeat", "2", "--no-progress", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["equations"] == 40 and report["files"] == [str(shipped), str(model_path)]
    for row in report["results"]:
        first, second = row["models"]
        assert (first["model"], second["model"]) == ("gcn-v7", "gcn-v7")
        assert (first["file"], second["file"]) == (str(shipped), str(model_path))
        assert first["ratio_to_first"] == 1.0 and second["ratio_to_first"] > 0
        assert second["eq_per_s"] <= second["model_eq_per_s"]  # end to end includes packing
    assert main([*argv, "--repeat", "1", "--no-progress"]) == 0
    table = capsys.readouterr().out
    assert "vs first" in table and f"cpu: {describe_cpu().summary()}" in table
    # both cards read gcn-v7, so each row is named by its file
    assert str(shipped) in table and str(model_path) in table
    assert main([*argv[:-4], "--onnx", str(model_path.with_name("none.onnx"))]) == 1
    assert "does not exist" in capsys.readouterr().err
    assert main([*argv[:5], "--equations", "100000", "--onnx", str(shipped)]) == 1
    assert "fewer than the 100000" in capsys.readouterr().err


def test_bench_embed_of_model_files_imports_no_torch(model_path: Path) -> None:
    code = (
        "import sys; from mathsearch.cli.main import main; "
        f"rc = main(['bench', 'embed', {str(PARITY_FILE)!r}, '--format', 'hepth', '--equations', "
        f"'8', '--batch-sizes', '8', '--repeat', '1', '--no-progress', '--onnx', "
        f"{str(model_path)!r}]); assert rc == 0; assert 'torch' not in sys.modules, 'torch'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, capture_output=True)


def test_shipped_default_model() -> None:
    card = load_card(DEFAULT_MODEL_PATH)  # also checks the file against the card's digest
    assert card.vocab_hash == default_vocabulary().content_hash
    assert card.parity["passed"] and card.parity["equations"] >= 1000
    assert card.metrics["holdout_ranking"] > card.metrics["holdout_ranking_untrained"]
    encoder = GcnSession()
    assert encoder.path == DEFAULT_MODEL_PATH
    vectors = encoder.encode(list(real_graphs()[:8]))
    assert vectors.shape == (8, card.embedding_dim)


def test_int8_variant(model_path: Path) -> None:
    from mathsearch.export.quantize import int8_path, quantize_int8

    graphs = list(real_graphs()[:200])
    with pytest.raises(ExportError, match="nothing to quantise"):  # a 32-wide model
        quantize_int8(model_path, graphs)
    card, diff = quantize_int8(model_path, graphs, min_inner=16)
    path = int8_path(model_path)
    assert path.name == "gcn-v7.int8.onnx"
    ops = {node.op_type for node in onnx.load(path).graph.node}
    assert "MatMul" not in ops and ops & {"DynamicQuantizeMatMul", "MatMulInteger"}
    assert card.precision == "int8" and card.vector_field == "vec_gcn_v7_int8"
    assert load_card(path) == card and card.parity["max_abs_diff"] == diff > 0
    assert card.parity["products"] == 4 and card.parity["min_cosine"] > 0.99
    vectors = GcnSession(path).encode(graphs)
    reference = GcnSession(model_path).encode(graphs)
    assert vectors.shape == reference.shape
    # it scores pairs like the float32 model: the inner products of the two correlate closely
    scores = (vectors @ vectors.T).ravel()
    expected = (reference @ reference.T).ravel()
    assert np.corrcoef(scores, expected)[0, 1] > 0.95
