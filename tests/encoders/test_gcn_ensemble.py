"""mathsearch.encoders.gcn_ensemble and ensemble_checkpoint: the pure math, then an ensemble of
real runs on the bundled hep-th sample (load, export with parity, refusals)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from mathsearch.cli.train import add_train, run_train
from mathsearch.encoders.checkpoints import CheckpointError, load_model
from mathsearch.encoders.gcn import GCNConfig, GCNConfigError, GraphCNN
from mathsearch.encoders.gcn_ensemble import (
    GCNEnsemble,
    ensemble_concat,
    ensemble_embed,
    fit_projection,
    tower_weights,
)
from mathsearch.encoders.graph_data import collate
from mathsearch.encoders.training import train
from tests.encoders.test_training import _small, _split


def _unit(rows: int, width: int, seed: int) -> torch.Tensor:
    x = torch.randn(rows, width, generator=torch.Generator().manual_seed(seed))
    return x / x.norm(dim=1, keepdim=True)


def test_concat_inner_product_is_the_mean_of_the_towers_cosines() -> None:
    a, b, c = (_unit(5, 4, seed) for seed in (0, 1, 2))
    a2, b2, c2 = (_unit(5, 4, seed) for seed in (3, 4, 5))
    got = ensemble_concat([a, b, c]) @ ensemble_concat([a2, b2, c2]).T
    expected = (a @ a2.T + b @ b2.T + c @ c2.T) / 3
    assert torch.allclose(got, expected, atol=1e-6)
    assert torch.allclose(ensemble_concat([a, b, c]).norm(dim=1), torch.ones(5), atol=1e-6)
    with pytest.raises(GCNConfigError):
        ensemble_concat([])


def test_weighted_concat_inner_product_is_the_weighted_mean_of_the_cosines() -> None:
    a, b = _unit(5, 4, 0), _unit(5, 3, 1)
    a2, b2 = _unit(5, 4, 2), _unit(5, 3, 3)
    got = ensemble_concat([a, b], [3, 1]) @ ensemble_concat([a2, b2], [3, 1]).T
    assert torch.allclose(got, 0.75 * (a @ a2.T) + 0.25 * (b @ b2.T), atol=1e-6)
    assert torch.allclose(ensemble_concat([a, b], [3, 1]).norm(dim=1), torch.ones(5), atol=1e-6)
    # equal weights are the unweighted concatenation
    assert torch.allclose(ensemble_concat([a, b], [2, 2]), ensemble_concat([a, b]), atol=1e-7)
    assert tower_weights(None, 4) == [0.25] * 4 and tower_weights([1, 0, 3], 3) == [0.25, 0, 0.75]
    for bad in ([1.0], [1.0, -1.0], [0.0, 0.0], [1.0, float("nan")]):
        with pytest.raises(GCNConfigError):
            tower_weights(bad, 2)


def test_fit_projection_finds_the_principal_directions_deterministically() -> None:
    gen = torch.Generator().manual_seed(0)
    # second moment 9 along e_2, 4 along e_0, 1e-4 elsewhere (mean zero)
    z = torch.randn(2000, 5, generator=gen) * torch.tensor([2.0, 0.01, 3.0, 0.01, 0.01])
    weight, bias = fit_projection(z, 2)
    assert weight.shape == (2, 5) and torch.equal(bias, torch.zeros(2))
    expected = torch.tensor([[0, 0, 1.0, 0, 0], [1.0, 0, 0, 0, 0]])
    assert torch.allclose(weight.abs(), expected, atol=0.05)
    assert (weight.gather(1, weight.abs().argmax(1, keepdim=True)) > 0).all()  # sign rule
    # about the origin, not the mean: a large offset along e_1 becomes the first direction
    shifted, _ = fit_projection(z + torch.tensor([0.0, 5.0, 0.0, 0.0, 0.0]), 1)
    assert torch.allclose(shifted.abs(), torch.tensor([[0, 1.0, 0, 0, 0]]), atol=0.05)
    full, _ = fit_projection(z, 5)
    assert torch.allclose(full @ full.T, torch.eye(5), atol=1e-5)  # orthonormal rows
    again, _ = fit_projection(z, 2)
    assert torch.equal(again, weight)
    with pytest.raises(GCNConfigError):
        fit_projection(z, 6)
    with pytest.raises(GCNConfigError):
        fit_projection(z[:1], 2)


def test_ensemble_embed_is_unit_length_and_ranks_like_the_mean_cosine_at_full_width() -> None:
    parts = [_unit(30, 4, seed) for seed in range(3)]
    z = ensemble_concat(parts)
    weight, _ = fit_projection(z, 12)
    # at full width the projection is a rotation: every inner product is kept
    e = ensemble_embed(parts, weight, torch.zeros(12))
    assert torch.allclose(e.norm(dim=1), torch.ones(30), atol=1e-6)
    assert torch.allclose(e @ e.T, z @ z.T, atol=1e-5)


def _l2(hidden: int = 8) -> GraphCNN:
    return GraphCNN(GCNConfig(hidden=hidden, out_dim=4, layers=1, batch_norm_before=(0,),
                              normalisation="l2"))  # fmt: skip


def test_ensemble_refuses_one_tower_soft_towers_and_too_wide_output() -> None:
    with pytest.raises(GCNConfigError, match="two or more"):
        GCNEnsemble([_l2()], 4)
    soft = GraphCNN(GCNConfig(hidden=8, out_dim=4, layers=1, batch_norm_before=(0,)))
    with pytest.raises(GCNConfigError, match="not L2"):
        GCNEnsemble([_l2(), soft], 4)
    with pytest.raises(GCNConfigError, match="out_dim"):
        GCNEnsemble([_l2(), _l2()], 9)
    model = GCNEnsemble([_l2(), _l2(16)], 8)  # towers may differ in width
    assert model.config.out_dim == 8 and model.config.hidden == 8


def _runs(tmp_path: Path) -> list[Path]:
    train_corpus, test_corpus = _split()
    split = {"test_fraction": 0.25, "seed": 0, "limit": None}
    checkpoints = []
    for seed in (0, 1):
        config = _small(
            checkpoint_dir=str(tmp_path / f"t{seed}"),
            seed=seed,
            steps_per_epoch=3,
            eval_triplets=200,
            loss="infonce",
            use_masking=False,
            model=GCNConfig(hidden=16, out_dim=8, normalisation="l2"),
            split=split,
        )
        checkpoints.append(train(config, train_corpus, test_corpus).checkpoint)
    return checkpoints


def test_ensemble_of_two_runs_loads_embeds_exports_and_refuses_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from mathsearch.export.export_model import export_checkpoint
    from mathsearch.indexer.hepth import bundled_sample_lines

    sample = tmp_path / "sample.txt"
    sample.write_text("".join(bundled_sample_lines()), encoding="utf-8")
    a, b = _runs(tmp_path)
    (tmp_path / "t0" / "train.json").write_text(json.dumps({"train_seconds": 2.0}))
    (tmp_path / "t1" / "train.json").write_text(json.dumps({"train_seconds": 3.0}))
    parser = argparse.ArgumentParser(prog="mathsearch")
    add_train(parser.add_subparsers(dest="command", required=True))
    argv = ["train", "ensemble", str(a), str(b), "--out", str(tmp_path / "ens")]
    argv += ["--fit-data", str(sample), "--fit-equations", "100", "--out-dim", "8"]
    assert run_train(parser.parse_args(argv)) == 0
    assert "ensemble of 2 members" in capsys.readouterr().out

    ens_ckpt = tmp_path / "ens" / "checkpoint.pt"
    model, meta = load_model(ens_ckpt)
    assert isinstance(model, GCNEnsemble) and model.config.out_dim == 8
    assert meta["train_config"]["ensemble"] == [str(a.resolve()), str(b.resolve())]
    report = json.loads((tmp_path / "ens" / "train.json").read_text())
    assert report["train_seconds"] == 5.0 and report["fit_equations"] == 100

    # the ensemble's vector is the projected mean of the towers' own (loaded separately)
    graphs = _split()[1].graphs[:20]
    towers = [load_model(path)[0] for path in (a, b)]
    with torch.no_grad():
        batch = collate(graphs)
        expected = ensemble_embed([t(batch) for t in towers], model.mix.weight, model.mix.bias)
        got = model(batch)
    assert torch.allclose(got, expected, atol=1e-6)
    assert torch.allclose(got.norm(dim=1), torch.ones(20), atol=1e-5)
    # the projection was fitted: not the initial random layer, and centred on training papers
    assert model.mix.weight.abs().max() <= 1.0 + 1e-6

    # no training history: the card's hold-out score comes from the `eval ranking` report
    report = {"triplets": 200, "scores": {"model": {"ranking_score": 0.7, "bound_95": 0.3},
                                          "untrained": {"ranking_score": 0.5}}}  # fmt: skip
    card, parity = export_checkpoint(
        ens_ckpt, tmp_path / "ens.onnx", graphs, version=7, metrics={"eval": report}
    )
    assert parity.passed and card.embedding_dim == 8 and card.similarity == "cosine"
    assert card.metrics["holdout_ranking"] == 0.7 and card.metrics["holdout_bound_95"] == 0.3
    assert card.metrics["holdout_ranking_untrained"] == 0.5
    assert card.metrics["holdout_ranking_triplets"] == 200
    assert card.description.startswith("Ensemble of 2 graph CNNs")
    assert card.training["ensemble"]["towers"] == 2
    assert card.training["ensemble"]["members"] == ["t0", "t1"]
    # bench embed times the card's whole architecture, every tower
    from mathsearch.export.bench_embed import _default_model

    monkeypatch.setenv("MATHSEARCH_MODEL", str(tmp_path / "ens.onnx"))
    timed = _default_model()
    assert isinstance(timed, GCNEnsemble) and len(timed.towers) == 2
    from mathsearch.runtime.gcn_session import GcnSession

    onnx = GcnSession(tmp_path / "ens.onnx").encode(graphs)
    assert np.allclose(onnx, got.numpy(), atol=1e-4)

    # not trainable further, and not a tower of another ensemble
    train_corpus, _ = _split()
    with pytest.raises(CheckpointError, match="ensemble"):
        train(_small(init_from=str(ens_ckpt)), train_corpus)
    # an ensemble member joins with its towers, which share its weight: (a, b) and a again,
    # each member counting half, are the towers a, b, a at 1/4, 1/4, 1/2
    out = ["--out", str(tmp_path / "e2"), "--fit-data", str(sample), "--fit-equations", "100"]
    out += ["--out-dim", "8"]
    assert run_train(parser.parse_args(["train", "ensemble", str(ens_ckpt), str(a), *out])) == 0
    nested, meta = load_model(tmp_path / "e2" / "checkpoint.pt")
    assert len(nested.towers) == 3 and nested.weights == pytest.approx([0.25, 0.25, 0.5])
    assert meta["ensemble"]["weights"] == pytest.approx([0.25, 0.25, 0.5])
    with torch.no_grad():
        z = nested.concat(batch)
        cos_a, cos_b = (t(batch) @ t(batch).T for t in towers)
    assert torch.allclose(z @ z.T, 0.75 * cos_a + 0.25 * cos_b, atol=1e-5)
    weighted = [*out[:1], str(tmp_path / "e3"), *out[2:], "--weights", "1,3"]
    assert (
        run_train(parser.parse_args(["train", "ensemble", str(ens_ckpt), str(a), *weighted])) == 0
    )
    assert load_model(tmp_path / "e3" / "checkpoint.pt")[0].weights == pytest.approx(
        [0.125, 0.125, 0.75]
    )
    card, _ = export_checkpoint(tmp_path / "e3" / "checkpoint.pt", tmp_path / "e3.onnx", graphs)
    assert card.training["ensemble"]["towers"] == 3
    assert "weighted mean (0.125, 0.125, 0.75)" in card.description
    assert np.allclose(
        GcnSession(tmp_path / "e3.onnx").encode(graphs),
        load_model(tmp_path / "e3" / "checkpoint.pt")[0](collate(graphs)).detach().numpy(),
        atol=1e-4,
    )
    for bad in ("1", "1,x", "1,-1"):
        argv = ["train", "ensemble", str(a), str(b), *out[:1], str(tmp_path / "e4"), *out[2:]]
        assert run_train(parser.parse_args([*argv, "--weights", bad])) == 1
        assert "weights" in capsys.readouterr().err
    assert run_train(parser.parse_args(["train", "ensemble", str(a), *out])) == 1
    assert "two or more" in capsys.readouterr().err
    itself = ["--out", str(tmp_path / "t0"), "--fit-data", str(sample)]
    assert run_train(parser.parse_args(["train", "ensemble", str(a), str(b), *itself])) == 1
    assert "one of the inputs" in capsys.readouterr().err
