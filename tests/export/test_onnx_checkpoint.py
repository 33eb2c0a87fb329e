"""mathsearch.export.onnx_checkpoint: shipped graph-CNN files read back into PyTorch modules and
checkpoints, checked against the files on real equations."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from mathsearch.encoders.checkpoints import load_model
from mathsearch.encoders.gcn import GCNConfig, GraphCNN
from mathsearch.encoders.gcn_ensemble import GCNEnsemble
from mathsearch.encoders.graph_data import collate
from mathsearch.export.errors import ExportError, ParityError
from mathsearch.export.gcn_onnx import export_gcn
from mathsearch.export.onnx_checkpoint import checkpoint_from_onnx, model_from_onnx
from mathsearch.runtime.embedders import MODELS_DIR
from mathsearch.runtime.gcn_session import GcnSession, open_session
from mathsearch.runtime.graph_batch import pack_graphs
from mathsearch.runtime.model_card import ModelCard, file_sha256
from tests.export.conftest import real_graphs


def _graphs(count: int = 200) -> list:
    return list(real_graphs()[:count])


def _card_for(path: Path, config: GCNConfig, **training: object) -> None:
    ModelCard(
        name="gcn-test",
        family="gcn",
        version=99,
        description="",
        embedding_dim=config.out_dim,
        similarity="cosine" if config.normalisation == "l2" else "dot",
        vocab_hash="0" * 64,
        vocab_sizes=list(config.sizes),
        opset=17,
        ir_version=8,
        inputs=[],
        outputs=[],
        sha256=file_sha256(path),
        training={"config": {"model": config.to_dict(), "split": {"seed": 0}}, **training},
    ).write(path)


def test_every_weight_of_a_seed_size_model_comes_back(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = GraphCNN(GCNConfig(out_dim=64, normalisation="l2", pooling="gated")).eval()
    with torch.no_grad():  # running statistics and alpha away from their initial values
        model.alpha.fill_(0.7)
        for norm in model.modules():
            if isinstance(norm, torch.nn.BatchNorm1d):
                norm.running_mean.uniform_(-1, 1)
                norm.running_var.uniform_(0.5, 2)
    path = export_gcn(model, tmp_path / "m.onnx")
    _card_for(path, model.config)
    rebuilt, card = model_from_onnx(path, _graphs())
    assert isinstance(rebuilt, GraphCNN) and card.name == "gcn-test"
    original = model.state_dict()
    for name, value in rebuilt.state_dict().items():
        if "num_batches" in name or name.startswith("soft_norm."):
            continue
        assert torch.equal(value, original[name]), name


def test_shipped_ensemble_and_gated_tower_are_read_back_exactly(tmp_path: Path) -> None:
    graphs = _graphs(300)
    for name in ("gcn-v7", "gcn-v9"):
        shipped = MODELS_DIR / f"{name}.onnx"
        out = checkpoint_from_onnx(shipped, tmp_path / name / "checkpoint.pt", graphs)
        model, meta = load_model(out)
        assert meta["from_onnx"]["sha256"] == file_sha256(shipped)
        assert meta["train_config"]["split"]["test_fraction"] == 0.2
        assert (
            meta["vocab_hash"]
            == json.loads(shipped.with_suffix(".card.json").read_text())["vocab_hash"]
        )
        with torch.no_grad():
            got = model(collate(graphs)).numpy()
        assert np.abs(got - GcnSession(shipped).encode(graphs)).max() < 1e-4
        # and written again by today's exporter, the same vectors
        again = open_session(export_gcn(model, tmp_path / f"{name}-again.onnx"), device="cpu")
        (vectors,) = again.run(None, pack_graphs(graphs).feeds())
        assert np.abs(vectors - GcnSession(shipped).encode(graphs)).max() < 1e-5
    assert isinstance(load_model(tmp_path / "gcn-v7" / "checkpoint.pt")[0], GCNEnsemble)


def test_refuses_other_families_and_cards_that_do_not_describe_the_file(tmp_path: Path) -> None:
    with pytest.raises(ExportError, match="not a graph CNN"):
        model_from_onnx(MODELS_DIR / "bitmap-v2.onnx", _graphs(10))
    # a card that does not describe its file: gcn-v9's, without its gated pooling
    path = tmp_path / "gcn-v9.onnx"
    shutil.copy(MODELS_DIR / "gcn-v9.onnx", path)
    card = json.loads((MODELS_DIR / "gcn-v9.card.json").read_text())
    card["training"]["config"]["model"]["pooling"] = "mean"
    path.with_suffix(".card.json").write_text(json.dumps(card))
    with pytest.raises(ParityError):
        model_from_onnx(path, _graphs(50))
    card["training"]["config"]["model"].update(pooling="gated", hidden=256)
    path.with_suffix(".card.json").write_text(json.dumps(card))
    with pytest.raises(ExportError, match=r"do not fit|does not match"):
        model_from_onnx(path, _graphs(10))
    path.with_suffix(".card.json").unlink()
    with pytest.raises(ExportError):
        model_from_onnx(path, _graphs(10))


def test_cli_export_of_a_shipped_file_writes_the_same_model_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mathsearch.cli.main import main
    from tests.export.conftest import PARITY_FILE

    shipped = MODELS_DIR / "gcn-v9.onnx"
    out = tmp_path / "gcn-v9.onnx"
    argv = ["export", str(shipped), "-o", str(out), "--parity-data", str(PARITY_FILE)]
    argv += ["--format", "hepth", "--parity-equations", "200"]
    assert main([*argv, "--json"]) == 0
    card = json.loads(capsys.readouterr().out)
    old = json.loads(shipped.with_suffix(".card.json").read_text())
    for key in ("name", "version", "vector_field", "metrics", "training", "description"):
        assert card[key] == old[key], key
    # the shipped file was itself written by today's exporter: the same bytes again
    assert card["sha256"] == file_sha256(out) == old["sha256"]
    assert card["parity"]["reexported_from"] == {"file": "gcn-v9.onnx", "sha256": old["sha256"]}
    assert card["max_abs_diff_to_original"] < 1e-4
    graphs = _graphs(100)
    assert np.abs(GcnSession(out).encode(graphs) - GcnSession(shipped).encode(graphs)).max() < 1e-4
    assert main(["export", str(out), "-o", str(out), *argv[4:]]) == 1
    assert "another file" in capsys.readouterr().err
    assert main(["export", str(MODELS_DIR / "bitmap-v2.onnx"), "-o", str(tmp_path / "b.onnx")]) == 1
    assert "not a graph CNN" in capsys.readouterr().err
